"""The client of the node's session store actor: :class:`ActorSessionService`, usable from any process.

:class:`ActorSessionService` is a picklable ``BaseSessionService`` whose every method is an ask to the node's
``sessions`` actor (:class:`~adk_actors.sessions.actor.SessionStoreActor`), so any process (a host, a worker, the
caller) sees the same sessions. Other packages reach the store through this module, never through the actor's
module (the layer check enforces it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.content.validation import check_int, check_json
from adk_actors.errors import ValidationError
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.sessions.base import IfExists, as_ref
from adk_actors.sessions.logic import conversation_payload
from adk_actors.sessions.messages import SessionOp
from adk_actors.sessions.model import AppendResult, Session, SessionRef, event_to_dict, validate_name
from adk_actors.sessions.state import check_delta, check_expected_state

__all__ = ["STORE_NAME", "ActorSessionService"]

STORE_NAME = "sessions"
"""The name the node's session store actor is registered under."""


def _sequence(value: Any, key: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValidationError(
            f"{key} must be a list", reason="invalid_value", details={"key": key, "type": type(value).__name__}
        )
    return value


def _event_data(event: Any) -> dict[str, Any]:
    """The validated event as a plain JSON dict (what the store stores anyway)."""
    data = check_json(event_to_dict(event), "event")
    assert isinstance(data, dict)
    return data


class ActorSessionService:
    """A ``BaseSessionService`` whose every method is an ask to the node's ``sessions`` actor (picklable)."""

    def __init__(self, timeout: float | None = None, system: ActorSystemHandle | None = None) -> None:
        self.timeout = timeout
        self._system = system

    def __getstate__(self) -> dict[str, Any]:
        return {"timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.timeout, self._system = state["timeout"], None

    def _op(self, method: str, *args: Any, **kwargs: Any) -> Any:
        system = self._system if self._system is not None and self._system.running else current_system()
        return system.ask(STORE_NAME, SessionOp(method=method, args=args, kwargs=kwargs), self.timeout)

    # Every method validates in the caller's process and sends only plain data (SessionRef, JSON copies): a value
    # the store could not unpickle or handle never leaves the caller, and a bad argument fails at once.

    def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        events: Sequence[Any] = (),
        if_exists: IfExists = "return",
    ) -> Session:
        validate_name(app_name, "app_name")
        validate_name(user_id, "user_id")
        if session_id is not None:
            validate_name(session_id, "session_id")
        if if_exists not in ("return", "error"):
            raise ValidationError(
                "if_exists must be 'return' or 'error'",
                reason="invalid_value",
                details={"key": "if_exists", "type": type(if_exists).__name__},
            )
        return self._op(
            "create_session",
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            state=check_delta(state) if state is not None else None,
            events=tuple(_event_data(e) for e in _sequence(events, "events")),
            if_exists=if_exists,
        )

    def get_session(self, ref: SessionRef | Session) -> Session:
        return self._op("get_session", as_ref(ref))

    def list_sessions(self, *, app_name: str, user_id: str | None = None) -> list[Session]:
        validate_name(app_name, "app_name")
        if user_id is not None:
            validate_name(user_id, "user_id")
        return self._op("list_sessions", app_name=app_name, user_id=user_id)

    def delete_session(self, ref: SessionRef | Session) -> bool:
        return self._op("delete_session", as_ref(ref))

    def update_state(self, ref: SessionRef | Session, delta: Mapping[str, Any]) -> None:
        self._op("update_state", as_ref(ref), check_delta(delta))

    def add_event(self, ref: SessionRef | Session, event: Any) -> AppendResult:
        return self._op("add_event", as_ref(ref), _event_data(event))

    def add_event_if_state(self, ref: SessionRef | Session, event: Any, expected: Mapping[str, Any]) -> AppendResult:
        return self._op("add_event_if_state", as_ref(ref), _event_data(event), check_expected_state(expected))

    def clear_temp_state(self, ref: SessionRef | Session) -> None:
        self._op("clear_temp_state", as_ref(ref))

    def compact_events(
        self, ref: SessionRef | Session, *, through_seq: int, compaction_event: Any, expected_version: int | None = None
    ) -> AppendResult:
        check_int(through_seq, "through_seq", minimum=1)
        if expected_version is not None:
            check_int(expected_version, "expected_version", minimum=0)
        return self._op(
            "compact_events",
            as_ref(ref),
            through_seq=through_seq,
            compaction_event=_event_data(compaction_event),
            expected_version=expected_version,
        )

    def save_conversation(self, app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> None:
        self._op(
            "save_conversation", app_name, agent_name, key, conversation_payload(app_name, agent_name, key, history)
        )

    def load_conversation(self, app_name: str, agent_name: str, key: str) -> list[Any]:
        for value, what in ((app_name, "app_name"), (agent_name, "agent_name"), (key, "key")):
            validate_name(value, what)
        return self._op("load_conversation", app_name, agent_name, key)

    def close(self) -> None:
        """Nothing to release: the store lives in its actor."""
