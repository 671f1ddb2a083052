"""Trusted adapter references and the validated inputs of one planning run.

A planner or executor is named by a *trusted reference* from application configuration::

    {"module": "myapp.release_planner", "target": None, "config": {"depth": 2}}

``module`` is an importable dotted name; the planning runtime imports it only inside a worker process.
``target`` is reserved for a remote adapter and must be ``None``. ``config`` is a JSON object passed to every
callback of that adapter.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.errors import ConfigError, ValidationError

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_MAX_REPLANS",
    "MAX_MAX_STEPS",
    "MAX_TIMEOUT_MS",
    "MODULE_RE",
    "AdapterRef",
    "PlanningSpec",
    "adapter_ref",
    "planning_spec",
]

MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,15}")
MAX_INPUT_BYTES = 64 * 1024
"""Largest goal, context or adapter config, as canonical JSON."""
MAX_MAX_STEPS = 1024
MAX_MAX_REPLANS = 64
MAX_TIMEOUT_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterRef:
    """A validated trusted reference to a planner or executor module."""

    module: str
    """The importable module name."""
    config: dict[str, Any]
    """The adapter's JSON config (a private copy)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanningSpec:
    """Everything one planning run needs, validated."""

    planner: AdapterRef
    """The trusted planner."""
    executor: AdapterRef
    """The trusted executor."""
    goal: Any
    """The goal (JSON)."""
    context: dict[str, Any]
    """The context object every callback receives (JSON)."""
    max_steps: int
    """The most executed steps, over all plans of the run."""
    max_replans: int
    """The most replans after failed steps."""
    deadline: float
    """Absolute monotonic deadline of the whole run, in seconds."""


def _json(value: Any, key: str) -> Any:
    try:
        return copy_json(value, field=key, max_bytes=MAX_INPUT_BYTES, limit_name="max_input_bytes")[0]
    except ValidationError as exc:
        raise ConfigError(
            f"{key} is not bounded JSON", reason="invalid_value", details={"key": key, "rule": exc.reason}
        ) from None


def adapter_ref(value: Any, role: str) -> AdapterRef:
    """Validate a trusted reference ``{"module", "target", "config"}`` (``role`` names it in errors).

    Raises:
        ConfigError: ``unknown_key``, ``invalid_value`` (``details["key"]`` says which).
    """
    if isinstance(value, AdapterRef):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"the {role} is a mapping", reason="invalid_value", details={"key": role})
    unknown = sorted(str(k) for k in set(value) - {"module", "target", "config"})
    if unknown:
        raise ConfigError(f"unknown {role} key", reason="unknown_key", details={"key": f"{role}.{unknown[0]}"})
    module = value.get("module")
    if not isinstance(module, str) or not MODULE_RE.fullmatch(module):
        raise ConfigError(
            f"{role}.module is an importable module name", reason="invalid_value", details={"key": f"{role}.module"}
        )
    if value.get("target") is not None:
        raise ConfigError(
            f"{role}.target is reserved and must be None", reason="invalid_value", details={"key": f"{role}.target"}
        )
    config = _json(value.get("config") or {}, f"{role}.config")
    if not isinstance(config, dict):
        raise ConfigError(f"{role}.config is a JSON object", reason="invalid_value", details={"key": f"{role}.config"})
    return AdapterRef(module=module, config=config)


def _bounded_int(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{key} is an int in {low}..{high}", reason="invalid_value", details={"key": key})
    return value


def planning_spec(
    planner: Any,
    executor: Any,
    goal: Any,
    context: Any,
    *,
    max_steps: int,
    max_replans: int,
    timeout_ms: int,
    deadline: float | None = None,
    now: float | None = None,
) -> PlanningSpec:
    """Validate the inputs of a run; the deadline is ``now + timeout_ms`` or ``deadline``, whichever is earlier.

    Raises:
        ConfigError: ``invalid_value`` / ``unknown_key`` with ``details["key"]``.
    """
    now = time.monotonic() if now is None else now
    limit = now + _bounded_int(timeout_ms, "timeout_ms", 1, MAX_TIMEOUT_MS) / 1000.0
    if deadline is not None:
        if isinstance(deadline, bool) or not isinstance(deadline, int | float):
            raise ConfigError(
                "deadline is absolute monotonic seconds", reason="invalid_value", details={"key": "deadline"}
            )
        limit = min(limit, float(deadline))
    context_copy = _json(context if context is not None else {}, "context")
    if not isinstance(context_copy, dict):
        raise ConfigError("context is a JSON object", reason="invalid_value", details={"key": "context"})
    return PlanningSpec(
        planner=adapter_ref(planner, "planner"),
        executor=adapter_ref(executor, "executor"),
        goal=_json(goal, "goal"),
        context=context_copy,
        max_steps=_bounded_int(max_steps, "max_steps", 1, MAX_MAX_STEPS),
        max_replans=_bounded_int(max_replans, "max_replans", 0, MAX_MAX_REPLANS),
        deadline=limit,
    )
