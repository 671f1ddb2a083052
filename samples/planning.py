"""The reference's explicit-planning example in Python: a trusted planner and executor, run in the worker pool.

Run: ``.venv/bin/python samples/planning.py``
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

import adk_actors as adk
from adk_actors.planning import await_planning, cancel_planning, run_planning, start_planning
from adk_actors.testing import reserved_port

PLANNER: dict[str, Any] = {"module": "adk_actors.planning.examples", "target": None, "config": {}}
EXECUTOR: dict[str, Any] = {"module": "adk_actors.planning.examples", "target": None, "config": {}}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with adk.open_actor_system(settings):
        goal = {"task": "prepare release"}
        outcome = run_planning(PLANNER, EXECUTOR, goal, {"invocation_id": "planning-readme"},
                               max_steps=4, max_replans=1, timeout_ms=5000)
        print(f"status={outcome['status']} steps_executed={outcome['steps_executed']} "
              f"replans={outcome['replans']} plan_version={outcome['plan_version']}")
        print(f"result={outcome['result']}")

        # Cancellation: the run is a stable run in the actor system (any client may await or cancel it by ref).
        slow = {**EXECUTOR, "config": {"delay_ms": 30_000}}   # "prepare" now takes 30 s
        ref = start_planning(PLANNER, slow, goal, {"invocation_id": "planning-cancel"}, timeout_ms=60_000)
        time.sleep(0.5)
        cancel_planning(ref, "user_cancelled")   # stops the loop and kills the worker running "prepare"
        cancelled = await_planning(ref, 10)
        print(f"{cancelled['status']}: {cancelled.get('reason')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
