"""Smoke test of the benchmark harness: every benchmark runs with tiny sizes and reports a well-formed table.

Structure only, never timing: the numbers come from ``make bench`` on an idle machine (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from adk_actors.devtools import bench
from adk_actors.runtime.system import ActorSystemHandle

TINY = bench.Sizes(
    asks=5,
    hops=5,
    jobs=3,
    restarts=2,
    inner=10,
    idle_actors=4,
    idle_s=0.2,
    provider_calls=3,
    sse_chunks=20,
    sse_chunk_chars=8,
    sse_streams=1,
    session_events=10,
    session_reads=1,
    session_backends=("memory", "sqlite"),
    runner_runs=3,
    concurrent_runs=10,
    concurrent_io_threads=(16,),
    agent_turns=3,
    agent_concurrency=(5,),
    idle_agents=5,
    idle_agents_s=0.2,
    spawn_agents=10,
    soak_turns=5,
    soak_latency_ms=0,
    concurrent_starts=5,
    observability_rounds=1,
    memory_entries=50,
    memory_searches=3,
    memory_backends=("memory", "sqlite"),
    memory_runner_entries=20,
    eval_cases=5,
    eval_concurrency=(1, 4),
    trigger_deliveries=20,
    trigger_concurrency=2,
)


@pytest.mark.timeout(300)  # every benchmark, at tiny sizes: more than the suite's default per test
def test_every_benchmark_runs_on_the_shared_system_and_renders_one_table_each(
    system: ActorSystemHandle, tmp_path: Path
) -> None:
    results = bench.run(sizes=TINY, handle=system)
    assert list(results) == list(bench.BENCHMARKS)
    for name, res in results.items():
        assert "error" not in res, (name, res.get("error"))
        assert res["title"] and res["columns"] and res["rows"], name
        for table in [res, *res.get("extra_tables", [])]:
            assert all(len(row) == len(table["columns"]) for row in table["rows"]), name
        assert isinstance(res["data"], dict) and res["seconds"] >= 0
    assert results["ask_tier1"]["data"]["by_name"]["n"] == TINY.asks
    assert results["ask_tier1"]["data"]["by_address"]["cpu_ms_per_op"] > 0
    assert isinstance(results["ask_tier2"]["data"]["met"], bool)
    assert results["hops"]["data"]["in_cross_host"]["n"] == TINY.hops
    assert results["restart"]["data"]["n"] == TINY.restarts
    assert [r["count"] for r in results["spawn_inner"]["data"]["runs"]] == [TINY.inner, TINY.inner]
    assert results["idle"]["data"]["inner_actors"] == TINY.idle_actors
    assert results["provider"]["data"]["sse"]["text_intact"] is True
    assert set(results["sessions"]["data"]) == {"memory", "sqlite"}
    assert results["runner_c1000"]["data"]["io_threads_16"]["completed_ok"] == 10
    assert all(m["runs_per_s"] > 0 for m in results["runner"]["data"].values())
    turns = results["agent_turns"]["data"]
    assert all(turns[k]["n"] == TINY.agent_turns for k in ("text", "inline", "worker", "bare_text", "bare_tool"))
    assert len(turns["processes"]["hosts"]["pids"]) == 2 and turns["processes"]["session store"]["pss_kb"] > 0
    assert [m["completed_ok"] for m in results["concurrency"]["data"].values()] == [5]
    assert results["idle_agents"]["data"]["agents"] == TINY.idle_agents
    assert all(m["inner_actors"] >= TINY.spawn_agents for m in results["spawn_agents"]["data"].values())
    soak = results["reliability"]["data"]
    assert [soak[f"soak_{level}"]["failures"] for level in TINY.soak_library_levels] == [{}, {}]
    memory = results["memory"]["data"]
    assert set(memory) == {"memory", "sqlite", "runner"} and "preload_delta_cpu_ms" in memory["runner"]
    assert all(memory[b]["plain"]["n"] == TINY.memory_searches for b in TINY.memory_backends)
    assert soak["starts"]["outcomes"] == {"Completed": TINY.concurrent_starts}
    assert results["triggers"]["data"]["busy"]["n"] == TINY.trigger_deliveries
    assert results["triggers"]["data"]["trigger"]["completed"] >= TINY.trigger_deliveries
    assert system.running  # the harness never stops a system it was given

    info = bench.machine_info()
    assert info["cores"] and info["python"]
    report = bench.render(
        results,
        info,
        command="python -m adk_actors.devtools.bench --quick",
        quick=True,
        started=dt.datetime.now(dt.UTC),
    )
    assert report.startswith("## ") and "quick run" in report.splitlines()[0]
    assert report.count("\n### ") == len(bench.BENCHMARKS)
    assert "Targets:" in report and "ask to an inner actor" in report
    target = tmp_path / "PERF.md"
    target.write_text("# Perf\n")
    bench.append_report(target, report)
    bench.append_report(target, report)
    assert target.read_text().count("\n## ") == 2


def test_unknown_benchmark_names_are_rejected() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--only", "ask_tier1,nope"])
