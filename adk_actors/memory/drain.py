"""Durable ingestion's drain side, without the actor: the drainer's spec and messages, one drain pass, the enqueue
job, and :func:`ensure_drainer`. The actor that schedules passes is :mod:`adk_actors.memory.drainer`; see its
docstring for how it runs.

* :func:`drain_outbox` is one pass (blocking; it runs in a worker process): claim up to ``batch`` due rows under a
  lease, then for each (scope, session) group renew the lease when half of it is gone, revalidate it right before
  the adapter's ``add_batch`` (a lost lease stops the pass: nothing more is added under it), add the entries with
  their idempotency keys and mark the rows done; an adapter error records a failed attempt (its reason tag only).
* :func:`ensure_drainer` starts the drainer (idempotently) and kicks it; the durable ingestion job
  (:func:`enqueue_events`) calls it after each enqueue, and an application calls it at startup to resume draining
  what a crashed node left behind before the first turn does.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import socket
import time
from dataclasses import dataclass
from typing import Any, Final

from adk_actors.errors import AdkError, ConcurrencyConflict, ConfigError
from adk_actors.memory.base import MemoryScope
from adk_actors.memory.outbox import MAX_CLAIM, MAX_LEASE_MS, MemoryOutbox, OutboxClaim, OutboxItem
from adk_actors.runtime.messages import Request

__all__ = [
    "DRAINER_ACTOR",
    "AwaitIdle",
    "DrainerSpec",
    "Kick",
    "drain_outbox",
    "drainer_id",
    "enqueue_events",
    "ensure_drainer",
]

DRAINER_ACTOR: Final = "adk_actors.memory.drainer.OutboxDrainer"
MAX_CONCURRENCY: Final = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class DrainerSpec:
    """What a drainer drains and how (validated by :meth:`check`; pickles: it is the drainer's spawn args)."""

    outbox: Any
    """The :class:`~adk_actors.memory.outbox.MemoryOutbox`."""
    memory: Any
    """The memory service the rows are added to (it must pickle, as ``SqlMemoryService`` does)."""
    lease_ms: int = 30_000
    """How long one claim holds its rows before another drainer may take them over."""
    batch: int = 100
    """Rows one pass claims."""
    concurrency: int = 1
    """Passes running at once (each a worker job)."""

    def check(self) -> DrainerSpec:
        """Raises: ConfigError ``invalid_value`` naming the knob."""
        if not isinstance(self.outbox, MemoryOutbox):
            raise ConfigError("outbox must be a MemoryOutbox", reason="invalid_value", details={"key": "outbox"})
        for key, value, top in (
            ("lease_ms", self.lease_ms, MAX_LEASE_MS),
            ("batch", self.batch, MAX_CLAIM),
            ("concurrency", self.concurrency, MAX_CONCURRENCY),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(
                    f"{key} must be an integer from 1 to {top}",
                    reason="invalid_value",
                    details={"key": key, "min": 1, "max": top},
                )
        if self.lease_ms < 100:
            raise ConfigError("lease_ms must be at least 100", reason="invalid_value", details={"key": "lease_ms"})
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class Kick(Request[str]):
    """There may be work: run a pass now (answered ``"ok"`` at once when asked)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitIdle(Request[bool]):
    """Answer ``True`` once a pass finds no row pending or claimed (a test's and an operator's wait)."""


# -- one pass -------------------------------------------------------------------------------------------------


def _owner() -> str:
    return f"{socket.gethostname()[:200]}:{os.getpid()}"


def drain_outbox(
    outbox: MemoryOutbox,
    memory: Any,
    lease_ms: int = 30_000,
    batch: int = 100,
    *,
    owner: str | None = None,
    margin_ms: int = 0,
) -> dict[str, Any]:
    """One drain pass (see the module docstring); returns ``{"claimed", "applied", "failed", "lost", "due_ms"}``
    (``due_ms``: milliseconds until the next row is due, ``None`` when no row is pending or claimed).

    Raises:
        StorageError: the outbox failed (the claim's rows are then taken over when its lease expires).
    """
    report: dict[str, Any] = {"claimed": 0, "applied": 0, "failed": 0, "lost": 0, "due_ms": None}
    claim = outbox.claim(owner or _owner(), lease_ms=lease_ms, limit=batch)
    if claim is not None:
        report["claimed"] = len(claim.items)
        _apply(outbox, memory, claim, lease_ms, margin_ms, report)
    report["due_ms"] = outbox.due_in_ms()
    return report


def _groups(items: tuple[OutboxItem, ...]) -> list[list[OutboxItem]]:
    groups: dict[tuple[str, str, str], list[OutboxItem]] = {}
    for item in items:
        groups.setdefault((item.scope.app, item.scope.user, item.session_id), []).append(item)
    return list(groups.values())


def _apply(
    outbox: MemoryOutbox, memory: Any, claim: OutboxClaim, lease_ms: int, margin_ms: int, report: dict[str, Any]
) -> None:
    renewed_at = time.monotonic()
    groups = _groups(claim.items)
    for index, group in enumerate(groups):
        seqs = [item.seq for item in group]
        try:
            if (time.monotonic() - renewed_at) * 1000 > lease_ms / 2:
                claim = outbox.renew(claim, lease_ms=lease_ms)
                renewed_at = time.monotonic()
            outbox.revalidate(claim, seqs, margin_ms=margin_ms)
        except ConcurrencyConflict:
            # Another drainer owns these rows now: it adds them (idempotently); this pass stops adding.
            report["lost"] += sum(len(g) for g in groups[index:])
            return
        try:
            memory.add_batch(MemoryScope(group[0].scope.app, group[0].scope.user), [i.to_memory() for i in group])
        except AdkError as err:
            outbox.fail(claim, seqs, err.reason)
            report["failed"] += len(group)
            continue
        except Exception as exc:  # an adapter bug: record the attempt (its type only) and go on
            outbox.fail(claim, seqs, f"adapter_{type(exc).__name__}"[:64])
            report["failed"] += len(group)
            continue
        report["applied"] += outbox.complete(claim, seqs)


# -- starting it ----------------------------------------------------------------------------------------------


def drainer_id(spec: DrainerSpec) -> str:
    """The drainer's inner-actor id: one per (outbox, memory service) descriptor, the same in every process."""
    digest = hashlib.blake2b(pickle.dumps((spec.outbox, spec.memory), protocol=4), digest_size=10).hexdigest()
    return f"memory-outbox-{digest}"


def ensure_drainer(spec: DrainerSpec, *, system: Any = None, timeout: float | None = None) -> Any:
    """Start the drainer of ``spec`` unless it runs, and kick it; returns its ``LocalRef``.

    Call it at application startup (next to building the Runner) to resume draining after a restart before the
    first durable ingestion does.

    Raises:
        ConfigError: ``invalid_value`` (a bad knob).
        AdkError: the system is not running or did not answer.
    """
    from adk_actors.runtime.refs import LocalRef, place
    from adk_actors.runtime.system import current_system

    spec.check()
    handle = system if system is not None else current_system()
    local = drainer_id(spec)
    try:
        ref = handle.spawn(DRAINER_ACTOR, spec, id=local, restart="permanent", timeout=timeout)
    except AdkError as err:
        if err.reason != "already_started":
            raise
        ref = LocalRef(host_id=place(local, handle.settings.hosts), local_id=local)
    handle.ask(ref, Kick(), timeout)
    return ref


def enqueue_events(spec: DrainerSpec, app: str, user: str, session_id: str, items: list[dict[str, str]]) -> dict:
    """The durable ingestion job (a worker job the turn waits for): enqueue one invocation's texts, then start or
    kick the drainer. Returns the receipt as a dict; a drainer that cannot be reached is logged, not raised: the
    rows are committed and the next kick (or the next start) drains them.

    Raises:
        ValidationError, StorageError: as :meth:`MemoryOutbox.enqueue` (nothing was enqueued).
    """
    receipt = spec.outbox.enqueue(MemoryScope(app, user), session_id, items)
    try:
        ensure_drainer(spec, timeout=10.0)
    except AdkError as err:
        from adk_actors.logs import get_logger

        get_logger("adk_actors.memory.drainer").warning("memory outbox drainer not reached", reason=err.reason)
    return {"batch_id": receipt.batch_id, "enqueued": receipt.enqueued, "duplicates": receipt.duplicates}
