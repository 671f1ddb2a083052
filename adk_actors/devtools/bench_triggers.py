"""``make bench`` part for ambient triggers (issue 25): submit→completed latency and throughput.

One trigger (``max_concurrency`` = ``Sizes.trigger_concurrency``, memory mode) on the product node runs a text
agent against the Gemini emulator at 0 ms latency (a process of its own: its CPU is not counted). Closed-loop
submitter threads each submit one delivery, await its outcome, then submit the next. Two cases: four submitters per
concurrency slot for ``Sizes.trigger_deliveries`` (the trigger always has a queue to drain: throughput, latency with
the queue wait) and one per slot for a fifth of them (latency without queue wait). The queue stays below
``max_queue``, so no delivery is refused. CPU is every process of the node plus the submitting process, divided by
the deliveries.

Run alone: ``python -m adk_actors.devtools.bench --only triggers``.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["bench_triggers"]

_SCRIPT = {"rules": [{"when": {}, "respond": {"text": "Done: {user_text}"}}]}
_SUBMITTERS_PER_SLOT = 4
_AWAIT_S = 120.0


def _drive(handle: Any, name: str, n: int, submitters: int, prefix: str) -> dict[str, Any]:
    """``n`` deliveries by ``submitters`` closed-loop threads; latency samples, outcomes, wall and CPU."""
    from adk_actors.devtools.bench import CpuSpan
    from adk_actors.triggers import await_event, submit

    lock = threading.Lock()
    issued = [0]
    samples: list[float] = []
    outcomes: dict[str, int] = {}

    def worker() -> None:
        while True:
            with lock:
                if issued[0] >= n:
                    return
                issued[0] += 1
                key = f"{prefix}-{issued[0]}"
            t0 = time.perf_counter()
            ref = submit(name, {"payload": f"item {key}", "idempotency_key": key}, system=handle).ref
            outcome = await_event(ref, _AWAIT_S, system=handle).outcome
            took = time.perf_counter() - t0
            with lock:
                samples.append(took)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1

    cpu = CpuSpan(handle.pgid).start()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(submitters, thread_name_prefix="bench-trigger") as pool:
        for future in [pool.submit(worker) for _ in range(submitters)]:
            future.result()
    wall = time.perf_counter() - t0
    cpu.stop()
    if outcomes != {"completed": n}:
        raise RuntimeError(f"not every delivery completed: {outcomes}")
    return {"samples": samples, "wall_s": wall, "cpu_s": cpu.total_s}


def bench_triggers(ctx: Any) -> dict[str, Any]:
    """Triggers: submit→completed latency p50/p99 and deliveries/s at concurrency 8 (emulator at 0 ms)."""
    from adk_actors.devtools.bench import _latency, _ms
    from adk_actors.devtools.bench_runner import _node, _runner
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.triggers import register_trigger, trigger_status, unregister_trigger

    n = ctx.sizes.trigger_deliveries
    concurrency = ctx.sizes.trigger_concurrency
    cases = [
        # (label, submitters, deliveries): the queue kept busy (throughput), then one submitter per slot (latency
        # without queue wait)
        ("queue kept busy", concurrency * _SUBMITTERS_PER_SLOT, n),
        ("one submitter per slot", concurrency, max(1, n // 5)),
    ]
    name = f"bench-{uuid.uuid4().hex[:6]}"
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with emulator_process(script=_SCRIPT) as emu, _node() as handle:
        runner = _runner(handle, emu, f"BenchTrigger_{uuid.uuid4().hex[:6]}", [])
        options = {"max_concurrency": concurrency, "max_queue": max(256, 2 * concurrency * _SUBMITTERS_PER_SLOT)}
        register_trigger(name, runner, options, system=handle)
        try:
            _drive(handle, name, min(20, n), concurrency, "warm")  # the first runs open the session store's tables
            for i, (label, submitters, count) in enumerate(cases):
                found = _drive(handle, name, count, submitters, f"c{i}")
                m = _latency(found["samples"])
                m.update(
                    {
                        "submitters": submitters,
                        "deliveries_per_s": round(count / found["wall_s"], 1),
                        "cpu_ms_per_delivery": _ms(found["cpu_s"] / count),
                        "wall_s": round(found["wall_s"], 3),
                    }
                )
                data["busy" if i == 0 else "per_slot"] = m
                rows.append(
                    [
                        label,
                        count,
                        submitters,
                        m["wall_s"],
                        m["deliveries_per_s"],
                        m["p50_ms"],
                        m["p99_ms"],
                        m["cpu_ms_per_delivery"],
                    ]
                )
            status = trigger_status(name, system=handle)
        finally:
            unregister_trigger(name, system=handle)
    data["trigger"] = {k: status.get(k) for k in ("accepted", "duplicates", "rejected", "completed", "failed")}
    return {
        "title": "Triggers: submit→completed latency and throughput (one trigger, concurrency "
        f"{concurrency}, emulator at 0 ms)",
        "params": {"deliveries": n, "concurrency": concurrency},
        "targets": [],
        "columns": [
            "case",
            "deliveries",
            "submitters",
            "wall s",
            "deliveries/s",
            "p50 ms",
            "p99 ms",
            "CPU ms/delivery",
        ],
        "rows": rows,
        "notes": [
            "Each submitter thread submits one delivery, awaits its outcome, then submits the next; latency is "
            "submit→completed as it sees it. With four submitters per slot the trigger always has a queue (the "
            "throughput case, its latency includes the queue wait); with one per slot there is none.",
            "Each delivery is a stable run through the Runner in its own per-event session (one model call); the "
            "trigger runs in memory mode.",
            "CPU is every process of the node plus the submitting process; the emulator is not counted.",
        ],
        "data": data,
    }
