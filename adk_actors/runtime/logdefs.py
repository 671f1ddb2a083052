"""Thespian ``logDefs`` for a node: one scrubbed sink file under the data dir (never ``logDefs=False``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adk_actors.logs import SINK_FORMAT

__all__ = ["NULL_LOG_DEFS", "log_defs", "sink_path", "thesplog_path"]

NULL_LOG_DEFS: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"null": {"class": "logging.NullHandler"}},
    "root": {"handlers": ["null"], "level": "CRITICAL"},
}


def sink_path(data_dir: Path, port: int) -> Path:
    return data_dir / "logs" / f"adk-{port}.log"


def thesplog_path(data_dir: Path, port: int) -> Path:
    return data_dir / "logs" / f"thespian-{port}.log"


def log_defs(data_dir: Path, port: int, level: str = "info", log_format: str = "console") -> dict[str, Any]:
    """A dictConfig for Thespian's logger process: every record passes ``ScrubFilter`` into the sink file."""
    formatter: dict[str, Any] = (
        {"()": "adk_actors.logs.JsonFormatter"} if log_format == "json" else {"format": SINK_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"scrub": {"()": "adk_actors.logs.ScrubFilter"}},
        "formatters": {"sink": formatter},
        "handlers": {
            "sink": {
                "class": "logging.FileHandler",
                "filename": str(sink_path(data_dir, port)),
                "filters": ["scrub"],
                "formatter": "sink",
                "level": level.upper(),
            }
        },
        "root": {"handlers": ["sink"], "level": level.upper()},
    }
