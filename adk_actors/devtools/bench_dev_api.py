"""What the ``/dev/v1`` edge costs, for ``make bench`` (``dev_api``).

* A Runner text turn started and streamed to its outcome: (a) through the facade, ``runs.start`` + ``runs.subscribe``
  (credit flow control, as the edge uses it); (b) over HTTP, ``POST /dev/v1/runs`` + ``GET /dev/v1/runs/{id}/events``
  (SSE) to a :func:`~adk_actors.web.dev.dev_app` served by uvicorn on a thread of this process, with one keep-alive
  ``httpx`` client. CPU is every process of the node plus this one, so (b) also pays for the HTTP client. The target
  is (b) ≤ (a) + 1 ms CPU per turn.
* 200 SSE subscribers on one run: the run's answer waits 2 s in the emulator; every subscriber connects, then all read
  to the outcome. CPU of the whole fan-out and the peak memory (PSS of this process and the node).

The emulator runs in a process of its own (not counted).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

__all__ = ["bench_dev_api"]

_TOKEN = "bench-dev-token-" + "b" * 16
_SUBSCRIBERS = 200
_SCRIPT = {
    "rules": [
        {"when": {"user_text_equals": "wait"}, "respond": {"text": "Waited for everyone.", "delay_ms": 2000}},
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}


def _facade_turn(runner: Any, handle: Any) -> Any:
    from adk_actors import runs

    def call(i: int) -> Any:
        run_id = runs.start(runner, "u", f"f{i}-{uuid.uuid4().hex[:6]}", "hello", retention_ms=1000, system=handle)
        for item in runs.subscribe(run_id, credit=True, system=handle):
            if item.terminal:
                return item.item
        raise RuntimeError("no outcome")

    return call


def _sse_outcome(lines: Any) -> dict[str, Any]:
    import json

    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name == "outcome":
            return dict(json.loads(line[6:]))
    raise RuntimeError("the stream ended without an outcome")


def _edge_turns(url: str, agent: str, count: int, start: int, one_request: bool) -> list[float]:
    """``count`` turns over HTTP on one keep-alive connection; the latency of each, in seconds. ``one_request``:
    ``POST /dev/v1/runs`` with ``Accept: text/event-stream`` (started and streamed in one request); else the POST,
    then ``GET .../events``. The client process of :func:`_edge_client`."""
    import httpx

    samples = []
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {_TOKEN}"}, timeout=60) as client:
        for i in range(start, start + count):
            t0 = time.perf_counter()
            body = {"agent": agent, "input": "hello", "session_id": f"e{i}-{uuid.uuid4().hex[:6]}"}
            if one_request:
                sse = {"accept": "text/event-stream"}
                with client.stream("POST", "/dev/v1/runs", json=body, headers=sse) as response:
                    outcome = _sse_outcome(response.iter_lines())
            else:
                started = client.post("/dev/v1/runs", json=body)
                started.raise_for_status()
                with client.stream("GET", f"/dev/v1/runs/{started.json()['run_id']}/events") as response:
                    outcome = _sse_outcome(response.iter_lines())
            if outcome["state"] != "completed":
                raise RuntimeError(f"a run ended {outcome['state']}")
            samples.append(time.perf_counter() - t0)
    return samples


def _edge_client(url: str, agent: str, warm: int, n: int, one_request: bool) -> list[float]:
    """Run the HTTP client in a process of its own, so its CPU (httpx's) is not counted as the edge's."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "adk_actors.devtools.bench_dev_api",
            "--client",
            url,
            agent,
            str(warm),
            str(n),
            "one" if one_request else "two",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return [float(x) for x in json.loads(out.stdout)]


async def _fan_out(url: str, run_id: str, count: int, connected: threading.Event) -> list[dict[str, Any]]:
    import httpx

    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    headers = {"authorization": f"Bearer {_TOKEN}"}
    opened = 0
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as client:

        async def one() -> dict[str, Any]:
            nonlocal opened
            import json

            async with client.stream("GET", f"/dev/v1/runs/{run_id}/events") as response:
                opened += 1
                if opened == count:
                    connected.set()
                name = ""
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: ") and name in ("outcome", "error", "bound"):
                        data = dict(json.loads(line[6:]))
                        if name == "outcome":
                            return data
                        raise RuntimeError(f"the stream ended with {name}: {data}")
            raise RuntimeError(f"the stream ended without an outcome (status {response.status_code})")

        return list(await asyncio.gather(*(one() for _ in range(count))))


def _measure_client(handle: Any, url: str, agent: str, n: int, one_request: bool) -> dict[str, Any]:
    """Node and edge CPU (this process: the server thread) while a client process runs ``n`` turns; a first
    client process of 10 turns warms the server up unmeasured."""
    from adk_actors.devtools.bench import CpuSpan, _latency, _ms

    _edge_client(url, agent, 0, min(10, n), one_request)
    cpu = CpuSpan(handle.pgid).start()
    t0 = time.perf_counter()
    samples = _edge_client(url, agent, 0, n, one_request)
    wall = time.perf_counter() - t0
    cpu.stop()
    out = _latency(samples)
    out.update({"runs_per_s": round(n / wall, 1), "cpu_ms_per_run": _ms(cpu.total_s / n)})
    return out


def bench_dev_api(ctx: Any) -> dict[str, Any]:
    """The edge's CPU per streamed turn over the facade, and 200 SSE subscribers on one run."""
    import os

    from adk_actors import runs
    from adk_actors.devtools.bench import TARGETS, CpuSpan, _ms, group_pss_kb, pss_kb
    from adk_actors.devtools.bench_runner import _measure, _node, _runner
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.web.dev import dev_app
    from adk_actors.web.edge import DevToken, EdgeLimits
    from adk_actors.web.offload import Offload
    from adk_actors.web.serve import start_in_thread

    n = ctx.sizes.runner_runs
    target = TARGETS["dev_api_overhead_cpu_ms"]
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with emulator_process(script=_SCRIPT) as emu, _node() as handle:
        name = f"BenchDev_{uuid.uuid4().hex[:6]}"
        runner = _runner(handle, emu, name, [], streaming_mode="text")  # as the edge runs them
        limits = EdgeLimits(max_concurrent_streams=_SUBSCRIBERS + 16)
        app = dev_app(handle, token=DevToken(_TOKEN), limits=limits, offload=Offload(16, 1024, max_iterators=512))
        with start_in_thread(app, max_connections=1024) as server:
            facade = _measure(ctx, handle, _facade_turn(runner, handle), n, 1)
            edge = _measure_client(handle, server.url, name, n, True)
            two = _measure_client(handle, server.url, name, n, False)
            for label, m in (
                ("(a) runs.start + runs.subscribe (facade)", facade),
                ("(b) POST /runs with Accept: text/event-stream (edge, one request)", edge),
                ("POST /runs, then GET /runs/{id}/events (edge, two requests)", two),
            ):
                rows.append([label, n, m["p50_ms"], m["p99_ms"], m["cpu_ms_per_run"], "-", "-"])
                data[label] = m
            delta = round(edge["cpu_ms_per_run"] - facade["cpu_ms_per_run"], 3)

            run_id = runs.start(runner, "u", f"fan-{uuid.uuid4().hex[:6]}", "wait", retention_ms=60000, system=handle)
            connected = threading.Event()
            base_pss = group_pss_kb(handle.pgid) + pss_kb(os.getpid())
            peak = [base_pss]
            stop = threading.Event()

            def sample() -> None:
                while not stop.wait(0.05):
                    peak[0] = max(peak[0], group_pss_kb(handle.pgid) + pss_kb(os.getpid()))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            cpu = CpuSpan(handle.pgid).start()
            t0 = time.perf_counter()
            outcomes = asyncio.run(_fan_out(server.url, run_id, _SUBSCRIBERS, connected))
            wall = time.perf_counter() - t0
            cpu.stop()
            stop.set()
            sampler.join()
            assert all(o["state"] == "completed" for o in outcomes) and len(outcomes) == _SUBSCRIBERS
            fan = {
                "subscribers": _SUBSCRIBERS,
                "wall_s": round(wall, 3),
                "cpu_ms": _ms(cpu.total_s),
                "cpu_ms_per_subscriber": _ms(cpu.total_s / _SUBSCRIBERS),
                "pss_mb_before": round(base_pss / 1024, 1),
                "pss_mb_peak": round(peak[0] / 1024, 1),
            }
            data["fan_out"] = fan
            rows.append(
                [
                    f"{_SUBSCRIBERS} SSE subscribers on one run (answer after 2 s)",
                    _SUBSCRIBERS,
                    "-",
                    "-",
                    "-",
                    f"{fan['cpu_ms']} ms ({fan['cpu_ms_per_subscriber']} per subscriber)",
                    f"{fan['pss_mb_before']} → {fan['pss_mb_peak']} MB",
                ]
            )
    data["delta_cpu_ms"] = delta
    return {
        "title": "The /dev/v1 edge: a streamed run over HTTP vs the facade, and SSE fan-out",
        "params": {"n": n, "subscribers": _SUBSCRIBERS},
        "targets": [[f"(b) ≤ (a) + {target:g} ms CPU per streamed turn", f"{delta:+.3f} ms", delta <= target]],
        "columns": ["case", "n", "p50 ms", "p99 ms", "CPU ms/turn (system + caller)", "fan-out CPU", "memory (PSS)"],
        "rows": rows,
        "notes": [
            "The edge is dev_app served by uvicorn on a thread of the benchmark process (its CPU counts as the "
            "caller's, as runs.start + subscribe do in (a)); the HTTP client (httpx, one keep-alive connection) runs "
            "in a process of its own and is not counted.",
            "Memory: PSS of every node process plus the benchmark process, before the fan-out and at its peak.",
        ],
        "data": data,
    }


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) == 7 and sys.argv[1] == "--client":
        _url, _agent, _warm, _n, _one = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        _edge_turns(_url, _agent, _warm, 0, _one == "one")
        print(json.dumps(_edge_turns(_url, _agent, _n, _warm, _one == "one")))
