"""The durable coordinator's ledger writes, on the shared node with SQLite and PostgreSQL.

What ``wait_workflow`` returns is what the ledger holds: the outcome is announced only after its final write
landed behind any checkpoint write still in flight (runs whose outcome races that write, a cancel while a write is
held back by a database lock); the lease is renewed for as long as an action runs; a deadline passing while one
branch is in flight keeps its finished sibling; and a failure that reaches the ledger is a bounded value.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actor_tests.workflows.support import (
    ledger_writes_blocked,
    wait_for,
    wait_for_ledger_time,
    within_detail_bounds,
)
from actor_tests.workflows.wf_durable_defs import (
    build_gated,
    build_instant_fork,
    build_instant_parallel,
    counter,
    gated_step,
    left,
)
from actor_tests.workflows.wf_signals import Channel, Gate
from adk_actors import errors
from adk_actors.errors import ConcurrencyConflict, WorkflowError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.workflows import (
    Cancelled,
    Completed,
    Failed,
    Paused,
    SqlInvocationLedger,
    cancel_workflow,
    compile_workflow,
    resume_workflow_invocation,
    start_workflow_invocation,
    wait_workflow,
    workflow_status,
)
from adk_actors.workflows.engine import Outcome

WAIT = 30.0
"""Seconds a test waits for an outcome."""
RUNS = 20
"""Runs per racing workflow: each outcome raced its last checkpoint write in the old coordinator."""


def recorded(outcome: Outcome) -> tuple[str, Any]:
    """The ledger state and result the coordinator must have recorded for ``outcome``."""
    if isinstance(outcome, Completed):
        return "completed", {"output": outcome.output, "state": outcome.state}
    if isinstance(outcome, Paused):
        return "paused", {"details": outcome.details, "state": outcome.state}
    if isinstance(outcome, Cancelled):
        return "cancelled", {"reason": outcome.reason}
    return "failed", {"reason": outcome.reason, "details": outcome.details}


def assert_recorded(ledger: SqlInvocationLedger, invocation_id: str, outcome: Outcome) -> None:
    """The ledger holds exactly ``outcome``: its state, result and checkpoint, with the lease released."""
    state, result = recorded(outcome)
    status = ledger.workflow_invocation_status(invocation_id)
    assert status.state == state, (status.state, outcome)
    assert (status.owned, status.owner, status.lease_until) == (False, None, None)
    assert status.result == result
    assert status.checkpoint == outcome.checkpoint and status.checkpoint_seq >= 1


# ---- the outcome is recorded behind the checkpoint in flight ----------------------------------------------------

RACES: dict[str, tuple[Callable[[], Any], type]] = {
    "parallel-completes": (build_instant_parallel, Completed),
    "fork-completes": (lambda: build_instant_fork("right"), Completed),
    "fork-branch-fails": (lambda: build_instant_fork("refuse"), Failed),
    "fork-branch-pauses": (lambda: build_instant_fork("ask"), Paused),
}


@pytest.mark.parametrize("race", sorted(RACES))
def test_every_run_of_a_racing_durable_workflow_ends_with_the_ledger_holding_its_outcome_and_no_lease(
    system: ActorSystemHandle, ledger: SqlInvocationLedger, race: str
) -> None:
    build, expected = RACES[race]
    compiled = build()
    for run in range(RUNS):
        invocation_id, ref = start_workflow_invocation(
            compiled, {}, ledger=ledger, lease_ms=30_000, retention_ms=5000, system=system
        )
        outcome = wait_workflow(ref, WAIT, system=system)
        assert isinstance(outcome, expected), (run, outcome)
        assert_recorded(ledger, invocation_id, outcome)
        assert ledger.delete_workflow_invocation(invocation_id) is True


def test_a_cancel_while_a_checkpoint_write_is_held_back_is_recorded_after_that_write_lands(
    system: ActorSystemHandle, ledger: SqlInvocationLedger, ledger_url: str, channel: Channel, tmp_path: Path
) -> None:
    lab = str(tmp_path)
    compiled = build_gated("durable-cancel-commit-v1", "first", "second")
    gate = Gate(tmp_path / "first.gate")
    invocation_id, ref = start_workflow_invocation(
        compiled, {"lab": lab}, ledger=ledger, lease_ms=60_000, system=system
    )
    channel.expect("waiting", step="first")
    assert ledger.workflow_invocation_status(invocation_id).checkpoint_seq == 1  # the start, before "first" ran
    with ledger_writes_blocked(ledger_url, invocation_id):
        gate.open()
        # "first" committed in the engine; "second" is held back until that checkpoint landed, which the lock
        # prevents: the write is in flight.
        wait_for(
            lambda: True if workflow_status(ref, system=system)["commit_seq"] == 1 else None,
            "the engine committed first",
        )
        cancel_workflow(ref, "stop_now", system=system)
        assert workflow_status(ref, system=system)["state"] == "running"  # nothing is announced before the ledger
        assert ledger.workflow_invocation_status(invocation_id).checkpoint_seq == 1
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Cancelled) and outcome.reason == "stop_now"
    assert outcome.checkpoint["visits"] == {"first": 1} and outcome.checkpoint["state"] == {"lab": lab, "first": True}
    assert_recorded(ledger, invocation_id, outcome)
    assert ledger.workflow_invocation_status(invocation_id).checkpoint_seq == 2  # each seq written once
    assert workflow_status(ref, system=system)["state"] == "cancelled"
    assert counter(lab, "second").value == 0


# ---- the lease while an action runs -------------------------------------------------------------------------------


def test_the_lease_is_renewed_while_an_action_outlives_it_so_no_takeover_is_possible(
    system: ActorSystemHandle, ledger: SqlInvocationLedger, channel: Channel, tmp_path: Path
) -> None:
    lab, lease_ms = str(tmp_path), 1500
    compiled = build_gated("durable-long-action-v1", "long")
    gate = Gate(tmp_path / "long.gate")
    invocation_id, ref = start_workflow_invocation(
        compiled, {"lab": lab}, ledger=ledger, lease_ms=lease_ms, system=system
    )
    channel.expect("waiting", step="long")
    first = ledger.workflow_invocation_status(invocation_id)
    assert first.owned and first.lease_until is not None
    # The action is still held two whole leases after the first lease would have expired.
    later = wait_for_ledger_time(ledger, invocation_id, first.lease_until + 2 * lease_ms)
    assert later.owned and (later.owner, later.lease_token) == (first.owner, 1)
    assert later.lease_until is not None and later.lease_until > first.lease_until
    with pytest.raises(ConcurrencyConflict) as err:
        ledger.acquire(invocation_id, "intruder", lease_ms)
    assert err.value.reason == "lease_held"
    with pytest.raises(ConcurrencyConflict) as err:
        resume_workflow_invocation(invocation_id, compiled, ledger=ledger, lease_ms=lease_ms, system=system)
    assert err.value.reason == "lease_held"

    gate.open()
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Completed) and outcome.output == "long"
    assert_recorded(ledger, invocation_id, outcome)
    assert ledger.workflow_invocation_status(invocation_id).lease_token == 1  # nobody ever took over
    assert counter(lab, "long").value == 1


# ---- the deadline mid-branch --------------------------------------------------------------------------------------


def test_a_durable_fork_past_its_deadline_mid_branch_records_the_failure_with_the_finished_sibling(
    system: ActorSystemHandle, ledger: SqlInvocationLedger, channel: Channel, tmp_path: Path
) -> None:
    lab = str(tmp_path)
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "durable-fork-deadline-v1",
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["left", "stuck"], "join": "join"},
                {"id": "left", "run": left},
                {"id": "stuck", "run": gated_step},
                {"id": "join", "type": "join"},
            ],
            "edges": {"join": "end_node"},
        }
    )
    Gate(tmp_path / "stuck.gate")  # never opened: the deadline kills the worker waiting there
    t0 = time.monotonic()
    invocation_id, ref = start_workflow_invocation(
        compiled, {"lab": lab}, ledger=ledger, timeout_ms=2000, system=system
    )
    channel.expect("waiting", step="stuck")
    outcome = wait_workflow(ref, WAIT, system=system)
    assert time.monotonic() - t0 < 2.0 + 3.0
    assert isinstance(outcome, Failed) and outcome.reason == "deadline_exceeded"
    assert outcome.checkpoint["cursor"]["done"] == {"left": {"output": "left-output", "delta": {"left": 1}}}
    assert outcome.checkpoint["visits"] == {"left": 1}
    assert_recorded(ledger, invocation_id, outcome)


# ---- failures are bounded values ----------------------------------------------------------------------------------


def raise_error(reason: str, details: Any, mutate: bool) -> Callable[[dict[str, Any]], Any]:
    """An action raising a ``WorkflowError``; with ``mutate`` its details are replaced after construction (a
    subclass or a handler may do that), so only the workflow's own bound stands between them and the ledger."""

    def explode(state: dict[str, Any]) -> Any:
        err = WorkflowError("exploded", reason=reason, details={"payload": details})
        if mutate:
            err.details = {"payload": details}
        raise err

    return explode


huge = st.recursive(
    st.none() | st.integers() | st.text(max_size=10) | st.text(min_size=4100, max_size=4200),
    lambda inner: st.lists(inner, min_size=0, max_size=70) | st.dictionaries(st.text(max_size=300), inner, max_size=70),
    max_leaves=120,
)


@pytest.mark.parametrize("sql_kind", ["sqlite"], indirect=True)
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(reason=st.text(min_size=1, max_size=3000), details=huge, mutate=st.booleans())
@example(reason="r" * 3000, details={f"k{i}": ["x" * 5000] * 70 for i in range(100)}, mutate=True)
@example(
    reason="deep\x00",
    details=functools.reduce(lambda inner, _: {"d": [inner]}, range(30), cast(Any, "leaf")),
    mutate=True,
)
def test_a_raised_errors_reason_and_details_reach_the_outcome_and_the_ledger_bounded(
    system: ActorSystemHandle, ledger: SqlInvocationLedger, reason: str, details: Any, mutate: bool
) -> None:
    compiled = compile_workflow(
        {
            "version": 1,
            "id": "durable-bounded-failure-v1",
            "kind": "sequential",
            "steps": [{"id": "explode", "run": raise_error(reason, details, mutate)}],
        }
    )
    invocation_id, ref = start_workflow_invocation(compiled, {}, ledger=ledger, retention_ms=5000, system=system)
    outcome = wait_workflow(ref, WAIT, system=system)
    assert isinstance(outcome, Failed)
    assert outcome.reason == errors.bounded_reason(reason) and len(outcome.reason) <= errors.MAX_REASON_CHARS
    assert outcome.details["node"] == "explode"  # the engine's structural key survives the bound on entries
    assert within_detail_bounds(outcome.details)
    assert len(str(outcome.details)) < 2 * 1024 * 1024
    assert_recorded(ledger, invocation_id, outcome)  # the ledger holds the same bounded value
    assert ledger.delete_workflow_invocation(invocation_id) is True
