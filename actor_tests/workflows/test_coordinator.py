"""The workflow coordinator on the shared node: every README example, merges, retries (backoff, attempt counts
reset on resume), timeouts, the deadline (also mid-branch), cancel and resume, a fork pausing with a sibling in
flight, agent and tool nodes, status, retention and input validation.

Actions run in real worker processes, so they signal the test through FIFOs (``wf_signals``): a blocked action
posts ``{"event": "waiting", "pid": ...}`` and waits at a gate only the test opens; the test waits with
``select()`` deadlines and checks that a killed worker really exited on its pidfd. Calls are counted with
``CrossProcessCounter`` (a closure's captured ``int`` would be a copy in each worker).
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actor_tests.agents.conftest import config_for, make_spawner, unique
from actor_tests.workflows.wf_signals import Channel, Gate, hold, post, wait_exit
from adk_actors.agents.api import AGENT_ACTOR, local_id
from adk_actors.agents.spec import build_spec
from adk_actors.emulator import Emulator
from adk_actors.errors import WorkflowError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import CrossProcessCounter
from adk_actors.tools import FunctionTool, long_running
from adk_actors.workflows import (
    ActionFailed,
    Cancelled,
    Completed,
    Failed,
    Ok,
    Output,
    Pause,
    Paused,
    Stop,
    Transfer,
    cancel_workflow,
    compile_workflow,
    resume_workflow,
    run_workflow,
    start_workflow,
    wait_workflow,
    workflow_checkpoint,
    workflow_status,
)

WAIT = 30.0
"""Seconds a test waits for an outcome."""


@dataclass
class Lab:
    """One test's signals: a channel actions post to, gates they wait at, counters of their calls."""

    dir: Path
    channel: Channel

    def gate(self, name: str) -> Gate:
        """The gate ``name`` (made on first use)."""
        return Gate(self.dir / f"{name}.gate")

    def counter(self, name: str) -> CrossProcessCounter:
        return CrossProcessCounter(self.dir / f"{name}.count")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    channel = Channel(tmp_path / "signals.fifo")
    try:
        yield Lab(tmp_path, channel)
    finally:
        channel.close()


def killed_workers(system: ActorSystemHandle) -> int:
    """How many workers the pool has killed so far (deadline misses and cancels)."""
    return int(system.ask("workers", GetStatus())["killed"])


def assert_worker_killed(system: ActorSystemHandle, pid: int, killed_before: int) -> None:
    """The worker ``pid`` exited (it was blocked at a gate nobody opened) and the pool counted a kill."""
    assert wait_exit(pid, 10.0), f"worker {pid} still runs"
    pool = system.ask("workers", GetStatus())
    assert pool["killed"] >= killed_before + 1
    assert all(w["state"] == "killed" for w in pool["workers"] if w["pid"] == pid)


def gated(name: str, lab: Lab, result: Any) -> Any:
    """An action that counts its calls, waits at the gate ``name`` and then returns ``result``."""
    calls, gate, channel = lab.counter(name), lab.gate(name).path, lab.channel.path

    def run(state: dict[str, Any], context: dict[str, Any]) -> Any:
        call = calls.incr()
        if not hold(gate, channel, step=name, call=call, attempt=context["attempt"]):
            return ActionFailed("gate_not_opened")
        return result

    return run


def counted(name: str, lab: Lab, result: Any) -> Any:
    """An action that counts its calls and returns ``result`` at once."""
    calls = lab.counter(name)

    def run(state: dict[str, Any]) -> Any:
        calls.incr()
        return result

    return run


# ---- the README examples --------------------------------------------------------------------------------------


def add_one(state: dict[str, Any], context: dict[str, Any]) -> Any:
    assert context["input"] is None
    return Output("counted", {"count": state.get("count", 0) + 1})


def mark_done(state: dict[str, Any], context: dict[str, Any]) -> Any:
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


def test_readme_sequential_completes_with_output_ready_and_a_completed_checkpoint(system: ActorSystemHandle) -> None:
    outcome = run_workflow(compile_workflow(SEQUENTIAL), {"count": 0}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"count": 1, "done": True}
    assert outcome.checkpoint["completed"] is True and outcome.checkpoint["output"] == "ready"
    assert outcome.output == "ready"


def test_readme_parallel_merges_both_deltas_and_outputs_a_map_by_branch(system: ActorSystemHandle) -> None:
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
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": 1, "right": 2}
    assert outcome.checkpoint["output"] == {"left": "left-output", "right": "right-output"}


def test_readme_retry_fails_attempt_one_and_succeeds_on_attempt_two(system: ActorSystemHandle, lab: Lab) -> None:
    calls, channel = lab.counter("retryable"), lab.channel.path

    def retry_action(state: dict[str, Any], context: dict[str, Any]) -> Any:
        call = calls.incr()
        post(channel, event="attempt", call=call, attempt=context["attempt"])
        if call == 1:
            return ActionFailed("transient_failure")
        return Output("recovered", {"retried": True})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-workflow-retry-v1",
            "kind": "sequential",
            "max_steps": 1,
            "steps": [
                {
                    "id": "retryable",
                    "run": retry_action,
                    "timeout": 1000,
                    "retry": {"max_attempts": 2, "backoff_ms": 10},
                }
            ],
        }
    )
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"retried": True} and outcome.output == "recovered"
    assert calls.value == 2
    seen = [lab.channel.next(), lab.channel.next()]
    assert [(s["call"], s["attempt"]) for s in seen] == [(1, 1), (2, 2)]  # context["attempt"] counts the calls


def test_retry_backoff_ms_delays_every_next_attempt_by_at_least_the_backoff(
    system: ActorSystemHandle, lab: Lab
) -> None:
    calls, channel, backoff_ms = lab.counter("flaky"), lab.channel.path, 400

    def flaky(state: dict[str, Any], context: dict[str, Any]) -> Any:
        # CLOCK_MONOTONIC is one clock for every process on the machine, so workers' stamps compare.
        post(channel, event="attempt", call=calls.incr(), attempt=context["attempt"], at=time.monotonic())
        return ActionFailed("transient_failure") if context["attempt"] < 3 else Output("recovered", {"ok": True})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "retry-backoff-v1",
            "kind": "sequential",
            "steps": [{"id": "flaky", "run": flaky, "retry": {"max_attempts": 3, "backoff_ms": backoff_ms}}],
        }
    )
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed) and outcome.output == "recovered"
    attempts = [lab.channel.expect("attempt") for _ in range(3)]
    assert [(a["call"], a["attempt"]) for a in attempts] == [(1, 1), (2, 2), (3, 3)]
    gaps = [later["at"] - earlier["at"] for earlier, later in itertools.pairwise(attempts)]
    assert all(backoff_ms / 1000 <= gap < backoff_ms / 1000 + 3.0 for gap in gaps), gaps


def flaky_then_gated(name: str, lab: Lab) -> Any:
    """Fails its first attempt, then waits at the gate ``name`` on every later attempt and returns ``Ok``."""
    calls, gate, channel = lab.counter(name), lab.gate(name).path, lab.channel.path

    def run(state: dict[str, Any], context: dict[str, Any]) -> Any:
        call = calls.incr()
        post(channel, event="attempt", step=name, call=call, attempt=context["attempt"])
        if context["attempt"] == 1:
            return ActionFailed("transient_failure")
        if not hold(gate, channel, step=name, call=call, attempt=context["attempt"]):
            return ActionFailed("gate_not_opened")
        return Ok({name: True})

    return run


def test_retry_counts_start_again_at_one_when_a_node_cancelled_mid_retry_is_resumed(
    system: ActorSystemHandle, lab: Lab
) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "retry-reset-cancel-v1",
            "kind": "sequential",
            "steps": [
                {"id": "flaky", "run": flaky_then_gated("flaky", lab), "retry": {"max_attempts": 2, "backoff_ms": 10}}
            ],
        }
    )
    ref = start_workflow(compiled, {}, system=system)
    lab.channel.expect("attempt", call=1, attempt=1)
    lab.channel.expect("attempt", call=2, attempt=2)
    lab.channel.expect("waiting", step="flaky", attempt=2)  # the last attempt this execution had is in flight
    checkpoint = workflow_checkpoint(ref, system=system)
    cancel_workflow(ref, "revise_later", system=system)
    assert wait_workflow(ref, WAIT, system=system) == Cancelled("revise_later", checkpoint)

    resumed = resume_workflow(compiled, checkpoint, system=system)
    lab.channel.expect("attempt", call=3, attempt=1)  # a count carried over would be attempt 3 and past max_attempts
    lab.channel.expect("attempt", call=4, attempt=2)
    lab.channel.expect("waiting", step="flaky", attempt=2)
    lab.gate("flaky").open()
    outcome = wait_workflow(resumed, WAIT, system=system)
    assert isinstance(outcome, Completed) and outcome.state == {"flaky": True}
    assert lab.counter("flaky").value == 4


def test_retry_counts_start_again_at_one_when_a_fork_pauses_a_sibling_mid_retry_and_is_resumed(
    system: ActorSystemHandle, lab: Lab
) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "retry-reset-pause-v1",
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["flaky", "approve"], "join": "join"},
                {"id": "flaky", "run": flaky_then_gated("flaky", lab), "retry": {"max_attempts": 2, "backoff_ms": 10}},
                {"id": "approve", "run": gated("approve", lab, Pause("human_approval", "Approve?"))},
                {"id": "join", "type": "join"},
            ],
            "edges": {"join": "end_node"},
        }
    )
    ref = start_workflow(compiled, {}, system=system)
    seen = [lab.channel.next() for _ in range(4)]  # the two branches interleave
    assert [(m["event"], m["attempt"]) for m in seen if m["step"] == "flaky"] == [
        ("attempt", 1),
        ("attempt", 2),
        ("waiting", 2),
    ]
    assert [m["event"] for m in seen if m["step"] == "approve"] == ["waiting"]
    lab.gate("approve").open()  # the pause kills "flaky" in its second attempt
    paused = wait_workflow(ref, WAIT, system=system)
    assert isinstance(paused, Paused) and paused.details["node"] == "approve"

    resumed = resume_workflow(compiled, paused.checkpoint, resume_input="approved", system=system)
    lab.channel.expect("attempt", step="flaky", call=3, attempt=1)
    lab.channel.expect("attempt", step="flaky", call=4, attempt=2)
    lab.channel.expect("waiting", step="flaky", attempt=2)
    lab.gate("flaky").open()
    outcome = wait_workflow(resumed, WAIT, system=system)
    assert isinstance(outcome, Completed) and outcome.state == {"flaky": True}
    assert lab.counter("approve").value == 1  # the paused branch never ran again


def test_readme_loop_stops_when_until_holds_at_attempt_two(system: ActorSystemHandle) -> None:
    def body(state: dict[str, Any]) -> Any:
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
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"attempt": 2} and outcome.output == 2


def test_readme_transfer_hands_off_to_the_specialist_and_consumes_the_transfer_budget(
    system: ActorSystemHandle,
) -> None:
    def triage(state: dict[str, Any], context: dict[str, Any]) -> Any:
        return Transfer("specialist", "handoff", {"triaged": True})

    def specialist(state: dict[str, Any], context: dict[str, Any]) -> Any:
        assert state["triaged"] is True and context["input"] == "handoff"
        return Stop("resolved", {"resolved": True})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-transfer-v1",
            "kind": "transfer",
            "entry": "triage",
            "max_transfers": 1,
            "members": {"triage": {"run": triage}, "specialist": {"run": specialist}},
        }
    )
    ref = start_workflow(compiled, {}, system=system)
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"triaged": True, "resolved": True} and outcome.output == "resolved"
    # The accepted handoff is an event whose actions name the new owner, and it consumed the transfer budget.
    [event] = workflow_status(ref, system=system)["events"]
    assert event["author"] == "triage" and event["actions"]["transfer_to_agent"] == "specialist"
    assert outcome.checkpoint["used"]["transfers"] == 1 and outcome.checkpoint["budgets"]["transfers"] == 0
    assert outcome.checkpoint["visits"] == {"triage": 1, "specialist": 1}


def test_readme_graph_routes_the_counter_back_to_itself_until_three(system: ActorSystemHandle) -> None:
    def counter(state: dict[str, Any]) -> Any:
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
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"count": 3} and outcome.output == 3


def test_readme_fork_join_gives_the_join_both_outputs_keyed_by_branch(system: ActorSystemHandle) -> None:
    def join(state: dict[str, Any], context: dict[str, Any]) -> Any:
        outputs = context["input"]
        assert outputs == {"left": "left-output", "right": "right-output"}
        return Output(outputs, {"joined": True})

    compiled = compile_workflow(
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
                },
                {"id": "left", "run": lambda state: Output("left-output", {"left": 1})},
                {"id": "right", "run": lambda state: Output("right-output", {"right": 2})},
                {"id": "join", "type": "join", "run": join},
            ],
            "edges": {"left": "join", "right": "join", "join": "end_node"},
        }
    )
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": 1, "right": 2, "joined": True}
    assert outcome.output == {"left": "left-output", "right": "right-output"}


def test_readme_approval_pauses_then_resume_input_routes_to_accepted(system: ActorSystemHandle) -> None:
    def approved(state: dict[str, Any], context: dict[str, Any]) -> str:
        assert context["input"]["approved"] is True
        return "accepted"

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-graph-approval-v1",
            "kind": "graph",
            "entry": "approval",
            "max_steps": 3,
            "nodes": [
                {
                    "id": "approval",
                    "run": lambda state: Pause("human_approval", "Approve this action", {"approval_requested": True}),
                },
                {"id": "accepted", "run": lambda state: Ok({"accepted": True})},
            ],
            "edges": {"approval": {"route": approved}, "accepted": "end_node"},
        }
    )
    paused = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(paused, Paused)
    assert paused.details == {"reason": "human_approval", "summary": "Approve this action", "node": "approval"}
    assert paused.state == {"approval_requested": True}  # the paused node's delta is committed first
    ref = resume_workflow(compiled, paused.checkpoint, resume_input={"approved": True}, system=system)
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"approval_requested": True, "accepted": True}
    assert outcome.checkpoint["visits"] == {"approval": 1, "accepted": 1}  # the paused node ran once


# ---- merges ---------------------------------------------------------------------------------------------------


def test_unequal_writes_to_one_key_fail_with_merge_conflict(system: ActorSystemHandle) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "conflict-v1",
            "kind": "parallel",
            "branches": [
                {"id": "a", "run": lambda state: Ok({"k": 1, "same": True})},
                {"id": "b", "run": lambda state: Ok({"k": 2, "same": True})},
            ],
        }
    )
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "merge_conflict"
    assert outcome.details == {"key": "k", "branches": ["a", "b"], "node": "$fork"}
    assert outcome.checkpoint["state"] == {}


def test_ordered_last_wins_follows_declared_order_when_the_first_branch_finishes_last(
    system: ActorSystemHandle, lab: Lab
) -> None:
    gate = lab.gate("first")
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "ordered-v1",
            "kind": "parallel",
            "merge": "ordered_last_wins",
            "branches": [
                {"id": "first", "run": gated("first", lab, Output("first-output", {"winner": "first"}))},
                {"id": "second", "run": lambda state: Output("second-output", {"winner": "second"})},
            ],
        }
    )
    ref = start_workflow(compiled, {}, system=system)
    lab.channel.expect("waiting", step="first")
    # Wait for the real condition — the second branch committed while the first is still held — by asking for
    # the checkpoint (each ask is a round trip to the coordinator; no sleep).
    deadline = time.monotonic() + WAIT
    while "second" not in (cursor := workflow_checkpoint(ref, system=system)["cursor"]).get("done", {}):
        assert time.monotonic() < deadline, "the second branch never committed"
    assert list(cursor["done"]) == ["second"]  # completion order: second, then first
    gate.open()
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"winner": "second"}  # the later-declared branch wins, not the later-finishing one
    assert outcome.output == {"first": "first-output", "second": "second-output"}


# ---- timeouts and the deadline ----------------------------------------------------------------------------------


def test_an_action_past_its_timeout_is_killed_retried_and_then_fails_with_job_timeout(
    system: ActorSystemHandle, lab: Lab
) -> None:
    killed_before = killed_workers(system)
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "timeout-v1",
            "kind": "sequential",
            "steps": [
                {
                    "id": "slow",
                    "run": gated("slow", lab, Ok({"never": True})),
                    "timeout": 1000,
                    "retry": {"max_attempts": 2, "backoff_ms": 10},
                }
            ],
        }
    )
    t0 = time.monotonic()
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "job_timeout" and outcome.details["node"] == "slow"
    assert 2.0 <= time.monotonic() - t0 < 2.0 + 3.0
    attempts = [lab.channel.expect("waiting", step="slow"), lab.channel.expect("waiting", step="slow")]
    assert [(a["call"], a["attempt"]) for a in attempts] == [(1, 1), (2, 2)]
    assert lab.counter("slow").value == 2
    for attempt in attempts:
        assert_worker_killed(system, attempt["pid"], killed_before)
    assert killed_workers(system) >= killed_before + 2
    assert outcome.checkpoint["visits"] == {} and outcome.checkpoint["state"] == {}


def test_the_workflow_deadline_fails_promptly_mid_step_and_kills_the_worker(
    system: ActorSystemHandle, lab: Lab
) -> None:
    killed_before = killed_workers(system)
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "deadline-v1",
            "kind": "sequential",
            "steps": [
                {"id": "quick", "run": lambda state: Output("quick", {"quick": True})},
                {"id": "stuck", "run": gated("stuck", lab, Ok({"never": True}))},
            ],
        }
    )
    t0 = time.monotonic()
    ref = start_workflow(compiled, {}, system=system, timeout_ms=1500)
    stuck = lab.channel.expect("waiting", step="stuck")
    outcome = wait_workflow(ref, WAIT, system=system)
    elapsed = time.monotonic() - t0
    assert isinstance(outcome, Failed) and outcome.reason == "deadline_exceeded"
    assert 1.5 <= elapsed < 1.5 + 2.0
    assert outcome.checkpoint["state"] == {"quick": True} and outcome.checkpoint["visits"] == {"quick": 1}
    assert_worker_killed(system, stuck["pid"], killed_before)
    assert workflow_status(ref, system=system)["state"] == "failed"


def test_an_absolute_deadline_option_ends_the_workflow_before_its_timeout(system: ActorSystemHandle, lab: Lab) -> None:
    killed_before = killed_workers(system)
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "abs-deadline-v1",
            "kind": "sequential",
            "timeout": 60_000,
            "steps": [{"id": "stuck", "run": gated("stuck", lab, Ok({"never": True}))}],
        }
    )
    t0 = time.monotonic()
    # The deadline is counted from the caller's clock reading, not from when the coordinator starts.
    outcome = run_workflow(compiled, {}, system=system, deadline=t0 + 1.5, timeout_ms=30_000)
    elapsed = time.monotonic() - t0
    stuck = lab.channel.expect("waiting", step="stuck")
    assert isinstance(outcome, Failed) and outcome.reason == "deadline_exceeded"
    assert 1.5 <= elapsed < 1.5 + 2.0
    assert_worker_killed(system, stuck["pid"], killed_before)


def test_a_deadline_already_past_fails_the_workflow_before_any_step(system: ActorSystemHandle, lab: Lab) -> None:
    compiled = compile_workflow({**SEQUENTIAL, "steps": [{"id": "never", "run": counted("never", lab, Ok())}]})
    outcome = run_workflow(compiled, {"count": 0}, system=system, deadline=time.monotonic() - 1.0, timeout=WAIT)
    assert isinstance(outcome, Failed) and outcome.reason == "deadline_exceeded"
    assert lab.counter("never").value == 0


@given(
    st.one_of(
        st.text(max_size=4),
        st.booleans(),
        st.sampled_from([math.nan, math.inf, -math.inf]),
        st.lists(st.integers(), max_size=2),
    )
)
def test_a_deadline_option_that_is_not_monotonic_seconds_is_invalid(system: ActorSystemHandle, bad: Any) -> None:
    compiled = compile_workflow({**SEQUENTIAL, "steps": [{"id": "never", "run": lambda state: Ok()}]})
    with pytest.raises(WorkflowError) as err:
        start_workflow(compiled, {"count": 0}, system=system, deadline=bad)  # rejected before anything starts
    assert (err.value.reason, err.value.details) == ("invalid_value", {"key": "deadline"})


@pytest.mark.parametrize("kind", ["parallel", "fork"])
def test_the_deadline_passing_mid_branch_fails_promptly_kills_the_inflight_worker_and_keeps_the_finished_sibling(
    system: ActorSystemHandle, lab: Lab, kind: str
) -> None:
    branches = [
        {"id": "quick", "run": lambda state: Output("quick-output", {"quick": True})},
        {"id": "stuck", "run": gated("stuck", lab, Ok({"never": True}))},
    ]
    if kind == "parallel":
        spec: dict[str, Any] = {"kind": "parallel", "branches": branches}
    else:
        spec = {
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["quick", "stuck"], "join": "join"},
                *branches,
                {"id": "join", "type": "join"},
            ],
            "edges": {"join": "end_node"},
        }
    compiled = compile_workflow({"version": 1, "id": f"deadline-{kind}-v1", **spec})
    killed_before = killed_workers(system)
    t0 = time.monotonic()
    ref = start_workflow(compiled, {}, system=system, timeout_ms=2000)
    stuck = lab.channel.expect("waiting", step="stuck")
    # The sibling committed while "stuck" is in flight (each checkpoint ask is a round trip; no sleep).
    deadline = time.monotonic() + WAIT
    while "quick" not in workflow_checkpoint(ref, system=system)["cursor"].get("done", {}):
        assert time.monotonic() < deadline, "the quick branch never committed"
    outcome = wait_workflow(ref, WAIT, system=system)
    elapsed = time.monotonic() - t0
    assert isinstance(outcome, Failed) and outcome.reason == "deadline_exceeded"
    assert 2.0 <= elapsed < 2.0 + 2.0
    assert outcome.checkpoint["cursor"]["done"] == {"quick": {"output": "quick-output", "delta": {"quick": True}}}
    assert outcome.checkpoint["visits"] == {"quick": 1} and outcome.checkpoint["used"]["steps"] == 1
    assert_worker_killed(system, stuck["pid"], killed_before)
    assert lab.counter("stuck").value == 1


# ---- retention --------------------------------------------------------------------------------------------------


def test_a_finished_coordinator_answers_for_retention_ms_then_exits_and_its_ref_is_not_found(
    system: ActorSystemHandle,
) -> None:
    retention_ms = 1000
    t0 = time.monotonic()
    ref = start_workflow(sequential_ok(), {}, system=system, retention_ms=retention_ms)
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Completed)
    answers = 0
    while True:  # each status ask is a round trip to the coordinator, bounded by the deadline below
        try:
            status = workflow_status(ref, system=system)
            checkpoint = workflow_checkpoint(ref, system=system)
        except WorkflowError as err:
            assert err.reason == "not_found"
            gone = time.monotonic()
            break
        assert status["state"] == "completed" and checkpoint == outcome.checkpoint
        answers += 1
        assert time.monotonic() < t0 + retention_ms / 1000 + WAIT, "the coordinator never exited"
    assert answers >= 1
    assert gone - t0 >= retention_ms / 1000  # it stayed for the whole retention, counted from before its start
    for ask in (
        lambda: wait_workflow(ref, WAIT, system=system),
        lambda: workflow_checkpoint(ref, system=system),
        lambda: cancel_workflow(ref, system=system),
    ):
        with pytest.raises(WorkflowError) as gone_err:
            ask()
        assert gone_err.value.reason == "not_found"


def sequential_ok() -> Any:
    return compile_workflow(
        {
            "version": 1,
            "id": "retention-v1",
            "kind": "sequential",
            "steps": [{"id": "only", "run": lambda state: Ok({"done": True})}],
        }
    )


# ---- cancel and resume ----------------------------------------------------------------------------------------


def test_cancel_kills_the_blocked_worker_and_resume_reruns_only_the_uncommitted_step(
    system: ActorSystemHandle, lab: Lab
) -> None:
    gate = lab.gate("wait")
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "readme-resume-v1",
            "kind": "sequential",
            "max_steps": 2,
            "steps": [
                {"id": "first", "run": counted("first", lab, Ok({"first": True}))},
                {"id": "wait", "run": gated("wait", lab, Ok({"released": True}))},
            ],
        }
    )
    killed_before = killed_workers(system)
    ref = start_workflow(compiled, {}, system=system)
    first_worker = lab.channel.expect("waiting", step="wait", call=1)
    status = workflow_status(ref, system=system)
    assert (status["state"], status["in_flight"], status["workflow_id"]) == ("running", 1, "readme-resume-v1")
    checkpoint = workflow_checkpoint(ref, system=system)
    assert checkpoint["state"] == {"first": True} and checkpoint["visits"] == {"first": 1}

    cancel_workflow(ref, "revise_later", system=system)
    assert wait_workflow(ref, WAIT, system=system) == Cancelled("revise_later", checkpoint)
    assert_worker_killed(system, first_worker["pid"], killed_before)
    assert workflow_status(ref, system=system)["state"] == "cancelled"

    resumed = resume_workflow(compiled, checkpoint, system=system)
    second_worker = lab.channel.expect("waiting", step="wait", call=2)
    assert second_worker["pid"] != first_worker["pid"]
    gate.open()
    outcome = wait_workflow(resumed, WAIT, system=system)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"first": True, "released": True}
    assert (lab.counter("first").value, lab.counter("wait").value) == (1, 2)
    assert outcome.checkpoint["used"]["steps"] == 2 and outcome.checkpoint["budgets"]["steps"] == 0


def test_a_fork_branch_pausing_cancels_its_in_flight_sibling_which_alone_reruns_after_resume(
    system: ActorSystemHandle, lab: Lab
) -> None:
    slow_gate, approve_gate = lab.gate("slow"), lab.gate("approve")

    def join(state: dict[str, Any], context: dict[str, Any]) -> Any:
        return Output(context["input"], {"joined": True})

    compiled = compile_workflow(
        {
            "version": 1,
            "id": "fork-pause-v1",
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["slow", "approve"], "join": "join"},
                {"id": "slow", "run": gated("slow", lab, Output("slow-output", {"slow": True}))},
                {
                    "id": "approve",
                    "run": gated("approve", lab, Pause("human_approval", "Approve?", {"approval_requested": True})),
                },
                {"id": "join", "type": "join", "run": join},
            ],
            "edges": {"join": "end_node"},
        }
    )
    killed_before = killed_workers(system)
    ref = start_workflow(compiled, {}, system=system)
    waiting = {m["step"]: m for m in (lab.channel.next(), lab.channel.next())}
    assert set(waiting) == {"slow", "approve"}
    approve_gate.open()  # the approval pauses while "slow" is still in flight

    paused = wait_workflow(ref, WAIT, system=system)
    assert isinstance(paused, Paused)
    assert paused.details == {"reason": "human_approval", "summary": "Approve?", "node": "approve", "fork": "fork"}
    cursor = paused.checkpoint["cursor"]
    assert cursor["paused"] == {"approve": {"delta": {"approval_requested": True}}}  # the branch delta, committed
    assert cursor["done"] == {}  # the sibling has no committed result
    assert_worker_killed(system, waiting["slow"]["pid"], killed_before)

    resumed = resume_workflow(compiled, paused.checkpoint, resume_input={"approved": True}, system=system)
    lab.channel.expect("waiting", step="slow", call=2)
    slow_gate.open()
    outcome = wait_workflow(resumed, WAIT, system=system)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"slow": "slow-output", "approve": {"approved": True}}
    assert outcome.state == {"slow": True, "approval_requested": True, "joined": True}
    assert (lab.counter("slow").value, lab.counter("approve").value) == (2, 1)
    assert lab.channel.pending() == b""  # the paused branch never waited again


# ---- agent and tool nodes ---------------------------------------------------------------------------------------


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        emulator.set_script(
            {"rules": [{"when": {"user_text_contains": "hello"}, "respond": {"text": "AGENT({user_text})"}}]}
        )
        yield emulator


def agent_graph(workflow_id: str, agent: str, **node: Any) -> Any:
    return compile_workflow(
        {
            "version": 1,
            "id": workflow_id,
            "kind": "graph",
            "entry": "ask",
            "nodes": [{"id": "ask", "type": "agent", "agent": {"name": agent, "prompt": "hello there"}, **node}],
            "edges": {"ask": "end_node"},
        }
    )


def test_an_agent_node_completes_with_the_agents_reply(system: ActorSystemHandle, emu: Emulator) -> None:
    spawn, cleanup = make_spawner(system)
    try:
        agent = spawn(unique("Helper"), config_for(emu))
        outcome = run_workflow(agent_graph("agent-node-v1", agent.name), {}, system=system, timeout=WAIT)
    finally:
        cleanup()
    assert isinstance(outcome, Completed)
    assert outcome.output == "AGENT(hello there)"
    assert len(emu.requests) == 1


def test_an_agent_name_registered_for_another_agent_fails_closed_with_agent_identity_mismatch(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    # The name "Alias_*" is registered for an agent that reports itself as "Real_*" (a registry alias mismatch).
    alias, real = unique("Alias"), unique("Real")
    ref = system.spawn(
        AGENT_ACTOR, build_spec(real, config_for(emu)), id=local_id(alias), name=alias, restart="temporary"
    )
    try:
        outcome = run_workflow(agent_graph("agent-mismatch-v1", alias), {}, system=system, timeout=WAIT)
    finally:
        system.stop_inner(ref)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "agent_identity_mismatch"
    assert outcome.details == {"agent": alias, "node": "ask"}
    assert emu.requests == []  # the mismatched agent was never prompted


def test_an_agent_node_naming_no_registered_agent_fails_promptly_instead_of_waiting_for_the_deadline(
    system: ActorSystemHandle,
) -> None:
    t0 = time.monotonic()
    outcome = run_workflow(
        agent_graph("agent-missing-v1", unique("Nobody")), {}, system=system, timeout_ms=3000, timeout=WAIT
    )
    assert isinstance(outcome, Failed)
    assert outcome.reason in ("name_not_found", "noproc"), outcome  # the runtime's "nothing is registered" tags
    assert outcome.details.get("node") == "ask"
    assert time.monotonic() - t0 < 3.0


def add(a: int, b: int) -> dict[str, int]:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return {"sum": a + b}


def test_a_tool_node_outputs_the_function_tools_result(system: ActorSystemHandle) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "tool-node-v1",
            "kind": "graph",
            "entry": "calc",
            "nodes": [
                {
                    "id": "calc",
                    "type": "tool",
                    "tool": {"tool": FunctionTool(add), "args": lambda state: {"a": state["a"], "b": 2}},
                }
            ],
            "edges": {"calc": "end_node"},
        }
    )
    outcome = run_workflow(compiled, {"a": 40}, system=system, timeout=WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"sum": 42}
    assert outcome.state == {"a": 40}


def counted_tool(lab: Lab, name: str, result: Any, *, gate: Any = False) -> FunctionTool:
    """A ``FunctionTool`` named ``name`` that counts its runs (in the worker) and returns ``result``."""
    calls = lab.counter(name)

    def tool() -> Any:
        calls.incr()
        return result

    tool.__name__ = name
    tool.__doc__ = f"The {name} tool."
    return FunctionTool(tool, requires_confirmation=gate)


@pytest.mark.parametrize("gate", [True, lambda args, context: {"required": True, "hint": "ask"}])
def test_a_tool_node_fails_closed_when_the_tool_needs_confirmation(
    system: ActorSystemHandle, lab: Lab, gate: Any
) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "tool-confirm-v1",
            "kind": "graph",
            "entry": "wipe",
            "nodes": [
                {"id": "wipe", "type": "tool", "tool": {"tool": counted_tool(lab, "wipe", {"wiped": True}, gate=gate)}}
            ],
            "edges": {"wipe": "end_node"},
        }
    )
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "tool_confirmation_requires_runner"
    assert lab.counter("wipe").value == 0  # no approval channel: the tool never ran


def test_a_tool_node_refuses_a_long_running_suspension(system: ActorSystemHandle, lab: Lab) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "tool-long-v1",
            "kind": "graph",
            "entry": "export",
            "nodes": [
                {
                    "id": "export",
                    "type": "tool",
                    "tool": {"tool": counted_tool(lab, "export", long_running("op-1", "queued"))},
                }
            ],
            "edges": {"export": "end_node"},
        }
    )
    outcome = run_workflow(compiled, {}, system=system, timeout=WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "long_running_requires_runner"
    assert lab.counter("export").value == 1  # it ran, but its suspension is not taken as an output


# ---- status, checkpoint, input ----------------------------------------------------------------------------------


def test_status_counts_tasks_in_flight_while_running_and_reports_completed_after(
    system: ActorSystemHandle, lab: Lab
) -> None:
    gates = [lab.gate("a"), lab.gate("b")]
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "status-v1",
            "kind": "parallel",
            "branches": [
                {"id": "a", "run": gated("a", lab, Ok({"a": True}))},
                {"id": "b", "run": gated("b", lab, Ok({"b": True}))},
            ],
        }
    )
    ref = start_workflow(compiled, {}, system=system)
    assert {lab.channel.next()["step"], lab.channel.next()["step"]} == {"a", "b"}
    running = workflow_status(ref, system=system)
    assert running["state"] == "running" and running["in_flight"] == 2
    assert (running["workflow_ref"], running["workflow_id"], running["kind"]) == (ref.ref_id, "status-v1", "parallel")
    assert running["invocation_id"] is None  # not durable
    assert workflow_checkpoint(ref, system=system)["completed"] is False
    for gate in gates:
        gate.open()
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Completed) and outcome.state == {"a": True, "b": True}
    done = workflow_status(ref, system=system)
    assert done["state"] == "completed" and done["in_flight"] == 0
    assert done["commit_seq"] == outcome.checkpoint["seq"]
    assert workflow_checkpoint(ref, system=system) == outcome.checkpoint


def test_an_input_outside_the_input_schema_raises_invalid_input_before_anything_runs(
    system: ActorSystemHandle, lab: Lab
) -> None:
    compiled = compile_workflow({**SEQUENTIAL, "steps": [{"id": "never", "run": counted("never", lab, Ok())}]})
    with pytest.raises(WorkflowError) as err:
        start_workflow(compiled, {"no_count": 0}, system=system)
    assert err.value.reason == "invalid_input"
    assert err.value.details == {"path": "$", "rule": "required"}
    assert lab.counter("never").value == 0
    assert not os.path.exists(lab.dir / "never.count")
