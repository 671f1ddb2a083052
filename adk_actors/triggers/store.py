"""The durable trigger store: accepted events and their dedupe keys in SQL (SQLite file or PostgreSQL).

One row per accepted event (table ``adk_trigger_events``, schema version 1 recorded in ``adk_trigger_schema``
under the component ``trigger_store``), keyed by ``(trigger, event_id)`` and unique on ``(trigger,
idempotency_key)``: the dedupe table *is* the event table, so a redelivered key finds its event (and its outcome)
for as long as the row is retained. A row is written before ``submit`` answers; ``attempts`` is written before
each attempt's run starts (the run id ``trg<event id>-<attempt>`` is derived from it, so a restarted trigger
follows a run that outlived it instead of starting a second one); the outcome is written once (an update of a
``pending`` row only). Terminal rows are deleted after the trigger's ``retention_ms``.

Times are wall-clock epoch milliseconds from the database clock (PostgreSQL ``clock_timestamp()``, SQLite
``julianday('now')``), so a deadline survives a restart on another node; tests inject ``clock``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    delete,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from adk_actors.storage.sql import SqlStore, db_now_ms, schema_version_table
from adk_actors.triggers.messages import EventOutcome
from adk_actors.triggers.options import Delivery

__all__ = ["SCHEMA_VERSION", "PendingEvent", "TriggerStore"]

SCHEMA_VERSION: Final = 1
_COMPONENT: Final = "trigger_store"
_PG_MIGRATION_LOCK: Final = 0x4144_4B54_5247_5331  # "ADKTRGS1"
MAX_PENDING_LOADED: Final = 100_000
"""The most pending events one reload takes (a trigger's queue is far smaller)."""

metadata = MetaData()
schema_table = schema_version_table("adk_trigger_schema", metadata)
events_table = Table(
    "adk_trigger_events",
    metadata,
    Column("trigger", String(128), primary_key=True),
    Column("event_id", String(64), primary_key=True),
    Column("idempotency_key", String(256), nullable=False),
    Column("delivery", Text, nullable=False),
    Column("accepted_at", BigInteger, nullable=False),
    Column("deadline_at", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("outcome", Text),
    Column("finished_at", BigInteger),
    UniqueConstraint("trigger", "idempotency_key", name="uq_adk_trigger_events_key"),
)
_E = events_table.c


def _migrate_to_1(conn: Connection) -> None:
    metadata.create_all(conn, checkfirst=True)


MIGRATIONS: Final = {1: _migrate_to_1}


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingEvent:
    """An accepted event without an outcome, as a restarted trigger reloads it."""

    event_id: str
    delivery: Delivery
    remaining_ms: int
    """What is left of its deadline (``<= 0``: it expired while nobody ran it)."""
    attempts: int


def _delivery_json(delivery: Delivery) -> str:
    return json.dumps(
        {
            "payload": delivery.payload,
            "metadata": delivery.metadata,
            "timeout_ms": delivery.timeout_ms,
            "session": list(delivery.session) if delivery.session else None,
            "size": delivery.size,
        },
        ensure_ascii=False,
        allow_nan=False,
    )


def _delivery(key: str, raw: str) -> Delivery:
    data = json.loads(raw)
    session = data.get("session")
    return Delivery(
        payload=data["payload"],
        idempotency_key=key,
        metadata=data.get("metadata") or {},
        timeout_ms=data.get("timeout_ms"),
        session=(session[0], session[1]) if session else None,
        size=int(data.get("size") or 0),
    )


class TriggerStore(SqlStore):
    """Durable events of triggers; see the module docstring.

    Args:
        url: A SQLAlchemy URL (``sqlite:///path/triggers.db``, ``postgresql+psycopg://...``).
        busy_timeout_ms: How long a SQLite writer waits for the write lock.
        engine_options: Extra keyword arguments for ``sqlalchemy.create_engine``.
        clock: Replaces the database clock (wall-clock epoch milliseconds); must pickle.

    Raises:
        ConfigError: reason ``invalid_value`` when the URL cannot be parsed.
    """

    LABEL = "trigger store"
    URL_KEY = "durable.store"
    COMPONENT = _COMPONENT
    SCHEMA_TABLE = schema_table
    MIGRATIONS = MIGRATIONS
    PG_MIGRATION_LOCK = _PG_MIGRATION_LOCK
    DIALECTS = ("sqlite", "postgresql")

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)

    def open(self) -> TriggerStore:
        """Open the engine and migrate the schema now.

        Raises:
            StorageError: ``open_failed`` or ``schema_too_new``.
        """
        self._get_engine()
        return self

    def _now(self, conn: Connection) -> int:
        if self._clock is not None:
            return int(self._clock())
        return db_now_ms(conn)

    def _migration_timestamp(self, conn: Connection) -> Any:
        return self._now(conn)

    # ---- the trigger actor's side ---------------------------------------------------------------------------
    def accept(self, trigger: str, event_id: str, delivery: Delivery, budget_ms: int) -> str | None:
        """Record an accepted event; returns ``None``, or the event id that already holds this key.

        Raises:
            StorageError: ``write_failed``.
        """

        def body(conn: Connection) -> str | None:
            found = conn.execute(
                select(_E.event_id).where(and_(_E.trigger == trigger, _E.idempotency_key == delivery.idempotency_key))
            ).scalar()
            if found is not None:
                return str(found)
            now = self._now(conn)
            conn.execute(
                events_table.insert().values(
                    trigger=trigger,
                    event_id=event_id,
                    idempotency_key=delivery.idempotency_key,
                    delivery=_delivery_json(delivery),
                    accepted_at=now,
                    deadline_at=now + budget_ms,
                    attempts=0,
                    state="pending",
                )
            )
            return None

        try:
            return self._write(body)
        except Exception as exc:
            cause = getattr(exc, "__cause__", None) or getattr(exc, "__context__", None)
            if isinstance(cause, IntegrityError):  # another node won the race for this key
                return self.find_key(trigger, delivery.idempotency_key)
            raise

    def find_key(self, trigger: str, key: str) -> str | None:
        """The event id holding ``key`` (pending, or terminal and retained), or ``None``."""
        found = self._read(
            lambda conn: conn.execute(
                select(_E.event_id).where(and_(_E.trigger == trigger, _E.idempotency_key == key))
            ).scalar()
        )
        return None if found is None else str(found)

    def mark_attempt(self, trigger: str, event_id: str, attempts: int) -> None:
        """Record that attempt ``attempts`` is about to start (its run id derives from it)."""
        self._write(
            lambda conn: conn.execute(
                update(events_table)
                .where(and_(_E.trigger == trigger, _E.event_id == event_id, _E.state == "pending"))
                .values(attempts=attempts)
            )
        )

    def finish(self, trigger: str, event_id: str, outcome: EventOutcome) -> bool:
        """Write the event's outcome, once: ``False`` when it already had one."""
        document = json.dumps(
            {
                "outcome": outcome.outcome,
                "run_id": outcome.run_id,
                "output": outcome.output,
                "attempts": outcome.attempts,
                "reason": outcome.reason,
            },
            ensure_ascii=False,
            default=str,
        )

        def body(conn: Connection) -> bool:
            done = conn.execute(
                update(events_table)
                .where(and_(_E.trigger == trigger, _E.event_id == event_id, _E.state == "pending"))
                .values(state="terminal", outcome=document, finished_at=self._now(conn))
            )
            return bool(done.rowcount)

        return self._write(body)

    def outcome(self, trigger: str, event_id: str, ref: str) -> EventOutcome | None:
        """The stored outcome of a terminal event, or ``None`` (pending, or unknown)."""
        raw = self._read(
            lambda conn: conn.execute(
                select(_E.outcome).where(and_(_E.trigger == trigger, _E.event_id == event_id))
            ).scalar()
        )
        if raw is None:
            return None
        data = json.loads(raw)
        return EventOutcome(
            outcome=data["outcome"],
            ref=ref,
            run_id=data.get("run_id"),
            output=data.get("output"),
            attempts=int(data.get("attempts") or 0),
            reason=data.get("reason"),
        )

    def pending(self, trigger: str) -> list[PendingEvent]:
        """The trigger's events without an outcome, oldest first (at most ``MAX_PENDING_LOADED``)."""

        def body(conn: Connection) -> list[PendingEvent]:
            now = self._now(conn)
            rows = conn.execute(
                select(_E.event_id, _E.idempotency_key, _E.delivery, _E.deadline_at, _E.attempts)
                .where(and_(_E.trigger == trigger, _E.state == "pending"))
                .order_by(_E.accepted_at, _E.event_id)
                .limit(MAX_PENDING_LOADED)
            ).all()
            return [
                PendingEvent(
                    event_id=row.event_id,
                    delivery=_delivery(row.idempotency_key, row.delivery),
                    remaining_ms=int(row.deadline_at) - now,
                    attempts=int(row.attempts),
                )
                for row in rows
            ]

        return self._read(body)

    def forget(self, trigger: str, event_id: str) -> None:
        """Delete a terminal event (its retention ended): its key may be submitted again."""
        self._write(
            lambda conn: conn.execute(
                delete(events_table).where(and_(_E.trigger == trigger, _E.event_id == event_id, _E.state == "terminal"))
            )
        )

    def purge(self, trigger: str, retention_ms: int) -> int:
        """Delete the trigger's terminal events finished more than ``retention_ms`` ago; returns how many."""

        def body(conn: Connection) -> int:
            cutoff = self._now(conn) - retention_ms
            done = conn.execute(
                delete(events_table).where(and_(_E.trigger == trigger, _E.state == "terminal", _E.finished_at < cutoff))
            )
            return int(done.rowcount or 0)

        return self._write(body)

    def counts(self, trigger: str) -> dict[str, int]:
        """Rows per state of one trigger (for tests and status pages)."""
        rows = self._read(lambda conn: conn.execute(select(_E.state, _E.outcome).where(_E.trigger == trigger)).all())
        counts: dict[str, int] = {"pending": 0, "terminal": 0}
        for state, outcome in rows:
            counts[state] = counts.get(state, 0) + 1
            if outcome:
                name = json.loads(outcome)["outcome"]
                counts[name] = counts.get(name, 0) + 1
        return counts
