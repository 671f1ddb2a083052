"""The behaviour of trigger sources: a supervised tier-2 actor with one fixed-delay timer.

A source subclasses :class:`TriggerSource` and implements ``poll(self)``: fetch what the broker has and call
``self.submit(delivery)`` for each item, acknowledging an item only after ``submit`` returned (it raises
``TriggerError`` on refusal — ``trigger_queue_full`` is backpressure: leave the item for the next poll). Use the
provider's delivery id as the idempotency key, so a redelivery is a duplicate, not a second invocation.

``poll`` may block (it talks to a broker): it runs on the host's I/O threads, never in the actor's handler, and
``submit`` is an ordinary facade call from there. The next poll is armed when the previous one returned (fixed
delay, not fixed rate), so polls of one source never overlap. A ``poll`` that raises counts as an error and the
source goes on; the actor is ``permanent`` in its host (restarted after its host dies).

Queue-like sources share :func:`submit_body`: decode one message's JSON body, submit it under the provider's
delivery id and classify the answer (acknowledge, set aside, or leave for a later poll).

Accepts: calls ``SourceStatus``, ``GetStatus``, ``Ping``. Emits: ``SubmitEvent`` asks to its trigger (from the
I/O thread, through the facade).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from adk_actors.content.validation import check_timeout
from adk_actors.errors import AdkError, ConfigError, TriggerError
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.server import CallCtx, GenServer
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.triggers.messages import Submitted
from adk_actors.triggers.options import check_trigger_name

__all__ = [
    "RETRY_LATER",
    "SourceArgs",
    "SourceHandle",
    "SourceStatus",
    "SubmitOutcome",
    "TriggerSource",
    "start_source",
    "submit_body",
]

MAX_INTERVAL_MS = 365 * 24 * 3600 * 1000
POLL_TIMEOUT_S = 300.0
"""Longest one ``poll`` may take before its I/O call is cancelled and counted as an error."""
RETRY_LATER = frozenset({"trigger_queue_full", "trigger_stopping", "unknown_trigger"})
"""Refusals that leave a message with its broker for a later poll: backpressure, and a trigger that is not
registered (yet, or again after its host restarts). Any other failure to get an answer (a timeout) does the same."""
_BODY_KEYS = ("payload", "metadata", "timeout_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceArgs:
    trigger: str
    config: dict[str, Any] = field(default_factory=dict)
    interval_ms: int = 1000
    initial_delay_ms: int = 0
    source_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceStatus:
    """Answered with the source's status dict."""


@dataclass(frozen=True, slots=True)
class _Poll:
    pass


def _poll_on_thread(_token: Any, source: TriggerSource) -> None:
    source.poll()


class TriggerSource(GenServer):
    """Base class of trigger sources; see the module docstring. Subclasses implement :meth:`poll`."""

    source_type = "source"
    """The ``type`` its status reports."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trigger = ""
        self.config: dict[str, Any] = {}
        self.interval_s = 1.0
        self.source_id = ""
        self.polls = 0
        self.errors = 0
        self.last_error: str | None = None
        self._handle: ActorSystemHandle | None = None

    def init(self, args: Any) -> Any:
        if not isinstance(args, SourceArgs):
            raise ConfigError("a trigger source needs SourceArgs", reason="invalid_source_args")
        self.trigger, self.config = args.trigger, dict(args.config)
        self.interval_s, self.source_id = args.interval_ms / 1000.0, args.source_id
        self.start_timer(args.initial_delay_ms / 1000.0, _Poll())
        return None

    # ---- the behaviour ------------------------------------------------------------------------------------
    def poll(self) -> None:
        """Fetch and submit; called on an I/O thread once per interval (override)."""
        raise NotImplementedError

    def source_status(self) -> dict[str, Any]:
        """Extra JSON-safe fields of this source's status (override)."""
        return {}

    def submit(self, delivery: Mapping[str, Any]) -> Submitted:
        """Submit one delivery to this source's trigger (from ``poll``).

        Raises:
            TriggerError: the trigger refused it (``trigger_queue_full``, ``invalid_delivery``, ...): do not ack.
        """
        from adk_actors.triggers.api import submit

        if self._handle is None:
            self._handle = current_system()
        return submit(self.trigger, delivery, system=self._handle)

    # ---- the loop -----------------------------------------------------------------------------------------
    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Poll):
            self.io_call(_poll_on_thread, (self,), time.monotonic() + POLL_TIMEOUT_S, self._polled)
            return
        super().handle_timer(message)

    def _polled(self, _value: Any, error: AdkError | None) -> None:
        self.polls += 1
        if error is not None:
            self.errors += 1
            self.last_error = error.reason
            self.log.warning("trigger source poll failed", source=self.source_id, reason=error.reason)
        self.start_timer(self.interval_s, _Poll())

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, SourceStatus):
            return self._status()
        return super().handle_call(request, ctx)

    def _status(self) -> dict[str, Any]:
        return {
            "type": self.source_type,
            "source_id": self.source_id,
            "trigger": self.trigger,
            "interval_ms": int(self.interval_s * 1000),
            "polls": self.polls,
            "errors": self.errors,
            "last_error": self.last_error,
            **self.source_status(),
        }

    def status(self) -> dict[str, Any]:
        return {"kind": "trigger_source", "source_id": self.source_id, "trigger": self.trigger}


@dataclass(frozen=True, slots=True)
class SourceHandle:
    """A started source: ``status()`` and ``stop()``."""

    source_id: str
    hosts: int
    system: Any = field(default=None, compare=False)

    @property
    def ref(self) -> LocalRef:
        return LocalRef(place(self.source_id, self.hosts), self.source_id)

    def _system(self) -> ActorSystemHandle:
        return self.system if self.system is not None else current_system()

    def status(self, timeout: float | None = None) -> dict[str, Any]:
        """The source's status (``type``, ``trigger``, ``interval_ms``, counters ...).

        Raises:
            TriggerError: ``unknown_source`` (stopped).
        """
        check_timeout(timeout)
        try:
            return dict(self._system().ask(self.ref, SourceStatus(), timeout))
        except AdkError as err:
            if err.reason != "noproc":
                raise
            raise TriggerError("no such source", reason="unknown_source", details={"source": self.source_id}) from None

    def stop(self, timeout: float | None = None) -> None:
        """Stop the source (it is not restarted). Stopping a stopped source does nothing."""
        check_timeout(timeout)
        try:
            self._system().stop_inner(self.ref, timeout)
        except AdkError as err:
            if err.reason != "not_found":
                raise


class SubmitOutcome(NamedTuple):
    """What became of one submitted message: acknowledge it (``submitted``, ``duplicates``) or set it aside
    (``rejected``, with the refusal's ``reason``)."""

    kind: str
    """``"submitted"``, ``"duplicates"`` or ``"rejected"`` (the names of the sources' status counters)."""
    ref: str | None
    """The event reference when the trigger accepted it (new or duplicate)."""
    reason: str | None
    """The refusal reason of a rejected message (at most 64 characters)."""


def submit_body(
    submit: Callable[[dict[str, Any]], Submitted], delivery_id: str, raw: str | bytes, *, invalid_reason: str
) -> SubmitOutcome | None:
    """Decode a queue message's JSON body ``{"payload": ..., "metadata"?: {...}, "timeout_ms"?: N}``, submit it with
    ``delivery_id`` as the idempotency key and classify the answer; ``None`` means "leave it for a later poll".

    A body that is not that JSON is rejected with ``invalid_reason`` and never submitted. A refusal in
    :data:`RETRY_LATER`, or any other ``AdkError`` (no answer: a timeout, the trigger's host restarting), is
    ``None``; any other ``TriggerError`` is a permanent ``rejected`` with its reason.

    Raises:
        Exception: whatever ``submit`` raises that is not an ``AdkError`` (the message stays unacknowledged).
    """
    try:
        body = json.loads(raw)
        if not isinstance(body, dict) or "payload" not in body:
            raise ValueError
    except (ValueError, RecursionError):  # a UnicodeDecodeError is a ValueError; nesting too deep recurses
        return SubmitOutcome("rejected", None, invalid_reason)
    delivery = {k: body[k] for k in _BODY_KEYS if k in body}
    delivery["idempotency_key"] = delivery_id
    try:
        submitted = submit(delivery)
    except TriggerError as err:
        if err.reason in RETRY_LATER:
            return None
        return SubmitOutcome("rejected", None, err.reason[:64])
    except AdkError:
        return None
    return SubmitOutcome("duplicates" if submitted.duplicate else "submitted", submitted.ref, None)


def check_interval(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INTERVAL_MS:
        raise ConfigError(
            f"{key} must be a positive number of milliseconds", reason="invalid_value", details={"key": key}
        )
    return value


def start_source(
    source_class_name: str,
    trigger: str,
    config: Mapping[str, Any],
    *,
    interval_ms: int,
    initial_delay_ms: int | None = None,
    source_id: str | None = None,
    system: ActorSystemHandle | None = None,
) -> SourceHandle:
    """Start a source actor (importable ``"package.module.Class"``, a :class:`TriggerSource`) for ``trigger``.

    Raises:
        ConfigError: ``invalid_value`` (``interval_ms``, ``initial_delay_ms``, ``config``, ``source``).
        TriggerError: ``invalid_trigger_name``; ``source_exists`` for a ``source_id`` that runs.
    """
    check_trigger_name(trigger)
    check_interval(interval_ms, "interval_ms")
    initial = interval_ms if initial_delay_ms is None else initial_delay_ms
    if initial != 0:
        check_interval(initial, "initial_delay_ms")
    if not isinstance(source_class_name, str) or "." not in source_class_name:
        raise ConfigError("a source is an importable class path", reason="invalid_value", details={"key": "source"})
    if not isinstance(config, Mapping):
        raise ConfigError("a source's config is a mapping", reason="invalid_value", details={"key": "config"})
    handle = system if system is not None else current_system()
    local_id = source_id or f"source:{trigger}:{uuid.uuid4().hex[:12]}"
    args = SourceArgs(
        trigger=trigger, config=dict(config), interval_ms=interval_ms, initial_delay_ms=initial, source_id=local_id
    )
    try:
        handle.spawn(source_class_name, args, id=local_id, restart="permanent")
    except AdkError as err:
        if err.reason == "already_started":
            raise TriggerError("that source runs", reason="source_exists", details={"source": local_id}) from None
        raise
    return SourceHandle(local_id, handle.settings.hosts, system)
