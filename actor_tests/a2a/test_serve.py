"""A2A through ``adk serve``'s edge process (``dev_a2a``, ``dev_legacy_a2a``): the card, a task sent by our client,
the task in ``/dev/v1/a2a/tasks``, the legacy ``/a2a/prompt``; a non-loopback node with an A2A endpoint refuses to
start; the ``adk a2a`` commands against an A2A server; and the developer API of an edge without A2A."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actor_tests.agents.conftest import Spawner, config_for
from adk_actors import Runner, a2a
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import reserved_port
from adk_actors.web import start_in_thread
from adk_actors.web.a2a_server import A2A_PATH, a2a_app, agent_card

pytestmark = pytest.mark.timeout(120)

TOKEN = "a2a-serve-token-" + "q" * 16
AUTH = {"authorization": f"Bearer {TOKEN}"}
ADK = str(Path(sys.executable).with_name("adk"))


@pytest.fixture
def edge(
    make_system: Callable[..., ActorSystemHandle], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ActorSystemHandle, str, str]]:
    monkeypatch.setenv("ADK_DEV_TOKEN", TOKEN)
    port = reserved_port()
    name = f"Served_{uuid.uuid4().hex[:6]}"
    handle = make_system(dev_server=True, dev_port=port, dev_a2a=name, dev_legacy_a2a=True)
    with Emulator() as emu:
        emu.set_script({"rules": [{"when": {}, "respond": {"text": "served: {user_text}"}}]})
        spawn_agent(name, {"provider": "gemini", "base_url": emu.base_url, "api_key": "k"}, system=handle)
        yield handle, f"http://127.0.0.1:{port}", name
        stop_agent(name, system=handle)


def _card(url: str) -> Any:
    deadline = time.monotonic() + 30
    while True:
        try:
            return a2a.discover(url, allow_http_loopback=True)
        except AdkError:
            assert time.monotonic() < deadline, "the edge serves the card"


def test_adk_serve_a2a_serves_the_agent_lists_its_tasks_in_the_dev_api_and_the_legacy_endpoint(
    edge: tuple[ActorSystemHandle, str, str],
) -> None:
    _, url, name = edge
    card = _card(url)
    assert card.name == name and card.rpc_url == url + A2A_PATH
    result = a2a.send(card, "hello edge", allow_http_loopback=True)["task"]
    assert result["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result["artifacts"][0]["parts"][0]["text"] == "served: hello edge"
    info = httpx.get(f"{url}/dev/v1/a2a", headers=AUTH, timeout=10).json()
    assert info["enabled"] and info["status"]["tasks"] == 1 and info["status"]["auth"] == "none"
    tasks = httpx.get(f"{url}/dev/v1/a2a/tasks", headers=AUTH, timeout=10).json()["tasks"]
    assert [t["id"] for t in tasks] == [result["id"]] and tasks[0]["state"] == "TASK_STATE_COMPLETED"
    assert httpx.get(f"{url}/dev/v1/a2a/tasks", timeout=10).status_code == 401  # the dev API keeps its token
    from adk_actors.a2a.legacy import prompt

    assert prompt(f"{url}/a2a/prompt", name, "legacy hello") == "served: legacy hello"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"dev_a2a": "Agent", "dev_bind_ip": "0.0.0.0", "dev_allow_remote_bind": True},
         "a2a_dev_endpoint_must_bind_loopback"),
        ({"dev_legacy_a2a": True, "dev_bind_ip": "0.0.0.0", "dev_allow_remote_bind": True},
         "legacy_a2a_server_must_bind_loopback"),
    ],
)  # fmt: skip
def test_a_node_whose_a2a_endpoint_would_be_public_does_not_start(
    make_system: Callable[..., ActorSystemHandle],
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, Any],
    reason: str,
) -> None:
    monkeypatch.setenv("ADK_DEV_TOKEN", TOKEN)
    with pytest.raises(ConfigError) as refused:
        make_system(dev_server=True, dev_port=reserved_port(), **overrides)
    assert refused.value.reason == reason


def adk(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_")}
    return subprocess.run([ADK, *args], capture_output=True, text=True, timeout=60, env=env)


def test_the_adk_a2a_commands_discover_send_get_list_and_cancel(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "cli: {user_text}"}}]})
    name = f"Cli_{uuid.uuid4().hex[:6]}"
    spawn(name, config_for(emu), [])
    app = a2a_app(system, runner=Runner(name, "a2a_cli", svc, system=system), card=None)
    with start_in_thread(app) as server:
        app.set_card(agent_card(name="CliAgent", description="answers", url=server.url + A2A_PATH))
        loop = "--allow-http-loopback"
        found = adk("a2a", "discover", server.url, loop)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["name"] == "CliAgent"
        sent = adk("a2a", "send", server.url, "hi", loop)
        task = json.loads(sent.stdout)["task"]
        assert task["artifacts"][0]["parts"][0]["text"] == "cli: hi"
        streamed = json.loads(adk("a2a", "send", server.url, "again", "--stream", loop).stdout)["events"]
        assert [next(iter(e)) for e in streamed] == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
        assert json.loads(adk("a2a", "get", server.url, task["id"], loop).stdout)["id"] == task["id"]
        listed = json.loads(adk("a2a", "tasks", server.url, "--status", "TASK_STATE_COMPLETED", loop).stdout)
        assert listed["totalSize"] == 2
        refused = adk("a2a", "cancel", server.url, task["id"], loop)
        assert refused.returncode == 1 and "task_not_cancelable" in refused.stderr
        plain = adk("a2a", "discover", server.url)
        assert plain.returncode == 1 and "http" in plain.stderr


def test_the_dev_api_of_an_edge_without_a2a_says_so(system: ActorSystemHandle) -> None:
    from adk_actors.web.dev import dev_app
    from adk_actors.web.edge import DevToken

    with start_in_thread(dev_app(system, token=DevToken(TOKEN))) as server:
        assert httpx.get(f"{server.url}/dev/v1/a2a", headers=AUTH, timeout=10).json() == {"enabled": False}
        missing = httpx.get(f"{server.url}/dev/v1/a2a/tasks", headers=AUTH, timeout=10)
        assert missing.status_code == 404 and missing.json()["error"]["reason"] == "a2a_not_enabled"
