"""``make bench`` part for evaluation (issue 24): cases/s of a single-turn eval set at several concurrencies.

Each case is one sample in its own fresh agent and session (spawned, run, stopped and deleted by
:func:`~adk_actors.evaluation.runner.run_eval`), scored by ``exact_response``. The node is the product composer; the
emulator runs in a process of its own (its CPU is not counted).

Run alone: ``python -m adk_actors.devtools.bench --only eval``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

__all__ = ["bench_eval"]

_SCRIPT = {"rules": [{"when": {}, "respond": {"text": "You said: {user_text}"}}]}


def _set(n: int) -> Any:
    from adk_actors.evaluation.model import EvalSet

    cases = [
        {"id": f"c{i:05d}", "turns": [{"id": "t1", "input": f"hello {i}", "expected_response": f"You said: hello {i}"}]}
        for i in range(n)
    ]
    return EvalSet.from_dict({"schema_version": 2, "id": "bench-eval", "cases": cases})


def bench_eval(ctx: Any) -> dict[str, Any]:
    """Evaluation throughput: cases/s of a single-turn set at concurrency 1, 8, 32 (fresh agent + session per case)."""
    from adk_actors.devtools.bench import CpuSpan, _latency, _ms
    from adk_actors.devtools.bench_runner import _node
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.evaluation.model import MetricSpec
    from adk_actors.evaluation.runner import AgentTarget, EvalOptions, run_eval

    n = ctx.sizes.eval_cases
    eval_set = _set(n)
    metrics = [MetricSpec(id="response", criterion="exact_response")]
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with emulator_process(script=_SCRIPT) as emu, _node() as handle:
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "bench-key"}
        target = AgentTarget(f"BenchEval_{uuid.uuid4().hex[:6]}", config)
        run_eval(target, _set(min(10, n)), metrics, EvalOptions(concurrency=4), system=handle)  # warm-up
        for concurrency in ctx.sizes.eval_concurrency:
            cpu = CpuSpan(handle.pgid).start()
            t0 = time.perf_counter()
            result = run_eval(target, eval_set, metrics, EvalOptions(concurrency=concurrency), system=handle)
            wall = time.perf_counter() - t0
            cpu.stop()
            if result["counts"]["passed"] != n:
                raise RuntimeError(f"evaluation did not pass every case: {result['counts']}")
            durations = [s["duration_ms"] / 1000.0 for c in result["cases"] for s in c["samples"]]
            m = _latency(durations)
            m.update({"cases_per_s": round(n / wall, 1), "cpu_ms_per_case": _ms(cpu.total_s / n), "wall_s": wall})
            data[f"concurrency_{concurrency}"] = m
            rows.append(
                [concurrency, n, round(wall, 2), m["cases_per_s"], m["p50_ms"], m["p99_ms"], m["cpu_ms_per_case"]]
            )
    return {
        "title": "Evaluation: cases/s of a single-turn set (fresh agent and session per case, emulator)",
        "params": {"cases": n, "concurrency": list(ctx.sizes.eval_concurrency)},
        "targets": [],
        "columns": ["concurrency", "cases", "wall s", "cases/s", "sample p50 ms", "sample p99 ms", "CPU ms/case"],
        "rows": rows,
        "notes": [
            "A sample spawns an agent, creates a session seeded with the case's state, runs the turn, reads the "
            "session's events for the tool calls, stops the agent and deletes the session; then it is scored.",
            "CPU is every process of the node plus the evaluating process; the emulator is not counted.",
        ],
        "data": data,
    }
