"""The RabbitMQ source (``adk_actors.triggers.amqp_source``) against the real broker on 127.0.0.1:5672, with real
trigger actors and the emulator: messages become completed events exactly once and leave nothing in the broker, a
full trigger queue leaves them in the broker (nothing lost), a redelivered ``message_id`` starts no second
invocation, a source that died before its ``basic_ack`` starts none either, a message that can never be accepted
is rejected to the queue's dead-letter exchange, an unreachable broker is counted without leaking the password, and
the configuration is checked strictly."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actor_tests.triggers.t2_support import Register, echo_runner, emu, register  # noqa: F401
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError, TriggerError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import await_event, submit, trigger_status
from adk_actors.triggers.amqp_source import (
    AmqpQueue,
    amqp_config,
    publish,
    redact_url,
    start_amqp_source,
)
from adk_actors.triggers.source import start_source

SOURCE_CLASS = "adk_actors.triggers.amqp_source.AmqpQueueSource"


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


@pytest.fixture
def queue(amqp_url: str, amqp_queues: Callable[..., str]) -> Iterator[AmqpQueue]:
    """A fresh queue on the broker and a producer connection to it."""
    q = AmqpQueue({"url": amqp_url, "queue": amqp_queues()}).open()
    yield q
    q.close()


def until(check: Callable[[], Any], seconds: float, what: str) -> Any:
    """Ask again until ``check`` is truthy (each try is a real round trip: a broker query or an actor ask)."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
    return value


def unacked(queue: str) -> int:
    """The broker's count of delivered but unacknowledged messages of ``queue`` (``rabbitmqctl``: AMQP does not
    report it)."""
    found = subprocess.run(
        ["rabbitmqctl", "list_queues", "-q", "--no-table-headers", "name", "messages_unacknowledged"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    counts = {name: int(n) for name, n in (line.split() for line in found.splitlines() if line.strip())}
    return counts[queue]


def _settled(name: str, count: int, system: ActorSystemHandle) -> Callable[[], bool]:
    return lambda: trigger_status(name, system=system)["completed"] == count


def _recent_refs(name: str, system: ActorSystemHandle) -> list[str]:
    return [item["ref"] for item in trigger_status(name, system=system)["recent"]]


def test_messages_become_completed_events_exactly_once_and_nothing_stays_in_the_broker(
    register: Register,  # noqa: F811
    queue: AmqpQueue,
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register(max_concurrency=4)
    for i in range(6):
        queue.publish(f"delivery-{i}", f"message {i}", metadata={"source": "amqp-test"})
    assert queue.counts()["ready"] == 6

    source = start_amqp_source(name, queue.config, interval_ms=20, system=system)
    sources.append(source)
    until(_settled(name, 6, system), 30, "every message completed")
    outputs = sorted(await_event(ref, 30, system=system).output for ref in _recent_refs(name, system))
    assert outputs == [f"Done: message {i}" for i in range(6)]
    counts = trigger_status(name, system=system)
    assert (counts["accepted"], counts["duplicates"], counts["completed"]) == (6, 0, 6)
    assert queue.counts()["ready"] == 0
    if shutil.which("rabbitmqctl"):
        assert unacked(queue.queue) == 0
    shown = source.status()
    assert (shown["type"], shown["trigger"], shown["queue"]) == ("amqp", name, queue.queue)
    assert (shown["submitted"], shown["duplicates"], shown["rejected"], shown["errors"]) == (6, 0, 0, 0)
    assert shown["url"] == redact_url(queue.config["url"]) and "[REDACTED]" in shown["url"]
    source.stop()
    until(lambda: queue.counts()["consumers"] == 0, 10, "no consumer left after stop")
    assert queue.counts()["ready"] == 0  # the stopped source held no unacknowledged message either


def test_a_full_trigger_queue_leaves_messages_in_the_broker_and_loses_none(
    register: Register,  # noqa: F811
    queue: AmqpQueue,
    sources: list[Any],
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "Slow: {user_text}", "delay_ms": 150}}]})
    name = register(max_concurrency=1, max_queue=1)
    for i in range(6):
        queue.publish(f"burst-{i}", f"burst {i}")

    source = start_amqp_source(name, queue.config, interval_ms=20, system=system)
    sources.append(source)
    until(_settled(name, 6, system), 30, "every message completed after backpressure")
    counts = trigger_status(name, system=system)
    assert counts["rejected"] > 0  # the trigger refused while full
    assert (counts["accepted"], counts["completed"], counts["duplicates"]) == (6, 6, 0)
    shown = source.status()
    assert shown["deferred"] > 0  # polls that requeued a refused message: it waited in the broker
    assert (shown["submitted"], shown["duplicates"], shown["rejected"]) == (6, 0, 0)
    assert queue.counts()["ready"] == 0


def test_a_redelivered_message_id_is_one_invocation_and_both_messages_are_acknowledged(
    register: Register,  # noqa: F811
    queue: AmqpQueue,
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register()
    queue.publish("same-id", "only once")
    queue.publish("same-id", "only once")
    source = start_amqp_source(name, queue.config, interval_ms=20, system=system)
    sources.append(source)
    until(lambda: source.status()["duplicates"] == 1, 20, "the second copy answered duplicate")
    until(_settled(name, 1, system), 20, "the one event completed")
    (ref,) = _recent_refs(name, system)
    assert await_event(ref, 30, system=system).output == "Done: only once"
    counts = trigger_status(name, system=system)
    assert (counts["accepted"], counts["duplicates"], counts["completed"]) == (1, 1, 1)
    assert source.status()["submitted"] == 1
    assert queue.counts()["ready"] == 0
    if shutil.which("rabbitmqctl"):
        assert unacked(queue.queue) == 0


def test_a_source_that_died_before_acknowledging_or_restarts_starts_no_second_invocation(
    register: Register,  # noqa: F811
    queue: AmqpQueue,
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register()
    for i in range(3):
        queue.publish(f"crash-{i}", f"crash {i}")

    class Died(Exception):
        pass

    accepted: list[str] = []

    def submit_then_die(delivery: dict[str, Any]) -> Any:
        accepted.append(submit(name, delivery, system=system).ref)
        raise Died  # the process dies after the trigger accepted, before the basic_ack

    consumer = AmqpQueue(queue.config)
    with pytest.raises(Died):
        consumer.drain(submit_then_die)
    assert not consumer.connected  # its connection is gone, as a dead process's would be
    until(lambda: queue.counts()["ready"] == 3, 10, "the broker requeued the unacknowledged message")
    assert len(accepted) == 1

    first = start_amqp_source(name, queue.config, interval_ms=20, system=system)
    sources.append(first)
    until(_settled(name, 3, system), 20, "the messages completed through the next source")
    assert first.status()["duplicates"] == 1  # the redelivered message got the existing reference
    first.stop()
    queue.publish("crash-3", "crash 3")
    second = start_amqp_source(name, queue.config, interval_ms=20, system=system)  # a restarted source
    sources.append(second)
    until(_settled(name, 4, system), 20, "the new message completed after the restart")
    assert accepted[0] in _recent_refs(name, system)
    assert await_event(accepted[0], 30, system=system).output == "Done: crash 0"
    counts = trigger_status(name, system=system)
    assert (counts["accepted"], counts["duplicates"], counts["completed"]) == (4, 1, 4)
    assert queue.counts()["ready"] == 0


def test_a_message_that_can_never_be_accepted_is_dead_lettered_and_never_submitted(
    register: Register,  # noqa: F811
    amqp_url: str,
    amqp_queues: Callable[..., str],
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register(max_event_bytes=64)
    dead = amqp_queues("t2amqp-dlq")
    inbox = amqp_queues(**{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = conn.channel()
        channel.confirm_delivery()
        send = lambda body, **props: channel.basic_publish(  # noqa: E731
            "", inbox, body, pika.BasicProperties(**props), mandatory=True
        )
        send(b'{"payload": "no id"}')
        send(b"{not json", message_id="garbled")
        send(b'{"metadata": {}}', message_id="no-payload")
        send(b"\xff\xfe", message_id="not-utf8")
        send(b'{"payload": "' + b"x" * 500 + b'"}', message_id="too-big")
        send(b'{"payload": "small"}', message_id="fine")
    finally:
        conn.close()

    source = start_amqp_source(name, {"url": amqp_url, "queue": inbox}, interval_ms=20, system=system)
    sources.append(source)
    shown = until(lambda: (s := source.status())["submitted"] + s["rejected"] == 6 and s, 20, "all six settled")
    assert (shown["submitted"], shown["rejected"]) == (1, 5)
    assert shown["rejected_reasons"] == {"missing_message_id": 1, "invalid_body": 3, "event_too_large": 1}
    until(_settled(name, 1, system), 20, "the one valid message completed")
    counts = trigger_status(name, system=system)
    assert (counts["accepted"], counts["completed"]) == (1, 1)  # the bad ones were never accepted

    dlq = AmqpQueue({"url": amqp_url, "queue": dead}).open()
    try:
        assert until(lambda: dlq.counts()["ready"] == 5, 10, "the rejected messages on the dead-letter queue")
        channel = dlq._open_channel()
        seen = set()
        for _ in range(5):
            _method, props, _body = channel.basic_get(dead, auto_ack=True)
            assert props.headers["x-death"][0]["reason"] == "rejected"
            seen.add(props.message_id)
        assert seen == {None, "garbled", "no-payload", "not-utf8", "too-big"}
    finally:
        dlq.close()
    assert AmqpQueue({"url": amqp_url, "queue": inbox}).counts()["ready"] == 0


def test_an_unreachable_broker_is_counted_and_its_password_appears_nowhere(
    sources: list[Any],
    system: ActorSystemHandle,
    caplog: pytest.LogCaptureFixture,
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    url = f"amqp://qa-user:{password}@127.0.0.1:1/%2F"  # nothing listens on port 1
    with pytest.raises(TriggerError) as err:
        start_amqp_source("t2-unreachable", {"url": url, "queue": "inbox"}, system=system)
    assert err.value.reason == "amqp_unavailable"
    assert err.value.details["operation"] == "open"
    for text in (repr(err.value.to_dict()), str(err.value), repr(err.value)):
        assert password not in text and "127.0.0.1:1" not in text
    assert "Connection refused" in caplog.text and password not in caplog.text  # pika's records in this process

    source_id = f"source:amqp-down:{uuid.uuid4().hex[:8]}"
    handle = start_source(
        SOURCE_CLASS,
        "t2-unreachable",
        amqp_config({"url": url, "queue": "inbox"}),
        interval_ms=20,
        initial_delay_ms=0,
        source_id=source_id,
        system=system,
    )
    sources.append(handle)
    shown = until(lambda: (s := handle.status())["errors"] >= 3 and s, 30, "failed polls counted")
    assert shown["last_error"] == "amqp_unavailable" and shown["connected"] is False
    assert shown["url"] == "amqp://qa-user:[REDACTED]@127.0.0.1:1/%2F"
    assert password not in repr(shown)
    handle.stop()
    sink = until(lambda: (t := _read(system.log_sink)) and source_id in t and t, 10, "the poll failure logged")
    assert "amqp_unavailable" in sink
    assert password not in sink


def _read(path: Any) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_listening_submits_a_new_message_before_the_next_tick_and_stop_closes_the_connection(
    register: Register,  # noqa: F811
    queue: AmqpQueue,
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register()
    conf = {**queue.config, "listen_ms": 30_000}
    source = start_amqp_source(name, conf, interval_ms=60_000, system=system)  # the timer alone: once a minute
    sources.append(source)
    until(lambda: queue.counts()["consumers"] == 1, 10, "the first poll listening")
    for i in range(2):
        queue.publish(f"listen-{i}", f"listened {i}")
        until(_settled(name, i + 1, system), 10, f"message {i} completed well before the next tick")
    shown = source.status()
    assert (shown["polls"], shown["submitted"], shown["connected"]) == (0, 2, True)  # still the first poll
    source.stop()
    until(lambda: queue.counts()["consumers"] == 0, 10, "the listening consumer gone after stop")
    assert queue.counts()["ready"] == 0


def _rabbitmqctl(*args: str) -> str:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60, check=True).stdout


def _connections_of(queue: str) -> list[str]:
    """The broker's process ids of the connections another process (the source's host) opened for ``queue``: named
    ``adk_actors amqp <queue> pid <pid>``, and this process's producer is left out."""
    listed = _rabbitmqctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
    ours, mine = f'"adk_actors amqp {queue} pid ', f'"adk_actors amqp {queue} pid {os.getpid()}"'
    return [line.split("\t", 1)[0] for line in listed.splitlines() if ours in line and mine not in line]


@pytest.mark.skipif(not shutil.which("rabbitmqctl"), reason="closes a connection with rabbitmqctl")
def test_a_connection_the_broker_closed_is_opened_again_and_no_message_is_lost(
    register: Register,  # noqa: F811
    queue: AmqpQueue,
    sources: list[Any],
    system: ActorSystemHandle,
) -> None:
    name = register()
    queue.publish("before", "before the drop")
    source = start_amqp_source(name, queue.config, interval_ms=20, system=system)
    sources.append(source)
    until(_settled(name, 1, system), 20, "the first message completed")
    (connection,) = until(lambda: _connections_of(queue.queue), 20, "the source's connection listed")
    _rabbitmqctl("close_connection", connection, "test: the broker drops the source")
    until(lambda: connection not in _connections_of(queue.queue), 20, "the old connection gone")
    queue.publish("after", "after the drop")
    until(_settled(name, 2, system), 20, "the message published after the drop completed")
    shown = source.status()
    assert (shown["submitted"], shown["connected"]) == (2, True)
    assert [c for c in _connections_of(queue.queue) if c != connection]  # a new connection of its own
    assert queue.counts()["ready"] == 0


def test_publish_checks_its_arguments_and_a_missing_queue(amqp_url: str) -> None:
    with pytest.raises(ConfigError) as err:
        publish(amqp_url, "any", "", "payload")
    assert err.value.details == {"key": "delivery_id"}
    with pytest.raises(ConfigError) as err:
        publish(amqp_url, "any", "id", object())
    assert err.value.details == {"key": "payload"}
    with pytest.raises(TriggerError) as terr:
        publish(amqp_url, f"t2amqp-missing-{uuid.uuid4().hex[:8]}", "id", "payload")
    assert (terr.value.reason, terr.value.details["reply_code"]) == ("amqp_unavailable", 404)


def test_redact_url_hides_the_password_and_drops_the_options() -> None:
    assert redact_url("amqps://u:p%40ss@h:5671/vh?ssl_options=x#f") == "amqps://u:[REDACTED]@h:5671/vh"
    assert redact_url("amqp://u@h/%2F") == "amqp://u@h/%2F"
    assert redact_url("amqp://h:5672") == "amqp://h:5672"
    assert redact_url("amqp://u:secret@[::1") == "[REDACTED]"


@pytest.mark.parametrize(
    ("config", "key", "reason"),
    [
        ({"url": "amqp://h", "queue": "q", "colour": 1}, "colour", "unknown_key"),
        ({"url": "amqp://h", "queue": "q", "on_reject": "drop"}, "on_reject", "unknown_key"),
        ({"queue": "q"}, "url", "invalid_value"),
        ({"url": "http://h", "queue": "q"}, "url", "invalid_value"),
        ({"url": "amqp://", "queue": "q"}, "url", "invalid_value"),
        ({"url": "amqp://h:99999", "queue": "q"}, "url", "invalid_value"),
        ({"url": "amqp://h?colour=red", "queue": "q"}, "url", "invalid_value"),
        ({"url": "amqp://h"}, "queue", "invalid_value"),
        ({"url": "amqp://h", "queue": ""}, "queue", "invalid_value"),
        ({"url": "amqp://h", "queue": "q" * 256}, "queue", "invalid_value"),
        ({"url": "amqp://h", "queue": "é" * 128}, "queue", "invalid_value"),
        ({"url": "amqp://h", "queue": "a\nb"}, "queue", "invalid_value"),
        ({"url": "amqp://h", "queue": "amq.mine", "declare": True}, "queue", "invalid_value"),
        ({"url": "amqp://h", "queue": "q", "declare": "yes"}, "declare", "invalid_value"),
        ({"url": "amqp://h", "queue": "q", "batch": 0}, "batch", "invalid_value"),
        ({"url": "amqp://h", "queue": "q", "batch": True}, "batch", "invalid_value"),
        ({"url": "amqp://h", "queue": "q", "prefetch": 1001}, "prefetch", "invalid_value"),
        ({"url": "amqp://h", "queue": "q", "listen_ms": -1}, "listen_ms", "invalid_value"),
        ({"url": "amqp://h", "queue": "q", "listen_ms": 60_001}, "listen_ms", "invalid_value"),
    ],
)
def test_an_invalid_amqp_configuration_names_its_key(config: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        amqp_config(config)
    assert (err.value.reason, err.value.details["key"]) == (reason, key)


def test_the_defaults_of_an_amqp_configuration() -> None:
    assert amqp_config({"url": "amqp://u:p@h/%2F", "queue": "inbox", "batch": 7}) == {
        "url": "amqp://u:p@h/%2F",
        "queue": "inbox",
        "declare": False,
        "batch": 7,
        "prefetch": 7,
        "listen_ms": 0,
    }


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=300),
    st.sampled_from(["amqp://h", "amqps://u:p@h:5671/v", "amqp://h?heartbeat=x", "amqp://[::1", "amqp://h:0"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
_configs = st.dictionaries(
    st.one_of(st.sampled_from(["url", "queue", "declare", "batch", "prefetch", "listen_ms"]), st.text(max_size=10)),
    _values,
    max_size=7,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_configs, _values))
def test_any_value_is_either_a_checked_configuration_or_a_config_error(config: Any) -> None:
    try:
        checked = amqp_config(config)
    except ConfigError as err:
        assert err.reason in ("unknown_key", "invalid_value") and isinstance(err.details["key"], str)
    else:
        assert set(checked) == {"url", "queue", "declare", "batch", "prefetch", "listen_ms"}
        assert 1 <= checked["prefetch"] <= 1000 and 0 <= checked["listen_ms"] <= 60_000
