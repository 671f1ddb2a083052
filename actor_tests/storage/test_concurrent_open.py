"""Several processes opening one new SQLite store at the same moment all succeed: the schema migration is retried
when a peer still holds the file (switching it to WAL, creating the schema), instead of failing with
``open_failed``. Found in the suite: a worker's memory ingestion and the test's first read raced."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from adk_actors.memory import MemoryScope, SqlMemoryService

PROCESSES = 6
ROUNDS = 8


def _open_and_read(url: str, barrier: Any, results: Any) -> None:
    store = SqlMemoryService(url)
    barrier.wait()
    try:
        store.count(MemoryScope("app", "user"))
        results.put("ok")
    except Exception as exc:  # the outcome under test, reported to the parent
        results.put(f"{type(exc).__name__}:{getattr(exc, 'reason', '')}")


def _round(folder: Path) -> list[str]:
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    url = f"sqlite:///{folder / 'memory.db'}"
    procs = [ctx.Process(target=_open_and_read, args=(url, barrier, results)) for _ in range(PROCESSES)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    return outcomes


def test_processes_opening_a_new_sqlite_store_at_once_all_succeed(tmp_path: Path) -> None:
    for i in range(ROUNDS):
        folder = tmp_path / f"r{i}"
        folder.mkdir()
        assert _round(folder) == ["ok"] * PROCESSES
