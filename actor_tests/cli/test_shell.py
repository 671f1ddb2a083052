"""`adk shell` against running systems: one-shot JSON commands and the REPL through a pty (as subprocesses).

The commands run through ``adk`` itself (``python -m adk_actors.cli.main shell``; one test through the ``adk``
console script); the REPL tests also run ``python -m adk_actors.cli.shell``, which has the same arguments.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from adk_actors.agents import spawn_agent
from adk_actors.agents.api import describe_agent
from adk_actors.cli import shell as shell_module
from adk_actors.cli.main import build_parser
from adk_actors.cli.shell import parse_command, render, tree_view
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError
from adk_actors.runs import api as run_api
from adk_actors.runtime.messages import Ping
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import reserved_port
from adk_actors.testing.runs import ScriptedBody

from ..agents.conftest import config_for
from ..runtime.helpers import wait_exit

SHELL = [sys.executable, "-m", "adk_actors.cli.main", "shell"]
"""``adk shell`` through the ``adk`` entry point."""
SHELL_MODULE = [sys.executable, "-m", "adk_actors.cli.shell"]
"""The shell module on its own (the same arguments)."""
ADK_SCRIPT = os.path.join(os.path.dirname(sys.executable), "adk")
"""The installed ``adk`` console script."""
SECRET_KEY = "sk-shell-test-0123456789abcdef"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """A fresh emulator with the built-in script (the agents suite's fixture, for this directory)."""
    with Emulator() as emulator:
        yield emulator


def _env(system: ActorSystemHandle | None = None) -> dict[str, str]:
    env = {**os.environ, "TERM": "dumb"}
    if system is not None:  # the shell's own (Thespian client) files land in the system's data dir
        env["ADK_DATA_DIR"] = str(system.settings.data_path())
    return env


def _shell_json(
    port: int, *words: str, system: ActorSystemHandle | None = None, command: tuple[str, ...] = tuple(SHELL)
) -> tuple[int, dict[str, Any], str]:
    out = subprocess.run(
        [*command, "--port", str(port), "--json", *words],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=_env(system),
    )
    return out.returncode, json.loads(out.stdout), out.stdout + out.stderr


def _json(system: ActorSystemHandle, *words: str) -> dict[str, Any]:
    code, doc, text = _shell_json(system.port, *words, system=system)
    assert code == 0 and doc["ok"] is True, text
    return doc


def _child(node: dict[str, Any], child_id: str) -> dict[str, Any]:
    return next(c for c in node["children"] if c["id"] == child_id)


# ---- against a running system -------------------------------------------------------------------------------------
def test_json_tree_shows_every_child_with_state_pid_and_restarts(fresh_system: ActorSystemHandle) -> None:
    tree = _json(fresh_system, "tree")["tree"]
    assert tree["id"] == "root" and tree["actor"] == "Root" and tree["pid"] == fresh_system.root_pid
    ids = [c["id"] for c in tree["children"]]
    assert ids[:2] == ["registry", "router"] and ids[-1] == "sandbox"
    assert {"workers", "hosts", "runs", "sessions"} <= set(ids)
    for child in tree["children"]:
        assert child["state"] == "running" and child["pid"] > 0 and child["restarts"] == 0
        assert "address" not in child and "status" not in child
    hosts = _child(tree, "hosts")
    assert hosts["kind"] == "supervisor" and [h["id"] for h in hosts["children"]] == ["host-0", "host-1"]
    assert all(h["restarts"] == 0 and h["pid"] > 0 and "inner_actors" in h for h in hosts["children"])
    assert len(_child(tree, "workers")["workers"]) == fresh_system.settings.workers


def test_sigkilled_session_store_shows_one_more_restart_in_json_tree(fresh_system: ActorSystemHandle) -> None:
    before = _child(_json(fresh_system, "tree")["tree"], "sessions")
    assert before["restarts"] == 0
    os.kill(before["pid"], signal.SIGKILL)
    assert wait_exit(before["pid"], 5)
    deadline = time.monotonic() + 15
    while True:  # each round is a full shell invocation: a real query of the system, not a sleep
        after = _child(_json(fresh_system, "tree")["tree"], "sessions")
        if after["restarts"] == 1 and after["state"] == "running":
            break
        assert time.monotonic() < deadline, f"the restart never showed in the tree: {after}"
    assert after["pid"] not in (0, before["pid"])


def test_runs_lists_a_running_run_and_cancel_cancels_it(fresh_system: ActorSystemHandle) -> None:
    run_id = run_api.start(ScriptedBody(events=("a",), interval_s=60.0), system=fresh_system)
    listed = _json(fresh_system, "runs")
    row = next(r for r in listed["runs"] if r["run_id"] == run_id)
    assert row["state"] == "running" and row["age_s"] >= 0 and row["parent_run_id"] is None
    assert listed["running"] >= 1 and listed["total"] >= 1
    cancelled = _json(fresh_system, "cancel", run_id)
    assert cancelled == {"ok": True, "run_id": run_id, "outcome": {"state": "cancelled", "reason": "cancelled"}}
    assert run_api.status(run_id, system=fresh_system)["state"] == "cancelled"
    row = next(r for r in _json(fresh_system, "runs")["runs"] if r["run_id"] == run_id)
    assert row["state"] == "cancelled"  # retained, not running
    code, doc, _ = _shell_json(fresh_system.port, "cancel", "no-such-run", system=fresh_system)
    assert code == 1 and doc["ok"] is False and doc["error"]["reason"] == "not_found"


def test_agents_describes_an_agent_and_stop_agent_stops_it(fresh_system: ActorSystemHandle, emu: Emulator) -> None:
    name = f"ShellAgent_{os.getpid()}"
    config = {**config_for(emu), "api_key": SECRET_KEY, "description": "answers admins"}
    spawn_agent(name, config, system=fresh_system)
    code, doc, text = _shell_json(fresh_system.port, "agents", system=fresh_system)
    assert code == 0, text
    agent = next(a for a in doc["agents"] if a["name"] == name)
    assert agent["state"] == "running" and agent["description"] == "answers admins" and agent["tools"] == []
    assert agent["local_id"] == f"agent.{name}" and agent["restarts"] == 0
    code, hosts, hosts_text = _shell_json(fresh_system.port, "hosts", system=fresh_system)
    assert code == 0, hosts_text
    inner = [
        (host["host_id"], actor)
        for host in hosts["hosts"]
        for actor in host.get("inner", [])
        if actor["local_id"] == f"agent.{name}"
    ]
    assert len(inner) == 1, hosts  # exactly one host runs the agent, the one `agents` names
    host_id, actor = inner[0]
    assert host_id == agent["host_id"]
    assert actor == {
        "local_id": f"agent.{name}",
        "actor": "AgentActor",
        "state": "running",
        "restarts": 0,
        "restart": actor["restart"],
        "name": name,
    }
    host = next(h for h in hosts["hosts"] if h["host_id"] == host_id)
    assert host["inner_actors"] >= 1 and host["inner_truncated"] is False
    outputs = [text, hosts_text, _shell_json(fresh_system.port, "tree", system=fresh_system)[2]]
    assert all(SECRET_KEY not in out for out in outputs), "the agent's API key reached the shell's output"
    assert _json(fresh_system, "stop-agent", name) == {"ok": True, "stopped": name}
    with pytest.raises(AdkError) as info:
        describe_agent(name, system=fresh_system, timeout=5)
    assert info.value.reason == "noproc"  # the host no longer has it
    assert all(a["name"] != name for a in _json(fresh_system, "agents")["agents"])
    code, doc, _ = _shell_json(fresh_system.port, "stop-agent", name, system=fresh_system)
    assert code == 1 and doc["error"]["reason"] == "not_found"


def test_sessions_counts_sessions_per_app_and_user(fresh_system: ActorSystemHandle) -> None:
    store = ActorSessionService(system=fresh_system)
    for user in ("u1", "u1", "u2"):
        store.create_session(app_name="shell_app", user_id=user)
    store.create_session(app_name="other_app", user_id="u1")
    sessions = _json(fresh_system, "sessions")["sessions"]
    assert sessions["listed"] is True and sessions["backend"] == "memory" and sessions["truncated"] is False
    assert sessions["apps"] == {"other_app": {"u1": 1}, "shell_app": {"u1": 2, "u2": 1}}
    assert sessions["sessions"] == 4


def _read_until(fd: int, marker: str, timeout: float) -> str:
    """Read the pty until ``marker`` appears (select with a deadline; fails the test on timeout or EOF)."""
    deadline = time.monotonic() + timeout
    buffer = b""
    while marker.encode() not in buffer:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{marker!r} not seen within {timeout}s: {buffer.decode(errors='replace')!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the other side closed
                chunk = b""
            assert chunk, f"the shell closed its terminal before {marker!r}: {buffer.decode(errors='replace')!r}"
            buffer += chunk
    return buffer.decode(errors="replace")


def test_repl_through_a_pty_runs_commands_and_exit_leaves_the_system_running(fresh_system: ActorSystemHandle) -> None:
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [*SHELL_MODULE, "--port", str(fresh_system.port)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(fresh_system),
        close_fds=True,
        start_new_session=True,
    )
    os.close(slave)
    try:
        banner = _read_until(master, "adk> ", 15)
        assert f"port {fresh_system.port}" in banner
        os.write(master, b"tree\n")
        out = _read_until(master, "adk> ", 15)  # the tree, then the next prompt
        assert "root  Root  running" in out and "sessions  SessionStoreActor  running" in out
        assert "host-0  Host  running" in out
        os.write(master, b"frobnicate\n")
        assert "error: unknown_command" in _read_until(master, "adk> ", 15)
        os.write(master, b"help\n")
        assert "stop-agent NAME" in _read_until(master, "adk> ", 15)
        os.write(master, b"exit\n")
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert fresh_system.ask(fresh_system.root, Ping(), timeout=5) == "pong"  # detached, never stopped


def test_repl_ends_with_exit_status_0_at_end_of_input(fresh_system: ActorSystemHandle) -> None:
    out = subprocess.run(
        [*SHELL, "--port", str(fresh_system.port)],
        input="sessions\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=_env(fresh_system),
    )
    assert out.returncode == 0, out.stderr
    assert "no sessions" in out.stdout


# ---- without a system ---------------------------------------------------------------------------------------------
def test_an_unreachable_system_is_a_json_error_with_exit_1() -> None:
    code, doc, _ = _shell_json(reserved_port(), "tree")
    assert code == 1 and doc["ok"] is False and doc["error"]["reason"] == "system_not_running"


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        (["frobnicate"], "unknown_command"),
        (["cancel"], "usage"),
        (["stop-agent", "a", "b"], "usage"),
        (["runs", "many"], "usage"),
        (["tree", "extra"], "usage"),
        ([], "usage"),
    ],
)
def test_malformed_commands_are_json_errors_before_attaching(words: list[str], reason: str) -> None:
    code, doc, _ = _shell_json(reserved_port(), *words)  # nothing listens: the command fails first
    assert code == 1 and doc == {"ok": False, "error": doc["error"]} and doc["error"]["reason"] == reason


def test_the_adk_parser_dispatches_shell_to_its_handler() -> None:
    parser = build_parser()
    args = parser.parse_args(["shell", "--port", "19999", "--json", "cancel", "r1"])
    assert (args.command, args.port, args.json, args.words, args.handler) == (
        "shell",
        19999,
        True,
        ["cancel", "r1"],
        shell_module.run,
    )
    args = parser.parse_args(["shell"])
    assert (args.port, args.json, args.words, args.timeout) == (None, False, [], 10.0)
    args = parser.parse_args(["shell", "--timeout", "2.5", "runs", "5"])
    assert (args.timeout, args.words) == (2.5, ["runs", "5"])


def test_the_adk_console_script_runs_shell_json_commands(fresh_system: ActorSystemHandle) -> None:
    code, doc, text = _shell_json(fresh_system.port, "tree", system=fresh_system, command=(ADK_SCRIPT, "shell"))
    assert code == 0 and doc["ok"] is True, text
    assert doc["tree"]["id"] == "root" and doc["tree"]["pid"] == fresh_system.root_pid
    code, doc, _ = _shell_json(reserved_port(), "tree", command=(ADK_SCRIPT, "shell"))
    assert code == 1 and doc["error"]["reason"] == "system_not_running"


def test_the_shell_module_and_adk_shell_give_the_same_json_error() -> None:
    port = reserved_port()
    assert _shell_json(port, "frobnicate", command=tuple(SHELL_MODULE))[:2] == _shell_json(port, "frobnicate")[:2]


def test_parse_command_returns_the_argument() -> None:
    assert parse_command(["cancel", "r1"]) == ("cancel", "r1")
    assert parse_command(["runs", "5"]) == ("runs", 5)
    assert parse_command(["runs"]) == ("runs", None)
    assert parse_command(["tree"]) == ("tree", None)


def test_tree_view_drops_addresses_and_keeps_restarts_of_nested_children() -> None:
    raw = {
        "id": "root",
        "type": "Root",
        "pid": 10,
        "kind": "supervisor",
        "strategy": "one_for_one",
        "restarts": 2,
        "registry": object(),
        "children": [
            {
                "id": "hosts",
                "state": "running",
                "restarts": 1,
                "pid": 11,
                "kind": "supervisor",
                "actor": "adk_actors.runtime.host.HostSupervisor",
                "address": object(),
                "status": {
                    "kind": "host_supervisor",
                    "strategy": "one_for_one",
                    "restarts": 3,
                    "children": [
                        {
                            "id": "host-0",
                            "state": "restarting",
                            "restarts": 3,
                            "pid": 0,
                            "kind": "worker",
                            "actor": "adk_actors.runtime.host.Host",
                            "address": None,
                        }
                    ],
                },
            },
            {
                "id": "runs",
                "state": "running",
                "restarts": 0,
                "pid": 12,
                "kind": "worker",
                "actor": "adk_actors.runs.index.RunIndex",
                "status": {"error": "timeout"},
            },
        ],
    }
    view = tree_view(raw)
    json.dumps(view)  # JSON-safe: no addresses left
    hosts = _child(view, "hosts")
    assert (view["child_restarts"], hosts["restarts"], hosts["child_restarts"]) == (2, 1, 3)
    assert hosts["children"] == [
        {"id": "host-0", "actor": "Host", "kind": "worker", "state": "restarting", "pid": 0, "restarts": 3}
    ]
    assert _child(view, "runs")["error"] == "timeout"
    text = render("tree", {"tree": view})
    assert "└── host-0  Host  restarting  pid -  restarts 3" in text and "error: timeout" in text
