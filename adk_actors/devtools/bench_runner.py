"""Runner and stable-run benchmarks for ``make bench`` (``runner`` and ``runner_c1000``).

Each benchmark starts its own node (the product composer: admission, run index, session store) and the Gemini
emulator in a process of its own (its CPU is not counted), so it measures what an application gets from
``Runner.run`` / ``runs.start`` + ``runs.wait``.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["bench_runner", "bench_runner_c1000"]

_TOOL_SCRIPT = {
    "rules": [
        {
            "when": {"user_text_contains": "weather", "has_function_response": False},
            "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
        },
        {
            "when": {"has_function_response": True},
            "respond": {"text": "The weather in {args.city} is {response.forecast}."},
        },
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}


def get_weather(city: str) -> dict[str, str]:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


@contextlib.contextmanager
def _node(**settings: Any) -> Iterator[Any]:
    from adk_actors.node import open_actor_system
    from adk_actors.settings import Settings
    from adk_actors.testing import reserved_port

    data_dir = Path(tempfile.mkdtemp(prefix="adk-bench-runner-"))
    try:
        values = {
            "admin_port": reserved_port(),
            "data_dir": str(data_dir),
            "hosts": 2,
            "workers": 2,
            "start_timeout_s": 60.0,
            "log_level": "warning",
            **settings,
        }
        with open_actor_system(Settings.from_dict(values)) as handle:
            yield handle
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _runner(handle: Any, emu: Any, name: str, tools: list[Any], **options: Any) -> Any:
    from adk_actors.agents import spawn_agent
    from adk_actors.node import session_service
    from adk_actors.runner import Runner

    agent = spawn_agent(
        name, {"provider": "gemini", "base_url": emu.base_url, "api_key": "bench-key"}, tools, system=handle
    )
    return Runner(agent, "bench", session_service(handle.settings), system=handle, **options)


def _measure(ctx: Any, handle: Any, fn: Callable[[int], Any], n: int, threads: int) -> dict[str, Any]:
    from adk_actors.devtools.bench import CpuSpan, _latency, _ms

    for i in range(min(10, n)):
        fn(-1 - i)  # warm-up
    samples: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        t0 = time.perf_counter()
        fn(i)
        with lock:
            samples.append(time.perf_counter() - t0)

    cpu = CpuSpan(handle.pgid).start()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(n)))
    wall = time.perf_counter() - t0
    cpu.stop()
    out = _latency(samples)
    out.update(
        {
            "runs_per_s": round(n / wall, 1),
            "cpu_ms_per_run": _ms(cpu.total_s / n),
            "system_cpu_ms_per_run": _ms(cpu.system_s / n),
        }
    )
    return out


def bench_runner(ctx: Any) -> dict[str, Any]:
    """Runner.run and stable runs (runs.start + runs.wait): runs/s, latency and CPU per run, text and tool turns."""
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.runs import Completed
    from adk_actors.runs import api as runs_api
    from adk_actors.tools import FunctionTool

    n = ctx.sizes.runner_runs
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with emulator_process(script=_TOOL_SCRIPT) as emu, _node() as handle:
        tag = uuid.uuid4().hex[:6]
        text = _runner(handle, emu, f"BenchText_{tag}", [])
        tool = _runner(handle, emu, f"BenchTool_{tag}", [FunctionTool(get_weather, inline=True)])
        worker = _runner(handle, emu, f"BenchWorker_{tag}", [FunctionTool(get_weather)])

        def run(runner: Any, prompt: str) -> Callable[[int], Any]:
            def call(i: int) -> Any:
                out = runner.run("u", f"s{i}-{uuid.uuid4().hex[:6]}", prompt)
                assert isinstance(out, str)
                return out

            return call

        def stable(runner: Any, prompt: str) -> Callable[[int], Any]:
            def call(i: int) -> Any:
                run_id = runs_api.start(
                    runner, "u", f"r{i}-{uuid.uuid4().hex[:6]}", prompt, retention_ms=1000, system=handle
                )
                outcome = runs_api.wait(run_id, 60, system=handle)
                assert isinstance(outcome, Completed)
                return outcome

            return call

        cases = [
            ("Runner.run, text turn", run(text, "hello"), 1),
            ("Runner.run, text turn", run(text, "hello"), 8),
            ("Runner.run, tool turn (inline tool)", run(tool, "weather?"), 1),
            ("Runner.run, tool turn (worker tool)", run(worker, "weather?"), 1),
            ("runs.start + runs.wait, text turn", stable(text, "hello"), 1),
            ("runs.start + runs.wait, text turn", stable(text, "hello"), 8),
            ("runs.start + runs.wait, tool turn (inline)", stable(tool, "weather?"), 1),
        ]
        for label, fn, threads in cases:
            m = _measure(ctx, handle, fn, n, threads)
            rows.append([label, threads, n, m["runs_per_s"], m["p50_ms"], m["p99_ms"], m["cpu_ms_per_run"]])
            data[f"{label} x{threads}"] = m
    from adk_actors.devtools.bench import TARGETS

    t_text, t_tool = TARGETS["runner_text_cpu_ms"], TARGETS["runner_tool_cpu_ms"]
    text_cpu = data["Runner.run, text turn x1"]["cpu_ms_per_run"]
    tool_cpu = data["Runner.run, tool turn (inline tool) x1"]["cpu_ms_per_run"]
    targets = [
        [f"Runner.run text turn ≤ {t_text:g} ms CPU (in-memory sessions)", f"{text_cpu} ms", text_cpu <= t_text],
        [f"Runner.run tool turn (inline tool) ≤ {t_tool:g} ms CPU", f"{tool_cpu} ms", tool_cpu <= t_tool],
    ]
    return {
        "title": "Runner and stable runs (local emulator, no latency)",
        "params": {"n": n},
        "targets": targets,
        "columns": ["path", "caller threads", "n", "runs/s", "p50 ms", "p99 ms", "CPU ms/run (system + caller)"],
        "rows": rows,
        "notes": [
            "Each run is a fresh session of the node's in-memory session store: user event + final event "
            "(+ model and tool events for a tool turn) written through the store actor, one at a time.",
            "A tool turn is two model calls. The inline tool runs in the agent's host; the worker tool "
            "in the worker-process pool.",
            "CPU = every process of the actor system (schedstat of all threads) plus the caller; the "
            "emulator runs in a process of its own and its CPU is not included.",
        ],
        "data": data,
    }


def _peak_pss(pgid: int, stop: threading.Event, peak: list[int]) -> None:
    from adk_actors.devtools.bench import group_pss_kb

    while not stop.wait(0.1):
        peak[0] = max(peak[0], group_pss_kb(pgid))


def _c_case(io_threads: int, concurrency: int, latency_ms: int) -> dict[str, Any]:
    from adk_actors.devtools.bench import group_pss_kb
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.runs import Completed
    from adk_actors.runs import api as runs_api

    with (
        emulator_process(latency_ms=latency_ms) as emu,
        _node(host_io_threads=io_threads, max_concurrent_invocations=concurrency) as handle,
    ):
        runner = _runner(handle, emu, f"BenchC_{uuid.uuid4().hex[:6]}", [])
        runner.run("u", "warm", "hi")
        idle_kb = group_pss_kb(handle.pgid)
        peak = [idle_kb]
        stop = threading.Event()
        sampler = threading.Thread(target=_peak_pss, args=(handle.pgid, stop, peak), daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            ids = list(
                pool.map(
                    lambda i: runs_api.start(runner, "u", f"c{i}", f"q{i}", retention_ms=600000, system=handle),
                    range(concurrency),
                )
            )
            started = time.perf_counter() - t0
            outcomes = list(pool.map(lambda r: runs_api.wait(r, 300, system=handle), ids))
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
    ok = sum(1 for i, o in enumerate(outcomes) if isinstance(o, Completed) and o.output == f"You said: q{i}")
    return {
        "wall_s": wall,
        "start_s": started,
        "completed_ok": ok,
        "idle_pss_mb": idle_kb / 1024,
        "peak_pss_mb": peak[0] / 1024,
    }


def bench_runner_c1000(ctx: Any) -> dict[str, Any]:
    """C concurrent stable runs with 200 ms emulator latency: wall time vs the ideal, peak PSS of the actor system."""
    concurrency = ctx.sizes.concurrent_runs
    latency_ms = 200
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for io_threads in ctx.sizes.concurrent_io_threads:
        m = _c_case(io_threads, concurrency, latency_ms)
        rows.append(
            [
                io_threads,
                concurrency,
                latency_ms,
                round(m["start_s"], 2),
                round(m["wall_s"], 2),
                round(m["wall_s"] / (latency_ms / 1000), 1),
                m["completed_ok"],
                round(m["idle_pss_mb"], 1),
                round(m["peak_pss_mb"], 1),
            ]
        )
        data[f"io_threads_{io_threads}"] = m
    return {
        "title": f"{concurrency} concurrent stable runs, {latency_ms} ms model latency",
        "params": {"concurrency": concurrency, "latency_ms": latency_ms},
        "columns": [
            "host_io_threads",
            "runs",
            "latency ms",
            "all started after s",
            "all done after s",
            "× ideal (latency)",
            "completed + matched",
            "PSS before MB",
            "peak PSS MB",
        ],
        "rows": rows,
        "notes": [
            "Ideal = one model latency (every run in parallel). Runs are started from 32 caller threads; "
            "the agent admits up to max_concurrent_invocations session queues (set to the run count).",
            "Provider calls are blocking HTTP on each host's I/O threads: with the default 16 threads per "
            "host (2 hosts) at most 32 model calls are in flight, so C runs take about C/32 latencies; "
            "raising host_io_threads lifts that bound at the cost of thread stacks (see PSS).",
            "PSS = proportional set size summed over every process of the actor system, sampled every 100 ms.",
        ],
        "data": data,
    }
