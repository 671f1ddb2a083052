"""Decisions shared by the in-memory and SQL session backends (pure functions, no I/O)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ConcurrencyConflict, SessionError, SessionNotFound, ValidationError
from adk_actors.sessions.model import PreparedEvent, SessionRef, prepare_event, validate_name
from adk_actors.sessions.state import apply_delta, merge_state, mismatched_keys, split_delta

__all__ = [
    "CreatePlan",
    "already_exists",
    "check_compaction",
    "check_expected",
    "conversation_not_found",
    "conversation_payload",
    "new_session_id",
    "not_found",
    "plan_create",
]


def new_session_id() -> str:
    """A fresh random session id."""
    return uuid.uuid4().hex


def not_found(ref: SessionRef) -> SessionNotFound:
    """The error for a missing session."""
    return SessionNotFound(f"session {ref.session_id!r} not found", details=ref.as_details())


def conversation_not_found(app_name: str, agent_name: str, key: str) -> SessionNotFound:
    """The error for a missing legacy conversation."""
    return SessionNotFound(
        "no saved conversation", details={"app_name": app_name, "agent_name": agent_name, "key": key}
    )


def already_exists(ref: SessionRef) -> SessionError:
    """The error for ``create_session(..., if_exists="error")`` on an existing session."""
    return SessionError(f"session {ref.session_id!r} already exists", reason="already_exists", details=ref.as_details())


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePlan:
    """What creating a session writes: initial scoped state plus events applied in order."""

    session_state: dict[str, Any] = field(default_factory=dict)
    """Session-scoped keys after the initial state and every event delta."""
    user_delta: dict[str, Any] = field(default_factory=dict)
    """``user:`` keys to merge into the user-state row."""
    app_delta: dict[str, Any] = field(default_factory=dict)
    """``app:`` keys to merge into the app-state row."""
    temp: dict[str, Any] = field(default_factory=dict)
    """``temp:`` keys for the in-memory overlay."""
    events: tuple[PreparedEvent, ...] = ()
    """Events to store with seq 1..n."""


def plan_create(state: Mapping[str, Any] | None, events: Sequence[Any]) -> CreatePlan:
    """Validate the initial state and events of a new session and fold their deltas by scope.

    Raises:
        ValidationError: a malformed state or event (see :func:`prepare_event`).
    """
    initial = split_delta(state)
    prepared = tuple(prepare_event(e) for e in events)
    session_state, user, app, temp = dict(initial.session), dict(initial.user), dict(initial.app), dict(initial.temp)
    for ev in prepared:
        session_state = apply_delta(session_state, ev.delta.session)
        user.update(ev.delta.user)
        app.update(ev.delta.app)
        temp.update(ev.delta.temp)
    return CreatePlan(session_state=session_state, user_delta=user, app_delta=app, temp=temp, events=prepared)


def check_expected(
    ref: SessionRef,
    *,
    session: Mapping[str, Any],
    user: Mapping[str, Any],
    app: Mapping[str, Any],
    temp: Mapping[str, Any],
    expected: Mapping[str, Any],
) -> None:
    """Raise unless the merged state matches ``expected``.

    Raises:
        ValidationError: reason ``invalid_state`` when ``expected`` is not a mapping.
        ConcurrencyConflict: reason ``state_mismatch`` with the mismatching keys (never their values).
    """
    if not isinstance(expected, Mapping):
        raise ValidationError("expected state must be a mapping", reason="invalid_state")
    bad = mismatched_keys(merge_state(session=session, user=user, app=app, temp=temp), expected)
    if bad:
        raise ConcurrencyConflict(
            "session state does not match the expected values",
            reason="state_mismatch",
            details={**ref.as_details(), "keys": bad},
        )


def check_compaction(
    ref: SessionRef, *, through_seq: Any, last_seq: int, version: int, expected_version: int | None
) -> None:
    """Validate a compaction request against the current session.

    Raises:
        ValidationError: reason ``invalid_value`` when ``through_seq`` is not within ``1..last_seq``.
        ConcurrencyConflict: reason ``stale_session`` when ``expected_version`` differs from the current version.
    """
    if isinstance(through_seq, bool) or not isinstance(through_seq, int) or not 1 <= through_seq <= last_seq:
        raise ValidationError(
            "through_seq must be an appended sequence number",
            reason="invalid_value",
            details={**ref.as_details(), "through_seq": str(through_seq), "last_seq": last_seq},
        )
    if expected_version is not None and expected_version != version:
        raise ConcurrencyConflict(
            "the session changed since it was read",
            reason="stale_session",
            details={**ref.as_details(), "expected_version": expected_version, "version": version},
        )


def conversation_payload(app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> list[Any]:
    """Validate a legacy conversation history and return a private JSON copy.

    Raises:
        ValidationError: reason ``invalid_name`` or ``invalid_json``, or ``invalid_value`` when ``history`` is not a
            list.
    """
    validate_name(app_name, "app_name")
    validate_name(agent_name, "agent_name")
    validate_name(key, "key")
    if not isinstance(history, list | tuple):
        raise ValidationError(
            "history must be a list", reason="invalid_value", details={"type": type(history).__name__}
        )
    try:
        items = [item.to_dict() if callable(getattr(item, "to_dict", None)) else item for item in history]
    except AdkError:
        raise
    except Exception as exc:  # a hostile item's to_dict is a bad argument, not a reason to crash the store
        raise ValidationError(
            "history items must be JSON values or messages",
            reason="invalid_value",
            details={"error": type(exc).__name__},
        ) from None
    payload = copy_json(items, field="history")[0]
    assert isinstance(payload, list)
    return payload
