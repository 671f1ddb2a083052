"""The durable workflow invocation ledger on SQLAlchemy 2 (the reference's Mnesia invocation ledger).

One row per durable workflow invocation records what a restarted system needs to resume it: the workflow's id,
version and kind (the compiled workflow is application code and is reconstructed by those), the input, the last
committed checkpoint with its dense sequence number, the outcome, and a *fenced ownership lease*.

Leases: an owner holds ``(token, lease_until)``. The token is a per-invocation integer that only grows; every
takeover sets it to ``old + 1``. :meth:`~SqlInvocationLedger.renew`, :meth:`~SqlInvocationLedger.checkpoint`,
:meth:`~SqlInvocationLedger.finish` and :meth:`~SqlInvocationLedger.release` check the current token and
``now < lease_until`` and write in ONE transaction (equality is expired); otherwise they raise
``ConcurrencyConflict(reason="lease_lost")`` and write nothing. A takeover (:meth:`~SqlInvocationLedger.acquire`,
:meth:`~SqlInvocationLedger.resume_workflow_invocation`) is allowed only once the lease expired or was released,
and is a compare-and-set on the token, so of several concurrent takers exactly one wins, and an old owner that is
still alive is fenced off by its stale token.

Time: ``now`` is the database clock (PostgreSQL ``clock_timestamp()``, read after the row lock is taken; SQLite
``julianday('now')``), in integer milliseconds since the Unix epoch, so every process sharing the database agrees
on expiry. Tests inject ``clock`` (a picklable callable returning milliseconds) instead.

Like :class:`~adk_actors.sessions.SqlSessionService`, a :class:`SqlInvocationLedger` is a picklable descriptor:
each process opens its own engine lazily (again after a fork) and migrates the schema forward on first use,
recording the version in ``adk_workflow_ledger_schema``. SQLite runs in WAL mode with a busy timeout and every
write transaction is ``BEGIN IMMEDIATE``; PostgreSQL locks the invocation row ``FOR UPDATE``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    MetaData,
    String,
    Table,
    Text,
    delete,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from adk_actors.content.canonical import canonical_dumps, canonical_loads
from adk_actors.errors import ConcurrencyConflict, ValidationError, WorkflowError
from adk_actors.sessions.model import validate_name
from adk_actors.storage.sql import SqlStore, db_now_ms, schema_version_table

__all__ = [
    "FINISH_STATES",
    "MAX_DOCUMENT_BYTES",
    "MAX_LEASE_MS",
    "SCHEMA_VERSION",
    "STATES",
    "InvocationState",
    "InvocationStatus",
    "Lease",
    "SqlInvocationLedger",
    "metadata",
]

SCHEMA_VERSION: Final = 1
"""The schema version this code writes; older databases are migrated forward on open."""
STATES: Final = ("running", "paused", "completed", "failed", "cancelled")
"""Every invocation state. ``running`` and ``paused`` can be resumed; the other three are terminal."""
FINISH_STATES: Final = ("paused", "completed", "failed", "cancelled")
"""The states :meth:`SqlInvocationLedger.finish` may record."""
MAX_LEASE_MS: Final = 7 * 24 * 3600 * 1000
"""The longest lease one call may grant (a week)."""
MAX_DOCUMENT_BYTES: Final = 64 * 1024 * 1024
"""Default bound on one stored JSON document (input, checkpoint or result), in UTF-8 bytes."""

InvocationState = Literal["running", "paused", "completed", "failed", "cancelled"]

_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
_COMPONENT: Final = "workflow_ledger"
_PG_MIGRATION_LOCK: Final = 0x4144_4B57_464C_4431  # "ADKWFLD1": serializes concurrent first opens
_MAX_ATTEMPTS: Final = 8
_DIALECTS: Final = ("sqlite", "postgresql")

_T = TypeVar("_T")

metadata = MetaData()

schema_table = schema_version_table("adk_workflow_ledger_schema", metadata)

invocations_table = Table(
    "adk_workflow_invocations",
    metadata,
    Column("invocation_id", String(255), primary_key=True),
    Column("workflow_id", String(255), nullable=False),
    Column("version", String(255), nullable=False),
    Column("kind", String(255), nullable=False),
    Column("state", String(16), nullable=False),
    Column("input", Text, nullable=False),
    Column("checkpoint", Text, nullable=True),
    Column("checkpoint_seq", BigInteger, nullable=False),
    Column("result", Text, nullable=True),
    Column("owner", String(255), nullable=True),
    Column("lease_token", BigInteger, nullable=False),
    Column("lease_until", BigInteger, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)
Index("ix_adk_workflow_invocations_state", invocations_table.c.state, invocations_table.c.lease_until)

_C = invocations_table.c


def _migrate_to_1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[invocations_table], checkfirst=True)


# Forward migrations: MIGRATIONS[v] takes a database at version v-1 to version v, inside one transaction.
MIGRATIONS: Final[dict[int, Callable[[Connection], None]]] = {1: _migrate_to_1}


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """Proof of ownership of one invocation, handed to every fenced write."""

    invocation_id: str
    """The invocation this lease is for."""
    owner: str
    """Who holds it (a coordinator's stable name)."""
    token: int
    """The fencing token: grows by one on every takeover, so an older owner's token is stale."""
    lease_until: int
    """Expiry in milliseconds since the Unix epoch on the ledger's clock; ``now >= lease_until`` is expired."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InvocationStatus:
    """A snapshot of one durable invocation, read in one transaction."""

    invocation_id: str
    """The stable invocation id."""
    workflow_id: str
    """The id of the workflow to reconstruct on resume."""
    version: str
    """The workflow version to reconstruct on resume."""
    kind: str
    """The workflow kind to reconstruct on resume."""
    state: InvocationState
    """``running``, ``paused``, ``completed``, ``failed`` or ``cancelled``."""
    input: Any
    """The JSON input the invocation started with."""
    checkpoint: Any
    """The last committed checkpoint (``None`` before the first one)."""
    checkpoint_seq: int
    """The sequence number of that checkpoint (``0`` before the first one)."""
    result: Any
    """What :meth:`SqlInvocationLedger.finish` recorded (``None`` while running)."""
    owner: str | None
    """The lease holder, or ``None`` once released or finished."""
    lease_token: int
    """The current fencing token."""
    lease_until: int | None
    """Lease expiry in epoch milliseconds, or ``None`` once released or finished."""
    owned: bool
    """Whether a live lease is held right now (``now < lease_until``)."""
    now: int
    """The ledger clock when this snapshot was read, in epoch milliseconds."""
    created_at: int
    """When the invocation was started, in epoch milliseconds."""
    updated_at: int
    """When the row last changed, in epoch milliseconds."""

    @property
    def resumable(self) -> bool:
        """Whether the invocation is ``running`` or ``paused`` (it may still be owned)."""
        return self.state not in _TERMINAL


def _positive_ms(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_LEASE_MS:
        raise ValidationError(
            f"{what} must be an integer in 1..{MAX_LEASE_MS}",
            reason="invalid_value",
            details={"field": what, "type": type(value).__name__},
        )
    return value


class SqlInvocationLedger(SqlStore):
    """Durable workflow invocations in a SQL database (SQLite file or PostgreSQL).

    Args:
        url: A SQLAlchemy URL (``sqlite:///path/ledger.db``, ``postgresql+psycopg://...``). A PostgreSQL schema can
            be selected with ``?options=-csearch_path%3Dmy_schema`` (the schema must exist).
        busy_timeout_ms: How long a SQLite writer waits for the write lock.
        engine_options: Extra JSON-safe keyword arguments for ``sqlalchemy.create_engine``.
        clock: Replaces the database clock: returns wall-clock milliseconds since the epoch. Must pickle (a
            module-level function or an instance of a module-level class) when the ledger crosses processes.
        max_document_bytes: Bound on each stored JSON document (input, checkpoint, result).

    Raises:
        ConfigError: reason ``invalid_value`` when the URL cannot be parsed.
    """

    LABEL = "workflow ledger"
    URL_KEY = "ledger_url"
    COMPONENT = _COMPONENT
    SCHEMA_TABLE = schema_table
    MIGRATIONS = MIGRATIONS
    PG_MIGRATION_LOCK = _PG_MIGRATION_LOCK
    DIALECTS = _DIALECTS
    MAX_ATTEMPTS = _MAX_ATTEMPTS

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
    ) -> None:
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)
        self._max_document_bytes = int(max_document_bytes)

    def _descriptor(self) -> dict[str, Any]:
        return {**super()._descriptor(), "max_document_bytes": self._max_document_bytes}

    def open(self) -> SqlInvocationLedger:
        """Open the engine and migrate the schema now instead of on first use.

        Raises:
            StorageError: reason ``open_failed`` when the database cannot be reached or initialized, or
                ``schema_too_new`` when it was written by a newer version.
        """
        self._get_engine()
        return self

    def _target_version(self) -> int:
        return SCHEMA_VERSION  # the module's value (migrations are declared beside it)

    def _migration_timestamp(self, conn: Connection) -> Any:
        return self._now(conn)

    def now_ms(self) -> int:
        """The ledger clock (the database clock unless a ``clock`` was injected), in epoch milliseconds.

        Raises:
            StorageError: the database cannot be read.
        """
        return self._read(self._now)

    # -- the ledger ------------------------------------------------------------------------------------------

    def start_workflow_invocation(
        self, invocation_id: str, workflow_id: str, version: str, kind: str, input: Any, owner: str, lease_ms: int
    ) -> Lease:
        """Record a new ``running`` invocation owned by ``owner`` (token 1, checkpoint seq 0).

        Raises:
            WorkflowError: reason ``already_exists`` when the id is taken (nothing is written).
            ValidationError: an invalid name, lease or non-JSON-safe input.
            StorageError: the database failed.
        """
        for value, what in (
            (invocation_id, "invocation_id"),
            (workflow_id, "workflow_id"),
            (version, "version"),
            (kind, "kind"),
            (owner, "owner"),
        ):
            validate_name(value, what)
        lease_ms = _positive_ms(lease_ms, "lease_ms")
        payload = self._dumps(input, "input")

        def body(conn: Connection) -> Lease:
            now = self._now(conn)
            until = now + lease_ms
            stmt = (
                self._insert(conn)
                .values(
                    invocation_id=invocation_id,
                    workflow_id=workflow_id,
                    version=version,
                    kind=kind,
                    state="running",
                    input=payload,
                    checkpoint=None,
                    checkpoint_seq=0,
                    result=None,
                    owner=owner,
                    lease_token=1,
                    lease_until=until,
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing()
                .returning(_C.invocation_id)
            )
            if conn.execute(stmt).scalar() is None:
                raise WorkflowError(
                    "a workflow invocation with this id exists",
                    reason="already_exists",
                    details={"invocation_id": invocation_id},
                )
            return Lease(invocation_id=invocation_id, owner=owner, token=1, lease_until=until)

        return self._write(body)

    def workflow_invocation_status(self, invocation_id: str) -> InvocationStatus:
        """The invocation as committed now.

        Raises:
            WorkflowError: reason ``not_found``.
            StorageError: the database failed.
        """
        validate_name(invocation_id, "invocation_id")

        def body(conn: Connection) -> InvocationStatus:
            row = conn.execute(select(invocations_table).where(_C.invocation_id == invocation_id)).one_or_none()
            if row is None:
                raise _not_found(invocation_id)
            return _status(row, self._now(conn))

        return self._read(body)

    def renew(self, lease: Lease, lease_ms: int) -> Lease:
        """Extend a live lease to ``now + lease_ms``; returns the renewed lease (same token).

        Raises:
            ConcurrencyConflict: reason ``lease_lost`` (stale token, expired, released or deleted); nothing written.
            StorageError: the database failed.
        """
        lease_ms = _positive_ms(lease_ms, "lease_ms")

        def body(conn: Connection) -> Lease:
            _row, now = self._fenced(conn, lease, "renew")
            until = now + lease_ms
            self._update(conn, lease, now, lease_until=until)
            return Lease(invocation_id=lease.invocation_id, owner=lease.owner, token=lease.token, lease_until=until)

        return self._write(body)

    def checkpoint(self, lease: Lease, checkpoint: Any, seq: int) -> None:
        """Commit ``checkpoint`` as number ``seq``, which must be exactly the last seq + 1.

        The engine calls this before it may start the next action, so a takeover never replays a committed step.

        Raises:
            ConcurrencyConflict: reason ``lease_lost`` (checked first) or ``stale_checkpoint``; nothing written.
            ValidationError: a non-JSON-safe checkpoint or a non-integer seq.
            StorageError: the database failed.
        """
        _check_seq(seq)
        payload = self._dumps(checkpoint, "checkpoint")

        def body(conn: Connection) -> None:
            row, now = self._fenced(conn, lease, "checkpoint")
            _next_seq(row, lease, seq)
            self._update(conn, lease, now, checkpoint=payload, checkpoint_seq=seq)

        self._write(body)

    def finish(
        self, lease: Lease, state: str, result: Any = None, *, checkpoint: Any = None, seq: int | None = None
    ) -> None:
        """Record the outcome (``paused``, ``completed``, ``failed`` or ``cancelled``) and release the lease.

        A ``paused`` invocation stays resumable; the other three are terminal. With ``checkpoint`` and its ``seq``
        (exactly the last seq + 1, as for :meth:`checkpoint`) the final checkpoint is committed in the same
        transaction, so an outcome is never recorded without the checkpoint it ended on, nor the other way round.

        Raises:
            ConcurrencyConflict: reason ``lease_lost`` (checked first) or ``stale_checkpoint``; nothing written.
            ValidationError: an unknown state, a non-JSON-safe result or checkpoint, or only one of ``checkpoint``
                and ``seq``.
            StorageError: the database failed.
        """
        if state not in FINISH_STATES:
            raise ValidationError(
                "finish state must be paused, completed, failed or cancelled",
                reason="invalid_value",
                details={"field": "state"},
            )
        if (checkpoint is None) != (seq is None):
            raise ValidationError(
                "a final checkpoint needs its seq, and a seq its checkpoint",
                reason="invalid_value",
                details={"field": "seq" if seq is None else "checkpoint"},
            )
        if seq is not None:
            _check_seq(seq)
        payload = None if result is None else self._dumps(result, "result")
        final = (
            {} if checkpoint is None else {"checkpoint": self._dumps(checkpoint, "checkpoint"), "checkpoint_seq": seq}
        )

        def body(conn: Connection) -> None:
            row, now = self._fenced(conn, lease, "finish")
            if seq is not None:
                _next_seq(row, lease, seq)
            self._update(conn, lease, now, state=state, result=payload, owner=None, lease_until=None, **final)

        self._write(body)

    def release(self, lease: Lease) -> None:
        """Give up a live lease without changing the state, so another owner may take over at once.

        Raises:
            ConcurrencyConflict: reason ``lease_lost``; nothing written.
            StorageError: the database failed.
        """

        def body(conn: Connection) -> None:
            _row, now = self._fenced(conn, lease, "release")
            self._update(conn, lease, now, owner=None, lease_until=None)

        self._write(body)

    def acquire(self, invocation_id: str, owner: str, lease_ms: int) -> Lease:
        """Take over a ``running`` or ``paused`` invocation whose lease expired or was released.

        The new token is the old one + 1 (a compare-and-set), so exactly one of several concurrent takers wins and
        every write of an earlier owner is rejected from now on. The state becomes ``running``.

        Raises:
            WorkflowError: reason ``not_found``, or ``not_resumable`` for completed/failed/cancelled.
            ConcurrencyConflict: reason ``lease_held`` while a live lease is held; nothing written.
            ValidationError: an invalid owner or lease.
            StorageError: the database failed.
        """
        return self._take(invocation_id, owner, lease_ms, {})[0]

    def resume_workflow_invocation(
        self,
        invocation_id: str,
        owner: str,
        lease_ms: int,
        *,
        workflow_id: str | None = None,
        version: str | None = None,
        kind: str | None = None,
    ) -> tuple[Lease, InvocationStatus]:
        """Take over a paused or abandoned (lease expired or released) invocation to continue it.

        Returns the new lease and the invocation *as found* by the takeover, in the same transaction: its
        previous state (``paused`` or ``running``), last checkpoint and seq, and the pause result. Passing
        ``workflow_id`` / ``version`` / ``kind`` checks that the reconstructed workflow is the recorded one.

        Raises:
            WorkflowError: reason ``not_found``; ``not_resumable`` for completed/failed/cancelled;
                ``workflow_mismatch`` when an expected id/version/kind differs. Nothing is written.
            ConcurrencyConflict: reason ``lease_held`` while a live lease is held; nothing written.
            ValidationError: an invalid owner or lease.
            StorageError: the database failed.
        """
        expected = {"workflow_id": workflow_id, "version": version, "kind": kind}
        return self._take(invocation_id, owner, lease_ms, {k: v for k, v in expected.items() if v is not None})

    def abandoned_workflow_invocations(self, *, limit: int = 100) -> list[InvocationStatus]:
        """``running`` invocations nobody owns (lease expired or released), least recently updated first.

        A recovery sweep after a restart resumes these; paused invocations wait for their resume input instead.

        Raises:
            ValidationError: ``limit`` is not a positive integer.
            StorageError: the database failed.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError(
                "limit must be a positive integer", reason="invalid_value", details={"field": "limit"}
            )

        def body(conn: Connection) -> list[InvocationStatus]:
            now = self._now(conn)
            rows = conn.execute(
                select(invocations_table)
                .where((_C.state == "running") & (_C.lease_until.is_(None) | (_C.lease_until <= now)))
                .order_by(_C.updated_at, _C.invocation_id)
                .limit(limit)
            ).all()
            return [_status(row, now) for row in rows]

        return self._read(body)

    def delete_workflow_invocation(self, invocation_id: str, *, force: bool = False) -> bool:
        """Delete an invocation; ``False`` when there was none.

        Raises:
            ConcurrencyConflict: reason ``lease_held`` when a live lease is held and ``force`` is false.
            StorageError: the database failed.
        """
        validate_name(invocation_id, "invocation_id")

        def body(conn: Connection) -> bool:
            row = self._lock(conn, invocation_id)
            if row is None:
                return False
            if not force and row.lease_until is not None and self._now(conn) < row.lease_until:
                raise ConcurrencyConflict(
                    "the invocation is owned", reason="lease_held", details={"invocation_id": invocation_id}
                )
            conn.execute(delete(invocations_table).where(_C.invocation_id == invocation_id))
            return True

        return self._write(body)

    # -- fencing ---------------------------------------------------------------------------------------------

    def _take(
        self, invocation_id: str, owner: str, lease_ms: int, expected: dict[str, str]
    ) -> tuple[Lease, InvocationStatus]:
        validate_name(invocation_id, "invocation_id")
        validate_name(owner, "owner")
        lease_ms = _positive_ms(lease_ms, "lease_ms")

        def body(conn: Connection) -> tuple[Lease, InvocationStatus]:
            row = self._lock(conn, invocation_id)
            if row is None:
                raise _not_found(invocation_id)
            if row.state in _TERMINAL:
                raise WorkflowError(
                    "the invocation has finished",
                    reason="not_resumable",
                    details={"invocation_id": invocation_id, "state": row.state},
                )
            mismatched = sorted(k for k, v in expected.items() if getattr(row, k) != v)
            if mismatched:
                raise WorkflowError(
                    "the workflow does not match the recorded invocation",
                    reason="workflow_mismatch",
                    details={"invocation_id": invocation_id, "fields": mismatched},
                )
            now = self._now(conn)
            if row.lease_until is not None and now < row.lease_until:
                raise ConcurrencyConflict(
                    "the invocation is owned", reason="lease_held", details={"invocation_id": invocation_id}
                )
            token, until = row.lease_token + 1, now + lease_ms
            # Compare-and-set on the token: under the row lock this always matches, and it stays correct even if
            # a backend ever let two takers read the same row.
            done = conn.execute(
                update(invocations_table)
                .where((_C.invocation_id == invocation_id) & (_C.lease_token == row.lease_token))
                .values(state="running", result=None, owner=owner, lease_token=token, lease_until=until, updated_at=now)
            )
            if done.rowcount != 1:
                raise ConcurrencyConflict(
                    "another owner took the invocation over",
                    reason="lease_held",
                    details={"invocation_id": invocation_id},
                )
            lease = Lease(invocation_id=invocation_id, owner=owner, token=token, lease_until=until)
            return lease, _status(row, now)

        return self._write(body)

    def _fenced(self, conn: Connection, lease: Lease, operation: str) -> tuple[Any, int]:
        """Lock the row and check that ``lease`` is current and live; return the row and ``now``."""
        if not isinstance(lease, Lease):
            raise ValidationError(
                "lease must be a Lease",
                reason="invalid_value",
                details={"field": "lease", "type": type(lease).__name__},
            )
        row = self._lock(conn, lease.invocation_id)
        now = self._now(conn)
        if row is None:
            why = "missing"
        elif row.lease_token != lease.token or row.owner != lease.owner:
            why = "stale_token"
        elif row.lease_until is None or row.state != "running":
            why = "released"
        elif not now < row.lease_until:
            why = "expired"
        else:
            return row, now
        raise ConcurrencyConflict(
            "the lease is no longer held",
            reason="lease_lost",
            details={
                "invocation_id": lease.invocation_id,
                "operation": operation,
                "why": why,
                "token": lease.token,
                "current_token": None if row is None else row.lease_token,
            },
        )

    def _update(self, conn: Connection, lease: Lease, now: int, **values: Any) -> None:
        done = conn.execute(
            update(invocations_table)
            .where((_C.invocation_id == lease.invocation_id) & (_C.lease_token == lease.token))
            .values(updated_at=now, **values)
        )
        if done.rowcount != 1:  # unreachable under the row lock; never write blind
            raise ConcurrencyConflict(
                "the lease is no longer held",
                reason="lease_lost",
                details={"invocation_id": lease.invocation_id, "why": "stale_token"},
            )

    def _lock(self, conn: Connection, invocation_id: str) -> Any:
        query = select(invocations_table).where(_C.invocation_id == invocation_id)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()
        return conn.execute(query).one_or_none()

    def _now(self, conn: Connection) -> int:
        if self._clock is not None:
            return int(self._clock())
        return db_now_ms(conn)

    def _dumps(self, value: Any, what: str) -> str:
        payload = canonical_dumps(value)
        size = len(payload.encode("utf-8"))
        if size > self._max_document_bytes:
            raise ValidationError(
                f"{what} is too large",
                reason="too_large",
                details={"field": what, "bytes": size, "limit": self._max_document_bytes},
            )
        return payload

    @staticmethod
    def _insert(conn: Connection) -> Any:
        return pg_insert(invocations_table) if conn.dialect.name == "postgresql" else sqlite_insert(invocations_table)

    # -- engine ----------------------------------------------------------------------------------------------


def _check_seq(seq: Any) -> None:
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise ValidationError(
            "seq must be an integer", reason="invalid_value", details={"field": "seq", "type": type(seq).__name__}
        )


def _next_seq(row: Any, lease: Lease, seq: int) -> None:
    if seq != row.checkpoint_seq + 1:
        raise ConcurrencyConflict(
            "checkpoint seq is not the next one",
            reason="stale_checkpoint",
            details={"invocation_id": lease.invocation_id, "seq": seq, "expected": row.checkpoint_seq + 1},
        )


def _not_found(invocation_id: str) -> WorkflowError:
    return WorkflowError(
        "no workflow invocation with this id", reason="not_found", details={"invocation_id": invocation_id}
    )


def _loads(payload: str | None) -> Any:
    return None if payload is None else canonical_loads(payload)


def _status(row: Any, now: int) -> InvocationStatus:
    until = None if row.lease_until is None else int(row.lease_until)
    return InvocationStatus(
        invocation_id=row.invocation_id,
        workflow_id=row.workflow_id,
        version=row.version,
        kind=row.kind,
        state=row.state,
        input=_loads(row.input),
        checkpoint=_loads(row.checkpoint),
        checkpoint_seq=int(row.checkpoint_seq),
        result=_loads(row.result),
        owner=row.owner,
        lease_token=int(row.lease_token),
        lease_until=until,
        owned=until is not None and now < until,
        now=now,
        created_at=int(row.created_at),
        updated_at=int(row.updated_at),
    )
