"""``make bench`` part for A2A (issue 22): a ``SendMessage`` round trip to a text-turn agent over HTTP on loopback,
next to ``Runner.run`` of the same turn.

* (a) ``Runner.run`` through the facade;
* (b) ``SendMessage`` (blocking) to :func:`~adk_actors.web.a2a_app` served by uvicorn on a thread of this process,
  from our client (``adk_actors.a2a.A2aClient``, one keep-alive connection) in a process of its own.

CPU is every process of the node plus this one (the server thread), not the client's process. The emulator runs in
a process of its own (not counted).

Run alone: ``python -m adk_actors.devtools.bench --only a2a``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

__all__ = ["bench_a2a"]

_SCRIPT = {"rules": [{"when": {}, "respond": {"text": "You said: {user_text}"}}]}


def _client(url: str, n: int) -> list[float]:
    """``n`` blocking sends from a client process; the latency of each, in seconds."""
    out = subprocess.run(
        [sys.executable, "-m", "adk_actors.devtools.bench_a2a", "--client", url, str(n)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return [float(x) for x in json.loads(out.stdout)]


def _client_main(url: str, n: int) -> None:
    from adk_actors import a2a

    card = a2a.discover(url, allow_http_loopback=True)
    samples = []
    with a2a.A2aClient(card, allow_http_loopback=True) as client:
        for _ in range(n):
            t0 = time.perf_counter()
            task = client.send("hello")["task"]
            if task["status"]["state"] != "TASK_STATE_COMPLETED":
                raise RuntimeError(task["status"]["state"])
            samples.append(time.perf_counter() - t0)
    sys.stdout.write(json.dumps(samples))


def _warm_up(url: str, n: int) -> None:
    from adk_actors import a2a

    with a2a.A2aClient(a2a.discover(url, allow_http_loopback=True), allow_http_loopback=True) as client:
        for _ in range(n):
            client.send("hello")


def bench_a2a(ctx: Any) -> dict[str, Any]:
    """An A2A SendMessage round trip vs ``Runner.run``: p50/p99 and CPU per task."""
    from adk_actors.devtools.bench import CpuSpan, _latency, _ms
    from adk_actors.devtools.bench_runner import _measure, _node, _runner
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.web.a2a_server import A2A_PATH, A2aLimits, a2a_app, agent_card
    from adk_actors.web.serve import start_in_thread

    n = ctx.sizes.runner_runs
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with emulator_process(script=_SCRIPT) as emu, _node() as handle:
        name = f"BenchA2a_{uuid.uuid4().hex[:6]}"
        runner = _runner(handle, emu, name, [])
        facade = _measure(ctx, handle, lambda i: runner.run("u", f"r{i}-{uuid.uuid4().hex[:6]}", "hello"), n, 1)
        app = a2a_app(handle, runner=runner, card=None, limits=A2aLimits(max_tasks=max(1000, 2 * n)))
        with start_in_thread(app, max_connections=1024) as server:
            app.set_card(agent_card(name=name, description="bench", url=server.url + A2A_PATH))
            _warm_up(server.url, min(10, n))  # in this process, before the measurement starts
            cpu = CpuSpan(handle.pgid).start()
            t0 = time.perf_counter()
            samples = _client(server.url, n)
            wall = time.perf_counter() - t0
            cpu.stop()
        edge = _latency(samples)
        edge.update({"runs_per_s": round(n / wall, 1), "cpu_ms_per_run": _ms(cpu.total_s / n)})
        for label, m in (("(a) Runner.run (facade)", facade), ("(b) A2A SendMessage over HTTP (a2a_app)", edge)):
            rows.append([label, n, m["p50_ms"], m["p99_ms"], m["runs_per_s"], m["cpu_ms_per_run"]])
            data[label] = m
    data["delta_cpu_ms"] = round(edge["cpu_ms_per_run"] - facade["cpu_ms_per_run"], 3)
    return {
        "title": "A2A: a SendMessage round trip vs Runner.run (text turn, loopback)",
        "params": {"n": n},
        "targets": [],
        "columns": ["case", "n", "p50 ms", "p99 ms", "tasks/s", "CPU ms/task (node + server)"],
        "rows": rows,
        "notes": [
            "(b) includes the client's discovery once per process, the HTTP round trip, the task store and a stable "
            "run followed to its outcome (runs.start + runs.subscribe) per task; the client process is not counted.",
        ],
        "data": data,
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--client":
        _client_main(sys.argv[2], int(sys.argv[3]))
