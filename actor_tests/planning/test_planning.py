"""Planning runs against the real actor system: stable runs whose callbacks run in the worker pool, one deadline,
bounded steps and replans, cancellation, runs that outlive their caller, and plans that are data only."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from actor_tests.samples_runner import run_sample
from adk_actors import runs
from adk_actors.errors import AskTimeout, ConfigError, ValidationError
from adk_actors.planning import (
    MAX_PLAN_BYTES,
    PlanningRef,
    await_planning,
    cancel_planning,
    run_planning,
    start_planning,
    validate_plan,
)
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = "actor_tests.planning"
EXAMPLES: dict[str, Any] = {"module": "adk_actors.planning.examples", "target": None, "config": {}}
EXECUTOR: dict[str, Any] = {"module": SCRIPTED, "target": None, "config": {}}


def planner(*plans: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A scripted planner returning ``plans`` in order (each given as its list of steps)."""
    return {
        "module": SCRIPTED,
        "target": None,
        "config": {"plans": [{"version": 1, "steps": steps} for steps in plans], **extra},
    }


def echo(step_id: str, value: Any) -> dict[str, Any]:
    return {"id": step_id, "action": "echo", "args": {"value": value}}


def fail(step_id: str, reason: str = "boom") -> dict[str, Any]:
    return {"id": step_id, "action": "fail", "args": {"reason": reason}}


def sleep(step_id: str, seconds: float, touch: Path | None = None) -> dict[str, Any]:
    return {"id": step_id, "action": "sleep", "args": {"seconds": seconds, **({"touch": str(touch)} if touch else {})}}


def run(system: ActorSystemHandle, plan_ref: dict[str, Any], **limits: Any) -> dict[str, Any]:
    options = {"max_steps": 8, "max_replans": 1, "timeout_ms": 10_000, **limits}
    return run_planning(plan_ref, EXECUTOR, {"task": "t"}, {"invocation_id": "inv-1"}, system=system, **options)


def pool_killed(system: ActorSystemHandle) -> int:
    return int(system.ask("workers", GetStatus())["killed"])


# ---- the README example ---------------------------------------------------------------------------------------------


def test_the_readme_example_completes_one_step_with_goal_and_invocation_id(system: ActorSystemHandle) -> None:
    goal = {"task": "prepare release"}
    outcome = run_planning(
        EXAMPLES,
        EXAMPLES,
        goal,
        {"invocation_id": "planning-readme"},
        max_steps=4,
        max_replans=1,
        timeout_ms=5000,
        system=system,
    )
    assert outcome == {
        "status": "completed",
        "steps_executed": 1,
        "replans": 0,
        "plan_version": 1,
        "result": {"goal": goal, "invocation_id": "planning-readme"},
    }


# ---- budgets ---------------------------------------------------------------------------------------------------------


def test_a_plan_longer_than_max_steps_fails_before_any_step_runs(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([echo("a", 1), echo("b", 2), echo("c", 3)]), max_steps=2)
    assert outcome == {
        "status": "failed",
        "reason": "max_steps",
        "detail": "plan_exceeds_budget",
        "steps_executed": 0,
        "replans": 0,
        "plan_version": 1,
    }


def test_max_steps_counts_the_steps_of_every_plan_of_the_run(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([echo("a", 1), fail("b")], [echo("c", 3), echo("d", 4)]), max_steps=3)
    assert outcome["status"] == "failed" and outcome["reason"] == "max_steps"
    assert (outcome["steps_executed"], outcome["replans"], outcome["plan_version"]) == (2, 1, 2)


def test_a_failed_step_is_replanned_and_the_new_plan_completes(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([echo("a", "first"), fail("b")], [echo("c", "second")]), max_replans=1)
    assert outcome == {"status": "completed", "steps_executed": 3, "replans": 1, "plan_version": 2, "result": "second"}


def test_replan_receives_the_failure_record_and_the_history(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([echo("a", 1), fail("b", "disk_full")], echo_failure=True))
    seen = outcome["result"]
    assert seen["failure"] == {"step": "b", "action": "fail", "reason": "disk_full", "plan_version": 1}
    assert [(h["step"], h["status"]) for h in seen["history"]] == [("a", "ok"), ("b", "failed")]
    assert seen["history"][0]["result"] == 1


def test_replanning_stops_at_max_replans_with_a_structural_failure(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([fail("x", "still_broken")]), max_replans=2)
    assert outcome == {
        "status": "failed",
        "reason": "step_failed",
        "step": "x",
        "detail": "still_broken",
        "steps_executed": 3,
        "replans": 2,
        "plan_version": 3,
    }


def test_the_deadline_expires_mid_step_and_the_step_is_killed(system: ActorSystemHandle, tmp_path: Path) -> None:
    touched = tmp_path / "finished"
    started = time.monotonic()
    outcome = run(system, planner([echo("a", 1), sleep("slow", 5, touched)]), timeout_ms=1500)
    assert outcome == {"status": "failed", "reason": "timeout", "steps_executed": 1, "replans": 0, "plan_version": 1}
    assert time.monotonic() - started < 3.5
    time.sleep(0.2)
    assert not touched.exists()


def test_results_are_secret_pruned(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([echo("a", {"api_key": "sk-not-for-you", "ok": True})]))
    assert outcome["result"] == {"api_key": "[REDACTED]", "ok": True}


# ---- cancellation, and runs that outlive their caller ----------------------------------------------------------------


def test_a_cancel_stops_a_running_plan_and_kills_its_active_job(system: ActorSystemHandle, tmp_path: Path) -> None:
    touched = tmp_path / "finished"
    killed_before = pool_killed(system)
    ref = start_planning(
        planner([sleep("slow", 10, touched)]),
        EXECUTOR,
        "g",
        {},
        max_steps=2,
        max_replans=0,
        timeout_ms=20_000,
        system=system,
    )
    time.sleep(0.5)  # let the step reach a worker
    started = time.monotonic()
    outcome = cancel_planning(ref, "user_cancelled", system=system)
    assert time.monotonic() - started < 3
    assert outcome == {
        "status": "cancelled",
        "reason": "user_cancelled",
        "steps_executed": 0,
        "replans": 0,
        "plan_version": 1,
    }
    assert await_planning(ref, 5, system=system) == outcome
    assert pool_killed(system) > killed_before  # the busy worker was killed, not left to sleep
    assert await_planning(ref.run_id, 1, system=system) == outcome  # by bare run id, again: the same value
    assert cancel_planning(ref, "again", system=system) == outcome  # idempotent once ended
    assert runs.wait(ref.run_id, 1, system=system) == runs.Completed(outcome)
    assert not touched.exists()


def test_a_started_run_can_be_awaited_after_it_completed(system: ActorSystemHandle) -> None:
    ref = start_planning(EXAMPLES, EXAMPLES, "goal", {"invocation_id": "i"}, timeout_ms=5000, system=system)
    assert await_planning(ref, 10, system=system)["result"] == {"goal": "goal", "invocation_id": "i"}
    assert pickle.loads(pickle.dumps(ref)) == ref and isinstance(ref, PlanningRef)
    assert await_planning(ref, 1, system=system)["status"] == "completed"


def test_each_finished_step_is_an_event_of_the_run(system: ActorSystemHandle) -> None:
    ref = start_planning(
        planner([echo("a", 1), fail("b", "flaky")], [echo("c", 3)]),
        EXECUTOR,
        "g",
        {},
        max_replans=1,
        timeout_ms=10_000,
        system=system,
    )
    items = list(runs.subscribe(ref.run_id, idle_timeout=20, system=system))
    steps = [(i.item["step"], i.item["status"], i.item["plan_version"]) for i in items if not i.terminal]
    assert steps == [("a", "ok", 1), ("b", "failed", 1), ("c", "ok", 2)]
    assert items[-1].item == runs.Completed(await_planning(ref, 1, system=system))


_CALLER = """
import sys
from adk_actors.planning import start_planning
from adk_actors.runtime.system import attach
from adk_actors.settings import Settings
handle = attach(int(sys.argv[1]), Settings(hosts=int(sys.argv[2])), make_default=False)
executor = {"module": "actor_tests.planning", "target": None, "config": {}}
plan = {"version": 1, "steps": [{"id": "slow", "action": "sleep", "args": {"seconds": 1.5, "touch": sys.argv[3]}},
                                {"id": "done", "action": "echo", "args": {"value": "survived"}}]}
planner = {"module": "actor_tests.planning", "target": None, "config": {"plans": [plan]}}
print(start_planning(planner, executor, "g", {}, timeout_ms=30_000, system=handle).run_id, flush=True)
"""

_READER = """
import sys
from adk_actors import runs
from adk_actors.runtime.system import attach
from adk_actors.settings import Settings
handle = attach(int(sys.argv[1]), Settings(hosts=int(sys.argv[2])), make_default=False)
outcome = runs.wait(sys.argv[3], 30, system=handle)
print(outcome.output["status"], outcome.output["result"], outcome.output["steps_executed"])
"""


def test_a_planning_run_outlives_the_process_that_started_it(system: ActorSystemHandle, tmp_path: Path) -> None:
    touched = tmp_path / "slow-step-finished"
    common = [str(system.port), str(system.settings.hosts)]
    caller = subprocess.run(
        [sys.executable, "-c", _CALLER, *common, str(touched)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert caller.returncode == 0, caller.stderr[-2000:]
    run_id = caller.stdout.strip()
    assert not touched.exists()  # the caller has exited while its run's first step is still sleeping
    with pytest.raises(AskTimeout):
        await_planning(run_id, 0.2, system=system)  # a client that stops waiting leaves the run running
    reader = subprocess.run(
        [sys.executable, "-c", _READER, *common, run_id],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert reader.returncode == 0, reader.stderr[-2000:]
    assert reader.stdout.split() == ["completed", "survived", "2"]
    assert touched.exists()


# ---- plans are data --------------------------------------------------------------------------------------------------


def test_a_plan_selecting_an_undeclared_action_is_rejected_before_anything_runs(system: ActorSystemHandle) -> None:
    outcome = run(system, planner([echo("a", 1), {"id": "b", "action": "shell", "args": {"cmd": "rm -rf /"}}]))
    assert outcome == {
        "status": "failed",
        "reason": "unknown_action",
        "step": 1,
        "steps_executed": 0,
        "replans": 0,
        "plan_version": None,
    }


@pytest.mark.parametrize(
    ("plan", "rule"),
    [
        ({"version": 1, "steps": [{"id": "a", "action": "echo", "args": {}, "module": "os"}]}, "step_key"),
        ({"version": 1, "steps": [], "executor": {"module": "os"}}, "unknown_key"),
        ({"version": 1, "steps": [{"id": "a", "action": "os.system", "args": {}}]}, None),
    ],
)
def test_a_plan_naming_a_module_is_rejected(system: ActorSystemHandle, plan: dict[str, Any], rule: str | None) -> None:
    plan_ref = {"module": SCRIPTED, "target": None, "config": {"plans": [plan]}}
    outcome = run(system, plan_ref)
    assert outcome["status"] == "failed" and outcome["steps_executed"] == 0
    assert (outcome["reason"], outcome.get("detail")) == (("invalid_plan", rule) if rule else ("unknown_action", None))


def test_module_names_in_step_args_stay_data(system: ActorSystemHandle) -> None:
    args = {"module": "tabnanny", "code": "__import__('tabnanny')"}
    outcome = run(system, planner([echo("a", args), {"id": "b", "action": "loaded", "args": {"name": "tabnanny"}}]))
    assert outcome["status"] == "completed" and outcome["result"] is False
    assert outcome["steps_executed"] == 2


def test_the_planning_package_never_evaluates_or_imports_from_data() -> None:
    package = ROOT / "adk_actors" / "planning"
    for path in package.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"(?<![.\w])(eval|exec|compile|__import__)\(", text), path.name
        if path.name != "adapters.py":
            assert "import_module" not in text, path.name


def test_an_unimportable_executor_fails_structurally(system: ActorSystemHandle) -> None:
    executor: dict[str, Any] = {"module": "actor_tests.planning.no_such_module", "target": None, "config": {}}
    outcome = run_planning(EXAMPLES, executor, "g", {}, timeout_ms=5000, system=system)
    assert outcome == {
        "status": "failed",
        "reason": "executor_failed",
        "detail": "unknown_module",
        "steps_executed": 0,
        "replans": 0,
        "plan_version": None,
    }


# ---- pure validation -------------------------------------------------------------------------------------------------


def test_validate_plan_checks_version_ids_and_size() -> None:
    ok = validate_plan({"version": 1, "steps": [{"id": "a", "action": "go"}]}, ["go"])
    assert ok == {"version": 1, "steps": [{"id": "a", "action": "go", "args": {}}]}
    cases = [
        ({"version": 2, "steps": []}, "version"),
        ({"version": True, "steps": []}, "version"),
        ({"version": 1, "steps": [{"id": "a", "action": "go"}, {"id": "a", "action": "go"}]}, "duplicate_step_id"),
        ({"version": 1, "steps": [{"id": "../etc", "action": "go"}]}, "step_id"),
        ({"version": 1, "steps": [{"id": "a", "action": "go", "args": []}]}, "args"),
        ("not a plan", "not_object"),
    ]
    for plan, rule in cases:
        with pytest.raises(ValidationError) as info:
            validate_plan(plan, ["go"])
        assert (info.value.reason, info.value.details["rule"]) == ("invalid_plan", rule)
    with pytest.raises(ValidationError) as info:
        validate_plan(
            {"version": 1, "steps": [{"id": "a", "action": "go", "args": {"x": "y" * MAX_PLAN_BYTES}}]}, ["go"]
        )
    assert info.value.reason == "plan_too_large"


def test_references_and_limits_are_checked_before_anything_runs(system: ActorSystemHandle) -> None:
    bad = [
        ({**EXAMPLES, "target": "elsewhere"}, {}, "planner.target"),
        ({**EXAMPLES, "module": "os; rm"}, {}, "planner.module"),
        ({**EXAMPLES, "code": "x"}, {}, "planner.code"),
        (EXAMPLES, {"max_steps": 0}, "max_steps"),
        (EXAMPLES, {"timeout_ms": -1}, "timeout_ms"),
    ]
    for plan_ref, limits, key in bad:
        with pytest.raises(ConfigError) as info:
            run_planning(plan_ref, EXAMPLES, "g", {}, system=system, **limits)
        assert info.value.details["key"] == key


# ---- the sample ------------------------------------------------------------------------------------------------------


def test_the_planning_sample_runs() -> None:
    result = run_sample("planning.py")
    assert "status=completed steps_executed=1 replans=0 plan_version=1" in result.stdout
    assert "cancelled: user_cancelled" in result.stdout
