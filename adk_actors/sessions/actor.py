"""The in-memory session store as a tier-1 actor, and the client that reaches it from any process.

The reference's ETS store maps to an in-memory store *owned by one actor*: ``SessionStoreActor`` (registered as
``sessions``, a child of the root) holds the one :class:`~adk_actors.sessions.memory.InMemorySessionService` of
the node, so sessions survive the crash of any host (not a system stop). :class:`ActorSessionService` is the
picklable client: every method is an ask to that actor, so any process (a host, a worker, the caller) sees the
same sessions.

Accepts: calls ``SessionOp`` (one protocol method), ``SessionBatch`` (several, in order), ``SessionSummary``
(per app and user session counts, for the admin shell), ``GetStatus``, ``Ping``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.content.validation import check_int, check_json
from adk_actors.errors import AdkError, ConfigError, ValidationError
from adk_actors.runtime.server import CallCtx, GenServer
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.sessions.base import IfExists, as_ref
from adk_actors.sessions.logic import conversation_payload
from adk_actors.sessions.memory import InMemorySessionService
from adk_actors.sessions.messages import MAX_SUMMARY_ROWS, SessionBatch, SessionOp, SessionSummary
from adk_actors.sessions.model import AppendResult, Session, SessionRef, event_to_dict, validate_name
from adk_actors.sessions.state import check_delta, check_expected_state

__all__ = ["STORE_NAME", "ActorSessionService", "SessionStoreActor", "summarize"]


def _sequence(value: Any, key: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValidationError(f"{key} must be a list", reason="invalid_value",
                              details={"key": key, "type": type(value).__name__})
    return value


def _event_data(event: Any) -> dict[str, Any]:
    """The validated event as a plain JSON dict (what the store stores anyway)."""
    data = check_json(event_to_dict(event), "event")
    assert isinstance(data, dict)
    return data

STORE_NAME = "sessions"

_METHODS = frozenset({"create_session", "get_session", "list_sessions", "delete_session", "update_state",
                      "add_event", "add_event_if_state", "clear_temp_state", "compact_events",
                      "save_conversation", "load_conversation"})


class SessionStoreActor(GenServer):
    """Owns the node's in-memory session service; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.service = InMemorySessionService()
        self.ops = 0

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, SessionOp):
            return self._apply(request)
        if isinstance(request, SessionBatch):
            return [self._apply(op) for op in request.ops]
        if isinstance(request, SessionSummary):
            return summarize(self.service.session_counts(), request.limit)
        return super().handle_call(request, ctx)

    def _apply(self, op: SessionOp) -> Any:
        if not isinstance(op, SessionOp) or op.method not in _METHODS:
            raise ConfigError("not a session service method", reason="unknown_method",
                              details={"method": str(getattr(op, "method", "?"))[:64]})
        self.ops += 1
        method = getattr(self.service, op.method)
        try:
            inspect.signature(method).bind(*op.args, **op.kwargs)
            return method(*op.args, **op.kwargs)
        except AdkError:
            raise
        except Exception as exc:
            # The store's data lives only in this process: a crash (and the restart it brings) would lose every
            # session for one malformed request, so anything the service did not foresee is a bad argument.
            raise ValidationError("malformed session request", reason="invalid_arguments",
                                  details={"method": op.method, "error": type(exc).__name__}) from None

    def status(self) -> dict[str, Any]:
        return {"kind": "session_store", "backend": "memory", "operations": self.ops}


def summarize(counts: dict[str, dict[str, int]], limit: int) -> dict[str, Any]:
    """The ``SessionSummary`` answer for ``counts`` (``{app_name: {user_id: count}}``), bounded to ``limit`` rows.

    Raises:
        ValidationError: ``limit`` is not a non-negative int (a bad request must not crash the store).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("limit must be a non-negative integer", reason="invalid_value",
                              details={"key": "limit"})
    limit = min(limit, MAX_SUMMARY_ROWS)
    apps: dict[str, dict[str, int]] = {}
    rows = 0
    truncated = False
    for app_name, users in counts.items():
        for user_id, count in users.items():
            if rows >= limit:
                truncated = True
                break
            apps.setdefault(app_name, {})[user_id] = count
            rows += 1
    total = sum(n for users in counts.values() for n in users.values())
    return {"backend": "memory", "apps": apps, "sessions": total, "truncated": truncated}


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

    def create_session(self, *, app_name: str, user_id: str, session_id: str | None = None,
                       state: Mapping[str, Any] | None = None, events: Sequence[Any] = (),
                       if_exists: IfExists = "return") -> Session:
        validate_name(app_name, "app_name")
        validate_name(user_id, "user_id")
        if session_id is not None:
            validate_name(session_id, "session_id")
        if if_exists not in ("return", "error"):
            raise ValidationError("if_exists must be 'return' or 'error'", reason="invalid_value",
                                  details={"key": "if_exists", "type": type(if_exists).__name__})
        return self._op("create_session", app_name=app_name, user_id=user_id, session_id=session_id,
                        state=check_delta(state) if state is not None else None,
                        events=tuple(_event_data(e) for e in _sequence(events, "events")), if_exists=if_exists)

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

    def compact_events(self, ref: SessionRef | Session, *, through_seq: int, compaction_event: Any,
                       expected_version: int | None = None) -> AppendResult:
        check_int(through_seq, "through_seq", minimum=1)
        if expected_version is not None:
            check_int(expected_version, "expected_version", minimum=0)
        return self._op("compact_events", as_ref(ref), through_seq=through_seq,
                        compaction_event=_event_data(compaction_event), expected_version=expected_version)

    def save_conversation(self, app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> None:
        self._op("save_conversation", app_name, agent_name, key,
                 conversation_payload(app_name, agent_name, key, history))

    def load_conversation(self, app_name: str, agent_name: str, key: str) -> list[Any]:
        for value, what in ((app_name, "app_name"), (agent_name, "agent_name"), (key, "key")):
            validate_name(value, what)
        return self._op("load_conversation", app_name, agent_name, key)

    def close(self) -> None:
        """Nothing to release: the store lives in its actor."""
