"""Choosing a session backend from settings."""

from __future__ import annotations

import os
from pathlib import Path

from adk_actors.errors import ConfigError
from adk_actors.sessions.base import BaseSessionService
from adk_actors.sessions.memory import InMemorySessionService
from adk_actors.sessions.sql import SqlSessionService
from adk_actors.settings import Settings

__all__ = ["default_sqlite_url", "session_service_for", "session_service_from_settings"]


def default_sqlite_url(data_dir: str | os.PathLike[str]) -> str:
    """``sqlite:///<data_dir>/sessions.db`` with ``data_dir`` made absolute."""
    return f"sqlite:///{Path(data_dir).expanduser().resolve() / 'sessions.db'}"


def session_service_from_settings(
    backend: str,
    url: str = "",
    data_dir: str | os.PathLike[str] = "var/adk",
) -> BaseSessionService:
    """Build the configured session service (``settings.session_backend`` / ``session_url`` / ``data_dir``).

    A SQL backend is opened and migrated here, so a backend that cannot initialize fails at startup instead of
    on first use, and never falls back to memory.

    Args:
        backend: ``"memory"`` or ``"sql"``.
        url: SQLAlchemy URL for ``"sql"``; empty means a SQLite file under ``data_dir``.
        data_dir: The configured data directory.

    Raises:
        ConfigError: reason ``invalid_value`` for an unknown backend or an unparseable URL.
        StorageError: reason ``open_failed`` (or ``schema_too_new``) when the SQL store cannot initialize.
    """
    if backend == "memory":
        return InMemorySessionService()
    if backend == "sql":
        return SqlSessionService(url or default_sqlite_url(data_dir)).open()
    raise ConfigError(
        "session_backend must be 'memory' or 'sql'",
        reason="invalid_value",
        details={"key": "session_backend", "value": str(backend)[:64]},
    )


def session_service_for(settings: Settings) -> BaseSessionService:
    """:func:`session_service_from_settings` for a loaded :class:`~adk_actors.settings.Settings`.

    Raises:
        ConfigError: an unknown backend or an unparseable URL.
        StorageError: the SQL store cannot initialize.
    """
    return session_service_from_settings(settings.session_backend, settings.session_url, settings.data_dir)
