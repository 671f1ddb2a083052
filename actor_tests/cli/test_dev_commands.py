"""``adk inspect``, ``adk session``, ``adk resume`` against a running node, and ``adk serve``, each as a subprocess.

The first three attach by admin port and print what the ``/dev/v1`` operations return (the same code:
``adk_actors.devapi``), failing by reason with exit status 1. ``adk serve`` starts a node with the dev server, prints
its URL once it answers, serves the console and the API with the token, and leaves nothing running after SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adk_actors import FunctionTool
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.devapi import DevOps
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import pids_with_cmdline, reserved_port

ADK = str(Path(sys.executable).with_name("adk"))
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "cli-dev-token-" + "q" * 16


def adk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ADK, *args], capture_output=True, text=True, timeout=60, env=env)


def transfer_funds(amount: int) -> dict[str, Any]:
    """Move money (needs an operator's confirmation).

    Args:
        amount: How much.
    """
    return {"moved": amount}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def agent(system: ActorSystemHandle, emu: Emulator) -> Iterator[str]:
    name = f"Cli{uuid.uuid4().hex[:8]}"
    spawn_agent(
        name,
        {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key", "description": "A test agent."},
        [FunctionTool(transfer_funds, requires_confirmation=True)],
        system=system,
    )
    yield name
    stop_agent(name, system=system)


def test_inspect_lists_and_describes_agents_and_refuses_an_unknown_one_by_reason(
    system: ActorSystemHandle, agent: str
) -> None:
    port = str(system.port)
    listed = adk("inspect", "agents", "--port", port)
    assert listed.returncode == 0, listed.stderr
    mine = [a for a in json.loads(listed.stdout)["agents"] if a["name"] == agent]
    assert mine and mine[0]["description"] == "A test agent." and mine[0]["tools"]
    shown = adk("inspect", "agent", agent, "--port", port)
    assert json.loads(shown.stdout)["name"] == agent
    missing = adk("inspect", "agent", "NoSuchAgent", "--port", port)
    assert missing.returncode == 1 and "[agent_not_found]" in missing.stderr and missing.stdout == ""
    diagnostics = json.loads(adk("inspect", "diagnostics", "--port", port).stdout)
    assert diagnostics["port"] == system.port and diagnostics["settings"]["gemini_api_key"] in ("set", "unset")
    assert "instruments" in json.loads(adk("inspect", "metrics", "--port", port).stdout)


def test_session_list_show_and_delete_round_trip_with_the_apis_bounds(system: ActorSystemHandle) -> None:
    ops = DevOps(system)
    app, user = f"cli-{uuid.uuid4().hex[:6]}", "ada"
    older = ops.create_session(app, user, "s-old", {"color": "green"})["session_id"]
    newer = ops.create_session(app, user, "s-new", {"color": "blue"})["session_id"]
    port = str(system.port)
    listed = json.loads(adk("session", "list", "--app", app, "--port", port).stdout)
    assert [s["session_id"] for s in listed["sessions"]] == [newer, older] and listed["truncated"] is False
    one = json.loads(adk("session", "list", "--app", app, "--limit", "1", "--port", port).stdout)
    assert [s["session_id"] for s in one["sessions"]] == [newer] and one["truncated"] is True
    too_many = adk("session", "list", "--app", app, "--limit", "101", "--port", port)
    assert too_many.returncode == 1 and '"key": "limit"' in too_many.stderr
    shown = json.loads(adk("session", "show", app, user, older, "--port", port).stdout)
    assert shown["state"] == {"color": "green"} and shown["events"] == []
    assert json.loads(adk("session", "delete", app, user, older, "--port", port).stdout) == {"deleted": True}
    gone = adk("session", "show", app, user, older, "--port", port)
    assert gone.returncode == 1 and "[not_found]" in gone.stderr
    assert [s["session_id"] for s in ops.list_sessions(app)["sessions"]] == [newer]


def test_resume_answers_a_paused_run_and_the_new_run_completes(
    system: ActorSystemHandle, agent: str, emu: Emulator
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "transfer_funds", "args": {"amount": 5}}]},
                },
                {"when": {}, "respond": {"text": "Moved."}},
            ]
        }
    )
    ops = DevOps(system)
    run_id = ops.start_run(agent=agent, input="Move 5.")["run_id"]
    from adk_actors import runs

    assert type(runs.wait(run_id, 30, system=system)).__name__ == "Paused"
    port = str(system.port)
    assert json.loads(adk("inspect", "run", run_id, "--port", port).stdout)["state"] == "paused"
    bad = adk("resume", run_id, "--response", "{not json", "--port", port)
    assert bad.returncode == 1 and "[invalid_resume_response]" in bad.stderr
    done = adk("resume", run_id, "--response", '{"confirmed": true}', "--wait", "30", "--port", port)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["parent_run_id"] == run_id and answer["outcome"] == {"state": "completed", "output": "Moved."}
    again = adk("resume", run_id, "--response", '{"confirmed": true}', "--port", port)
    assert again.returncode == 1 and "[already_resumed]" in again.stderr


def _servers(admin_port: int) -> list[int]:
    """Live dev server processes of the node on ``admin_port``."""
    return pids_with_cmdline(f"adk_actors.web.process\x00--admin-port\x00{admin_port}".encode())


def test_adk_serve_runs_a_node_with_the_console_and_the_api_and_stops_cleanly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_") and k != "GEMINI_API_KEY"}
    dev_port = reserved_port()
    env.update(
        {
            "ADK_DATA_DIR": str(tmp_path),
            "ADK_DEV_TOKEN": TOKEN,
            "THESPIAN_BASE_IPADDR": "127.0.0.1",
        }
    )
    refused = adk("serve", "--config", str(ROOT / "config" / "agent.json"), "--emulator", "--port", "1999", env=env)
    assert refused.returncode == 1 and '"key": "port"' in refused.stderr
    command = [ADK, "serve", "--config", str(ROOT / "config" / "agent.json"), "--emulator", "--dev-port", str(dev_port)]
    admin_port = 0
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["url"] == f"http://127.0.0.1:{dev_port}/dev" and ready["agent"] == "CliAgent"
        page = httpx.get(ready["url"], timeout=10)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert TOKEN not in page.text
        assert httpx.get(f"{ready['api']}/agents", timeout=10).status_code == 401
        agents = httpx.get(f"{ready['api']}/agents", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert [a["name"] for a in agents.json()["agents"]] == ["CliAgent"]
        admin_port = ready["port"]  # the node serve started (an ephemeral one, on a free port)
        assert len(_servers(admin_port)) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 128 + signal.SIGTERM), err
    assert TOKEN not in err
    deadline = time.monotonic() + 30
    while _servers(admin_port):
        assert time.monotonic() < deadline, "the dev server process stopped with its node"


def test_adk_serve_mcp_exposes_the_agent_as_an_mcp_tool_to_the_official_client(tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")
    from mcp import Client

    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_") and k != "GEMINI_API_KEY"}
    dev_port = reserved_port()
    env.update({"ADK_DATA_DIR": str(tmp_path), "ADK_DEV_TOKEN": TOKEN, "THESPIAN_BASE_IPADDR": "127.0.0.1"})
    command = [
        ADK,
        "serve",
        "--config",
        str(ROOT / "config" / "agent.json"),
        "--emulator",
        "--dev-port",
        str(dev_port),
        "--mcp",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    admin_port = 0
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        admin_port = ready["port"]
        assert ready["mcp"] == f"http://127.0.0.1:{dev_port}/mcp"
        assert httpx.post(ready["mcp"], json={}, timeout=10).status_code == 401  # the dev token guards /mcp too

        async def talk() -> tuple[list[str], str]:
            import httpx2

            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
            from mcp.client.streamable_http import streamable_http_client

            async with client, Client(streamable_http_client(ready["mcp"], http_client=client), mode="legacy") as c:
                names = [t.name for t in (await c.list_tools()).tools]
                result = await c.call_tool("CliAgent", {"prompt": "say hello"})
                return names, result.content[0].text

        names, text = anyio.run(talk)
        assert names == ["CliAgent"]
        assert text  # the emulator-backed agent answered through a run the node owns
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert TOKEN not in err
    deadline = time.monotonic() + 30
    while admin_port and _servers(admin_port):
        assert time.monotonic() < deadline, "the dev server process stopped with its node"
