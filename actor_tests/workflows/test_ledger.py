"""The durable invocation ledger on SQLite and PostgreSQL: lifecycle, fencing, checkpoints, expiry, storage."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import create_engine, text, update

from actor_tests.workflows.support import ManualClock, wait_until_unowned
from adk_actors.errors import ConcurrencyConflict, StorageError, ValidationError, WorkflowError
from adk_actors.workflows.ledger import SCHEMA_VERSION, Lease, SqlInvocationLedger, schema_table

T0 = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def ledger(ledger_url: str, clock: ManualClock) -> Any:
    led = SqlInvocationLedger(ledger_url, clock=clock)
    try:
        yield led
    finally:
        led.close()


def _start(ledger: SqlInvocationLedger, inv: str = "inv-1", owner: str = "a", lease_ms: int = 1000) -> Lease:
    return ledger.start_workflow_invocation(inv, "wf", "1", "sequential", {"q": "hi"}, owner, lease_ms)


def test_lifecycle_start_checkpoint_renew_pause_resume_complete_delete(
    ledger: SqlInvocationLedger, clock: ManualClock
) -> None:
    lease = _start(ledger)
    assert lease == Lease(invocation_id="inv-1", owner="a", token=1, lease_until=T0 + 1000)
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.input, st.checkpoint, st.checkpoint_seq, st.result) == ("running", {"q": "hi"}, None, 0, None)
    assert (st.owner, st.lease_token, st.lease_until, st.owned, st.now) == ("a", 1, T0 + 1000, True, T0)
    assert (st.workflow_id, st.version, st.kind, st.created_at) == ("wf", "1", "sequential", T0)

    clock.advance(400)
    ledger.checkpoint(lease, {"step": 1}, 1)
    lease = ledger.renew(lease, 2000)
    assert (lease.token, lease.lease_until) == (1, T0 + 2400)
    ledger.checkpoint(lease, {"step": 2}, 2)
    ledger.finish(lease, "paused", {"reason": "approval"})
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.checkpoint, st.checkpoint_seq, st.result) == ("paused", {"step": 2}, 2, {"reason": "approval"})
    assert (st.owner, st.lease_until, st.owned, st.resumable) == (None, None, False, True)

    new, found = ledger.resume_workflow_invocation("inv-1", "b", 500, workflow_id="wf", version="1", kind="sequential")
    assert new == Lease(invocation_id="inv-1", owner="b", token=2, lease_until=T0 + 900)
    assert (found.state, found.checkpoint, found.checkpoint_seq, found.result) == (
        "paused",
        {"step": 2},
        2,
        {"reason": "approval"},
    )
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.owner, st.lease_token, st.result, st.owned) == ("running", "b", 2, None, True)
    ledger.checkpoint(new, {"step": 3}, 3)
    ledger.finish(new, "completed", {"answer": 42})
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.result, st.checkpoint_seq, st.resumable) == ("completed", {"answer": 42}, 3, False)
    with pytest.raises(WorkflowError) as err:
        ledger.resume_workflow_invocation("inv-1", "c", 500)
    assert err.value.reason == "not_resumable"
    assert ledger.delete_workflow_invocation("inv-1") is True
    assert ledger.delete_workflow_invocation("inv-1") is False
    with pytest.raises(WorkflowError) as err:
        ledger.workflow_invocation_status("inv-1")
    assert err.value.reason == "not_found"


@pytest.mark.parametrize("state", ["completed", "failed", "cancelled"])
def test_terminal_states_are_not_resumable_nor_acquirable(ledger: SqlInvocationLedger, state: str) -> None:
    ledger.finish(_start(ledger), state, {"s": state})
    for take in (
        lambda: ledger.acquire("inv-1", "b", 100),
        lambda: ledger.resume_workflow_invocation("inv-1", "b", 100),
    ):
        with pytest.raises(WorkflowError) as err:
            take()
        assert err.value.reason == "not_resumable"
    assert ledger.workflow_invocation_status("inv-1").lease_token == 1


def test_duplicate_start_is_already_exists_and_writes_nothing(ledger: SqlInvocationLedger) -> None:
    _start(ledger)
    with pytest.raises(WorkflowError) as err:
        ledger.start_workflow_invocation("inv-1", "other", "9", "graph", {"x": 1}, "b", 5000)
    assert err.value.reason == "already_exists"
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.workflow_id, st.owner, st.input) == ("wf", "a", {"q": "hi"})


def test_checkpoint_seq_must_be_exactly_last_plus_one(ledger: SqlInvocationLedger) -> None:
    lease = _start(ledger)
    for bad in (0, 2, -1):
        with pytest.raises(ConcurrencyConflict) as err:
            ledger.checkpoint(lease, {"bad": bad}, bad)
        assert err.value.reason == "stale_checkpoint"
        assert err.value.details["expected"] == 1
    ledger.checkpoint(lease, {"ok": 1}, 1)
    for bad in (1, 3):
        with pytest.raises(ConcurrencyConflict) as err:
            ledger.checkpoint(lease, {"bad": bad}, bad)
        assert err.value.reason == "stale_checkpoint"
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.checkpoint, st.checkpoint_seq) == ({"ok": 1}, 1)
    with pytest.raises(ValidationError):
        ledger.checkpoint(lease, {"x": 1}, True)


def test_finish_with_the_final_checkpoint_writes_both_in_one_transaction_or_nothing(
    ledger: SqlInvocationLedger,
) -> None:
    lease = _start(ledger)
    ledger.checkpoint(lease, {"step": 1}, 1)
    for bad in (1, 3):  # the seq rule of checkpoint(): a stale seq writes neither the checkpoint nor the outcome
        with pytest.raises(ConcurrencyConflict) as err:
            ledger.finish(lease, "completed", {"output": "x"}, checkpoint={"step": "final"}, seq=bad)
        assert (err.value.reason, err.value.details["expected"]) == ("stale_checkpoint", 2)
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.checkpoint, st.checkpoint_seq, st.result, st.owned) == ("running", {"step": 1}, 1, None, True)
    for partial in ({"checkpoint": {"step": "final"}}, {"seq": 2}):
        with pytest.raises(ValidationError):
            ledger.finish(lease, "completed", None, **partial)
    ledger.finish(lease, "completed", {"output": "x"}, checkpoint={"step": "final"}, seq=2)
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.checkpoint, st.checkpoint_seq, st.result) == (
        "completed",
        {"step": "final"},
        2,
        {"output": "x"},
    )
    assert (st.owner, st.lease_until, st.owned) == (None, None, False)


def test_lease_at_exact_expiry_is_expired_for_every_fenced_write(
    ledger: SqlInvocationLedger, clock: ManualClock
) -> None:
    lease = _start(ledger, lease_ms=1000)
    clock.advance(999)
    lease = ledger.renew(lease, 1000)  # one millisecond before: still live
    assert lease.lease_until == T0 + 1999
    clock.now = lease.lease_until  # equality is expired
    writes: list[Callable[[], Any]] = [
        lambda: ledger.renew(lease, 1000),
        lambda: ledger.checkpoint(lease, {"late": True}, 1),
        lambda: ledger.finish(lease, "completed", {"late": True}),
        lambda: ledger.release(lease),
    ]
    for write in writes:
        with pytest.raises(ConcurrencyConflict) as err:
            write()
        assert err.value.reason == "lease_lost"
        assert err.value.details["why"] == "expired"
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.checkpoint_seq, st.lease_until, st.owned, st.result) == ("running", 0, T0 + 1999, False, None)


def test_takeover_waits_for_expiry_and_fences_the_old_owner(ledger: SqlInvocationLedger, clock: ManualClock) -> None:
    old = _start(ledger, lease_ms=1000)
    ledger.checkpoint(old, {"step": 1}, 1)
    clock.advance(999)
    with pytest.raises(ConcurrencyConflict) as err:
        ledger.acquire("inv-1", "b", 1000)
    assert err.value.reason == "lease_held"
    with pytest.raises(ConcurrencyConflict) as err:
        ledger.delete_workflow_invocation("inv-1")
    assert err.value.reason == "lease_held"
    clock.advance(1)
    new = ledger.acquire("inv-1", "b", 1000)
    assert (new.token, new.owner, new.lease_until) == (2, "b", T0 + 2000)
    # The old owner is alive again but fenced: even a lease that looks live to it is rejected.
    for write in (
        lambda: ledger.renew(old, 5000),
        lambda: ledger.checkpoint(old, {"old": True}, 2),
        lambda: ledger.finish(old, "completed", None),
        lambda: ledger.release(old),
    ):
        with pytest.raises(ConcurrencyConflict) as err:
            write()
        assert (err.value.reason, err.value.details["why"], err.value.details["current_token"]) == (
            "lease_lost",
            "stale_token",
            2,
        )
    ledger.checkpoint(new, {"step": 2}, 2)
    assert ledger.workflow_invocation_status("inv-1").checkpoint == {"step": 2}


def test_release_allows_an_immediate_takeover(ledger: SqlInvocationLedger) -> None:
    lease = _start(ledger, lease_ms=60_000)
    ledger.release(lease)
    st = ledger.workflow_invocation_status("inv-1")
    assert (st.state, st.owner, st.owned) == ("running", None, False)
    with pytest.raises(ConcurrencyConflict):
        ledger.renew(lease, 100)
    assert ledger.acquire("inv-1", "b", 100).token == 2


def test_resume_checks_the_reconstructed_workflow_identity(ledger: SqlInvocationLedger) -> None:
    ledger.finish(_start(ledger), "paused", None)
    for wrong in ({"workflow_id": "other"}, {"version": "2"}, {"kind": "graph"}):
        with pytest.raises(WorkflowError) as err:
            ledger.resume_workflow_invocation("inv-1", "b", 100, **wrong)
        assert err.value.reason == "workflow_mismatch"
        assert err.value.details["fields"] == list(wrong)
    assert ledger.workflow_invocation_status("inv-1").lease_token == 1
    with pytest.raises(WorkflowError) as err:
        ledger.resume_workflow_invocation("nope", "b", 100)
    assert err.value.reason == "not_found"


def test_writes_on_a_deleted_invocation_are_lease_lost(ledger: SqlInvocationLedger) -> None:
    lease = _start(ledger)
    assert ledger.delete_workflow_invocation("inv-1", force=True)
    with pytest.raises(ConcurrencyConflict) as err:
        ledger.checkpoint(lease, {}, 1)
    assert err.value.details["why"] == "missing"


def test_invalid_arguments_write_nothing(ledger: SqlInvocationLedger) -> None:
    bad_docs: list[Any] = [float("nan"), {"k": "a\x00b"}, "\ud800", {1: "x"}]
    for bad in bad_docs:
        with pytest.raises(ValidationError):
            ledger.start_workflow_invocation("inv-x", "wf", "1", "sequential", bad, "a", 100)
    bad_lease_ms: list[Any] = [0, -5, True, 1.5]
    for lease_ms in bad_lease_ms:
        with pytest.raises(ValidationError):
            ledger.start_workflow_invocation("inv-x", "wf", "1", "sequential", {}, "a", lease_ms)
    with pytest.raises(ValidationError):
        ledger.start_workflow_invocation("", "wf", "1", "sequential", {}, "a", 100)
    with pytest.raises(WorkflowError):
        ledger.workflow_invocation_status("inv-x")
    lease = _start(ledger)
    with pytest.raises(ValidationError):
        ledger.checkpoint(lease, {"x": float("inf")}, 1)
    with pytest.raises(ValidationError):
        ledger.finish(lease, "running", None)
    small = SqlInvocationLedger(ledger.url, max_document_bytes=16)
    try:
        with pytest.raises(ValidationError) as err:
            small.checkpoint(lease, {"big": "x" * 100}, 1)
        assert err.value.reason == "too_large"
    finally:
        small.close()
    assert ledger.workflow_invocation_status("inv-1").checkpoint_seq == 0


def test_stored_json_is_canonical(ledger: SqlInvocationLedger) -> None:
    _start(ledger)
    lease = ledger.start_workflow_invocation(
        "inv-2", "wf", "1", "sequential", {"b": 1, "a": [1, {"d": 2, "c": "é"}]}, "a", 100
    )
    ledger.checkpoint(lease, {"z": 1, "y": 2}, 1)
    engine = create_engine(ledger.url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT input, checkpoint FROM adk_workflow_invocations WHERE invocation_id = 'inv-2'")
            ).one()
    finally:
        engine.dispose()
    assert row.input == '{"a":[1,{"c":"é","d":2}],"b":1}'
    assert row.checkpoint == '{"y":2,"z":1}'


def test_database_clock_drives_leases(ledger_url: str) -> None:
    ledger = SqlInvocationLedger(ledger_url)
    try:
        before = ledger.now_ms()
        lease = ledger.start_workflow_invocation("inv-db", "wf", "1", "loop", None, "a", 50)
        assert before <= lease.lease_until - 50 <= ledger.now_ms()
        st = wait_until_unowned(ledger, "inv-db")
        assert st.lease_until is not None and st.now >= st.lease_until
        with pytest.raises(ConcurrencyConflict) as err:
            ledger.checkpoint(lease, {"late": 1}, 1)
        assert err.value.details["why"] == "expired"
        assert ledger.acquire("inv-db", "b", 60_000).token == 2
    finally:
        ledger.close()


def test_descriptor_pickles_without_an_engine_and_schema_is_versioned(ledger: SqlInvocationLedger) -> None:
    _start(ledger)
    assert ledger._engine is not None
    copy = pickle.loads(pickle.dumps(ledger))
    try:
        assert copy._engine is None and copy.url == ledger.url
        assert copy.workflow_invocation_status("inv-1").owner == "a"
        assert copy.schema_version() == SCHEMA_VERSION
    finally:
        copy.close()


def test_schema_written_by_a_newer_version_is_refused(ledger_url: str, clock: ManualClock) -> None:
    ledger = SqlInvocationLedger(ledger_url, clock=clock).open()
    engine = create_engine(ledger_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(schema_table).values(version=SCHEMA_VERSION + 1))
        ledger.close()
        with pytest.raises(StorageError) as err:
            ledger.open()
        assert err.value.reason == "schema_too_new"
    finally:
        engine.dispose()
        ledger.close()


def test_storage_errors_are_structural_and_never_carry_the_url() -> None:
    ledger = SqlInvocationLedger("postgresql+psycopg://alice:s3cr3t-pw@127.0.0.1:1/secretdb?connect_timeout=5")
    assert "s3cr3t" not in repr(ledger)
    with pytest.raises(StorageError) as err:
        ledger.workflow_invocation_status("inv-1")
    assert err.value.reason == "open_failed"
    assert set(err.value.details) <= {"operation", "dialect", "error", "sqlstate"}
    dumped = f"{err.value} {err.value!r} {err.value.to_dict()}"
    for secret in ("s3cr3t", "alice", "secretdb", "127.0.0.1"):
        assert secret not in dumped
    for url in ("sqlite://", "sqlite:///:memory:", "mysql://u@h/db"):
        with pytest.raises(StorageError) as err:
            SqlInvocationLedger(url).open()
        assert err.value.reason == "open_failed"


def test_abandoned_invocations_are_running_ones_nobody_owns(ledger: SqlInvocationLedger, clock: ManualClock) -> None:
    short = _start(ledger, "short", lease_ms=10)
    clock.advance(1)
    _start(ledger, "long", lease_ms=1000)
    released = _start(ledger, "released", lease_ms=1000)
    ledger.release(released)
    ledger.finish(_start(ledger, "paused", lease_ms=1000), "paused", None)
    ledger.finish(_start(ledger, "done", lease_ms=1000), "completed", None)
    assert [s.invocation_id for s in ledger.abandoned_workflow_invocations()] == ["released"]
    clock.now = short.lease_until  # equality is expired
    found = ledger.abandoned_workflow_invocations()
    assert [s.invocation_id for s in found] == ["short", "released"]
    assert [s.owned for s in found] == [False, False]
    assert [s.invocation_id for s in ledger.abandoned_workflow_invocations(limit=1)] == ["short"]
    with pytest.raises(ValidationError):
        ledger.abandoned_workflow_invocations(limit=0)
