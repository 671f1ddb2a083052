"""The SQL session store on SQLAlchemy 2 (the reference's Mnesia store).

SQLite (a file, WAL mode, busy timeout, every write transaction ``BEGIN IMMEDIATE``) is the default and
PostgreSQL (``postgresql+psycopg://...``; the session row is locked ``FOR UPDATE``) serves several nodes. Every
compound write — an event, its per-session sequence number and its state delta in up to three scopes — is one
transaction. Events are keyed by ``(session_pk, seq)``: a writer that somehow raced past the row lock hits the
primary key and is retried, so two writers of one session never lose an event and seqs stay dense.

A :class:`SqlSessionService` is a picklable descriptor: pickling carries the URL and options, never an engine.
Each process opens its own engine lazily (and again after a fork, tracked by ``os.getpid()``) and migrates the
schema forward on first use, recording the version in ``adk_session_schema``.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    bindparam,
    delete,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from adk_actors.content.canonical import canonical_dumps, canonical_loads
from adk_actors.sessions.base import IfExists, as_ref
from adk_actors.sessions.logic import (
    already_exists,
    check_compaction,
    check_expected,
    conversation_not_found,
    conversation_payload,
    new_session_id,
    not_found,
    plan_create,
)
from adk_actors.sessions.model import (
    AppendResult,
    PreparedEvent,
    Session,
    SessionRef,
    decode_event,
    prepare_event,
    validate_name,
)
from adk_actors.sessions.state import ScopedDelta, apply_delta, merge_state, scope_of, split_delta
from adk_actors.storage.sql import SqlStore, schema_version_table

__all__ = ["SCHEMA_VERSION", "SqlSessionService", "metadata"]

SCHEMA_VERSION: Final = 1
"""The schema version this code writes; older databases are migrated forward on open."""
_COMPONENT: Final = "sessions"
_PG_MIGRATION_LOCK: Final = 0x4144_4B53_4553_5331  # "ADKSESS1": serializes concurrent first opens
_MAX_ATTEMPTS: Final = 8

_T = TypeVar("_T")

_Json = JSON().with_variant(JSONB(), "postgresql")
_Pk = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

schema_table = schema_version_table("adk_session_schema", metadata, wall_clock=True)

sessions_table = Table(
    "adk_sessions",
    metadata,
    Column("pk", _Pk, primary_key=True, autoincrement=True),
    Column("app_name", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("session_id", String(255), nullable=False),
    Column("state", _Json, nullable=False),
    Column("version", Integer, nullable=False),
    Column("last_seq", Integer, nullable=False),
    Column("create_time", Float, nullable=False),
    Column("update_time", Float, nullable=False),
    UniqueConstraint("app_name", "user_id", "session_id", name="uq_adk_sessions_ref"),
)
Index(
    "ix_adk_sessions_newest", sessions_table.c.app_name, sessions_table.c.user_id, sessions_table.c.update_time.desc()
)
Index("ix_adk_sessions_app_newest", sessions_table.c.app_name, sessions_table.c.update_time.desc())

events_table = Table(
    "adk_session_events",
    metadata,
    Column("session_pk", _Pk, ForeignKey("adk_sessions.pk", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("event_id", Text, nullable=False),
    Column("invocation_id", Text, nullable=False),
    Column("author", Text, nullable=False),
    Column("timestamp", Float, nullable=False),
    Column("partial", Boolean, nullable=False),
    Column("has_content", Boolean, nullable=False),
    Column("data", _Json, nullable=False),
)
Index("ix_adk_session_events_invocation", events_table.c.session_pk, events_table.c.invocation_id)

user_state_table = Table(
    "adk_user_state",
    metadata,
    Column("app_name", String(255), primary_key=True),
    Column("user_id", String(255), primary_key=True),
    Column("state", _Json, nullable=False),
    Column("update_time", Float, nullable=False),
)

app_state_table = Table(
    "adk_app_state",
    metadata,
    Column("app_name", String(255), primary_key=True),
    Column("state", _Json, nullable=False),
    Column("update_time", Float, nullable=False),
)

conversations_table = Table(
    "adk_conversations",
    metadata,
    Column("app_name", String(255), primary_key=True),
    Column("agent_name", String(255), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("history", _Json, nullable=False),
    Column("update_time", Float, nullable=False),
)


# Hot-path statements are built once; SQLAlchemy then reuses their compiled form for every call.
_BY_REF = (
    (sessions_table.c.app_name == bindparam("p_app"))
    & (sessions_table.c.user_id == bindparam("p_user"))
    & (sessions_table.c.session_id == bindparam("p_session"))
)
_SELECT_SESSION = select(sessions_table).where(_BY_REF)
_USER_STATE_OF_REF = (
    select(user_state_table.c.state)
    .where((user_state_table.c.app_name == bindparam("p_app")) & (user_state_table.c.user_id == bindparam("p_user")))
    .scalar_subquery()
    .label("user_state")
)
_APP_STATE_OF_REF = (
    select(app_state_table.c.state)
    .where(app_state_table.c.app_name == bindparam("p_app"))
    .scalar_subquery()
    .label("app_state")
)
# One round trip: the session row (locked) and the current shared rows (read, not locked).
_LOCK_SESSION = (
    select(sessions_table, _USER_STATE_OF_REF, _APP_STATE_OF_REF).where(_BY_REF).with_for_update(of=sessions_table)
)
_SELECT_USER_STATE = select(user_state_table.c.state).where(
    (user_state_table.c.app_name == bindparam("p_app")) & (user_state_table.c.user_id == bindparam("p_user"))
)
_SELECT_APP_STATE = select(app_state_table.c.state).where(app_state_table.c.app_name == bindparam("p_app"))
_INSERT_EVENT = events_table.insert()
_SELECT_EVENTS = (
    select(events_table.c.seq, events_table.c.data)
    .where(events_table.c.session_pk == bindparam("p_pk"))
    .order_by(events_table.c.seq)
)


def _ref_params(ref: SessionRef) -> dict[str, str]:
    return {"p_app": ref.app_name, "p_user": ref.user_id, "p_session": ref.session_id}


def _migrate_to_1(conn: Connection) -> None:
    metadata.create_all(
        conn,
        tables=[sessions_table, events_table, user_state_table, app_state_table, conversations_table],
        checkfirst=True,
    )


# Forward migrations: MIGRATIONS[v] takes a database at version v-1 to version v, inside one transaction.
MIGRATIONS: Final[dict[int, Callable[[Connection], None]]] = {1: _migrate_to_1}


class SqlSessionService(SqlStore):
    """Sessions in a SQL database (see :class:`BaseSessionService` for the contract).

    Args:
        url: A SQLAlchemy URL (``sqlite:///path/sessions.db``, ``postgresql+psycopg://...``). A PostgreSQL schema
            can be selected with ``?options=-csearch_path%3Dmy_schema`` (the schema must exist).
        busy_timeout_ms: How long a SQLite writer waits for the write lock.
        engine_options: Extra JSON-safe keyword arguments for ``sqlalchemy.create_engine``.
        clock: Wall-clock source in seconds; must pickle (a module-level function).

    Raises:
        ConfigError: reason ``invalid_value`` when the URL cannot be parsed.
    """

    LABEL = "session store"
    URL_KEY = "session_url"
    COMPONENT = _COMPONENT
    SCHEMA_TABLE = schema_table
    MIGRATIONS = MIGRATIONS
    PG_MIGRATION_LOCK = _PG_MIGRATION_LOCK
    SQLITE_PRAGMAS = ("PRAGMA foreign_keys=ON",)
    PG_READ_ISOLATION = "REPEATABLE READ"  # one snapshot for the session row, its events and shared state
    MAX_ATTEMPTS = _MAX_ATTEMPTS

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)

    def _reset(self) -> None:
        super()._reset()
        # Inherited across a fork, the temp overlay is forgotten along with the parent's connections.
        self._temp_lock = threading.Lock()
        self._temp: dict[tuple[str, str, str], dict[str, Any]] = {}

    def open(self) -> SqlSessionService:
        """Open the engine and migrate the schema now instead of on first use.

        Raises:
            StorageError: reason ``open_failed`` when the database cannot be reached or initialized, or
                ``schema_too_new`` when it was written by a newer version.
        """
        self._get_engine()
        return self

    def _engine_defaults(self) -> dict[str, Any]:
        return {"json_serializer": canonical_dumps, "json_deserializer": canonical_loads}

    def _target_version(self) -> int:
        return SCHEMA_VERSION  # the module's value (migrations are declared beside it)

    def _migration_timestamp(self, conn: Connection) -> Any:
        return self._clock()

    def _retriable_integrity(self, exc: DBAPIError, sqlstate: str | None) -> bool:
        # A duplicate (session_pk, seq) means a concurrent append won the slot: re-read and retry.
        return sqlstate == "23505" or "adk_session_events" in str(exc.orig)

    def _insert(self, conn: Connection, table: Table) -> Any:
        return pg_insert(table) if conn.dialect.name == "postgresql" else sqlite_insert(table)

    # -- row helpers -----------------------------------------------------------------------------------------

    @staticmethod
    def _where(ref: SessionRef) -> Any:
        c = sessions_table.c
        return (c.app_name == ref.app_name) & (c.user_id == ref.user_id) & (c.session_id == ref.session_id)

    def _lock_session(self, conn: Connection, ref: SessionRef) -> Any:
        row = conn.execute(_LOCK_SESSION, _ref_params(ref)).one_or_none()
        if row is None:
            raise not_found(ref)
        return row

    def _shared(self, conn: Connection, app_name: str, user_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        user = conn.execute(_SELECT_USER_STATE, {"p_app": app_name, "p_user": user_id}).scalar()
        app = conn.execute(_SELECT_APP_STATE, {"p_app": app_name}).scalar()
        return dict(user or {}), dict(app or {})

    def _merge_shared(
        self, conn: Connection, ref: SessionRef, delta: ScopedDelta, now: float
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Apply the user:/app: parts of ``delta``; return the new user and app states (``None``: untouched)."""
        # Lock order is always session row -> user row -> app row, so concurrent writers cannot deadlock.
        user = app = None
        if delta.user:
            user = self._merge_row(
                conn, user_state_table, {"app_name": ref.app_name, "user_id": ref.user_id}, delta.user, now
            )
        if delta.app:
            app = self._merge_row(conn, app_state_table, {"app_name": ref.app_name}, delta.app, now)
        return user, app

    def _lock_shared(
        self, conn: Connection, ref: SessionRef, *, user: bool, app: bool
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Lock (creating if needed) the user and/or app rows and return their current states."""
        found: list[dict[str, Any]] = [{}, {}]
        for i, (wanted, table, keys) in enumerate(
            (
                (user, user_state_table, {"app_name": ref.app_name, "user_id": ref.user_id}),
                (app, app_state_table, {"app_name": ref.app_name}),
            )
        ):
            if wanted:
                found[i] = self._locked_row_state(conn, table, keys, self._clock())
        return found[0], found[1]

    def _locked_row_state(self, conn: Connection, table: Table, keys: dict[str, str], now: float) -> dict[str, Any]:
        conn.execute(self._insert(conn, table).values(**keys, state={}, update_time=now).on_conflict_do_nothing())
        where = and_(*(table.c[k] == v for k, v in keys.items()))
        return dict(conn.execute(select(table.c.state).where(where).with_for_update()).scalar_one() or {})

    def _merge_row(
        self, conn: Connection, table: Table, keys: dict[str, str], delta: Mapping[str, Any], now: float
    ) -> dict[str, Any]:
        new_state = apply_delta(self._locked_row_state(conn, table, keys, now), delta)
        where = and_(*(table.c[k] == v for k, v in keys.items()))
        conn.execute(update(table).where(where).values(state=new_state, update_time=now))
        return new_state

    def _temp_of(self, ref: SessionRef) -> dict[str, Any]:
        with self._temp_lock:
            return copy.deepcopy(self._temp.get((ref.app_name, ref.user_id, ref.session_id), {}))

    def _update_temp(self, ref: SessionRef, delta: Mapping[str, Any]) -> None:
        if delta:
            key = (ref.app_name, ref.user_id, ref.session_id)
            with self._temp_lock:
                self._temp[key] = apply_delta(self._temp.get(key, {}), delta)

    def _snapshot(
        self,
        conn: Connection,
        ref: SessionRef,
        row: Any,
        *,
        with_events: bool,
        shared: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> Session:
        user, app = shared if shared is not None else self._shared(conn, ref.app_name, ref.user_id)
        seqs: tuple[int, ...] = ()
        events: tuple[Any, ...] = ()
        if with_events:
            rows = conn.execute(_SELECT_EVENTS, {"p_pk": row.pk}).all()
            seqs = tuple(r.seq for r in rows)
            events = tuple(decode_event(r.data) for r in rows)
        return Session(
            app_name=ref.app_name,
            user_id=ref.user_id,
            id=ref.session_id,
            state=merge_state(session=row.state or {}, user=user, app=app, temp=self._temp_of(ref)),
            events=events,
            event_seqs=seqs,
            last_update_time=row.update_time,
            version=row.version,
            last_seq=row.last_seq,
        )

    @staticmethod
    def _event_row(pk: int, seq: int, ev: PreparedEvent) -> dict[str, Any]:
        return {
            "session_pk": pk,
            "seq": seq,
            "event_id": ev.event_id,
            "invocation_id": ev.invocation_id,
            "author": ev.author,
            "timestamp": ev.timestamp,
            "partial": ev.partial,
            "has_content": ev.has_content,
            "data": ev.data,
        }

    def _append(self, conn: Connection, ref: SessionRef, row: Any, ev: PreparedEvent) -> AppendResult:
        now = self._clock()
        seq, version = row.last_seq + 1, row.version + 1
        conn.execute(_INSERT_EVENT, self._event_row(row.pk, seq, ev))
        values: dict[str, Any] = {"last_seq": seq, "version": version, "update_time": now}
        if ev.delta.session:
            values["state"] = apply_delta(row.state or {}, ev.delta.session)
        conn.execute(update(sessions_table).where(sessions_table.c.pk == row.pk).values(**values))
        new_user, new_app = self._merge_shared(conn, ref, ev.delta, now)
        user = new_user if new_user is not None else (row.user_state or {})
        app = new_app if new_app is not None else (row.app_state or {})
        session_state = values.get("state", row.state or {})
        temp = apply_delta(self._temp_of(ref), ev.delta.temp)
        return AppendResult(
            seq=seq,
            version=version,
            last_update_time=now,
            state=merge_state(session=session_state, user=user, app=app, temp=temp),
        )

    # -- the protocol ----------------------------------------------------------------------------------------

    def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        events: Sequence[Any] = (),
        if_exists: IfExists = "return",
    ) -> Session:
        """See :meth:`BaseSessionService.create_session`.

        Raises:
            ValidationError: invalid names, state or events.
            SessionError: reason ``already_exists`` when ``if_exists="error"`` and the session exists.
            StorageError: the database failed.
        """
        ref = SessionRef(app_name=app_name, user_id=user_id, session_id=session_id or new_session_id())
        plan = plan_create(state, events)

        def body(conn: Connection) -> tuple[Session, bool]:
            now = self._clock()
            n = len(plan.events)
            stmt = (
                self._insert(conn, sessions_table)
                .values(
                    app_name=ref.app_name,
                    user_id=ref.user_id,
                    session_id=ref.session_id,
                    state=plan.session_state,
                    version=n,
                    last_seq=n,
                    create_time=now,
                    update_time=now,
                )
                .on_conflict_do_nothing()
                .returning(sessions_table.c.pk)
            )
            pk = conn.execute(stmt).scalar()
            created = pk is not None
            if pk is not None:
                if plan.events:
                    conn.execute(
                        events_table.insert(), [self._event_row(pk, i + 1, ev) for i, ev in enumerate(plan.events)]
                    )
                self._merge_shared(conn, ref, ScopedDelta(user=plan.user_delta, app=plan.app_delta), now)
            elif if_exists == "error":
                raise already_exists(ref)
            row = conn.execute(_SELECT_SESSION, _ref_params(ref)).one()
            return self._snapshot(conn, ref, row, with_events=True), created

        session, created = self._write(body)
        if created and plan.temp:
            self._update_temp(ref, plan.temp)
            session = Session(**{**_fields(session), "state": {**session.state, **plan.temp}})
        return session

    def get_session(self, ref: SessionRef | Session) -> Session:
        """See :meth:`BaseSessionService.get_session`.

        Raises:
            SessionNotFound: the session does not exist.
            StorageError: the database failed.
        """
        ref = as_ref(ref)

        def body(conn: Connection) -> Session:
            row = conn.execute(_SELECT_SESSION, _ref_params(ref)).one_or_none()
            if row is None:
                raise not_found(ref)
            return self._snapshot(conn, ref, row, with_events=True)

        return self._read(body)

    def list_sessions(self, *, app_name: str, user_id: str | None = None) -> list[Session]:
        """See :meth:`BaseSessionService.list_sessions`.

        Raises:
            ValidationError: invalid names.
            StorageError: the database failed.
        """
        validate_name(app_name, "app_name")
        if user_id is not None:
            validate_name(user_id, "user_id")
        c = sessions_table.c

        def body(conn: Connection) -> list[Session]:
            query = select(sessions_table).where(c.app_name == app_name)
            if user_id is not None:
                query = query.where(c.user_id == user_id)
            rows = conn.execute(query.order_by(c.update_time.desc(), c.user_id, c.session_id)).all()
            shared: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
            result = []
            for row in rows:
                if row.user_id not in shared:
                    shared[row.user_id] = self._shared(conn, app_name, row.user_id)
                ref = SessionRef(app_name=app_name, user_id=row.user_id, session_id=row.session_id)
                result.append(self._snapshot(conn, ref, row, with_events=False, shared=shared[row.user_id]))
            return result

        return self._read(body)

    def delete_session(self, ref: SessionRef | Session) -> bool:
        """See :meth:`BaseSessionService.delete_session`.

        Raises:
            StorageError: the database failed.
        """
        ref = as_ref(ref)

        def body(conn: Connection) -> bool:
            pk = conn.execute(select(sessions_table.c.pk).where(self._where(ref)).with_for_update()).scalar()
            if pk is None:
                return False
            conn.execute(delete(events_table).where(events_table.c.session_pk == pk))
            conn.execute(delete(sessions_table).where(sessions_table.c.pk == pk))
            return True

        deleted = self._write(body)
        with self._temp_lock:
            self._temp.pop((ref.app_name, ref.user_id, ref.session_id), None)
        return deleted

    def update_state(self, ref: SessionRef | Session, delta: Mapping[str, Any]) -> None:
        """See :meth:`BaseSessionService.update_state`.

        Raises:
            SessionNotFound: the session does not exist.
            ValidationError: a malformed delta.
            StorageError: the database failed.
        """
        ref = as_ref(ref)
        scoped = split_delta(delta)

        def body(conn: Connection) -> None:
            row = self._lock_session(conn, ref)
            now = self._clock()
            conn.execute(
                update(sessions_table)
                .where(sessions_table.c.pk == row.pk)
                .values(state=apply_delta(row.state or {}, scoped.session), version=row.version + 1, update_time=now)
            )
            self._merge_shared(conn, ref, scoped, now)

        self._write(body)
        self._update_temp(ref, scoped.temp)

    def add_event(self, ref: SessionRef | Session, event: Any) -> AppendResult:
        """See :meth:`BaseSessionService.add_event`.

        Raises:
            SessionNotFound: the session does not exist.
            ValidationError: a malformed event.
            StorageError: the database failed.
        """
        ref = as_ref(ref)
        ev = prepare_event(event)
        result = self._write(lambda conn: self._append(conn, ref, self._lock_session(conn, ref), ev))
        self._update_temp(ref, ev.delta.temp)
        return result

    def add_event_if_state(self, ref: SessionRef | Session, event: Any, expected: Mapping[str, Any]) -> AppendResult:
        """See :meth:`BaseSessionService.add_event_if_state`.

        Raises:
            SessionNotFound: the session does not exist.
            ConcurrencyConflict: reason ``state_mismatch``; nothing was written.
            ValidationError: a malformed event.
            StorageError: the database failed.
        """
        ref = as_ref(ref)
        ev = prepare_event(event)

        scopes = {scope_of(k) for k in expected} if isinstance(expected, Mapping) else set()

        def body(conn: Connection) -> AppendResult:
            row = self._lock_session(conn, ref)
            user, app = row.user_state or {}, row.app_state or {}
            if scopes & {"user", "app"}:
                # Expectations on shared keys hold their rows until commit, so the comparison stays atomic.
                locked_user, locked_app = self._lock_shared(conn, ref, user="user" in scopes, app="app" in scopes)
                user = locked_user if "user" in scopes else user
                app = locked_app if "app" in scopes else app
            check_expected(ref, session=row.state or {}, user=user, app=app, temp=self._temp_of(ref), expected=expected)
            return self._append(conn, ref, row, ev)

        result = self._write(body)
        self._update_temp(ref, ev.delta.temp)
        return result

    def clear_temp_state(self, ref: SessionRef | Session) -> None:
        """See :meth:`BaseSessionService.clear_temp_state`.

        Raises:
            SessionNotFound: the session does not exist.
            StorageError: the database failed.
        """
        ref = as_ref(ref)
        exists = self._read(
            lambda conn: conn.execute(select(sessions_table.c.pk).where(self._where(ref))).scalar() is not None
        )
        with self._temp_lock:
            self._temp.pop((ref.app_name, ref.user_id, ref.session_id), None)
        if not exists:
            raise not_found(ref)

    def compact_events(
        self, ref: SessionRef | Session, *, through_seq: int, compaction_event: Any, expected_version: int | None = None
    ) -> AppendResult:
        """See :meth:`BaseSessionService.compact_events`.

        The compaction event takes ``seq = through_seq``; its state delta is not applied.

        Raises:
            SessionNotFound: the session does not exist.
            ConcurrencyConflict: reason ``stale_session`` when ``expected_version`` is not current.
            ValidationError: a malformed event or ``through_seq``.
            StorageError: the database failed.
        """
        ref = as_ref(ref)
        ev = prepare_event(compaction_event)

        def body(conn: Connection) -> AppendResult:
            row = self._lock_session(conn, ref)
            check_compaction(
                ref,
                through_seq=through_seq,
                last_seq=row.last_seq,
                version=row.version,
                expected_version=expected_version,
            )
            now = self._clock()
            conn.execute(
                delete(events_table).where((events_table.c.session_pk == row.pk) & (events_table.c.seq <= through_seq))
            )
            conn.execute(events_table.insert().values(**self._event_row(row.pk, through_seq, ev)))
            conn.execute(
                update(sessions_table)
                .where(sessions_table.c.pk == row.pk)
                .values(version=row.version + 1, update_time=now)
            )
            user, app = self._shared(conn, ref.app_name, ref.user_id)
            return AppendResult(
                seq=through_seq,
                version=row.version + 1,
                last_update_time=now,
                state=merge_state(session=row.state or {}, user=user, app=app, temp=self._temp_of(ref)),
            )

        return self._write(body)

    def save_conversation(self, app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> None:
        """See :meth:`BaseSessionService.save_conversation`.

        Raises:
            ValidationError: invalid names or a history that is not a JSON-safe list.
            StorageError: the database failed.
        """
        payload = conversation_payload(app_name, agent_name, key, history)

        def body(conn: Connection) -> None:
            now = self._clock()
            stmt = self._insert(conn, conversations_table).values(
                app_name=app_name, agent_name=agent_name, key=key, history=payload, update_time=now
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["app_name", "agent_name", "key"], set_={"history": payload, "update_time": now}
                )
            )

        self._write(body)

    def load_conversation(self, app_name: str, agent_name: str, key: str) -> list[Any]:
        """See :meth:`BaseSessionService.load_conversation`.

        Raises:
            SessionNotFound: nothing was saved under that key.
            StorageError: the database failed.
        """
        c = conversations_table.c
        found = self._read(
            lambda conn: conn.execute(
                select(c.history).where((c.app_name == app_name) & (c.agent_name == agent_name) & (c.key == key))
            ).scalar()
        )
        if found is None:
            raise conversation_not_found(app_name, agent_name, key)
        return list(found)


def _fields(session: Session) -> dict[str, Any]:
    return {name: getattr(session, name) for name in Session.__dataclass_fields__}
