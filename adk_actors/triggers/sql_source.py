"""A SQL-table queue as a trigger source: the example broker adapter of the ``TriggerSource`` behaviour.

A producer inserts rows into a queue table (SQLite or PostgreSQL, through SQLAlchemy); :class:`SqlQueueSource`
polls the pending rows oldest first and submits each to its trigger with the row's ``delivery_id`` as the
idempotency key. It acknowledges a row (marks it ``acked`` with the event reference, or deletes it) only after
``submit`` accepted it or answered that the key is a duplicate. A refusal that may pass (``trigger_queue_full``,
``trigger_stopping``, ``unknown_trigger``) or no answer at all ends the poll and leaves that row and every later one
pending for the next poll: that is the backpressure. A refusal that never passes (``invalid_delivery``,
``event_too_large``) marks the row ``rejected`` with the reason, so one bad row cannot block the queue.

The table (name configurable, created if missing)::

    delivery_id  VARCHAR(256) primary key   the provider's delivery id: the idempotency key
    payload      TEXT                       JSON: {"payload": ..., "metadata"?: {...}, "timeout_ms"?: N}
    created_at   DOUBLE                     seconds since the epoch (order of delivery, then delivery_id)
    state        VARCHAR(16)                pending | acked | rejected
    ref          VARCHAR(512)               the event reference once acked
    reason       VARCHAR(64)                the refusal reason of a rejected row
    acked_at     DOUBLE

Guarantees (docs/TRIGGERS.md "A SQL-table queue source"): a row is submitted at least once and acknowledged only
after acceptance, so a source that dies between ``submit`` and the acknowledgement submits the row again on its
next poll, and the trigger answers ``duplicate`` while the first event is retained (every event of a durable
trigger survives a node restart too). On PostgreSQL a poll locks the rows it handles (``FOR UPDATE SKIP LOCKED``),
so two sources on one table never submit the same row at once; on SQLite two sources may, and idempotency makes
that harmless.

On PostgreSQL with ``notify_channel`` a producer's ``put`` also sends ``NOTIFY``, and a poll listens on the channel
for up to ``listen_ms`` after draining (it listens before it drains, so no row committed in between is missed): a row
is submitted at once instead of at the next tick.

:class:`SqlQueue` is the table itself, for producers and tests (``put``, ``counts``, ``rows``);
:func:`start_sql_source` starts a source actor for a trigger.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    Column,
    Engine,
    Float,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError

from adk_actors.errors import AdkError, ConfigError, StorageError
from adk_actors.secrets import private_file
from adk_actors.triggers.source import RETRY_LATER, SubmitOutcome, TriggerSource, submit_body

__all__ = [
    "MAX_BATCH",
    "RETRY_LATER",
    "SqlQueue",
    "SqlQueueSource",
    "queue_config",
    "start_sql_source",
]

MAX_BATCH = 1000
"""Most rows one poll handles."""
_MAX_ID = 256
_MAX_TABLE = 63
_TABLE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_CONFIG_KEYS = frozenset({"url", "table", "batch", "on_ack", "notify_channel", "listen_ms"})
_MAX_LISTEN_MS = 60_000
_WAIT_SLICE_S = 0.25
"""Longest single wait for a notification: a stopping source's I/O thread notices within this."""
_DIALECTS = ("sqlite", "postgresql")


def _bad(key: str, message: str) -> ConfigError:
    return ConfigError(message, reason="invalid_value", details={"key": key})


def _identifier(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_TABLE
        and value[0] in _TABLE_CHARS
        and not value[0].isdigit()
        and value[0] != "_"
        and set(value) <= _TABLE_CHARS
    )


def queue_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The checked configuration of a queue: ``{"url", "table", "batch", "on_ack"}``.

    * ``url``: a SQLAlchemy URL (``sqlite:///...`` or ``postgresql+psycopg://...``);
    * ``table``: the table name (lower-case letters, digits and ``_``, starting with a letter; default
      ``trigger_queue``);
    * ``batch``: most rows per poll (1..1000, default 100);
    * ``on_ack``: ``"mark"`` (keep the row as ``acked`` with its reference, the default) or ``"delete"``;
    * ``notify_channel`` (PostgreSQL only, default none): :meth:`SqlQueue.put` also sends ``NOTIFY`` on this channel,
      and the source listens on it between polls for up to ``listen_ms`` (1..60000, default 5000), so a new row is
      submitted at once instead of at the next tick.

    Raises:
        ConfigError: ``unknown_key`` / ``invalid_value`` naming the key.
    """
    if not isinstance(config, Mapping):
        raise _bad("config", "the queue configuration must be an object")
    unknown = sorted(str(k) for k in config if k not in _CONFIG_KEYS)
    if unknown:
        raise ConfigError("unknown queue option", reason="unknown_key", details={"key": unknown[0][:64]})
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise _bad("url", "url must be a SQLAlchemy URL")
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        raise _bad("url", "url must be a SQLAlchemy URL") from None
    if backend not in _DIALECTS:
        raise _bad("url", "the queue runs on SQLite or PostgreSQL")
    table = config.get("table", "trigger_queue")
    if not _identifier(table):
        raise _bad("table", "table must be a lower-case SQL identifier")
    batch = config.get("batch", 100)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise _bad("batch", f"batch must be an integer in [1, {MAX_BATCH}]")
    on_ack = config.get("on_ack", "mark")
    if on_ack not in ("mark", "delete"):
        raise _bad("on_ack", 'on_ack must be "mark" or "delete"')
    channel = config.get("notify_channel")
    if channel is not None and (not _identifier(channel) or backend != "postgresql"):
        raise _bad("notify_channel", "notify_channel is a lower-case identifier, on PostgreSQL only")
    listen_ms = config.get("listen_ms", 5000)
    if isinstance(listen_ms, bool) or not isinstance(listen_ms, int) or not 1 <= listen_ms <= _MAX_LISTEN_MS:
        raise _bad("listen_ms", f"listen_ms must be an integer in [1, {_MAX_LISTEN_MS}]")
    return {
        "url": url,
        "table": table,
        "batch": batch,
        "on_ack": on_ack,
        "notify_channel": channel,
        "listen_ms": listen_ms,
    }


def _storage_error(exc: BaseException, operation: str, dialect: str) -> StorageError:
    # The driver's message may quote the URL, user or SQL: only its class and SQLSTATE leave here.
    orig = getattr(exc, "orig", None) or exc
    details: dict[str, Any] = {"operation": operation, "dialect": dialect, "error": type(orig).__name__}
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate.isalnum() and len(sqlstate) == 5:
        details["sqlstate"] = sqlstate
    return StorageError(
        f"queue {operation} failed: {type(orig).__name__}", reason=f"{operation}_failed", details=details
    )


class SqlQueue:
    """One queue table (see the module docstring); engines are opened lazily, one per instance.

    Args:
        config: see :func:`queue_config`.

    Raises:
        ConfigError: an invalid configuration.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = queue_config(config)
        self.dialect = make_url(self.config["url"]).get_backend_name()
        self.table = Table(
            self.config["table"],
            MetaData(),
            Column("delivery_id", String(_MAX_ID), primary_key=True),
            Column("payload", Text, nullable=False),
            Column("created_at", Float, nullable=False, index=True),
            Column("state", String(16), nullable=False, default="pending", index=True),
            Column("ref", String(512), nullable=True),
            Column("reason", String(64), nullable=True),
            Column("acked_at", Float, nullable=True),
        )
        self._engine: Engine | None = None

    def _get_engine(self) -> Engine:
        if self._engine is None:
            try:
                if self.dialect == "sqlite":
                    # The queue holds payloads (user content): a file we create is private, as every store's. An
                    # existing one is left alone: opening and closing another descriptor on a SQLite file drops this
                    # process's POSIX locks on it (another source's engine here may hold them).
                    database = make_url(self.config["url"]).database or ""
                    plain_file = database and database != ":memory:" and not database.startswith("file:")
                    if plain_file and not os.path.exists(database):
                        private_file(os.path.abspath(database))
                engine = create_engine(self.config["url"], future=True)
            except (ArgumentError, NoSuchModuleError, OSError) as exc:
                raise _storage_error(exc, "open", self.dialect) from None
            if self.dialect == "sqlite":

                @event.listens_for(engine, "connect")
                def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                    cursor = dbapi_conn.cursor()
                    cursor.execute("PRAGMA journal_mode=WAL")
                    cursor.execute("PRAGMA busy_timeout=30000")
                    cursor.close()

            try:
                self.table.metadata.create_all(engine, checkfirst=True)
            except SQLAlchemyError as exc:
                engine.dispose()
                raise _storage_error(exc, "open", self.dialect) from None
            self._engine = engine
        return self._engine

    def open(self) -> SqlQueue:
        """Connect and create the table if missing.

        Raises:
            StorageError: ``open_failed``.
        """
        self._get_engine()
        return self

    def close(self) -> None:
        """Dispose of the engine (the next call reopens it)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()

    def put(self, delivery_id: str, payload: Any, *, metadata: Mapping[str, Any] | None = None) -> bool:
        """Enqueue one delivery (a producer's insert); ``False`` if ``delivery_id`` is already in the table.

        Raises:
            ConfigError: ``delivery_id`` is empty or longer than 256 characters (``invalid_value``).
            StorageError: ``write_failed``.
        """
        if not isinstance(delivery_id, str) or not 0 < len(delivery_id) <= _MAX_ID:
            raise _bad("delivery_id", f"delivery_id must be a non-empty string of at most {_MAX_ID} characters")
        body: dict[str, Any] = {"payload": payload}
        if metadata:
            body["metadata"] = dict(metadata)
        row = {"delivery_id": delivery_id, "payload": json.dumps(body), "created_at": time.time(), "state": "pending"}
        try:
            with self._get_engine().begin() as conn:
                conn.execute(insert(self.table).values(**row))
                if self.config["notify_channel"]:
                    # Delivered on commit, so a listener never wakes for a row it cannot see yet.
                    conn.execute(select(func.pg_notify(self.config["notify_channel"], "")))
        except IntegrityError:
            return False
        except SQLAlchemyError as exc:
            raise _storage_error(exc, "write", self.dialect) from None
        return True

    def listen(self) -> Any:
        """A connection listening on ``notify_channel`` (PostgreSQL), for :meth:`wait`; close it when done.

        Raises:
            StorageError: ``open_failed``.
        """
        channel = self.config["notify_channel"]
        try:
            conn = self._get_engine().connect().execution_options(isolation_level="AUTOCOMMIT")
            conn.exec_driver_sql(f'LISTEN "{channel}"')  # checked identifier: [a-z][a-z0-9_]*
        except SQLAlchemyError as exc:
            raise _storage_error(exc, "open", self.dialect) from None
        return conn

    def wait(self, listener: Any, timeout_s: float) -> bool:
        """Whether a notification arrived on ``listener`` within ``timeout_s`` (all pending ones are consumed).

        Raises:
            StorageError: ``read_failed`` (the connection broke).
        """
        import psycopg

        try:
            driver = listener.connection.driver_connection
            got = sum(1 for _ in driver.notifies(timeout=max(0.0, timeout_s), stop_after=1))
            if got:
                got += sum(1 for _ in driver.notifies(timeout=0))
        except (psycopg.Error, OSError) as exc:
            raise _storage_error(exc, "read", self.dialect) from None
        return got > 0

    def counts(self) -> dict[str, int]:
        """Rows by state: ``{"pending", "acked", "rejected"}``.

        Raises:
            StorageError: ``read_failed``.
        """
        found = {"pending": 0, "acked": 0, "rejected": 0}
        try:
            with self._get_engine().connect() as conn:
                for state, count in conn.execute(select(self.table.c.state, func.count()).group_by(self.table.c.state)):
                    found[str(state)] = int(count)
        except SQLAlchemyError as exc:
            raise _storage_error(exc, "read", self.dialect) from None
        return found

    def rows(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The table's rows oldest first (at most ``limit``): ``delivery_id``, ``state``, ``ref``, ``reason``.

        Raises:
            StorageError: ``read_failed``.
        """
        t = self.table
        query = (
            select(t.c.delivery_id, t.c.state, t.c.ref, t.c.reason)
            .order_by(t.c.created_at, t.c.delivery_id)
            .limit(max(1, min(int(limit), 100_000)))
        )
        try:
            with self._get_engine().connect() as conn:
                return [dict(r._mapping) for r in conn.execute(query)]
        except SQLAlchemyError as exc:
            raise _storage_error(exc, "read", self.dialect) from None

    def drain(self, submit: Any) -> dict[str, int]:
        """One poll: hand the pending rows (oldest first, at most ``batch``) to ``submit`` and acknowledge each one
        it accepted.

        ``submit(delivery) -> Submitted`` raises ``TriggerError`` on refusal: a reason in :data:`RETRY_LATER` (or
        any other ``AdkError``: no answer) ends the poll (the row stays pending), another marks the row
        ``rejected``. An exception that is not an ``AdkError`` propagates, leaving the row pending. Returns
        ``{"submitted", "duplicates", "rejected", "deferred"}`` for this poll.

        Raises:
            StorageError: ``read_failed`` / ``write_failed`` (rows not acknowledged stay pending).
        """
        t = self.table
        found = {"submitted": 0, "duplicates": 0, "rejected": 0, "deferred": 0}
        query = (
            select(t.c.delivery_id, t.c.payload)
            .where(t.c.state == "pending")
            .order_by(t.c.created_at, t.c.delivery_id)
            .limit(self.config["batch"])
        )
        try:
            if self.dialect == "postgresql":
                # The rows stay locked until they are acknowledged: another source skips them meanwhile.
                with self._get_engine().begin() as conn:
                    for delivery_id, raw in conn.execute(query.with_for_update(skip_locked=True)).all():
                        outcome = submit_body(submit, delivery_id, raw, invalid_reason="invalid_row")
                        if not self._ack(conn, delivery_id, outcome, found):
                            break
            else:
                # SQLite: no transaction is held across a submit (a producer's insert would wait for it); each
                # acknowledgement is its own short write, guarded by the row still being pending.
                with self._get_engine().connect() as conn:
                    pending = conn.execute(query).all()
                for delivery_id, raw in pending:
                    outcome = submit_body(submit, delivery_id, raw, invalid_reason="invalid_row")
                    with self._get_engine().begin() as conn:
                        if not self._ack(conn, delivery_id, outcome, found):
                            break
        except SQLAlchemyError as exc:
            raise _storage_error(exc, "write", self.dialect) from None
        return found

    def _ack(self, conn: Any, delivery_id: str, outcome: SubmitOutcome | None, found: dict[str, int]) -> bool:
        """Record a submit's ``outcome`` for the row on ``conn``; ``False`` when the poll must stop (backpressure)."""
        if outcome is None:
            found["deferred"] += 1
            return False
        kind, ref, reason = outcome
        found[kind] += 1
        t = self.table
        row = (t.c.delivery_id == delivery_id) & (t.c.state == "pending")
        if kind == "rejected":
            conn.execute(update(t).where(row).values(state="rejected", reason=reason, acked_at=time.time()))
        elif self.config["on_ack"] == "delete":
            conn.execute(delete(t).where(row))
        else:
            conn.execute(update(t).where(row).values(state="acked", ref=ref, acked_at=time.time()))
        return True


class SqlQueueSource(TriggerSource):
    """The source actor: polls its :class:`SqlQueue` every interval (the ``TriggerSource`` timer, on an I/O thread)
    and submits the pending rows to its trigger (see the module docstring). Its status adds the rows it
    ``submitted``, found ``duplicates``, ``rejected`` and ``deferred`` (polls that stopped on backpressure)."""

    source_type = "sql_queue"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queue: SqlQueue | None = None
        self._listener: Any = None
        self._polling = False
        self._stopping = False
        self._counts = {"submitted": 0, "duplicates": 0, "rejected": 0, "deferred": 0, "notified": 0}

    def poll(self) -> None:
        if self._queue is None:
            self._queue = SqlQueue(self.config)
        self._polling = True
        try:
            if self._queue.config["notify_channel"]:
                self._poll_listening(self._queue)
            else:
                self._drain(self._queue)
        except AdkError:
            # Unreachable now: drop the connections (fresh ones next poll); the base class counts the error.
            self._close()
            raise
        finally:
            self._polling = False
            if self._stopping:
                self._close()

    def _drain(self, queue: SqlQueue) -> dict[str, int]:
        found = queue.drain(self.submit)
        for key, value in found.items():
            self._counts[key] += value
        return found

    def _poll_listening(self, queue: SqlQueue) -> None:
        """Listen first, then drain, then wait for a notification (so no row committed in between is missed);
        drain again on each one, until ``listen_ms`` passed without one or the trigger pushes back."""
        if self._listener is None:
            self._listener = queue.listen()
        window = queue.config["listen_ms"] / 1000.0
        while not self._stopping:
            found = self._drain(queue)
            if found["deferred"]:
                return  # backpressure: wait for the timer
            if sum(found.values()) >= queue.config["batch"]:
                continue  # more rows than one batch: go on at once
            end = time.monotonic() + window
            while not queue.wait(self._listener, min(_WAIT_SLICE_S, end - time.monotonic())):
                if self._stopping or time.monotonic() >= end:
                    return
            self._counts["notified"] += 1

    def _close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._queue is not None:
            self._queue.close()

    def source_status(self) -> dict[str, Any]:
        return {"table": self.config.get("table"), **self._counts}

    def terminate(self, reason: str) -> None:
        self._stopping = True
        if not self._polling:
            self._close()
        super().terminate(reason)


def start_sql_source(
    trigger: str,
    config: Mapping[str, Any],
    *,
    interval_ms: int = 1000,
    initial_delay_ms: int = 0,
    system: Any = None,
) -> Any:
    """Start a :class:`SqlQueueSource` for ``trigger`` over the queue ``config`` (:func:`queue_config`).

    The table is created now if missing, so a configuration error or an unreachable database fails here, not in the
    actor. The first poll runs after ``initial_delay_ms`` (default at once), each next one ``interval_ms`` after the
    previous one returned. Returns the source handle (``.status()``, ``.stop()``).

    Raises:
        ConfigError: an invalid configuration.
        StorageError: ``open_failed``.
    """
    from adk_actors.triggers.source import start_source

    queue = SqlQueue(config).open()
    queue.close()
    return start_source(
        f"{__name__}.SqlQueueSource",
        trigger,
        dict(queue.config),
        interval_ms=interval_ms,
        initial_delay_ms=initial_delay_ms,
        system=system,
    )
