"""The canonical plan schema and its validation (pure: no actors, no imports of application code).

A plan is a JSON object, at most :data:`MAX_PLAN_BYTES` as canonical JSON::

    {"version": 1,
     "steps": [{"id": "prepare-1", "action": "prepare", "args": {"goal": {...}}}]}

* ``version`` — the plan schema version; only :data:`PLAN_SCHEMA_VERSION` (1) is accepted.
* ``steps`` — 0 to :data:`MAX_PLAN_STEPS` steps, run in order.
* a step's ``id`` — unique within the plan, ``[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}``.
* a step's ``action`` — one of the executor's declared vocabulary (its module's ``ACTIONS`` tuple).
* a step's ``args`` — an optional JSON object (default ``{}``), handed to the executor as data.

No other key is accepted anywhere. In particular nothing in a plan can name a module, a function or code: the
planner and executor modules come only from the caller's trusted references, and an action is a word looked up
in the executor's vocabulary, never resolved as a name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.errors import ValidationError

__all__ = [
    "ACTION_RE",
    "MAX_ACTIONS",
    "MAX_PLAN_BYTES",
    "MAX_PLAN_STEPS",
    "PLAN_SCHEMA_VERSION",
    "STEP_ID_RE",
    "check_actions",
    "validate_plan",
]

PLAN_SCHEMA_VERSION = 1
MAX_PLAN_BYTES = 64 * 1024
"""Largest accepted plan, as canonical JSON in UTF-8 bytes."""
MAX_PLAN_STEPS = 256
MAX_ACTIONS = 256
"""Largest executor vocabulary."""
STEP_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
ACTION_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

_PLAN_KEYS = frozenset({"version", "steps"})
_STEP_KEYS = frozenset({"id", "action", "args"})


def _invalid(rule: str, **details: Any) -> ValidationError:
    return ValidationError(
        "the plan does not match the canonical schema", reason="invalid_plan", details={"rule": rule, **details}
    )


def check_actions(actions: Any) -> frozenset[str]:
    """Validate an executor's declared vocabulary (its ``ACTIONS``: a tuple or list of action words).

    Raises:
        ValidationError: reason ``invalid_actions`` (details ``rule``).
    """
    if not isinstance(actions, list | tuple) or not 1 <= len(actions) <= MAX_ACTIONS:
        raise ValidationError(
            "ACTIONS is a non-empty tuple of action words",
            reason="invalid_actions",
            details={"rule": "shape", "max": MAX_ACTIONS},
        )
    for action in actions:
        if not isinstance(action, str) or not ACTION_RE.fullmatch(action):
            raise ValidationError(
                "an action is a word [A-Za-z_][A-Za-z0-9_]{0,63}", reason="invalid_actions", details={"rule": "action"}
            )
    return frozenset(actions)


def validate_plan(raw: Any, actions: Iterable[str], *, max_bytes: int = MAX_PLAN_BYTES) -> dict[str, Any]:
    """Check ``raw`` against the canonical schema and the executor's vocabulary; return a private copy with
    every step's ``args`` filled in.

    Raises:
        ValidationError: ``plan_too_large`` (canonical size over ``max_bytes``), ``unknown_action`` (details
            ``step`` index), ``invalid_plan`` (details ``rule``: ``not_json``, ``not_object``, ``unknown_key``,
            ``version``, ``steps``, ``too_many_steps``, ``step``, ``step_key``, ``step_id``, ``duplicate_step_id``,
            ``action``, ``args``; and ``step`` index where it applies). Details never echo plan values.
    """
    try:
        plan, _size = copy_json(raw, field="plan", max_bytes=max_bytes, limit_name="max_plan_bytes")
    except ValidationError as exc:
        if exc.reason == "limit_exceeded" and exc.details.get("limit") == "max_plan_bytes":
            raise ValidationError(
                "the plan is too large",
                reason="plan_too_large",
                details={"max": max_bytes, "size": exc.details.get("size")},
            ) from None
        raise _invalid("not_json") from None
    if not isinstance(plan, dict):
        raise _invalid("not_object")
    if set(plan) - _PLAN_KEYS:
        raise _invalid("unknown_key")
    version = plan.get("version")
    if isinstance(version, bool) or version != PLAN_SCHEMA_VERSION:
        raise _invalid("version", expected=PLAN_SCHEMA_VERSION)
    steps = plan.get("steps")
    if not isinstance(steps, list):
        raise _invalid("steps")
    if len(steps) > MAX_PLAN_STEPS:
        raise _invalid("too_many_steps", max=MAX_PLAN_STEPS)
    vocabulary = frozenset(actions)
    seen: set[str] = set()
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            raise _invalid("step", step=index)
        if set(step) - _STEP_KEYS:
            raise _invalid("step_key", step=index)
        step_id, action = step.get("id"), step.get("action")
        if not isinstance(step_id, str) or not STEP_ID_RE.fullmatch(step_id):
            raise _invalid("step_id", step=index)
        if step_id in seen:
            raise _invalid("duplicate_step_id", step=index)
        seen.add(step_id)
        if not isinstance(action, str):
            raise _invalid("action", step=index)
        if action not in vocabulary:
            raise ValidationError(
                "the plan selects an action the executor does not declare",
                reason="unknown_action",
                details={"step": index},
            )
        args = step.setdefault("args", {})
        if not isinstance(args, dict):
            raise _invalid("args", step=index)
    return plan
