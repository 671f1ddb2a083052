"""Developer operations over Live sessions, acting as the node's configured ``dev_live_principal``.

``/dev/v1/live/...`` (:mod:`adk_actors.web.dev`), the voice page's WebSocket (:mod:`adk_actors.web.voice_page`),
the console's Live tab and ``adk live`` (:mod:`adk_actors.cli.live_cmd`) all call :class:`LiveOps`, so they answer
the same input with the same reason. The developer surfaces never create a Live session and never take a
principal, model or key from a request: they see only the sessions an application started with exactly the
configured principal (an ownership capability, not a display name). Without one, every operation fails with
``live_unavailable``; a session of another principal is indistinguishable from a missing one
(``live_session_not_found``, with no details).

What is shown is allowlisted here, like the trigger operations: a session's status by key (:data:`STATUS_KEYS`,
subscribers as a count) and each event by kind (:data:`EVENT_PAYLOAD_KEYS`). An ``audio`` event is only its size
(``{"kind": "audio", "seq": n, "bytes": n}``); PCM, media bytes, grounding metadata and resumption handles never
reach a developer surface.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from adk_actors.errors import LiveError, ValidationError, json_safe
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.secrets import Secret

__all__ = [
    "EVENT_PAYLOAD_KEYS",
    "MAX_LIVE_SESSIONS",
    "PRINCIPAL_ENV",
    "STATUS_KEYS",
    "LiveOps",
    "live_event_json",
    "live_principal",
    "live_status_json",
]

PRINCIPAL_ENV = "ADK_DEV_LIVE_PRINCIPAL"
"""The environment variable a developer server falls back to when its settings carry no ``dev_live_principal``."""
MAX_LIVE_SESSIONS = 256
"""Most sessions the list shows (sorted by id)."""
STATUS_KEYS = (
    "session_id",
    "state",
    "model",
    "started_at",
    "last_seq",
    "input_seq",
    "generation",
    "resumes",
    "resumable",
    "ingress",
    "subscribers",
    "slow_subscribers_dropped",
    "tool_calls_running",
    "frames",
    "inputs",
    "audio_in_bytes",
    "audio_out_bytes",
    "dropped_inputs",
)
"""What a session's status shows (``subscribers`` as a count, ``ingress`` as ``{messages, bytes}``)."""
_TRANSCRIPTION = ("text", "finished", "interim")
EVENT_PAYLOAD_KEYS: Mapping[str, tuple[str, ...]] = {
    "ready": (),
    "text": ("text",),
    "thought": ("text",),
    "output_transcription": _TRANSCRIPTION,
    "input_transcription": _TRANSCRIPTION,
    "tool_call": ("calls",),
    "tool_call_cancellation": ("ids",),
    "tool_result": ("id", "name", "ok"),
    "interrupted": (),
    "generation_complete": (),
    "turn_complete": ("reason", "waiting_for_input"),
    "usage": (
        "prompt_tokens",
        "response_tokens",
        "total_tokens",
        "cached_content_tokens",
        "thoughts_tokens",
        "tool_use_prompt_tokens",
    ),
    "grounding": (),
    "go_away": ("time_left_ms",),
    "resuming": ("close_code", "close_reason", "error"),
    "resumed": ("resumes",),
    "inputs_dropped": ("count",),
    "error": ("reason",),
    "terminal": ("reason", "close_code", "close_reason", "error"),
}
"""The payload keys each event kind shows; a kind not listed shows an empty payload, ``audio`` only its size."""
_SUBSCRIBE_CREDIT = {"messages": 16, "bytes": 4 * 1024 * 1024}
_POLL_S = 0.5


def live_principal(settings: Any, environ: Mapping[str, str] | None = None) -> Secret | None:
    """The developer Live principal: ``settings.dev_live_principal``, else :data:`PRINCIPAL_ENV` of ``environ``
    (default ``os.environ``), else ``None``. (A developer server started by ``adk serve`` gets its settings without
    secrets, so it reads the variable the node was started with.)"""
    found = getattr(settings, "dev_live_principal", None)
    if isinstance(found, Secret):
        return found
    if isinstance(found, str) and found:
        return Secret(found)
    raw = (os.environ if environ is None else environ).get(PRINCIPAL_ENV)
    return Secret(raw) if raw else None


def live_status_json(found: Mapping[str, Any]) -> dict[str, Any]:
    """A session status (:func:`adk_actors.live.live_status`) with the published keys only."""
    shown = {key: json_safe(found.get(key)) for key in STATUS_KEYS}
    subscribers = found.get("subscribers")
    shown["subscribers"] = len(subscribers) if isinstance(subscribers, list) else 0
    ingress = found.get("ingress")
    shown["ingress"] = (
        {k: json_safe(ingress.get(k)) for k in ("messages", "bytes")} if isinstance(ingress, Mapping) else {}
    )
    return shown


def live_event_json(event: Any) -> dict[str, Any]:
    """One :class:`~adk_actors.live.LiveEvent` as ``{"kind", "seq", "payload"}`` with the published payload keys;
    an ``audio`` event as ``{"kind": "audio", "seq", "bytes"}`` (its size, never its PCM)."""
    if event.kind == "audio":
        return {"kind": "audio", "seq": event.seq, "bytes": len(event.data or b"")}
    keys = EVENT_PAYLOAD_KEYS.get(event.kind, ())
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    return {
        "kind": event.kind,
        "seq": event.seq,
        "payload": {key: json_safe(payload[key]) for key in keys if key in payload},
    }


def _not_found() -> LiveError:
    return LiveError("no such Live session", reason="live_session_not_found", details={})


class LiveOps:
    """The Live operations of one node for one developer principal.

    Args:
        system: the node (an attached or owned ``ActorSystemHandle``).
        principal: the developer Live principal (see :func:`live_principal`); ``None``: every operation fails with
            ``live_unavailable``.
    """

    def __init__(self, system: ActorSystemHandle, principal: Secret | str | None) -> None:
        self.system = system
        if isinstance(principal, str) and not isinstance(principal, Secret):
            if not principal:
                raise ValidationError("a Live principal is a non-empty string", reason="invalid_principal", details={})
            principal = Secret(principal)
        if principal is not None and not isinstance(principal, Secret):
            raise ValidationError("a Live principal is a non-empty string", reason="invalid_principal", details={})
        self._principal: Secret | None = principal

    @classmethod
    def from_settings(cls, system: ActorSystemHandle, environ: Mapping[str, str] | None = None) -> LiveOps:
        """The operations for ``system`` acting as its :func:`live_principal`."""
        return cls(system, live_principal(system.settings, environ))

    @property
    def available(self) -> bool:
        """Whether a developer Live principal is configured."""
        return self._principal is not None

    def _owner(self) -> str:
        if self._principal is None:
            raise LiveError(
                "developer Live access needs dev_live_principal (ADK_DEV_LIVE_PRINCIPAL)",
                reason="live_unavailable",
                details={},
            )
        return self._principal.reveal()

    def _ref(self, session_id: Any) -> Any:
        from adk_actors.live.api import LiveSessionRef, check_live_session_id

        return LiveSessionRef(check_live_session_id(session_id), self.system.settings.hosts, self.system)

    def list_sessions(self) -> dict[str, Any]:
        """``{"sessions": [status ...], "truncated": bool}``: the principal's running sessions (at most
        :data:`MAX_LIVE_SESSIONS`, by id).

        Raises:
            LiveError: ``live_unavailable``.
        """
        from adk_actors.live import live_sessions

        found = live_sessions(self._owner(), system=self.system, limit=MAX_LIVE_SESSIONS + 1)
        shown = [live_status_json(s) for s in found[:MAX_LIVE_SESSIONS]]
        return {"sessions": shown, "truncated": len(found) > MAX_LIVE_SESSIONS}

    def status(self, session_id: Any) -> dict[str, Any]:
        """One session's status.

        Raises:
            ValidationError: ``invalid_session_id``.
            LiveError: ``live_unavailable``, ``live_session_not_found`` (also for another principal's session).
        """
        from adk_actors.live import live_status

        owner = self._owner()
        ref = self._ref(session_id)
        try:
            return live_status_json(live_status(ref, owner))
        except LiveError as err:
            if err.reason in ("principal_mismatch", "live_session_not_found"):
                raise _not_found() from None
            raise

    def send_text(self, session_id: Any, text: Any) -> dict[str, Any]:
        """Send one text input; ``{"input_seq": n}``.

        Raises:
            ValidationError: ``invalid_session_id``, ``invalid_text`` (not a non-empty str of at most 64 KiB).
            LiveError: ``live_unavailable``, ``live_session_not_found``, ``live_not_active``, ``ingress_full``.
        """
        from adk_actors.live import live_send_text

        owner = self._owner()
        ref = self._ref(session_id)
        try:
            return {"input_seq": live_send_text(ref, owner, text)}
        except LiveError as err:
            if err.reason in ("principal_mismatch", "live_session_not_found"):
                raise _not_found() from None
            if err.reason in ("live_not_active", "ingress_full"):
                raise LiveError(err.message, reason=err.reason, details={}) from None
            raise

    def subscribe(self, session_id: Any, idle_timeout: float = 30.0) -> Iterator[dict[str, Any] | None]:
        """The session's future events, projected (:func:`live_event_json`), for a stream that writes each one.

        The first item is ``{"kind": "subscribed", "state": ...}`` once the subscription is in place (inputs sent
        after it produce events this iterator sees). An event is acknowledged when the *next* item is asked for —
        after the consumer wrote it — so the session's credit follows the writer. While nothing happens the
        iterator yields ``None`` about every half second (so a consumer can stop it promptly). It ends after the
        ``terminal`` event; closing it unsubscribes.

        Raises:
            ValidationError: ``invalid_session_id`` (by the first ``next()``, like every error here).
            LiveError: ``live_unavailable``, ``live_session_not_found``, ``subscriber_limit``;
                ``subscriber_dropped`` when the session removed this slow subscriber.
        """
        owner = self._owner()
        ref = self._ref(session_id)
        return self._events(ref, owner, idle_timeout)

    def _events(self, ref: Any, owner: str, idle_timeout: float) -> Iterator[dict[str, Any] | None]:
        from adk_actors.live import live_subscribe

        try:
            subscription = live_subscribe(ref, owner, idle_timeout=idle_timeout, **_SUBSCRIBE_CREDIT)
        except LiveError as err:
            if err.reason in ("principal_mismatch", "live_session_not_found"):
                raise _not_found() from None
            raise
        try:
            yield {"kind": "subscribed", "state": subscription.state}
            while True:
                event = subscription.next(_POLL_S)
                if event is None:
                    yield None
                    continue
                yield live_event_json(event)
                if event.kind == "terminal":
                    return
                subscription.ack(event.seq)
        except StopIteration:
            return
        finally:
            subscription.close()

    def open_voice(
        self,
        session_id: Any,
        *,
        credit: Mapping[str, int] | None = None,
        max_audio_frame_bytes: int = 64_000,
        timeout: float = 10.0,
    ) -> Any:
        """Start the session's voice bridge, owned by the calling thread's process (a
        :class:`~adk_actors.live.VoiceBridge`; use it from one thread only).

        Raises:
            ValidationError: ``invalid_session_id``.
            LiveError: ``live_unavailable``, ``live_session_not_found``, ``live_not_active``,
                ``voice_bridge_exists``.
        """
        from adk_actors.errors import ActorCrashed, NameNotFound
        from adk_actors.live import start_live_voice_bridge

        owner = self._owner()
        ref = self._ref(session_id)
        try:
            return start_live_voice_bridge(
                ref, owner, credit=credit, max_audio_frame_bytes=max_audio_frame_bytes, timeout=timeout
            )
        except LiveError as err:
            if err.reason in ("principal_mismatch", "live_session_not_found"):
                raise _not_found() from None
            raise LiveError(err.message, reason=err.reason, details={}) from None
        except (ActorCrashed, NameNotFound):
            raise _not_found() from None
