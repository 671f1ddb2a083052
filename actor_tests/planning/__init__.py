"""A scripted planner and executor for the planning tests, importable by name in worker processes.

Planner config: ``{"plans": [plan, ...]}`` — ``plan`` returns ``plans[0]``; ``replan`` returns the plan for the
number of failures so far (the last one once they run out); with ``"echo_failure": true`` a replan instead echoes
the failure record it was given.

Executor ``ACTIONS``: ``echo`` (returns ``args["value"]``), ``fail`` (raises an ``AdkError`` with
``args["reason"]``), ``sleep`` (sleeps ``args["seconds"]``, then touches ``args["touch"]`` if given), ``loaded``
(whether ``args["name"]`` is in this worker's ``sys.modules``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from adk_actors.errors import AdkError

ACTIONS = ("echo", "fail", "sleep", "loaded")


def plan(goal: Any, context: dict[str, Any], config: dict[str, Any], history: list[dict[str, Any]]) -> Any:
    return config["plans"][0]


def replan(
    goal: Any, context: dict[str, Any], config: dict[str, Any], history: list[dict[str, Any]], failure: dict[str, Any]
) -> Any:
    if config.get("echo_failure"):
        return {
            "version": 1,
            "steps": [{"id": "seen", "action": "echo", "args": {"value": {"failure": failure, "history": history}}}],
        }
    failures = sum(1 for entry in history if entry["status"] == "failed")
    plans = config["plans"]
    return plans[min(failures, len(plans) - 1)]


def execute(step: dict[str, Any], state: dict[str, Any], context: dict[str, Any], config: dict[str, Any]) -> Any:
    args = step["args"]
    if step["action"] == "echo":
        return args.get("value")
    if step["action"] == "fail":
        raise AdkError(reason=args.get("reason", "boom"))
    if step["action"] == "sleep":
        time.sleep(args["seconds"])
        if "touch" in args:
            Path(args["touch"]).touch()
        return "slept"
    return args["name"] in sys.modules
