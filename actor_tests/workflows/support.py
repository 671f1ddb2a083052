"""Helpers for the ledger tests, importable by spawned child processes."""

from __future__ import annotations

import contextlib
import multiprocessing.synchronize
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from adk_actors.errors import AdkError
from adk_actors.workflows.ledger import InvocationStatus, Lease, SqlInvocationLedger

WAIT_TIMEOUT_S = 60.0
"""How long a child waits for a barrier or event before giving up (a non-zero exit fails the test)."""
POLL_LIMIT_S = 30.0
"""Upper bound of a poll for a lease to expire on the database clock."""

_T = TypeVar("_T")


class ManualClock:
    """An injected ledger clock: epoch milliseconds that move only when a test says so."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def wait_until_unowned(ledger: SqlInvocationLedger, invocation_id: str) -> InvocationStatus:
    """Poll (bounded) until the invocation's lease has expired on the ledger clock; return that status."""
    deadline = time.monotonic() + POLL_LIMIT_S
    while True:
        status = ledger.workflow_invocation_status(invocation_id)
        if not status.owned:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"lease of {invocation_id} still held after {POLL_LIMIT_S}s")
        # Wait for the real condition: sleeping until lease_until is not a guess, it is when expiry happens.
        time.sleep(max(0.0, min((status.lease_until or 0) - status.now, 1000)) / 1000)


def wait_for_ledger_time(ledger: SqlInvocationLedger, invocation_id: str, target_ms: int) -> InvocationStatus:
    """Wait (bounded) until the ledger clock reaches ``target_ms``; return the status read at that moment.

    The condition is a time on the database clock, so the helper re-reads that clock and sleeps only until the
    moment it reports the condition becomes true.
    """
    deadline = time.monotonic() + POLL_LIMIT_S
    while True:
        status = ledger.workflow_invocation_status(invocation_id)
        if status.now >= target_ms:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"ledger clock still at {status.now} < {target_ms} after {POLL_LIMIT_S}s")
        time.sleep(min(target_ms - status.now, 1000) / 1000)


def wait_for(probe: Callable[[], _T | None], what: str, timeout: float = POLL_LIMIT_S) -> _T:
    """Call ``probe`` until it returns something other than ``None`` (each call is a round trip to an actor or
    the database, no sleep), at most ``timeout`` seconds; return that value."""
    deadline = time.monotonic() + timeout
    while (found := probe()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout}s")
    return found


@contextlib.contextmanager
def ledger_writes_blocked(url: str, invocation_id: str) -> Iterator[None]:
    """Hold the lock every fenced ledger write of ``invocation_id`` needs, until the block ends.

    SQLite: a ``BEGIN IMMEDIATE`` transaction holds the database's write lock (WAL readers go on). PostgreSQL: the
    invocation row is locked ``FOR UPDATE`` (plain reads go on). A writer waits for the lock (busy timeout / row
    lock queue), so a write started meanwhile lands only after the block.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        conn = sqlite3.connect(str(parsed.database), timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as pg:
            locked = pg.execute(
                text("SELECT invocation_id FROM adk_workflow_invocations WHERE invocation_id = :i FOR UPDATE"),
                {"i": invocation_id},
            ).scalar()
            assert locked == invocation_id
            yield
    finally:
        engine.dispose()


def race_acquire(
    ledger: SqlInvocationLedger, invocation_ids: list[str], owner: str, barrier: Any, results: Any
) -> None:
    """For each invocation, meet the other racers at ``barrier`` and try to take it over.

    Winners checkpoint once (proving they can write); every outcome goes to ``results`` as
    ``(invocation_id, owner, "won", lease)`` or ``(invocation_id, owner, reason, None)``.
    """
    try:
        for invocation_id in invocation_ids:
            barrier.wait(WAIT_TIMEOUT_S)
            try:
                lease = ledger.acquire(invocation_id, owner, 60_000)
            except AdkError as exc:
                results.put((invocation_id, owner, exc.reason, None))
                continue
            ledger.checkpoint(lease, {"by": owner}, ledger.workflow_invocation_status(invocation_id).checkpoint_seq + 1)
            results.put((invocation_id, owner, "won", lease))
    finally:
        ledger.close()


def hold_and_hang(
    ledger: SqlInvocationLedger,
    invocation_id: str,
    lease_ms: int,
    effects: str,
    ready: multiprocessing.synchronize.Event,
) -> None:
    """A coordinator that commits two steps, starts a third (a visible side effect) and hangs holding the lease."""
    lease = ledger.start_workflow_invocation(invocation_id, "wf", "1", "sequential", {"n": 3}, "doomed", lease_ms)
    log = Path(effects)
    for seq in (1, 2):
        with log.open("a") as f:
            f.write(f"action{seq}\n")
        ledger.checkpoint(lease, {"done": seq}, seq)
    with log.open("a") as f:
        f.write("action3\n")  # the side effect happened; its checkpoint never will
    ledger.renew(lease, lease_ms)
    ready.set()
    threading.Event().wait(WAIT_TIMEOUT_S * 10)  # hang until SIGKILLed (bounded in case nobody does)


def start_and_pause(ledger: SqlInvocationLedger, invocation_id: str) -> Lease:
    """Start an invocation, checkpoint once, pause it and close the engine (a process that then exits)."""
    lease = ledger.start_workflow_invocation(invocation_id, "approval", "2", "graph", {"doc": "x"}, "first", 60_000)
    ledger.checkpoint(lease, {"node": "ask", "state": {"approval_requested": True}}, 1)
    ledger.finish(lease, "paused", {"reason": "approval"})
    ledger.close()
    return lease


def resume_and_complete(ledger: SqlInvocationLedger, invocation_id: str, results: Any) -> None:
    """Resume a paused invocation in a new process, checkpoint, complete it and report what it found."""
    try:
        lease, found = ledger.resume_workflow_invocation(
            invocation_id, "second", 60_000, workflow_id="approval", version="2", kind="graph"
        )
        ledger.checkpoint(
            lease, {"node": "done", "state": {**found.checkpoint["state"], "accepted": True}}, found.checkpoint_seq + 1
        )
        ledger.finish(lease, "completed", {"accepted": True})
        results.put((found.state, found.checkpoint_seq, found.result, lease.token))
    finally:
        ledger.close()


def checkpoint_in_child(ledger: SqlInvocationLedger, lease: Lease, seq: int) -> None:
    """Use a ledger inherited across a fork (its engine was opened by the parent), then close it."""
    ledger.checkpoint(lease, {"by": "child"}, seq)
    ledger.close()


def within_detail_bounds(value: Any, depth: int = 0) -> bool:
    """Whether a JSON value keeps ``errors.json_safe``'s bounds on depth, entries, strings and keys."""
    from adk_actors import errors

    if isinstance(value, str):
        return len(value) <= errors.MAX_DETAIL_STR + 1
    if isinstance(value, list | dict):
        if depth > errors.MAX_DETAIL_DEPTH or len(value) > errors.MAX_DETAIL_ITEMS:
            return False
        if isinstance(value, dict):
            return all(
                len(k) <= errors.MAX_DETAIL_KEY + 1 and within_detail_bounds(v, depth + 1) for k, v in value.items()
            )
        return all(within_detail_bounds(v, depth + 1) for v in value)
    return True
