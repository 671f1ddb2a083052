"""``make bench`` part for memory (issue 23): search latency in one large scope, and a Runner turn with preload.

* **Search**: one scope of ``Sizes.memory_entries`` entries (10 words each from a 5,000-word vocabulary, plus the
  word ``memo``) in each backend of ``Sizes.memory_backends`` (the in-memory BM25 index, SQLite FTS5, PostgreSQL
  ``ts_rank``). Measured: a 3-word query (limit 10), the same with an exact metadata filter, and a query every entry
  matches (the whole scope ranked). PostgreSQL runs in a throwaway schema and is ``ANALYZE``\\ d after the load so
  the GIN index is chosen (see :class:`~adk_actors.memory.SqlMemoryService`).
* **Runner turn with preload**: a text turn through ``Runner.run`` with ``memory_svc`` (SQLite, one scope of
  ``Sizes.memory_runner_entries``) and ``memory_retrieval``, next to the same turn without memory; CPU summed over
  every process of the node and this one (the emulator excluded).

Run alone: ``python -m adk_actors.devtools.bench --only memory``.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

__all__ = ["bench_memory"]

_VOCABULARY = [f"w{i}" for i in range(5000)]
_SCRIPT = {"rules": [{"when": {}, "respond": {"text": "noted"}}]}
_BATCH = 1000


def _load(svc: Any, scope: Any, n: int, rnd: random.Random) -> float:
    """Add ``n`` entries to ``scope`` in batches; the seconds it took."""
    from adk_actors.memory import NewMemory

    started = time.perf_counter()
    left = n
    while left > 0:
        size = min(_BATCH, left)
        batch = [
            NewMemory(
                content=" ".join(rnd.choice(_VOCABULARY) for _ in range(10)) + " memo",
                metadata={"bucket": i % 10},
            )
            for i in range(size)
        ]
        svc.add_batch(scope, batch)
        left -= size
    return time.perf_counter() - started


def _searches(fn: Callable[[str], Any], rnd: random.Random, n: int, words: int) -> list[float]:
    samples = []
    for _ in range(n):
        query = " ".join(rnd.choice(_VOCABULARY) for _ in range(words))
        t0 = time.perf_counter()
        fn(query)
        samples.append(time.perf_counter() - t0)
    return samples


@contextmanager
def _service(backend: str, entries: int) -> Iterator[Any]:
    from adk_actors.devtools.bench import _pg_schema
    from adk_actors.memory import InMemoryMemoryService, SqlMemoryService

    cap = max(entries, 1)
    if backend == "memory":
        yield InMemoryMemoryService(max_entries_per_scope=cap)
        return
    if backend == "sqlite":
        tmp = Path(tempfile.mkdtemp(prefix="adk-bench-memory-"))
        svc = SqlMemoryService(f"sqlite:///{tmp / 'memory.db'}", max_entries_per_scope=cap)
        try:
            yield svc
        finally:
            svc.close()
            shutil.rmtree(tmp, ignore_errors=True)
        return
    with _pg_schema() as url:
        svc = SqlMemoryService(url, max_entries_per_scope=cap)
        try:
            yield svc
        finally:
            svc.close()


def _analyze(svc: Any) -> None:
    """PostgreSQL only: planner statistics right after the bulk load (autovacuum would do it later)."""
    from sqlalchemy import text

    with svc._get_engine().begin() as conn:  # the bench reaches into its own store
        conn.execute(text("ANALYZE"))


def _one_backend(backend: str, n: int, rounds: int) -> dict[str, Any]:
    from adk_actors.devtools.bench import _latency
    from adk_actors.memory import MemoryScope

    rnd = random.Random(20261203)
    scope = MemoryScope("bench", f"u-{uuid.uuid4().hex[:6]}")
    with _service(backend, n) as svc:
        loaded_s = _load(svc, scope, n, rnd)
        if backend == "postgresql":
            _analyze(svc)
        plain = _latency(_searches(lambda q: svc.search(scope, q, limit=10), rnd, rounds, 3))
        filtered = _latency(_searches(lambda q: svc.search(scope, q, filter={"bucket": 3}, limit=10), rnd, rounds, 3))
        broad = _latency(_searches(lambda q: svc.search(scope, "memo", limit=10), rnd, max(3, rounds // 20), 1))
    return {"loaded_s": round(loaded_s, 2), "plain": plain, "filtered": filtered, "all": broad}


def _search_rows(ctx: Any) -> tuple[list[list[Any]], dict[str, Any]]:
    sizes = ctx.sizes
    n = sizes.memory_entries
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for backend in sizes.memory_backends:
        m = data[backend] = _one_backend(backend, n, sizes.memory_searches)
        plain, filtered = m["plain"], m["filtered"]
        rows.append(
            [backend, n, m["loaded_s"], plain["p50_ms"], plain["p99_ms"], filtered["p50_ms"], filtered["p99_ms"]]
            + [m["all"]["p50_ms"]]
        )
    return rows, data


def _turn(runner: Any, i: int) -> Any:
    return runner.run("u", f"s{i}-{uuid.uuid4().hex[:6]}", "w1 w2 w3")


def _runner_rows(ctx: Any) -> tuple[list[list[Any]], dict[str, Any]]:
    from adk_actors.devtools.bench_runner import _measure, _node, _runner
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.memory import MemoryScope

    n = ctx.sizes.runner_runs
    entries = ctx.sizes.memory_runner_entries
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with _service("sqlite", entries) as svc, emulator_process(script=_SCRIPT) as emu, _node() as handle:
        _load(svc, MemoryScope("bench", "u"), entries, random.Random(7))
        retrieval = {"limit": 5, "max_hit_bytes": 2048, "max_total_bytes": 8192, "on_error": "fail"}
        cases: tuple[tuple[str, dict[str, Any]], ...] = (
            ("(a) text turn, no memory", {}),
            ("(b) text turn, memory_retrieval preload (SQLite)", {"memory_svc": svc, "memory_retrieval": retrieval}),
        )
        for label, options in cases:
            runner = _runner(handle, emu, f"BenchMem_{uuid.uuid4().hex[:6]}", [], **options)
            m = _measure(ctx, handle, partial(_turn, runner), n, 1)
            rows.append([label, n, m["p50_ms"], m["p99_ms"], m["cpu_ms_per_run"]])
            data[label] = m
    first, second = (data[label] for label, _ in cases)
    data["preload_delta_cpu_ms"] = round(second["cpu_ms_per_run"] - first["cpu_ms_per_run"], 3)
    return rows, data


def bench_memory(ctx: Any) -> dict[str, Any]:
    """Memory search p50/p99 over one large scope per backend, and a Runner turn with preload retrieval."""
    rows, data = _search_rows(ctx)
    runner_rows, runner_data = _runner_rows(ctx)
    data["runner"] = runner_data
    return {
        "title": "Memory: search in one large scope; a Runner turn with preload retrieval",
        "params": {
            "entries": ctx.sizes.memory_entries,
            "searches": ctx.sizes.memory_searches,
            "runner_entries": ctx.sizes.memory_runner_entries,
            "runs": ctx.sizes.runner_runs,
        },
        "targets": [],
        "columns": [
            "backend",
            "entries",
            "load s",
            "3-word p50 ms",
            "3-word p99 ms",
            "filtered p50 ms",
            "filtered p99 ms",
            "match-all p50 ms",
        ],
        "rows": rows,
        "extra_tables": [
            {
                "title": "Runner turn with memory_retrieval (one scope, SQLite)",
                "columns": ["case", "n", "p50 ms", "p99 ms", "CPU ms/turn (node + caller)"],
                "rows": runner_rows,
            }
        ],
        "notes": [
            "Queries are 3 random vocabulary words, limit 10; 'filtered' adds an exact metadata filter "
            "(one bucket in ten); 'match-all' ranks every entry of the scope.",
            "The preload row includes the search in a worker, the delimited reference block and its bytes in the "
            f"request: {runner_data['preload_delta_cpu_ms']} ms CPU over the plain turn.",
        ],
        "data": data,
    }
