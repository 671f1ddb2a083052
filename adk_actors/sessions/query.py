"""Authenticated, snapshot-bound pagination and non-destructive rewind over any session service.

Cursors are ``<payload>.<mac>`` (both base64url): the payload names the page kind, the exact scope, a digest of
the filter/order/page size, a digest of the snapshot the first page was cut from, and the next offset; the MAC is
HMAC-SHA256 under the caller's cursor secret. A cursor whose MAC fails, or that is presented for another scope,
filter, order or page size, raises ``SessionError(reason="invalid_cursor")``; one whose source changed since it
was issued raises ``SessionError(reason="stale_cursor")``. Cursor secrets belong in application secret storage
and must be the same on every node that serves a cursor.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from adk_actors.content.canonical import canonical_dumps, canonical_loads, check_json_safe
from adk_actors.errors import SessionError, ValidationError
from adk_actors.events import Event
from adk_actors.sessions.base import BaseSessionService, as_ref
from adk_actors.sessions.logic import new_session_id
from adk_actors.sessions.model import Session, SessionRef, validate_name
from adk_actors.sessions.state import scope_of

__all__ = [
    "EventFilter",
    "EventPage",
    "RewindResult",
    "SessionPage",
    "get",
    "list",
    "new_cursor_secret",
    "rewind",
]

MAX_PAGE: Final = 1000
_CURSOR_VERSION: Final = 1
_MAC_CONTEXT: Final = b"adk_actors.sessions.query.cursor\x00"
_MIN_SECRET_BYTES: Final = 16

_builtin_list = list


def new_cursor_secret() -> bytes:
    """A fresh 32-byte cursor secret (store it with your other application secrets)."""
    return secrets.token_bytes(32)


def _is_json_text(text: str) -> bool:
    try:
        check_json_safe(text)
    except ValidationError:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class EventFilter:
    """Which events a page shows; ``None`` fields do not filter.

    Authors and invocation ids must be strings without NUL characters or lone surrogates (``invalid_filter``).
    """

    authors: tuple[str, ...] | None = None
    """Keep events by these authors (a single ``str`` is accepted)."""
    invocation_ids: tuple[str, ...] | None = None
    """Keep events of these invocations (a single ``str`` is accepted)."""
    partial: bool | None = None
    """Keep only partial (``True``) or only complete (``False``) events."""
    since: float | None = None
    """Keep events with ``timestamp >= since``."""
    until: float | None = None
    """Keep events with ``timestamp < until``."""
    has_content: bool | None = None
    """Keep only events with (``True``) or without (``False``) content."""

    def __post_init__(self) -> None:
        for name in ("authors", "invocation_ids"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str):
                value = (value,)
            if not isinstance(value, _builtin_list | tuple | set | frozenset) or not all(
                isinstance(v, str) and _is_json_text(v) for v in value
            ):
                raise ValidationError(
                    f"{name} must be a collection of strings", reason="invalid_filter", details={"field": name}
                )
            object.__setattr__(self, name, tuple(sorted(set(value))))
        for name in ("partial", "has_content"):
            if getattr(self, name) not in (None, True, False):
                raise ValidationError(f"{name} must be a boolean", reason="invalid_filter", details={"field": name})
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise ValidationError(f"{name} must be a number", reason="invalid_filter", details={"field": name})

    def matches(self, event: Event) -> bool:
        """Whether ``event`` passes every set criterion."""
        return (
            (self.authors is None or event.author in self.authors)
            and (self.invocation_ids is None or event.invocation_id in self.invocation_ids)
            and (self.partial is None or event.partial is self.partial)
            and (self.since is None or event.timestamp >= self.since)
            and (self.until is None or event.timestamp < self.until)
            and (self.has_content is None or (event.content is not None) is self.has_content)
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what a cursor is bound to)."""
        return {
            "authors": None if self.authors is None else _builtin_list(self.authors),
            "invocation_ids": None if self.invocation_ids is None else _builtin_list(self.invocation_ids),
            "partial": self.partial,
            "since": self.since,
            "until": self.until,
            "has_content": self.has_content,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPage:
    """One page of :func:`list`."""

    sessions: tuple[Session, ...]
    """Sessions on this page (without events)."""
    next_cursor: str | None
    """The cursor for the next page, or ``None`` on the last page."""
    total: int
    """How many sessions the whole listing has."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventPage:
    """One page of :func:`get`."""

    session: Session
    """The session (state, version, ...) with ``events`` and ``event_seqs`` restricted to this page."""
    next_cursor: str | None
    """The cursor for the next page, or ``None`` on the last page."""
    total: int
    """How many events match the filter."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RewindResult:
    """What :func:`rewind` created."""

    session_id: str
    """The new session's id."""
    events_copied: int
    """How many events of the source prefix were copied."""
    session: Session
    """The new session."""


def _secret_bytes(secret: bytes | str) -> bytes:
    raw = secret.encode() if isinstance(secret, str) else secret
    if not isinstance(raw, bytes) or len(raw) < _MIN_SECRET_BYTES:
        raise ValidationError("cursor_secret must be at least 16 bytes", reason="invalid_cursor_secret")
    return raw


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_dumps(value).encode()).hexdigest()


def _mac(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, _MAC_CONTEXT + payload, hashlib.sha256).digest()


def _issue(secret: bytes, *, kind: str, scope: Sequence[str | None], binding: str, snapshot: str, offset: int) -> str:
    payload = canonical_dumps(
        {
            "v": _CURSOR_VERSION,
            "kind": kind,
            "scope": _builtin_list(scope),
            "binding": binding,
            "snapshot": snapshot,
            "offset": offset,
        }
    ).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, payload))}"


def _invalid(why: str) -> SessionError:
    return SessionError("the cursor is not valid here", reason="invalid_cursor", details={"why": why})


def _open(secret: bytes, cursor: Any, *, kind: str, scope: Sequence[str | None], binding: str, snapshot: str) -> int:
    if not isinstance(cursor, str) or cursor.count(".") != 1 or len(cursor) > 4096:
        raise _invalid("malformed")
    body, mac = cursor.split(".")
    try:
        payload, tag = _unb64(body), _unb64(mac)
    except (binascii.Error, ValueError):
        raise _invalid("malformed") from None
    if not hmac.compare_digest(tag, _mac(secret, payload)):
        raise _invalid("forged")
    try:
        data = canonical_loads(payload)
    except ValidationError:
        raise _invalid("malformed") from None
    if not isinstance(data, dict) or data.get("v") != _CURSOR_VERSION:
        raise _invalid("version")
    if data.get("kind") != kind or data.get("scope") != _builtin_list(scope):
        raise _invalid("scope")
    if data.get("binding") != binding:
        raise _invalid("binding")
    offset = data.get("offset")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise _invalid("malformed")
    if data.get("snapshot") != snapshot:
        raise SessionError("the source changed since the cursor was issued", reason="stale_cursor")
    return offset


def _limit(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGE:
        raise ValidationError(
            f"{name} must be between 1 and {MAX_PAGE}", reason="invalid_value", details={"field": name}
        )
    return value


def list(
    service: BaseSessionService,
    *,
    app_name: str,
    user_id: str,
    limit: int = 20,
    cursor: str | None = None,
    cursor_secret: bytes | str,
    order: Literal["newest", "oldest"] = "newest",
) -> SessionPage:
    """One page of an app/user's sessions, newest update first by default.

    Raises:
        ValidationError: invalid names, ``limit``, ``order`` or cursor secret.
        SessionError: reason ``invalid_cursor`` (forged, malformed or from another scope/filter/order/size) or
            ``stale_cursor`` (the listing changed since the cursor was issued).
    """
    secret = _secret_bytes(cursor_secret)
    validate_name(app_name, "app_name")
    validate_name(user_id, "user_id")
    _limit(limit, "limit")
    if order not in ("newest", "oldest"):
        raise ValidationError("order must be 'newest' or 'oldest'", reason="invalid_value", details={"field": "order"})
    sessions = service.list_sessions(app_name=app_name, user_id=user_id)
    if order == "oldest":
        sessions.reverse()
    snapshot = _digest([[s.id, s.version, s.last_seq, s.last_update_time] for s in sessions])
    scope = ["sessions", app_name, user_id]
    binding = _digest({"order": order, "limit": limit})
    offset = (
        0 if cursor is None else _open(secret, cursor, kind="sessions", scope=scope, binding=binding, snapshot=snapshot)
    )
    page = sessions[offset : offset + limit]
    end = offset + len(page)
    next_cursor = (
        _issue(secret, kind="sessions", scope=scope, binding=binding, snapshot=snapshot, offset=end)
        if end < len(sessions)
        else None
    )
    return SessionPage(sessions=tuple(page), next_cursor=next_cursor, total=len(sessions))


def get(
    service: BaseSessionService,
    ref: SessionRef | Session,
    *,
    event_limit: int = 50,
    cursor: str | None = None,
    cursor_secret: bytes | str,
    event_filter: EventFilter | None = None,
    order: Literal["asc", "desc"] = "asc",
) -> EventPage:
    """A session with one page of its (filtered) events, oldest first by default.

    Raises:
        SessionNotFound: the session does not exist.
        ValidationError: invalid ``event_limit``, ``order``, filter or cursor secret.
        SessionError: reason ``invalid_cursor`` or ``stale_cursor`` (the session changed since the cursor was
            issued).
    """
    secret = _secret_bytes(cursor_secret)
    ref = as_ref(ref)
    _limit(event_limit, "event_limit")
    if order not in ("asc", "desc"):
        raise ValidationError("order must be 'asc' or 'desc'", reason="invalid_value", details={"field": "order"})
    event_filter = event_filter or EventFilter()
    session = service.get_session(ref)
    snapshot = _digest([session.version, session.last_seq, [e.id for e in session.events]])
    pairs = [(seq, e) for seq, e in zip(session.event_seqs, session.events) if event_filter.matches(e)]
    if order == "desc":
        pairs.reverse()
    scope = ["events", ref.app_name, ref.user_id, ref.session_id]
    binding = _digest({"order": order, "limit": event_limit, "filter": event_filter.to_dict()})
    offset = (
        0 if cursor is None else _open(secret, cursor, kind="events", scope=scope, binding=binding, snapshot=snapshot)
    )
    page = pairs[offset : offset + event_limit]
    end = offset + len(page)
    next_cursor = (
        _issue(secret, kind="events", scope=scope, binding=binding, snapshot=snapshot, offset=end)
        if end < len(pairs)
        else None
    )
    view = Session(
        app_name=session.app_name,
        user_id=session.user_id,
        id=session.id,
        state=session.state,
        events=tuple(e for _, e in page),
        event_seqs=tuple(s for s, _ in page),
        last_update_time=session.last_update_time,
        version=session.version,
        last_seq=session.last_seq,
    )
    return EventPage(session=view, next_cursor=next_cursor, total=len(pairs))


def rewind(
    service: BaseSessionService,
    ref: SessionRef | Session,
    *,
    to_index: int | None = None,
    before_event_id: str | None = None,
    target_session_id: str | None = None,
    allow_shared_state: bool = False,
) -> RewindResult:
    """Copy a prefix of a session into a new session; the source is never edited.

    Exactly one of ``to_index`` (copy the first ``to_index`` events) and ``before_event_id`` (copy the events
    before that one) selects the prefix. The new session's state is the replay of the copied events' deltas.

    Raises:
        SessionNotFound: the source does not exist.
        ValidationError: a bad selector (reason ``invalid_value``) or an unknown ``before_event_id``
            (reason ``event_not_found``).
        SessionError: reason ``temp_state_replay`` when a copied event carries a ``temp:`` delta,
            ``shared_state_replay`` when one carries ``user:``/``app:`` deltas and ``allow_shared_state`` is not set,
            ``already_exists`` when the target session exists.
    """
    ref = as_ref(ref)
    if (to_index is None) == (before_event_id is None):
        raise ValidationError("give exactly one of to_index and before_event_id", reason="invalid_value")
    source = service.get_session(ref)
    if to_index is not None:
        if isinstance(to_index, bool) or not isinstance(to_index, int) or not 0 <= to_index <= len(source.events):
            raise ValidationError(
                "to_index is out of range",
                reason="invalid_value",
                details={"to_index": str(to_index), "events": len(source.events)},
            )
        count = to_index
    else:
        ids = [e.id for e in source.events]
        if before_event_id not in ids:
            raise ValidationError(
                "no such event in the session",
                reason="event_not_found",
                details={**ref.as_details(), "event_id": str(before_event_id)[:255]},
            )
        count = ids.index(before_event_id)
    prefix = source.events[:count]
    _check_replayable(ref, prefix, allow_shared_state)
    target = target_session_id or new_session_id()
    created = service.create_session(
        app_name=ref.app_name, user_id=ref.user_id, session_id=target, events=prefix, if_exists="error"
    )
    return RewindResult(session_id=created.id, events_copied=count, session=created)


def _check_replayable(ref: SessionRef, events: Sequence[Event], allow_shared_state: bool) -> None:
    # Partial events never applied their deltas, so copying them replays nothing.
    applied = [(e.id, {scope_of(k) for k in e.actions.state_delta}) for e in events if not e.partial]
    for event_id, scopes in applied:
        if "temp" in scopes:
            raise SessionError(
                "rewind would replay temp: state",
                reason="temp_state_replay",
                details={**ref.as_details(), "event_id": event_id},
            )
    if allow_shared_state:
        return
    for event_id, scopes in applied:
        if scopes & {"user", "app"}:
            raise SessionError(
                "rewind would replay user:/app: state; pass allow_shared_state=True",
                reason="shared_state_replay",
                details={**ref.as_details(), "event_id": event_id},
            )
