"""Messages of the session store actor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SessionBatch", "SessionOp", "SessionStoreArgs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOp:
    """Run one ``BaseSessionService`` method on the store actor's service and answer with its result."""

    method: str
    """A method of the session protocol (``create_session``, ``add_event``, ...)."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionBatch:
    """Run several ``SessionOp``s in order in one message; answered with the list of their results. The first
    failing operation fails the call (the operations before it stay applied)."""

    ops: tuple[SessionOp, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStoreArgs:
    """How the store actor builds its service (the in-memory backend is owned by exactly one actor)."""

    backend: str = "memory"
