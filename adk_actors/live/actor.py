"""The Live session actor (tier 2, server-owned, ``temporary`` in its host, local id ``live:<session id>``).

One actor per Live session. It owns one provider WebSocket (``adk_actors.live.transport``: a dedicated thread of
its host, started through ``io_call`` so frames arrive as ordered progress reports), the bounded ingress credit
(messages and bytes queued for the socket and not yet written), the subscribers (``adk_actors.live.fanout``) and
the newest resumption handle. States: ``connecting`` → ``active`` ⇄ ``resuming`` → ``closed``.

* Every operation presents the exact principal; the actor keeps only its SHA-256 digest and compares digests in
  constant time (``principal_mismatch``).
* Inputs are accepted only while ``active``; a full ingress window refuses at once (``ingress_full``): that is the
  synchronous backpressure. An accepted input gets the next input sequence number.
* A GoAway with a usable handle, or a dropped socket while resumption is on, reconnects with the newest handle
  within ``resume_deadline_ms``: subscribers see ``resuming`` then ``resumed`` in one continuous stream; inputs
  accepted but not yet written are dropped and reported (``inputs_dropped``), never replayed. Without a usable
  handle, or past the deadline, the session ends with a ``terminal`` event.
* ``interrupted`` purges the queued output audio of that generation from every subscriber backlog.
* Tool calls: published as ``tool_call`` events; with ``tool_execution`` enabled, an allowlisted call runs in the
  worker pool (``adk_actors.live.tools``) and its result is sent back as the tool response (``tool_result`` event).
* The terminal event reaches every subscriber without credit; the actor then releases its slot in the index
  (``live:index``) and stops. A host that dies takes the session and its socket with it; subscribers notice the
  host's death (``adk_actors.live.api``) and end with a ``terminal`` ``host_lost`` event.

Accepts: calls ``LiveInput``, ``LiveSubscribe``, ``LiveUnsubscribe``, ``LiveStatus``, ``LiveClose``; casts
``LiveAck``. Emits: ``LiveMessage`` / ``LiveDropped`` to subscribers, ``RunJob`` calls to the worker pool,
``ReleaseSlot`` to the index.
"""

from __future__ import annotations

import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError, LiveError
from adk_actors.live.codec import decode_server_frame, tool_response_message
from adk_actors.live.config import LiveConfig, resolve_api_key, setup_message
from adk_actors.live.fanout import Fanout, LiveEvent, Subscriber
from adk_actors.live.messages import (
    INDEX_ID,
    LiveAck,
    LiveClose,
    LiveDropped,
    LiveInput,
    LiveMessage,
    LiveStatus,
    LiveSubscribe,
    LiveUnsubscribe,
    ReleaseSlot,
)
from adk_actors.live.transport import LiveSocket, live_socket_call
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.server import CallCtx, GenServer
from adk_actors.secrets import principal_digest

__all__ = ["LiveArgs", "LiveSessionActor"]

_RUN_TOOL = CallableRef.by_name("adk_actors.live.tools.run_live_tool")
_MAX_ACKS = 4096
"""Sequences one ACK message may carry (a subscriber never has more in flight)."""
_MAX_TOOL_CALLS = 64
"""Tool calls of one session running at once at most (beyond it a call is answered with an error result)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveArgs:
    session_id: str
    principal_digest: str
    config: LiveConfig
    hosts: int


@dataclass(frozen=True, slots=True)
class _ResumeExpired:
    attempt: int


@dataclass(frozen=True, slots=True)
class _SetupExpired:
    pass


class LiveSessionActor(GenServer):
    """See the module docstring."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, LiveArgs):
            raise LiveError("a Live session needs LiveArgs", reason="invalid_live_args")
        self.args = args
        self.cfg: LiveConfig = args.config
        self.state = "connecting"
        self.started = time.time()
        self.deadline = time.monotonic() + self.cfg.max_duration_ms / 1000.0
        self.seq = 0
        self.input_seq = 0
        self.generation = 0
        self.in_generation = False
        self.handle: str | None = None
        self.resume_attempt = 0
        self.resumes = 0
        self.socket: LiveSocket | None = None
        self.io_id: int | None = None
        self.ingress_messages = 0
        self.ingress_bytes = 0
        self.tool_calls: dict[str, str] = {}
        self.tool_queue: list[dict[str, Any]] = []
        self._outbox: dict[str, tuple[Any, list[LiveEvent]]] = {}
        self.counters = {"frames": 0, "inputs": 0, "audio_out_bytes": 0, "audio_in_bytes": 0, "dropped_inputs": 0}
        self.close_reason = "normal"
        self.fanout = Fanout(
            max_subscribers=self.cfg.max_subscribers,
            max_backlog_messages=self.cfg.max_subscriber_messages,
            max_backlog_bytes=self.cfg.max_subscriber_bytes,
        )
        self._connect()
        self.start_timer(self.cfg.connect_timeout_ms / 1000.0, _SetupExpired())
        return None

    # ---- the connection --------------------------------------------------------------------------------------
    def _connect(self) -> None:
        key = resolve_api_key(self.cfg)
        cafile = self.cfg.endpoint.cafile if self.cfg.endpoint is not None else None
        self.socket = LiveSocket(
            self.cfg.url,
            [f"x-goog-api-key: {key.reveal()}"],
            cafile=cafile,
            connect_timeout_s=self.cfg.connect_timeout_ms / 1000.0,
        )
        self.ingress_messages = self.ingress_bytes = 0
        self.io_id = self.io_call(
            live_socket_call, (self.socket,), self.deadline, self._socket_ended, on_progress=self._on_socket
        )

    def _on_socket(self, report: Any) -> None:
        if report[0] == "frames":
            for data in report[1]:
                if not self._on_frame(data):
                    break
            self._flush()
        elif report[0] == "sent":
            self.ingress_messages = max(0, self.ingress_messages - 1)
            self.ingress_bytes = max(0, self.ingress_bytes - report[1])
        elif report[0] == "open" and self.socket is not None:
            self.socket.send(json.dumps(setup_message(self.cfg, self.handle)))

    def _on_frame(self, data: bytes) -> bool:
        """Handle one server frame; ``False`` when it ended the connection (the rest of its batch is dropped)."""
        if self.state in ("closed", "closing_failed") or self.io_id is None:
            return False
        self.counters["frames"] += 1
        try:
            items = decode_server_frame(data, include_thoughts=self.cfg.include_thoughts)
        except LiveError as err:
            self._publish("error", {"reason": err.reason})
            self._drop_connection("malformed_frame")
            return False
        for item in items:
            self._on_item(item.kind, item.payload, getattr(item, "data", None))
        return True

    def _on_item(self, kind: str, payload: dict[str, Any], data: bytes | None) -> None:
        if kind == "setup_complete":
            if self.state == "resuming":
                self.resumes += 1
                self.state = "active"
                self._publish("resumed", {"resumes": self.resumes})
            else:
                self.state = "active"
                self._publish("ready", {"session_id": self.args.session_id})
            return
        if kind == "resumption_update":
            if payload.get("resumable") and payload.get("handle"):
                self.handle = str(payload["handle"])
            return
        if kind in ("audio", "text", "thought", "output_transcription") and not self.in_generation:
            self.generation += 1
            self.in_generation = True
        if kind == "audio" and data is not None:
            self.counters["audio_out_bytes"] += len(data)
        if kind == "interrupted":
            self.fanout.purge_audio(self.generation)
            self.in_generation = False
        elif kind in ("generation_complete", "turn_complete"):
            self.in_generation = False
        self._publish(kind, payload, data)
        if kind == "tool_call":
            self._maybe_run_tools(payload.get("calls") or [])
        elif kind == "tool_call_cancellation":
            cancelled = {str(i) for i in payload.get("ids") or []}
            self.tool_queue = [c for c in self.tool_queue if str(c.get("id", "")) not in cancelled]
            for call_id in cancelled:
                self.tool_calls.pop(call_id, None)
        elif kind == "go_away" and self.handle and self.cfg.provider_config.session_resumption:
            self._drop_connection("go_away")  # a proactive resume with the newest handle

    def _drop_connection(self, why: str) -> None:
        """End the current socket; ``_socket_ended`` decides between resuming and the terminal event."""
        self.close_reason = why
        if self.io_id is not None:
            self.cancel_io(self.io_id)

    def _socket_ended(self, value: Any, error: AdkError | None) -> None:
        self.io_id = None
        self.socket = None
        if self.state == "closing":
            self._terminal("closed", {"requested": self.close_reason})
            return
        if error is not None and error.reason == "timeout":
            self._terminal("max_duration", {})
            return
        closed = value if isinstance(value, tuple) else None
        cause: dict[str, Any] = (
            {"close_code": closed[1], "close_reason": closed[2][:123]}
            if closed
            else {
                "error": self.close_reason if error and error.reason == "cancelled" else (error.reason if error else "")
            }
        )
        resumable = self.cfg.provider_config.session_resumption and self.handle and self.state in ("active", "resuming")
        if resumable and closed is not None and closed[1] in (1007, 1008):
            resumable = False  # the provider refused the request itself: reconnecting would repeat it
        if not resumable:
            self._terminal("connection_closed" if closed else "connection_lost", cause)
            return
        if self.state == "active":
            self.state = "resuming"
            self.resume_attempt += 1
            self.start_timer(self.cfg.resume_deadline_ms / 1000.0, _ResumeExpired(self.resume_attempt))
            self._publish("resuming", cause)
        if self.ingress_messages:
            dropped = self.ingress_messages
            self.counters["dropped_inputs"] += dropped
            self._publish("inputs_dropped", {"count": dropped})
        self._flush()
        self._connect()

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _SetupExpired):
            if self.state == "connecting":
                self.state = "closing_failed"
                if self.io_id is not None:
                    self.cancel_io(self.io_id)
                self._terminal("setup_timeout", {})
            return
        if isinstance(message, _ResumeExpired):
            if self.state == "resuming" and message.attempt == self.resume_attempt:
                self.state = "closing_failed"
                if self.io_id is not None:
                    self.cancel_io(self.io_id)
                self._terminal("resume_failed", {})
            return
        super().handle_timer(message)

    # ---- calls -----------------------------------------------------------------------------------------------
    def _check(self, principal: str) -> None:
        if not hmac.compare_digest(principal_digest(principal), self.args.principal_digest):
            raise LiveError(
                "the principal does not own this Live session",
                reason="principal_mismatch",
                details={"session_id": self.args.session_id},
            )

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, LiveInput):
            self._check(request.principal)
            return self._input(request.kind, request.message, request.size)
        if isinstance(request, LiveSubscribe):
            self._check(request.principal)
            sub = Subscriber(request.subscription_id, ctx.reply_to, request.messages, request.bytes)
            if not self.fanout.add(sub):
                raise LiveError(
                    "the Live session has its maximum of subscribers",
                    reason="subscriber_limit",
                    details={"max_subscribers": self.cfg.max_subscribers},
                )
            return {"subscription_id": request.subscription_id, "state": self.state, "last_seq": self.seq}
        if isinstance(request, LiveUnsubscribe):
            self._check(request.principal)
            self.fanout.remove(request.subscription_id)
            return None
        if isinstance(request, LiveStatus):
            self._check(request.principal)
            return self.describe()
        if isinstance(request, LiveClose):
            self._check(request.principal)
            if self.state not in ("closing", "closed"):
                self.state = "closing"
                self.close_reason = request.reason
                if self.socket is not None:
                    self.socket.close()
                else:
                    self._terminal("closed", {"requested": request.reason})
            return None
        return super().handle_call(request, ctx)

    def _input(self, kind: str, message: dict[str, Any], size: int) -> int:
        if self.state != "active" or self.socket is None:
            raise LiveError(
                "the Live session is not active",
                reason="live_not_active",
                details={"session_id": self.args.session_id, "state": self.state},
            )
        text = json.dumps(message, separators=(",", ":"))
        if (
            self.ingress_messages + 1 > self.cfg.max_ingress_messages
            or self.ingress_bytes + len(text) > self.cfg.max_ingress_bytes
        ):
            raise LiveError(
                "the Live session's ingress queue is full",
                reason="ingress_full",
                details={"messages": self.ingress_messages, "bytes": self.ingress_bytes},
            )
        self.ingress_messages += 1
        self.ingress_bytes += len(text)
        self.socket.send(text)
        self.input_seq += 1
        self.counters["inputs"] += 1
        if kind == "audio":
            self.counters["audio_in_bytes"] += size
        elif kind == "activity_start":
            self.in_generation = False
        return self.input_seq

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, LiveAck):
            if not hmac.compare_digest(message.principal_digest, self.args.principal_digest):
                return
            for seq in message.seqs[:_MAX_ACKS]:
                for sub, event in self.fanout.ack(message.subscription_id, seq):
                    self._outbox.setdefault(sub.sub_id, (sub.target, []))[1].append(event)
            self._flush()
            return
        super().handle_info(message, sender)

    # ---- events ----------------------------------------------------------------------------------------------
    def _publish(self, kind: str, payload: dict[str, Any], data: bytes | None = None) -> None:
        self.seq += 1
        event = LiveEvent(self.args.session_id, self.seq, kind, payload, data, self.generation)
        sends, slow = self.fanout.publish(event)
        for sub, ev in sends:
            self._outbox.setdefault(sub.sub_id, (sub.target, []))[1].append(ev)
        for sub in slow:
            self._outbox.pop(sub.sub_id, None)
            self.send_to(sub.target, LiveDropped(sub.sub_id, self.args.session_id, "slow_subscriber"))

    def _flush(self) -> None:
        """Send what this message released: one ``LiveMessage`` per subscriber, its events in order."""
        outbox, self._outbox = self._outbox, {}
        for sub_id, (target, events) in outbox.items():
            self.send_to(target, LiveMessage(sub_id, tuple(events)))

    def _terminal(self, reason: str, details: dict[str, Any]) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        self._flush()
        self.seq += 1
        event = LiveEvent(self.args.session_id, self.seq, "terminal", {"reason": reason, **details})
        for sub in list(self.fanout.subs.values()):
            self.send_to(sub.target, LiveMessage(sub.sub_id, (event,)))
        self.fanout.subs.clear()
        self.stop("normal")

    # ---- tools -----------------------------------------------------------------------------------------------
    def _maybe_run_tools(self, calls: list[dict[str, Any]]) -> None:
        execution = self.cfg.tool_execution
        if execution is None or not execution.enabled:
            return
        for call in calls:
            if str(call.get("name", "")) in execution.allowed_tools and len(self.tool_queue) < _MAX_TOOL_CALLS:
                self.tool_queue.append(call)  # others are not authorised: the application answers them
        self._start_tools()

    def _start_tools(self) -> None:
        execution = self.cfg.tool_execution
        assert execution is not None
        limit = 1 if execution.policy == "sequential" else execution.max_concurrency
        while self.tool_queue and len(self.tool_calls) < limit:
            call = self.tool_queue.pop(0)
            name, call_id = str(call.get("name", "")), str(call.get("id", ""))
            self.tool_calls[call_id] = name
            deadline = time.monotonic() + execution.timeout_ms / 1000.0
            self.run_job(
                _RUN_TOOL,
                (list(execution.tools), name, call.get("args") or {}, self.args.session_id, call_id),
                deadline,
                self._tool_done(call_id, name),
            )

    def _tool_done(self, call_id: str, name: str) -> Any:
        def done(value: Any, error: AdkError | None) -> None:
            running = self.tool_calls.pop(call_id, None)
            self._start_tools()
            if running is None or self.state != "active" or self.socket is None:
                return  # cancelled by the provider, or the connection it belonged to is gone
            response = {"result": value} if error is None else {"error": {"reason": error.reason}}
            self._publish("tool_result", {"id": call_id, "name": name, "ok": error is None})
            self._flush()
            text = json.dumps(tool_response_message([{"id": call_id, "name": name, "response": response}]))
            self.ingress_messages += 1
            self.ingress_bytes += len(text)
            self.socket.send(text)

        return done

    # ---- status ----------------------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "session_id": self.args.session_id,
            "state": self.state,
            "model": self.cfg.provider_config.model,
            "started_at": self.started,
            "last_seq": self.seq,
            "input_seq": self.input_seq,
            "generation": self.generation,
            "resumes": self.resumes,
            "resumable": bool(self.handle),
            "ingress": {"messages": self.ingress_messages, "bytes": self.ingress_bytes},
            "subscribers": self.fanout.describe(),
            "slow_subscribers_dropped": self.fanout.dropped,
            "tool_calls_running": len(self.tool_calls),
            **{k: v for k, v in self.counters.items()},
        }

    def status(self) -> dict[str, Any]:
        return {"kind": "live_session", "session_id": self.args.session_id, "state": self.state}

    def terminate(self, reason: str) -> None:
        if self.io_id is not None:
            self.cancel_io(self.io_id)
        if self.state != "closed":
            for sub in list(self.fanout.subs.values()):
                self.send_to(sub.target, LiveDropped(sub.sub_id, self.args.session_id, "session_stopped"))
        index = LocalRef(place(INDEX_ID, self.args.hosts), INDEX_ID)
        try:
            self.send_to(index, ReleaseSlot(session_id=self.args.session_id))
        except AdkError:
            pass  # the index recounts the live sessions when it is full
        super().terminate(reason)
