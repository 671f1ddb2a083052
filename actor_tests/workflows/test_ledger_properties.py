"""Hypothesis on the lease state machine: random acquire/renew/checkpoint/finish/release/expire sequences from
three owners with an injected clock, checked against a model after every step.

Pinned: at most one lease can write at any moment (and it is the newest), tokens grow by exactly one per
takeover, checkpoint seqs are dense, and a rejected call writes nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actor_tests.workflows.support import ManualClock
from adk_actors.errors import AdkError, ConcurrencyConflict
from adk_actors.workflows.ledger import Lease, SqlInvocationLedger

OWNERS = ("o0", "o1", "o2")
LEASE_MS = st.sampled_from([1, 2, 5, 10])
_ids = itertools.count()

_owner = st.sampled_from(OWNERS)
# Which lease a call uses: 0 is the newest issued to anyone, n the n-th newest (often stale, often another owner's).
_pick = st.sampled_from([0, 0, 0, 1, 2, 3])
OPS = st.one_of(
    st.tuples(st.just("acquire"), _owner, LEASE_MS),
    st.tuples(st.just("renew"), _pick, LEASE_MS),
    st.tuples(st.just("checkpoint"), _pick, st.sampled_from([0, 1, 1, 1, 2])),
    st.tuples(st.just("finish"), _pick, st.sampled_from(["paused", "paused", "completed", "failed", "cancelled"])),
    st.tuples(st.just("release"), _pick),
    st.tuples(st.just("advance"), st.sampled_from([0, 1, 1, 2, 4, 5, 10])),
)


@dataclass
class Model:
    """What the ledger row must look like."""

    now: int
    owner: str | None = "o0"
    token: int = 1
    lease_until: int | None = None
    state: str = "running"
    seq: int = 0
    leases: list[Lease] = field(default_factory=list)
    """Every lease value handed out, oldest first."""

    def live(self, lease: Lease) -> bool:
        return (
            lease.token == self.token
            and lease.owner == self.owner
            and self.lease_until is not None
            and self.state == "running"
            and self.now < self.lease_until
        )


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except AdkError as exc:
        return exc.reason, None


def _step(ledger: SqlInvocationLedger, clock: ManualClock, model: Model, inv: str, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "advance":
        clock.advance(op[1])
        model.now = clock.now
        return
    if kind == "acquire":
        _, owner, ms = op
        got, lease = _outcome(lambda: ledger.acquire(inv, owner, ms))
        if model.state in ("completed", "failed", "cancelled"):
            expected = "not_resumable"
        elif model.lease_until is not None and model.now < model.lease_until:
            expected = "lease_held"
        else:
            expected = "ok"
        assert got == expected, (op, model)
        event(f"acquire: {got}")
        if got == "ok":
            assert lease.token == model.token + 1  # strictly increasing, by exactly one
            model.token, model.owner, model.lease_until, model.state = lease.token, owner, model.now + ms, "running"
            assert lease.lease_until == model.lease_until
            model.leases.append(lease)
        return
    lease = model.leases[max(0, len(model.leases) - 1 - op[1])]
    owner = lease.owner
    live = model.live(lease)
    event(f"{kind} with a {'live' if live else 'dead'} lease")
    if kind == "renew":
        got, new = _outcome(lambda: ledger.renew(lease, op[2]))
        assert got == ("ok" if live else "lease_lost"), (op, model)
        if got == "ok":
            model.lease_until = model.now + op[2]
            assert new == Lease(invocation_id=inv, owner=owner, token=model.token, lease_until=model.lease_until)
            model.leases.append(new)
    elif kind == "checkpoint":
        seq = model.seq + op[2]
        got, _ = _outcome(lambda: ledger.checkpoint(lease, {"seq": seq, "by": owner}, seq))
        expected = "lease_lost" if not live else ("ok" if seq == model.seq + 1 else "stale_checkpoint")
        assert got == expected, (op, model)
        if got == "ok":
            model.seq = seq
    elif kind == "finish":
        got, _ = _outcome(lambda: ledger.finish(lease, op[2], {"by": owner}))
        assert got == ("ok" if live else "lease_lost"), (op, model)
        if got == "ok":
            model.state, model.owner, model.lease_until = op[2], None, None
    elif kind == "release":
        got, _ = _outcome(lambda: ledger.release(lease))
        assert got == ("ok" if live else "lease_lost"), (op, model)
        if got == "ok":
            model.owner, model.lease_until = None, None


def _writers_now(ledger: SqlInvocationLedger, model: Model) -> list[Lease]:
    """Every lease ever issued that the ledger would accept right now.

    The probe is a checkpoint with seq 0, which is never the next seq: a live lease answers ``stale_checkpoint``,
    any other ``lease_lost``, and neither writes anything.
    """
    writers = []
    for lease in set(model.leases):
        try:
            ledger.checkpoint(lease, {"probe": True}, 0)
        except ConcurrencyConflict as exc:
            assert exc.reason in ("stale_checkpoint", "lease_lost")
            if exc.reason == "stale_checkpoint":
                writers.append(lease)
        else:
            raise AssertionError("a seq-0 checkpoint was accepted")
    return writers


def _check(ledger: SqlInvocationLedger, model: Model, inv: str) -> None:
    status = ledger.workflow_invocation_status(inv)
    assert (status.state, status.owner, status.lease_token, status.lease_until, status.checkpoint_seq) == (
        model.state,
        model.owner,
        model.token,
        model.lease_until,
        model.seq,
    )
    assert status.checkpoint == (None if model.seq == 0 else {"seq": model.seq, "by": status.checkpoint["by"]})
    # A renewal hands out a new Lease value with the same token; the token is the fence, so count holders.
    holders = {(lease.owner, lease.token) for lease in _writers_now(ledger, model)}
    assert len(holders) <= 1, holders  # at most one owner can write at a time...
    assert holders <= {(model.owner, model.token)}  # ...and it holds the newest token
    assert status.owned == bool(holders)


def _run(ledger: SqlInvocationLedger, clock: ManualClock, first_ms: int, ops: list[tuple[Any, ...]]) -> None:
    inv = f"prop-{next(_ids)}"
    lease = ledger.start_workflow_invocation(inv, "wf", "1", "graph", {}, "o0", first_ms)
    model = Model(now=clock.now, lease_until=clock.now + first_ms)
    model.leases.append(lease)
    _check(ledger, model, inv)
    for op in ops:
        _step(ledger, clock, model, inv, op)
        _check(ledger, model, inv)
    ledger.delete_workflow_invocation(inv, force=True)


_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}


@pytest.fixture
def prop_ledger(ledger_url: str) -> Any:
    clock = ManualClock()
    ledger = SqlInvocationLedger(ledger_url, clock=clock)
    try:
        yield ledger, clock
    finally:
        ledger.close()


@settings(max_examples=150, **_SETTINGS)  # type: ignore[arg-type]
@given(first_ms=LEASE_MS, ops=st.lists(OPS, min_size=1, max_size=30))
def test_lease_state_machine_matches_the_model(prop_ledger: Any, first_ms: int, ops: list[tuple[Any, ...]]) -> None:
    ledger, clock = prop_ledger
    _run(ledger, clock, first_ms, ops)
