"""Session services: sessions, their events and their scoped state.

``InMemorySessionService`` (one actor owns it) and ``SqlSessionService`` (SQLite or PostgreSQL through
SQLAlchemy 2) implement :class:`BaseSessionService`; ``adk_actors.sessions.query`` adds authenticated pagination
and non-destructive rewind on top of any backend. See ``docs/SESSIONS.md``.
"""

from __future__ import annotations

from adk_actors.sessions import query
from adk_actors.sessions.base import BaseSessionService, as_ref
from adk_actors.sessions.factory import default_sqlite_url, session_service_for, session_service_from_settings
from adk_actors.sessions.memory import InMemorySessionService
from adk_actors.sessions.model import AppendResult, Session, SessionRef
from adk_actors.sessions.sql import SqlSessionService
from adk_actors.sessions.state import ABSENT, APP_PREFIX, TEMP_PREFIX, USER_PREFIX

__all__ = [
    "ABSENT",
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "AppendResult",
    "BaseSessionService",
    "InMemorySessionService",
    "Session",
    "SessionRef",
    "SqlSessionService",
    "as_ref",
    "default_sqlite_url",
    "query",
    "session_service_for",
    "session_service_from_settings",
]
