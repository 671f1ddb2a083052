"""The `adk` console script: --version, emulator, status (driven as subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import requests

from adk_actors import __version__
from adk_actors.runtime.system import ActorSystemHandle

ADK = os.path.join(os.path.dirname(sys.executable), "adk")


def test_version() -> None:
    out = subprocess.run([ADK, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.strip() == f"adk_actors {__version__}"


def test_adk_emulator_serves_until_sigterm() -> None:
    proc = subprocess.Popen(
        [ADK, "emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
        base = line.strip().rsplit(" ", 1)[-1]
        body = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}
        reply = requests.post(
            f"{base}/v1beta/models/gemini-3.1-flash-lite:generateContent",
            json=body,
            headers={"x-goog-api-key": "test-key"},
            timeout=10,
        )
        assert reply.status_code == 200 and reply.json()["candidates"][0]["content"]["parts"][0]["text"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_status_prints_the_tree_as_json(system: ActorSystemHandle) -> None:
    out = subprocess.run(
        [ADK, "status", "--port", str(system.port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "THESPIAN_BASE_IPADDR": "127.0.0.1"},
    )
    assert out.returncode == 0, out.stderr
    tree = json.loads(out.stdout)
    assert tree["id"] == "root" and {c["id"] for c in tree["children"]} >= {"registry", "router", "hosts"}


def _status(port: int) -> dict[str, Any]:
    out = subprocess.run(
        [ADK, "status", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "THESPIAN_BASE_IPADDR": "127.0.0.1"},
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_status_says_the_session_durability_of_the_node_it_asks(
    system: ActorSystemHandle, make_system: Callable[..., ActorSystemHandle]
) -> None:
    """The guarantee comes from the node's own children, not from the settings of the process running `adk`."""
    memory = _status(system.port)["session_backend"]
    assert (memory["backend"], memory["durability"]) == ("memory", "lost_on_store_restart")
    sql_node = make_system(session_backend="sql")
    try:
        sql = _status(sql_node.port)["session_backend"]  # this process's settings still say memory
    finally:
        sql_node.stop()
    assert (sql["backend"], sql["durability"]) == ("sql", "durable")


def test_status_is_the_raw_tree_and_shell_tree_the_condensed_view_of_it(system: ActorSystemHandle) -> None:
    """docs/CLI.md: `adk status` prints the raw statuses; `adk shell --json tree` a condensed view of the same."""
    env = {**os.environ, "THESPIAN_BASE_IPADDR": "127.0.0.1"}
    raw = json.loads(
        subprocess.run(
            [ADK, "status", "--port", str(system.port)], capture_output=True, text=True, timeout=60, check=True, env=env
        ).stdout
    )
    view = json.loads(
        subprocess.run(
            [ADK, "shell", "--json", "--port", str(system.port), "tree"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env=env,
        ).stdout
    )["tree"]
    assert [c["id"] for c in raw["children"]] == [c["id"] for c in view["children"]]
    for raw_child, child in zip(raw["children"], view["children"], strict=True):
        assert (raw_child["pid"], raw_child["state"]) == (child["pid"], child["state"])
        assert raw_child["actor"].rpartition(".")[2] == child["actor"] and "status" in raw_child
        assert "status" not in child and "register_as" not in child
    assert view["actor"] == raw["type"] and view["pid"] == raw["pid"]


def test_status_without_a_system_exits_1_with_a_json_error() -> None:
    out = subprocess.run([ADK, "status", "--port", "29998"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1 and json.loads(out.stderr)["error"]["reason"] == "system_not_running"
