"""Reliability under plain load for ``make bench`` (``reliability``), on SQLite sessions and with no fault injected.

* **Soak**: thousands of sequential ``Runner.run`` text turns (500 sessions reused, the emulator at 50 ms), once with
  the libraries logging at the default level and once at INFO (every SQL statement a log record made on a host's
  I/O thread, as on the nodes issue 16 measured). Reported: failed turns, node processes that exited (the set of
  pids before and after), transport errors in Thespian's log, turn latency, and the hosts' fds and PSS.
* **Concurrent starts**: hundreds of ``runs.start`` calls released at once against the same kind of Runner: how
  long each start takes to answer, then how every run ends.

Each part starts its own node and runs the emulator in a process of its own (``emulator_proc``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["bench_reliability"]

_TRANSPORT_ERRORS = ("changed size during iteration", "Bad file descriptor", "transport run exception")


def _sql_runner(handle: Any, emu: Any, name: str) -> Any:
    from adk_actors.agents import spawn_agent
    from adk_actors.runner import Runner
    from adk_actors.sessions import SqlSessionService

    agent = spawn_agent(
        name, {"provider": "gemini", "base_url": emu.base_url, "api_key": "bench-key"}, [], system=handle
    )
    service = SqlSessionService(f"sqlite:///{handle.settings.data_dir}/sessions.db")
    return Runner(agent, "bench", service, system=handle)


def _hosts(handle: Any) -> tuple[int, float]:
    """Open fds and PSS (MB) summed over the node's hosts."""
    from adk_actors.devtools.bench import pss_kb

    fds, pss = 0, 0
    for i in range(handle.settings.hosts):
        pid = handle.host_entry(i).pid
        fds += len(os.listdir(f"/proc/{pid}/fd"))
        pss += pss_kb(pid)
    return fds, round(pss / 1024, 1)


def _transport_errors(handle: Any) -> dict[str, int]:
    from adk_actors.runtime.logdefs import thesplog_path

    log = thesplog_path(Path(handle.settings.data_dir), handle.settings.admin_port)
    text = log.read_text(errors="replace") if log.exists() else ""
    return {needle: text.count(needle) for needle in _TRANSPORT_ERRORS}


def _soak(turns: int, latency_ms: int, library_level: str) -> dict[str, Any]:
    from adk_actors.devtools.bench import pct
    from adk_actors.devtools.bench_runner import _node
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.runtime.procs import group_pids

    with emulator_process(latency_ms=latency_ms) as emu, _node(library_log_level=library_level) as handle:
        runner = _sql_runner(handle, emu, f"Soak_{uuid.uuid4().hex[:6]}")
        runner.run("u", "warm", "hi")
        pids = set(group_pids(handle.pgid))
        fds_before, pss_before = _hosts(handle)
        samples: list[float] = []
        failures: Counter[str] = Counter()
        t0 = time.perf_counter()
        for i in range(turns):
            began = time.perf_counter()
            try:
                if runner.run("u", f"s{i % 500}", f"hello {i}") != f"You said: hello {i}":
                    failures["wrong_output"] += 1
            except Exception as exc:  # count every failure; the were isolated turns
                failures[f"{type(exc).__name__}({getattr(exc, 'reason', '')})"] += 1
            samples.append(time.perf_counter() - began)
        wall = time.perf_counter() - t0
        exited = len(pids - set(group_pids(handle.pgid)))
        fds_after, pss_after = _hosts(handle)
        errors = _transport_errors(handle)
    return {
        "turns": turns,
        "latency_ms": latency_ms,
        "library_log_level": library_level,
        "wall_s": round(wall, 1),
        "turns_per_s": round(turns / wall, 1),
        "p50_ms": round(pct(samples, 0.5) * 1000, 1),
        "p99_ms": round(pct(samples, 0.99) * 1000, 1),
        "failures": dict(failures),
        "processes_exited": exited,
        "transport_errors": errors,
        "host_fds": [fds_before, fds_after],
        "host_pss_mb": [pss_before, pss_after],
    }


def _starts(count: int, latency_ms: int) -> dict[str, Any]:
    from adk_actors.devtools.bench import pct
    from adk_actors.devtools.bench_runner import _node
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.runs import api as runs_api

    with emulator_process(latency_ms=latency_ms) as emu, _node() as handle:
        runner = _sql_runner(handle, emu, f"Starts_{uuid.uuid4().hex[:6]}")
        runner.run("u", "warm", "hi")
        barrier = threading.Barrier(count)

        def start(i: int) -> tuple[str | None, float, str]:
            barrier.wait()
            began = time.perf_counter()
            try:
                run_id = runs_api.start(runner, "u", f"c{i}", f"q{i}", retention_ms=600000, system=handle)
                return run_id, time.perf_counter() - began, ""
            except Exception as exc:
                return None, time.perf_counter() - began, f"{type(exc).__name__}({getattr(exc, 'reason', '')})"

        t0 = time.perf_counter()
        with ThreadPoolExecutor(count) as pool:
            started = list(pool.map(start, range(count)))
        with ThreadPoolExecutor(32) as pool:
            outcomes = list(
                pool.map(lambda s: runs_api.wait(s[0], 300, system=handle), [s for s in started if s[0] is not None])
            )
        wall = time.perf_counter() - t0
    took = [s[1] for s in started]
    ends = Counter(type(o).__name__ + (f"({o.reason})" if hasattr(o, "reason") else "") for o in outcomes)
    return {
        "starts": count,
        "latency_ms": latency_ms,
        "start_p50_s": round(pct(took, 0.5), 2),
        "start_p99_s": round(pct(took, 0.99), 2),
        "start_max_s": round(max(took), 2),
        "start_errors": dict(Counter(s[2] for s in started if s[2])),
        "outcomes": dict(ends),
        "all_done_s": round(wall, 1),
    }


def _counts(values: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(values.items()) if v) or "0"


def bench_reliability(ctx: Any) -> dict[str, Any]:
    """Reliability under plain load: a soak of sequential Runner turns and a burst of concurrent starts (SQLite)."""
    sizes = ctx.sizes
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for level in sizes.soak_library_levels:
        m = _soak(sizes.soak_turns, sizes.soak_latency_ms, level)
        data[f"soak_{level}"] = m
        rows.append(
            [
                level,
                m["turns"],
                m["latency_ms"],
                _counts(m["failures"]),
                m["processes_exited"],
                _counts(m["transport_errors"]),
                m["turns_per_s"],
                m["p50_ms"],
                m["p99_ms"],
                f"{m['host_fds'][0]} → {m['host_fds'][1]}",
                f"{m['host_pss_mb'][0]} → {m['host_pss_mb'][1]}",
            ]
        )
    s = _starts(sizes.concurrent_starts, sizes.soak_latency_ms)
    data["starts"] = s
    starts_table = {
        "columns": [
            "concurrent starts",
            "latency ms",
            "start p50 s",
            "start p99 s",
            "start max s",
            "start errors",
            "outcomes",
            "all done after s",
        ],
        "rows": [
            [
                s["starts"],
                s["latency_ms"],
                s["start_p50_s"],
                s["start_p99_s"],
                s["start_max_s"],
                _counts(s["start_errors"]),
                _counts(s["outcomes"]),
                s["all_done_s"],
            ]
        ],
    }
    return {
        "title": f"Reliability under plain load: {sizes.soak_turns:,} sequential Runner turns, "
        f"{sizes.concurrent_starts} concurrent starts (SQLite sessions)",
        "params": {"turns": sizes.soak_turns, "latency_ms": sizes.soak_latency_ms, "starts": sizes.concurrent_starts},
        "columns": [
            "library log level",
            "turns",
            "latency ms",
            "failed turns",
            "node processes exited",
            "transport errors (Thespian log)",
            "turns/s",
            "p50 ms",
            "p99 ms",
            "host fds",
            "host PSS MB",
        ],
        "rows": rows,
        "extra_tables": [starts_table],
        "notes": [
            "Soak: one fresh node per row, one SqlSessionService (SQLite file in the node's data dir), "
            "turn i uses session s{i mod 500}; every answer is checked. 'node processes exited' compares "
            "the node's pids before and after; transport errors count Thespian's 'dictionary changed "
            "size', 'Bad file descriptor' and 'transport run exception' lines.",
            "Library log level 'info' makes every SQL statement a log record on a host's I/O thread "
            "(the node default is 'warning'); those records reach Thespian through the actor's own "
            "thread (runtime/thespian_tuning.py, LogRelay).",
            "Concurrent starts: a fresh node; the callers are released together by a barrier; each "
            "start is timed until runs.start returns, then every run is waited for (32 threads).",
        ],
        "data": data,
    }
