"""The reference's supervised declarative workflows in Python: sequential (with input and output schemas),
bounded parallel, per-step retry, loop, collaborative transfer and a routed graph — then the ways a workflow says
no: a rejected input, a merge conflict and the ``Failed`` values of timeouts, errors and exhausted budgets.

Every action runs in a worker process. Lambdas and closures travel there *by value*, so the retry example counts
its attempts in a file (``CrossProcessCounter``), never in a captured variable.

Run: ``.venv/bin/python samples/workflow_basics.py``
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from typing import Any

import adk_actors as adk
from adk_actors.errors import WorkflowError
from adk_actors.testing import CrossProcessCounter, reserved_port
from adk_actors.workflows import (
    ActionFailed,
    CompiledWorkflow,
    Completed,
    Failed,
    Ok,
    Output,
    Stop,
    Transfer,
    compile_workflow,
    run_workflow,
    start_workflow,
)


def add_one(state: dict[str, Any], context: dict[str, Any]) -> Output:
    assert context["input"] is None                      # the first step has no input
    return Output("counted", {"count": state.get("count", 0) + 1})


def mark_done(state: dict[str, Any], context: dict[str, Any]) -> Output:
    assert context["input"] == "counted"                 # the previous step's output
    return Output("ready", {"done": True})


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with adk.open_actor_system(settings):
        sequential()
        parallel()
        retry(data)
        loop()
        transfer()
        graph()
        failures()
    return 0


def sequential() -> None:
    spec = {
        "version": 1,
        "id": "readme-sequential-v1",
        "kind": "sequential",
        "max_steps": 4,
        "input_schema": {"type": "object", "required": ["count"]},
        "output_schema": {"type": "string"},
        "steps": [
            {"id": "increment", "run": add_one},
            {"id": "finish", "run": mark_done},
        ],
    }
    workflow = compile_workflow(spec)
    outcome = run_workflow(workflow, {"count": 0})
    assert isinstance(outcome, Completed), outcome
    checkpoint = outcome.checkpoint
    print(f"sequential: {type(outcome).__name__} state={outcome.state} "
          f"completed={checkpoint['completed']} output={checkpoint['output']!r}")

    try:
        start_workflow(workflow, {})                     # "count" is required
    except WorkflowError as err:
        print(f"sequential: rejected before it started: {err.reason} {err.details}")


def parallel() -> None:
    spec = {
        "version": 1,
        "id": "readme-parallel-v1",
        "kind": "parallel",
        "max_concurrency": 2,
        "merge": "reject_conflicts",
        "branches": [
            {"id": "left", "run": lambda state: Output("left-output", {"left": 1})},
            {"id": "right", "run": lambda state: Output("right-output", {"right": 2})},
        ],
    }
    outcome = run_workflow(compile_workflow(spec))
    assert isinstance(outcome, Completed), outcome
    print(f"parallel: state={outcome.state} output={outcome.output}")

    conflicting = compile_workflow({
        "version": 1,
        "id": "readme-parallel-conflict-v1",
        "kind": "parallel",
        "branches": [
            {"id": "left", "run": lambda state: Ok({"winner": "left"})},
            {"id": "right", "run": lambda state: Ok({"winner": "right"})},
        ],
    })
    failed = run_workflow(conflicting)
    assert isinstance(failed, Failed), failed
    print(f"parallel: {type(failed).__name__} reason={failed.reason} details={failed.details}")


def retry(data: str) -> None:
    attempts = CrossProcessCounter(os.path.join(data, "attempts"))

    def flaky(state: dict[str, Any], context: dict[str, Any]) -> Output | ActionFailed:
        attempt = attempts.incr()                        # the file is shared; a captured int would not be
        assert attempt == context["attempt"]
        if attempt == 1:
            return ActionFailed("transient_failure")
        return Output("recovered", {"retried": True})

    spec = {
        "version": 1,
        "id": "readme-workflow-retry-v1",
        "kind": "sequential",
        "max_steps": 1,
        "steps": [
            {"id": "retryable", "run": flaky, "timeout": 1000,
             "retry": {"max_attempts": 2, "backoff_ms": 10}},
        ],
    }
    outcome = run_workflow(compile_workflow(spec))
    assert isinstance(outcome, Completed), outcome
    print(f"retry: state={outcome.state} output={outcome.output!r} attempts={attempts.value}")


def loop() -> None:
    def body(state: dict[str, Any]) -> Output:
        attempt = state.get("attempt", 0) + 1
        return Output(attempt, {"attempt": attempt})

    spec = {
        "version": 1,
        "id": "readme-loop-v1",
        "kind": "loop",
        "max_iterations": 3,
        "body": body,
        "until": lambda state: state["attempt"] >= 2,
    }
    outcome = run_workflow(compile_workflow(spec))
    assert isinstance(outcome, Completed), outcome
    print(f"loop: state={outcome.state} output={outcome.output}")


def transfer() -> None:
    def triage(state: dict[str, Any], context: dict[str, Any]) -> Transfer:
        return Transfer("specialist", "handoff", {"triaged": True})

    def specialist(state: dict[str, Any], context: dict[str, Any]) -> Stop:
        assert state["triaged"] is True
        assert context["input"] == "handoff"
        return Stop("resolved", {"resolved": True})

    spec = {
        "version": 1,
        "id": "readme-transfer-v1",
        "kind": "transfer",
        "entry": "triage",
        "max_transfers": 1,
        "members": {
            "triage": {"run": triage},
            "specialist": {"run": specialist},
        },
    }
    outcome = run_workflow(compile_workflow(spec))
    assert isinstance(outcome, Completed), outcome
    print(f"transfer: state={outcome.state} output={outcome.output!r} "
          f"transfers={outcome.checkpoint['used']['transfers']}")


def graph() -> None:
    def counter(state: dict[str, Any]) -> Output:
        count = state.get("count", 0) + 1
        return Output(count, {"count": count})

    def again(state: dict[str, Any], context: dict[str, Any]) -> str:
        return "counter" if context["input"] < 3 else "end_node"

    spec = {
        "version": 1,
        "id": "readme-graph-v1",
        "kind": "graph",
        "entry": "counter",
        "max_steps": 5,
        "nodes": [{"id": "counter", "run": counter}],
        "edges": {"counter": {"route": again}},
    }
    outcome = run_workflow(compile_workflow(spec))
    assert isinstance(outcome, Completed), outcome
    print(f"graph: state={outcome.state} output={outcome.output} steps={outcome.checkpoint['used']['steps']}")


def hang(state: dict[str, Any]) -> Ok:
    time.sleep(60)                                       # a call that never answers in time
    return Ok({})


def failures() -> None:
    def one_step(run: Any, **options: Any) -> CompiledWorkflow:
        return compile_workflow({"version": 1, "id": "readme-failures-v1", "kind": "sequential",
                                 "steps": [{"id": "step", "run": run, **options}]})

    failed = [
        run_workflow(one_step(hang, timeout=300)),                           # the step's own timeout
        run_workflow(one_step(hang), timeout_ms=300),                        # the whole workflow's deadline
        run_workflow(one_step(lambda state: 1 / 0)),                         # the action raised
        run_workflow(one_step(lambda state: {"count": 1})),                  # not an action result
        run_workflow(compile_workflow({"version": 1, "id": "readme-budget-v1", "kind": "graph", "entry": "again",
                                       "max_steps": 2, "nodes": [{"id": "again", "run": lambda state: Ok()}],
                                       "edges": {"again": "again"}})),       # a cycle runs out of steps
    ]
    for outcome in failed:
        assert isinstance(outcome, Failed), outcome
        print(f"failed: reason={outcome.reason} node={outcome.details.get('node')}")

    lock = threading.Lock()
    try:
        one_step(lambda state: Ok({"locked": lock.locked()}))
    except WorkflowError as err:
        print(f"not compiled: {err.reason} path={err.details['path']}")


if __name__ == "__main__":
    raise SystemExit(main())
