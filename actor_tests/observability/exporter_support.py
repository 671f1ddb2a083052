"""Observation exporters for the exporter tests, importable by name (worker processes load them that way).

Each appends the envelopes it gets, one JSON line each, to ``config["journal"]`` (a file in the test's temp dir:
the simplest witness every process can write), or fails as its config says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.plugins.hooks import thaw

__all__ = ["FailingExporter", "JournalExporter", "NotAnExporter", "read_journal"]


class JournalExporter:
    """Appends every envelope to ``config["journal"]``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.path = str(config["journal"])

    def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(thaw(e), sort_keys=True) + "\n" for e in envelopes))


class FailingExporter:
    """Raises on every export (its message would leak the envelope if anything echoed it)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
        raise RuntimeError(f"collector refused {json.dumps(thaw(envelopes[0]))}")


class NotAnExporter:
    """Has no ``export``."""


def read_journal(path: str) -> list[dict[str, Any]]:
    """The envelopes appended to ``path`` so far (``[]`` before the first)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
