"""Session values and the event codec shared by every session backend.

Callers pass ``Event`` objects (or event dicts, validated strictly by ``Event.from_dict``); the stores keep the
canonical ``Event.to_dict()`` form and decode it again on reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from adk_actors.content.canonical import canonical_dumps, canonical_loads
from adk_actors.errors import EventError, ValidationError
from adk_actors.events import Event
from adk_actors.secrets import scrub_event_text
from adk_actors.sessions.state import ScopedDelta, scope_of, split_delta

__all__ = [
    "TEMP_VALUE_MARKER",
    "AppendResult",
    "PreparedEvent",
    "Session",
    "SessionRef",
    "decode_event",
    "event_to_dict",
    "prepare_event",
    "validate_name",
]

MAX_NAME_LENGTH: Final = 255
TEMP_VALUE_MARKER: Final = "[temp]"
"""What a stored event record holds in place of each ``temp:`` value of its ``actions.state_delta``."""
# Control characters, and lone surrogates (U+D800-U+DFFF: not encodable as UTF-8, so no store could keep them).
_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def validate_name(value: Any, what: str) -> str:
    """Check an app name, user id, session id, agent name or conversation key.

    Raises:
        ValidationError: reason ``invalid_name`` for non-strings, empty strings, control characters, lone
            surrogates or more than 255 characters.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH or _CONTROL.search(value):
        raise ValidationError(
            f"invalid {what}", reason="invalid_name", details={"field": what, "type": type(value).__name__}
        )
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRef:
    """The address of one session: what every per-session call (and message) carries."""

    app_name: str
    """The application the session belongs to."""
    user_id: str
    """The user the session belongs to."""
    session_id: str
    """The session id, unique within app/user."""

    def __post_init__(self) -> None:
        validate_name(self.app_name, "app_name")
        validate_name(self.user_id, "user_id")
        validate_name(self.session_id, "session_id")

    def as_details(self) -> dict[str, str]:
        """Structural context for errors."""
        return {"app_name": self.app_name, "user_id": self.user_id, "session_id": self.session_id}


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A snapshot of one session.

    ``state`` is the merged view (app, user, session and in-flight ``temp:`` keys); it is a copy, so editing it
    changes nothing in the store. ``list_sessions`` returns sessions with ``events == ()``.
    """

    app_name: str
    """The application."""
    user_id: str
    """The user."""
    id: str
    """The session id."""
    state: dict[str, Any] = field(default_factory=dict)
    """Merged state view (a copy)."""
    events: tuple[Event, ...] = ()
    """``Event`` objects in sequence order."""
    event_seqs: tuple[int, ...] = ()
    """The per-session sequence number of each event in ``events`` (strictly increasing)."""
    last_update_time: float = 0.0
    """Wall-clock seconds of the last write."""
    version: int = 0
    """Incremented by every write to the session (events, state, compaction)."""
    last_seq: int = 0
    """The sequence number of the newest event ever appended (0 when none)."""

    @property
    def ref(self) -> SessionRef:
        """This session's address."""
        return SessionRef(app_name=self.app_name, user_id=self.user_id, session_id=self.id)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResult:
    """What ``add_event`` / ``add_event_if_state`` return: the position of the event and the state after it."""

    seq: int
    """The event's per-session sequence number."""
    version: int
    """The session version after the append."""
    last_update_time: float
    """Wall-clock seconds of the append."""
    state: dict[str, Any] = field(default_factory=dict)
    """The merged state view after the append (including in-flight ``temp:`` keys)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedEvent:
    """An event validated and projected for storage."""

    data: dict[str, Any]
    """The event dict to store, round-tripped through canonical JSON (a private deep copy); each ``temp:`` value
    of its state delta is replaced by :data:`TEMP_VALUE_MARKER` (the key stays)."""
    delta: ScopedDelta
    """The state delta to apply (empty for partial events, which never apply state)."""
    event_id: str
    """``data["id"]``."""
    invocation_id: str
    """``data["invocation_id"]`` (``""`` when missing)."""
    author: str
    """``data["author"]``."""
    timestamp: float
    """``data["timestamp"]``."""
    partial: bool
    """Whether this is a streamed partial event."""
    has_content: bool
    """Whether the event carries content."""
    is_final: bool
    """Whether the event is final."""


def event_to_dict(event: Any) -> dict[str, Any]:
    """The canonical dict shape of an ``Event`` or of an event dict (validated strictly by ``Event.from_dict``).

    Raises:
        EventError: reason ``invalid_event`` (or ``unknown_key``, ``unsupported_schema_version``) when ``event``
            is neither an ``Event`` nor a valid event dict.
    """
    if isinstance(event, Event):
        return event.to_dict()
    if isinstance(event, Mapping):
        return Event.from_dict(dict(event)).to_dict()
    raise EventError(
        "an event must be an Event or an event dict", reason="invalid_event", details={"type": type(event).__name__}
    )


def prepare_event(event: Any) -> PreparedEvent:
    """Validate an event for storage and split its state delta by scope.

    ``delta`` keeps the real ``temp:`` values (they apply to the in-flight state); ``data``, the record every
    backend persists, holds :data:`TEMP_VALUE_MARKER` in their place, so no ``temp:`` value is ever stored.

    Raises:
        EventError: reason ``invalid_event`` when a required field is missing or of the wrong type.
        ValidationError: reason ``invalid_json`` when the event is not JSON-safe (NaN, Infinity, NUL, ...), or
            ``invalid_state`` for a malformed state delta.
    """
    # Every backend stores through here: a configured secret pasted into a message is never persisted.
    data = scrub_event_text(canonical_loads(canonical_dumps(event_to_dict(event))))
    event_id, author, ts = data.get("id"), data.get("author"), data.get("timestamp")
    invocation_id = data.get("invocation_id") or ""
    if not isinstance(event_id, str) or not event_id:
        raise EventError("event id must be a non-empty string", reason="invalid_event", details={"field": "id"})
    if not isinstance(author, str):
        raise EventError("event author must be a string", reason="invalid_event", details={"field": "author"})
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        raise EventError("event timestamp must be a number", reason="invalid_event", details={"field": "timestamp"})
    if not isinstance(invocation_id, str):
        raise EventError("invocation_id must be a string", reason="invalid_event", details={"field": "invocation_id"})
    partial = data.get("partial", False)
    is_final = data.get("is_final", False)
    if not isinstance(partial, bool) or not isinstance(is_final, bool):
        raise EventError("partial and is_final must be booleans", reason="invalid_event")
    actions = data.get("actions") or {}
    if not isinstance(actions, dict):
        raise EventError("event actions must be an object", reason="invalid_event", details={"field": "actions"})
    raw_delta = actions.get("state_delta") or {}
    try:
        delta = split_delta(raw_delta)
    except ValidationError as exc:
        raise EventError(exc.message, reason=exc.reason, details=exc.details) from None
    if any(scope_of(key) == "temp" for key in raw_delta):
        # The stored record keeps every temp: key (rewind must see that one was set) but never its value.
        data["actions"] = {
            **actions,
            "state_delta": {k: (TEMP_VALUE_MARKER if scope_of(k) == "temp" else v) for k, v in raw_delta.items()},
        }
    return PreparedEvent(
        data=data,
        delta=ScopedDelta() if partial else delta,
        event_id=event_id,
        invocation_id=invocation_id,
        author=author,
        timestamp=float(ts),
        partial=partial,
        has_content=data.get("content") is not None,
        is_final=is_final,
    )


def decode_event(data: dict[str, Any]) -> Event:
    """A stored event dict as an ``Event``.

    Raises:
        EventError: the stored dict is not a valid event.
    """
    return Event.from_dict(data)
