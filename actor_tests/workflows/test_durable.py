"""Durable workflow invocations end to end: real actor systems, worker processes, SQLite files and PostgreSQL.

A paused invocation outlives the whole actor system and is resumed by a fresh one, or by a new process attached
to the running system; a coordinator SIGKILLed while it holds its lease is taken over only once the lease expired,
re-running just the uncommitted action; and a coordinator whose lease was taken over stops without writing.
The workflows are rebuilt by the importable builders of ``wf_durable_defs``, as an application would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from actor_tests.workflows.support import wait_until_unowned
from actor_tests.workflows.wf_durable_defs import (
    EFFECT_GATE,
    FileClock,
    build_approval,
    build_guarded,
    counter,
)
from actor_tests.workflows.wf_signals import Channel, Gate, wait_exit
from adk_actors.errors import ConcurrencyConflict, WorkflowError
from adk_actors.runtime.refs import place
from adk_actors.runtime.system import ActorSystemHandle, group_pids
from adk_actors.workflows import (
    Completed,
    Failed,
    Paused,
    SqlInvocationLedger,
    delete_workflow_invocation,
    resume_workflow_invocation,
    start_workflow_invocation,
    wait_workflow,
    workflow_invocation_status,
)

WAIT = 30.0
"""Seconds a test waits for an outcome."""
REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000


def test_a_paused_invocation_outlives_the_actor_system_and_a_fresh_system_completes_it(
    make_system: Callable[..., ActorSystemHandle], ledger: SqlInvocationLedger
) -> None:
    first = make_system()
    invocation_id, ref = start_workflow_invocation(build_approval(), {}, ledger=ledger, lease_ms=30_000, system=first)
    assert ref.invocation_id == invocation_id
    paused = wait_workflow(ref, WAIT, system=first)
    assert isinstance(paused, Paused) and paused.details["reason"] == "human_approval"
    status = workflow_invocation_status(invocation_id, ledger=ledger)
    assert (status["phase"], status["owned"]) == ("paused", False)
    assert status["workflow_id"] == "readme-graph-approval-v1" and (status["version"], status["kind"]) == ("1", "graph")
    assert status["result"]["state"] == {"approval_requested": True}

    first.stop()
    assert group_pids(first.pgid) == []  # nothing of the first system is left
    second = make_system()
    try:
        ref = resume_workflow_invocation(
            invocation_id, build_approval(), ledger=ledger, resume_input={"approved": True}, system=second
        )
        outcome = wait_workflow(ref, WAIT, system=second)
        assert isinstance(outcome, Completed)
        assert outcome.state == {"approval_requested": True, "accepted": True}
        assert outcome.checkpoint["visits"] == {"approval": 1, "accepted": 1}  # the approval ran once in all
        status = workflow_invocation_status(invocation_id, ledger=ledger)
        assert (status["phase"], status["owned"]) == ("completed", False)
        assert status["result"]["state"] == {"approval_requested": True, "accepted": True}
        assert delete_workflow_invocation(invocation_id, ledger=ledger) is True
        with pytest.raises(WorkflowError) as err:
            workflow_invocation_status(invocation_id, ledger=ledger)
        assert err.value.reason == "not_found"
    finally:
        second.stop()


@pytest.mark.parametrize("sql_kind", ["sqlite"], indirect=True)
def test_a_new_attached_process_resumes_a_paused_invocation_with_the_rebuilt_workflow(
    system: ActorSystemHandle, ledger: SqlInvocationLedger, ledger_url: str
) -> None:
    invocation_id, ref = start_workflow_invocation(build_approval(), {}, ledger=ledger, system=system)
    assert isinstance(wait_workflow(ref, WAIT, system=system), Paused)

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actor_tests.workflows.wf_durable_defs",
            "resume",
            str(system.port),
            str(system.settings.hosts),
            ledger_url,
            invocation_id,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["pid"] != os.getpid()
    assert report["outcome"] == "Completed"
    assert report["state"] == {"approval_requested": True, "accepted": True}
    status = workflow_invocation_status(invocation_id, ledger=ledger)
    assert (status["phase"], status["owned"]) == ("completed", False)
    assert delete_workflow_invocation(invocation_id, ledger=ledger) is True


def test_a_sigkilled_coordinator_is_taken_over_after_its_lease_expires_and_reruns_only_the_inflight_step(
    fresh_system: ActorSystemHandle, ledger: SqlInvocationLedger, channel: Channel, tmp_path: Path
) -> None:
    node, lab, lease_ms = fresh_system, str(tmp_path), 3000
    gate = Gate(tmp_path / EFFECT_GATE)  # opened only at the end: the first "effect" call outlives its coordinator
    invocation_id, ref = start_workflow_invocation(
        build_guarded(), {"lab": lab}, ledger=ledger, lease_ms=lease_ms, system=node
    )
    channel.expect("waiting", step="effect", call=1)
    found = ledger.workflow_invocation_status(invocation_id)
    assert found.owned and found.state == "running"
    assert found.checkpoint_seq == 2 and found.checkpoint["visits"] == {"prepare": 1}  # committed before "effect"

    host_pid = node.host_entry(place(ref.ref_id, node.settings.hosts)).pid
    os.kill(host_pid, signal.SIGKILL)
    assert wait_exit(host_pid, 10.0)
    with pytest.raises(ConcurrencyConflict) as err:  # the dead coordinator's lease is still live
        resume_workflow_invocation(invocation_id, build_guarded(), ledger=ledger, lease_ms=lease_ms, system=node)
    assert err.value.reason == "lease_held"

    # Wait for expiry on the ledger's clock: the helper re-reads the status and sleeps only until the lease_until
    # that status reports (the moment the condition becomes true), bounded by a deadline.
    assert wait_until_unowned(ledger, invocation_id).checkpoint_seq == 2
    ref = resume_workflow_invocation(invocation_id, build_guarded(), ledger=ledger, lease_ms=lease_ms, system=node)
    outcome = wait_workflow(ref, WAIT, system=node)
    assert isinstance(outcome, Completed)
    assert outcome.output == "finished"
    assert outcome.state == {"lab": lab, "prepared": True, "effect_calls": 2, "finished": True}
    ran = channel.expect("ran", step="effect", call=2)
    assert ran["step_id"] == "effect#1/action"  # the same idempotency key as the lost call
    # At-least-once for the in-flight action only: "prepare" was committed and is not replayed.
    assert [counter(lab, step).value for step in ("prepare", "effect", "finish")] == [1, 2, 1]
    status = ledger.workflow_invocation_status(invocation_id)
    assert (status.state, status.owned, status.lease_token) == ("completed", False, 2)
    gate.open()  # the orphaned first call returns into the void; its worker is idle again for the shutdown


@pytest.mark.parametrize("sql_kind", ["sqlite"], indirect=True)
def test_a_coordinator_whose_lease_was_taken_over_fails_with_lease_lost_and_writes_nothing(
    system: ActorSystemHandle, ledger_url: str, channel: Channel, tmp_path: Path
) -> None:
    clock = FileClock(tmp_path / "clock", T0)
    ledger = SqlInvocationLedger(ledger_url, clock=clock)  # the coordinator's copy reads the same file
    lab = str(tmp_path)
    gate = Gate(tmp_path / EFFECT_GATE)
    try:
        invocation_id, ref = start_workflow_invocation(
            build_guarded(), {"lab": lab}, ledger=ledger, lease_ms=60_000, system=system
        )
        channel.expect("waiting", step="effect", call=1)
        before = ledger.workflow_invocation_status(invocation_id)
        assert (before.owner, before.lease_token, before.checkpoint_seq) == (f"coordinator:{ref.ref_id}", 1, 2)

        clock.set(T0 + 120_000)  # the coordinator's lease has expired on the ledger clock
        intruder = ledger.acquire(invocation_id, "intruder", 60_000)
        assert intruder.token == 2
        gate.open()  # "effect" returns; the coordinator must commit it before "finish" may start

        outcome = wait_workflow(ref, WAIT, system=system)
        assert isinstance(outcome, Failed)
        assert outcome.reason == "lease_lost"
        after = ledger.workflow_invocation_status(invocation_id)
        assert (after.state, after.owner, after.lease_token, after.result) == ("running", "intruder", 2, None)
        assert (after.checkpoint_seq, after.checkpoint) == (before.checkpoint_seq, before.checkpoint)
        assert counter(lab, "finish").value == 0  # nothing ran past the lost lease
        assert delete_workflow_invocation(invocation_id, ledger=ledger, force=True) is True
    finally:
        ledger.close()
