"""The durable memory-ingestion outbox: a restart-safe SQL queue of texts waiting to be added to memory.

``memory_ingestion={"mode": "durable", ...}`` makes a Runner *enqueue* an invocation's input and answer here
(one committed transaction before the turn returns) instead of adding them to memory from a job nobody waits
for; a drainer (:mod:`adk_actors.memory.drainer`) then claims rows and applies them to the memory service.

One row per ingested event (table ``adk_memory_outbox``, schema version 1 recorded in ``adk_memory_schema`` under
the component ``memory_outbox``, so the outbox may share the memory database):

* Idempotent enqueue: a unique key on (app, user, session id, event id) makes a repeated enqueue a no-op.
* States: ``pending`` → ``claimed`` (a lease) → ``done``; a failed attempt goes back to ``pending`` after a
  backoff, and after ``max_attempts`` claims the row is ``dead`` with its last error's reason tag kept (a tag,
  never a message or content).
* Leases: :meth:`MemoryOutbox.claim` takes up to ``limit`` rows that are pending and due, or claimed under a lease
  that expired (a crashed drainer's), under a fresh claim id, and counts the attempt. :meth:`~MemoryOutbox.renew`
  extends a live lease and refuses (``ConcurrencyConflict(reason="lease_lost")``, writing nothing) once any row of
  the claim expired or was taken over. :meth:`~MemoryOutbox.revalidate` is the check a drainer makes right before
  each adapter mutation; :meth:`~MemoryOutbox.complete` and :meth:`~MemoryOutbox.fail` touch only rows the claim
  still holds.
* At least once, no duplicates: a lease can still expire between the revalidation and the adapter's commit, so
  each entry is added with the idempotency key ``<session_id>:<event_id>`` (the one ``on_success`` uses) and a
  re-delivered row adds nothing.
* Time is the database clock (PostgreSQL ``clock_timestamp()``, SQLite ``julianday('now')``) in integer
  milliseconds, so every process agrees on expiry; tests inject ``clock`` (a picklable callable returning ms).

Like the other SQL stores it is a picklable descriptor: each process opens its own engine lazily.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from adk_actors.errors import ConcurrencyConflict, StorageError, ValidationError
from adk_actors.memory.base import MAX_BATCH_ENTRIES, MemoryProvenance, MemoryScope, NewMemory, check_scope
from adk_actors.memory.sql import schema_table
from adk_actors.sessions.model import validate_name
from adk_actors.storage.sql import SqlStore, db_now_ms

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_PENDING",
    "MAX_LEASE_MS",
    "SCHEMA_VERSION",
    "STATES",
    "MemoryOutbox",
    "OutboxClaim",
    "OutboxItem",
    "OutboxReceipt",
    "idempotency_key",
]

SCHEMA_VERSION: Final = 1
STATES: Final = ("pending", "claimed", "done", "dead")
DEFAULT_MAX_ATTEMPTS: Final = 5
DEFAULT_MAX_PENDING: Final = 100_000
"""Default bound on the rows not yet done or dead (a full outbox refuses enqueues)."""
MAX_LEASE_MS: Final = 3_600_000
"""The longest lease one claim or renewal may take (an hour)."""
MAX_CLAIM: Final = 1000
MAX_STATUS_SCOPES: Final = 1000
_ITEM_KEYS: Final = frozenset({"event_id", "author", "text"})
_COMPONENT: Final = "memory_outbox"
_PG_MIGRATION_LOCK: Final = 0x4144_4B4D_4F42_5831  # "ADKMOBX1"
_Pk = BigInteger().with_variant(Integer(), "sqlite")

tables = MetaData()
outbox_table = Table(
    "adk_memory_outbox",
    tables,
    Column("seq", _Pk, primary_key=True, autoincrement=True),
    Column("batch_id", String(40), nullable=False),
    Column("app", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("session_id", String(255), nullable=False),
    Column("event_id", String(255), nullable=False),
    Column("author", String(255), nullable=False),
    Column("content", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("claim_id", String(40)),
    Column("owner", String(255)),
    Column("lease_until", BigInteger),
    Column("available_at", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("last_error", String(64)),
    UniqueConstraint("app", "user_id", "session_id", "event_id", name="uq_adk_memory_outbox_event"),
)
Index("ix_adk_memory_outbox_due", outbox_table.c.state, outbox_table.c.available_at)
Index("ix_adk_memory_outbox_batch", outbox_table.c.batch_id)
Index("ix_adk_memory_outbox_claim", outbox_table.c.claim_id)
_O = outbox_table.c


def _migrate_to_1(conn: Connection) -> None:
    tables.create_all(conn, checkfirst=True)


def idempotency_key(session_id: str, event_id: str) -> str:
    """The memory idempotency key of one ingested event (shared with ``on_success`` ingestion)."""
    return f"{session_id}:{event_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxReceipt:
    """What :meth:`MemoryOutbox.enqueue` did."""

    batch_id: str
    """The id of this enqueue's rows (``"obx_"`` and 32 hex digits), for :meth:`MemoryOutbox.batch_status`."""
    enqueued: int
    """Rows added."""
    duplicates: int
    """Items already in the outbox (or repeated in the batch): nothing was added for them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxItem:
    """One claimed row."""

    seq: int
    batch_id: str
    scope: MemoryScope
    session_id: str
    event_id: str
    author: str
    text: str
    attempts: int
    """Claims so far, this one included."""

    def to_memory(self) -> NewMemory:
        """The entry this row adds (idempotent by ``<session_id>:<event_id>``)."""
        return NewMemory(
            content=self.text,
            provenance=MemoryProvenance(session_id=self.session_id, event_id=self.event_id, author=self.author),
            idempotency_key=idempotency_key(self.session_id, self.event_id),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxClaim:
    """A lease on some rows: only its holder may complete or fail them, and only while it holds them."""

    claim_id: str
    owner: str
    lease_until: int
    """Epoch milliseconds (database clock) when the lease expires unless renewed."""
    items: tuple[OutboxItem, ...]


def _bad(field: str, problem: str, reason: str = "invalid_value", **details: Any) -> ValidationError:
    return ValidationError(
        f"{field}: {problem}", reason=reason, details={"field": field, "problem": problem, **details}
    )


def _check_int(value: Any, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _bad(field, "out_of_range", min=minimum, max=maximum)
    return int(value)


def check_items(session_id: Any, items: Any) -> list[NewMemory]:
    """Validate an enqueue's items (``{"event_id", "author", "text"}`` mappings); returns them as entries.

    Raises:
        ValidationError: ``invalid_batch`` (not a sequence of 1..:data:`MAX_BATCH_ENTRIES` mappings),
            ``unknown_key``/``missing_key`` (details name the key's position, never content), ``invalid_name``
            (session, event id or author), ``invalid_content``, ``limit_exceeded``.
    """
    validate_name(session_id, "session_id")
    if (
        not isinstance(items, Sequence)
        or isinstance(items, str | bytes)
        or not 1 <= len(items) <= MAX_BATCH_ENTRIES
        or not all(isinstance(i, Mapping) for i in items)
    ):
        raise _bad("items", "not_a_batch", "invalid_batch", max_items=MAX_BATCH_ENTRIES)
    out = []
    for index, item in enumerate(items):
        keys = set(item)
        if not keys <= _ITEM_KEYS:
            raise _bad("items", "unknown_key", "unknown_key", index=index, allowed=sorted(_ITEM_KEYS))
        if keys != _ITEM_KEYS:
            raise _bad("items", "missing_key", "missing_key", index=index, allowed=sorted(_ITEM_KEYS))
        out.append(
            NewMemory(
                content=item["text"],
                provenance=MemoryProvenance(session_id=session_id, event_id=item["event_id"], author=item["author"]),
                idempotency_key=idempotency_key(session_id, item["event_id"]),
            )
        )
    return out


class MemoryOutbox(SqlStore):
    """The durable ingestion outbox in a SQLite file or a PostgreSQL database (see the module docstring).

    Args:
        url: A SQLAlchemy URL (``sqlite:///path.db`` or ``postgresql+psycopg://...``).
        max_attempts: Claims a row gets before it is ``dead``.
        max_pending: Bound on rows not yet done or dead.
        backoff_ms: Delay before a failed row is due again (doubling per attempt, at most 64 times this).
        busy_timeout_ms: SQLite's busy timeout.
        engine_options: Extra ``create_engine`` options.
        clock: ``None`` (the database clock) or a picklable callable returning epoch milliseconds.

    Raises:
        ConfigError: ``url`` is not a SQLAlchemy URL.
        ValidationError: a bound is not a positive int.
    """

    LABEL: ClassVar[str] = "memory outbox"
    URL_KEY: ClassVar[str] = "outbox"
    COMPONENT = _COMPONENT
    SCHEMA_VERSION = SCHEMA_VERSION
    SCHEMA_TABLE = schema_table
    MIGRATIONS: ClassVar[Mapping[int, Callable[[Connection], None]]] = {1: _migrate_to_1}
    PG_MIGRATION_LOCK = _PG_MIGRATION_LOCK
    DIALECTS = ("sqlite", "postgresql")

    def __init__(
        self,
        url: str,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        max_pending: int = DEFAULT_MAX_PENDING,
        backoff_ms: int = 1000,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._max_attempts = _check_int(max_attempts, "max_attempts", 1, 1000)
        self._max_pending = _check_int(max_pending, "max_pending", 1, 100_000_000)
        self._backoff_ms = _check_int(backoff_ms, "backoff_ms", 0, MAX_LEASE_MS)
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)

    def _descriptor(self) -> dict[str, Any]:
        return {
            **super()._descriptor(),
            "max_attempts": self._max_attempts,
            "max_pending": self._max_pending,
            "backoff_ms": self._backoff_ms,
        }

    @property
    def max_attempts(self) -> int:
        return self._max_attempts

    def _now(self, conn: Connection) -> int:
        if self._clock is not None:
            return int(self._clock())
        return db_now_ms(conn)

    def _migration_timestamp(self, conn: Connection) -> Any:
        return self._now(conn) / 1000.0

    # -- enqueue ---------------------------------------------------------------------------------------------

    def enqueue(self, scope: MemoryScope, session_id: str, items: Sequence[Mapping[str, str]]) -> OutboxReceipt:
        """Queue one invocation's texts for ``scope`` (one transaction); items already queued are skipped.

        ``items`` are ``{"event_id", "author", "text"}`` mappings (the texts the memory entries will hold).

        Raises:
            ValidationError: see :func:`check_items`; ``invalid_scope``.
            StorageError: ``outbox_capacity_reached`` (nothing is added), or the store failed.
        """
        check_scope(scope)
        entries = check_items(session_id, items)
        unique: dict[str, NewMemory] = {}
        for entry in entries:
            assert entry.provenance.event_id is not None
            unique.setdefault(entry.provenance.event_id, entry)
        batch_id = "obx_" + secrets.token_hex(16)

        def body(conn: Connection) -> OutboxReceipt:
            now = self._now(conn)
            where = (_O.app == scope.app, _O.user_id == scope.user, _O.session_id == session_id)
            known = set(
                conn.execute(select(_O.event_id).where(*where, _O.event_id.in_(sorted(unique)))).scalars().all()
            )
            fresh = [e for k, e in unique.items() if k not in known]
            if fresh:
                live = conn.execute(
                    select(func.count()).select_from(outbox_table).where(_O.state.in_(("pending", "claimed")))
                ).scalar_one()
                if int(live) + len(fresh) > self._max_pending:
                    raise StorageError(
                        "the memory outbox is full",
                        reason="outbox_capacity_reached",
                        details={"max_pending": self._max_pending},
                    )
                insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
                rows = [
                    {
                        "batch_id": batch_id,
                        "app": scope.app,
                        "user_id": scope.user,
                        "session_id": session_id,
                        "event_id": e.provenance.event_id,
                        "author": e.provenance.author or "user",
                        "content": e.content,
                        "state": "pending",
                        "attempts": 0,
                        "available_at": now,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for e in fresh
                ]
                # A concurrent enqueue of the same events (PostgreSQL) loses quietly: its rows are the winner's.
                conn.execute(
                    insert(outbox_table).on_conflict_do_nothing(
                        index_elements=[_O.app, _O.user_id, _O.session_id, _O.event_id]
                    ),
                    rows,
                )
            return OutboxReceipt(batch_id=batch_id, enqueued=len(fresh), duplicates=len(entries) - len(fresh))

        return self._write(body)

    # -- leases ----------------------------------------------------------------------------------------------

    def claim(self, owner: str, *, lease_ms: int, limit: int = 100) -> OutboxClaim | None:
        """Lease up to ``limit`` due rows (pending, or claimed under an expired lease), oldest first.

        A row whose lease expired after its last allowed attempt is marked ``dead`` (``lease_expired``) instead.
        Returns ``None`` when nothing is due.

        Raises:
            ValidationError: a bad ``owner`` (``invalid_name``), ``lease_ms`` or ``limit``.
            StorageError: the store failed.
        """
        validate_name(owner, "owner")
        lease_ms = _check_int(lease_ms, "lease_ms", 1, MAX_LEASE_MS)
        limit = _check_int(limit, "limit", 1, MAX_CLAIM)
        claim_id = "clm_" + secrets.token_hex(16)

        def body(conn: Connection) -> OutboxClaim | None:
            now = self._now(conn)
            expired = and_(_O.state == "claimed", _O.lease_until <= now)
            conn.execute(
                update(outbox_table)
                .where(expired, _O.attempts >= self._max_attempts)
                .values(state="dead", claim_id=None, last_error="lease_expired", updated_at=now)
            )
            due = or_(and_(_O.state == "pending", _O.available_at <= now), expired)
            query = select(_O.seq).where(due).order_by(_O.seq).limit(limit)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            seqs = list(conn.execute(query).scalars().all())
            if not seqs:
                return None
            lease_until = now + lease_ms
            conn.execute(
                update(outbox_table)
                .where(_O.seq.in_(seqs))
                .values(
                    state="claimed",
                    claim_id=claim_id,
                    owner=owner,
                    lease_until=lease_until,
                    attempts=_O.attempts + 1,
                    updated_at=now,
                )
            )
            rows = conn.execute(select(outbox_table).where(_O.seq.in_(seqs)).order_by(_O.seq)).all()
            items = tuple(
                OutboxItem(
                    seq=int(r.seq),
                    batch_id=r.batch_id,
                    scope=MemoryScope(r.app, r.user_id),
                    session_id=r.session_id,
                    event_id=r.event_id,
                    author=r.author,
                    text=r.content,
                    attempts=int(r.attempts),
                )
                for r in rows
            )
            return OutboxClaim(claim_id=claim_id, owner=owner, lease_until=lease_until, items=items)

        return self._write(body)

    def renew(self, claim: OutboxClaim, *, lease_ms: int) -> OutboxClaim:
        """Extend the lease of the claim's rows still claimed (all of them, or none).

        Raises:
            ConcurrencyConflict: ``lease_lost`` when a row's lease expired or another claim took it (nothing is
                written).
        """
        lease_ms = _check_int(lease_ms, "lease_ms", 1, MAX_LEASE_MS)

        def body(conn: Connection) -> OutboxClaim:
            now = self._now(conn)
            held, lost = self._holding(conn, claim, [i.seq for i in claim.items], now, 0)
            if lost:
                raise _lease_lost(claim, lost)
            lease_until = now + lease_ms
            if held:
                conn.execute(
                    update(outbox_table)
                    .where(_O.seq.in_(held), _O.claim_id == claim.claim_id)
                    .values(lease_until=lease_until, updated_at=now)
                )
            return OutboxClaim(claim_id=claim.claim_id, owner=claim.owner, lease_until=lease_until, items=claim.items)

        return self._write(body)

    def revalidate(self, claim: OutboxClaim, seqs: Sequence[int], *, margin_ms: int = 0) -> None:
        """Check, right before an adapter mutation, that the claim still holds rows ``seqs`` for at least
        ``margin_ms`` more.

        Raises:
            ConcurrencyConflict: ``lease_lost``.
        """

        def body(conn: Connection) -> None:
            now = self._now(conn)
            held, lost = self._holding(conn, claim, list(seqs), now, margin_ms)
            if lost or len(held) != len(set(seqs)):
                raise _lease_lost(claim, lost or len(set(seqs)) - len(held))

        self._read(body)

    @staticmethod
    def _holding(
        conn: Connection, claim: OutboxClaim, seqs: list[int], now: int, margin_ms: int
    ) -> tuple[list[int], int]:
        """(rows of ``seqs`` still claimed by ``claim`` with a live lease, how many of ``seqs`` were lost). Rows
        the claim already completed or failed count as neither."""
        rows = conn.execute(
            select(_O.seq, _O.state, _O.claim_id, _O.lease_until).where(_O.seq.in_(sorted(set(seqs))))
        ).all()
        held, lost = [], 0
        for row in rows:
            if row.claim_id != claim.claim_id:
                lost += 1
            elif row.state == "claimed":
                if int(row.lease_until) > now + margin_ms:
                    held.append(int(row.seq))
                else:
                    lost += 1
        return held, lost

    def complete(self, claim: OutboxClaim, seqs: Sequence[int]) -> int:
        """Mark rows ``seqs`` done if the claim still holds them; returns how many it marked (a row another claim
        took over is left to that claim: its add will be an idempotent no-op)."""

        def body(conn: Connection) -> int:
            now = self._now(conn)
            result = conn.execute(
                update(outbox_table)
                .where(_O.seq.in_(list(seqs)), _O.claim_id == claim.claim_id, _O.state == "claimed")
                .values(state="done", lease_until=None, last_error=None, updated_at=now)
            )
            return int(result.rowcount or 0)

        return self._write(body)

    def fail(self, claim: OutboxClaim, seqs: Sequence[int], reason: str) -> dict[str, int]:
        """Record a failed attempt on rows ``seqs`` the claim still holds: ``dead`` after ``max_attempts``, else
        pending again after a backoff. ``reason`` is a structural tag (an error's ``reason``), kept on the row.

        Returns ``{"retry": n, "dead": m}``.
        """
        tag = reason if isinstance(reason, str) and reason.isidentifier() and len(reason) <= 64 else "error"

        def body(conn: Connection) -> dict[str, int]:
            now = self._now(conn)
            mine = (_O.seq.in_(list(seqs)), _O.claim_id == claim.claim_id, _O.state == "claimed")
            dead = conn.execute(
                update(outbox_table)
                .where(*mine, _O.attempts >= self._max_attempts)
                .values(state="dead", claim_id=None, lease_until=None, last_error=tag, updated_at=now)
            ).rowcount
            rows = conn.execute(select(_O.seq, _O.attempts).where(*mine)).all()
            for row in rows:
                delay = self._backoff_ms * 2 ** min(int(row.attempts) - 1, 6)
                conn.execute(
                    update(outbox_table)
                    .where(_O.seq == row.seq)
                    .values(
                        state="pending",
                        claim_id=None,
                        lease_until=None,
                        available_at=now + delay,
                        last_error=tag,
                        updated_at=now,
                    )
                )
            return {"retry": len(rows), "dead": int(dead or 0)}

        return self._write(body)

    # -- status ----------------------------------------------------------------------------------------------

    def due_in_ms(self) -> int | None:
        """Milliseconds until the next row is claimable (0: now), or ``None`` when every row is done or dead."""

        def body(conn: Connection) -> int | None:
            now = self._now(conn)
            pending = conn.execute(select(func.min(_O.available_at)).where(_O.state == "pending")).scalar()
            leased = conn.execute(select(func.min(_O.lease_until)).where(_O.state == "claimed")).scalar()
            due = [int(v) for v in (pending, leased) if v is not None]
            return None if not due else max(0, min(due) - now)

        return self._read(body)

    def scope_status(self, scope: MemoryScope) -> dict[str, int]:
        """Row counts by state for one scope (every state present, zeros included)."""
        check_scope(scope)

        def body(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                select(_O.state, func.count()).where(_O.app == scope.app, _O.user_id == scope.user).group_by(_O.state)
            ).all()
            return _counts(rows)

        return self._read(body)

    def status(self, *, limit: int = 100) -> dict[str, Any]:
        """Counts by state: ``{"states": {...}, "scopes": [{"app", "user", "states"}, ...]}``, scopes sorted by
        (app, user), at most ``limit`` of them (``"truncated": True`` when there are more)."""
        limit = _check_int(limit, "limit", 1, MAX_STATUS_SCOPES)

        def body(conn: Connection) -> dict[str, Any]:
            totals = _counts(conn.execute(select(_O.state, func.count()).group_by(_O.state)).all())
            scope_keys = conn.execute(
                select(_O.app, _O.user_id).distinct().order_by(_O.app, _O.user_id).limit(limit + 1)
            ).all()
            scopes = []
            for app, user in scope_keys[:limit]:
                rows = conn.execute(
                    select(_O.state, func.count()).where(_O.app == app, _O.user_id == user).group_by(_O.state)
                ).all()
                scopes.append({"app": app, "user": user, "states": _counts(rows)})
            return {"states": totals, "scopes": scopes, "truncated": len(scope_keys) > limit}

        return self._read(body)

    def batch_status(self, batch_id: str) -> dict[str, Any]:
        """One enqueue's rows: ``{"batch_id", "items", "states", "attempts", "errors"}`` (``attempts``: the most
        any row took; ``errors``: the distinct reason tags of failed attempts).

        Raises:
            StorageError: ``outbox_batch_not_found``.
        """
        if not isinstance(batch_id, str) or len(batch_id) > 64 or not batch_id.startswith("obx_"):
            raise StorageError("no such outbox batch", reason="outbox_batch_not_found")

        def body(conn: Connection) -> list[Any]:
            return list(conn.execute(select(_O.state, _O.attempts, _O.last_error).where(_O.batch_id == batch_id)).all())

        rows = self._read(body)
        if not rows:
            raise StorageError("no such outbox batch", reason="outbox_batch_not_found")
        states = dict.fromkeys(STATES, 0)
        for row in rows:
            states[row.state] += 1
        return {
            "batch_id": batch_id,
            "items": len(rows),
            "states": states,
            "attempts": max(int(r.attempts) for r in rows),
            "errors": sorted({r.last_error for r in rows if r.last_error}),
        }

    def purge(self, *, retention_ms: int, limit: int = 1000) -> int:
        """Delete up to ``limit`` done rows last updated more than ``retention_ms`` ago; returns how many.
        (Dead rows are kept for inspection; a purged event enqueued again is queued again, and its add is an
        idempotent no-op.)"""
        retention_ms = _check_int(retention_ms, "retention_ms", 0, 10 * 365 * 86_400_000)
        limit = _check_int(limit, "limit", 1, 100_000)

        def body(conn: Connection) -> int:
            cutoff = self._now(conn) - retention_ms
            seqs = (
                select(_O.seq)
                .where(_O.state == "done", _O.updated_at < cutoff)
                .order_by(_O.seq)
                .limit(limit)
                .scalar_subquery()
            )
            return int(conn.execute(delete(outbox_table).where(_O.seq.in_(seqs))).rowcount or 0)

        return self._write(body)


def _counts(rows: Sequence[Any]) -> dict[str, int]:
    counts = dict.fromkeys(STATES, 0)
    for state, count in rows:
        counts[str(state)] = int(count)
    return counts


def _lease_lost(claim: OutboxClaim, lost: int) -> ConcurrencyConflict:
    return ConcurrencyConflict(
        "the outbox lease was lost", reason="lease_lost", details={"claim_id": claim.claim_id, "rows": lost}
    )
