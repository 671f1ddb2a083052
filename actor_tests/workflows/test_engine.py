"""The workflow engine and the action-result contract, driven directly: no actor system, no processes.

A tiny in-process driver plays the coordinator: it runs each task's callable through ``run_callable`` (what a
worker would run), answers ``agent`` and ``tool`` tasks itself, applies ``Task.retry``, and feeds the results back.
Call counts live in module-level functions (referenced by importable name, so the driver's ``resolve()`` returns
the very same function and its counter).
"""

from __future__ import annotations

import itertools
import json
import pickle
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.workflows.support import within_detail_bounds
from adk_actors import errors
from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import WorkflowError
from adk_actors.workflows.engine import (
    Cancelled,
    Completed,
    Engine,
    Failed,
    Outcome,
    Paused,
    Task,
    merge_deltas,
    state_delta,
)
from adk_actors.workflows.results import (
    ActionFailed,
    Complete,
    Ok,
    Output,
    Pause,
    Result,
    Route,
    Stop,
    Transfer,
    normalize_result,
    run_callable,
)
from adk_actors.workflows.spec import CompiledWorkflow, compile_workflow

calls: Counter[str] = Counter()
"""How often each counting action ran (reset per test; lowercase because it is mutable state)."""


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


# -- the driver (a coordinator in miniature) ---------------------------------------------------------------------


def execute(task: Task, agents: dict[str, Callable[[str], Any]] | None = None) -> Result:
    """Run one task the way the coordinator does, including its retries; return what to feed back."""
    if task.kind == "agent":
        assert task.agent is not None and task.prompt is not None
        return Output((agents or {})[task.agent](task.prompt), {})
    if task.kind == "tool":
        assert task.tool is not None and task.args is not None
        tool = task.tool.resolve()
        value = tool.execute(task.args, None) if hasattr(tool, "execute") else tool(**task.args)
        return normalize_result({"output": value})
    assert task.fn is not None
    attempts = 1 if task.retry is None else task.retry.max_attempts
    failure: ActionFailed | None = None
    for attempt in range(1, attempts + 1):
        try:
            return normalize_result(
                run_callable(
                    task.fn, task.arity, task.kind, _copy(task.state), {**_copy(task.context), "attempt": attempt}
                )
            )
        except Exception as exc:
            failure = ActionFailed.from_error(exc)
    assert failure is not None
    return failure


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def drive(
    engine: Engine,
    tasks: Iterable[Task] | None = None,
    *,
    agents: dict[str, Callable[[str], Any]] | None = None,
    on_commit: Callable[[Engine], None] | None = None,
) -> Outcome:
    """Start (unless ``tasks`` are given) and run every task FIFO until the engine reaches an outcome."""
    queue = list(engine.start() if tasks is None else tasks)
    seq = engine.commit_seq
    while engine.outcome is None:
        assert queue, "the engine is waiting for nothing"
        task = queue.pop(0)
        queue.extend(engine.on_result(task.id, execute(task, agents)))
        if on_commit is not None and engine.commit_seq != seq:
            seq = engine.commit_seq
            on_commit(engine)
    assert engine.outcome is not None
    return engine.outcome


def run(compiled: CompiledWorkflow, state: dict[str, Any] | None = None, **kwargs: Any) -> Outcome:
    agents = kwargs.pop("agents", None)
    return drive(Engine(compiled, state or {}, **kwargs), agents=agents)


def resume(compiled: CompiledWorkflow, checkpoint: dict[str, Any], resume_input: Any = None, **kwargs: Any) -> Outcome:
    roundtripped = json.loads(json.dumps(checkpoint))
    return run(compiled, {}, checkpoint=roundtripped, resume_input=resume_input, **kwargs)


def graph(
    nodes: list[dict[str, Any]], edges: dict[str, Any], entry: str | None = None, **options: Any
) -> CompiledWorkflow:
    return compile_workflow(
        {
            "version": 1,
            "id": "g",
            "kind": "graph",
            "entry": entry or nodes[0]["id"],
            "nodes": nodes,
            "edges": edges,
            **options,
        }
    )


def sequential(*runs: Any, **options: Any) -> CompiledWorkflow:
    return compile_workflow(
        {
            "version": 1,
            "id": "s",
            "kind": "sequential",
            "steps": [{"id": f"s{i}", "run": r} for i, r in enumerate(runs, 1)],
            **options,
        }
    )


def failed(outcome: Outcome | None, reason: str) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason == reason, outcome
    return outcome


# -- counting actions (by importable name) ------------------------------------------------------------------------


def count_a(state: dict[str, Any]) -> Output:
    calls["a"] += 1
    return Output("a-out", {"a": calls["a"]})


def count_b(state: dict[str, Any], context: dict[str, Any]) -> Output:
    calls["b"] += 1
    return Output({"seen": context["input"]}, {"b": True})


def count_c(state: dict[str, Any]) -> Output:
    calls["c"] += 1
    return Output("c-out", {"c": True})


def pause_for_review(state: dict[str, Any]) -> Pause:
    calls["review"] += 1
    return Pause("human_approval", "Review the draft", {"review_requested": True})


def flaky(state: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    calls["flaky"] += 1
    assert calls["flaky"] == context["attempt"]
    if context["attempt"] == 1:
        return {"error": "transient_failure"}
    return {"output": "recovered", "delta": {"retried": True}}


# -- the reference's examples --------------------------------------------------------------------------------------


def add_one(state: dict[str, Any], context: dict[str, Any]) -> Output:
    assert context["input"] is None
    return Output("counted", {"count": state.get("count", 0) + 1})


def mark_done(state: dict[str, Any], context: dict[str, Any]) -> Output:
    assert context["input"] == "counted"
    return Output("ready", {"done": True})


SEQUENTIAL = {
    "version": 1,
    "id": "readme-sequential-v1",
    "kind": "sequential",
    "max_steps": 4,
    "input_schema": {"type": "object", "required": ["count"]},
    "output_schema": {"type": "string"},
    "steps": [{"id": "increment", "run": add_one}, {"id": "finish", "run": mark_done}],
}


def test_readme_sequential_passes_each_output_to_the_next_step_and_checkpoints_ready() -> None:
    outcome = run(compile_workflow(SEQUENTIAL), {"count": 0})
    assert isinstance(outcome, Completed)
    assert outcome.state == {"count": 1, "done": True}
    assert outcome.checkpoint["completed"] is True
    assert outcome.checkpoint["output"] == "ready" == outcome.output


def test_readme_parallel_outputs_are_keyed_by_branch_id() -> None:
    compiled = compile_workflow(
        {
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
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": 1, "right": 2}
    assert outcome.checkpoint["output"] == {"left": "left-output", "right": "right-output"}


def test_readme_retry_policy_travels_on_the_task_and_the_attempt_number_reaches_the_action() -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-workflow-retry-v1",
            "kind": "sequential",
            "max_steps": 1,
            "steps": [
                {"id": "retryable", "run": flaky, "timeout": 1000, "retry": {"max_attempts": 2, "backoff_ms": 10}}
            ],
        }
    )
    engine = Engine(compiled, {})
    [task] = engine.start()
    assert task.timeout_ms == 1000
    assert task.retry is not None and task.retry.to_dict() == {"max_attempts": 2, "backoff_ms": 10}
    assert task.context["attempt"] == 1
    outcome = drive(engine, [task])
    assert isinstance(outcome, Completed) and outcome.state == {"retried": True}
    assert outcome.output == "recovered"
    assert calls["flaky"] == 2  # one step, two attempts: max_steps=1 is not exceeded by retries


def test_readme_loop_runs_the_body_until_the_condition_holds() -> None:
    def body(state: dict[str, Any]) -> Output:
        attempt = state.get("attempt", 0) + 1
        return Output(attempt, {"attempt": attempt})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-loop-v1",
            "kind": "loop",
            "max_iterations": 3,
            "body": body,
            "until": lambda state: state["attempt"] >= 2,
        }
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.state == {"attempt": 2}
    assert outcome.checkpoint["output"] == 2


def test_readme_transfer_hands_ownership_over_and_emits_a_transfer_event() -> None:
    def specialist(state: dict[str, Any], context: dict[str, Any]) -> Stop:
        assert state["triaged"] is True and context["input"] == "handoff"
        return Stop("resolved", {"resolved": True})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-transfer-v1",
            "kind": "transfer",
            "entry": "triage",
            "max_transfers": 1,
            "members": {
                "triage": {"run": lambda state, context: Transfer("specialist", "handoff", {"triaged": True})},
                "specialist": {"run": specialist},
            },
        }
    )
    engine = Engine(compiled, {})
    outcome = drive(engine)
    assert isinstance(outcome, Completed) and outcome.state == {"triaged": True, "resolved": True}
    assert outcome.output == "resolved"
    assert engine.events == [
        {"type": "transfer_to_agent", "from": "triage", "to": "specialist", "step": 1, "workflow": "readme-transfer-v1"}
    ]
    assert outcome.checkpoint["budgets"]["transfers"] == 0


def test_readme_graph_routes_the_counter_until_three() -> None:
    def counter(state: dict[str, Any]) -> Output:
        count = state.get("count", 0) + 1
        return Output(count, {"count": count})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-graph-v1",
            "kind": "graph",
            "entry": "counter",
            "max_steps": 5,
            "nodes": [{"id": "counter", "run": counter}],
            "edges": {"counter": {"route": lambda state, context: "counter" if context["input"] < 3 else "end_node"}},
        }
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.state == {"count": 3}
    assert outcome.checkpoint["output"] == 3


def fork_join(**fork: Any) -> CompiledWorkflow:
    def join(state: dict[str, Any], context: dict[str, Any]) -> Output:
        outputs = context["input"]
        assert outputs == {"left": "left-output", "right": "right-output"}
        return Output(outputs, {"joined": True})

    return compile_workflow(
        {
            "version": 1,
            "id": "readme-fork-join-v1",
            "kind": "graph",
            "entry": "fork",
            "max_steps": 6,
            "nodes": [
                {
                    "id": "fork",
                    "type": "fork",
                    "branches": ["left", "right"],
                    "join": "join",
                    "merge": "reject_conflicts",
                    "max_concurrency": 2,
                    **fork,
                },
                {"id": "left", "run": lambda state: Output("left-output", {"left": 1})},
                {"id": "right", "run": lambda state: Output("right-output", {"right": 2})},
                {"id": "join", "type": "join", "run": join},
            ],
            "edges": {"left": "join", "right": "join", "join": "end_node"},
        }
    )


def test_readme_fork_join_passes_branch_outputs_to_the_join() -> None:
    outcome = run(fork_join())
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": 1, "right": 2, "joined": True}
    assert outcome.checkpoint["output"] == {"left": "left-output", "right": "right-output"}


def approval() -> CompiledWorkflow:
    def router(state: dict[str, Any], context: dict[str, Any]) -> str:
        assert context["input"]["approved"] is True
        return "accepted"

    return compile_workflow(
        {
            "version": 1,
            "id": "readme-graph-approval-v1",
            "kind": "graph",
            "entry": "approval",
            "max_steps": 3,
            "nodes": [
                {"id": "approval", "run": pause_for_review},
                {"id": "accepted", "run": lambda state: Ok({"accepted": True})},
            ],
            "edges": {"approval": {"route": router}, "accepted": "end_node"},
        }
    )


def test_readme_approval_pauses_after_committing_and_resume_input_reaches_the_router() -> None:
    compiled = approval()
    paused = run(compiled)
    assert isinstance(paused, Paused)
    assert paused.details == {"reason": "human_approval", "summary": "Review the draft", "node": "approval"}
    assert paused.state == {"review_requested": True}  # the node's delta is committed before the pause
    assert paused.checkpoint["paused"] == paused.details and paused.checkpoint["completed"] is False
    done = resume(compiled, paused.checkpoint, {"approved": True})
    assert isinstance(done, Completed)
    assert done.state == {"review_requested": True, "accepted": True}
    assert calls["review"] == 1  # the paused node is not executed again


def test_readme_cancel_keeps_the_last_commit_and_resume_reruns_only_the_uncommitted_action() -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-resume-v1",
            "kind": "sequential",
            "max_steps": 2,
            "steps": [{"id": "wait", "run": count_a}],
        }
    )
    engine = Engine(compiled, {})
    [task] = engine.start()
    checkpoint = engine.checkpoint()
    engine.cancel("revise_later")
    assert engine.outcome == Cancelled("revise_later", checkpoint)
    assert engine.in_flight == {task.id: task}  # the coordinator kills what is still in flight
    assert engine.on_result(task.id, Ok({})) == [] and engine.outcome == Cancelled("revise_later", checkpoint)
    done = resume(compiled, checkpoint)
    assert isinstance(done, Completed) and done.state == {"a": 1}


# -- sequential ----------------------------------------------------------------------------------------------------


def test_stop_ends_a_sequence_early_and_ok_passes_no_input() -> None:
    compiled = sequential(lambda s: Ok({"x": 1}), lambda s, c: Stop(c["input"], {"y": 2}), count_a)
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.state == {"x": 1, "y": 2} and outcome.output is None
    assert calls["a"] == 0
    outcome = run(sequential(lambda s: Complete("legacy", {})))
    assert isinstance(outcome, Completed) and outcome.output == "legacy"


def test_a_sequential_step_may_pause_and_the_resume_input_feeds_the_next_step() -> None:
    compiled = sequential(pause_for_review, count_b)
    paused = run(compiled)
    assert isinstance(paused, Paused) and paused.details["node"] == "s1"
    done = resume(compiled, paused.checkpoint, "looks good")
    assert isinstance(done, Completed) and done.output == {"seen": "looks good"}
    assert calls == Counter(review=1, b=1)


def test_resume_never_replays_committed_steps_and_reruns_the_one_in_flight() -> None:
    compiled = sequential(count_a, count_b, count_c, max_steps=5)
    engine = Engine(compiled, {})
    [first] = engine.start()
    [second] = engine.on_result(first.id, execute(first))
    execute(second)  # it ran (a side effect happened) but its result never came back
    checkpoint = engine.checkpoint()
    engine.cancel("node_restart")
    assert checkpoint["budgets"]["steps"] == 4 and checkpoint["used"]["steps"] == 1
    assert calls == Counter(a=1, b=1)
    resumed = Engine(compiled, {}, checkpoint=json.loads(json.dumps(checkpoint)))
    [again] = resumed.start()
    assert again.id == second.id and again.context["step_id"] == second.context["step_id"]  # idempotency key
    assert again.context["step"] == second.context["step"] == 2
    outcome = drive(resumed, [again])
    assert isinstance(outcome, Completed) and outcome.state == {"a": 1, "b": True, "c": True}
    assert calls == Counter(a=1, b=2, c=1)
    assert outcome.checkpoint["used"]["steps"] == 3 and outcome.checkpoint["budgets"]["steps"] == 2


def test_resuming_never_replenishes_consumed_budgets() -> None:
    compiled = sequential(count_a, pause_for_review, count_b, count_c, max_steps=3)
    paused = run(compiled)
    assert isinstance(paused, Paused) and paused.checkpoint["budgets"]["steps"] == 1
    # A larger runtime bound on resume does not give back what was used.
    outcome = resume(compiled, paused.checkpoint, "go", max_steps=100)
    failed(outcome, "max_steps")
    assert calls["b"] == 1 and calls["c"] == 0
    # A smaller one lowers what is left.
    assert isinstance(resume(compiled, paused.checkpoint, "go", max_steps=2), Failed)


def test_max_steps_fails_with_the_checkpoint_of_the_last_commit() -> None:
    compiled = sequential(count_a, count_b, count_c, max_steps=2)
    outcome = failed(run(compiled), "max_steps")
    assert outcome.details == {"max_steps": 2, "node": "s3"}
    assert outcome.checkpoint["state"] == {"a": 1, "b": True}
    assert outcome.checkpoint["cursor"] == {"at": "edge", "node": "s2", "output": {"seen": "a-out"}}
    failed(run(sequential(count_a, count_b), max_steps=1), "max_steps")  # the runtime override
    assert isinstance(run(sequential(count_a, count_b), max_steps=2), Completed)


def test_an_action_failure_after_retries_fails_the_workflow_with_its_reason() -> None:
    def broken(state: dict[str, Any]) -> Any:
        raise ValueError("secret text")

    outcome = failed(run(sequential(count_a, broken)), "function_failed")
    assert outcome.details == {"exception_type": "ValueError", "node": "s2"}
    assert "secret" not in json.dumps(outcome.details)
    assert outcome.checkpoint["state"] == {"a": 1}
    outcome = failed(run(sequential(lambda s: {"error": "quota_exceeded", "details": {"limit": 3}})), "quota_exceeded")
    assert outcome.details["limit"] == 3 and outcome.details["node"] == "s1"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"ok": {"x": float("nan")}}, "invalid_delta"),
        (Ok({"k": object()}), "invalid_delta"),
        (Output(object(), {}), "invalid_value"),
        ("just a string", "invalid_action_result"),
        ({"x": 1}, "invalid_action_result"),
        ({"ok": {}, "output": 1}, "invalid_action_result"),
        (None, "invalid_action_result"),
    ],
)
def test_invalid_results_fail_the_workflow(value: Any, reason: str) -> None:
    failed(run(sequential(lambda s: value)), reason)


def test_input_and_output_schemas_are_enforced() -> None:
    compiled = compile_workflow(SEQUENTIAL)
    with pytest.raises(WorkflowError) as info:
        Engine(compiled, {"counter": 0})
    assert info.value.reason == "invalid_input" and info.value.details["rule"] == "required"
    bad_output = compile_workflow({**SEQUENTIAL, "output_schema": {"type": "integer"}})
    outcome = failed(run(bad_output, {"count": 0}), "invalid_output")
    assert outcome.checkpoint["completed"] is False and outcome.checkpoint["state"] == {"count": 1, "done": True}


@pytest.mark.parametrize("state", [[], {"x": float("inf")}, {1: "a"}, {"f": object()}])
def test_the_initial_state_must_be_a_json_object(state: Any) -> None:
    with pytest.raises(WorkflowError) as info:
        Engine(sequential(count_a), state)
    assert info.value.reason == "invalid_state"


# -- parallel ------------------------------------------------------------------------------------------------------


def parallel(*deltas: dict[str, Any], merge: str = "reject_conflicts", **options: Any) -> CompiledWorkflow:
    return compile_workflow(
        {
            "version": 1,
            "id": "p",
            "kind": "parallel",
            "merge": merge,
            "branches": [{"id": f"b{i}", "run": _emit(f"out{i}", d)} for i, d in enumerate(deltas)],
            **options,
        }
    )


def _emit(output: str, delta: dict[str, Any]) -> Callable[[dict[str, Any]], Output]:
    return lambda state: Output(output, delta)


def test_branches_see_the_same_input_state_and_merge_in_declared_order_whatever_the_completion_order() -> None:
    compiled = parallel({"k": "first", "a": 1}, {"k": "second", "b": 2}, merge="ordered_last_wins")
    engine = Engine(compiled, {"base": True})
    tasks = engine.start()
    assert [t.node for t in tasks] == ["b0", "b1"]
    assert all(t.state == {"base": True} for t in tasks)
    for task in reversed(tasks):  # b1 finishes first
        engine.on_result(task.id, execute(task))
    outcome = engine.outcome
    assert isinstance(outcome, Completed)
    assert outcome.state == {"base": True, "k": "second", "a": 1, "b": 2}
    assert list(outcome.output) == ["b0", "b1"]


def test_reject_conflicts_fails_on_unequal_writes_and_accepts_equal_ones() -> None:
    outcome = failed(run(parallel({"k": 1}, {"k": 2})), "merge_conflict")
    assert outcome.details == {"key": "k", "branches": ["b0", "b1"], "node": "$fork"}
    assert outcome.checkpoint["state"] == {}
    assert set(outcome.checkpoint["cursor"]["done"]) == {"b0", "b1"}  # each branch was committed on its own
    assert isinstance(run(parallel({"k": [1, {"x": None}]}, {"k": [1, {"x": None}]})), Completed)
    failed(run(parallel({"k": 1}, {"k": 1.0})), "merge_conflict")  # JSON values: 1 and 1.0 differ
    failed(run(parallel({"k": 1}, {"k": True})), "merge_conflict")


def test_max_concurrency_bounds_the_branches_running_at_once() -> None:
    compiled = parallel({"a": 1}, {"b": 2}, {"c": 3}, max_concurrency=2)
    engine = Engine(compiled, {})
    first = engine.start()
    assert [t.node for t in first] == ["b0", "b1"] and set(engine.in_flight) == {t.id for t in first}
    more = engine.on_result(first[1].id, execute(first[1]))
    assert [t.node for t in more] == ["b2"]
    assert [t.node for t in Engine(compiled, {}, max_concurrency=1).start()] == ["b0"]
    assert len(Engine(parallel({}, {}, {}), {}).start()) == 3  # unbounded by default: every branch


def test_a_pause_in_a_top_level_parallel_branch_is_unresumable() -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "p",
            "kind": "parallel",
            "branches": [{"id": "x", "run": pause_for_review}, {"id": "y", "run": count_a}],
        }
    )
    outcome = failed(run(compiled), "unresumable_pause")
    assert outcome.details == {"node": "x"}


def test_stop_in_a_branch_is_that_branch_output() -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "p",
            "kind": "parallel",
            "branches": [
                {"id": "x", "run": lambda s: Stop("x-out", {"x": 1})},
                {"id": "y", "run": lambda s: Ok({"y": 1})},
            ],
        }
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.output == {"x": "x-out", "y": None}


# -- loop ----------------------------------------------------------------------------------------------------------


def loop(until: Any, max_iterations: int = 3) -> CompiledWorkflow:
    def body(state: dict[str, Any], context: dict[str, Any]) -> Output:
        n = state.get("n", 0) + 1
        assert context["iteration"] == n
        return Output(n, {"n": n})

    return compile_workflow(
        {"version": 1, "id": "l", "kind": "loop", "max_iterations": max_iterations, "body": body, "until": until}
    )


def test_a_loop_stops_at_max_iterations_and_completes_with_the_last_output() -> None:
    outcome = run(loop(lambda state: False, max_iterations=3))
    assert isinstance(outcome, Completed) and outcome.state == {"n": 3} and outcome.output == 3


def test_until_sees_the_body_output_and_must_answer_a_bool() -> None:
    outcome = run(loop(lambda state, context: context["input"] == 2))
    assert isinstance(outcome, Completed) and outcome.output == 2
    outcome = failed(run(loop(lambda state: "yes")), "invalid_value")
    assert outcome.details == {"node": "$loop", "task": "until", "type": "str"}


def test_pause_route_and_transfer_are_rejected_in_a_loop_body() -> None:
    for result, reason in (
        (Pause("r", "s", {}), "unresumable_pause"),
        (Route("x", {}), "unsupported_result"),
        (Transfer("x", None, {}), "unsupported_result"),
    ):
        compiled = compile_workflow(
            {
                "version": 1,
                "id": "l",
                "kind": "loop",
                "max_iterations": 2,
                "body": (lambda r: lambda state: r)(result),
                "until": lambda state: True,
            }
        )
        failed(run(compiled), reason)


def test_loop_iterations_are_checkpointed_and_resume_continues_from_the_next_iteration() -> None:
    compiled = loop(lambda state: state["n"] >= 3, max_iterations=5)
    engine = Engine(compiled, {})
    [body] = engine.start()
    [until] = engine.on_result(body.id, execute(body))
    assert until.kind == "until" and until.context["input"] == 1
    checkpoint = engine.checkpoint()
    assert checkpoint["cursor"]["iteration"] == 1 and checkpoint["state"] == {"n": 1}
    outcome = resume(compiled, checkpoint)
    assert isinstance(outcome, Completed) and outcome.state == {"n": 3}
    assert outcome.checkpoint["used"]["steps"] == 3


# -- transfer ------------------------------------------------------------------------------------------------------


def ping_pong(max_transfers: int) -> CompiledWorkflow:
    def member(other: str) -> Callable[[dict[str, Any], dict[str, Any]], Any]:
        def act(state: dict[str, Any], context: dict[str, Any]) -> Any:
            hops = state.get("hops", 0) + 1
            if hops > 3:
                return Output("settled", {})
            return Transfer(other, hops, {"hops": hops})

        return act

    return compile_workflow(
        {
            "version": 1,
            "id": "t",
            "kind": "transfer",
            "entry": "ping",
            "max_transfers": max_transfers,
            "members": {"ping": {"run": member("pong")}, "pong": {"run": member("ping")}},
        }
    )


def test_every_accepted_transfer_consumes_budget_and_emits_an_event() -> None:
    engine = Engine(ping_pong(3), {})
    outcome = drive(engine)
    assert isinstance(outcome, Completed) and outcome.output == "settled" and outcome.state == {"hops": 3}
    assert [(e["from"], e["to"], e["step"]) for e in engine.events] == [
        ("ping", "pong", 1),
        ("pong", "ping", 2),
        ("ping", "pong", 3),
    ]


def test_a_transfer_over_budget_fails() -> None:
    engine = Engine(ping_pong(2), {})
    outcome = failed(drive(engine), "max_transfers")
    assert outcome.details == {"max_transfers": 2, "node": "ping"}
    assert len(engine.events) == 2 and outcome.checkpoint["state"] == {"hops": 2}


def test_a_transfer_to_an_undeclared_member_fails_and_so_does_a_pause() -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "t",
            "kind": "transfer",
            "entry": "a",
            "members": {"a": {"run": lambda s: Transfer("zed", None, {})}},
        }
    )
    assert failed(run(compiled), "undeclared_member").details == {"node": "a"}
    compiled = compile_workflow(
        {"version": 1, "id": "t", "kind": "transfer", "entry": "a", "members": {"a": {"run": pause_for_review}}}
    )
    failed(run(compiled), "unresumable_pause")


# -- graph ---------------------------------------------------------------------------------------------------------


def test_no_route_may_reach_an_undeclared_node() -> None:
    routed = graph([{"id": "a", "run": count_a}], {"a": {"route": lambda s, c: "nowhere"}})
    assert failed(run(routed), "undeclared_route").details == {"node": "a"}
    failed(run(graph([{"id": "a", "run": count_a}], {"a": {"route": lambda s: 42}})), "undeclared_route")
    jumped = graph([{"id": "a", "run": lambda s: Route("nowhere", {"x": 1})}], {"a": "end_node"})
    outcome = failed(run(jumped), "undeclared_route")
    assert outcome.checkpoint["state"] == {}  # the delta of a rejected route is not committed
    selected = graph(
        [
            {"id": "pick", "type": "branch", "targets": ["a"], "select": lambda s: "b"},
            {"id": "a", "run": count_a},
            {"id": "b", "run": count_a},
        ],
        {"a": "end_node", "b": "end_node"},
    )
    assert failed(run(selected), "undeclared_route").details == {"node": "pick"}  # b is declared, not a target


def test_a_route_result_moves_to_a_declared_node() -> None:
    compiled = graph(
        [{"id": "a", "run": lambda s: Route("c", {"x": 1})}, {"id": "b", "run": count_b}, {"id": "c", "run": count_b}],
        {"a": "b", "b": "end_node", "c": "end_node"},
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.state == {"x": 1, "b": True}
    assert outcome.output == {"seen": None} and outcome.checkpoint["visits"] == {"a": 1, "c": 1}


def test_route_and_transfer_results_are_kind_specific() -> None:
    assert failed(run(sequential(lambda s: Route("s1", {}))), "unsupported_result").details == {
        "node": "s1",
        "result": "route",
    }
    failed(run(graph([{"id": "a", "run": lambda s: Transfer("a", None, {})}], {"a": "end_node"})), "unsupported_result")


def test_branch_and_dynamic_nodes_select_one_of_their_targets() -> None:
    for node_type in ("branch", "dynamic"):
        compiled = graph(
            [
                {"id": "start", "run": lambda s: Output("payload", {})},
                {
                    "id": "pick",
                    "type": node_type,
                    "targets": ["a", "b"],
                    "select": lambda s, c: "b" if c["input"] == "payload" else "a",
                },
                {"id": "a", "run": count_a},
                {"id": "b", "run": count_b},
            ],
            {"start": "pick", "a": "end_node", "b": "end_node"},
        )
        outcome = run(compiled)
        assert isinstance(outcome, Completed) and outcome.output == {"seen": "payload"}
    assert calls == Counter(b=2)


def test_a_loop_node_runs_body_then_done_and_leaves_through_its_edge() -> None:
    compiled = graph(
        [
            {
                "id": "grow",
                "type": "loop",
                "body": lambda s: Output(len(s.get("items", [])), {"items": [*s.get("items", []), "x"]}),
                "done": lambda s, c: c["input"] >= 1,
                "max_iterations": 5,
            },
            {"id": "after", "run": count_b},
        ],
        {"grow": "after", "after": "end_node"},
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.state == {"items": ["x", "x"], "b": True}
    assert outcome.output == {"seen": 1}


def test_stop_in_a_graph_node_completes_the_workflow() -> None:
    compiled = graph(
        [{"id": "a", "run": lambda s: Stop("early", {"x": 1})}, {"id": "b", "run": count_a}],
        {"a": "b", "b": "end_node"},
    )
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.output == "early" and calls["a"] == 0


def test_edges_chain_the_output_of_a_node_to_its_successor() -> None:
    compiled = graph([{"id": "a", "run": count_a}, {"id": "b", "run": count_b}], {"a": "b", "b": "end_node"})
    outcome = run(compiled)
    assert isinstance(outcome, Completed) and outcome.output == {"seen": "a-out"}


# -- fork / join ---------------------------------------------------------------------------------------------------


def three_way_fork() -> CompiledWorkflow:
    return graph(
        [
            {"id": "fork", "type": "fork", "branches": ["a", "review", "c"], "join": "join", "max_concurrency": 3},
            {"id": "a", "run": count_a},
            {"id": "review", "run": pause_for_review},
            {"id": "c", "run": count_c},
            {"id": "join", "type": "join", "run": lambda s, c: Output(c["input"], {"joined": True})},
        ],
        {"join": "end_node"},
        max_steps=10,
    )


def test_a_fork_branch_pause_cancels_in_flight_siblings_which_run_again_after_resume() -> None:
    compiled = three_way_fork()
    engine = Engine(compiled, {})
    a, review, c = engine.start()
    assert [a.context["fork"], review.context["fork"]] == ["fork", "fork"]
    engine.on_result(a.id, execute(a))  # a completes and is committed
    execute(c)  # c runs but has not answered
    engine.on_result(review.id, execute(review))  # review pauses while c is in flight
    paused = engine.outcome
    assert isinstance(paused, Paused)
    assert paused.details == {
        "reason": "human_approval",
        "summary": "Review the draft",
        "node": "review",
        "fork": "fork",
    }
    assert set(engine.in_flight) == {c.id}  # the coordinator cancels it
    cursor = paused.checkpoint["cursor"]
    assert cursor["done"] == {"a": {"output": "a-out", "delta": {"a": 1}}}
    assert cursor["paused"] == {"review": {"delta": {"review_requested": True}}}
    assert paused.checkpoint["used"]["steps"] == 2
    assert engine.on_result(c.id, execute(c)) == [] and engine.outcome is paused  # a late answer changes nothing

    done = resume(compiled, paused.checkpoint, "approved")
    assert isinstance(done, Completed)
    assert done.output == {"a": "a-out", "review": "approved", "c": "c-out"}
    assert done.state == {"a": 1, "review_requested": True, "c": True, "joined": True}
    assert calls == Counter(a=1, review=1, c=3)  # only the uncommitted sibling ran again
    assert done.checkpoint["used"]["steps"] == 4


def test_a_failing_branch_fails_the_fork() -> None:
    compiled = graph(
        [
            {"id": "fork", "type": "fork", "branches": ["a", "bad"], "join": "join"},
            {"id": "a", "run": count_a},
            {"id": "bad", "run": lambda s: {"error": "boom"}},
            {"id": "join", "type": "join"},
        ],
        {"join": "end_node"},
    )
    details = failed(run(compiled), "boom").details
    assert details["node"] == "bad" and details["callable"].endswith("<lambda>")  # where, never what


def test_fork_branches_run_up_to_the_node_bound_and_a_join_without_run_outputs_the_map() -> None:
    compiled = graph(
        [
            {"id": "fork", "type": "fork", "branches": ["a", "b", "c"], "join": "join", "max_concurrency": 1},
            {"id": "a", "run": count_a},
            {"id": "b", "run": count_b},
            {"id": "c", "run": count_c},
            {"id": "join", "type": "join"},
        ],
        {"join": "end_node"},
        max_steps=3,
    )
    engine = Engine(compiled, {})
    launched = [[t.node for t in engine.start()]]
    queue = list(engine.in_flight.values())
    while engine.outcome is None:
        task = queue.pop()
        new = engine.on_result(task.id, execute(task))
        launched.append([t.node for t in new])
        queue += new
    assert launched == [["a"], ["b"], ["c"], []]
    assert isinstance(engine.outcome, Completed)
    assert engine.outcome.output == {"a": "a-out", "b": {"seen": None}, "c": "c-out"}  # the fork's input is None


# -- agent, tool and nested workflow nodes -------------------------------------------------------------------------


def test_an_agent_node_prompts_a_registered_agent_and_may_decide_on_its_reply() -> None:
    def decide(state: dict[str, Any], context: dict[str, Any]) -> Output:
        assert context["output"] == "HELLO BOB" and context["input"] is None
        return Output(context["output"].lower(), {"greeted": True})

    compiled = graph(
        [
            {
                "id": "greet",
                "type": "agent",
                "timeout": 900,
                "retry": {"max_attempts": 2},
                "agent": {"name": "shouter", "prompt": lambda s: f"hello {s['who']}", "decision": decide},
            },
            {"id": "plain", "type": "agent", "agent": {"name": "shouter", "prompt": "again"}},
        ],
        {"greet": "plain", "plain": "end_node"},
    )
    engine = Engine(compiled, {"who": "bob"})
    [prompt] = engine.start()
    assert prompt.kind == "prompt" and prompt.fn is not None
    [ask] = engine.on_result(prompt.id, execute(prompt))
    assert (ask.kind, ask.agent, ask.prompt, ask.fn, ask.timeout_ms) == ("agent", "shouter", "hello bob", None, 900)
    assert ask.retry is not None and ask.retry.max_attempts == 2
    outcome = drive(engine, [ask], agents={"shouter": str.upper})
    assert isinstance(outcome, Completed) and outcome.state == {"who": "bob", "greeted": True}
    assert outcome.output == "AGAIN"  # without a decision the reply is the node's output


def test_an_agent_prompt_must_be_text() -> None:
    compiled = graph([{"id": "x", "type": "agent", "agent": {"name": "a", "prompt": lambda s: 3}}], {"x": "end_node"})
    failed(run(compiled), "invalid_prompt")


class Multiply:
    name = "multiply"
    description = "Multiply two numbers."

    def schema(self) -> dict[str, Any]:
        return {"type": "object"}

    def execute(self, args: dict[str, Any], context: Any) -> Any:
        return args["a"] * args["b"]


def test_a_tool_node_computes_arguments_then_calls_the_tool() -> None:
    compiled = graph(
        [
            {"id": "calc", "type": "tool", "tool": {"tool": Multiply(), "args": lambda s: {"a": s["x"], "b": 7}}},
            {"id": "store", "run": lambda s, c: Ok({"product": c["input"]})},
        ],
        {"calc": "store", "store": "end_node"},
    )
    engine = Engine(compiled, {"x": 6})
    [args] = engine.start()
    assert args.kind == "args"
    [call] = engine.on_result(args.id, execute(args))
    assert (call.kind, call.tool_name, call.args, call.fn) == ("tool", "multiply", {"a": 6, "b": 7}, None)
    assert pickle.loads(pickle.dumps(call)) == call  # tasks cross processes
    outcome = drive(engine, [call])
    assert isinstance(outcome, Completed) and outcome.state == {"x": 6, "product": 42}
    bad = graph(
        [{"id": "calc", "type": "tool", "tool": {"tool": Multiply(), "args": lambda s: [1]}}], {"calc": "end_node"}
    )
    failed(run(bad), "invalid_tool_args")


def child_workflow() -> CompiledWorkflow:
    return compile_workflow(
        {
            "version": 1,
            "id": "child",
            "kind": "sequential",
            "steps": [
                {"id": "inner_a", "run": count_a},
                {"id": "inner_review", "run": pause_for_review},
                {"id": "inner_b", "run": count_b},
            ],
        }
    )


def test_a_nested_workflow_runs_inside_the_engine_and_its_changes_become_the_node_delta() -> None:
    nested = compile_workflow(
        {
            "version": 1,
            "id": "child",
            "kind": "sequential",
            "steps": [{"id": "inner", "run": lambda s: Output("child-out", {"x": s["x"] + 1})}],
        }
    )
    compiled = graph(
        [{"id": "sub", "type": "workflow", "workflow": nested}, {"id": "after", "run": count_b}],
        {"sub": "after", "after": "end_node"},
    )
    engine = Engine(compiled, {"x": 1, "keep": True})
    [task] = engine.start()
    assert task.id == "sub#1>inner#1/action" and task.context["step_id"] == task.id
    assert task.context["workflow_id"] == "child"
    outcome = drive(engine, [task])
    assert isinstance(outcome, Completed)
    assert outcome.state == {"x": 2, "keep": True, "b": True} and outcome.output == {"seen": "child-out"}


def test_a_pause_inside_a_nested_workflow_pauses_the_parent_and_resumes_the_child() -> None:
    compiled = graph(
        [{"id": "sub", "type": "workflow", "workflow": child_workflow()}, {"id": "after", "run": count_c}],
        {"sub": "after", "after": "end_node"},
    )
    paused = run(compiled)
    assert isinstance(paused, Paused)
    assert paused.details["node"] == "sub" and paused.details["nested"]["node"] == "inner_review"
    assert paused.details["reason"] == "human_approval"
    assert paused.state == {"a": 1, "review_requested": True}  # the child's committed changes first
    done = resume(compiled, paused.checkpoint, "ok")
    assert isinstance(done, Completed)
    assert done.state == {"a": 1, "review_requested": True, "b": True, "c": True}
    assert calls == Counter(a=1, review=1, b=1, c=1)


def test_a_nested_workflow_in_a_fork_branch_keeps_its_commits_across_a_sibling_pause() -> None:
    compiled = graph(
        [
            {"id": "fork", "type": "fork", "branches": ["sub", "review"], "join": "join"},
            {"id": "sub", "type": "workflow", "workflow": sequential(count_a, count_b, count_c)},
            {"id": "review", "run": pause_for_review},
            {"id": "join", "type": "join"},
        ],
        {"join": "end_node"},
    )
    engine = Engine(compiled, {})
    sub_first, review = engine.start()
    [sub_second] = engine.on_result(sub_first.id, execute(sub_first))  # the child commits its first step
    assert engine.checkpoint()["cursor"]["nested"]["sub"]["state"] == {"a": 1}
    engine.on_result(review.id, execute(review))
    paused = engine.outcome
    assert isinstance(paused, Paused) and set(engine.in_flight) == {sub_second.id}
    done = resume(compiled, paused.checkpoint, "fine")
    assert isinstance(done, Completed)
    assert done.output == {"sub": "c-out", "review": "fine"}
    assert done.state == {"a": 1, "b": True, "c": True, "review_requested": True}
    assert calls == Counter(a=1, b=1, c=1, review=1)  # the child's committed step was not replayed


def test_a_failing_nested_workflow_fails_the_parent_with_nested_details() -> None:
    compiled = graph(
        [{"id": "sub", "type": "workflow", "workflow": sequential(lambda s: {"error": "inner_boom"})}],
        {"sub": "end_node"},
    )
    outcome = failed(run(compiled), "inner_boom")
    assert outcome.details["workflow"] == "s" and outcome.details["node"] == "sub"
    assert outcome.details["nested"]["node"] == "s1"
    strict = compile_workflow(
        {
            "version": 1,
            "id": "strict",
            "kind": "sequential",
            "input_schema": {"type": "object", "required": ["needed"]},
            "steps": [{"id": "x", "run": count_a}],
        }
    )
    compiled = graph([{"id": "sub", "type": "workflow", "workflow": strict}], {"sub": "end_node"})
    assert failed(run(compiled), "invalid_input").details["node"] == "sub"


# -- checkpoints ---------------------------------------------------------------------------------------------------


def kitchen_sink() -> CompiledWorkflow:
    """Every node type and result on one path."""
    return graph(
        [
            {"id": "start", "run": count_a},
            {
                "id": "fork",
                "type": "fork",
                "branches": ["left", "ask", "calc", "sub"],
                "join": "join",
                "max_concurrency": 2,
            },
            {"id": "left", "run": lambda s: Output("L", {"left": 1})},
            {
                "id": "ask",
                "type": "agent",
                "agent": {
                    "name": "echo",
                    "prompt": "hi",
                    "decision": lambda s, c: Output(c["output"], {"asked": c["output"]}),
                },
            },
            {"id": "calc", "type": "tool", "tool": {"tool": Multiply(), "args": lambda s: {"a": 2, "b": 3}}},
            {
                "id": "sub",
                "type": "workflow",
                "workflow": sequential(lambda s: Output("S1", {"s1": 1}), lambda s: Output("S2", {"s2": 2})),
            },
            {"id": "join", "type": "join", "run": lambda s, c: Output(sorted(c["input"]), {"joined": True})},
            {"id": "pick", "type": "branch", "targets": ["grow", "start"], "select": lambda s: "grow"},
            {
                "id": "grow",
                "type": "loop",
                "body": lambda s: Output(s.get("g", 0) + 1, {"g": s.get("g", 0) + 1}),
                "done": lambda s: s["g"] >= 2,
                "max_iterations": 4,
            },
            {"id": "approve", "run": pause_for_review},
            {"id": "finish", "run": lambda s, c: Stop({"approved": c["input"]}, {"finished": True})},
        ],
        {
            "start": "fork",
            "join": "pick",
            "grow": {"route": lambda s, c: "approve"},
            "approve": "finish",
            "finish": "end_node",
        },
        max_steps=20,
    )


AGENTS = {"echo": lambda prompt: f"echo:{prompt}"}
FINAL_STATE = {
    "a": 1,
    "left": 1,
    "asked": "echo:hi",
    "s1": 1,
    "s2": 2,
    "joined": True,
    "g": 2,
    "review_requested": True,
    "finished": True,
}


def test_every_checkpoint_round_trips_through_json_and_resuming_from_it_reaches_the_same_outcome() -> None:
    compiled = kitchen_sink()
    checkpoints: list[dict[str, Any]] = []

    def record(engine: Engine) -> None:
        checkpoint = engine.checkpoint()
        assert json.loads(json.dumps(checkpoint)) == checkpoint
        assert checkpoint["seq"] == engine.commit_seq
        checkpoints.append(checkpoint)

    paused = drive(Engine(compiled, {}), agents=AGENTS, on_commit=record)
    assert isinstance(paused, Paused) and paused.details["node"] == "approve"
    assert [c["seq"] for c in checkpoints] == sorted({c["seq"] for c in checkpoints})
    done = resume(compiled, paused.checkpoint, "yes", agents=AGENTS)
    assert isinstance(done, Completed) and done.state == FINAL_STATE
    assert done.output == {"approved": "yes"}
    for checkpoint in checkpoints[:-1]:
        outcome = resume(compiled, checkpoint, agents=AGENTS)
        assert isinstance(outcome, Paused) and outcome.checkpoint["state"] == paused.checkpoint["state"]
        assert outcome.checkpoint["budgets"] == paused.checkpoint["budgets"]
        assert outcome.checkpoint["visits"] == paused.checkpoint["visits"]
    assert calls["a"] == 1  # "start" committed in the first checkpoint taken after it, never replayed


def test_task_ids_are_deterministic_and_unique() -> None:
    def ids(engine: Engine) -> list[str]:
        seen: list[str] = []
        queue = engine.start()
        while engine.outcome is None:
            task = queue.pop(0)
            seen.append(task.id)
            queue += engine.on_result(task.id, execute(task, AGENTS))
        return seen

    first, second = ids(Engine(kitchen_sink(), {})), ids(Engine(kitchen_sink(), {}))
    assert first == second and len(set(first)) == len(first)
    assert "grow#2/action" in first and "grow#1/done" in first and "sub#1>s1#1/action" in first


def test_a_completed_checkpoint_resumes_as_completed() -> None:
    done = run(sequential(count_a))
    assert isinstance(done, Completed)
    again = resume(sequential(count_a), done.checkpoint)
    assert isinstance(again, Completed) and again.state == done.state and calls["a"] == 1


def test_checkpoints_of_another_workflow_or_malformed_ones_are_rejected() -> None:
    done = run(sequential(count_a))
    assert isinstance(done, Completed)
    with pytest.raises(WorkflowError) as info:
        Engine(approval(), {}, checkpoint=done.checkpoint)
    assert info.value.reason == "checkpoint_mismatch" and info.value.details == {"field": "id"}
    for corrupt in (
        {**done.checkpoint, "format": 9},
        {**done.checkpoint, "cursor": {"at": "node", "node": "zz"}},
        {**done.checkpoint, "budgets": {"steps": -1, "transfers": 0}},
        {"x": float("nan")},
    ):
        with pytest.raises(WorkflowError) as info:
            Engine(sequential(count_a), {}, checkpoint=corrupt)
        assert info.value.reason == "invalid_checkpoint"
    with pytest.raises(WorkflowError) as info:
        Engine(sequential(count_a), {}, checkpoint=done.checkpoint, resume_input={1, 2})
    assert info.value.reason == "invalid_resume_input"


# -- the engine's contract -----------------------------------------------------------------------------------------


def test_tasks_carry_a_private_state_and_a_complete_context() -> None:
    compiled = sequential(count_b, timeout=5000)
    engine = Engine(compiled, {"x": [1]}, invocation_id="inv-7")
    [task] = engine.start()
    assert task.context == {
        "input": None,
        "node": "s1",
        "step": 1,
        "attempt": 1,
        "workflow_id": "s",
        "invocation_id": "inv-7",
        "step_id": "s1#1/action",
    }
    assert task.arity == 2 and task.fn is not None and task.timeout_ms is None and task.retry is None
    task.state["x"].append(2)
    assert engine.state == {"x": [1]}
    assert pickle.loads(pickle.dumps(task)) == task


def test_results_may_be_fed_as_json_forms() -> None:
    engine = Engine(sequential(count_a, count_b), {})
    [task] = engine.start()
    [nxt] = engine.on_result(task.id, {"output": "from-json", "delta": {"j": 1}})
    assert nxt.context["input"] == "from-json" and nxt.state == {"j": 1}


def test_misuse_is_reported() -> None:
    engine = Engine(sequential(count_a), {})
    engine.start()
    with pytest.raises(WorkflowError) as info:
        engine.start()
    assert info.value.reason == "already_started"
    with pytest.raises(WorkflowError) as info:
        engine.on_result("nope", Ok({}))
    assert info.value.reason == "unknown_task"
    with pytest.raises(WorkflowError):
        engine.cancel("")
    with pytest.raises(WorkflowError):
        Engine(sequential(count_a), {}, max_steps=0)


def test_cancel_after_an_outcome_changes_nothing() -> None:
    engine = Engine(sequential(count_a), {})
    outcome = drive(engine)
    engine.cancel("late")
    assert engine.outcome is outcome


def test_a_value_task_fed_a_non_output_result_fails() -> None:
    engine = Engine(graph([{"id": "a", "run": count_a}], {"a": {"route": lambda s: "end_node"}}), {})
    [task] = engine.start()
    [route] = engine.on_result(task.id, execute(task))
    assert route.kind == "route" and route.retry is None and route.timeout_ms is None
    engine.on_result(route.id, Ok({}))
    failed(engine.outcome, "invalid_action_result")


# -- the result contract -------------------------------------------------------------------------------------------

_text = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")  # canonical JSON text only
_keys = st.text(_text, min_size=1, max_size=6)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_text, max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=10,
)
_deltas = st.dictionaries(_keys, _json, max_size=4)
_names = st.text(_text, min_size=1, max_size=20)
_results = st.one_of(
    st.builds(Ok, _deltas),
    st.builds(Output, _json, _deltas),
    st.builds(Stop, _json, _deltas),
    st.builds(Complete, _json, _deltas),
    st.builds(Route, _names, _deltas),
    st.builds(Transfer, _names, _json, _deltas),
    st.builds(Pause, _names, st.text(_text, max_size=30), _deltas),
    # details are bounded JSON (AdkError / json_safe): integers within 64 bits survive, larger ones become "<int>"
    st.builds(
        ActionFailed,
        _names,
        st.dictionaries(_keys, st.integers(-(2**63), 2**63 - 1) | st.text(_text, max_size=5), max_size=3),
    ),
)


@settings(max_examples=300, deadline=None)
@given(result=_results)
def test_results_round_trip_through_their_json_form(result: Result) -> None:
    assert normalize_result(result) == result
    wire = json.loads(json.dumps(result.to_dict()))
    assert normalize_result(wire) == result
    assert pickle.loads(pickle.dumps(result)) == result


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(
        _json,
        st.tuples(_json),
        st.sets(st.integers()),
        st.builds(object),
        st.dictionaries(st.sampled_from(["ok", "output", "delta", "route", "error", "extra"]), _json, max_size=3),
    )
)
def test_normalize_result_never_raises(value: Any) -> None:
    result = normalize_result(value)
    if isinstance(result, ActionFailed) and result.reason.startswith("invalid_"):
        assert result.reason in ("invalid_action_result", "invalid_delta", "invalid_value")
        json.dumps(result.details)


def test_non_json_deltas_and_values_are_rejected_without_echoing_them() -> None:
    assert normalize_result(Ok({"k": float("inf")})).reason == "invalid_delta"  # type: ignore[union-attr]
    assert normalize_result({"ok": ["not", "a", "map"]}) == ActionFailed("invalid_delta", {"type": "list"})
    failure = normalize_result(Output("secret\x00value", {}))
    assert isinstance(failure, ActionFailed) and failure.reason == "invalid_value" and "secret" not in str(failure)
    assert normalize_result(Pause("", "s", {})).reason == "invalid_action_result"  # type: ignore[union-attr]
    assert normalize_result({"output": 1}) == Output(1, {})  # omitted keys take their defaults
    assert normalize_result({"transfer": "b"}) == Transfer("b", None, {})
    assert normalize_result({"error": "x"}) == ActionFailed("x", {})


def test_results_are_private_copies() -> None:
    delta = {"k": [1]}
    result = normalize_result(Ok(delta))
    delta["k"].append(2)
    assert result == Ok({"k": [1]})


def test_run_callable_raises_returned_failures_so_retries_cover_them() -> None:
    from adk_actors.runtime.callables import callable_ref

    with pytest.raises(WorkflowError) as info:
        run_callable(callable_ref(lambda s: {"error": "nope", "details": {"n": 1}}), 1, "action", {}, {})
    assert info.value.reason == "nope" and info.value.details["n"] == 1
    assert run_callable(callable_ref(lambda s, c: c["input"]), 2, "route", {}, {"input": "x"}) == {
        "output": "x",
        "delta": {},
    }
    with pytest.raises(WorkflowError) as info:
        run_callable(callable_ref(lambda s: object()), 1, "select", {}, {})
    assert info.value.reason == "invalid_value"

    async def later(state: dict[str, Any]) -> Output:
        return Output("async", {})

    assert run_callable(callable_ref(later), 1, "action", {}, {}) == {"output": "async", "delta": {}}


# -- merge properties ----------------------------------------------------------------------------------------------

_branch_deltas = st.lists(
    st.dictionaries(st.sampled_from("abcde"), st.integers(0, 3) | st.booleans(), max_size=4), min_size=1, max_size=5
)


def _pairs(deltas: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"b{i}", d) for i, d in enumerate(deltas)]


@settings(max_examples=300, deadline=None)
@given(deltas=_branch_deltas)
def test_ordered_last_wins_is_sequential_application_in_declared_order(deltas: list[dict[str, Any]]) -> None:
    expected: dict[str, Any] = {}
    for delta in deltas:
        expected.update(delta)
    assert merge_deltas(_pairs(deltas), "ordered_last_wins") == expected


@settings(max_examples=300, deadline=None)
@given(deltas=_branch_deltas, data=st.data())
def test_reject_conflicts_fails_exactly_on_unequal_writes_and_is_order_independent(
    deltas: list[dict[str, Any]], data: st.DataObject
) -> None:
    def conflicting(key: str) -> bool:
        values = [json.dumps(d[key]) for d in deltas if key in d]
        return len(set(values)) > 1

    conflicts = sorted(k for k in {k for d in deltas for k in d} if conflicting(k))
    shuffled = data.draw(st.permutations(_pairs(deltas)))
    if conflicts:
        for order in (_pairs(deltas), shuffled):
            with pytest.raises(WorkflowError) as info:
                merge_deltas(order, "reject_conflicts")
            assert info.value.reason == "merge_conflict" and info.value.details["key"] in conflicts
    else:
        merged = merge_deltas(_pairs(deltas), "reject_conflicts")
        assert merged == merge_deltas(_pairs(deltas), "ordered_last_wins") == merge_deltas(shuffled)


@settings(max_examples=100, deadline=None)
@given(deltas=_branch_deltas, order=st.data(), merge=st.sampled_from(["reject_conflicts", "ordered_last_wins"]))
def test_completion_order_never_changes_a_parallel_outcome(
    deltas: list[dict[str, Any]], order: st.DataObject, merge: str
) -> None:
    compiled = parallel(*deltas, merge=merge)

    def outcome_in(permutation: list[int]) -> tuple[Any, ...]:
        engine = Engine(compiled, {})
        tasks = engine.start()
        for index in permutation:
            engine.on_result(tasks[index].id, execute(tasks[index]))
        result = engine.outcome
        if isinstance(result, Completed):
            return ("completed", result.state, result.output)
        assert isinstance(result, Failed)
        return ("failed", result.reason, result.details)

    permutation = order.draw(st.permutations(list(range(len(deltas)))))
    assert outcome_in(list(range(len(deltas)))) == outcome_in(permutation)


@settings(max_examples=200, deadline=None)
@given(before=_deltas, after=_deltas)
def test_state_delta_turns_before_into_after_when_no_key_is_removed(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    after = {**before, **after}
    delta = state_delta(before, after)
    assert {**before, **delta} == after
    assert all(k not in before or json.dumps(before[k]) != json.dumps(v) for k, v in delta.items())


def test_permutations_helper_is_exhaustive_for_small_forks() -> None:
    # Every completion order of a three-branch fork gives the same checkpointed outputs.
    outputs = set()
    for permutation in itertools.permutations(range(3)):
        engine = Engine(parallel({"a": 1}, {"b": 2}, {"c": 3}), {})
        tasks = engine.start()
        for index in permutation:
            engine.on_result(tasks[index].id, execute(tasks[index]))
        assert isinstance(engine.outcome, Completed)
        outputs.add(json.dumps(engine.outcome.checkpoint["output"]))
    assert len(outputs) == 1


# -- resume properties ---------------------------------------------------------------------------------------------


def record_step(state: dict[str, Any], context: dict[str, Any]) -> Output:
    calls[context["node"]] += 1
    return Output(context["node"], {context["node"]: state.get("total", 0), "total": state.get("total", 0) + 1})


@settings(max_examples=100, deadline=None)
@given(steps=st.integers(1, 6), fork_width=st.integers(1, 3), cut=st.integers(0, 20), answer_in_flight=st.booleans())
def test_cancel_anywhere_then_resume_reaches_the_same_end_and_replays_only_what_was_in_flight(
    steps: int, fork_width: int, cut: int, answer_in_flight: bool
) -> None:
    branches = [f"f{i}" for i in range(fork_width)]
    nodes: list[dict[str, Any]] = [{"id": f"s{i}", "run": record_step} for i in range(steps)]
    nodes += [
        {"id": "fork", "type": "fork", "branches": branches, "join": "join", "max_concurrency": 2},
        *({"id": b, "run": record_step} for b in branches),
        {"id": "join", "type": "join"},
    ]
    edges = {f"s{i}": f"s{i + 1}" for i in range(steps - 1)} | {f"s{steps - 1}": "fork", "join": "end_node"}
    compiled = graph(nodes, edges, entry="s0")

    calls.clear()
    reference = run(compiled)
    assert isinstance(reference, Completed)
    calls.clear()

    engine = Engine(compiled, {})
    queue = engine.start()
    for _ in range(cut):
        if engine.outcome is not None or not queue:
            break
        task = queue.pop(0)
        queue += engine.on_result(task.id, execute(task))
    if engine.outcome is None:
        for task in list(engine.in_flight.values()):
            if answer_in_flight:
                execute(task)  # ran, but the answer is lost with the cancel
        checkpoint = engine.checkpoint()
        engine.cancel("restart")
        outcome = resume(compiled, checkpoint)
    else:
        outcome = engine.outcome
    assert isinstance(outcome, Completed)
    # Branches of one fork each see the fork's input state, so the final state is the same whatever the cut.
    assert outcome.state == reference.state and outcome.output == reference.output
    assert all(n <= (2 if answer_in_flight else 1) for n in calls.values())
    assert outcome.checkpoint["used"] == reference.checkpoint["used"]


def test_a_fork_pause_with_branches_not_yet_launched_runs_them_after_resume() -> None:
    compiled = graph(
        [
            {"id": "fork", "type": "fork", "branches": ["review", "a", "c"], "join": "join", "max_concurrency": 1},
            {"id": "review", "run": pause_for_review},
            {"id": "a", "run": count_a},
            {"id": "c", "run": count_c},
            {"id": "join", "type": "join"},
        ],
        {"join": "end_node"},
    )
    paused = run(compiled)
    assert isinstance(paused, Paused) and paused.details["node"] == "review"
    assert calls == Counter(review=1)
    done = resume(compiled, paused.checkpoint, "ok")
    assert isinstance(done, Completed) and done.output == {"review": "ok", "a": "a-out", "c": "c-out"}
    assert calls == Counter(review=1, a=1, c=1)


def test_a_second_branch_may_pause_after_the_first_was_resumed() -> None:
    compiled = graph(
        [
            {"id": "fork", "type": "fork", "branches": ["r1", "r2"], "join": "join", "max_concurrency": 1},
            {"id": "r1", "run": pause_for_review},
            {"id": "r2", "run": pause_for_review},
            {"id": "join", "type": "join"},
        ],
        {"join": "end_node"},
    )
    first = run(compiled)
    assert isinstance(first, Paused) and first.details["node"] == "r1"
    second = resume(compiled, first.checkpoint, "one")
    assert isinstance(second, Paused) and second.details["node"] == "r2"
    done = resume(compiled, second.checkpoint, "two")
    assert isinstance(done, Completed) and done.output == {"r1": "one", "r2": "two"}
    assert calls == Counter(review=2)


# -- failures are bounded structural values --------------------------------------------------------------------------


_wide = st.recursive(
    st.none() | st.integers() | st.text(max_size=8) | st.text(min_size=4097, max_size=4200),
    lambda inner: st.lists(inner, max_size=70) | st.dictionaries(st.text(max_size=300), inner, max_size=70),
    max_leaves=150,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@given(reason=st.text(max_size=600), details=_wide, nesting=st.integers(0, 12))
def test_a_failure_fed_to_the_engine_becomes_a_bounded_failed_value_naming_its_node(
    reason: str, details: Any, nesting: int
) -> None:
    compiled = sequential(lambda state: Ok())
    for level in range(nesting):  # each nested workflow wraps the failure once more ({"nested": ...})
        compiled = compile_workflow(
            {
                "version": 1,
                "id": f"n{level}",
                "kind": "graph",
                "entry": "sub",
                "nodes": [{"id": "sub", "type": "workflow", "workflow": compiled}],
                "edges": {"sub": "end_node"},
            }
        )
    engine = Engine(compiled, {})
    [task] = engine.start()
    err = WorkflowError("raised", reason=reason or "x")
    err.details = {"payload": details, "node": "spoofed"}  # replaced after construction: not yet bounded
    assert engine.on_result(task.id, ActionFailed.from_error(err)) == []
    outcome = failed(engine.outcome, errors.bounded_reason(reason or "x"))
    assert len(outcome.reason) <= errors.MAX_REASON_CHARS
    assert within_detail_bounds(outcome.details)
    assert outcome.details["node"] == ("sub" if nesting else "s1")  # the engine's key, not the action's
    canonical_dumps([outcome.reason, outcome.details])  # storable as it is
    assert Failed(outcome.reason, outcome.details, outcome.checkpoint) == outcome  # bounding it again: no change


@pytest.mark.parametrize("module", ["adk_actors.workflows.engine", "adk_actors.workflows.results"])
def test_the_public_surface_is_explicit_and_sorted(module: str) -> None:
    mod = __import__(module, fromlist=["__all__"])
    assert list(mod.__all__) == sorted(mod.__all__, key=_isort)
    assert all(hasattr(mod, name) for name in mod.__all__)


def _isort(name: str) -> tuple[int, str]:
    """Ruff's ``__all__`` order: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)
