"""The README's planning example: a deterministic planner and a one-action executor, importable by name.

Both roles live in this one module (a trusted reference may name the same module as planner and executor)::

    from adk_actors.planning import run_planning

    ref = {"module": "adk_actors.planning.examples", "target": None, "config": {}}
    outcome = run_planning(ref, ref, {"task": "prepare release"}, {"invocation_id": "planning-readme"},
                           max_steps=4, max_replans=1, timeout_ms=5000)
    outcome["status"], outcome["steps_executed"]      # -> ("completed", 1)
    outcome["result"]     # -> {"goal": {"task": "prepare release"}, "invocation_id": "planning-readme"}

An executor ``config`` of ``{"delay_ms": N}`` makes ``prepare`` take N milliseconds (at most a minute), to try
deadlines and cancellation.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ACTIONS", "execute", "plan"]

ACTIONS = ("prepare",)
"""The executor's whole vocabulary."""


def plan(goal: Any, context: dict[str, Any], config: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any]:
    """One step that prepares the goal (the same plan for the same goal, always)."""
    return {"version": 1, "steps": [{"id": "prepare-1", "action": "prepare", "args": {"goal": goal}}]}


def execute(
    step: dict[str, Any], state: dict[str, Any], context: dict[str, Any], config: dict[str, Any]
) -> dict[str, Any]:
    """``prepare``: echo the goal with the invocation id from the context."""
    delay_ms = config.get("delay_ms", 0)
    if isinstance(delay_ms, int | float) and delay_ms > 0:
        time.sleep(min(float(delay_ms), 60_000.0) / 1000.0)
    return {"goal": step["args"]["goal"], "invocation_id": context.get("invocation_id")}
