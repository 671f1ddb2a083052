"""The part every SQL store shares: a picklable descriptor, an engine per process, migrations, transactions.

A store subclass declares its schema (``SCHEMA_TABLE``, ``SCHEMA_VERSION``, ``MIGRATIONS``, ``COMPONENT``) and a
few dialect choices; this base opens one engine per process lazily and again after a fork (connections never
cross a fork), runs SQLite in WAL mode with a busy timeout and ``BEGIN IMMEDIATE`` for writes, serializes first
opens on PostgreSQL with an advisory lock, migrates forward (refusing a newer schema), retries transient
conflicts with jittered backoff, and turns driver failures into structural ``StorageError``s that never carry the
driver's message (drivers echo hosts, user names, paths, SQL text and URLs).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from adk_actors.errors import AdkError, ConfigError, StorageError
from adk_actors.secrets import private_file

__all__ = ["SqlStore", "db_now_ms", "safe_url", "schema_version_table"]

_T = TypeVar("_T")


_DB_NOW_MS_SQL = {
    # clock_timestamp() is the time now, not at transaction start: read after a row lock, it is current.
    "postgresql": "SELECT floor(extract(epoch from clock_timestamp()) * 1000)::bigint",
    # 'now' is fixed for one statement and has millisecond resolution.
    "sqlite": "SELECT CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
}


def db_now_ms(conn: Connection) -> int:
    """The database's clock in epoch milliseconds: the one time every node sharing the store agrees on (leases,
    retention)."""
    return int(conn.exec_driver_sql(_DB_NOW_MS_SQL[conn.dialect.name]).scalar_one())


def schema_version_table(name: str, metadata: MetaData, *, wall_clock: bool = False) -> Table:
    """A store's schema-version table (``component``, ``version``, ``updated_at``): what ``SqlStore`` migrates by.
    ``updated_at`` is epoch milliseconds from the database clock, or (``wall_clock``, the older stores' layout)
    epoch seconds as a float."""
    return Table(
        name,
        metadata,
        Column("component", String(64), primary_key=True),
        Column("version", Integer, nullable=False),
        Column("updated_at", Float if wall_clock else BigInteger, nullable=False),
    )


def safe_url(url: str) -> str:
    """The URL with its password hidden (for reprs)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable url>"


class SqlStore:
    """Base of the SQL stores; see the module docstring."""

    LABEL: ClassVar[str] = "SQL store"
    URL_KEY: ClassVar[str] = "url"
    COMPONENT: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int] = 1
    SCHEMA_TABLE: ClassVar[Table]
    MIGRATIONS: ClassVar[Mapping[int, Callable[[Connection], None]]]
    PG_MIGRATION_LOCK: ClassVar[int]
    DIALECTS: ClassVar[tuple[str, ...] | None] = None
    """Dialects the store supports (None: any SQLAlchemy backend)."""
    SQLITE_PRAGMAS: ClassVar[tuple[str, ...]] = ()
    PG_READ_ISOLATION: ClassVar[str | None] = None
    MAX_ATTEMPTS: ClassVar[int] = 8

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Any = None,
    ) -> None:
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ConfigError(
                f"{self.URL_KEY} is not a SQLAlchemy URL", reason="invalid_value", details={"key": self.URL_KEY}
            ) from None
        self._url = url
        self._backend = parsed.get_backend_name()
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._engine_options = dict(engine_options or {})
        self._clock = clock
        self._reset()

    def _reset(self) -> None:
        self._engine: Engine | None = None
        self._pid = os.getpid()
        self._open_lock = threading.Lock()

    # -- descriptor ------------------------------------------------------------------------------------------

    def _descriptor(self) -> dict[str, Any]:
        """The constructor arguments: all a pickle carries (never an engine or a connection)."""
        return {
            "url": self._url,
            "busy_timeout_ms": self._busy_timeout_ms,
            "engine_options": self._engine_options,
            "clock": self._clock,
        }

    def __getstate__(self) -> dict[str, Any]:
        return self._descriptor()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({safe_url(self._url)!r})"

    @property
    def url(self) -> str:
        """The configured URL."""
        return self._url

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"`` (or another SQLAlchemy backend name)."""
        return self._backend

    def open(self: Any) -> Any:
        """Open the engine and migrate the schema now instead of on first use.

        Raises:
            StorageError: reason ``open_failed`` when the database cannot be reached or initialized, or
                ``schema_too_new`` when it was written by a newer version.
        """
        self._get_engine()
        return self

    def close(self) -> None:
        """Dispose of this process's engine; the next call reopens it."""
        self._forget_if_forked()
        with self._open_lock:
            engine, self._engine = self._engine, None
        _forget_shared(self)
        if engine is not None:
            engine.dispose()

    def schema_version(self) -> int:
        """The schema version recorded in the database.

        Raises:
            StorageError: the database cannot be read.
        """
        table = self.SCHEMA_TABLE
        return self._read(
            lambda conn: int(
                conn.execute(select(table.c.version).where(table.c.component == self.COMPONENT)).scalar_one()
            )
        )

    # -- hooks -----------------------------------------------------------------------------------------------

    def _engine_defaults(self) -> dict[str, Any]:
        """Extra ``create_engine`` options of the store (the caller's ``engine_options`` win)."""
        return {}

    def _target_version(self) -> int:
        """The schema version this code writes (a hook, so a store can read its module's current value)."""
        return self.SCHEMA_VERSION

    def _migration_timestamp(self, conn: Connection) -> Any:
        """The ``updated_at`` value written to the schema table."""
        return time.time()

    def _retriable_integrity(self, exc: DBAPIError, sqlstate: str | None) -> bool:
        """Whether an integrity error is a lost race worth retrying (store-specific)."""
        return False

    # -- engine ----------------------------------------------------------------------------------------------

    def _forget_if_forked(self) -> None:
        if self._pid != os.getpid():
            inherited = self._engine  # never touch the parent's connections
            self._reset()
            if inherited is not None:
                inherited.dispose(close=False)

    def _get_engine(self) -> Engine:
        self._forget_if_forked()
        engine = self._engine
        if engine is not None:
            return engine
        with self._open_lock:
            if self._engine is None:
                self._engine = _shared_engine(self)
            return self._engine

    def _create_engine(self) -> Engine:
        if self.DIALECTS is not None and self._backend not in self.DIALECTS:
            raise StorageError(
                f"the {self.LABEL} needs SQLite or PostgreSQL",
                reason="open_failed",
                details={"operation": "open", "dialect": self._backend},
            )
        try:
            url = make_url(self._url)
            # Statement parameters are user content (event JSON, state): never in logs or error texts.
            options: dict[str, Any] = {"hide_parameters": True, **self._engine_defaults(), **self._engine_options}
            if self._backend == "sqlite":
                database = url.database or ""
                if not database or database == ":memory:" or database.startswith("file:"):
                    raise StorageError(
                        f"the {self.LABEL} needs a SQLite file",
                        reason="open_failed",
                        details={"operation": "open", "dialect": "sqlite"},
                    )
                # Whoever opens first creates the file, in whatever process: create it 0600 (SQLite gives its WAL
                # and shm files the database's mode), since it holds user messages and session state.
                private_file(os.path.abspath(database))
                options.setdefault("connect_args", {})["timeout"] = self._busy_timeout_ms / 1000
                engine = create_engine(url, **options)
                self._install_sqlite_hooks(engine)
            else:
                options.setdefault("pool_pre_ping", True)
                engine = create_engine(url, **options)
        except AdkError:
            raise
        except (SQLAlchemyError, NoSuchModuleError, OSError, ImportError, TypeError, ValueError) as exc:
            raise self._storage_error("open_failed", exc, "open") from None
        for attempt in range(self.MAX_ATTEMPTS):
            try:
                self._migrate(engine)
                return engine
            except DBAPIError as exc:
                # Two processes opening a new SQLite file at once: one is still switching it to WAL or creating
                # the schema, and the other's connect or BEGIN IMMEDIATE can fail with "database is locked" before
                # the busy handler applies. The migration is idempotent: try again after a jittered pause.
                if attempt + 1 < self.MAX_ATTEMPTS and self._retriable(exc):
                    time.sleep(random.uniform(0, 0.01 * 2**attempt))
                    continue
                engine.dispose()
                raise self._storage_error("open_failed", exc, "initialize") from None
            except BaseException as exc:
                engine.dispose()
                if isinstance(exc, SQLAlchemyError | OSError):
                    raise self._storage_error("open_failed", exc, "initialize") from None
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _install_sqlite_hooks(self, engine: Engine) -> None:
        busy, pragmas = self._busy_timeout_ms, self.SQLITE_PRAGMAS

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's "begin" hook issue BEGIN itself (pysqlite would defer it past the first read).
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute(f"PRAGMA busy_timeout={busy}")
                for pragma in pragmas:
                    cursor.execute(pragma)
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("adk_read") else "BEGIN IMMEDIATE")

    def _migrate(self, engine: Engine) -> None:
        table, component, target = self.SCHEMA_TABLE, self.COMPONENT, self._target_version()
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self.PG_MIGRATION_LOCK})
            table.create(conn, checkfirst=True)
            current = int(conn.execute(select(table.c.version).where(table.c.component == component)).scalar() or 0)
            if current > target:
                raise StorageError(
                    f"the {self.LABEL} was written by a newer version",
                    reason="schema_too_new",
                    details={"found": current, "supported": target},
                )
            for version in range(current + 1, target + 1):
                self.MIGRATIONS[version](conn)
            if current == 0:
                conn.execute(
                    table.insert().values(
                        component=component, version=target, updated_at=self._migration_timestamp(conn)
                    )
                )
            elif current < target:
                conn.execute(
                    update(table)
                    .where(table.c.component == component)
                    .values(version=target, updated_at=self._migration_timestamp(conn))
                )

    # -- transactions ----------------------------------------------------------------------------------------

    def _retriable(self, exc: DBAPIError) -> bool:
        orig = exc.orig
        sqlstate = getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None), "sqlstate", None)
        if sqlstate in {"40001", "40P01", "55P03"}:
            return True
        from sqlalchemy.exc import IntegrityError

        if isinstance(exc, IntegrityError):
            return self._retriable_integrity(exc, sqlstate)
        message = str(orig).lower()
        return "database is locked" in message or "database is busy" in message

    def _write(self, body: Callable[[Connection], _T]) -> _T:
        engine = self._get_engine()
        for attempt in range(self.MAX_ATTEMPTS):
            try:
                with engine.begin() as conn:
                    return body(conn)
            except DBAPIError as exc:
                if attempt + 1 < self.MAX_ATTEMPTS and self._retriable(exc):
                    time.sleep(random.uniform(0, 0.005 * 2**attempt))  # jittered backoff before a retry
                    continue
                raise self._storage_error("write_failed", exc, "write") from None
            except SQLAlchemyError as exc:
                raise self._storage_error("write_failed", exc, "write") from None
        raise AssertionError("unreachable")

    def _read(self, body: Callable[[Connection], _T]) -> _T:
        engine = self._get_engine()
        try:
            with self._read_conn(engine) as conn:
                return body(conn)
        except SQLAlchemyError as exc:
            raise self._storage_error("read_failed", exc, "read") from None

    @contextmanager
    def _read_conn(self, engine: Engine) -> Iterator[Connection]:
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql" and self.PG_READ_ISOLATION:
                conn = conn.execution_options(isolation_level=self.PG_READ_ISOLATION)
            elif engine.dialect.name == "sqlite":
                conn = conn.execution_options(adk_read=True)
            with conn.begin():
                yield conn

    def _storage_error(self, reason: str, exc: BaseException, operation: str) -> StorageError:
        """A structural ``StorageError``: reason, operation, dialect, the driver's exception class and SQLSTATE."""
        orig = getattr(exc, "orig", None) or exc
        details: dict[str, Any] = {"operation": operation, "dialect": self._backend, "error": type(orig).__name__}
        sqlstate = getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None), "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate.isalnum() and len(sqlstate) == 5:
            details["sqlstate"] = sqlstate
        return StorageError(f"{self.LABEL} {operation} failed: {type(orig).__name__}", reason=reason, details=details)


# One engine per process and descriptor. Every unpickled copy of a store (each Runner turn or stable run carries
# one) used to open an engine of its own, and each engine's pool kept its SQLite connections (two fds each) until
# a cyclic garbage collection that an idle actor process may never run: a host that served 500 stable runs held
# ~1,000 extra fds and ~180 MB. Copies of one descriptor now share the engine (and its migration check).
_shared: dict[tuple[Any, ...], tuple[Engine, Any]] = {}
_shared_lock = threading.Lock()
_shared_pid = os.getpid()


def _shared_key(store: SqlStore) -> tuple[Any, ...]:
    return (type(store), store._url, store._busy_timeout_ms, repr(sorted(store._engine_options.items())))


def _file_identity(store: SqlStore) -> Any:
    """SQLite only: the database file's identity, so a file deleted and re-created gets a fresh engine."""
    if store._backend != "sqlite":
        return None
    try:
        info = os.stat(make_url(store._url).database or "")
    except (OSError, ArgumentError):
        return None
    return info.st_dev, info.st_ino


def _shared_engine(store: SqlStore) -> Engine:
    global _shared_pid
    key = _shared_key(store)
    with _shared_lock:
        if _shared_pid != os.getpid():  # a forked child never uses its parent's connections
            for inherited, _ident in _shared.values():
                inherited.dispose(close=False)
            _shared.clear()
            _shared_pid = os.getpid()
        entry = _shared.get(key)
        if entry is not None and entry[1] == _file_identity(store):
            return entry[0]
        stale = _shared.pop(key, None)
    if stale is not None:
        stale[0].dispose()
    engine = store._create_engine()
    with _shared_lock:
        current = _shared.get(key)
        if current is not None:  # another thread opened it meanwhile: keep one
            engine.dispose()
            return current[0]
        _shared[key] = (engine, _file_identity(store))
    return engine


def _forget_shared(store: SqlStore) -> None:
    with _shared_lock:
        _shared.pop(_shared_key(store), None)
