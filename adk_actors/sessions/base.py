"""The session-service protocol every backend implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from adk_actors.sessions.model import AppendResult, Session, SessionRef

__all__ = ["BaseSessionService", "IfExists", "as_ref"]

IfExists = Literal["return", "error"]


def as_ref(ref: SessionRef | Session) -> SessionRef:
    """Accept a :class:`SessionRef` or a :class:`Session` wherever a session is addressed."""
    if isinstance(ref, Session):
        return ref.ref
    if isinstance(ref, SessionRef):
        return ref
    from adk_actors.errors import ValidationError

    raise ValidationError(
        "expected a SessionRef or a Session", reason="invalid_session_ref", details={"type": type(ref).__name__}
    )


@runtime_checkable
class BaseSessionService(Protocol):
    """Sessions, their events and their scoped state.

    Every compound write (an event plus its state delta in up to three scopes) is atomic. Per-session calls
    raise ``SessionNotFound`` (reason ``not_found``) for a missing session. ``temp:`` keys live next to the
    session in the service's memory and are never written to a SQL store; the Runner clears them with
    :meth:`clear_temp_state` at the final or error boundary of an invocation.
    """

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
        """Create a session, or return the existing one (never overwritten, even by a concurrent creator).

        ``state`` and ``events`` (applied in order, as by ``add_event``) only take effect when this call creates
        the session. ``if_exists="error"`` raises ``SessionError(reason="already_exists")`` instead.
        """
        ...

    def get_session(self, ref: SessionRef | Session) -> Session:
        """The session with all its events."""
        ...

    def list_sessions(self, *, app_name: str, user_id: str | None = None) -> list[Session]:
        """Sessions of an app (optionally of one user), newest update first, without events."""
        ...

    def delete_session(self, ref: SessionRef | Session) -> bool:
        """Delete a session and its events; ``False`` when it did not exist (deleting is idempotent)."""
        ...

    def update_state(self, ref: SessionRef | Session, delta: Mapping[str, Any]) -> None:
        """Apply a state delta by scope without an event."""
        ...

    def add_event(self, ref: SessionRef | Session, event: Any) -> AppendResult:
        """Append an event and apply its state delta (unless partial) in one atomic write."""
        ...

    def add_event_if_state(self, ref: SessionRef | Session, event: Any, expected: Mapping[str, Any]) -> AppendResult:
        """Append only if the merged state matches ``expected``; else ``ConcurrencyConflict(state_mismatch)``."""
        ...

    def clear_temp_state(self, ref: SessionRef | Session) -> None:
        """Forget the session's ``temp:`` keys."""
        ...

    def compact_events(
        self, ref: SessionRef | Session, *, through_seq: int, compaction_event: Any, expected_version: int | None = None
    ) -> AppendResult:
        """Atomically replace the events with ``seq <= through_seq`` by one compaction event."""
        ...

    def save_conversation(self, app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> None:
        """Legacy: store an agent's conversation history under ``key``."""
        ...

    def load_conversation(self, app_name: str, agent_name: str, key: str) -> list[Any]:
        """Legacy: the stored conversation history; ``SessionNotFound`` when none was saved."""
        ...

    def close(self) -> None:
        """Release resources held by this process (engines, pools); the service can be reopened."""
        ...
