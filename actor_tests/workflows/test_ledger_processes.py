"""The ledger across processes: racing takeovers, a SIGKILLed owner, and state that outlives its writer."""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actor_tests.workflows.support import (
    WAIT_TIMEOUT_S,
    checkpoint_in_child,
    hold_and_hang,
    race_acquire,
    resume_and_complete,
    start_and_pause,
    wait_until_unowned,
)
from adk_actors.errors import ConcurrencyConflict
from adk_actors.workflows.ledger import Lease, SqlInvocationLedger

pytestmark = pytest.mark.slow

JOIN_TIMEOUT_S = 100
ROUNDS = 5
RACERS = 3


def _reap(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(30)
        assert not p.is_alive(), "a child process did not exit"


def _join_ok(procs: list[Any]) -> None:
    try:
        for p in procs:
            p.join(JOIN_TIMEOUT_S)
            assert not p.is_alive(), f"a child process did not finish within {JOIN_TIMEOUT_S}s"
        assert [p.exitcode for p in procs] == [0] * len(procs)
    finally:
        _reap(procs)


def _assert_fenced(ledger: SqlInvocationLedger, stale: Lease) -> None:
    """Every fenced write with ``stale`` is rejected as ``lease_lost``."""
    writes: list[Callable[[], object]] = [
        lambda: ledger.checkpoint(stale, {"by": "stale"}, 2),
        lambda: ledger.finish(stale, "failed", {"by": "stale"}),
        lambda: ledger.renew(stale, 60_000),
        lambda: ledger.release(stale),
    ]
    for write in writes:
        with pytest.raises(ConcurrencyConflict) as err:
            write()
        assert err.value.reason == "lease_lost"


def _drain(results: Any, n: int) -> list[Any]:
    return [results.get(timeout=WAIT_TIMEOUT_S) for _ in range(n)]


def test_processes_racing_for_expired_leases_exactly_one_wins_and_losers_stay_fenced(ledger_url: str) -> None:
    ledger = SqlInvocationLedger(ledger_url)
    ids = [f"race-{i}" for i in range(ROUNDS)]
    try:
        old = {i: ledger.start_workflow_invocation(i, "wf", "1", "parallel", {"i": i}, "old", 1) for i in ids}
        for i in ids:
            wait_until_unowned(ledger, i)
        ctx = multiprocessing.get_context("spawn")  # spawn: the descriptor really crosses a pickle
        barrier, results = ctx.Barrier(RACERS), ctx.Queue()
        procs = [
            ctx.Process(target=race_acquire, args=(ledger, ids, f"racer-{r}", barrier, results)) for r in range(RACERS)
        ]
        for p in procs:
            p.start()
        try:
            outcomes = _drain(results, ROUNDS * RACERS)
        finally:
            _join_ok(procs)
        for i in ids:
            mine = [o for o in outcomes if o[0] == i]
            winners = [o for o in mine if o[2] == "won"]
            assert len(winners) == 1, mine
            assert sorted(o[2] for o in mine if o[2] != "won") == ["lease_held"] * (RACERS - 1)
            lease = winners[0][3]
            assert lease.token == 2
            st = ledger.workflow_invocation_status(i)
            assert (st.owner, st.lease_token, st.checkpoint, st.checkpoint_seq) == (
                lease.owner,
                2,
                {"by": lease.owner},
                1,
            )
            # The pre-race owner is fenced off by its stale token...
            _assert_fenced(ledger, old[i])
            # ...and after the winner gives the invocation up and a third owner takes it, so is the winner.
            ledger.release(lease)
            third = ledger.acquire(i, "third", 60_000)
            assert third.token == 3
            for stale in (old[i], lease):
                _assert_fenced(ledger, stale)
            ledger.checkpoint(third, {"by": "third"}, 2)
            ledger.finish(third, "completed", {"by": "third"})
            st = ledger.workflow_invocation_status(i)
            assert (st.state, st.result, st.checkpoint_seq, st.lease_token) == ("completed", {"by": "third"}, 2, 3)
    finally:
        ledger.close()


def test_sigkilled_owner_is_taken_over_after_expiry_from_its_last_committed_checkpoint(
    ledger_url: str, tmp_path: Path
) -> None:
    ledger = SqlInvocationLedger(ledger_url)
    effects = tmp_path / "effects.log"
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=hold_and_hang, args=(ledger, "doomed", 3000, str(effects), ready))
    proc.start()
    try:
        assert ready.wait(WAIT_TIMEOUT_S), "the coordinator never got going"
        proc.kill()
        proc.join(30)
        assert proc.exitcode is not None and proc.exitcode < 0
        held = ledger.workflow_invocation_status("doomed")
        assert (held.owner, held.checkpoint_seq) == ("doomed", 2)
        st = wait_until_unowned(ledger, "doomed")  # the dead owner's lease runs out on the database clock
        assert st.state == "running" and st.lease_until is not None and st.now >= st.lease_until
        lease, found = ledger.resume_workflow_invocation("doomed", "rescuer", 60_000)
        assert (found.state, found.checkpoint, found.checkpoint_seq, lease.token) == ("running", {"done": 2}, 2, 2)
        # Steps 1 and 2 are committed and never replayed; step 3 ran but was not committed, so it runs again.
        for seq in range(found.checkpoint_seq + 1, 4):
            with effects.open("a") as f:
                f.write(f"action{seq}\n")
            ledger.checkpoint(lease, {"done": seq}, seq)
        ledger.finish(lease, "completed", {"n": 3})
        assert effects.read_text().split() == ["action1", "action2", "action3", "action3"]
        assert ledger.workflow_invocation_status("doomed").state == "completed"
    finally:
        _reap([proc])
        ledger.close()


def test_durable_state_survives_its_writer_and_is_resumed_by_a_new_process(ledger_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    writer = ctx.Process(target=start_and_pause, args=(SqlInvocationLedger(ledger_url), "approval-1"))
    writer.start()
    _join_ok([writer])
    ledger = SqlInvocationLedger(ledger_url)  # a fresh descriptor and engine: nothing cached in this process
    try:
        st = ledger.workflow_invocation_status("approval-1")
        assert (st.state, st.owned, st.checkpoint_seq, st.result) == ("paused", False, 1, {"reason": "approval"})
        ledger.close()
        results = ctx.Queue()
        resumer = ctx.Process(target=resume_and_complete, args=(ledger, "approval-1", results))
        resumer.start()
        try:
            found = results.get(timeout=WAIT_TIMEOUT_S)
        except queue.Empty:
            found = None
        _join_ok([resumer])
        assert found == ("paused", 1, {"reason": "approval"}, 2)
        st = ledger.workflow_invocation_status("approval-1")  # reopened on use
        assert (st.state, st.result, st.checkpoint_seq) == ("completed", {"accepted": True}, 2)
        assert st.checkpoint == {"node": "done", "state": {"approval_requested": True, "accepted": True}}
        assert ledger.delete_workflow_invocation("approval-1")
    finally:
        ledger.close()


def test_a_forked_child_opens_its_own_engine_and_the_parent_keeps_working(ledger_url: str) -> None:
    ledger = SqlInvocationLedger(ledger_url)
    try:
        lease = ledger.start_workflow_invocation("forked", "wf", "1", "loop", {}, "a", 60_000)
        parent_engine = ledger._get_engine()
        child = multiprocessing.get_context("fork").Process(target=checkpoint_in_child, args=(ledger, lease, 1))
        child.start()
        _join_ok([child])
        assert ledger._get_engine() is parent_engine  # the child's close() did not touch the parent's pool
        ledger.checkpoint(lease, {"by": "parent"}, 2)
        st = ledger.workflow_invocation_status("forked")
        assert (st.checkpoint, st.checkpoint_seq) == ({"by": "parent"}, 2)
    finally:
        ledger.close()
