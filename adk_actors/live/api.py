"""The Live facade: start a server-owned Live session, subscribe to its events with credit, send inputs, close.

Every function is an ask with a deadline to the session's actor (``adk_actors.live.actor``), and every one takes
the exact principal the session was started with (the session keeps only its SHA-256 digest)::

    session = start_live_session("support-call-1", principal, config)
    with live_subscribe(session, principal, messages=16) as events:
        for event in events:               # LiveEvent(kind, payload, data, seq)
            events.ack(event.seq)           # credit comes back only with the exact sequence
            if event.kind == "ready":
                live_send_text(session, principal, "Hello")
            elif event.kind in ("turn_complete", "terminal"):
                break
    close_live_session(session, principal)

The session is not owned by the process that started it: it runs until it is closed, its provider connection ends
without a usable resumption, or ``max_duration_ms`` passes. ``LiveSessionRef`` pickles (hand it to another
process); ``live_sessions(principal)`` finds the sessions of a principal.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.content.validation import check_timeout
from adk_actors.errors import ActorCrashed, AdkError, AskTimeout, LiveError, NameNotFound, ValidationError
from adk_actors.live import codec
from adk_actors.live.actor import LiveArgs
from adk_actors.live.config import LiveConfig, live_config
from adk_actors.live.fanout import LiveEvent
from adk_actors.live.index import IndexArgs
from adk_actors.live.media import AudioChunk, VideoFrame, audio_pcm, video_frame
from adk_actors.live.messages import (
    INDEX_ID,
    LIVE_ACTOR,
    LiveAck,
    LiveClose,
    LiveDropped,
    LiveInput,
    LiveMessage,
    LiveStatus,
    LiveSubscribe,
    LiveUnsubscribe,
    ReserveSlot,
    live_local_id,
)
from adk_actors.live.tools import pack_tools
from adk_actors.runtime.procs import pid_alive
from adk_actors.runtime.refs import LocalRef, host_name, place
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.secrets import principal_digest

__all__ = [
    "LiveSessionRef",
    "LiveSubscription",
    "check_live_session_id",
    "close_live_session",
    "live_activity_end",
    "live_activity_start",
    "live_audio_stream_end",
    "live_send_audio",
    "live_send_text",
    "live_send_tool_response",
    "live_send_video_frame",
    "live_sessions",
    "live_status",
    "live_subscribe",
    "start_live_session",
]

MAX_SESSION_ID = 128
MAX_TEXT_BYTES = 64 * 1024
MAX_CREDIT_MESSAGES = 4096
MAX_CREDIT_BYTES = 256 * 1024 * 1024
_SLICE = 0.05
_INDEX = "adk_actors.live.index.LiveIndex"


@dataclass(frozen=True, slots=True)
class LiveSessionRef:
    """A handle on a running Live session (pickles; holds no principal)."""

    session_id: str
    hosts: int
    system: Any = field(default=None, compare=False, repr=False)

    @property
    def ref(self) -> LocalRef:
        local_id = live_local_id(self.session_id)
        return LocalRef(place(local_id, self.hosts), local_id)

    def _system(self) -> ActorSystemHandle:
        return self.system if self.system is not None else current_system()

    def __getstate__(self) -> tuple[str, int]:
        return (self.session_id, self.hosts)

    def __setstate__(self, state: tuple[str, int]) -> None:
        object.__setattr__(self, "session_id", state[0])
        object.__setattr__(self, "hosts", state[1])
        object.__setattr__(self, "system", None)


def check_live_session_id(session_id: Any) -> str:
    """``session_id`` when it is a valid Live session id (1-128 ASCII letters, digits, ``-``, ``_``, ``.``).

    Raises:
        ValidationError: ``invalid_session_id``.
    """
    if (
        not isinstance(session_id, str)
        or not 0 < len(session_id) <= MAX_SESSION_ID
        or not session_id.isascii()
        or not all(c.isalnum() or c in "-_." for c in session_id)
    ):
        raise ValidationError(
            "a Live session id is 1-128 ASCII letters, digits, '-', '_' or '.'",
            reason="invalid_session_id",
            details={"type": type(session_id).__name__},
        )
    return session_id


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _index_ref(handle: ActorSystemHandle) -> LocalRef:
    return LocalRef(place(INDEX_ID, handle.settings.hosts), INDEX_ID)


def _reserve(handle: ActorSystemHandle, session_id: str, host_id: int, timeout: float | None) -> None:
    request = ReserveSlot(session_id=session_id, host_id=host_id)
    try:
        handle.ask(_index_ref(handle), request, timeout)
        return
    except ActorCrashed as err:
        if "actor" not in err.details:
            raise  # the index's host itself is gone
    try:
        handle.spawn(
            _INDEX,
            IndexArgs(limit=handle.settings.live_session_limit, hosts=handle.settings.hosts),
            id=INDEX_ID,
            restart="permanent",
            timeout=timeout,
        )
    except AdkError as err:
        if err.reason != "already_started":
            raise
    handle.ask(_index_ref(handle), request, timeout)


def start_live_session(
    session_id: str,
    principal: str,
    config: Mapping[str, Any] | LiveConfig,
    *,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> LiveSessionRef:
    """Start a server-owned Live session that ``principal`` owns; it connects to the provider at once.

    Subscribe (:func:`live_subscribe`) and wait for the ``ready`` event before sending inputs.

    Raises:
        ConfigError: the config (``details["key"]`` names the option; ``live_model_required``,
            ``unsupported_live_option``).
        ValidationError: ``invalid_session_id``, ``invalid_principal``.
        LiveError: ``live_session_exists`` (that id runs); ``live_session_limit``.
    """
    check_live_session_id(session_id)
    digest = principal_digest(principal)
    checked = config if isinstance(config, LiveConfig) else live_config(config)
    if checked.tool_execution is not None and checked.tool_execution.tools:
        tools = pack_tools(checked.tool_execution.tools)
        checked = dataclasses.replace(checked, tool_execution=dataclasses.replace(checked.tool_execution, tools=tools))
    check_timeout(timeout)
    handle = _system(system)
    local_id = live_local_id(session_id)
    host_id = place(local_id, handle.settings.hosts)
    _reserve(handle, session_id, host_id, timeout)
    args = LiveArgs(session_id=session_id, principal_digest=digest, config=checked, hosts=handle.settings.hosts)
    try:
        handle.spawn(LIVE_ACTOR, args, id=local_id, restart="temporary", timeout=timeout)
    except AdkError as err:
        if err.reason == "already_started":
            raise LiveError(
                "a Live session with that id runs", reason="live_session_exists", details={"session_id": session_id}
            ) from None
        raise
    return LiveSessionRef(session_id, handle.settings.hosts, system)


def _ask(session: LiveSessionRef, request: Any, timeout: float | None) -> Any:
    if not isinstance(session, LiveSessionRef):
        raise ValidationError(
            "expected a LiveSessionRef", reason="invalid_session", details={"type": type(session).__name__}
        )
    check_timeout(timeout)
    try:
        return session._system().ask(session.ref, request, timeout)
    except (ActorCrashed, NameNotFound):
        raise LiveError(
            "no such Live session", reason="live_session_not_found", details={"session_id": session.session_id}
        ) from None


def _input(
    session: LiveSessionRef, principal: str, kind: str, message: dict[str, Any], size: int, timeout: float | None
) -> int:
    seq: int = _ask(session, LiveInput(principal=principal, kind=kind, message=message, size=size), timeout)
    return seq


def live_send_text(session: LiveSessionRef, principal: str, text: str, *, timeout: float | None = None) -> int:
    """Send one bounded text input (``realtimeInput.text``); returns its input sequence number.

    Raises:
        ValidationError: ``invalid_text`` (not a non-empty str of at most 64 KiB).
        LiveError: ``principal_mismatch``, ``live_not_active``, ``ingress_full``, ``live_session_not_found``.
    """
    if not isinstance(text, str) or not text or len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise ValidationError(
            "Live text is a non-empty string of at most 64 KiB", reason="invalid_text", details={"key": "text"}
        )
    return _input(session, principal, "text", codec.text_message(text), len(text), timeout)


def live_send_audio(
    session: LiveSessionRef, principal: str, audio: AudioChunk | bytes, *, timeout: float | None = None
) -> int:
    """Send PCM audio (s16le mono; bytes are taken as 16 kHz) as ``realtimeInput.audio``; returns its sequence.

    Raises:
        LiveError: ``invalid_audio`` and the errors of :func:`live_send_text`.
    """
    chunk = audio if isinstance(audio, AudioChunk) else audio_pcm(audio)
    return _input(session, principal, "audio", codec.audio_message(chunk), len(chunk.data), timeout)


def live_send_video_frame(
    session: LiveSessionRef, principal: str, frame: VideoFrame | tuple[str, bytes], *, timeout: float | None = None
) -> int:
    """Send one JPEG or PNG frame as ``realtimeInput.video``; returns its sequence.

    Raises:
        LiveError: ``invalid_video_frame`` and the errors of :func:`live_send_text`.
    """
    checked = frame if isinstance(frame, VideoFrame) else video_frame(*frame)
    return _input(session, principal, "video", codec.video_message(checked), len(checked.data), timeout)


def live_activity_start(session: LiveSessionRef, principal: str, *, timeout: float | None = None) -> int:
    """Mark the start of user activity (only with automatic activity detection off)."""
    return _input(session, principal, "activity_start", codec.activity_start_message(), 0, timeout)


def live_activity_end(session: LiveSessionRef, principal: str, *, timeout: float | None = None) -> int:
    """Mark the end of user activity (only with automatic activity detection off)."""
    return _input(session, principal, "activity_end", codec.activity_end_message(), 0, timeout)


def live_audio_stream_end(session: LiveSessionRef, principal: str, *, timeout: float | None = None) -> int:
    """Tell the provider the input audio stream ended (only with automatic activity detection)."""
    return _input(session, principal, "audio_stream_end", codec.audio_stream_end_message(), 0, timeout)


def live_send_tool_response(
    session: LiveSessionRef,
    principal: str,
    call_id: str,
    name: str,
    response: Mapping[str, Any],
    *,
    timeout: float | None = None,
) -> int:
    """Answer the provider's tool call ``call_id`` (of a ``tool_call`` event) with a JSON object.

    Raises:
        ValidationError: ``invalid_tool_response``; LiveError: as :func:`live_send_text`.
    """
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise ValidationError(
            "a tool response needs the call's id and name", reason="invalid_tool_response", details={}
        )
    if not isinstance(response, Mapping):
        raise ValidationError(
            "a tool response is a JSON object", reason="invalid_tool_response", details={"key": "response"}
        )
    message = codec.tool_response_message([{"id": call_id, "name": name, "response": dict(response)}])
    return _input(session, principal, "tool_response", message, 0, timeout)


def live_status(session: LiveSessionRef, principal: str, *, timeout: float | None = None) -> dict[str, Any]:
    """The session's status: ``state``, ``model``, sequences, ``resumes``, ingress use, subscribers, counters.

    Raises:
        LiveError: ``principal_mismatch``, ``live_session_not_found``.
    """
    status: dict[str, Any] = _ask(session, LiveStatus(principal=principal), timeout)
    return status


def close_live_session(
    session: LiveSessionRef, principal: str, reason: str = "normal", *, timeout: float | None = None
) -> None:
    """Close the session: the provider socket closes normally, subscribers get ``terminal`` ``closed``.

    Closing a session that has ended does nothing.

    Raises:
        LiveError: ``principal_mismatch``.
    """
    if not isinstance(reason, str) or not 0 < len(reason) <= 64:
        raise ValidationError("a close reason is 1-64 characters", reason="invalid_value", details={"key": "reason"})
    try:
        _ask(session, LiveClose(principal=principal, reason=reason), timeout)
    except LiveError as err:
        if err.reason != "live_session_not_found":
            raise


def live_sessions(
    principal: str, *, system: ActorSystemHandle | None = None, timeout: float | None = None, limit: int = 1000
) -> list[dict[str, Any]]:
    """The status of every running Live session of ``principal`` (others are skipped, never described)."""
    from adk_actors.runtime.host import FindInner

    principal_digest(principal)
    check_timeout(timeout)
    handle = _system(system)
    found: list[dict[str, Any]] = []
    for host_id in range(handle.settings.hosts):
        ids: list[str] = handle.ask(host_name(host_id), FindInner(actor=LIVE_ACTOR, limit=limit), timeout)
        for local_id in ids:
            ref = LiveSessionRef(local_id.split(":", 1)[1], handle.settings.hosts, system)
            try:
                found.append(live_status(ref, principal, timeout=timeout))
            except (LiveError, ValidationError):
                continue  # another principal's, or ended meanwhile
    return sorted(found, key=lambda s: s["session_id"])[:limit]


class LiveSubscription(Iterator[LiveEvent]):
    """A future-only subscription: iterate for :class:`LiveEvent`s, :meth:`ack` each by its ``seq``.

    Iteration ends after the ``terminal`` event; a subscriber the session removed (``slow_subscriber``) gets a
    ``LiveError`` from ``next`` (``subscriber_dropped``, ``details["reason"]``). If the session's host dies, the
    last item is a ``terminal`` event with reason ``host_lost``. Use as a context manager (or call :meth:`close`)
    to unsubscribe.
    """

    def __init__(
        self, session: LiveSessionRef, principal: str, messages: int, nbytes: int, idle_timeout: float
    ) -> None:
        self.session = session
        self.subscription_id = uuid.uuid4().hex
        self._principal = principal
        self._digest = principal_digest(principal)
        self._handle = session._system()
        self._idle = idle_timeout
        self._endpoint = self._handle.open_endpoint()
        self._done = False
        self._queue: deque[LiveEvent] = deque()
        self._acks: list[int] = []
        self._ack_batch = max(1, messages // 2)
        self.state = ""
        try:
            host = self._handle.host_entry(session.ref.host_id)
            self._host_pid = host.pid
            request = LiveSubscribe(
                principal=principal, subscription_id=self.subscription_id, messages=messages, bytes=nbytes
            )
            reply = self._endpoint.ask_inner(session.ref, request, time.monotonic() + idle_timeout)
            self.state = reply["state"]
        except (ActorCrashed, NameNotFound):
            self._endpoint.close()
            raise LiveError(
                "no such Live session", reason="live_session_not_found", details={"session_id": session.session_id}
            ) from None
        except BaseException:
            self._endpoint.close()
            raise

    def __iter__(self) -> LiveSubscription:
        return self

    def __next__(self) -> LiveEvent:
        event = self.next(self._idle)
        if event is None:
            raise AskTimeout("no Live event before the idle timeout", details={"session_id": self.session.session_id})
        return event

    def next(self, timeout: float) -> LiveEvent | None:
        """The next event within ``timeout`` seconds (``None`` if none came); raises ``StopIteration`` after the
        terminal event."""
        if self._queue:
            return self._take()
        if self._done:
            raise StopIteration
        deadline = time.monotonic() + timeout
        while True:
            wait = min(_SLICE, max(0.0, deadline - time.monotonic()))
            if self._acks:
                message = self._endpoint.listen(0.0)
                if message is None:
                    self._flush_acks()  # credit goes back before this subscriber waits
                    message = self._endpoint.listen(wait)
            else:
                message = self._endpoint.listen(wait)
            if isinstance(message, LiveMessage) and message.subscription_id == self.subscription_id:
                self._queue.extend(message.events)
                return self._take()
            if isinstance(message, LiveDropped) and message.subscription_id == self.subscription_id:
                self._done = True
                raise LiveError(
                    "the Live session removed this subscriber",
                    reason="subscriber_dropped",
                    details={"reason": message.reason, "session_id": self.session.session_id},
                )
            if message is None and self._host_pid and not pid_alive(self._host_pid):
                self._done = True
                return LiveEvent(self.session.session_id, 0, "terminal", {"reason": "host_lost"})
            if time.monotonic() >= deadline:
                return None

    def _take(self) -> LiveEvent:
        event = self._queue.popleft()
        if event.kind == "terminal":
            self._done = True
            self._queue.clear()
        return event

    def ack(self, seq: int) -> None:
        """Return the credit of event ``seq``. ACKs are sent in batches: at the latest when this subscription is
        about to wait for the next event, or when half its credit window is acknowledged (never blocks)."""
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            return
        self._acks.append(seq)
        if len(self._acks) >= self._ack_batch:
            self._flush_acks()

    def _flush_acks(self) -> None:
        acks, self._acks = self._acks, []
        if acks and not self._done:
            self._handle.cast(
                self.session.ref,
                LiveAck(principal_digest=self._digest, subscription_id=self.subscription_id, seqs=tuple(acks)),
            )

    def close(self) -> None:
        """Unsubscribe (the session goes on)."""
        if self._endpoint is None:
            return
        try:
            if not self._done:
                self._handle.ask(
                    self.session.ref,
                    LiveUnsubscribe(principal=self._principal, subscription_id=self.subscription_id),
                    2.0,
                )
        except AdkError:
            pass  # the session ended meanwhile
        finally:
            self._endpoint.close()
            self._endpoint = None  # type: ignore[assignment]
            self._done = True

    def __enter__(self) -> LiveSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def live_subscribe(
    session: LiveSessionRef,
    principal: str,
    *,
    messages: int = 16,
    bytes: int = 4 * 1024 * 1024,
    idle_timeout: float | None = None,
) -> LiveSubscription:
    """Subscribe to the session's future events with a credit window of ``messages`` events / ``bytes`` bytes.

    Raises:
        ValidationError: ``invalid_value`` (credit out of range).
        LiveError: ``principal_mismatch``, ``subscriber_limit``, ``live_session_not_found``.
    """
    for key, value, top in (("messages", messages, MAX_CREDIT_MESSAGES), ("bytes", bytes, MAX_CREDIT_BYTES)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValidationError(
                f"{key} credit must be an integer in [1, {top}]", reason="invalid_value", details={"key": key}
            )
    check_timeout(idle_timeout, "idle_timeout")
    if not isinstance(session, LiveSessionRef):
        raise ValidationError(
            "expected a LiveSessionRef", reason="invalid_session", details={"type": type(session).__name__}
        )
    handle = session._system()
    idle = handle.settings.ask_timeout_s if idle_timeout is None else idle_timeout
    return LiveSubscription(session, principal, messages, bytes, idle)
