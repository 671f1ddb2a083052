"""A RabbitMQ (AMQP 0-9-1) queue as a trigger source: a real broker adapter of the ``TriggerSource`` behaviour.

A producer publishes messages to a queue; :class:`AmqpQueueSource` consumes them on its timer (and, with
``listen_ms``, for a while after draining) and submits each to its trigger with the message's AMQP ``message_id``
property as the idempotency key. The body is the JSON of the SQL queue's rows, decoded by the same function
(:func:`adk_actors.triggers.source.submit_body`): ``{"payload": ..., "metadata"?: {...}, "timeout_ms"?: N}``.

Per message:

* accepted, or answered ``duplicate`` -> ``basic_ack``; nothing else acknowledges a message;
* a refusal that may pass (``trigger_queue_full``, ``trigger_stopping``, ``unknown_trigger``) or no answer ->
  ``basic_nack(requeue=True)`` and the poll ends: the consumer is cancelled, so the messages it had prefetched go
  back to the queue too. That is the backpressure: the messages wait in the broker, not in this process;
* no ``message_id`` (``missing_message_id``), a body that is not that JSON (``invalid_body``) or a refusal that
  never passes (``invalid_delivery``, ``event_too_large``) -> ``basic_reject(requeue=False)``: the broker drops the
  message, or dead-letters it when the queue has a dead-letter exchange. One bad message never blocks the queue.

Between polls no consumer is open, so every waiting message is ``ready`` in the broker. A source that dies after
``submit`` and before its ``basic_ack`` loses its connection, the broker redelivers the message, and the trigger
answers ``duplicate`` with the existing reference: exactly one invocation per ``message_id`` while the event is
retained.

One ``BlockingConnection`` is kept across polls (polls never overlap; they run on the host's I/O threads, one after
the other). Any broker or network error closes it and fails the poll with ``TriggerError("amqp_unavailable")``,
which carries the pika exception's class name and the AMQP reply code only, never its text, the URL or the
password; the next poll connects again. :class:`AmqpQueue` is the queue itself, for producers and tests
(``publish``, ``counts``, ``drain``); :func:`start_amqp_source` starts a source actor for a trigger.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import unquote, urlsplit

try:
    import pika
    from pika.exceptions import AMQPError, ChannelError
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("adk_actors.triggers.amqp_source needs the 'amqp' extra: pip install 'adk_actors[amqp]'") from exc

from adk_actors.errors import ConfigError, TriggerError
from adk_actors.secrets import REDACTED, register_secret
from adk_actors.triggers.messages import Submitted
from adk_actors.triggers.source import SourceHandle, SubmitOutcome, TriggerSource, submit_body

__all__ = [
    "CONNECT_TIMEOUT_S",
    "MAX_BATCH",
    "AmqpQueue",
    "AmqpQueueSource",
    "amqp_config",
    "publish",
    "redact_url",
    "start_amqp_source",
]

MAX_BATCH = 1000
"""Most messages one poll handles, and the largest prefetch."""
CONNECT_TIMEOUT_S = 5.0
"""Bound of one socket operation and of opening a connection (the AMQP handshake gets twice this)."""
BLOCKED_TIMEOUT_S = 30.0
"""Longest the broker may hold the connection blocked (a resource alarm) before it is dropped."""
_MAX_LISTEN_MS = 60_000
_MAX_URL = 2048
_MAX_QUEUE_BYTES = 255
_MAX_ID_BYTES = 255
"""``message_id`` is an AMQP short string."""
_WAIT_SLICE_S = 0.25
"""Longest single wait for a message: a stopping source's I/O thread notices within this."""
_DRAIN_IDLE_S = 1.0
"""How long a drain waits for the messages the queue reported ready before deciding another consumer took them."""
_MAX_POLL_S = 120.0
"""A poll returns after this long even while messages keep coming, well inside the behaviour's poll timeout."""
_MAX_REASONS = 16
_CONFIG_KEYS = frozenset({"url", "queue", "declare", "batch", "prefetch", "listen_ms"})
_COUNTERS = ("submitted", "duplicates", "rejected", "deferred")


def _bad(key: str, message: str) -> ConfigError:
    return ConfigError(message, reason="invalid_value", details={"key": key})


def _int_in(config: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(key, f"{key} must be an integer in [{low}, {high}]")
    return value


def _parameters(url: str, queue: str = "") -> pika.URLParameters:
    """pika's connection parameters for ``url`` with our bounded timeouts (whatever the URL's query says), named
    ``adk_actors amqp <queue> pid <pid>`` in the broker's connection list."""
    params = pika.URLParameters(url)
    params.client_properties = {"connection_name": f"adk_actors amqp {queue} pid {os.getpid()}"}
    params.socket_timeout = CONNECT_TIMEOUT_S
    params.stack_timeout = 2 * CONNECT_TIMEOUT_S
    params.blocked_connection_timeout = BLOCKED_TIMEOUT_S
    params.connection_attempts = 1
    return params


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or not url or len(url) > _MAX_URL:
        raise _bad("url", "url must be an amqp:// or amqps:// URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        scheme, host = parts.scheme.lower(), parts.hostname
    except ValueError:
        raise _bad("url", "url must be an amqp:// or amqps:// URL") from None
    if scheme not in ("amqp", "amqps") or not host:
        raise _bad("url", "url must be an amqp:// or amqps:// URL with a host")
    try:
        _parameters(url)
    except Exception:  # pika's query setters raise assorted types, and their text may quote the URL
        raise _bad("url", "url has an option pika does not accept") from None
    return url


def _check_queue(queue: Any, declare: bool) -> str:
    try:
        size = len(queue.encode("utf-8")) if isinstance(queue, str) else -1
    except UnicodeEncodeError:
        size = -1
    if not 0 < size <= _MAX_QUEUE_BYTES or not queue.isprintable():
        raise _bad("queue", f"queue must be a printable name of 1 to {_MAX_QUEUE_BYTES} UTF-8 bytes")
    if declare and queue.startswith("amq."):
        raise _bad("queue", 'queue names starting with "amq." are reserved by the broker')
    return str(queue)


def amqp_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The checked configuration of an AMQP queue source.

    * ``url``: ``amqp://user:password@host:port/vhost`` or ``amqps://...`` (required; the vhost ``/`` is ``%2F`` or
      an empty path); pika's query options are accepted, but the connect and socket timeouts are always ours;
    * ``queue``: the queue name (required; printable, 1 to 255 UTF-8 bytes);
    * ``declare``: ``False`` (default) only checks that the queue exists; ``True`` declares it durable;
    * ``batch``: most messages one poll handles (1..1000, default 100);
    * ``prefetch``: most unacknowledged messages the broker sends ahead (1..1000, default ``batch``);
    * ``listen_ms``: after draining, keep consuming for up to this long without a message, so a new one is submitted
      at once instead of at the next tick (0..60000, default 0: return when drained).

    Raises:
        ConfigError: ``unknown_key`` / ``invalid_value`` naming the key.
    """
    if not isinstance(config, Mapping):
        raise _bad("config", "the AMQP source configuration must be an object")
    unknown = sorted(str(k) for k in config if k not in _CONFIG_KEYS)
    if unknown:
        raise ConfigError("unknown AMQP source option", reason="unknown_key", details={"key": unknown[0][:64]})
    url = _check_url(config.get("url"))
    declare = config.get("declare", False)
    if not isinstance(declare, bool):
        raise _bad("declare", "declare must be true or false")
    queue = _check_queue(config.get("queue"), declare)
    batch = _int_in(config, "batch", 100, 1, MAX_BATCH)
    prefetch = _int_in(config, "prefetch", batch, 1, MAX_BATCH)
    listen_ms = _int_in(config, "listen_ms", 0, 0, _MAX_LISTEN_MS)
    return {
        "url": url,
        "queue": queue,
        "declare": declare,
        "batch": batch,
        "prefetch": prefetch,
        "listen_ms": listen_ms,
    }


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``[REDACTED]`` and its query and fragment dropped (pika's options may
    name key files or their passwords): what status and docs may show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED  # not a URL at all (a source started with an unchecked config): show none of it
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        hostport = f"{user}:{REDACTED}@{hostport}" if colon else f"{user}@{hostport}"
    return f"{parts.scheme}://{hostport}{parts.path}"


def _unavailable(exc: BaseException, operation: str) -> TriggerError:
    # pika's messages may quote the host, the vhost or the broker's text: only the class and reply code leave here.
    details: dict[str, Any] = {"operation": operation, "error": type(exc).__name__}
    code = getattr(exc, "reply_code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        details["reply_code"] = code
    return TriggerError(f"AMQP {operation} failed: {type(exc).__name__}", reason="amqp_unavailable", details=details)


def _message(
    delivery_id: Any, payload: Any, metadata: Mapping[str, Any] | None, timeout_ms: int | None
) -> tuple[bytes, pika.BasicProperties]:
    """The body and properties of one delivery's message.

    Raises:
        ConfigError: ``invalid_value`` naming ``delivery_id``, ``payload``, ``metadata`` or ``timeout_ms``.
    """
    try:
        size = len(delivery_id.encode("utf-8")) if isinstance(delivery_id, str) else -1
    except UnicodeEncodeError:
        size = -1
    if not 0 < size <= _MAX_ID_BYTES:
        raise _bad("delivery_id", f"delivery_id must be a string of 1 to {_MAX_ID_BYTES} UTF-8 bytes")
    body: dict[str, Any] = {"payload": payload}
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise _bad("metadata", "metadata must be an object")
        body["metadata"] = dict(metadata)
    if timeout_ms is not None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise _bad("timeout_ms", "timeout_ms must be a positive integer")
        body["timeout_ms"] = timeout_ms
    try:
        data = json.dumps(body, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        raise _bad("payload", "payload and metadata must be JSON values") from None
    properties = pika.BasicProperties(
        message_id=delivery_id, delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json"
    )
    return data, properties


class AmqpQueue:
    """One queue on a broker, over one lazily opened connection (see the module docstring). Not thread-safe: use it
    from one thread at a time.

    Args:
        config: see :func:`amqp_config`.

    Raises:
        ConfigError: an invalid configuration.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = amqp_config(config)
        self.queue: str = self.config["queue"]
        self._totals: Counter[str] = Counter()
        self._reasons: Counter[str] = Counter()
        self._stats_lock = threading.Lock()  # a source's status reads them while its poll thread counts
        self._conn: Any = None
        self._channel: Any = None
        self._confirming = False
        """Whether the open channel is in publisher-confirm mode."""
        password = urlsplit(self.config["url"]).password
        if password:
            register_secret(unquote(password))  # scrubbed from this process's logs, should pika ever quote it

    @contextmanager
    def _broker(self, operation: str) -> Iterator[None]:
        """Any failure inside closes the connection (the broker requeues what it had not acknowledged); broker and
        network errors become ``amqp_unavailable``."""
        try:
            yield
        except (AMQPError, ChannelError, OSError) as exc:
            self.close()
            raise _unavailable(exc, operation) from None
        except BaseException:
            self.close()
            raise

    def _open_channel(self) -> Any:
        conn = self._conn
        if conn is not None and conn.is_open:
            try:
                conn.process_data_events(0)  # learn of a close the broker sent between polls (or missed heartbeats)
            except (AMQPError, ChannelError, OSError, ValueError):  # ValueError: pika's selector on a dead socket
                self.close()
        if self._conn is None or not self._conn.is_open or not self._channel.is_open:
            self.close()
            conn = pika.BlockingConnection(_parameters(self.config["url"], self.queue))
            try:
                channel = conn.channel()
                channel.basic_qos(prefetch_count=self.config["prefetch"])
                if self.config["declare"]:
                    channel.queue_declare(queue=self.queue, durable=True)
            except BaseException:
                with suppress(AMQPError, ChannelError, OSError):
                    conn.close()
                raise
            self._conn, self._channel = conn, channel
        return self._channel

    def open(self) -> AmqpQueue:
        """Connect and check that the queue exists (or declare it, with ``declare``).

        Raises:
            TriggerError: ``amqp_unavailable`` (``details["reply_code"]`` 404: no such queue).
        """
        with self._broker("open"):
            self._open_channel().queue_declare(queue=self.queue, passive=True)
        return self

    def close(self) -> None:
        """Close the connection (idempotent; the next call reconnects). Unacknowledged messages go back to the
        queue."""
        conn, self._conn, self._channel, self._confirming = self._conn, None, None, False
        if conn is not None:
            with suppress(AMQPError, ChannelError, OSError):
                conn.close()

    @property
    def connected(self) -> bool:
        return self._conn is not None and bool(self._conn.is_open)

    def counts(self) -> dict[str, int]:
        """``{"ready", "consumers"}``: messages waiting in the queue (not those delivered and unacknowledged) and
        its consumers, as the broker reports them now.

        Raises:
            TriggerError: ``amqp_unavailable``.
        """
        with self._broker("read"):
            method = self._open_channel().queue_declare(queue=self.queue, passive=True).method
        return {"ready": int(method.message_count), "consumers": int(method.consumer_count)}

    def publish(
        self,
        delivery_id: str,
        payload: Any,
        *,
        metadata: Mapping[str, Any] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Publish one delivery (a producer's send): a persistent JSON message with ``message_id = delivery_id``,
        confirmed by the broker before this returns.

        Raises:
            ConfigError: ``invalid_value`` (``delivery_id``: 1 to 255 UTF-8 bytes; ``payload``/``metadata``: not
                JSON; ``timeout_ms``: not a positive integer).
            TriggerError: ``amqp_unavailable`` (also when the queue does not exist: ``UnroutableError``).
        """
        self._send(*_message(delivery_id, payload, metadata, timeout_ms))

    def _send(self, data: bytes, properties: pika.BasicProperties) -> None:
        with self._broker("publish"):
            channel = self._open_channel()
            if not self._confirming:
                channel.confirm_delivery()
                self._confirming = True
            channel.basic_publish("", self.queue, data, properties, mandatory=True)

    def drain(
        self, submit: Callable[[dict[str, Any]], Submitted], stopping: Callable[[], bool] | None = None
    ) -> dict[str, int]:
        """One poll: consume the ready messages (at most ``batch``; then, with ``listen_ms``, new ones until that long
        passed without one), hand each to ``submit`` and settle it (see the module docstring).

        ``submit(delivery) -> Submitted`` raises ``TriggerError`` on refusal. ``stopping()`` (checked between
        messages and at least every 0.25 s while waiting) ends the poll early. Returns ``{"submitted",
        "duplicates", "rejected", "deferred"}`` for this poll (``deferred`` is 1 when it stopped on backpressure).

        Raises:
            TriggerError: ``amqp_unavailable`` (the connection is closed: the broker requeues every message this poll
                had not acknowledged).
            Exception: whatever ``submit`` raises that is not an ``AdkError``, after closing the connection.
        """
        found = dict.fromkeys(_COUNTERS, 0)
        stop = stopping or (lambda: False)
        with self._broker("consume"):
            channel = self._open_channel()
            ready = int(channel.queue_declare(queue=self.queue, passive=True).method.message_count)
            listen_s = self.config["listen_ms"] / 1000.0
            if ready == 0 and listen_s == 0:
                return found
            self._consume(channel, submit, min(ready, self.config["batch"]), listen_s, stop, found)
            channel.cancel()  # requeues the prefetched messages this poll did not take
        return found

    def _consume(
        self,
        channel: Any,
        submit: Callable[[dict[str, Any]], Submitted],
        target: int,
        listen_s: float,
        stop: Callable[[], bool],
        found: dict[str, int],
    ) -> None:
        """Take messages until the ``target`` ready ones were handled and ``listen_s`` passed without another one,
        ``batch`` were handled, the trigger pushed back, or ``stop()``."""
        handled, start = 0, time.monotonic()
        last = start
        for method, properties, body in channel.consume(self.queue, inactivity_timeout=_WAIT_SLICE_S):
            now = time.monotonic()
            if method is not None:
                if not self._settle(channel, submit, method.delivery_tag, properties, body, found):
                    return
                handled, now = handled + 1, time.monotonic()
                last = now
                if handled >= self.config["batch"]:
                    return
            if handled >= target:
                if now - last >= listen_s:
                    return
            elif now - last >= _DRAIN_IDLE_S:
                return  # fewer than reported: another consumer took them
            if stop() or now - start >= _MAX_POLL_S:
                return

    def _count(self, found: dict[str, int], kind: str, reason: str | None) -> None:
        found[kind] += 1
        with self._stats_lock:
            self._totals[kind] += 1
            if reason is not None:
                if reason not in self._reasons and len(self._reasons) >= _MAX_REASONS:
                    reason = "other"
                self._reasons[reason] += 1

    def stats(self) -> dict[str, Any]:
        """What this queue's drains did so far (live, across reconnects): ``submitted``, ``duplicates``,
        ``rejected``, ``deferred`` and ``rejected_reasons`` (by reason; at most 16, further ones count as
        ``other``)."""
        with self._stats_lock:
            return {**{k: self._totals[k] for k in _COUNTERS}, "rejected_reasons": dict(self._reasons)}

    def _settle(
        self,
        channel: Any,
        submit: Callable[[dict[str, Any]], Submitted],
        tag: int,
        properties: Any,
        body: bytes,
        found: dict[str, int],
    ) -> bool:
        """Submit one message and acknowledge, reject or requeue it; ``False`` when the poll must stop."""
        message_id = getattr(properties, "message_id", None)
        outcome: SubmitOutcome | None
        if not isinstance(message_id, str) or not message_id:
            outcome = SubmitOutcome("rejected", None, "missing_message_id")  # never submitted: no idempotency key
        else:
            outcome = submit_body(submit, message_id, body, invalid_reason="invalid_body")
        if outcome is None:
            channel.basic_nack(tag, requeue=True)
            self._count(found, "deferred", None)
            return False
        if outcome.kind == "rejected":
            channel.basic_reject(tag, requeue=False)
            self._count(found, "rejected", outcome.reason or "rejected")
        else:
            channel.basic_ack(tag)
            self._count(found, outcome.kind, None)
        return True


def publish(
    url: str,
    queue: str,
    delivery_id: str,
    payload: Any,
    *,
    metadata: Mapping[str, Any] | None = None,
    timeout_ms: int | None = None,
) -> None:
    """Publish one delivery to ``queue`` over a connection of its own (a producer's helper for tests and samples;
    keep an :class:`AmqpQueue` open to publish many).

    Raises:
        ConfigError: an invalid ``url``/``queue`` or argument (``invalid_value`` naming it).
        TriggerError: ``amqp_unavailable`` (``details["reply_code"]`` 404: no such queue).
    """
    message = _message(delivery_id, payload, metadata, timeout_ms)
    producer = AmqpQueue({"url": url, "queue": queue})
    try:
        producer.open()  # a missing queue is a 404 here, not a message the broker returns (pika logs its body)
        producer._send(*message)
    finally:
        producer.close()


class AmqpQueueSource(TriggerSource):
    """The source actor: drains its :class:`AmqpQueue` every interval (the ``TriggerSource`` timer, on an I/O
    thread) and submits each message to its trigger (see the module docstring). Its status adds ``queue``, the
    ``url`` with its password redacted, ``connected``, the messages it ``submitted``, found ``duplicates`` and
    ``rejected`` (with ``rejected_reasons``), and ``deferred`` (polls that stopped on backpressure)."""

    source_type = "amqp"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queue: AmqpQueue | None = None
        self._lock = threading.Lock()
        self._polling = False
        self._stopping = False

    def poll(self) -> None:
        with self._lock:
            if self._stopping or self._polling:
                return  # stopping, or an earlier poll outlived its timeout and still holds the connection
            self._polling = True
        try:
            if self._queue is None:
                # pika logs a failed connect as several ERROR records and a stack trace, every poll while the broker
                # is down; the poll's one warning and the status (errors, last_error) already say it.
                logging.getLogger("pika").setLevel(logging.CRITICAL)
                self._queue = AmqpQueue(self.config)
            self._queue.drain(self.submit, lambda: self._stopping)
        finally:
            with self._lock:
                self._polling = False
                close_now = self._stopping
            if close_now:
                self._close()

    def _close(self) -> None:
        if self._queue is not None:
            self._queue.close()

    def source_status(self) -> dict[str, Any]:
        queue = self._queue
        return {
            "queue": self.config.get("queue"),
            "url": redact_url(str(self.config.get("url", ""))),
            "connected": queue is not None and queue.connected,
            **(queue.stats() if queue is not None else {**dict.fromkeys(_COUNTERS, 0), "rejected_reasons": {}}),
        }

    def terminate(self, reason: str) -> None:
        with self._lock:
            self._stopping = True
            close_now = not self._polling
        if close_now:
            # A close waits for the broker's close-ok, which a hung broker sends only when heartbeats give up: not on
            # the host's thread, which serves every actor of the host. (Else the poll closes it when it returns.)
            threading.Thread(target=self._close, name="adk-amqp-close", daemon=True).start()
        super().terminate(reason)


def start_amqp_source(
    trigger: str,
    config: Mapping[str, Any],
    *,
    interval_ms: int = 1000,
    initial_delay_ms: int = 0,
    system: Any = None,
) -> SourceHandle:
    """Start an :class:`AmqpQueueSource` for ``trigger`` over the queue ``config`` (:func:`amqp_config`).

    It connects once now (declaring the queue with ``declare``, else checking that it exists), so a configuration
    error or an unreachable broker fails here, not in the actor. The first poll runs after ``initial_delay_ms``
    (default at once), each next one ``interval_ms`` after the previous one returned. Returns the source handle
    (``.status()``, ``.stop()``).

    Raises:
        ConfigError: an invalid configuration.
        TriggerError: ``amqp_unavailable`` (``details["reply_code"]`` 404: no such queue); ``invalid_trigger_name``;
            ``source_exists``.
    """
    from adk_actors.triggers.source import start_source

    queue = AmqpQueue(config).open()
    queue.close()
    return start_source(
        f"{__name__}.AmqpQueueSource",
        trigger,
        dict(queue.config),
        interval_ms=interval_ms,
        initial_delay_ms=initial_delay_ms,
        system=system,
    )
