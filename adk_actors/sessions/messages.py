"""Messages of the session store actor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_SUMMARY_ROWS", "SessionBatch", "SessionOp", "SessionStoreArgs", "SessionSummary"]

MAX_SUMMARY_ROWS = 10_000
"""The most ``(app_name, user_id)`` rows one ``SessionSummary`` answers with, whatever its ``limit``."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """Ask the store actor how many sessions each user of each app holds (the admin shell's view).

    Answered with ``{"backend": "memory", "apps": {app_name: {user_id: count}}, "sessions": total,
    "truncated": bool}``; ``sessions`` counts every session, ``apps`` holds at most ``limit`` user rows.
    """

    limit: int = 1000
    """At most this many ``(app_name, user_id)`` rows (capped at ``MAX_SUMMARY_ROWS``)."""
