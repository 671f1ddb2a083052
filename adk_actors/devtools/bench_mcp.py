"""``make bench`` part for MCP (issue 20): an MCP tool turn over stdio and Streamable HTTP next to function-tool
turns, CPU summed over the node's processes and the caller (the MCP server's own CPU is reported apart: it is the
tool's code, as a worker's CPU is for a function tool).

Run alone: ``python -m adk_actors.devtools.bench --only mcp``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["bench_mcp"]

_SCRIPT = {
    "rules": [
        {
            "when": {"user_text_contains": "weather", "has_function_response": False},
            "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
        },
        {
            "when": {"has_function_response": True},
            "respond": {"text": "The weather in {args.city} is sunny."},
        },
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}


def bench_mcp(ctx: Any) -> dict[str, Any]:
    """``prompt`` tool turns: inline and worker function tools, an MCP tool over stdio and over HTTP."""
    from adk_actors import mcp
    from adk_actors.agents import prompt, spawn_agent
    from adk_actors.devtools.bench import TARGETS, _proc_ticks
    from adk_actors.devtools.bench_agents import _checked, _config, _turns
    from adk_actors.devtools.bench_runner import _node, get_weather
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.devtools.mcp_peer import serving_http
    from adk_actors.tools import FunctionTool

    n = ctx.sizes.agent_turns
    target = TARGETS["mcp_stdio_overhead_cpu_ms"]
    data: dict[str, Any] = {}
    rows: list[list[Any]] = []
    answer = "The weather in Tokyo is sunny."
    with emulator_process(script=_SCRIPT) as emu, _node() as handle, serving_http() as (url, http_pid):
        tag = uuid.uuid4().hex[:6]
        stdio = mcp.connect("stdio", sys.executable, args=["-m", "adk_actors.devtools.mcp_peer"], system=handle)
        http = mcp.connect("http", url, allow_http_loopback=True, system=handle)
        try:
            agents: dict[str, list[Any]] = {
                "inline": [FunctionTool(get_weather, inline=True)],
                "worker": [FunctionTool(get_weather)],
                "mcp_stdio": [mcp.mcp_toolset(stdio)],
                "mcp_http": [mcp.mcp_toolset(http)],
            }
            labels = {
                "inline": "prompt, tool turn (inline function tool)",
                "worker": "prompt, tool turn (worker function tool)",
                "mcp_stdio": "prompt, tool turn (MCP tool, stdio)",
                "mcp_http": "prompt, tool turn (MCP tool, Streamable HTTP)",
            }
            server_pid = {"mcp_stdio": int(stdio.status()["server_pid"]), "mcp_http": http_pid}
            for key, tools in agents.items():
                name = spawn_agent(
                    f"BenchMcp_{key}_{tag}", _config(emu, history_policy="exclude"), tools, system=handle
                ).name

                def turn(agent: str = name) -> Any:
                    return prompt(agent, "weather?", timeout=60, system=handle)

                fn: Callable[[], Any] = _checked(turn, answer)
                before = _proc_ticks(server_pid[key]) if key in server_pid else None
                m = _turns(handle, fn, n)
                m.pop("per_pid_cpu_s")
                if before is not None:
                    after = _proc_ticks(server_pid[key]) or before
                    import os

                    m["server_cpu_ms_per_turn"] = round(
                        (after - before) / os.sysconf("SC_CLK_TCK") / (n + min(20, n)) * 1000, 3
                    )
                data[key] = m
                rows.append(
                    [
                        labels[key],
                        n,
                        m["p50_ms"],
                        m["p99_ms"],
                        m["cpu_ms_per_turn"],
                        m.get("server_cpu_ms_per_turn", "-"),
                    ]
                )
        finally:
            stdio.close()
            http.close()
    delta = round(data["mcp_stdio"]["cpu_ms_per_turn"] - data["worker"]["cpu_ms_per_turn"], 3)
    delta_http = round(data["mcp_http"]["cpu_ms_per_turn"] - data["worker"]["cpu_ms_per_turn"], 3)
    return {
        "title": "MCP tool turns (issue 20)",
        "params": {"turns": n, "hosts": 2, "workers": 2, "model latency": "0 ms (emulator process)"},
        "columns": ["case", "turns", "p50 ms", "p99 ms", "CPU ms/turn (node + caller)", "server CPU ms/turn"],
        "rows": rows,
        "notes": [
            f"MCP stdio tool turn over the worker function-tool turn: {delta:+} ms CPU (target ≤ +{target} ms).",
            f"MCP HTTP tool turn over the worker function-tool turn: {delta_http:+} ms CPU.",
            "The MCP server runs in its own session (not in the node's process group): its CPU, the tool's own "
            "code, is the last column; a function tool's code runs in the node's worker and is counted in the node.",
        ],
        "targets": [
            [f"MCP stdio tool turn ≤ function-tool turn + {target} ms CPU", f"{delta:+} ms", delta <= target],
        ],
        "data": data,
    }
