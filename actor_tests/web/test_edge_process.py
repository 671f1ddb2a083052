"""The ``/dev/v1`` server as a supervised child of a real node (``dev_server=True``): it serves, it is restarted
when its process or its actor is SIGKILLed (under load, with runs going on), a client reconnecting with
``Last-Event-ID`` loses and duplicates nothing, and a node without a token or with a refused bind does not start."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from adk_actors import FunctionTool
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, ConfigError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import reserved_port
from adk_actors.web.process import EDGE_NAME

TOKEN = "edge-test-token-" + "k" * 16
AUTH = {"authorization": f"Bearer {TOKEN}"}
WAIT_S = 30.0


def slow_step(i: int) -> dict[str, int]:
    """One slow step of a long job.

    Args:
        i: The step number.
    """
    time.sleep(0.05)
    return {"step": i}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def edge_node(
    make_system: Callable[..., ActorSystemHandle], monkeypatch: pytest.MonkeyPatch
) -> tuple[ActorSystemHandle, str]:
    monkeypatch.setenv("ADK_DEV_TOKEN", TOKEN)
    port = reserved_port()
    handle = make_system(dev_server=True, dev_port=port)
    return handle, f"http://127.0.0.1:{port}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _edge(handle: ActorSystemHandle) -> dict[str, Any]:
    return dict(handle.ask(EDGE_NAME, GetStatus(), 10))


def _when_serving(url: str, not_pid: int = 0, handle: ActorSystemHandle | None = None) -> dict[str, Any]:
    """The answer of ``/dev/v1/diagnostics`` once a server (another than ``not_pid``) answers it."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            answer = httpx.get(f"{url}/dev/v1/diagnostics", headers=AUTH, timeout=5)
            # The actor reads its server's "listening" line on its own schedule: wait for it too.
            edge = _edge(handle) if handle is not None else {}
            if answer.status_code == 200 and (handle is None or (edge.get("url") and edge["server_pid"] != not_pid)):
                return dict(answer.json())
        except (httpx.HTTPError, AdkError):  # refused while the successor binds; its actor registers again
            pass
        assert time.monotonic() < deadline, "the dev server serves again"


def _sse(url: str, run_id: str, after: int | None) -> Iterator[tuple[str, int | None, dict[str, Any]]]:
    """``(event name, id, data)`` of one SSE connection to a run's events."""
    headers = {**AUTH, **({"last-event-id": str(after)} if after is not None else {})}
    with httpx.stream("GET", f"{url}/dev/v1/runs/{run_id}/events", headers=headers, timeout=WAIT_S) as response:
        assert response.status_code == 200
        name, ident, data = "message", None, ""
        for line in response.iter_lines():
            if line.startswith("id: "):
                ident = int(line[4:])
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
            elif line == "" and data:
                yield name, ident, json.loads(data)
                name, ident, data = "message", None, ""


def test_the_dev_server_is_a_supervised_child_restarted_after_its_process_or_its_actor_is_killed(
    edge_node: tuple[ActorSystemHandle, str],
) -> None:
    handle, url = edge_node
    assert _when_serving(url, handle=handle)["port"] == handle.port
    first = _edge(handle)
    assert first["url"] == url and first["server_pid"] != first["pid"]

    os.kill(first["server_pid"], signal.SIGKILL)  # the server process: its actor sees it and crashes
    _when_serving(url, first["server_pid"], handle)
    second = _edge(handle)
    assert second["pid"] != first["pid"] and second["server_pid"] != first["server_pid"]

    os.kill(second["pid"], signal.SIGKILL)  # the actor: its server sees its stdin close and stops
    _when_serving(url, second["server_pid"], handle)
    third = _edge(handle)
    assert third["pid"] != second["pid"]
    deadline = time.monotonic() + WAIT_S
    while _pid_alive(second["server_pid"]):  # the orphaned server has stopped (its port serves the successor)
        assert time.monotonic() < deadline, "the old server stopped"
    assert httpx.get(f"{url}/dev/v1/agents", timeout=5).status_code == 401


def test_a_run_streamed_through_a_killed_server_is_read_to_its_end_after_reconnecting_with_last_event_id(
    edge_node: tuple[ActorSystemHandle, str], emu: Emulator
) -> None:
    handle, url = edge_node
    _when_serving(url)
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {
                        "function_calls": [{"name": "slow_step", "args": {"i": i}} for i in range(8)],
                        "delay_ms": 100,
                    },
                },
                {"when": {}, "respond": {"text": "All eight steps are done.", "delay_ms": 400}},
            ]
        }
    )
    name = f"EdgeLoad{os.getpid()}"
    spawn_agent(
        name,
        {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"},
        [FunctionTool(slow_step)],
        system=handle,
    )
    try:
        started = [
            httpx.post(f"{url}/dev/v1/runs", headers=AUTH, json={"agent": name, "input": f"job {k}"}, timeout=30)
            for k in range(4)
        ]
        assert [r.status_code for r in started] == [201] * 4
        run_id = started[0].json()["run_id"]
        seen: list[int] = []
        outcome: dict[str, Any] | None = None
        victim = _edge(handle)["server_pid"]
        for kind, ident, _data in _sse(url, run_id, None):
            if kind == "event":
                assert ident is not None
                seen.append(ident)
                os.kill(victim, signal.SIGKILL)  # after the first event: the connection dies with the server
                break
        _when_serving(url, victim, handle)
        while outcome is None:
            try:
                for kind, ident, data in _sse(url, run_id, seen[-1]):
                    if kind == "event":
                        assert ident is not None
                        seen.append(ident)
                    elif kind == "outcome":
                        outcome = data
            except httpx.HTTPError:
                continue  # a bound or a drop: reconnect from the last id
        assert outcome["state"] == "completed" and outcome["output"] == "All eight steps are done."
        assert seen == list(range(1, len(seen) + 1)) and len(seen) >= 3  # no loss, no duplicate
        for r in started[1:]:  # the other runs went on while the edge was down
            status = httpx.get(f"{url}/dev/v1/runs/{r.json()['run_id']}", headers=AUTH, timeout=30).json()
            assert status["state"] in ("running", "completed")
    finally:
        stop_agent(name, system=handle)


@pytest.mark.parametrize(
    ("env", "overrides", "reason"),
    [
        ({}, {}, "missing_token"),
        ({"ADK_DEV_TOKEN": "short"}, {}, "weak_token"),
        ({"ADK_DEV_TOKEN": TOKEN}, {"dev_bind_ip": "0.0.0.0"}, "non_loopback_bind"),
    ],
)
def test_a_node_whose_dev_server_would_be_unsafe_does_not_start(
    make_system: Callable[..., ActorSystemHandle],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    overrides: dict[str, Any],
    reason: str,
) -> None:
    monkeypatch.delenv("ADK_DEV_TOKEN", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as info:
        make_system(dev_server=True, dev_port=reserved_port(), **overrides)
    assert info.value.reason == reason
    assert TOKEN not in str(info.value.to_dict())
