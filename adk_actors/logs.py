"""Logging: structlog for our code, a scrubbing processor, and a scrubbing ``logging.Filter`` for the sink.

Inside TCP actor processes Thespian replaces the root logger with a forwarder to its logger process, so actor
log records reach the sink configured in Thespian's ``logDefs`` (see ``runtime/logdefs.py``). Secrets are
removed twice: by :func:`scrub_processor` where a record is made (structlog) and by :class:`ScrubFilter` where it
is written (the sink), which also catches records from third-party libraries.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import MutableMapping
from typing import Any

import structlog

from adk_actors.secrets import REDACTED, prune_secrets, register_secret, scrub_text

__all__ = ["SECRET_ENV_VARS", "JsonFormatter", "ScrubFilter", "configure_logging", "get_logger", "scrub",
           "scrub_processor"]

SECRET_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "ADK_GEMINI_API_KEY")

_PATTERNS = (
    # Google API keys.
    re.compile(r"AIza[0-9A-Za-z\-_]{35}"),
    # header / query / assignment forms: "x-goog-api-key: K", "key=K", "api_key='K'", "Bearer K".
    re.compile(r"(?i)((?:x-goog-api-key|api[_-]?key|access[_-]?token|authorization|[?&]key)\s*[:=]\s*['\"]?)"
               r"(?!\[REDACTED\])[^\s'\"&,}]+"),
    re.compile(r"(?i)(bearer\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"),
)


def _register_env_secrets() -> None:
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name)
        if value:
            register_secret(value)


def scrub(text: str) -> str:
    """Remove known secret values and credential-looking patterns from free text."""
    _register_env_secrets()
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


def get_logger(name: str) -> Any:
    """A structlog logger bound to ``name`` (configures defaults on first use)."""
    if _configured is None:
        configure_logging(os.environ.get("ADK_LOG_FORMAT", "console"), os.environ.get("ADK_LOG_LEVEL", "info"))
    return structlog.get_logger(name)
