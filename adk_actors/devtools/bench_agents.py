"""Agent benchmarks for ``make bench``: ``agent_turns``, ``concurrency``, ``idle_agents`` and ``spawn_agents``.

Each benchmark starts its own node (the product composer: admission, run index, telemetry, session store) and,
where a model is called, the Gemini emulator in a process of its own (its CPU is never counted); each stops both
before it returns. The public API is
what is measured: ``spawn_agent``, ``prompt``, ``Runner`` with ``runs.start`` + ``runs.wait``. Runner.run and
stable-run turn costs at zero latency are in ``runner`` (:mod:`adk_actors.devtools.bench_runner`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from adk_actors.devtools.bench_runner import _TOOL_SCRIPT, _node, _runner, get_weather

__all__ = ["bench_agent_turns", "bench_concurrency", "bench_idle_agents", "bench_spawn_agents"]

_KEY = "bench-key"
LATENCY_MS = 200
"""Emulator latency of the concurrency benchmark (one model call)."""
STARTERS = 32
"""Caller threads that start the concurrency benchmark's runs (starting them is the slow part)."""
WAITERS = 8
"""Caller threads that then wait for the runs (each wait polls in 50 ms slices: fewer pollers, less caller CPU)."""
SPAWN_THREADS = (1, 8)
"""Caller threads spawn_agents compares."""
_QUEUE = {"overflow": "queue", "queue_timeout": 600_000}
"""The concurrency benchmark's Runner admission_control: turns beyond the limits wait rather than fail."""

# Process kinds of the per-process table, in display order.
_KINDS = ("hosts", "workers", "session store", "telemetry", "others", "not in the tree", "caller")
_KIND_LABELS = {
    "hosts": "hosts",
    "workers": "workers (pool + worker processes)",
    "session store": "session store",
    "telemetry": "telemetry hub",
    "others": "others (root, registry, router, admission, run index, supervisors)",
    "not in the tree": "not in the tree (Thespian admin, logger)",
    "caller": "caller (facade)",
}


def _config(emu: Any, **extra: Any) -> dict[str, Any]:
    return {"provider": "gemini", "base_url": emu.base_url, "api_key": _KEY, **extra}


# ---- process classification -----------------------------------------------------------------------------------------


def _process_roles(handle: Any) -> dict[int, tuple[str, str]]:
    """``pid → (kind, role)`` for every process of the supervision tree (``handle.tree()``).

    ``kind`` is one of hosts, workers, session store, telemetry, others; ``role`` the child id (``host-0``,
    ``worker-1``, ``sessions`` ...). Processes of the group that are not in the tree are not listed.
    """
    roles: dict[int, tuple[str, str]] = {}
    kinds = {"host": "hosts", "worker_pool": "workers", "session_store": "session store", "telemetry": "telemetry"}

    def walk(status: dict[str, Any]) -> None:
        kind = kinds.get(str(status.get("kind")), "others")
        if status.get("pid"):
            roles[int(status["pid"])] = (kind, str(status.get("id", "?")))
        for worker in status.get("workers", []):
            roles[int(worker["pid"])] = ("workers", str(worker.get("id", "worker")))
        for child in status.get("children", []):
            if isinstance(child.get("status"), dict) and "error" not in child["status"]:
                walk(child["status"])
            elif child.get("pid"):
                roles.setdefault(int(child["pid"]), ("others", str(child.get("id", "?"))))

    walk(handle.tree(timeout=30))
    return roles


def _classify(handle: Any) -> dict[int, tuple[str, str]]:
    """Every process of the group with its kind; the ones the tree does not show are Thespian's own."""
    from adk_actors.runtime.procs import group_pids

    roles = _process_roles(handle)
    return {pid: roles.get(pid, ("not in the tree", "thespian")) for pid in group_pids(handle.pgid)}


# ---- agent_turns ----------------------------------------------------------------------------------------------------


def _turns(handle: Any, fn: Callable[[], Any], n: int) -> dict[str, Any]:
    """Warm up, then ``n`` sequential calls of ``fn``: latency, turns/s and CPU per pid (ticks) and caller."""
    from adk_actors.devtools.bench import _HZ, _group_ticks, _latency, _ms, _self_cpu_s, _timed

    _timed(fn, min(20, n))
    pgid = handle.pgid if handle is not None else 0
    before = _group_ticks(pgid) if pgid > 1 else {}
    self0 = _self_cpu_s()
    t0 = time.perf_counter()
    samples = _timed(fn, n)
    wall = time.perf_counter() - t0
    caller = _self_cpu_s() - self0
    after = _group_ticks(pgid) if pgid > 1 else {}
    per_pid = {pid: (ticks - before.get(pid, 0)) / _HZ for pid, ticks in after.items()}
    system = sum(per_pid.values())
    out: dict[str, Any] = dict(_latency(samples))
    out.update(
        {
            "turns_per_s": round(n / wall, 1),
            "cpu_ms_per_turn": _ms((system + caller) / n),
            "system_cpu_ms_per_turn": _ms(system / n),
            "caller_cpu_ms_per_turn": _ms(caller / n),
            "per_pid_cpu_s": per_pid,
            "caller_cpu_s": caller,
        }
    )
    return out


def _checked(fn: Callable[[], Any], answer: str) -> Callable[[], Any]:
    """``fn`` that raises unless it returns ``answer`` (a benchmark of wrong answers measures nothing)."""

    def call() -> Any:
        out = fn()
        if out != answer:
            raise RuntimeError(f"unexpected answer {out!r}, expected {answer!r}")
        return out

    return call


def _bare_turns(emu: Any, model: str, tools: list[Any]) -> tuple[Callable[[], Any], Callable[[], Any], Any]:
    """The floor: the same model exchanges as a text turn and a tool turn, with a bare pooled ``requests`` session.

    Returns the text turn, the tool turn (two POSTs with the function called in between) and the session.
    """
    import requests

    session = requests.Session()
    url = f"{emu.base_url}/v1beta/models/{model}:generateContent"
    headers = {"x-goog-api-key": _KEY}

    def post(body: dict[str, Any]) -> dict[str, Any]:
        resp = session.post(url, json=body, headers=headers, timeout=30)
        resp.raise_for_status()
        content: dict[str, Any] = resp.json()["candidates"][0]["content"]
        return content

    def text_turn() -> str:
        content = post({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]})
        return str(content["parts"][0]["text"])

    def tool_turn() -> str:
        contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "weather?"}]}]
        model_content = post({"contents": contents, "tools": tools})
        call = next(p["functionCall"] for p in model_content["parts"] if "functionCall" in p)
        result = get_weather(**call["args"])
        contents += [
            model_content,
            {
                "role": "user",
                "parts": [{"functionResponse": {"id": call.get("id"), "name": call["name"], "response": result}}],
            },
        ]
        answer = post({"contents": contents, "tools": tools})
        return str(answer["parts"][0]["text"])

    return text_turn, tool_turn, session


def bench_agent_turns(ctx: Any) -> dict[str, Any]:
    """``prompt`` text and tool turns at 0 ms model latency vs a bare ``requests`` floor; CPU per process kind."""
    from adk_actors.agents import prompt, spawn_agent
    from adk_actors.devtools.bench import _ms, pss_kb
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.models.gemini.transport import close_sessions
    from adk_actors.tools import FunctionTool

    n = ctx.sizes.agent_turns
    data: dict[str, Any] = {}
    with emulator_process(script=_TOOL_SCRIPT) as emu, _node() as handle:
        tag = uuid.uuid4().hex[:6]
        # history_policy "exclude": every turn sends the same request (a kept history grows by two contents a turn)
        text = spawn_agent(f"BenchTurnText_{tag}", _config(emu, history_policy="exclude"), system=handle)
        inline = spawn_agent(
            f"BenchTurnInline_{tag}",
            _config(emu, history_policy="exclude"),
            [FunctionTool(get_weather, inline=True)],
            system=handle,
        )
        worker = spawn_agent(
            f"BenchTurnWorker_{tag}", _config(emu, history_policy="exclude"), [FunctionTool(get_weather)], system=handle
        )

        def turn(agent: Any, question: str) -> Callable[[], Any]:
            return lambda: prompt(agent, question, timeout=60, system=handle)

        hello, sunny = "You said: hello", "The weather in Tokyo is sunny."
        cases = {
            "text": ("prompt, text turn", _checked(turn(text, "hello"), hello)),
            "inline": ("prompt, tool turn (inline tool)", _checked(turn(inline, "weather?"), sunny)),
            "worker": ("prompt, tool turn (worker tool)", _checked(turn(worker, "weather?"), sunny)),
        }
        for key, (_label, fn) in cases.items():
            data[key] = _turns(handle, fn, n)
        tools = next(r["body"]["tools"] for r in reversed(emu.requests) if "tools" in (r.get("body") or {}))
        roles = _classify(handle)
        pss = {pid: pss_kb(pid) for pid in roles}
        text_turn, tool_turn, session = _bare_turns(emu, handle.settings.default_model, tools)
        try:
            data["bare_text"] = _turns(None, _checked(text_turn, hello), n)
            data["bare_tool"] = _turns(None, _checked(tool_turn, sunny), n)
        finally:
            session.close()
        close_sessions()

    def row(label: str, m: dict[str, Any], model_calls: int) -> list[Any]:
        return [
            label,
            model_calls,
            m["n"],
            m["turns_per_s"],
            m["p50_ms"],
            m["p99_ms"],
            m["cpu_ms_per_turn"],
            m["system_cpu_ms_per_turn"],
            m["caller_cpu_ms_per_turn"],
        ]

    rows = [
        row(cases["text"][0], data["text"], 1),
        row(cases["inline"][0], data["inline"], 2),
        row(cases["worker"][0], data["worker"], 2),
        row("floor: bare requests, text turn (1 POST)", data["bare_text"], 1),
        row("floor: bare requests, tool turn (2 POSTs + the function)", data["bare_tool"], 2),
    ]
    for key, floor in (("text", "bare_text"), ("inline", "bare_tool")):
        a, b = data[key], data[floor]
        rows.append(
            [
                f"⇒ agent overhead, {cases[key][0].split(', ', 1)[1]}",
                "—",
                "—",
                "—",
                round(a["p50_ms"] - b["p50_ms"], 3),
                "—",
                round(a["cpu_ms_per_turn"] - b["cpu_ms_per_turn"], 3),
                "—",
                "—",
            ]
        )

    # the per-process table: CPU ms per turn of each process kind in each prompt case, and PSS after the turns
    by_kind: dict[str, dict[str, Any]] = {k: {"pids": [], "pss_kb": 0} for k in _KINDS}
    for pid, (kind, role) in roles.items():
        by_kind[kind]["pids"].append(
            {
                "pid": pid,
                "role": role,
                "pss_kb": pss[pid],
                **{f"{key}_cpu_ms_per_turn": _ms(data[key]["per_pid_cpu_s"].get(pid, 0.0) / n) for key in cases},
            }
        )
        by_kind[kind]["pss_kb"] += pss[pid]
    proc_rows: list[list[Any]] = []
    for kind in _KINDS:
        entry = by_kind[kind]
        if kind == "caller":
            cpu = [_ms(data[key]["caller_cpu_s"] / n) for key in cases]
            count, mb = 1, "—"
        else:
            cpu = [round(sum(p[f"{key}_cpu_ms_per_turn"] for p in entry["pids"]), 3) for key in cases]
            count, mb = len(entry["pids"]), round(entry["pss_kb"] / 1024, 1)
        entry.update({f"{key}_cpu_ms_per_turn": c for key, c in zip(cases, cpu)})
        proc_rows.append([_KIND_LABELS[kind], count, *cpu, mb])
    proc_rows.append(
        [
            "total",
            sum(r[1] for r in proc_rows),
            *[data[key]["cpu_ms_per_turn"] for key in cases],
            round(sum(e["pss_kb"] for e in by_kind.values()) / 1024, 1),
        ]
    )
    data["processes"] = by_kind
    for key in cases:
        data[key].pop("per_pid_cpu_s")
    for key in ("bare_text", "bare_tool"):
        data[key].pop("per_pid_cpu_s")
    from adk_actors.devtools.bench import TARGETS

    target = TARGETS["prompt_text_cpu_ms"]
    text_cpu = data["text"]["cpu_ms_per_turn"]
    return {
        "title": "Agent turns via prompt (local emulator, no latency) vs a bare requests floor",
        "params": {"n": n},
        "targets": [[f"prompt text turn ≤ {target} ms CPU (system + caller)", f"{text_cpu} ms", text_cpu <= target]],
        "columns": [
            "path",
            "model calls",
            "n",
            "turns/s",
            "p50 ms",
            "p99 ms",
            "CPU ms/turn (system + caller)",
            "system CPU ms/turn",
            "caller CPU ms/turn",
        ],
        "rows": rows,
        "extra_tables": [
            {
                "columns": [
                    "process kind",
                    "processes",
                    "text: CPU ms/turn",
                    "tool inline: CPU ms/turn",
                    "tool worker: CPU ms/turn",
                    "PSS MB",
                ],
                "rows": proc_rows,
            }
        ],
        "notes": [
            "Turns run one after another from one caller thread, after 20 warm-up turns per case. The agents "
            "use history_policy 'exclude', so every turn sends the same request (the floor's); with the "
            "default 'include' each prompt also resends the whole conversation.",
            "Floor: the same generateContent exchanges with one pooled requests.Session — one POST for a "
            "text turn; for a tool turn a POST, the function called in-process, and a POST carrying the "
            "model's content and the function response. Its CPU is the caller's only (the system idles).",
            "CPU: utime+stime ticks per process of the actor system before/after the loop, plus the "
            "caller's getrusage. The emulator runs in a process of its own and is not counted, in the "
            "floor rows too.",
            "Process kinds come from the supervision tree (handle.tree()); PSS (smaps_rollup) is read "
            "after the agent turns. Runner.run and stable-run turns at 0 ms latency: see 'runner'.",
        ],
        "data": data,
    }


# ---- concurrency ----------------------------------------------------------------------------------------------------


def _variants(c: int) -> list[tuple[str, dict[str, Any]]]:
    """``(label, node settings)`` for C concurrent turns: the limits raised to C, then the defaults (once when
    the defaults already admit C)."""
    from adk_actors.settings import Settings

    d = Settings()
    # host_io_threads bounds the provider calls in flight on one host, and a Runner's stable runs all live on
    # its agent's host: it is a concurrency limit like the others.
    raised = {
        "max_concurrent_invocations": max(c, d.max_concurrent_invocations),
        "global_limit": max(c, d.global_limit),
        "default_agent_limit": max(c, d.default_agent_limit),
        "max_queue": max(c, d.max_queue),
        "host_io_threads": max(c, d.host_io_threads),
    }
    if all(raised[k] == getattr(d, k) for k in raised):
        return [("default limits (already ≥ C)", {})]
    return [("limits raised to C", raised), ("default limits", {})]


def _sample_peaks(handle: Any, pids: list[int], stop: threading.Event, peaks: dict[str, int]) -> None:
    """Every 100 ms the admission controller's permits in use and queued requests; every 500 ms the PSS of
    ``pids`` (a PSS sample of the whole system costs the caller ~20 ms of CPU, so it is taken less often)."""
    from adk_actors.devtools.bench import pss_kb
    from adk_actors.runtime.messages import GetStatus

    tick = 0
    while not stop.wait(0.1):
        tick += 1
        if tick % 5 == 0:
            peaks["pss_kb"] = max(peaks["pss_kb"], sum(pss_kb(pid) for pid in pids))
        try:
            status = handle.ask("admission", GetStatus(), 5)
        except Exception:  # a slow answer under load skips one sample
            continue
        peaks["admitted"] = max(peaks["admitted"], int(status.get("in_use", 0)))
        peaks["queued"] = max(peaks["queued"], int(status.get("queued", 0)))


def _concurrent(c: int, settings: dict[str, Any]) -> dict[str, Any]:
    from adk_actors.devtools.bench import CpuSpan, pss_kb
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.runs import Completed, Failed
    from adk_actors.runs import api as runs_api
    from adk_actors.runtime.procs import group_pids

    with emulator_process(script=_TOOL_SCRIPT, latency_ms=LATENCY_MS) as emu, _node(**settings) as handle:
        runner = _runner(handle, emu, f"BenchConc_{uuid.uuid4().hex[:6]}", [], admission_control=_QUEUE)
        runner.run("u", "warm", "hi")
        used = {
            k: getattr(handle.settings, k)
            for k in (
                "max_concurrent_invocations",
                "global_limit",
                "default_agent_limit",
                "overflow",
                "max_queue",
                "host_io_threads",
                "hosts",
            )
        }
        pids = group_pids(handle.pgid)
        idle_kb = sum(pss_kb(pid) for pid in pids)
        peaks = {"pss_kb": idle_kb, "admitted": 0, "queued": 0}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_peaks, args=(handle, pids, stop, peaks), daemon=True)
        sampler.start()
        cpu = CpuSpan(handle.pgid).start()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(min(STARTERS, c)) as pool:
            ids = list(
                pool.map(
                    lambda i: runs_api.start(
                        runner,
                        "u",
                        f"c{i}-{uuid.uuid4().hex[:6]}",
                        f"q{i}",
                        retention_ms=600_000,
                        system=handle,
                        timeout=300,
                    ),
                    range(c),
                )
            )
        started = time.perf_counter() - t0
        with ThreadPoolExecutor(min(WAITERS, c)) as pool:
            outcomes = list(pool.map(lambda r: runs_api.wait(r, 600, system=handle), ids))
        wall = time.perf_counter() - t0
        cpu.stop()
        stop.set()
        sampler.join()
        peaks["pss_kb"] = max(peaks["pss_kb"], sum(pss_kb(pid) for pid in pids))
    ok = sum(1 for i, o in enumerate(outcomes) if isinstance(o, Completed) and o.output == f"You said: q{i}")
    failed: dict[str, int] = {}
    for o in outcomes:
        if isinstance(o, Failed):
            failed[o.reason] = failed.get(o.reason, 0) + 1
    return {
        "concurrency": c,
        "settings": used,
        "wall_s": wall,
        "start_s": started,
        "completed_ok": ok,
        "failed": failed,
        "system_cpu_s": cpu.system_s,
        "caller_cpu_s": cpu.caller_s,
        "idle_pss_mb": idle_kb / 1024,
        "peak_pss_mb": peaks["pss_kb"] / 1024,
        "peak_admitted": peaks["admitted"],
        "peak_queued": peaks["queued"],
    }


def bench_concurrency(ctx: Any) -> dict[str, Any]:
    """C concurrent new-session stable runs at 200 ms model latency, limits raised to C and at the defaults."""
    from adk_actors.settings import Settings

    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    settings_notes: list[str] = []
    failures: list[str] = []
    for c in ctx.sizes.agent_concurrency:
        for label, settings in _variants(c):
            m = _concurrent(c, settings)
            data[f"C{c} {label}"] = m
            done = max(1, m["completed_ok"])
            rows.append(
                [
                    c,
                    label,
                    m["completed_ok"],
                    sum(m["failed"].values()),
                    m["peak_admitted"],
                    m["peak_queued"],
                    round(m["start_s"], 2),
                    round(m["wall_s"], 2),
                    round(m["wall_s"] / (LATENCY_MS / 1000), 1),
                    round(m["completed_ok"] / m["wall_s"], 1),
                    round((m["system_cpu_s"] + m["caller_cpu_s"]) / done * 1000, 1),
                    round(m["idle_pss_mb"], 1),
                    round(m["peak_pss_mb"], 1),
                ]
            )
            if settings:
                settings_notes.append(f"C={c}, {label}: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
            if m["failed"]:
                failures.append(
                    f"C={c}, {label}: failed outcomes by reason: "
                    + ", ".join(f"{k} × {v}" for k, v in sorted(m["failed"].items()))
                    + "."
                )
    d = Settings()
    notes = [
        "Every row is a fresh node (2 hosts, 2 workers, memory session store) and a fresh agent; C stable runs "
        f"(runs.start of a Runner, each a new session) are started from min({STARTERS}, C) caller threads, then "
        f"waited for from min({WAITERS}, C). Ideal = one model latency ({LATENCY_MS} ms): every turn in parallel.",
        f"Settings used. Default limits: max_concurrent_invocations={d.max_concurrent_invocations} (the agent's "
        f"session queues), global_limit={d.global_limit}, default_agent_limit={d.default_agent_limit}, "
        f"max_queue={d.max_queue} (admission), overflow={d.overflow}, host_io_threads={d.host_io_threads} per "
        f"host. Raised: {'; '.join(settings_notes) if settings_notes else 'none (the defaults admit every C)'}. "
        f"Every row's Runner has admission_control={_QUEUE}, so a turn beyond the admission limits waits in the "
        "admission queue instead of failing with busy (the default overflow, reject).",
        "Peak admitted / queued: the admission controller's permits in use and waiting requests, sampled every "
        "100 ms (a limit binds when admitted reaches it and requests queue). Provider calls also wait for the "
        "hosts' I/O threads (host_io_threads × hosts in flight; runner_c1000 compares host_io_threads).",
        "turns/s = completed turns / wall; CPU ms/turn = every process of the system plus the caller (the "
        "samplers included, the emulator's own process not) over the span, per completed turn; PSS summed over the "
        "system's processes, sampled every 500 ms and once at the end (before = after one warm-up turn).",
        *failures,
    ]
    from adk_actors.devtools.bench import TARGETS

    targets = []
    raised = data.get("C1000 limits raised to C")
    if raised is not None:
        t_wall, t_pss = TARGETS["c1000_wall_s"], TARGETS["c1000_pss_mb"]
        targets = [
            [
                f"C=1,000 at {LATENCY_MS} ms, limits raised to C: all done ≤ {t_wall} s",
                f"{round(raised['wall_s'], 2)} s",
                raised["wall_s"] <= t_wall and raised["completed_ok"] == 1000,
            ],
            [
                f"C=1,000 whole-system peak PSS ≤ {t_pss:g} MB",
                f"{round(raised['peak_pss_mb'], 1)} MB",
                raised["peak_pss_mb"] <= t_pss,
            ],
        ]
    return {
        "title": f"Concurrent new-session turns (stable runs), {LATENCY_MS} ms model latency",
        "params": {"concurrency": list(ctx.sizes.agent_concurrency), "latency_ms": LATENCY_MS},
        "targets": targets,
        "columns": [
            "C",
            "limits",
            "completed",
            "failed",
            "peak admitted",
            "peak queued",
            "all started s",
            "wall s",
            "× ideal",
            "turns/s",
            "CPU ms/turn",
            "PSS before MB",
            "peak PSS MB",
        ],
        "rows": rows,
        "notes": notes,
        "data": data,
    }


# ---- idle_agents and spawn_agents -----------------------------------------------------------------------------------


def _idle_window(handle: Any, window_s: float) -> dict[str, Any]:
    from adk_actors.devtools.bench import _HZ, _group_sched_ns, _group_ticks, group_pss_kb

    pgid = handle.pgid
    before, sched0 = _group_ticks(pgid), _group_sched_ns(pgid)
    t0 = time.monotonic()
    time.sleep(window_s)
    window = time.monotonic() - t0
    after, sched1 = _group_ticks(pgid), _group_sched_ns(pgid)
    used = {pid: (t - before.get(pid, 0)) / _HZ for pid, t in after.items()}
    busiest = max(used.values(), default=0.0)
    return {
        "window_s": round(window, 3),
        "processes": len(after),
        "cpu_percent": round(100 * sum(used.values()) / window, 4),
        "cpu_percent_schedstat": round(100 * (sched1 - sched0) / 1e9 / window, 5),
        "busiest_percent": round(100 * busiest / window, 4),
        "sched_ns": sched1 - sched0,
        "pss_mb": round(group_pss_kb(pgid) / 1024, 2),
    }


def _spawn(handle: Any, prefix: str, count: int, threads: int, config: dict[str, Any]) -> list[float]:
    """Spawn ``count`` agents from ``threads`` caller threads; the wall time of each ``spawn_agent`` call."""
    from adk_actors.agents import spawn_agent

    def one(i: int) -> float:
        t0 = time.perf_counter()
        spawn_agent(f"{prefix}_{i}", config, system=handle, timeout=60)
        return time.perf_counter() - t0

    if threads == 1:
        return [one(i) for i in range(count)]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(count)))


def bench_idle_agents(ctx: Any) -> dict[str, Any]:
    """CPU of a whole idle node (every process of its group) with no agents, then with N idle agents."""
    count, window_s = ctx.sizes.idle_agents, ctx.sizes.idle_agents_s
    config = {"provider": "gemini", "base_url": "http://127.0.0.1:9", "api_key": _KEY}
    with _node() as handle:
        time.sleep(min(1.0, window_s))  # let the boot settle
        empty = _idle_window(handle, window_s)
        _spawn(handle, f"BenchIdle_{uuid.uuid4().hex[:6]}", count, 4, config)
        time.sleep(min(0.5, window_s))  # let the spawns' follow-up messages settle
        loaded = _idle_window(handle, window_s)
    from adk_actors.devtools.bench import TARGETS

    t_idle = TARGETS["idle_pct_core"]
    idle_targets = [
        [
            f"idle node with {count} agents < {t_idle:g} % of a core (schedstat)",
            f"{loaded['cpu_percent_schedstat']} %",
            loaded["cpu_percent_schedstat"] < t_idle,
        ]
    ]
    rows = [
        [
            agents,
            m["processes"],
            m["window_s"],
            m["cpu_percent"],
            m["cpu_percent_schedstat"],
            m["busiest_percent"],
            m["pss_mb"],
        ]
        for agents, m in ((0, empty), (count, loaded))
    ]
    return {
        "title": f"Idle node with {count:,} agents",
        "params": {"agents": count, "window_s": window_s},
        "columns": [
            "agents",
            "processes",
            "window s",
            "CPU % of one core (stat ticks)",
            "CPU % of one core (schedstat ns)",
            "busiest process CPU %",
            "total PSS MB",
        ],
        "rows": rows,
        "notes": [
            "One fresh node; the same window is measured before any agent exists and after N agents "
            "(spawn_agent, never prompted) have been spawned from 4 threads. CPU is utime+stime ticks "
            "of every process of the group (and, as a finer check, the schedstat run time of every "
            "thread); the caller (sleeping) is not included.",
            "Compare 'idle' (the same measurement with bare Probe inner actors on the harness's system).",
        ],
        "targets": idle_targets,
        "data": {"agents": count, "empty": empty, "loaded": loaded},
    }


def bench_spawn_agents(ctx: Any) -> dict[str, Any]:
    """N real agent actors via ``spawn_agent`` on a fresh node: wall time, per-call latency, PSS growth."""
    from adk_actors.devtools.bench import _latency, group_pss_kb, pss_kb
    from adk_actors.runtime.messages import GetStatus
    from adk_actors.runtime.refs import host_name

    count = ctx.sizes.spawn_agents
    config = {"provider": "gemini", "base_url": "http://127.0.0.1:9", "api_key": _KEY}
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for threads in SPAWN_THREADS:
        with _node() as handle:
            hosts = handle.settings.hosts
            host_pids = [int(handle.ask(host_name(i), GetStatus(), 30)["pid"]) for i in range(hosts)]
            before_kb, hosts_before_kb = group_pss_kb(handle.pgid), sum(pss_kb(p) for p in host_pids)
            t0 = time.perf_counter()
            samples = _spawn(handle, f"BenchSpawn_{uuid.uuid4().hex[:6]}", count, threads, config)
            wall = time.perf_counter() - t0
            statuses = [handle.ask(host_name(i), GetStatus(), 30) for i in range(hosts)]
            after_kb, hosts_after_kb = group_pss_kb(handle.pgid), sum(pss_kb(p) for p in host_pids)
        inner = sum(int(s["inner_actors"]) for s in statuses)
        if inner < count or [int(s["pid"]) for s in statuses] != host_pids:
            raise RuntimeError(f"expected {count} agents on the original hosts, found {inner}")
        tenth = max(1, count // 10)
        m = {
            **_latency(samples),
            "threads": threads,
            "count": count,
            "wall_s": round(wall, 3),
            "inner_actors": inner,
            "first_tenth_mean_ms": round(sum(samples[:tenth]) / tenth * 1000, 3),
            "last_tenth_mean_ms": round(sum(samples[-tenth:]) / tenth * 1000, 3),
            "pss_delta_mb": round((after_kb - before_kb) / 1024, 2),
            "hosts_pss_delta_mb": round((hosts_after_kb - hosts_before_kb) / 1024, 2),
        }
        data[f"threads_{threads}"] = m
        rows.append(
            [
                threads,
                count,
                m["wall_s"],
                round(count / wall, 1),
                m["p50_ms"],
                m["p99_ms"],
                m["first_tenth_mean_ms"],
                m["last_tenth_mean_ms"],
                m["pss_delta_mb"],
                m["hosts_pss_delta_mb"],
                round((after_kb - before_kb) / count, 1),
            ]
        )
    return {
        "title": f"Spawn {count:,} agent actors with spawn_agent",
        "params": {"count": count},
        "columns": [
            "caller threads",
            "agents",
            "wall s",
            "agents/s",
            "spawn p50 ms",
            "spawn p99 ms",
            "first 10 % mean ms",
            "last 10 % mean ms",
            "system PSS Δ MB",
            "hosts PSS Δ MB",
            "KB PSS/agent",
        ],
        "rows": rows,
        "notes": [
            "Each row is a fresh node (2 hosts); agents are permanent tier-2 actors placed on the hosts by "
            "name, each registered under its name; the agents are text agents and are never prompted. "
            "The first/last 10 % columns show whether a spawn gets slower as agents accumulate.",
            "PSS (smaps_rollup) summed over every process of the system, and over the hosts only, "
            "before the first spawn and after the last; KB/agent is the system Δ divided by N.",
        ],
        "data": data,
    }
