"""The in-memory session store as a tier-1 actor.

The reference's ETS store maps to an in-memory store *owned by one actor*: ``SessionStoreActor`` (registered as
``sessions``, a child of the root) holds the one :class:`~adk_actors.sessions.memory.InMemorySessionService` of
the node, so sessions survive the crash of any host (not a system stop). Its picklable client,
:class:`~adk_actors.sessions.client.ActorSessionService`, lives in ``sessions/client.py`` (re-exported here for
older imports); other packages import the client, never this module.

Accepts: calls ``SessionOp`` (one protocol method), ``SessionBatch`` (several, in order), ``SessionSummary``
(per app and user session counts, for the admin shell), ``GetStatus``, ``Ping``.
"""

from __future__ import annotations

import inspect
from typing import Any

from adk_actors.errors import AdkError, ConfigError, ValidationError
from adk_actors.runtime.server import CallCtx, GenServer
from adk_actors.sessions.client import STORE_NAME, ActorSessionService
from adk_actors.sessions.memory import InMemorySessionService
from adk_actors.sessions.messages import MAX_SUMMARY_ROWS, SessionBatch, SessionOp, SessionSummary

__all__ = ["STORE_NAME", "ActorSessionService", "SessionStoreActor", "summarize"]

_METHODS = frozenset(
    {
        "create_session",
        "get_session",
        "list_sessions",
        "delete_session",
        "update_state",
        "add_event",
        "add_event_if_state",
        "clear_temp_state",
        "compact_events",
        "save_conversation",
        "load_conversation",
    }
)


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
            raise ConfigError(
                "not a session service method",
                reason="unknown_method",
                details={"method": str(getattr(op, "method", "?"))[:64]},
            )
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
            raise ValidationError(
                "malformed session request",
                reason="invalid_arguments",
                details={"method": op.method, "error": type(exc).__name__},
            ) from None

    def status(self) -> dict[str, Any]:
        return {"kind": "session_store", "backend": "memory", "operations": self.ops}


def summarize(counts: dict[str, dict[str, int]], limit: int) -> dict[str, Any]:
    """The ``SessionSummary`` answer for ``counts`` (``{app_name: {user_id: count}}``), bounded to ``limit`` rows.

    Raises:
        ValidationError: ``limit`` is not a non-negative int (a bad request must not crash the store).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("limit must be a non-negative integer", reason="invalid_value", details={"key": "limit"})
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
