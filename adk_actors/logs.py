"""Logging: structlog for our code, a scrubbing processor, and a scrubbing ``logging.Filter`` for the sink.

Inside TCP actor processes Thespian replaces the root logger with a forwarder to its logger process, so actor
log records reach the sink configured in Thespian's ``logDefs`` (see ``runtime/logdefs.py``). Secrets are
removed twice: by :func:`scrub_processor` where a record is made (structlog) and by :class:`ScrubFilter` where it
is written (the sink), which also catches records from third-party libraries.

Third-party loggers stay at ``library_log_level`` (WARNING by default) inside a node's processes, whatever the
node's ``log_level``: Thespian gives each actor process a fresh root logger at the node's level, which every
library logger inherits, and SQLAlchemy at INFO writes each statement (events, user text, state) to the log.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import MutableMapping
from typing import Any

import structlog

from adk_actors.secrets import REDACTED, SECRET_ENV_VARS, prune_secrets, register_env_secrets, scrub_text

__all__ = ["LIBRARY_LEVEL_ENV", "LIBRARY_LOGGERS", "SECRET_ENV_VARS", "JsonFormatter", "ScrubFilter",
           "configure_logging", "get_logger", "quiet_libraries", "scrub", "scrub_processor"]

_PATTERNS = (
    # Google API keys.
    re.compile(r"AIza[0-9A-Za-z\-_]{35}"),
    # header / query / assignment forms: "x-goog-api-key: K", "key=K", "api_key='K'", "Bearer K".
    re.compile(r"(?i)((?:x-goog-api-key|api[_-]?key|access[_-]?token|authorization|[?&]key)\s*[:=]\s*['\"]?)"
               r"(?!\[REDACTED\])[^\s'\"&,}]+"),
    re.compile(r"(?i)(bearer\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"),
)


def scrub(text: str) -> str:
    """Remove known secret values and credential-looking patterns from free text."""
    register_env_secrets()
    text = scrub_text(text)
    text = _PATTERNS[0].sub(REDACTED, text)
    text = _PATTERNS[1].sub(lambda m: m.group(1) + REDACTED, text)
    return _PATTERNS[2].sub(lambda m: m.group(1) + REDACTED, text)


def scrub_processor(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: prune secret-named keys and scrub secret values out of every string field."""
    pruned = prune_secrets(dict(event_dict))
    return {k: scrub(v) if isinstance(v, str) else v for k, v in pruned.items()}


class ScrubFilter(logging.Filter):
    """A ``logging.Filter`` that rewrites each record's message with secrets removed (never drops records)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed %-format must not lose the record
            message = str(record.msg)
        record.msg = scrub(message)
        record.args = ()
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``message`` (+ ``actor`` when Thespian set it)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                                 "logger": record.name, "message": record.getMessage()}
        actor = getattr(record, "actorAddress", None)
        if actor is not None:
            entry["actor"] = str(actor)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str)


_configured: tuple[str, str] | None = None


def configure_logging(log_format: str = "console", level: str = "info") -> None:
    """Configure structlog to render through stdlib logging (idempotent per format/level).

    ``log_format`` is ``"console"`` (human-readable) or ``"json"`` (one JSON object a line).
    """
    global _configured
    if _configured == (log_format, level):
        return
    renderer: Any = (structlog.processors.JSONRenderer(sort_keys=True) if log_format == "json"
                     else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            scrub_processor,
            structlog.processors.format_exc_info,
            renderer,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.INFO)),
        cache_logger_on_first_use=False,
    )
    _configured = (log_format, level)


LIBRARY_LOGGERS = ("sqlalchemy", "urllib3", "requests", "httpx", "httpcore", "websocket", "Thespian", "thespian")
"""Top-level loggers of the libraries a node runs (SQL, HTTP, Thespian's own), held at ``library_log_level``."""
LIBRARY_LEVEL_ENV = "ADKACTORS_LIBRARY_LOG_LEVEL"
"""Set by the boot process for every process of the node; unset elsewhere (a caller's logging is its own)."""

_tuned_manager: Any = None


def quiet_libraries(level: str | None = None) -> None:
    """Hold :data:`LIBRARY_LOGGERS` at ``level`` (default: ``$ADKACTORS_LIBRARY_LOG_LEVEL``; nothing when unset).

    Cheap to call often: it acts once per logging manager, and Thespian installs a new one in each actor process
    after the fork, which is why :func:`get_logger` (run by every actor at construction) calls it.
    """
    global _tuned_manager
    level = level or os.environ.get(LIBRARY_LEVEL_ENV)
    manager = logging.Logger.manager
    if not level or _tuned_manager is manager:
        return
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level.upper())
    _tuned_manager = manager


def get_logger(name: str) -> Any:
    """A structlog logger bound to ``name`` (configures defaults on first use)."""
    quiet_libraries()
    if _configured is None:
        configure_logging(os.environ.get("ADK_LOG_FORMAT", "console"), os.environ.get("ADK_LOG_LEVEL", "info"))
    return structlog.get_logger(name)
