"""Retry (``adk_retry`` in the reference): isolated, monitored attempts with bounded backoff and one deadline.

Each attempt runs in a worker process of the node's pool (a fresh, monitored execution: an attempt that hangs is
killed at its ``attempt_timeout`` and the worker replaced; one that crashes its process is a failed attempt).
An attempt fails when the function raises. Between attempts the caller waits
``min(max_delay, initial_delay * backoff_factor ** (n - 1))`` milliseconds — or a uniformly random part of it
with ``jitter="full"`` — and the whole operation never runs past its total ``timeout`` nor past the absolute
``deadline`` given to :func:`execute` (whichever comes first). Closures cross to the
worker *by value*: count attempts with :class:`adk_actors.testing.CrossProcessCounter`, not a captured variable.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from adk_actors.errors import AdkError, ConfigError, RetryExhausted
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.system import ActorSystemHandle, current_system

__all__ = ["RetryPolicy", "backoff_delays", "check_deadline", "execute"]

_KEYS = frozenset(
    {"max_attempts", "initial_delay", "max_delay", "backoff_factor", "jitter", "attempt_timeout", "timeout"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Retry settings; times are milliseconds (the reference's units)."""

    max_attempts: int = 3
    initial_delay: int = 100
    max_delay: int = 10_000
    backoff_factor: float = 2.0
    jitter: Literal["none", "full"] = "none"
    attempt_timeout: int = 30_000
    timeout: int | None = None
    """Total budget for all attempts and waits; None: no total bound beyond the attempts'."""

    def __post_init__(self) -> None:
        def bad(key: str, why: str) -> ConfigError:
            return ConfigError(f"retry {key} {why}", reason="invalid_value", details={"key": key})

        for key in ("max_attempts", "initial_delay", "max_delay", "attempt_timeout"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key != "initial_delay" else 0):
                raise bad(key, "must be a positive integer")
        if self.max_attempts > 1000:
            raise bad("max_attempts", "must be at most 1000")
        if (
            isinstance(self.backoff_factor, bool)
            or not isinstance(self.backoff_factor, int | float)
            or not 1.0 <= float(self.backoff_factor) <= 100.0
        ):
            raise bad("backoff_factor", "must be a number from 1 to 100")
        if self.jitter not in ("none", "full"):
            raise bad("jitter", "must be 'none' or 'full'")
        if self.timeout is not None and (
            isinstance(self.timeout, bool) or not isinstance(self.timeout, int) or self.timeout < 1
        ):
            raise bad("timeout", "must be a positive integer or None")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RetryPolicy:
        """Validate a policy map (strict keys), e.g. ``{"max_attempts": 5, "initial_delay": 1}``.

        Raises:
            ConfigError: ``unknown_key`` or ``invalid_value``.
        """
        if not isinstance(config, Mapping):
            raise ConfigError("a retry policy must be a mapping", reason="invalid_value", details={"key": "policy"})
        unknown = set(config) - _KEYS
        if unknown:
            raise ConfigError(
                "unknown retry policy key", reason="unknown_key", details={"key": sorted(map(str, unknown))[0]}
            )
        return cls(**dict(config))


def backoff_delays(policy: RetryPolicy, rng: random.Random | None = None) -> Iterator[float]:
    """The waits (seconds) before attempts 2, 3, ...: bounded exponential, optionally with full jitter."""
    rng = rng or random.Random()
    for n in range(1, policy.max_attempts):
        delay = min(float(policy.max_delay), policy.initial_delay * float(policy.backoff_factor) ** (n - 1))
        yield (rng.uniform(0.0, delay) if policy.jitter == "full" else delay) / 1000.0


def check_deadline(deadline: Any) -> float | None:
    """Validate an absolute deadline: ``None`` or finite ``time.monotonic()`` seconds.

    Raises:
        ConfigError: ``invalid_value`` (``details["key"] == "deadline"``).
    """
    if deadline is None:
        return None
    if isinstance(deadline, bool) or not isinstance(deadline, int | float) or not math.isfinite(deadline):
        raise ConfigError(
            "deadline is absolute time.monotonic() seconds", reason="invalid_value", details={"key": "deadline"}
        )
    return float(deadline)


def execute(
    fn: Callable[..., Any] | CallableRef | str,
    policy: RetryPolicy | Mapping[str, Any] | None = None,
    *args: Any,
    deadline: float | None = None,
    system: ActorSystemHandle | None = None,
    rng: random.Random | None = None,
) -> Any:
    """Run ``fn(*args)`` until an attempt succeeds; return its (JSON-safe) value.

    Args:
        fn: The function (importable name, module-level function, or a picklable callable).
        policy: A :class:`RetryPolicy` or its map (default: ``RetryPolicy()``).
        args: Positional arguments for every attempt.
        deadline: An absolute ``time.monotonic()`` deadline for the whole operation (attempts and waits); with
            the policy's ``timeout`` too, the earlier one applies. A deadline already past runs no attempt.
        system: The node whose worker pool runs the attempts (default: ``current_system()``).
        rng: The random source of full jitter.

    Raises:
        RetryExhausted: every attempt failed (``retry_exhausted``) or the total ``timeout`` / ``deadline`` passed
            (``retry_deadline``); ``details`` holds ``attempts`` and ``last_error``.
        ConfigError: an invalid policy or ``deadline``.
        WorkerError: ``unpicklable_callable`` (before any attempt).
    """
    if policy is None:
        policy = RetryPolicy()
    elif not isinstance(policy, RetryPolicy):
        policy = RetryPolicy.from_config(policy)
    absolute = check_deadline(deadline)
    handle = system if system is not None else current_system()
    from adk_actors.runtime.callables import callable_ref

    ref = callable_ref(fn)  # fails early on an unpicklable callable
    deadline = None if policy.timeout is None else time.monotonic() + policy.timeout / 1000.0
    if absolute is not None:
        deadline = absolute if deadline is None else min(deadline, absolute)
    delays = backoff_delays(policy, rng)
    last: AdkError | None = None
    reason = "retry_exhausted"
    attempt = 0
    while attempt < policy.max_attempts:
        budget = policy.attempt_timeout / 1000.0
        if deadline is not None:
            budget = min(budget, deadline - time.monotonic())
            if budget <= 0:
                reason = "retry_deadline"
                break
        attempt += 1  # counted once it runs: ``details["attempts"]`` says how many did
        try:
            return handle.run_job(ref, *args, timeout=budget)
        except AdkError as err:
            last = err
        if deadline is not None and time.monotonic() >= deadline:
            reason = "retry_deadline"  # the attempt was cut at the deadline, not merely the last one
            break
        if attempt == policy.max_attempts:
            break
        wait = next(delays)
        if deadline is not None and time.monotonic() + wait >= deadline:
            reason = "retry_deadline"
            break
        time.sleep(wait)  # the backoff itself, in the caller's own process
    raise RetryExhausted(
        "every attempt failed" if reason == "retry_exhausted" else "the retry deadline passed",
        reason=reason,
        details={
            "attempts": attempt,
            "callable": ref.label,
            "last_error": last.to_dict() if last is not None else None,
        },
    )
