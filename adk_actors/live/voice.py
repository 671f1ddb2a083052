"""The owner-bound voice bridge: one tier-2 actor between one active Live session and one audio adapter.

``start_live_voice_bridge(session, principal, ...)`` starts the bridge actor (local id ``voice:<session id>``: the
id is the lease, so a session admits exactly one bridge at a time) and binds it to its *owner* — the caller's
private endpoint, held by the returned :class:`VoiceBridge`. The bridge subscribes to the session with a fixed
credit (default 8 events / 262,144 bytes) and then:

* takes the owner's binary client frames (``adk_actors.live.voice_protocol``), strictly: version, type, length,
  rate, even PCM, at most ``max_audio_frame_bytes``, audio sequences strictly increasing from 1 — a malformed,
  oversized, duplicate or out-of-order frame fails without reaching the session;
* forwards audio, stream-end and activity frames to the session and answers the owner only when the session has
  accepted them (synchronous ingress backpressure: ``ingress_full`` reaches the owner); if the session does not
  answer within ``input_timeout_ms`` the outcome is unknown and the bridge ends with
  ``live_voice_outcome_unknown`` (an adapter must not retry what may have been applied);
* projects the session's events to server frames — audio (129), transcriptions (130) and lifecycle (131) only;
  no provider payload, credential or principal reaches the owner. A projected event keeps its credit until the
  owner ACKs its exact sequence; every other event is acknowledged by the bridge at once;
* ends on the session's ``resuming`` event (``live_voice_reconnect_required``: the adapter starts a fresh bridge
  once the session is active again), on ``terminal``, on :meth:`VoiceBridge.stop`, or when the owner's process
  dies (checked every second); it unsubscribes as it ends.

Accepts: calls ``AttachOwner``, ``VoiceFrame``, ``GetStatus``; infos ``LiveMessage``/``LiveDropped`` from the
session. Emits: ``LiveSubscribe``/``LiveInput`` calls and ``LiveAck`` casts to the session; ``VoiceOut`` and
``VoiceClosed`` to the owner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import AdkError, LiveError
from adk_actors.live import codec
from adk_actors.live import voice_protocol as vp
from adk_actors.live.fanout import LiveEvent
from adk_actors.live.media import audio_pcm
from adk_actors.live.messages import LiveAck, LiveDropped, LiveInput, LiveMessage, LiveSubscribe, LiveUnsubscribe
from adk_actors.runtime.procs import pid_alive
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.secrets import principal_digest

__all__ = ["VoiceBridge", "VoiceBridgeActor", "start_live_voice_bridge"]

BRIDGE_ACTOR = "adk_actors.live.voice.VoiceBridgeActor"
DEFAULT_CREDIT = {"messages": 8, "bytes": 262_144}
_OWNER_CHECK_S = 1.0


def voice_local_id(session_id: str) -> str:
    return f"voice:{session_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BridgeArgs:
    session_id: str
    hosts: int
    principal: str
    credit_messages: int
    credit_bytes: int
    max_audio_frame_bytes: int
    input_timeout_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AttachOwner:
    """Bind the bridge to the calling endpoint (answered once the session subscription is in place)."""

    pid: int


@dataclass(frozen=True, slots=True)
class VoiceFrame:
    """One binary client frame from the owner."""

    data: bytes


@dataclass(frozen=True, slots=True)
class VoiceAck:
    """An owner's ACK frame, as a cast: it never waits for the bridge (a dropped or stale one returns no credit)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class VoiceOut:
    """One binary server frame to the owner."""

    frame: bytes


@dataclass(frozen=True, slots=True)
class VoiceClosed:
    """The bridge ended (``reason``: ``stopped``, ``live_voice_reconnect_required``, ``closed``, ...)."""

    reason: str


@dataclass(frozen=True, slots=True)
class _CheckOwner:
    pass


@dataclass(frozen=True, slots=True)
class _StopBridge:
    pass


_FORWARDED = {"audio", "input_transcription", "output_transcription"}
_LIFECYCLE = {
    "generation_complete": "generation_complete",
    "turn_complete": "turn_complete",
    "interrupted": "interrupted",
    "resumed": "resumed",
}


class VoiceBridgeActor(GenServer):
    """See the module docstring."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, BridgeArgs):
            raise LiveError("a voice bridge needs BridgeArgs", reason="invalid_live_args")
        self.args = args
        self.session = LocalRef(place(f"live:{args.session_id}", args.hosts), f"live:{args.session_id}")
        self.digest = principal_digest(args.principal)
        self.sub_id = f"voice-{os.urandom(6).hex()}"
        self.state = "starting"
        self.owner: Any = None
        self.owner_pid = 0
        self.attach: CallCtx | None = None
        self.subscribe_error: AdkError | None = None
        self.last_audio_seq = 0
        self.pending_inputs = 0
        self.forwarded: set[int] = set()
        self.acks: list[int] = []
        self.counters = {"frames_in": 0, "frames_out": 0, "audio_in_bytes": 0, "audio_out_bytes": 0, "rejected": 0}
        request = LiveSubscribe(
            principal=args.principal,
            subscription_id=self.sub_id,
            messages=args.credit_messages,
            bytes=args.credit_bytes,
        )
        self.call(self.session, request, time.monotonic() + args.input_timeout_s, self._subscribed)
        return None

    def _subscribed(self, value: Any, error: AdkError | None) -> None:
        if error is None and value.get("state") != "active":
            error = LiveError("the Live session is not active", reason="live_not_active", details={})
        if error is not None:
            self.subscribe_error = error
            self.state = "closed"
        else:
            self.state = "open"
        if self.attach is not None:
            self._answer_attach()

    def _answer_attach(self) -> None:
        ctx, self.attach = self.attach, None
        assert ctx is not None
        if self.subscribe_error is not None:
            self.fail(ctx, self.subscribe_error)
            self.stop("normal")
            return
        self.reply(ctx, {"subscription_id": self.sub_id})
        self.start_timer(_OWNER_CHECK_S, _CheckOwner())

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, AttachOwner):
            if self.owner is not None:
                raise LiveError("the voice bridge has an owner", reason="voice_bridge_owned", details={})
            self.owner, self.owner_pid, self.attach = ctx.reply_to, request.pid, ctx
            if self.state != "starting":
                self._answer_attach()
            return DEFERRED
        if isinstance(request, VoiceFrame):
            return self._frame(request.data, ctx)
        if isinstance(request, _StopBridge):
            self._end("stopped")
            return None
        return super().handle_call(request, ctx)

    def _frame(self, data: bytes, ctx: CallCtx) -> Any:
        if self.state != "open":
            raise LiveError("the voice bridge is closed", reason="voice_bridge_closed", details={"state": self.state})
        self.counters["frames_in"] += 1
        try:
            frame = vp.decode_client_frame(data, max_audio_bytes=self.args.max_audio_frame_bytes)
            if frame.kind == vp.AUDIO and frame.seq != self.last_audio_seq + 1:
                raise LiveError(
                    "voice audio sequences increase by one from 1",
                    reason="invalid_voice_frame",
                    details={"why": "seq", "expected": self.last_audio_seq + 1},
                )
        except LiveError:
            self.counters["rejected"] += 1
            raise
        if frame.kind == vp.ACK:
            if frame.seq in self.forwarded:
                self.forwarded.discard(frame.seq)
                self._ack(frame.seq)
                self._flush_acks()
            return {"acked": frame.seq}
        if frame.kind == vp.AUDIO:
            self.last_audio_seq = frame.seq
            self.counters["audio_in_bytes"] += len(frame.pcm)
            message, kind = codec.audio_message(audio_pcm(frame.pcm, rate=frame.rate)), "audio"
        elif frame.kind == vp.STREAM_END:
            message, kind = codec.audio_stream_end_message(), "audio_stream_end"
        elif frame.kind == vp.ACTIVITY_START:
            message, kind = codec.activity_start_message(), "activity_start"
        else:
            message, kind = codec.activity_end_message(), "activity_end"
        request = LiveInput(principal=self.args.principal, kind=kind, message=message, size=len(frame.pcm))
        self.pending_inputs += 1
        self.call(self.session, request, time.monotonic() + self.args.input_timeout_s, self._accepted(ctx))
        return DEFERRED

    def _accepted(self, ctx: CallCtx) -> Any:
        def done(value: Any, error: AdkError | None) -> None:
            self.pending_inputs -= 1
            if error is None:
                self.reply(ctx, {"input_seq": value})
            elif error.reason == "timeout" or type(error).__name__ == "AskTimeout":
                self.fail(
                    ctx,
                    LiveError(
                        "the Live session did not answer in time: the input's outcome is unknown",
                        reason="live_voice_outcome_unknown",
                        details={},
                    ),
                )
                self._end("live_voice_outcome_unknown")
            else:
                self.fail(ctx, error)

        return done

    # ---- session events ----------------------------------------------------------------------------------------
    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, LiveMessage) and message.subscription_id == self.sub_id:
            for event in message.events:
                if self.state != "closed":
                    self._event(event)
            self._flush_acks()
            return
        if isinstance(message, LiveDropped) and message.subscription_id == self.sub_id:
            self._end(message.reason, unsubscribe=False)
            return
        if isinstance(message, VoiceAck):
            if self.state == "open":
                try:
                    frame = vp.decode_client_frame(message.data, max_audio_bytes=self.args.max_audio_frame_bytes)
                except LiveError:
                    self.counters["rejected"] += 1
                    return
                if frame.kind == vp.ACK and frame.seq in self.forwarded:
                    self.forwarded.discard(frame.seq)
                    self._ack(frame.seq)
                    self._flush_acks()
            return
        super().handle_info(message, sender)

    def _event(self, event: LiveEvent) -> None:
        frame = self._project(event)
        if event.kind == "terminal":
            self._out(vp.lifecycle_frame(event.seq, "closed", str(event.payload.get("reason", ""))))
            self._end("closed", unsubscribe=False)
            return
        if event.kind == "resuming":
            self._out(vp.lifecycle_frame(event.seq, "reconnect_required"))
            self._ack(event.seq)
            self._end("live_voice_reconnect_required")
            return
        if frame is None or self.owner is None:
            self._ack(event.seq)  # not for the owner: its credit comes back at once
            return
        self.forwarded.add(event.seq)
        self._out(frame)

    def _project(self, event: LiveEvent) -> bytes | None:
        if event.kind == "audio" and event.data:
            self.counters["audio_out_bytes"] += len(event.data)
            rate = int(event.payload.get("rate") or 24000)
            return vp.audio_frame(event.seq, event.data, rate)
        if event.kind in ("input_transcription", "output_transcription"):
            direction = "input" if event.kind == "input_transcription" else "output"
            text = str(event.payload.get("text", ""))
            return vp.transcription_frame(event.seq, direction, text, bool(event.payload.get("finished")))
        if event.kind in _LIFECYCLE:
            return vp.lifecycle_frame(event.seq, _LIFECYCLE[event.kind])
        return None

    def _out(self, frame: bytes) -> None:
        if self.owner is not None:
            self.counters["frames_out"] += 1
            self.send_to(self.owner, VoiceOut(frame))

    def _ack(self, seq: int) -> None:
        self.acks.append(seq)

    def _flush_acks(self) -> None:
        acks, self.acks = self.acks, []
        if acks:
            self.send_to(
                self.session, LiveAck(principal_digest=self.digest, subscription_id=self.sub_id, seqs=tuple(acks))
            )

    # ---- lifetime ----------------------------------------------------------------------------------------------
    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _CheckOwner):
            if self.state == "open":
                if self.owner_pid and not pid_alive(self.owner_pid):
                    self._end("owner_down")
                else:
                    self.start_timer(_OWNER_CHECK_S, _CheckOwner())
            return
        super().handle_timer(message)

    def _end(self, reason: str, *, unsubscribe: bool = True) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        if unsubscribe:
            request = LiveUnsubscribe(principal=self.args.principal, subscription_id=self.sub_id)
            self.call(self.session, request, time.monotonic() + 2.0, lambda _v, _e: None)
        if self.owner is not None:
            self.send_to(self.owner, VoiceClosed(reason))
        self.stop("normal")

    def status(self) -> dict[str, Any]:
        return {"kind": "voice_bridge", "session_id": self.args.session_id, "state": self.state, **self.counters}

    def format_status(self) -> dict[str, Any]:
        return {"session_id": self.args.session_id, "state": self.state}


@dataclass
class VoiceBridge:
    """The owner's side of a bridge: :meth:`frame` in, :meth:`receive` out, :meth:`stop`."""

    session_id: str
    ref: LocalRef
    system: Any
    endpoint: Any
    closed_reason: str | None = None
    _ask_timeout: float = 10.0
    _pending: list[bytes] = field(default_factory=list)

    def ack(self, data: bytes) -> None:
        """Pass an ACK frame on without waiting (a cast; the bridge checks it like any frame and drops a bad one).

        Raises:
            LiveError: ``voice_bridge_closed``.
        """
        if self.closed_reason is not None:
            raise LiveError(
                "the voice bridge is closed", reason="voice_bridge_closed", details={"reason": self.closed_reason}
            )
        self.system.cast(self.ref, VoiceAck(bytes(data)))

    def frame(self, data: bytes, *, timeout: float | None = None) -> dict[str, Any]:
        """Send one client frame; returns ``{"input_seq": n}`` once the session accepted it (``{"acked": seq}``
        for an ACK — :meth:`ack` does the same without waiting).

        Raises:
            LiveError: ``invalid_voice_frame``, ``ingress_full``, ``live_voice_outcome_unknown``,
                ``voice_bridge_closed``.
        """
        if self.closed_reason is not None:
            raise LiveError(
                "the voice bridge is closed", reason="voice_bridge_closed", details={"reason": self.closed_reason}
            )
        deadline = time.monotonic() + (self._ask_timeout if timeout is None else timeout)
        try:
            reply: dict[str, Any] = self.endpoint.ask_inner(self.ref, VoiceFrame(bytes(data)), deadline)
        except AdkError as err:
            if err.reason in ("noproc", "not_found") or type(err).__name__ == "ActorCrashed":
                self.closed_reason = self.closed_reason or "closed"
                raise LiveError("the voice bridge is closed", reason="voice_bridge_closed", details={}) from None
            raise
        return reply

    def receive(self, timeout: float) -> bytes | None:
        """The next server frame within ``timeout`` seconds; ``None`` when none came or the bridge closed
        (then :attr:`closed_reason` says why)."""
        deadline = time.monotonic() + timeout
        while self.closed_reason is None:
            message = self.endpoint.listen(min(0.05, max(0.0, deadline - time.monotonic())))
            if isinstance(message, VoiceOut):
                return message.frame
            if isinstance(message, VoiceClosed):
                self.closed_reason = message.reason
                return None
            if time.monotonic() >= deadline:
                return None
        return None

    def stop(self) -> None:
        """Stop the bridge (it unsubscribes; the Live session goes on). Idempotent."""
        try:
            if self.closed_reason is None:
                self.endpoint.ask_inner(self.ref, _StopBridge(), time.monotonic() + 5.0)
                self.closed_reason = "stopped"
        except AdkError:
            self.closed_reason = self.closed_reason or "closed"
        finally:
            self.endpoint.close()


def start_live_voice_bridge(
    session: Any,
    principal: str,
    *,
    credit: Mapping[str, int] | None = None,
    max_audio_frame_bytes: int = 64_000,
    input_timeout_ms: int = 5_000,
    timeout: float | None = None,
) -> VoiceBridge:
    """Start the voice bridge of an ``active`` Live session, owned by the calling process.

    Raises:
        LiveError: ``live_not_active``; ``voice_bridge_exists`` (the session has a bridge); ``principal_mismatch``.
        ValidationError: ``invalid_value`` (credit, max_audio_frame_bytes, input_timeout_ms).
    """
    from adk_actors.content.validation import check_int
    from adk_actors.live.api import LiveSessionRef

    if not isinstance(session, LiveSessionRef):
        raise LiveError("expected a LiveSessionRef", reason="invalid_session", details={})
    given = dict(DEFAULT_CREDIT if credit is None else credit)
    if set(given) != {"messages", "bytes"}:
        raise LiveError("credit is {messages, bytes}", reason="invalid_value", details={"key": "credit"})
    check_int(given["messages"], "credit.messages", minimum=1, maximum=1024)
    check_int(given["bytes"], "credit.bytes", minimum=4096, maximum=16 * 1024 * 1024)
    check_int(max_audio_frame_bytes, "max_audio_frame_bytes", minimum=2, maximum=1024 * 1024)
    check_int(input_timeout_ms, "input_timeout_ms", minimum=1, maximum=120_000)
    principal_digest(principal)
    handle = session._system()
    local_id = voice_local_id(session.session_id)
    args = BridgeArgs(
        session_id=session.session_id,
        hosts=handle.settings.hosts,
        principal=principal,
        credit_messages=given["messages"],
        credit_bytes=given["bytes"],
        max_audio_frame_bytes=max_audio_frame_bytes,
        input_timeout_s=input_timeout_ms / 1000.0,
    )
    try:
        ref = handle.spawn(BRIDGE_ACTOR, args, id=local_id, restart="temporary", timeout=timeout)
    except AdkError as err:
        if err.reason == "already_started":
            raise LiveError("the Live session has a voice bridge", reason="voice_bridge_exists", details={}) from None
        raise
    endpoint = handle.open_endpoint()
    ask_timeout = handle.settings.ask_timeout_s if timeout is None else timeout
    try:
        endpoint.ask_inner(ref, AttachOwner(pid=os.getpid()), time.monotonic() + ask_timeout)
    except BaseException:
        endpoint.close()
        raise
    return VoiceBridge(session.session_id, ref, handle, endpoint, _ask_timeout=ask_timeout)
