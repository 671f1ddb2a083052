"""Explicit planning and replanning with trusted adapters (the reference's ``adk_planner`` /
``adk_plan_executor``).

::

    from adk_actors.planning import run_planning, start_planning, cancel_planning, await_planning

    planner = {"module": "adk_actors.planning.examples", "target": None, "config": {}}
    executor = {"module": "adk_actors.planning.examples", "target": None, "config": {}}
    outcome = run_planning(planner, executor, {"task": "prepare release"},
                           {"invocation_id": "planning-readme"}, max_steps=4, max_replans=1, timeout_ms=5000)
    # {"status": "completed", "steps_executed": 1, "replans": 0, "plan_version": 1,
    #  "result": {"goal": {"task": "prepare release"}, "invocation_id": "planning-readme"}}

    ref = start_planning(planner, executor, goal, context, timeout_ms=5000)   # a stable run, not a thread here
    cancel_planning(ref, "user_cancelled")                                     # kills the active callback
    await_planning(ref, 10)                                                    # {"status": "cancelled", ...}

The planner produces versioned JSON plans (``adk_actors.planning.plan``); the executor maps each step's
``action``, a word from its declared ``ACTIONS``, to application code. Plans are data: nothing in one can select
a module or evaluate code. Every planner and executor callback runs in the actor system's worker-process pool under
the run's one absolute deadline, bounded by ``max_steps``, ``max_replans``, the plan byte limit and the result
limits; results are secret-pruned. A run is a stable run (``adk_actors.runs``) that outlives its caller: any client
awaits or cancels it by its ref or run id. See ``docs/PLANNING.md``.
"""

from adk_actors.planning.api import (
    DEFAULT_MAX_REPLANS,
    DEFAULT_MAX_STEPS,
    DEFAULT_RETENTION_MS,
    DEFAULT_TIMEOUT_MS,
    PlanningRef,
    await_planning,
    cancel_planning,
    run_planning,
    start_planning,
)
from adk_actors.planning.plan import MAX_PLAN_BYTES, MAX_PLAN_STEPS, PLAN_SCHEMA_VERSION, validate_plan
from adk_actors.planning.spec import AdapterRef

__all__ = [
    "DEFAULT_MAX_REPLANS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_RETENTION_MS",
    "DEFAULT_TIMEOUT_MS",
    "MAX_PLAN_BYTES",
    "MAX_PLAN_STEPS",
    "PLAN_SCHEMA_VERSION",
    "AdapterRef",
    "PlanningRef",
    "await_planning",
    "cancel_planning",
    "run_planning",
    "start_planning",
    "validate_plan",
]
