"""The asynchronous observability bus: one bounded queue of observation envelopes per process, batched by one
background thread and fanned out to the configured exporters.

The Runner builds *observation envelopes* (plain JSON-able mappings) and hands each to :func:`submit`, which never
raises and never waits on I/O: it encodes the envelope once (compact JSON) to measure it and queues the text. The
bus's dispatcher thread takes up to ``batch_size`` envelopes at a time and gives each batch to every exporter
(fan-out). An *exporter* is a user class built from its descriptor's ``config``::

    class MyExporter:
        def __init__(self, config: Mapping[str, Any]) -> None: ...
        def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None: ...
        def shutdown(self) -> None: ...  # optional, called once when its bus is closed

``export`` returning normally means delivered; raising :class:`TransientExportError` asks for a retry (bounded by
``max_attempts``, after ``retry_delay_ms * attempt``); any other exception is a permanent failure and the batch is
dropped. Each exporter's calls run one at a time in a worker thread of its own, so a slow or stuck exporter
delays only itself: the dispatcher stops waiting for a call after the exporter's ``timeout_ms`` (a thread cannot
be killed; the call is abandoned and its batch counted ``timeout``). The dispatcher takes a batch from the queue
only when every exporter that keeps up has room for it (fewer than ``max_inflight_batches`` outstanding); an
exporter stuck in an abandoned call or waiting to retry does not hold the queue: its batches beyond that window
are dropped. When the queue cannot drain it fills, and :func:`submit` drops per ``drop_policy``.

Delivery is bounded best effort, not a durable queue: a retry may deliver a batch twice, and every envelope the bus
gives up on is counted by reason (:func:`bus_stats`, :func:`take_bus_dropped`). Counts after the fan-out are per
exporter: an envelope delivered to two exporters counts twice in ``delivered``.

Like span export (:mod:`~adk_actors.observability.setup`) the bus is per process: :func:`configure_bus` sets it up
explicitly, or a process configures itself on its first :func:`submit` from the inherited :data:`BUS_ENV`
variable (:func:`bus_environment` builds it). A forked child starts with no bus (its parent's threads do not
exist there) and reads the environment again. At interpreter exit the bus gets :data:`EXIT_FLUSH_S` to deliver.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from adk_actors.errors import ConfigError, ValidationError
from adk_actors.logs import get_logger
from adk_actors.plugins.descriptors import importable_name, is_bounded_name

__all__ = [
    "BUS_ENV",
    "DROP_POLICIES",
    "DROP_REASONS",
    "EXIT_FLUSH_S",
    "EXPORTER_KEYS",
    "MAX_EXPORTERS",
    "REPLACE_FLUSH_S",
    "Exporter",
    "TransientExportError",
    "bus_configured",
    "bus_environment",
    "bus_stats",
    "configure_bus",
    "configure_bus_from_environment",
    "flush",
    "shutdown_bus",
    "submit",
    "take_bus_dropped",
]

BUS_ENV = "ADKACTORS_OBS_BUS"
"""The environment variable carrying :func:`configure_bus`'s arguments (JSON, exporters as importable names) to a
process; absent or empty means no bus."""
EXIT_FLUSH_S = 1.0
"""At interpreter exit, queued envelopes get this long to be delivered before they are dropped (``shutdown``)."""
REPLACE_FLUSH_S = 5.0
"""When :func:`configure_bus` replaces a bus, the old one gets this long to deliver what it holds."""
MAX_EXPORTERS = 16
"""Most exporters one bus fans out to."""
MAX_ID_BYTES = 256
"""Longest exporter id, UTF-8 bytes."""
MAX_CONFIG_BYTES = 1024 * 1024
"""Largest exporter configuration, canonical JSON UTF-8 bytes."""
EXPORTER_KEYS = frozenset({"id", "exporter", "timeout_ms", "config"})
"""The keys an exporter descriptor may have (``id`` and ``exporter`` are required)."""
DROP_POLICIES = ("reject", "drop_oldest")
"""When the queue is full: ``reject`` drops the new envelope, ``drop_oldest`` the oldest queued ones."""
DROP_REASONS = (
    "queue_full",
    "event_too_large",
    "invalid",
    "export_failed",
    "retries_exhausted",
    "timeout",
    "shutdown",
    "no_bus",
)
"""Why envelopes are dropped: the queue (or an exporter's in-flight window) was full, the envelope's JSON was over
``max_event_bytes``, it was not a JSON-able mapping, an exporter failed permanently, transient failures used up
``max_attempts``, an export call overran its ``timeout_ms``, the bus was shut down with it, or there was no bus."""

_DEFAULT_TIMEOUT_MS = 5000
# (default, low, high) of configure_bus's integer options: the reference's bounds.
_INT_OPTIONS: dict[str, tuple[int, int, int]] = {
    "max_queue_events": (4096, 1, 65_536),
    "max_queue_bytes": (16 * 1024 * 1024, 1, 256 * 1024 * 1024),
    "max_event_bytes": (262_144, 1, 1024 * 1024),
    "batch_size": (32, 1, 1024),
    "max_inflight_batches": (2, 1, 16),
    "max_attempts": (3, 1, 10),
    "retry_delay_ms": (200, 0, 60_000),
}
_LOGGER = "adk_actors.observability"
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
"""An unknown descriptor key that looks like this is named in the error; any other is reported as ``exporters``."""


class TransientExportError(Exception):
    """Raised by an exporter's ``export`` for a failure worth retrying (a collector that is briefly down,
    overloaded or timed out); the bus retries the batch later, at most ``max_attempts`` times in all."""


class Exporter(Protocol):
    """What the bus calls: a class built with its descriptor's ``config``. ``shutdown()`` is optional."""

    def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None: ...


@dataclass(frozen=True, slots=True)
class _ExporterSpec:
    """One validated exporter descriptor (the class resolved, the config as canonical JSON)."""

    id: str
    cls: type
    name: str | None
    """The importable name it was given by, or ``None`` when it was given as a class."""
    timeout_ms: int
    config: str
    """Canonical JSON of the configuration; each built exporter gets its own decoded copy."""

    def same_as(self, other: _ExporterSpec) -> bool:
        return (self.id, self.cls, self.timeout_ms, self.config) == (
            other.id,
            other.cls,
            other.timeout_ms,
            other.config,
        )


@dataclass(frozen=True, slots=True)
class _Options:
    """Validated :func:`configure_bus` arguments."""

    exporters: tuple[_ExporterSpec, ...]
    max_queue_events: int
    max_queue_bytes: int
    max_event_bytes: int
    batch_size: int
    max_inflight_batches: int
    max_attempts: int
    drop_policy: str
    retry_delay_ms: int

    def same_as(self, other: _Options) -> bool:
        mine = {k: getattr(self, k) for k in _INT_OPTIONS} | {"drop_policy": self.drop_policy}
        theirs = {k: getattr(other, k) for k in _INT_OPTIONS} | {"drop_policy": other.drop_policy}
        return (
            mine == theirs
            and len(self.exporters) == len(other.exporters)
            and all(a.same_as(b) for a, b in zip(self.exporters, other.exporters))
        )


# --- validation --------------------------------------------------------------------------------------------------


def _bad(key: str, why: str, reason: str = "invalid_value", **details: Any) -> ConfigError:
    return ConfigError(f"observability bus {key}: {why}", reason=reason, details={"key": key, **details})


def _check_int(key: str, value: Any, low: int, high: int, **details: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(key, f"expected an integer from {low} to {high}", **details)
    return value


def _check_id(value: Any, index: int) -> str:
    if not is_bounded_name(value, MAX_ID_BYTES):
        raise _bad("id", f"expected a non-empty name of at most {MAX_ID_BYTES} UTF-8 bytes", index=index)
    return str(value)


def _resolve(exporter: Any, exporter_id: str, index: int) -> tuple[type, str | None]:
    """The exporter class, from a class or an importable ``"pkg.mod:Class"`` / ``"pkg.mod.Class"`` name."""
    name: str | None = None
    if isinstance(exporter, str):
        # Imported here: the plugin package is heavier than this module and only configuration needs it.
        from adk_actors.plugins.hooks import load_plugin

        name = exporter
        target = exporter if ":" in exporter else ":".join(exporter.rsplit(".", 1))
        if not exporter or ":" not in target or target.startswith(":") or target.endswith(":"):
            raise _bad("exporter", "expected pkg.mod:Class", "plugin_not_importable", exporter=exporter_id, index=index)
        try:
            exporter = load_plugin(target)
        except ConfigError:
            raise _bad(
                "exporter",
                "the exporter cannot be imported",
                "plugin_not_importable",
                exporter=exporter_id,
                index=index,
            ) from None
    if not isinstance(exporter, type) or not callable(getattr(exporter, "export", None)):
        raise _bad("exporter", "expected a class with an export method", exporter=exporter_id, index=index)
    return exporter, name


def _check_config(value: Any, exporter_id: str, index: int) -> str:
    # Imported here for the same reason as load_plugin above.
    from adk_actors.content.canonical import canonical_dumps
    from adk_actors.content.json_values import copy_json

    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise _bad("config", "expected a JSON object", exporter=exporter_id, index=index)
    try:
        copied, _ = copy_json(dict(value), field="config", max_bytes=MAX_CONFIG_BYTES)
    except ValidationError:
        raise _bad("config", "expected a JSON object of at most 1 MiB", exporter=exporter_id, index=index) from None
    return canonical_dumps(copied)


def _check_exporter(entry: Any, index: int) -> _ExporterSpec:
    if not isinstance(entry, Mapping):
        raise _bad("exporters", "each exporter is a descriptor mapping", index=index)
    for key in entry:
        if key not in EXPORTER_KEYS:
            named = isinstance(key, str) and _KEY_NAME.fullmatch(key) is not None
            raise _bad(
                key if named else "exporters",
                "unknown exporter descriptor key",
                "unknown_key",
                index=index,
            )
    exporter_id = _check_id(entry.get("id"), index)
    if "exporter" not in entry:
        raise _bad("exporter", "an exporter descriptor names its exporter", exporter=exporter_id, index=index)
    cls, name = _resolve(entry["exporter"], exporter_id, index)
    timeout_ms = _check_int(
        "timeout_ms", entry.get("timeout_ms", _DEFAULT_TIMEOUT_MS), 1, 120_000, exporter=exporter_id, index=index
    )
    config = _check_config(entry.get("config"), exporter_id, index)
    return _ExporterSpec(id=exporter_id, cls=cls, name=name, timeout_ms=timeout_ms, config=config)


def _validate(exporters: Any, options: Mapping[str, Any]) -> _Options:
    if exporters is None:
        exporters = []
    if isinstance(exporters, str | bytes | Mapping) or not isinstance(exporters, Sequence):
        raise _bad("exporters", "expected a list of exporter descriptors")
    if len(exporters) > MAX_EXPORTERS:
        raise _bad("exporters", f"at most {MAX_EXPORTERS} exporters", max=MAX_EXPORTERS)
    specs: list[_ExporterSpec] = []
    for index, entry in enumerate(exporters):
        spec = _check_exporter(entry, index)
        if any(s.id == spec.id for s in specs):
            raise _bad("id", "exporter ids must be unique", "duplicate_id", exporter=spec.id, index=index)
        specs.append(spec)
    values = {key: _check_int(key, options[key], low, high) for key, (_, low, high) in _INT_OPTIONS.items()}
    if values["max_event_bytes"] > values["max_queue_bytes"]:
        raise _bad("max_event_bytes", "must not exceed max_queue_bytes")
    policy = options["drop_policy"]
    if not isinstance(policy, str) or policy not in DROP_POLICIES:
        raise _bad("drop_policy", "expected reject or drop_oldest")
    return _Options(exporters=tuple(specs), drop_policy=policy, **values)


# --- counters ----------------------------------------------------------------------------------------------------


class _Counters:
    """Process-wide bus counters (every bus this process had adds to them); always the innermost lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered = 0
        self.batches = 0
        self.retries = 0
        self.dropped: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        self.reported: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)

    def drop(self, reason: str, count: int = 1) -> None:
        with self.lock:
            self.dropped[reason] += count


COUNTERS = _Counters()


# --- the bus -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Batch:
    """One batch as one exporter sees it: the encoded envelopes and that exporter's attempts."""

    items: tuple[str, ...]
    attempts: int = 0
    not_before: float = 0.0
    """Monotonic time before which a retry does not start."""


@dataclass(eq=False, slots=True)
class _Lane:
    """One exporter: its built object, its outstanding batches (the head is the one being exported or retried)
    and the worker thread that makes its calls one at a time. Guarded by the bus's lock."""

    spec: _ExporterSpec
    exporter: Any
    backlog: deque[_Batch] = field(default_factory=deque)
    busy: bool = False
    """A call is running in the worker thread."""
    abandoned: bool = False
    """The running call overran its timeout (or the bus shut down): its batch is already counted."""
    deadline: float = 0.0
    delivered: int = 0
    failures: int = 0
    """Batches this exporter did not deliver, whatever the reason."""
    warned: bool = False
    jobs: queue.SimpleQueue[tuple[str, ...] | None] = field(default_factory=queue.SimpleQueue)
    thread: threading.Thread | None = None


def _export(exporter: Any, items: tuple[str, ...]) -> tuple[str, str | None]:
    """One export call: ``("delivered" | "transient" | "permanent", exception type name or None)``."""
    try:
        exporter.export(json.loads("[" + ",".join(items) + "]"))
    except TransientExportError:
        return "transient", None
    except BaseException as exc:  # the worker thread must survive anything an exporter raises
        return "permanent", type(exc).__name__
    return "delivered", None


class _Bus:
    """One configured bus: the queue, the dispatcher thread and one lane per exporter."""

    def __init__(self, options: _Options, exporters: Sequence[Any]) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        """The dispatcher waits here for envelopes, finished calls, timeouts and retries."""
        self._idle = threading.Condition(self._lock)
        """Flushers wait here for the queue and every backlog to empty."""
        self._queue: deque[tuple[str, int]] = deque()
        self._queued_bytes = 0
        self._closing = False
        self._stopped = False
        self.lanes = tuple(_Lane(spec, obj) for spec, obj in zip(options.exporters, exporters))
        for index, lane in enumerate(self.lanes):
            lane.thread = threading.Thread(
                target=self._serve, args=(lane,), name=f"adk-obs-bus-export-{index}", daemon=True
            )
            lane.thread.start()
        self._thread = threading.Thread(target=self._dispatch, name="adk-obs-bus", daemon=True)
        self._thread.start()

    # callers' side

    def put(self, encoded: str) -> bool:
        size = len(encoded)  # ASCII-only JSON: characters are bytes
        options = self.options
        if size > options.max_event_bytes:
            COUNTERS.drop("event_too_large")
            return False
        with self._lock:
            if self._closing:
                COUNTERS.drop("shutdown")
                return False
            q = self._queue
            if len(q) >= options.max_queue_events or self._queued_bytes + size > options.max_queue_bytes:
                if options.drop_policy == "reject":
                    COUNTERS.drop("queue_full")
                    return False
                while q and (len(q) >= options.max_queue_events or self._queued_bytes + size > options.max_queue_bytes):
                    self._queued_bytes -= q.popleft()[1]
                    COUNTERS.drop("queue_full")
            q.append((encoded, size))
            self._queued_bytes += size
            self._work.notify()
        return True

    def _is_idle(self) -> bool:
        return not self._queue and not any(lane.backlog for lane in self.lanes)

    def flush(self, timeout_s: float) -> bool:
        with self._lock:
            return self._idle.wait_for(self._is_idle, max(0.0, timeout_s))

    def queued(self) -> tuple[int, int]:
        with self._lock:
            return len(self._queue), self._queued_bytes

    def exporter_stats(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {lane.spec.id: {"delivered": lane.delivered, "failures": lane.failures} for lane in self.lanes}

    def close(self, timeout_s: float) -> None:
        """Stop taking envelopes, give the rest up to ``timeout_s`` to be delivered, count what is left as
        ``shutdown``, stop the threads (a worker stuck in an exporter ends when its call returns)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._lock:
            self._closing = True
            self._idle.wait_for(self._is_idle, max(0.0, timeout_s))
            left = len(self._queue) + sum(len(b.items) for lane in self.lanes for b in lane.backlog)
            self._queue.clear()
            self._queued_bytes = 0
            for lane in self.lanes:
                if lane.busy:
                    lane.abandoned = True
                lane.backlog.clear()
            self._stopped = True
            self._work.notify()
            self._idle.notify_all()
            if left:
                COUNTERS.drop("shutdown", left)
        self._thread.join(max(0.1, deadline - time.monotonic()))
        for lane in self.lanes:
            lane.jobs.put(None)
        for lane in self.lanes:
            assert lane.thread is not None
            lane.thread.join(max(0.0, deadline - time.monotonic()))

    # the dispatcher thread

    def _dispatch(self) -> None:
        with self._lock:
            while not self._stopped:
                wake = self._step(time.monotonic())
                if self._is_idle():
                    self._idle.notify_all()
                self._work.wait(wake)

    def _can_take(self, limit: int) -> bool:
        """Whether to take the next batch: some exporter has room, and so has every exporter that is keeping up.

        An exporter keeps up unless it is stuck in an abandoned call or waiting to retry: the queue waits for the
        others (a burst is not dropped because one of them is a call behind), never for those two.
        """
        room = False
        for lane in self.lanes:
            if len(lane.backlog) < limit:
                room = True
            elif not (lane.abandoned or (not lane.busy and lane.backlog[0].attempts > 0)):
                return False
        return room

    def _step(self, now: float) -> float | None:
        """Expire overrun calls, batch the queue out to lanes with room, start due calls; returns how long to sleep
        (``None``: until notified)."""
        options = self.options
        for lane in self.lanes:
            if lane.busy and not lane.abandoned and now >= lane.deadline:
                lane.abandoned = True
                lane.failures += 1
                COUNTERS.drop("timeout", len(lane.backlog.popleft().items))
        limit = options.max_inflight_batches
        while self._queue and self._can_take(limit):
            taken = [self._queue.popleft() for _ in range(min(options.batch_size, len(self._queue)))]
            self._queued_bytes -= sum(size for _, size in taken)
            items = tuple(encoded for encoded, _ in taken)
            with COUNTERS.lock:
                COUNTERS.batches += 1
            for lane in self.lanes:
                if len(lane.backlog) < limit:
                    lane.backlog.append(_Batch(items))
                else:  # this exporter is stuck or retrying and its window is full
                    lane.failures += 1
                    COUNTERS.drop("queue_full", len(items))
        wake: float | None = None
        for lane in self.lanes:
            if lane.busy:
                if not lane.abandoned:
                    wake = _sooner(wake, lane.deadline - now)
                continue
            if not lane.backlog:
                continue
            head = lane.backlog[0]
            if head.not_before > now:
                wake = _sooner(wake, head.not_before - now)
                continue
            head.attempts += 1
            lane.busy = True
            lane.deadline = now + lane.spec.timeout_ms / 1000
            lane.jobs.put(head.items)
            wake = _sooner(wake, lane.spec.timeout_ms / 1000)
        return wake

    # the exporters' worker threads

    def _serve(self, lane: _Lane) -> None:
        while True:
            items = lane.jobs.get()
            if items is None:
                break
            outcome, error_type = _export(lane.exporter, items)
            if self._finished(lane, outcome) and error_type is not None:
                get_logger(_LOGGER).warning(
                    "observability exporter failed permanently; its batches are dropped",
                    exporter=lane.spec.id,
                    error_type=error_type,
                )
        stop = getattr(lane.exporter, "shutdown", None)
        if callable(stop):
            try:
                stop()
            except Exception:  # the bus is closing; an exporter's failure to clean up changes nothing here
                pass

    def _finished(self, lane: _Lane, outcome: str) -> bool:
        """Record a call's outcome; returns whether it is the exporter's first permanent failure."""
        first_failure = False
        with self._lock:
            lane.busy = False
            if lane.abandoned:
                lane.abandoned = False
            elif lane.backlog:
                head = lane.backlog[0]
                count = len(head.items)
                if outcome == "delivered":
                    lane.backlog.popleft()
                    lane.delivered += count
                    with COUNTERS.lock:
                        COUNTERS.delivered += count
                elif outcome == "transient" and head.attempts < self.options.max_attempts:
                    head.not_before = time.monotonic() + self.options.retry_delay_ms * head.attempts / 1000
                    with COUNTERS.lock:
                        COUNTERS.retries += 1
                else:
                    lane.backlog.popleft()
                    lane.failures += 1
                    COUNTERS.drop("retries_exhausted" if outcome == "transient" else "export_failed", count)
                    if outcome == "permanent" and not lane.warned:
                        lane.warned = first_failure = True
            self._work.notify()
            self._idle.notify_all()
        return first_failure


def _sooner(current: float | None, candidate: float) -> float:
    return max(0.0, candidate) if current is None else min(current, max(0.0, candidate))


# --- the process's bus -------------------------------------------------------------------------------------------

_state_lock = threading.RLock()
_bus: _Bus | None = None
_environment_read = False
_exit_hook = False


def configure_bus(
    *,
    exporters: Sequence[Mapping[str, Any]] | None,
    max_queue_events: int = 4096,
    max_queue_bytes: int = 16 * 1024 * 1024,
    max_event_bytes: int = 262_144,
    batch_size: int = 32,
    max_inflight_batches: int = 2,
    max_attempts: int = 3,
    drop_policy: str = "reject",
    retry_delay_ms: int = 200,
) -> bool:
    """Set up (or turn off, ``exporters=None`` or ``[]``) this process's bus; returns whether a bus is on.

    Args:
        exporters: Exporter descriptors ``{"id", "exporter", "timeout_ms", "config"}`` (at most
            :data:`MAX_EXPORTERS`): ``id`` 1..256 UTF-8 bytes, unique; ``exporter`` a class or an importable name
            (``"pkg.mod:Class"`` or ``"pkg.mod.Class"``); ``timeout_ms`` 1..120000 (default 5000) per export call;
            ``config`` a JSON object of at most 1 MiB, passed to the class's constructor.
        max_queue_events: Most envelopes queued (1..65536).
        max_queue_bytes: Most encoded bytes queued (1..256 MiB, at least ``max_event_bytes``).
        max_event_bytes: Largest encoded envelope (1..1 MiB).
        batch_size: Most envelopes per export call (1..1024).
        max_inflight_batches: Most batches outstanding per exporter (1..16); beyond that its batches are dropped.
        max_attempts: Export attempts per batch and exporter, retries included (1..10).
        drop_policy: ``"reject"`` or ``"drop_oldest"`` (see :data:`DROP_POLICIES`).
        retry_delay_ms: A retry waits ``retry_delay_ms * attempt`` (0..60000).

    The same arguments again change nothing (the exporters are not rebuilt). Different ones replace the bus: the
    old one gets :data:`REPLACE_FLUSH_S` to deliver what it holds. An explicit call wins over :data:`BUS_ENV`.

    Raises:
        ConfigError: ``invalid_value``, ``unknown_key``, ``duplicate_id`` or ``plugin_not_importable``, with
            ``details["key"]`` naming the argument or descriptor key (and ``index``/``exporter`` for a descriptor);
            never an import error or a configuration value. Nothing changes when it is raised.
    """
    global _bus, _environment_read, _exit_hook
    options = _validate(
        exporters,
        {
            "max_queue_events": max_queue_events,
            "max_queue_bytes": max_queue_bytes,
            "max_event_bytes": max_event_bytes,
            "batch_size": batch_size,
            "max_inflight_batches": max_inflight_batches,
            "max_attempts": max_attempts,
            "drop_policy": drop_policy,
            "retry_delay_ms": retry_delay_ms,
        },
    )
    if not options.exporters:
        shutdown_bus(REPLACE_FLUSH_S)
        return False
    with _state_lock:
        _environment_read = True
        old = _bus
        if old is not None and old.options.same_as(options):
            return True
        _bus = _Bus(options, _build_all(options.exporters))
        if not _exit_hook:
            atexit.register(_at_exit)
            _exit_hook = True
    if old is not None:
        old.close(REPLACE_FLUSH_S)
    return True


def _build_all(specs: Sequence[_ExporterSpec]) -> list[Any]:
    """Build each exporter with its own copy of its config; if one fails, the ones built are shut down again."""
    built: list[Any] = []
    for index, spec in enumerate(specs):
        try:
            built.append(spec.cls(json.loads(spec.config)))
            continue
        except ConfigError as err:
            error = ConfigError(
                err.message, reason=err.reason, details={**err.details, "key": "config", "exporter": spec.id}
            )
        except Exception:
            error = _bad("exporter", "the exporter could not be built", exporter=spec.id, index=index)
        for obj in built:
            stop = getattr(obj, "shutdown", None)
            if callable(stop):
                try:
                    stop()
                except Exception:  # the configuration is refused anyway; the first error is the one to report
                    pass
        raise error
    return built


def _descriptor_json(spec: _ExporterSpec, index: int) -> dict[str, Any]:
    name = spec.name
    if name is None:
        name = importable_name(spec.cls)
        if name is None:
            raise _bad(
                "exporter",
                "another process cannot import this class",
                "plugin_not_importable",
                exporter=spec.id,
                index=index,
            )
    return {"id": spec.id, "exporter": name, "timeout_ms": spec.timeout_ms, "config": json.loads(spec.config)}


def bus_environment(options: Mapping[str, Any]) -> dict[str, str]:
    """``{BUS_ENV: ...}``: the environment entry that gives every process started with it the bus that
    ``configure_bus(**options)`` would (an empty value means no bus, also when the starter's own environment had
    one). Exporter classes become their importable names.

    Raises:
        ConfigError: as :func:`configure_bus`; ``plugin_not_importable`` for a class another process cannot import
            (defined in ``__main__`` or in a function).
    """
    if not isinstance(options, Mapping):
        raise _bad(BUS_ENV, "expected a mapping of configure_bus arguments")
    unknown = [k for k in options if k != "exporters" and k not in _INT_OPTIONS and k != "drop_policy"]
    if unknown:
        raise _bad(BUS_ENV, "unknown configure_bus argument", "unknown_key")
    defaults: dict[str, Any] = {key: default for key, (default, _, _) in _INT_OPTIONS.items()}
    values = {**defaults, "drop_policy": "reject", **options}
    validated = _validate(values.pop("exporters", None), values)
    if not validated.exporters:
        return {BUS_ENV: ""}
    values["exporters"] = [_descriptor_json(spec, i) for i, spec in enumerate(validated.exporters)]
    return {BUS_ENV: json.dumps(values, sort_keys=True, separators=(",", ":"))}


def configure_bus_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """:func:`configure_bus` from :data:`BUS_ENV` (absent or empty: nothing changes); returns whether a bus is on.

    Raises:
        ConfigError: the variable is not a JSON object of :func:`configure_bus`'s arguments, or they are invalid.
    """
    raw = (os.environ if environ is None else environ).get(BUS_ENV, "")
    if not raw:
        return False
    try:
        values = json.loads(raw)
    except ValueError:
        raise _bad(BUS_ENV, "not JSON") from None
    if not isinstance(values, dict):
        raise _bad(BUS_ENV, "not a JSON object")
    try:
        return configure_bus(**values)
    except TypeError:
        raise _bad(BUS_ENV, "unknown configure_bus argument", "unknown_key") from None


def _current() -> _Bus | None:
    """This process's bus, configured from the inherited environment on first use."""
    global _environment_read
    if _bus is not None or _environment_read:
        return _bus
    with _state_lock:
        if _environment_read:
            return _bus
        _environment_read = True
        try:
            configure_bus_from_environment()
        except Exception as exc:  # a bad inherited configuration means no bus; it must not fail the caller
            get_logger(_LOGGER).warning(
                "observability bus environment ignored",
                variable=BUS_ENV,
                reason=getattr(exc, "reason", type(exc).__name__),
            )
        return _bus


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(type(value).__name__)


def submit(envelope: Mapping[str, Any]) -> bool:
    """Queue one observation envelope for export; returns whether it was accepted.

    Never raises and never waits on I/O: an envelope that is not a JSON-able mapping (``invalid``), whose compact
    JSON is over ``max_event_bytes`` (``event_too_large``), that finds the queue full (``queue_full``; with
    ``drop_policy="drop_oldest"`` the oldest queued envelopes are dropped instead and it is accepted) or that finds
    no bus (``no_bus``) is dropped and counted. The envelope is copied (as JSON) here: later changes to it do not
    reach the exporters.
    """
    bus = _bus if _bus is not None else _current()
    if bus is None:
        COUNTERS.drop("no_bus")
        return False
    try:
        if not isinstance(envelope, Mapping):
            raise TypeError(type(envelope).__name__)
        encoded = json.dumps(envelope, separators=(",", ":"), allow_nan=False, default=_json_default)
    except Exception:  # not JSON-able (or too deep): never the caller's failure
        COUNTERS.drop("invalid")
        return False
    return bus.put(encoded)


def bus_configured() -> bool:
    """Whether this process has a bus now (the environment is not read here)."""
    return _bus is not None


def flush(timeout_s: float = 5.0) -> bool:
    """Wait (blocking the caller, at most ``timeout_s``) until everything queued has been delivered or dropped;
    returns whether it has. ``False`` when there is no bus. A call abandoned after its timeout does not hold it."""
    bus = _bus
    return bus.flush(timeout_s) if bus is not None else False


def shutdown_bus(timeout_s: float = 5.0) -> None:
    """Turn the bus off in this process: what is queued gets ``timeout_s`` to be delivered, the rest is dropped
    (``shutdown``), the threads stop and each exporter's ``shutdown()`` is called in its worker thread. The
    inherited environment is not read again afterwards."""
    global _bus, _environment_read
    with _state_lock:
        bus, _bus = _bus, None
        _environment_read = True
    if bus is not None:
        bus.close(timeout_s)


def bus_stats() -> dict[str, Any]:
    """This process's bus counters: ``configured``, ``queued`` and ``queued_bytes`` (in the queue now),
    ``delivered`` (envelope deliveries, per exporter), ``batches`` (taken from the queue), ``retries``,
    ``dropped`` (total) with ``dropped_by_reason`` (:data:`DROP_REASONS`), and ``exporters``: per id of the
    current bus, ``delivered`` envelopes and ``failures`` (batches not delivered)."""
    bus = _bus
    queued, queued_bytes = bus.queued() if bus is not None else (0, 0)
    exporters = bus.exporter_stats() if bus is not None else {}
    with COUNTERS.lock:
        return {
            "configured": bus is not None,
            "queued": queued,
            "queued_bytes": queued_bytes,
            "delivered": COUNTERS.delivered,
            "batches": COUNTERS.batches,
            "retries": COUNTERS.retries,
            "dropped": sum(COUNTERS.dropped.values()),
            "dropped_by_reason": dict(COUNTERS.dropped),
            "exporters": exporters,
        }


def take_bus_dropped() -> dict[str, int]:
    """Drops per reason since the previous call (reasons with none left out), as
    :func:`~adk_actors.observability.spans.take_dropped` does for spans."""
    with COUNTERS.lock:
        out = {r: n - COUNTERS.reported[r] for r, n in COUNTERS.dropped.items() if n > COUNTERS.reported[r]}
        COUNTERS.reported = dict(COUNTERS.dropped)
    return out


def _at_exit() -> None:
    try:
        shutdown_bus(EXIT_FLUSH_S)
    except Exception:  # the interpreter is going away; nothing useful can be done with the error
        pass


def _after_fork_in_child() -> None:
    # The parent's bus (its threads, its queue) does not exist in a forked child: start from nothing, with fresh
    # locks (another thread may have held the old ones at the fork), and read the inherited environment again.
    global _bus, _environment_read, _state_lock, COUNTERS
    _bus = None
    _environment_read = False
    _state_lock = threading.RLock()
    COUNTERS = _Counters()


os.register_at_fork(after_in_child=_after_fork_in_child)
