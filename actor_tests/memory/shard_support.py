"""Helpers that run inside actor processes for the sharded-service tests (importable, so they travel by name)."""

from __future__ import annotations

import itertools
import os
import select
from pathlib import Path
from typing import Any

from adk_actors.memory import InMemoryMemoryService, MemoryScope, SqlMemoryService


class FileClock:
    """A wall clock kept in a file: the test moves it, the service in the actor process reads it (it pickles)."""

    def __init__(self, path: Path, start: float = 1_700_000_000.0) -> None:
        self.path = str(path)
        Path(self.path).write_text(repr(start))

    def __call__(self) -> float:
        return float(Path(self.path).read_text())

    @property
    def now(self) -> float:
        return self()

    def advance(self, seconds: float = 1.0) -> float:
        now = self() + seconds
        Path(self.path).write_text(repr(now))
        return now


def in_memory_for(scope: MemoryScope, **options: Any) -> InMemoryMemoryService:
    """A shard factory: a fresh in-memory service per scope."""
    return InMemoryMemoryService(**options)


def counting_memory(scope: MemoryScope) -> InMemoryMemoryService:
    """A shard whose clock counts its adds: ``created_at`` is the order in which the shard applied them."""
    ticks = itertools.count(1)
    return InMemoryMemoryService(clock=lambda: float(next(ticks)))


class CrashingSql(SqlMemoryService):
    """A SQL service that raises an unforeseen error (a crash of its actor) for the session id ``crash-now``."""

    def erase_session(self, scope: MemoryScope, session_id: str) -> int:
        if session_id == "crash-now":
            raise RuntimeError("simulated defect")
        return super().erase_session(scope, session_id)


class GatedMemory(InMemoryMemoryService):
    """``count`` of the user ``gate`` signals the test through one FIFO and blocks until it writes to another: the
    shard is busy, deterministically, for as long as the test wants."""

    def __init__(self, fifo_dir: str) -> None:
        super().__init__()
        self.fifo_dir = fifo_dir

    def count(self, scope: MemoryScope) -> int:
        if scope.user == "gate":
            # Open the release end first: the test's writer then never waits for a reader, and select() blocks
            # until the test writes (a FIFO that never had a writer does not read as ready on Linux).
            release = os.open(os.path.join(self.fifo_dir, "release"), os.O_RDONLY | os.O_NONBLOCK)
            try:
                entered = os.open(os.path.join(self.fifo_dir, "entered"), os.O_WRONLY | os.O_NONBLOCK)
                os.write(entered, b"x")
                os.close(entered)
                select.select([release], [], [], 20.0)
            finally:
                os.close(release)
        return super().count(scope)


def gated_for(fifo_dir: str, scope: MemoryScope) -> GatedMemory:
    return GatedMemory(fifo_dir)


def remote_roundtrip(service: Any, app: str, user: str, text: str) -> dict[str, Any]:
    """Run in a worker process: add through the unpickled client and read it back."""
    scope = MemoryScope(app, user)
    entry = service.add(scope, text, idempotency_key="remote-1")
    hits = service.search(scope, text.split()[0])
    return {"id": entry.id, "pid": os.getpid(), "hits": [h.entry.id for h in hits], "count": service.count(scope)}
