"""The SQL-table queue source (``adk_actors.triggers.sql_source``) on real SQLite files and a real PostgreSQL, with
real trigger actors and the emulator: rows become completed events exactly once, a full queue leaves rows pending
for a later poll (nothing lost), a source that died before its acknowledgement (or restarts) starts no second
invocation, a row that can never be accepted is set aside, and the configuration is checked strictly."""

from __future__ import annotations

import os
import string
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from actor_tests.triggers.t2_support import Register, echo_runner, emu, register, unique_trigger  # noqa: F401
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError, StorageError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import await_event, submit, trigger_status
from adk_actors.triggers.sql_source import SqlQueue, queue_config, start_sql_source

PG_URL = os.environ.get("TRIGGERS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _pg_available() -> bool:
    engine = create_engine(PG_URL)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except SQLAlchemyError:
        return False
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def queue_conf(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A fresh queue table on SQLite (a file under tmp_path) or PostgreSQL (dropped after the test)."""
    table = f"t2q_{uuid.uuid4().hex[:10]}"
    if request.param == "sqlite":
        yield {"url": f"sqlite:///{tmp_path / 'queue.db'}", "table": table}
        return
    if not _pg_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL unavailable at {PG_URL}")
        pytest.skip("PostgreSQL unavailable")
    yield {"url": PG_URL, "table": table}
    engine = create_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(text(f'DROP TABLE IF EXISTS "{table}"'))
    engine.dispose()


@pytest.fixture
def queue(queue_conf: dict[str, Any]) -> Iterator[SqlQueue]:
    q = SqlQueue(queue_conf).open()
    yield q
    q.close()


@pytest.fixture
def sources() -> Iterator[list[Any]]:
    """Source handles a test started; stopped after it."""
    started: list[Any] = []
    yield started
    for handle in started:
        try:
            handle.stop()
        except Exception:
            pass


def until(check: Callable[[], Any], seconds: float, what: str) -> Any:
    """Ask again until ``check`` is truthy (each try is a real round trip: a database read or an actor ask)."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
    return value


def _refs(queue: SqlQueue) -> list[str]:
    return [r["ref"] for r in queue.rows() if r["state"] == "acked"]


def test_rows_become_completed_events_exactly_once(
    register: Register,  # noqa: F811
    queue: SqlQueue,
    queue_conf: dict[str, Any],
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register(max_concurrency=4)
    ids = [f"delivery-{i}" for i in range(6)]
    for i, delivery_id in enumerate(ids):
        assert queue.put(delivery_id, f"row {i}", metadata={"source": "sql-test"})
    assert queue.put(ids[0], "again") is False  # the delivery id is the table's key

    sources.append(start_sql_source(name, queue_conf, interval_ms=20, system=system))
    until(lambda: queue.counts() == {"pending": 0, "acked": 6, "rejected": 0}, 20, "every row acknowledged")
    rows = queue.rows()
    assert [r["delivery_id"] for r in rows] == ids  # submitted in created_at order
    outcomes = [await_event(r["ref"], 30, system=system) for r in rows]
    assert [o.output for o in outcomes] == [f"Done: row {i}" for i in range(6)]
    counts = trigger_status(name, system=system)
    assert (counts["accepted"], counts["duplicates"], counts["completed"]) == (6, 0, 6)
    shown = sources[0].status()
    assert (shown["type"], shown["trigger"], shown["table"]) == ("sql_queue", name, queue_conf["table"])
    assert (shown["submitted"], shown["duplicates"], shown["rejected"], shown["errors"]) == (6, 0, 0, 0)


def test_a_full_queue_leaves_rows_pending_for_a_later_poll_and_loses_none(
    register: Register,  # noqa: F811
    queue: SqlQueue,
    queue_conf: dict[str, Any],
    sources: list[Any],
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "Slow: {user_text}", "delay_ms": 150}}]})
    name = register(max_concurrency=1, max_queue=1)
    for i in range(5):
        queue.put(f"burst-{i}", f"burst {i}")

    sources.append(start_sql_source(name, queue_conf, interval_ms=20, system=system))
    until(lambda: queue.counts()["acked"] == 5, 30, "every row acknowledged after backpressure")
    for ref in _refs(queue):
        assert await_event(ref, 30, system=system).outcome == "completed"
    counts = trigger_status(name, system=system)
    assert counts["rejected"] > 0  # the trigger refused while full: those rows waited in the table
    assert (counts["accepted"], counts["completed"], counts["duplicates"]) == (5, 5, 0)


def test_a_source_that_died_before_acknowledging_or_restarts_starts_no_second_invocation(
    register: Register,  # noqa: F811
    queue: SqlQueue,
    queue_conf: dict[str, Any],
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register()
    for i in range(3):
        queue.put(f"crash-{i}", f"crash {i}")

    class Died(Exception):
        pass

    accepted: list[str] = []

    def submit_then_die(delivery: dict[str, Any]) -> Any:
        accepted.append(submit(name, delivery, system=system).ref)
        raise Died  # the process dies after the trigger accepted, before the row is acknowledged

    with pytest.raises(Died):
        queue.drain(submit_then_die)
    assert queue.counts()["pending"] == 3 and len(accepted) == 1

    first = start_sql_source(name, queue_conf, interval_ms=20, system=system)
    sources.append(first)
    until(lambda: queue.counts()["acked"] == 3, 20, "the rows acknowledged by the next source")
    first.stop()
    assert _refs(queue)[0] == accepted[0]  # the redelivered row got the existing reference
    queue.put("crash-3", "crash 3")
    sources.append(start_sql_source(name, queue_conf, interval_ms=20, system=system))  # a restarted source
    until(lambda: queue.counts()["acked"] == 4, 20, "the new row acknowledged after the restart")
    for ref in _refs(queue):
        assert await_event(ref, 30, system=system).outcome == "completed"
    counts = trigger_status(name, system=system)
    assert (counts["accepted"], counts["duplicates"], counts["completed"]) == (4, 1, 4)


def test_a_row_that_can_never_be_accepted_is_set_aside_with_its_reason(
    register: Register,  # noqa: F811
    queue: SqlQueue,
    system: ActorSystemHandle,
) -> None:
    name = register(max_event_bytes=64)
    queue.put("too-big", "x" * 500)
    queue.put("fine", "small")
    with queue._get_engine().begin() as conn:  # a producer wrote a row that is not the queue's JSON
        conn.execute(
            queue.table.insert().values(
                delivery_id="garbled", payload="{not json", created_at=time.time(), state="pending"
            )
        )
    found = queue.drain(lambda d: submit(name, d, system=system))
    assert found == {"submitted": 1, "duplicates": 0, "rejected": 2, "deferred": 0}
    by_id = {r["delivery_id"]: r for r in queue.rows()}
    assert by_id["too-big"]["state"] == "rejected" and by_id["too-big"]["reason"] == "event_too_large"
    assert by_id["garbled"]["reason"] == "invalid_row" and by_id["fine"]["state"] == "acked"
    assert await_event(by_id["fine"]["ref"], 30, system=system).outcome == "completed"


def test_rows_wait_while_their_trigger_is_not_registered(
    register: Register,  # noqa: F811
    queue: SqlQueue,
    system: ActorSystemHandle,
) -> None:
    name = unique_trigger("later")
    queue.put("early", "before the trigger exists")
    deliver = lambda d: submit(name, d, system=system)  # noqa: E731
    assert queue.drain(deliver) == {"submitted": 0, "duplicates": 0, "rejected": 0, "deferred": 1}
    assert queue.counts()["pending"] == 1
    register(name)
    assert queue.drain(deliver)["submitted"] == 1
    assert await_event(queue.rows()[0]["ref"], 30, system=system).output == "Done: before the trigger exists"


def test_on_ack_delete_removes_the_acknowledged_rows(
    register: Register,  # noqa: F811
    queue_conf: dict[str, Any],
    system: ActorSystemHandle,
) -> None:
    name = register()
    q = SqlQueue({**queue_conf, "on_ack": "delete"}).open()
    try:
        q.put("d-1", "one")
        assert q.drain(lambda d: submit(name, d, system=system))["submitted"] == 1
        assert q.counts() == {"pending": 0, "acked": 0, "rejected": 0}
    finally:
        q.close()


def test_on_postgresql_a_notification_wakes_the_source_before_its_next_tick_and_stop_closes_the_listener(
    register: Register,  # noqa: F811
    queue_conf: dict[str, Any],
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    if not queue_conf["url"].startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    name = register()
    channel = f"{queue_conf['table']}_ch"
    conf = {**queue_conf, "notify_channel": channel, "listen_ms": 30_000}
    q = SqlQueue(conf).open()
    try:
        source = start_sql_source(name, conf, interval_ms=60_000, system=system)  # the timer alone: once a minute
        sources.append(source)
        for i in range(2):
            q.put(f"n-{i}", f"notified {i}")
            until(lambda i=i: q.counts()["acked"] == i + 1, 10, f"row {i} acknowledged well before the next tick")
        assert source.status()["notified"] >= 1
        for ref in _refs(q):
            assert await_event(ref, 30, system=system).outcome == "completed"
        source.stop()
        admin = create_engine(PG_URL)
        try:

            def listening() -> int:
                with admin.connect() as conn:
                    found = conn.execute(
                        text("SELECT count(*) FROM pg_stat_activity WHERE query = :q"), {"q": f'LISTEN "{channel}"'}
                    )
                    return int(found.scalar_one())

            until(lambda: listening() == 0, 10, "the listening connection closed after stop")
        finally:
            admin.dispose()
    finally:
        q.close()


def test_a_sqlite_queue_file_is_created_private(tmp_path: Path) -> None:
    queue = SqlQueue({"url": f"sqlite:///{tmp_path / 'private-queue.db'}", "table": "inbox"}).open()
    try:
        assert queue.put("d-1", {"text": "a user's message"})
        assert (tmp_path / "private-queue.db").stat().st_mode & 0o777 == 0o600
    finally:
        queue.close()


def test_an_unreachable_database_is_a_structural_storage_error(tmp_path: Path) -> None:
    url = "postgresql+psycopg://qa-user-x9:hunter2@127.0.0.1:1/qa-db-x9?connect_timeout=2"
    with pytest.raises(StorageError) as err:
        start_sql_source("any", {"url": url})
    assert err.value.reason == "open_failed"
    text_of = repr(err.value.to_dict())
    assert "hunter2" not in text_of and "qa-user-x9" not in text_of and "qa-db-x9" not in text_of


@pytest.mark.parametrize(
    ("config", "key", "reason"),
    [
        ({"url": "sqlite:///x.db", "colour": 1}, "colour", "unknown_key"),
        ({}, "url", "invalid_value"),
        ({"url": "mysql://h/db"}, "url", "invalid_value"),
        ({"url": "not a url"}, "url", "invalid_value"),
        ({"url": "sqlite:///x.db", "table": "Queue"}, "table", "invalid_value"),
        ({"url": "sqlite:///x.db", "table": 'q"; drop table x; --'}, "table", "invalid_value"),
        ({"url": "sqlite:///x.db", "batch": 0}, "batch", "invalid_value"),
        ({"url": "sqlite:///x.db", "batch": True}, "batch", "invalid_value"),
        ({"url": "sqlite:///x.db", "on_ack": "keep"}, "on_ack", "invalid_value"),
        ({"url": "sqlite:///x.db", "notify_channel": "inbox"}, "notify_channel", "invalid_value"),
        ({"url": "postgresql+psycopg://h/db", "notify_channel": "In-box"}, "notify_channel", "invalid_value"),
        ({"url": "postgresql+psycopg://h/db", "listen_ms": 0}, "listen_ms", "invalid_value"),
    ],
)
def test_an_invalid_queue_configuration_names_its_key(config: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        queue_config(config)
    assert (err.value.reason, err.value.details["key"]) == (reason, key)


_IDENT = set(string.ascii_lowercase + string.digits + "_")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=70))
def test_a_table_name_is_accepted_exactly_when_it_is_a_lower_case_identifier(table: str) -> None:
    valid = 0 < len(table) <= 63 and table[0] in string.ascii_lowercase and set(table) <= _IDENT
    try:
        checked = queue_config({"url": "sqlite:///x.db", "table": table})
    except ConfigError as err:
        assert not valid and err.details == {"key": "table"}
    else:
        assert valid and checked["table"] == table
