"""Trigger options and deliveries: strict validation and the pure decisions of the trigger actor.

Everything here is a pure function of its arguments (no actors, no clocks): the options a trigger is registered
with (:func:`trigger_options`), a checked delivery (:func:`check_delivery`), the session an event runs in
(:func:`session_for`), the backoff before a retry (:func:`backoff_ms`) and whether a failed attempt is retried
(:func:`retryable`). Units follow the reference: milliseconds in options, bytes for sizes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ConfigError, TriggerError

__all__ = [
    "MAX_IDEMPOTENCY_KEY",
    "MAX_METADATA_BYTES",
    "MAX_TRIGGER_NAME",
    "Delivery",
    "RetryPolicy",
    "SessionPolicy",
    "TriggerOptions",
    "backoff_ms",
    "check_delivery",
    "check_trigger_name",
    "event_digest",
    "retryable",
    "session_for",
    "trigger_options",
]

MAX_IDEMPOTENCY_KEY = 256
"""Longest idempotency key, in characters."""
MAX_METADATA_BYTES = 16 * 1024
"""Largest ``metadata`` object of a delivery (canonical JSON, UTF-8 bytes)."""
MAX_TRIGGER_NAME = 128
"""Longest trigger name, in characters."""
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")
_DELIVERY_KEYS = frozenset({"payload", "idempotency_key", "metadata", "timeout_ms", "session"})
_NOT_RETRIED_TYPES = frozenset(
    {"ValidationError", "ContentError", "SchemaError", "ConfigError", "PolicyDenied", "AuthError", "BudgetExceeded"}
)
_NOT_RETRIED_REASONS = frozenset({"invalid_input", "policy_denied", "paused", "invalid_run_options"})
_MAX_MS = 365 * 24 * 3600 * 1000
_MAX_EVENT_BYTES = 64 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPolicy:
    """Which session an event's invocation runs in."""

    mode: str = "per_event"
    """``per_event`` (a session per idempotency key), ``explicit`` (the delivery names it) or ``shared``."""
    user_id: str = "background-worker"
    """The user of ``per_event`` and ``shared`` sessions."""
    prefix: str = "trigger-"
    """``per_event``: the session id is this prefix plus a digest of the idempotency key."""
    session_id: str = ""
    """``shared``: the one session every event runs in."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How failed attempts are retried, inside the event's one deadline."""

    max_attempts: int = 3
    initial_delay_ms: int = 250
    max_delay_ms: int = 5000
    backoff_factor: float = 2.0
    attempt_timeout_ms: int = 30000
    jitter: str = "full"
    """``full``: a uniform delay in ``[0, bound]``; ``none``: the bound itself."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerOptions:
    """A trigger's validated options (see ``docs/TRIGGERS.md`` "Options")."""

    max_concurrency: int = 8
    max_queue: int = 256
    event_timeout_ms: int = 120000
    retention_ms: int = 300000
    max_retained: int = 1000
    max_event_bytes: int = 1024 * 1024
    session_policy: SessionPolicy = field(default_factory=SessionPolicy)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    durable: Any = None
    """``None`` (memory mode) or the store: a SQLAlchemy URL string or a ``TriggerStore``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """One checked delivery."""

    payload: Any
    """The Runner input: text, or a content dict."""
    idempotency_key: str
    metadata: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int | None = None
    session: tuple[str, str] | None = None
    """``(user_id, session_id)`` for the ``explicit`` session policy."""
    size: int = 0
    """The payload's size in UTF-8 bytes (checked against the trigger's ``max_event_bytes``)."""


def _bad(key: str, message: str, reason: str = "invalid_value") -> ConfigError:
    return ConfigError(message, reason=reason, details={"key": key})


def _int(value: Any, key: str, minimum: int, maximum: int = _MAX_MS) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _bad(key, f"{key} must be an integer in [{minimum}, {maximum}]")
    return value


def _name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 200 or any(ch < " " or ch == "\x7f" for ch in value):
        raise _bad(key, f"{key} must be a non-empty name without control characters")
    return value


def _mapping(value: Any, key: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(key, f"{key} must be a mapping")
    items = dict(value)
    for item in items:
        if item not in allowed:
            raise _bad(f"{key}.{item}" if isinstance(item, str) else key, f"unknown {key} option", "unknown_key")
    return items


def _session_policy(value: Any) -> SessionPolicy:
    if isinstance(value, SessionPolicy):
        relevant = {"per_event": ("user_id", "prefix"), "shared": ("user_id", "session_id")}.get(value.mode, ())
        value = {"mode": value.mode, **{k: getattr(value, k) for k in relevant}}
    items = _mapping(value, "session_policy", frozenset({"mode", "user_id", "prefix", "session_id"}))
    mode = items.get("mode", "per_event")
    if mode not in ("per_event", "explicit", "shared"):
        raise _bad("session_policy.mode", "session_policy.mode must be per_event, explicit or shared")
    policy = SessionPolicy(mode=mode)
    if mode == "explicit":
        if set(items) - {"mode"}:
            raise _bad("session_policy", "the explicit session policy takes no other option", "unknown_key")
        return policy
    user_id = _name(items.get("user_id", policy.user_id), "session_policy.user_id")
    if mode == "per_event":
        if "session_id" in items:
            raise _bad("session_policy.session_id", "session_id goes with the shared policy", "unknown_key")
        prefix = items.get("prefix", policy.prefix)
        if not isinstance(prefix, str) or len(prefix) > 128 or any(ch < " " or ch == "\x7f" for ch in prefix):
            raise _bad("session_policy.prefix", "session_policy.prefix must be a string of at most 128 characters")
        return SessionPolicy(mode=mode, user_id=user_id, prefix=prefix)
    if "prefix" in items:
        raise _bad("session_policy.prefix", "prefix goes with the per_event policy", "unknown_key")
    if "session_id" not in items:
        raise _bad("session_policy.session_id", "the shared session policy needs a session_id")
    return SessionPolicy(mode=mode, user_id=user_id, session_id=_name(items["session_id"], "session_policy.session_id"))


def _retry(value: Any) -> RetryPolicy:
    if isinstance(value, RetryPolicy):
        value = dataclasses.asdict(value)
    names = frozenset(f.name for f in dataclasses.fields(RetryPolicy))
    items = _mapping(value, "retry", names)
    base = RetryPolicy()
    factor = items.get("backoff_factor", base.backoff_factor)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1.0 <= float(factor) <= 100.0:
        raise _bad("retry.backoff_factor", "retry.backoff_factor must be a number in [1, 100]")
    jitter = items.get("jitter", base.jitter)
    if jitter not in ("full", "none"):
        raise _bad("retry.jitter", "retry.jitter must be full or none")
    policy = RetryPolicy(
        max_attempts=_int(items.get("max_attempts", base.max_attempts), "retry.max_attempts", 1, 100),
        initial_delay_ms=_int(items.get("initial_delay_ms", base.initial_delay_ms), "retry.initial_delay_ms", 0),
        max_delay_ms=_int(items.get("max_delay_ms", base.max_delay_ms), "retry.max_delay_ms", 0),
        backoff_factor=float(factor),
        attempt_timeout_ms=_int(
            items.get("attempt_timeout_ms", base.attempt_timeout_ms), "retry.attempt_timeout_ms", 1
        ),
        jitter=jitter,
    )
    if policy.max_delay_ms < policy.initial_delay_ms:
        raise _bad("retry.max_delay_ms", "retry.max_delay_ms must be at least retry.initial_delay_ms")
    return policy


def trigger_options(value: Mapping[str, Any] | TriggerOptions | None) -> TriggerOptions:
    """The validated options of a trigger (``None``: the defaults).

    Raises:
        ConfigError: ``unknown_key`` or ``invalid_value``, ``details["key"]`` naming the option.
    """
    if value is None:
        return TriggerOptions()
    if isinstance(value, TriggerOptions):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(TriggerOptions)}
    items = _mapping(value, "options", frozenset(f.name for f in dataclasses.fields(TriggerOptions)))
    base = TriggerOptions()
    durable = items.get("durable")
    if durable is not None:
        if isinstance(durable, Mapping):
            durable_items = _mapping(durable, "durable", frozenset({"store"}))
            durable = durable_items.get("store")
        if isinstance(durable, str):
            if not durable or len(durable) > 4096:
                raise _bad("durable.store", "durable.store must be a SQLAlchemy URL")
        elif not callable(getattr(durable, "accept", None)):
            raise _bad("durable.store", "durable.store must be a SQLAlchemy URL or a TriggerStore")
    return TriggerOptions(
        max_concurrency=_int(items.get("max_concurrency", base.max_concurrency), "max_concurrency", 1, 10000),
        max_queue=_int(items.get("max_queue", base.max_queue), "max_queue", 1, 1_000_000),
        event_timeout_ms=_int(items.get("event_timeout_ms", base.event_timeout_ms), "event_timeout_ms", 1),
        retention_ms=_int(items.get("retention_ms", base.retention_ms), "retention_ms", 0),
        max_retained=_int(items.get("max_retained", base.max_retained), "max_retained", 0, 1_000_000),
        max_event_bytes=_int(
            items.get("max_event_bytes", base.max_event_bytes), "max_event_bytes", 1, _MAX_EVENT_BYTES
        ),
        session_policy=_session_policy(items.get("session_policy", {})),
        retry=_retry(items.get("retry", {})),
        durable=durable,
    )


def check_trigger_name(name: Any) -> str:
    """A trigger name: 1-128 characters of letters, digits and ``-_.:``.

    Raises:
        TriggerError: ``invalid_trigger_name``.
    """
    if not isinstance(name, str) or not 0 < len(name) <= MAX_TRIGGER_NAME or not set(name) <= _NAME_CHARS:
        raise TriggerError(
            "a trigger name is 1-128 letters, digits or -_.:",
            reason="invalid_trigger_name",
            details={"type": type(name).__name__},
        )
    return name


def _invalid(key: str, rule: str) -> TriggerError:
    return TriggerError("the delivery is invalid", reason="invalid_delivery", details={"key": key, "rule": rule})


def _json_size(value: Any, key: str, limit: int) -> tuple[Any, int]:
    try:
        return copy_json(value, field=key, max_bytes=limit)
    except AdkError as err:
        if err.reason == "limit_exceeded":
            raise TriggerError(
                "the delivery is too large", reason="event_too_large", details={"key": key, "max_bytes": limit}
            ) from None
        raise _invalid(key, err.reason) from None
    except Exception:  # a hostile value whose methods raise is still just a bad delivery
        raise _invalid(key, "invalid_json") from None


def _payload(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        if len(value) > limit:
            raise TriggerError(
                "the delivery is too large", reason="event_too_large", details={"key": "payload", "max_bytes": limit}
            )
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise _invalid("payload", "invalid_utf8") from None
        if size > limit:
            raise TriggerError(
                "the delivery is too large", reason="event_too_large", details={"key": "payload", "max_bytes": limit}
            )
        if "\x00" in value:
            raise _invalid("payload", "nul_character")
        return value
    copied, _size = _json_size(value, "payload", limit)
    if isinstance(copied, dict) and isinstance(copied.get("parts"), list):
        return copied  # content: the agent validates its parts
    text = json.dumps(copied, ensure_ascii=False, sort_keys=True, allow_nan=False)
    return _payload(text, limit)


def _bounded_text(value: Any, key: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise _invalid(key, "not_a_non_empty_string")
    if len(value) > limit:
        raise _invalid(key, "too_long")
    if any(ch < " " or ch == "\x7f" or "\ud800" <= ch <= "\udfff" for ch in value):
        raise _invalid(key, "control_character")
    return value


def check_delivery(delivery: Any, options: TriggerOptions | None = None) -> Delivery:
    """A checked copy of ``delivery`` (see ``docs/TRIGGERS.md``); with ``options``, also checked against that
    trigger's size bound and session policy (:func:`admit_delivery`), else against the largest allowed size.

    Raises:
        TriggerError: ``invalid_delivery`` (``details["key"]``, ``details["rule"]``) or ``event_too_large``; never
            another exception, whatever the value.
    """
    if not isinstance(delivery, Mapping):
        raise _invalid("delivery", "not_a_mapping")
    try:
        items = dict(delivery)
    except Exception:
        raise _invalid("delivery", "not_a_mapping") from None
    for key in items:
        if key not in _DELIVERY_KEYS:
            raise _invalid(key if isinstance(key, str) and len(key) <= 64 else "delivery", "unknown_key")
    if "payload" not in items:
        raise _invalid("payload", "missing")
    if "idempotency_key" not in items:
        raise _invalid("idempotency_key", "missing")
    key = _bounded_text(items["idempotency_key"], "idempotency_key", MAX_IDEMPOTENCY_KEY)
    payload = _payload(items["payload"], options.max_event_bytes if options is not None else _MAX_EVENT_BYTES)
    metadata: dict[str, Any] = {}
    if items.get("metadata") is not None:
        if not isinstance(items["metadata"], Mapping):
            raise _invalid("metadata", "not_a_mapping")
        copied, _size = _json_size(items["metadata"], "metadata", MAX_METADATA_BYTES)
        if not isinstance(copied, dict):
            raise _invalid("metadata", "not_a_mapping")
        metadata = copied
    timeout = items.get("timeout_ms")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
        raise _invalid("timeout_ms", "not_a_positive_integer")
    session: tuple[str, str] | None = None
    if items.get("session") is not None:
        value = items["session"]
        if not isinstance(value, Mapping):
            raise _invalid("session", "not_a_mapping")
        try:
            parts = dict(value)
        except Exception:
            raise _invalid("session", "not_a_mapping") from None
        if set(parts) != {"user_id", "session_id"}:
            raise _invalid("session", "needs_user_id_and_session_id")
        session = (
            _bounded_text(parts["user_id"], "session.user_id", 255),
            _bounded_text(parts["session_id"], "session.session_id", 255),
        )
    checked = Delivery(
        payload=payload,
        idempotency_key=key,
        metadata=metadata,
        timeout_ms=min(timeout, _MAX_MS) if timeout is not None else None,
        session=session,
        size=len(payload.encode("utf-8")) if isinstance(payload, str) else copy_json(payload)[1],
    )
    return checked if options is None else admit_delivery(checked, options)


def admit_delivery(delivery: Delivery, options: TriggerOptions) -> Delivery:
    """``delivery`` if it fits the trigger: its size bound and its session policy.

    Raises:
        TriggerError: ``event_too_large``; ``invalid_delivery`` (``session`` missing or not allowed).
    """
    if delivery.size > options.max_event_bytes:
        raise TriggerError(
            "the delivery is too large",
            reason="event_too_large",
            details={"key": "payload", "max_bytes": options.max_event_bytes},
        )
    explicit = options.session_policy.mode == "explicit"
    if delivery.session is not None and not explicit:
        raise _invalid("session", "not_explicit_policy")
    if delivery.session is None and explicit:
        raise _invalid("session", "missing")
    return delivery


def event_digest(*parts: str, size: int = 16) -> str:
    """A stable hex digest of ``parts`` (blake2b, never Python's seeded ``hash``)."""
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def session_for(policy: SessionPolicy, delivery: Delivery) -> tuple[str, str]:
    """``(user_id, session_id)`` of the event's invocation; retries reuse it."""
    if policy.mode == "explicit":
        assert delivery.session is not None
        return delivery.session
    if policy.mode == "shared":
        return policy.user_id, policy.session_id
    return policy.user_id, policy.prefix + event_digest(delivery.idempotency_key)


def event_timeout_ms(options: TriggerOptions, delivery: Delivery) -> int:
    """The event's budget: the registered ``event_timeout_ms``, shortened (never extended) by the delivery's."""
    if delivery.timeout_ms is None:
        return options.event_timeout_ms
    return min(options.event_timeout_ms, delivery.timeout_ms)


def backoff_ms(retry: RetryPolicy, failures: int, rng: random.Random | None = None) -> float:
    """The delay before the next attempt after ``failures`` failed ones (``>= 1``): exponential, capped, and with
    full jitter ``uniform(0, min(max_delay, initial * factor ** (failures - 1)))``."""
    exponent = max(0, failures - 1)
    try:
        bound = retry.initial_delay_ms * math.pow(retry.backoff_factor, exponent)
    except OverflowError:
        bound = math.inf
    bound = min(float(retry.max_delay_ms), bound)
    if retry.jitter == "none":
        return bound
    return (rng or random).uniform(0.0, bound)


def retryable(reason: str, details: Mapping[str, Any]) -> bool:
    """Whether a failed attempt (``reason``, ``details["type"]``) is worth retrying: not a cancellation, a policy
    denial or invalid input, which a retry would only repeat."""
    if reason in _NOT_RETRIED_REASONS or reason.startswith("invalid_"):
        return False
    return details.get("type") not in _NOT_RETRIED_TYPES


__all__ += ["admit_delivery", "event_timeout_ms"]
