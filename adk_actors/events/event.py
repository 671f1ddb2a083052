"""The event record shared by runner, sessions, runs and Live, with an exact, strict JSON round-trip."""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.content.model import Content, as_content
from adk_actors.content.parts import FunctionCallPart, FunctionResponsePart, Part
from adk_actors.errors import AdkError, ContentError, EventError
from adk_actors.secrets import prune_secrets

__all__ = ["EVENT_KEYS", "EVENT_SCHEMA_VERSION", "ErrorInfo", "Event", "EventActions", "Pause"]

EVENT_SCHEMA_VERSION = 1
MAX_ID_CHARS = 256
MAX_REASON_CHARS = 256


def _fail(message: str, field: str, **details: Any) -> EventError:
    return EventError(message, reason="invalid_event", details={"field": field, **details})


def _type_fail(field: str, expected: str, value: Any) -> EventError:
    return _fail("event field has the wrong type", field, expected=expected, type=type(value).__name__)


def _str(value: Any, field: str, *, allow_empty: bool = False, max_chars: int = MAX_ID_CHARS) -> str:
    if not isinstance(value, str):
        raise _type_fail(field, "str", value)
    if (not value and not allow_empty) or len(value) > max_chars or "\x00" in value:
        raise _fail("event string is empty, too long or contains NUL", field, max_chars=max_chars)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail("event string is not valid Unicode", field) from None
    return value


def _timestamp(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_fail("timestamp", "finite float", value)
    try:
        ts = float(value)  # an int beyond the float range (10**400) overflows here
    except OverflowError:
        raise _type_fail("timestamp", "finite float", value) from None
    if not math.isfinite(ts):
        raise _type_fail("timestamp", "finite float", value)
    return ts


def _opt_str(value: Any, field: str) -> str | None:
    return None if value is None else _str(value, field)


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise _type_fail(field, "bool", value)
    return value


def _json_map(value: Any, field: str) -> dict[str, Any]:
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    if not isinstance(value, dict):
        raise _type_fail(field, "dict", value)
    return copy_json(value, error=EventError, field=field)[0]


def _opt_json_map(value: Any, field: str) -> dict[str, Any] | None:
    return None if value is None else _json_map(value, field)


def _check_keys(data: Any, field: str, required: frozenset[str], optional: frozenset[str] = frozenset()) -> None:
    if not isinstance(data, dict):
        raise _type_fail(field, "dict", data)
    keys = set(data)
    if not required <= keys:
        raise _fail("event map is missing a key", field, missing=sorted(required - keys))
    if keys - required - optional:
        raise EventError(
            "event map has an unknown key",
            reason="unknown_key",
            details={"field": field, "count": len(keys - required - optional)},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """A pause request carried by an event (human confirmation, long-running work, ...)."""

    continuation_id: str
    """Opaque id the resume must present."""
    reason: str
    """Why the run paused (``"tool_confirmation"``, ``"long_running"``, ...)."""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Bounded JSON-safe structural details (for confirmation: ``type``, ``action_id``, ``hint``)."""

    def __post_init__(self) -> None:
        _str(self.continuation_id, "actions.pause.continuation_id")
        _str(self.reason, "actions.pause.reason", max_chars=MAX_REASON_CHARS)
        object.__setattr__(self, "details", _json_map(self.details, "actions.pause.details"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"continuation_id", "reason", "details"}``."""
        return {"continuation_id": self.continuation_id, "reason": self.reason, "details": copy_json(self.details)[0]}

    @classmethod
    def from_dict(cls, data: Any) -> Pause:
        """Decode the JSON form strictly.

        Raises:
            EventError: reason ``invalid_event`` or ``unknown_key``.
        """
        _check_keys(data, "actions.pause", frozenset({"continuation_id", "reason", "details"}))
        return cls(continuation_id=data["continuation_id"], reason=data["reason"], details=data["details"])


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """The structural description of a failure recorded in an event (never exception text or values)."""

    reason: str
    """The reason tag (``AdkError.reason``)."""
    type: str
    """The error class name."""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    """JSON-safe structural details."""

    def __post_init__(self) -> None:
        _str(self.reason, "error.reason", max_chars=MAX_REASON_CHARS)
        _str(self.type, "error.type", max_chars=MAX_REASON_CHARS)
        object.__setattr__(self, "details", _json_map(self.details, "error.details"))

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """Describe ``exc``: an ``AdkError`` keeps its reason and secret-pruned details; anything else becomes
        reason ``internal_error`` with its class name only."""
        type_name = type(exc).__name__[:MAX_REASON_CHARS]
        if isinstance(exc, AdkError):
            try:
                return cls(
                    reason=exc.reason[:MAX_REASON_CHARS] or "error", type=type_name, details=prune_secrets(exc.details)
                )
            except EventError:
                # Describing a failure must not fail: fall back to the bare class name.
                return cls(reason="error", type=type_name, details={})
        return cls(reason="internal_error", type=type_name, details={})

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"reason", "type", "details"}``."""
        return {"reason": self.reason, "type": self.type, "details": copy_json(self.details)[0]}

    @classmethod
    def from_dict(cls, data: Any) -> ErrorInfo:
        """Decode the JSON form strictly.

        Raises:
            EventError: reason ``invalid_event`` or ``unknown_key``.
        """
        _check_keys(data, "error", frozenset({"reason", "type", "details"}))
        return cls(reason=data["reason"], type=data["type"], details=data["details"])


_ACTION_KEYS = frozenset({"state_delta", "pause", "transfer_to_agent", "escalate", "context_effects"})


@dataclass(frozen=True, slots=True, kw_only=True)
class EventActions:
    """Side effects an event asks for: state changes, a pause, a transfer, escalation, context effects."""

    state_delta: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Scoped state keys (``"x"``, ``"user:x"``, ``"app:x"``, ``"temp:x"``) to JSON values."""
    pause: Pause | None = None
    """A pause request, or ``None``."""
    transfer_to_agent: str | None = None
    """The agent to transfer control to, or ``None``."""
    escalate: bool = False
    """Whether the author escalates to its parent (ends a loop)."""
    context_effects: tuple[dict[str, Any], ...] = ()
    """Opaque JSON maps describing context changes (compaction, rewinds) for the context engine."""
    runtime_policy_decision: dict[str, Any] | None = None
    """On a ``system`` audit event: the immutable record of a runtime-policy denial (ids, policy fingerprint,
    operation, subject, outcome/reason, byte counts; never arguments, content or credentials)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_delta", _json_map(self.state_delta, "actions.state_delta"))
        if self.pause is not None and not isinstance(self.pause, Pause):
            raise _type_fail("actions.pause", "Pause", self.pause)
        _opt_str(self.transfer_to_agent, "actions.transfer_to_agent")
        _bool(self.escalate, "actions.escalate")
        effects = self.context_effects
        if not isinstance(effects, list | tuple):
            raise _type_fail("actions.context_effects", "list", effects)
        object.__setattr__(
            self, "context_effects", tuple(_json_map(e, f"actions.context_effects[{i}]") for i, e in enumerate(effects))
        )
        object.__setattr__(
            self,
            "runtime_policy_decision",
            _opt_json_map(self.runtime_policy_decision, "actions.runtime_policy_decision"),
        )

    def is_empty(self) -> bool:
        """Whether no action is set."""
        return self == EventActions()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (every key present; absent values are ``null``/``false``/empty), plus
        ``runtime_policy_decision`` on audit events only."""
        data = {
            "state_delta": copy_json(self.state_delta)[0],
            "pause": None if self.pause is None else self.pause.to_dict(),
            "transfer_to_agent": self.transfer_to_agent,
            "escalate": self.escalate,
            "context_effects": [copy_json(e)[0] for e in self.context_effects],
        }
        if self.runtime_policy_decision is not None:
            data["runtime_policy_decision"] = copy_json(self.runtime_policy_decision)[0]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> EventActions:
        """Decode the JSON form strictly.

        Raises:
            EventError: reason ``invalid_event`` or ``unknown_key``.
        """
        _check_keys(data, "actions", _ACTION_KEYS, frozenset({"runtime_policy_decision"}))
        effects = data["context_effects"]
        if not isinstance(effects, list):
            raise _type_fail("actions.context_effects", "list", effects)
        return cls(
            state_delta=data["state_delta"],
            pause=None if data["pause"] is None else Pause.from_dict(data["pause"]),
            transfer_to_agent=data["transfer_to_agent"],
            escalate=data["escalate"],
            context_effects=tuple(effects),
            runtime_policy_decision=data.get("runtime_policy_decision"),
        )

    def redacted(self) -> EventActions:
        """A copy whose state delta, pause details and context effects have secret-named keys pruned."""
        pause = self.pause
        if pause is not None:
            pause = dataclasses.replace(pause, details=prune_secrets(pause.details))
        return dataclasses.replace(
            self,
            state_delta=prune_secrets(self.state_delta),
            pause=pause,
            context_effects=tuple(prune_secrets(e) for e in self.context_effects),
        )


_EVENT_KEYS = frozenset(
    {
        "schema_version",
        "id",
        "invocation_id",
        "author",
        "timestamp",
        "content",
        "partial",
        "is_final",
        "actions",
        "provider_metadata",
        "error",
        "branch",
    }
)
_OPTIONAL_EVENT_KEYS = frozenset({"thought_signature"})
EVENT_KEYS = _EVENT_KEYS | _OPTIONAL_EVENT_KEYS
"""Every key the JSON form of an event may have."""


def _redact_part(part: Part) -> Part:
    if isinstance(part, FunctionCallPart):
        return dataclasses.replace(part, args=prune_secrets(part.args))
    if isinstance(part, FunctionResponsePart):
        return dataclasses.replace(part, response=prune_secrets(part.response))
    return part


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One record in a session's history.

    ``to_dict()``/``from_dict()`` round-trip exactly; ``from_dict`` rejects unknown keys and wrong types.
    """

    id: str
    """Unique event id (``Event.new`` uses uuid4 hex)."""
    invocation_id: str
    """The invocation (turn) this event belongs to; may be empty for out-of-turn state updates."""
    author: str
    """``"user"`` or the name of the agent that produced the event."""
    timestamp: float
    """Unix seconds."""
    content: Content | None = None
    """The event's content, or ``None`` (for example a pure state update)."""
    partial: bool = False
    """Whether this is a streaming fragment (never persisted as history)."""
    is_final: bool = False
    """Whether this is the final response of its invocation."""
    actions: EventActions = dataclasses.field(default_factory=EventActions)
    """Requested side effects."""
    provider_metadata: dict[str, Any] | None = None
    """JSON-safe provider metadata, or ``None``: on Runner events, the grounding envelope
    ``{"schema_version": 1, "provider": "gemini", "type": "google_search_grounding", "metadata": {...}}`` of the
    model answer (partial, tool-call or final) whose candidate carried grounding."""
    thought_signature: str | None = None
    """The thought signature of the function call an event answers when its content cannot carry it (a
    long-running call's terminal response), or ``None``; in the JSON form only when set."""
    error: ErrorInfo | None = None
    """Structural error information when the event records a failure."""
    branch: str | None = None
    """Dotted agent-tree branch (``"root.child"``) isolating sub-agent history, or ``None``."""

    def __post_init__(self) -> None:
        _str(self.id, "id")
        _str(self.invocation_id, "invocation_id", allow_empty=True)
        _str(self.author, "author")
        object.__setattr__(self, "timestamp", _timestamp(self.timestamp))
        if self.content is not None and not isinstance(self.content, Content):
            raise _type_fail("content", "Content", self.content)
        _bool(self.partial, "partial")
        _bool(self.is_final, "is_final")
        if not isinstance(self.actions, EventActions):
            raise _type_fail("actions", "EventActions", self.actions)
        object.__setattr__(self, "provider_metadata", _opt_json_map(self.provider_metadata, "provider_metadata"))
        _opt_str(self.thought_signature, "thought_signature")
        if self.error is not None and not isinstance(self.error, ErrorInfo):
            raise _type_fail("error", "ErrorInfo", self.error)
        _opt_str(self.branch, "branch")

    @classmethod
    def new(
        cls,
        *,
        invocation_id: str,
        author: str,
        content: Content | str | dict[str, Any] | None = None,
        partial: bool = False,
        is_final: bool = False,
        actions: EventActions | None = None,
        provider_metadata: dict[str, Any] | None = None,
        error: ErrorInfo | None = None,
        branch: str | None = None,
        timestamp: float | None = None,
        id: str | None = None,
        thought_signature: str | None = None,
    ) -> Event:
        """Create an event with a fresh uuid4-hex id and the current wall-clock timestamp.

        ``content`` may be a ``str`` (one text part), a content map or a :class:`Content`.

        Raises:
            EventError: a field is malformed.
            ContentError: ``content`` is not valid content.
        """
        return cls(
            id=id or uuid.uuid4().hex,
            invocation_id=invocation_id,
            author=author,
            timestamp=time.time() if timestamp is None else timestamp,
            content=None if content is None else as_content(content),
            partial=partial,
            is_final=is_final,
            actions=actions or EventActions(),
            provider_metadata=provider_metadata,
            error=error,
            branch=branch,
            thought_signature=thought_signature,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (every key present but ``thought_signature``, which appears only when set)."""
        out: dict[str, Any] = {
            "schema_version": EVENT_SCHEMA_VERSION,
            "id": self.id,
            "invocation_id": self.invocation_id,
            "author": self.author,
            "timestamp": self.timestamp,
            "content": None if self.content is None else self.content.to_dict(),
            "partial": self.partial,
            "is_final": self.is_final,
            "actions": self.actions.to_dict(),
            "provider_metadata": None if self.provider_metadata is None else copy_json(self.provider_metadata)[0],
            "error": None if self.error is None else self.error.to_dict(),
            "branch": self.branch,
        }
        if self.thought_signature is not None:
            out["thought_signature"] = self.thought_signature
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Event:
        """Decode the JSON form strictly: every key required, unknown keys and wrong types rejected.

        Raises:
            EventError: reason ``invalid_event``, ``unknown_key`` or ``unsupported_schema_version``; content
                failures are re-raised as ``EventError`` with the content reason in ``details["content_reason"]``.
        """
        _check_keys(data, "event", _EVENT_KEYS, _OPTIONAL_EVENT_KEYS)
        version = data["schema_version"]
        if isinstance(version, bool) or not isinstance(version, int) or version != EVENT_SCHEMA_VERSION:
            raise EventError(
                "unsupported event schema version",
                reason="unsupported_schema_version",
                details={"supported": EVENT_SCHEMA_VERSION},
            )
        content = None
        if data["content"] is not None:
            try:
                content = Content.from_dict(data["content"])
            except ContentError as exc:
                raise EventError(
                    "event content is invalid",
                    reason="invalid_event",
                    details={
                        "field": "content",
                        "content_reason": exc.reason,
                        **{k: v for k, v in exc.details.items() if k != "field"},
                        "content_field": exc.details.get("field"),
                    },
                ) from None
        return cls(
            id=data["id"],
            invocation_id=data["invocation_id"],
            author=data["author"],
            timestamp=data["timestamp"],
            content=content,
            partial=data["partial"],
            is_final=data["is_final"],
            actions=EventActions.from_dict(data["actions"]),
            provider_metadata=data["provider_metadata"],
            error=None if data["error"] is None else ErrorInfo.from_dict(data["error"]),
            branch=data["branch"],
            thought_signature=data.get("thought_signature"),
        )

    def redacted(self) -> Event:
        """A copy safe to show outside the trust boundary (logs, dev UI, remote agents).

        Secret-named keys are pruned from the state delta, pause details, context effects, provider metadata,
        error details and function-call args/responses. Stored events stay exact; redact at the edge.
        """
        content = self.content
        if content is not None:
            content = Content(parts=tuple(_redact_part(p) for p in content.parts))
        error = self.error
        if error is not None:
            error = dataclasses.replace(error, details=prune_secrets(error.details))
        return dataclasses.replace(
            self,
            content=content,
            actions=self.actions.redacted(),
            error=error,
            provider_metadata=None if self.provider_metadata is None else prune_secrets(self.provider_metadata),
        )

    def text(self) -> str | None:
        """The content's visible text, or ``None`` when there is no content."""
        return None if self.content is None else self.content.visible_text()

    def is_final_response(self) -> bool:
        """Whether this is a complete (non-partial) final response."""
        return self.is_final and not self.partial
