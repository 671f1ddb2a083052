"""Logging: structlog for our code, a scrubbing processor, and a scrubbing ``logging.Filter`` for the sink.

Inside TCP actor processes Thespian replaces the root logger with a forwarder to its logger process, so actor
log records reach the sink configured in Thespian's ``logDefs`` (see ``runtime/logdefs.py``). Secrets are
removed twice: by :func:`scrub_processor` where a record is made (structlog) and by :class:`ScrubFilter` where it
is written (the sink), which also catches records from third-party libraries.

Crash reports (:func:`crash_fields`, :func:`log_crash`): an actor crash, a user tool or job that raised, or a
failed timer-thread callback is logged once at error level with the exception type, its message and its stack
trace, all scrubbed where the record is made (and again by the sink). Only the log gets this text; callers get a
structural error.

Third-party loggers stay at ``library_log_level`` (WARNING by default) inside a node's processes, whatever the
node's ``log_level``: Thespian gives each actor process a fresh root logger at the node's level, which every
library logger inherits, and SQLAlchemy at INFO writes each statement (events, user text, state) to the log.
"""

from __future__ import annotations

import json
import logging
import os
import re
import traceback
from collections.abc import MutableMapping
from typing import Any

import structlog

from adk_actors.secrets import REDACTED, SECRET_ENV_VARS, prune_secrets, register_env_secrets, scrub_text

__all__ = [
    "CRASH_MESSAGE_CHARS",
    "CRASH_TRACE_CHARS",
    "LIBRARY_LEVEL_ENV",
    "LIBRARY_LOGGERS",
    "SECRET_ENV_VARS",
    "SINK_ENV",
    "SINK_FORMAT",
    "AppendSink",
    "JsonFormatter",
    "ScrubFilter",
    "configure_logging",
    "crash_fields",
    "get_logger",
    "log_crash",
    "quiet_libraries",
    "scrub",
    "scrub_processor",
    "sink_environment",
]

_PATTERNS = (
    # Google API keys.
    re.compile(r"AIza[0-9A-Za-z\-_]{35}"),
    # header / query / assignment forms: "x-goog-api-key: K", "key=K", "api_key='K'", "Bearer K".
    re.compile(
        r"(?i)((?:x-goog-api-key|api[_-]?key|access[_-]?token|authorization|[?&]key)\s*[:=]\s*['\"]?)"
        r"(?!\[REDACTED\])[^\s'\"&,}]+"
    ),
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


CRASH_MESSAGE_CHARS = 1000
"""A crash report keeps at most this much of an exception's (scrubbed) message."""
CRASH_TRACE_CHARS = 16_000
"""... and this much of the end of its (scrubbed) stack trace, where the failing frames are."""


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def crash_fields(exc: BaseException) -> dict[str, str]:
    """The crash-report fields of ``exc``, scrubbed here (before they are bounded, so no secret is cut in half).

    ``exception_type`` is the qualified class name, ``exception_message`` the message (at most
    :data:`CRASH_MESSAGE_CHARS`) and ``exception`` the formatted stack trace with its chained causes (its last
    :data:`CRASH_TRACE_CHARS`). Called on failure paths only.
    """
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not lose the report
        message = "<unprintable message>"
    try:
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        trace = f"{_type_name(exc)} (stack trace could not be formatted)\n"
    trace = scrub(trace)
    if len(trace) > CRASH_TRACE_CHARS:
        trace = "...\n" + trace[-CRASH_TRACE_CHARS:]
    return {
        "exception_type": _type_name(exc),
        "exception_message": scrub(message)[:CRASH_MESSAGE_CHARS],
        "exception": trace,
    }


def log_crash(logger: str, event: str, exc: BaseException, **fields: Any) -> None:
    """Log a crash report of ``exc`` at error level through stdlib ``logging`` (for code that also runs outside
    actor processes, where structlog may be configured by the user or not at all: user tools, the timer thread).

    The record's text is ``event``, the ``fields`` as ``key=value``, the exception type and message, then the stack
    trace on the following lines; everything is scrubbed before it is handed to ``logging``. Never raises.
    """
    try:
        report = crash_fields(exc)
        pairs = " ".join(f"{key}={scrub(str(value))[:200]}" for key, value in fields.items())
        logging.getLogger(logger).error(
            "%s %s exception_type=%s exception_message=%r\n%s",
            event,
            pairs,
            report["exception_type"],
            report["exception_message"],
            report["exception"].rstrip("\n"),
        )
    except Exception:  # reporting a failure must never add one
        return


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
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        actor = getattr(record, "actorAddress", None)
        if actor is not None:
            entry["actor"] = str(actor)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str)


SINK_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
"""The console line format of a node's sink file (Thespian's logger process and :class:`AppendSink` alike)."""
SINK_ENV = "ADKACTORS_LOG_SINK"
"""Set by the boot process (:func:`sink_environment`) for every process of the node: where our own records go."""


class AppendSink(logging.Handler):
    """Writes each record to the node's sink file with one ``write`` on an ``O_APPEND`` descriptor.

    Every process of a node appends to the same file; on a local file system an ``O_APPEND`` write lands whole at
    the end, so lines of different processes never interleave. Records of ``adk_actors.*`` loggers take this
    direct path in a node's actor processes instead of Thespian's forwarding to its logger process, which cost
    about 0.6 ms of CPU per record across the two processes (docs/PERFORMANCE.md, issue 18) and drops records under
    a flood. Scrubbed like the sink (:class:`ScrubFilter`).
    """

    def __init__(self, path: str, level: int, log_format: str) -> None:
        super().__init__(level)
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.addFilter(ScrubFilter())
        self.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(SINK_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            os.write(self.fd, (self.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
        super().close()


def sink_environment(path: str, level: str, log_format: str) -> dict[str, str]:
    """``{SINK_ENV: ...}``: the environment entry that makes a node's processes write our records to ``path``."""
    return {SINK_ENV: json.dumps({"path": path, "level": level, "format": log_format})}


def _install_sink(manager: Any) -> None:
    """In a node's process (:data:`SINK_ENV` set), route the ``adk_actors`` loggers to :class:`AppendSink`."""
    raw = os.environ.get(SINK_ENV)
    if not raw:
        return
    try:
        spec = json.loads(raw)
        level = getattr(logging, str(spec["level"]).upper(), logging.INFO)
        handler = AppendSink(str(spec["path"]), level, str(spec.get("format", "console")))
    except Exception:  # no direct sink: records keep going through Thespian's logger process
        return
    ours = logging.getLogger("adk_actors")
    for old in [h for h in ours.handlers if isinstance(h, AppendSink)]:
        ours.removeHandler(old)
        old.close()
    ours.addHandler(handler)
    ours.setLevel(level)
    ours.propagate = False


_configured: tuple[str, str] | None = None


def configure_logging(log_format: str = "console", level: str = "info") -> None:
    """Configure structlog to render through stdlib logging (idempotent per format/level).

    ``log_format`` is ``"console"`` (human-readable) or ``"json"`` (one JSON object a line).
    """
    global _configured
    if _configured == (log_format, level):
        return
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            # First: a record its stdlib logger would drop is dropped before anything works on it (the scrubber
            # walked every field of records that the node's log level then discarded).
            structlog.stdlib.filter_by_level,
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


LIBRARY_LOGGERS = (
    "sqlalchemy",
    "urllib3",
    "requests",
    "httpx",
    "httpcore",
    "websocket",
    "Thespian",
    "thespian",
    "opentelemetry",
    "pika",
    "websockets",
)
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
    _install_sink(manager)
    _tuned_manager = manager


def get_logger(name: str) -> Any:
    """A structlog logger bound to ``name`` (configures defaults on first use)."""
    quiet_libraries()
    if _configured is None:
        configure_logging(os.environ.get("ADK_LOG_FORMAT", "console"), os.environ.get("ADK_LOG_LEVEL", "info"))
    return structlog.get_logger(name)
