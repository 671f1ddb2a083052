"""``adk doctor``, ``adk config validate``, ``adk run`` and ``adk console``, each driven as a subprocess.

Every command runs in a temp working directory (so the repository's ``config/adk.toml`` is not read) with its own
data dir; after each command no process of a system it started may remain (their command lines carry the data
dir). The console is driven through a pseudo-terminal, waiting on ``select`` for the expected output.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.cli.agent_file import find_secret
from adk_actors.cli.console import parse_line
from adk_actors.cli.launch import LOCAL_KEY
from adk_actors.emulator import Emulator
from adk_actors.emulator.server import add_served_hook, remove_served_hook
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import pids_with_cmdline, reserved_port

ROOT = Path(__file__).resolve().parents[2]
AGENT_FILE = ROOT / "config" / "agent.json"
CANARY = "canary-secret-123"
TIMEOUT_S = 20.0


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The command's working directory; its ``data`` subfolder is the data dir of every system it starts."""
    (tmp_path / "data").mkdir()
    return tmp_path


def _env(workdir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ADK_") and k not in ("GEMINI_API_KEY", "GEMINI_BASE_URL")
    }
    env.update({"ADK_DATA_DIR": str(workdir / "data"), "THESPIAN_BASE_IPADDR": "127.0.0.1", **extra})
    return env


def _leftovers(workdir: Path) -> list[int]:
    """Live processes whose command line names this test's data dir (actor processes of a started system)."""
    return pids_with_cmdline(str(workdir / "data").encode())


@pytest.fixture
def no_leftovers(workdir: Path) -> Iterator[None]:
    """After the test, no process of a system the command started survives (killed and reported if one does)."""
    yield
    survivors = _leftovers(workdir)
    for pid in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert survivors == [], "a process of the CLI's actor system outlived the command"


def adk(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adk_actors.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=workdir,
        env=env or _env(workdir),
    )


def _write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def _agent(**changes: Any) -> dict[str, Any]:
    config = json.loads(AGENT_FILE.read_text())
    config.update(changes)
    return config


def _no_traceback(out: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in out.stdout + out.stderr


# ---- doctor --------------------------------------------------------------------------------------------------------

DOCTOR_CHECKS = {
    "adk_actors",
    "python",
    "dependencies",
    "settings",
    "actor_system",
    "session_backend",
    "gemini_api_key",
    "base_url",
}


def test_doctor_without_a_system_warns_and_exits_0(workdir: Path) -> None:
    out = adk(workdir, "doctor", "--json", "--port", str(reserved_port()))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] is True and set(report["checks"]) == DOCTOR_CHECKS
    assert all(c["status"] in {"ok", "warning"} for c in report["checks"].values())
    assert report["checks"]["actor_system"]["status"] == "warning"
    assert report["checks"]["actor_system"]["running"] is False
    assert report["checks"]["dependencies"]["missing"] == []
    assert set(report["checks"]["dependencies"]["versions"]) == {
        "thespian",
        "requests",
        "websocket-client",
        "fastjsonschema",
        "sqlalchemy",
        "structlog",
    }
    assert report["checks"]["gemini_api_key"] == {
        "status": "warning",
        "configured": False,
        "detail": report["checks"]["gemini_api_key"]["detail"],
    }


def test_doctor_require_system_fails_when_none_runs(workdir: Path) -> None:
    out = adk(workdir, "doctor", "--json", "--require-system", "--port", str(reserved_port()))
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["ok"] is False and report["checks"]["actor_system"]["status"] == "fail"


def test_doctor_attaches_to_a_running_system_and_pings_it(workdir: Path, system: ActorSystemHandle) -> None:
    out = adk(workdir, "doctor", "--json", "--require-system", "--port", str(system.port))
    assert out.returncode == 0, out.stdout + out.stderr
    check = json.loads(out.stdout)["checks"]["actor_system"]
    assert check["status"] == "ok" and check["running"] is True and check["port"] == system.port
    assert {"registry", "router", "hosts"} <= set(check["children"])
    assert system.status()["children"]  # the doctor only detached: the system still runs


def test_doctor_reports_a_configured_key_without_printing_it(workdir: Path) -> None:
    out = adk(workdir, "doctor", "--port", str(reserved_port()), env=_env(workdir, GEMINI_API_KEY=CANARY))
    assert out.returncode == 0, out.stderr
    assert re.search(r"ok\s+gemini_api_key\s+yes", out.stdout)
    assert "doctor: ok" in out.stdout
    assert CANARY not in out.stdout + out.stderr
    as_json = adk(workdir, "doctor", "--json", "--port", str(reserved_port()), env=_env(workdir, GEMINI_API_KEY=CANARY))
    assert json.loads(as_json.stdout)["checks"]["gemini_api_key"]["configured"] is True
    assert CANARY not in as_json.stdout + as_json.stderr


def test_doctor_probes_the_base_url(workdir: Path) -> None:
    with Emulator() as emu:
        out = adk(workdir, "doctor", "--json", "--port", str(reserved_port()), "--base-url", emu.base_url)
    assert out.returncode == 0, out.stdout
    check = json.loads(out.stdout)["checks"]["base_url"]
    assert check["status"] == "ok" and check["reachable"] is True and isinstance(check["http_status"], int)
    dead = f"http://127.0.0.1:{reserved_port()}"
    out = adk(workdir, "doctor", "--json", "--port", str(reserved_port()), env=_env(workdir, GEMINI_BASE_URL=dead))
    assert out.returncode == 1
    check = json.loads(out.stdout)["checks"]["base_url"]
    assert check["status"] == "fail" and check["reachable"] is False and check["url"] == dead


def test_doctor_opens_a_sql_session_backend(workdir: Path) -> None:
    out = adk(workdir, "doctor", "--json", "--port", str(reserved_port()), env=_env(workdir, ADK_SESSION_BACKEND="sql"))
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout)["checks"]["session_backend"] == {
        "status": "ok",
        "backend": "sql",
        "dialect": "sqlite",
        "durability": "durable",
        "detail": "sql (sqlite) opens; sessions survive restarts",
    }
    (workdir / "a-file").write_text("not a directory")
    bad = f"sqlite:///{workdir}/a-file/sessions.db"
    out = adk(
        workdir,
        "doctor",
        "--json",
        "--port",
        str(reserved_port()),
        env=_env(workdir, ADK_SESSION_BACKEND="sql", ADK_SESSION_URL=bad),
    )
    assert out.returncode == 1
    assert json.loads(out.stdout)["checks"]["session_backend"]["status"] == "fail"


def test_doctor_reports_settings_that_do_not_load(workdir: Path) -> None:
    out = adk(workdir, "doctor", "--json", env=_env(workdir, ADK_NO_SUCH_SETTING="1"))
    assert out.returncode == 1
    checks = json.loads(out.stdout)["checks"]
    assert checks["settings"]["status"] == "fail" and checks["settings"]["error"]["reason"] == "unknown_key"
    assert checks["actor_system"]["status"] == "skipped"


# ---- config validate -----------------------------------------------------------------------------------------------


def test_the_checked_in_agent_file_validates(workdir: Path) -> None:
    out = adk(workdir, "config", "validate", str(AGENT_FILE), "--json")
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout) == {"ok": True, "file": str(AGENT_FILE), "agent": "CliAgent"}
    text = adk(workdir, "config", "validate", str(AGENT_FILE))
    assert text.returncode == 0 and text.stdout.startswith("ok: ")


def test_the_checked_in_agent_file_has_the_reference_fields() -> None:
    """config/agent.json is the reference's examples/agent.json: the Gemini spellings and the runner options."""
    config = json.loads(AGENT_FILE.read_text())
    assert config["runner_options"] == {"max_llm_calls": 8, "max_tool_rounds": 4}
    assert config["generation_config"]["safety_settings"] == [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "threshold": "BLOCK_MEDIUM_AND_ABOVE"}
    ]


def test_the_cli_doc_shows_the_checked_in_agent_file() -> None:
    text = (ROOT / "docs" / "CLI.md").read_text()
    block = text.split("The checked-in\n`config/agent.json`", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(block) == json.loads(AGENT_FILE.read_text())


def test_config_validate_accepts_runner_options_and_both_safety_spellings(workdir: Path) -> None:
    short = {
        "thinking_config": {"thinking_level": "low"},
        "safety_settings": [{"category": "dangerous_content", "threshold": "block_medium_and_above"}],
    }
    options = {
        "max_llm_calls": 3,
        "max_tool_rounds": 2,
        "run_timeout": 60000,
        "tool_execution": {"mode": "serial", "tool_timeout": 5000},
    }
    for config in (_agent(generation_config=short), _agent(runner_options=options)):
        out = adk(workdir, "config", "validate", str(_write(workdir / "agent.json", config)), "--json")
        assert out.returncode == 0, out.stdout
        assert json.loads(out.stdout)["ok"] is True


@pytest.mark.parametrize(
    ("config", "reason", "key"),
    [
        (_agent(temperature_x=1), "unknown_key", "temperature_x"),
        (_agent(runner_options={"max_llm_calls": 0}), "invalid_value", "runner_options.max_llm_calls"),
        (
            _agent(runner_options={"max_llm_calls": 8, "max_tool_round": 4}),
            "unknown_key",
            "runner_options.max_tool_round",
        ),
        (
            _agent(runner_options={"tool_execution": {"mode": "fast"}}),
            "invalid_value",
            "runner_options.tool_execution.mode",
        ),
        (_agent(runner_options={"streaming_mode": "content"}), "invalid_value", "runner_options.streaming_mode"),
        (_agent(runner_options=[8, 4]), "invalid_value", "runner_options"),
        (_agent(tools=["no_such_module_for_adk:tool"]), "invalid_tool", "tools[0]"),
        (_agent(tools="json:dumps"), "invalid_value", "tools"),
        (_agent(generation_config={"temperature": 9}), "invalid_value", "generation_config.temperature"),
        (_agent(api_key=CANARY), "secret_in_config", "api_key"),
        (_agent(callback_config={"service": {"token": CANARY}}), "secret_in_config", "callback_config.service.token"),
        (_agent(instructions=f"Use {'AIza' + 'x' * 35} when asked."), "secret_in_config", "instructions"),
        ({k: v for k, v in _agent().items() if k != "name"}, "missing_key", "name"),
    ],
    ids=[
        "unknown-key",
        "runner-bad-value",
        "runner-unknown-key",
        "runner-nested",
        "runner-streaming-mode",
        "runner-not-an-object",
        "tool-not-importable",
        "tools-not-a-list",
        "bad-value",
        "api-key",
        "nested-token",
        "key-shaped-value",
        "no-name",
    ],
)
def test_config_validate_rejects_with_the_reason_and_never_the_value(
    workdir: Path, config: dict[str, Any], reason: str, key: str
) -> None:
    path = _write(workdir / "agent.json", config)
    out = adk(workdir, "config", "validate", str(path), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["ok"] is False and report["error"]["reason"] == reason and report["error"]["details"]["key"] == key
    text = adk(workdir, "config", "validate", str(path))
    assert text.returncode == 1 and f"[{reason}]" in text.stderr
    for run in (out, text):
        assert CANARY not in run.stdout + run.stderr and "AIza" not in run.stdout + run.stderr
        _no_traceback(run)


def test_config_validate_rejects_the_environment_key_value(workdir: Path) -> None:
    path = _write(workdir / "agent.json", _agent(description=f"uses {CANARY}"))
    out = adk(workdir, "config", "validate", str(path), "--json", env=_env(workdir, GEMINI_API_KEY=CANARY))
    assert out.returncode == 1 and json.loads(out.stdout)["error"]["details"]["key"] == "description"
    assert CANARY not in out.stdout + out.stderr


def test_config_validate_allows_output_key_and_secret_named_schema_properties(workdir: Path) -> None:
    schema = {"type": "object", "properties": {"password_hint": {"type": "string"}, "token": {"type": "string"}}}
    path = _write(workdir / "agent.json", _agent(output_key="answer", output_schema=schema))
    out = adk(workdir, "config", "validate", str(path), "--json")
    assert out.returncode == 0, out.stdout


def test_config_validate_reports_malformed_json_by_position(workdir: Path) -> None:
    path = workdir / "agent.json"
    path.write_text('{"name": "CliAgent",\n "model": ' + CANARY)
    out = adk(workdir, "config", "validate", str(path), "--json")
    assert out.returncode == 1
    error = json.loads(out.stdout)["error"]
    assert error["reason"] == "invalid_json" and error["details"]["line"] == 2
    assert CANARY not in out.stdout + out.stderr
    missing = adk(workdir, "config", "validate", str(workdir / "nope.json"), "--json")
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["reason"] == "config_not_found"


_SAFE_KEYS = st.sampled_from(["model", "description", "mode", "items", "level", "name", "count", "output"])
_SECRET_KEYS = st.sampled_from(
    [
        "api_key",
        "apiKey",
        "x-goog-api-key",
        "token",
        "client_secret",
        "password",
        "Authorization",
        "refresh_token",
        "credentials",
    ]
)
_SAFE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="abc xyz", max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_SAFE_KEYS, inner, max_size=3),
    max_leaves=12,
)


@given(st.dictionaries(_SAFE_KEYS, _SAFE_JSON, max_size=4), st.lists(_SAFE_KEYS, max_size=3), _SECRET_KEYS)
def test_find_secret_finds_a_secret_named_key_at_any_depth(base: dict[str, Any], path: list[str], secret: str) -> None:
    assert find_secret(base, environ={}) is None
    node = base
    for key in path:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[secret] = "value"
    assert find_secret(base, environ={}) == ".".join([*path, secret])


# ---- run -----------------------------------------------------------------------------------------------------------


def test_run_with_the_emulator_prints_the_answer(workdir: Path, no_leftovers: None) -> None:
    out = adk(
        workdir,
        "run",
        "--config",
        str(AGENT_FILE),
        "--message",
        "Explain rest_for_one",
        "--emulator",
        "--user",
        "local",
        "--session",
        "cli-demo",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "You said: Explain rest_for_one\n"


def test_run_json_prints_event_lines_then_a_result_and_never_the_key(workdir: Path, no_leftovers: None) -> None:
    out = adk(
        workdir,
        "run",
        "--config",
        str(AGENT_FILE),
        "--message",
        "Explain rest_for_one",
        "--emulator",
        "--json",
        "--session",
        "cli-json",
        env=_env(workdir, GEMINI_API_KEY=CANARY),
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    *events, result = lines
    assert [line["type"] for line in events] == ["event"] * len(events) and result["type"] == "result"
    assert events[0]["event"]["author"] == "user" and events[-1]["event"]["is_final"] is True
    assert all(e["event"]["invocation_id"] == events[0]["event"]["invocation_id"] for e in events)
    assert result == {
        "type": "result",
        "ok": True,
        "status": "completed",
        "output": "You said: Explain rest_for_one",
        "agent": "CliAgent",
        "app_name": "adk-cli",
        "user_id": "local",
        "session_id": "cli-json",
    }
    assert CANARY not in out.stdout + out.stderr
    logs = "".join(p.read_text(errors="replace") for p in (workdir / "data").rglob("*") if p.is_file())
    assert CANARY not in logs


def test_run_with_a_custom_emulator_script(workdir: Path, no_leftovers: None) -> None:
    script = _write(workdir / "script.json", {"rules": [{"when": {}, "respond": {"text": "scripted answer"}}]})
    out = adk(workdir, "run", "--config", str(AGENT_FILE), "--message", "hi", "--emulator", "--script", str(script))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "scripted answer\n"


def test_run_without_a_key_or_emulator_fails_clearly(workdir: Path, no_leftovers: None) -> None:
    out = adk(workdir, "run", "--config", str(AGENT_FILE), "--message", "hi")
    assert out.returncode == 1 and out.stdout == ""
    assert "GEMINI_API_KEY" in out.stderr and "[missing_api_key]" in out.stderr
    _no_traceback(out)
    as_json = adk(workdir, "run", "--config", str(AGENT_FILE), "--message", "hi", "--json")
    assert as_json.returncode == 1
    result = json.loads(as_json.stdout)
    assert result["status"] == "failed" and result["error"]["reason"] == "missing_api_key"


def test_run_with_a_key_against_a_dead_endpoint_fails_without_leaking_it(workdir: Path, no_leftovers: None) -> None:
    dead = f"http://127.0.0.1:{reserved_port()}"
    out = adk(
        workdir,
        "run",
        "--config",
        str(AGENT_FILE),
        "--message",
        "hi",
        "--base-url",
        dead,
        env=_env(workdir, GEMINI_API_KEY=CANARY),
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("error: ")
    assert CANARY not in out.stdout + out.stderr
    _no_traceback(out)


def test_run_rejects_an_invalid_file_before_starting_anything(workdir: Path, no_leftovers: None) -> None:
    path = _write(workdir / "agent.json", _agent(api_key=CANARY))
    out = adk(workdir, "run", "--config", str(path), "--message", "hi", "--emulator")
    assert out.returncode == 1 and "[secret_in_config]" in out.stderr
    assert CANARY not in out.stdout + out.stderr
    assert not (workdir / "data" / "logs").exists()


ALWAYS_A_TOOL = {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "lookup", "args": {}}]}}]}
"""A model that calls a tool on every round (the agent has none, so each round answers with a tool error)."""


def test_run_honours_the_files_runner_options(workdir: Path, no_leftovers: None) -> None:
    script = _write(workdir / "script.json", ALWAYS_A_TOOL)
    limited = _write(workdir / "agent.json", _agent(runner_options={"max_llm_calls": 3, "max_tool_rounds": 10}))
    out = adk(
        workdir, "run", "--config", str(limited), "--message", "hi", "--emulator", "--script", str(script), "--json"
    )
    assert out.returncode == 1, out.stdout
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["status"] == "failed" and result["error"]["reason"] == "max_llm_calls"
    assert result["error"]["details"]["max"] == 3
    checked_in = adk(
        workdir, "run", "--config", str(AGENT_FILE), "--message", "hi", "--emulator", "--script", str(script)
    )  # max_tool_rounds 4 of config/agent.json stops it first (the default is 16)
    assert checked_in.returncode == 1 and checked_in.stdout == ""
    assert "[max_tool_rounds]" in checked_in.stderr and '"max": 4' in checked_in.stderr
    _no_traceback(checked_in)


@pytest.mark.parametrize("where", ["--base-url", "GEMINI_BASE_URL", "file"])
def test_run_without_a_key_uses_the_placeholder_key_on_a_loopback_endpoint(
    workdir: Path, no_leftovers: None, where: str
) -> None:
    with Emulator(api_keys=[LOCAL_KEY]) as emu:  # any other key would be refused (400 API_KEY_INVALID)
        config, args, env = AGENT_FILE, [], _env(workdir)
        if where == "--base-url":
            args = ["--base-url", emu.base_url]
        elif where == "GEMINI_BASE_URL":
            env = _env(workdir, GEMINI_BASE_URL=emu.base_url)
        else:
            config = _write(workdir / "agent.json", _agent(base_url=emu.base_url))
        out = adk(workdir, "run", "--config", str(config), "--message", "hello loopback", *args, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout == "You said: hello loopback\n"
        assert [r["status"] for r in emu.requests if ":generateContent" in r["path"]] == [200]


# Runs the CLI with an audit hook that ends the process before any connection to (or lookup of) the forbidden
# host, and before it starts any process (an actor system's processes could connect where the hook cannot see):
# audit events are raised before the system call, so no packet can leave.
NO_CONNECT = """\
import os, sys
FORBIDDEN = os.environ.pop("NO_CONNECT_HOST")
def guard(event, args):
    if (event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] == FORBIDDEN) or \\
            (event == "socket.getaddrinfo" and args[0] == FORBIDDEN):
        os.write(2, b"connection attempted"); os._exit(97)
    if event in ("subprocess.Popen", "os.fork", "os.posix_spawn", "os.exec"):
        os.write(2, b"process started"); os._exit(98)
sys.addaudithook(guard)
"""
UNREACHABLE = "10.255.255.1"
"""A non-loopback address used only as a configured string: it must be refused before any connection."""


def _guarded(workdir: Path, host: str, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_CONNECT + code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=workdir,
        env={**env, "NO_CONNECT_HOST": host},
    )


def test_the_connection_guard_stops_connections_and_processes_before_they_happen(workdir: Path) -> None:
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {reserved_port()}), timeout=1)\n"
    out = _guarded(workdir, "127.0.0.1", code, _env(workdir))
    assert out.returncode == 97 and "connection attempted" in out.stderr
    out = _guarded(workdir, "127.0.0.1", "import subprocess\nsubprocess.run(['true'])\n", _env(workdir))
    assert out.returncode == 98 and "process started" in out.stderr


@pytest.mark.parametrize("where", ["--base-url", "GEMINI_BASE_URL", "file"])
def test_run_without_a_key_refuses_a_non_loopback_endpoint_before_connecting(
    workdir: Path, no_leftovers: None, where: str
) -> None:
    url = f"https://{UNREACHABLE}"
    config, args, env = AGENT_FILE, [], _env(workdir)
    if where == "--base-url":
        args = ["--base-url", url]
    elif where == "GEMINI_BASE_URL":
        env = _env(workdir, GEMINI_BASE_URL=url)
    else:
        config = _write(workdir / "agent.json", _agent(base_url=url))
    argv = ["run", "--config", str(config), "--message", "hi", *args]
    code = f"from adk_actors.cli.main import main\nsys.exit(main({argv!r}))\n"
    out = _guarded(workdir, UNREACHABLE, code, env)
    assert out.returncode == 1, out.stderr
    assert out.stdout == "" and "[missing_api_key]" in out.stderr and "GEMINI_API_KEY" in out.stderr
    _no_traceback(out)
    assert not (workdir / "data" / "logs").exists()  # no actor system was started either


def test_run_attached_to_a_running_system_stops_only_its_agent(
    workdir: Path, system: ActorSystemHandle, no_leftovers: None
) -> None:
    path = _write(workdir / "agent.json", _agent(name="CliAttachedAgent"))
    for _ in range(2):  # the agent is stopped after each run, so the name is free again
        out = adk(
            workdir, "run", "--config", str(path), "--message", "hello system", "--emulator", "--port", str(system.port)
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout == "You said: hello system\n"
    assert system.status()["children"]


# ---- console -------------------------------------------------------------------------------------------------------


class Pty:
    """A child process on a pseudo-terminal; reads wait on ``select`` against an absolute deadline."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True, start_new_session=True
        )
        os.close(slave)
        self.deadline = time.monotonic() + TIMEOUT_S
        self.seen = b""

    def expect(self, pattern: str) -> re.Match[bytes]:
        """Wait until ``pattern`` (a regex) appears in the output after what earlier calls consumed."""
        regex = re.compile(pattern.encode())
        while (match := regex.search(self.seen)) is None:
            remaining = self.deadline - time.monotonic()
            assert remaining > 0, f"timed out waiting for {pattern!r}; output: {self.seen[-2000:]!r}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                assert chunk, f"the console ended before {pattern!r}; output: {self.seen[-2000:]!r}"
                self.seen += chunk
        self.seen = self.seen[match.end() :]
        return match

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait(self) -> tuple[int, bytes]:
        """The exit status and whatever output remained."""
        rest = b""
        while True:
            remaining = self.deadline - time.monotonic()
            assert remaining > 0, "the console did not close"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            rest += chunk
        return self.proc.wait(timeout=max(0.1, self.deadline - time.monotonic())), self.seen + rest

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def console(workdir: Path, no_leftovers: None) -> Iterator[Pty]:
    term = Pty(
        [
            sys.executable,
            "-m",
            "adk_actors.cli.main",
            "console",
            "--config",
            str(AGENT_FILE),
            "--emulator",
            "--session",
            "cli-console",
        ],
        cwd=workdir,
        env=_env(workdir, GEMINI_API_KEY=CANARY),
    )
    try:
        yield term
    finally:
        term.close()


def test_console_chats_inspects_and_exits(console: Pty) -> None:
    console.expect(r"session cli-console \(/help for commands\)")
    console.expect(r"> ")
    console.send("Hello console\n")
    console.expect(r"You said: Hello console\r?\n")
    console.expect(r"> ")
    console.send("/inspect\n")
    match = console.expect(
        r"session  cli-console \(user local, app adk-cli\)\r?\nevents   (\d+)\r?\n"
        r"state    .*\r?\npaused   none"
    )
    assert int(match.group(1)) >= 3  # the user event, at least one delta, the final answer
    console.send("Second turn\n")
    console.expect(r"You said: Second turn")
    console.send("/exit\n")
    status, rest = console.wait()
    assert status == 0, rest
    assert CANARY.encode() not in console.seen + rest and b"Traceback" not in rest


def test_console_commands_and_end_of_input(console: Pty) -> None:
    console.expect(r"> ")
    console.send("/help\n")
    console.expect(r"/resume JSON")
    console.send('/resume {"confirmed": true}\n')
    console.expect(r"\[no_paused_invocation\]")
    console.send("/resume not-json\n")
    console.expect(r"/resume takes a JSON value")
    console.send("/bogus\n")
    console.expect(r"unknown command /bogus")
    console.send("/new\n")
    new_id = console.expect(r"session (cli-[0-9a-f]{12})").group(1).decode()
    console.send("/inspect\n")
    console.expect(rf"session  {new_id} \(user local, app adk-cli\): not created yet")
    console.send("/session cli-console\n")
    console.expect(r"session cli-console")
    console.expect(r"> ")
    console.send("\x04")  # end of input at the start of a line
    status, rest = console.wait()
    assert status == 0, rest
    assert b"Traceback" not in rest


STREAMED = "Streaming arrives piece by piece, as the model writes it."


def test_console_prints_streamed_chunks_before_the_turn_ends(workdir: Path, no_leftovers: None) -> None:
    """The emulator sends one chunk, then holds the rest of the stream until the test has seen that chunk on the
    terminal: the turn cannot have ended, so a console that printed only whole answers (or a Runner that held a
    partial batch until the next chunk) would time out here."""
    script = {"rules": [{"when": {"stream": True}, "respond": {"text": STREAMED, "chunks": 5}}]}
    sent: list[str] = []
    seen_on_terminal = threading.Event()

    def slow_model(method: str, path: str, status: int, body: bytes) -> None:
        # Runs on the emulator's event loop just before each chunk is written.
        if "streamGenerateContent" not in path:
            return
        if len(sent) == 1:
            seen_on_terminal.wait(TIMEOUT_S)  # the rest of the stream waits for the test
        sent.append(json.loads(body)["candidates"][0]["content"]["parts"][0]["text"])

    with Emulator(script=script) as emu:
        add_served_hook(slow_model)
        term = Pty(
            [
                sys.executable,
                "-m",
                "adk_actors.cli.main",
                "console",
                "--config",
                str(AGENT_FILE),
                "--base-url",
                emu.base_url,
                "--session",
                "cli-stream",
            ],
            cwd=workdir,
            env=_env(workdir),
        )
        try:
            term.expect(r"> ")
            term.send("stream please\n")
            term.expect(r"stream please\r?\n")  # the terminal's echo of the input
            term.expect(re.escape(STREAMED[:3]))
            early = STREAMED[:3] + term.seen.decode()
            assert len(sent) == 1 and STREAMED.startswith(sent[0]), sent
            assert sent[0].startswith(early) or early.startswith(sent[0]), early
            assert not seen_on_terminal.is_set() and STREAMED not in early  # the rest is still held
            seen_on_terminal.set()
            term.expect(re.escape(STREAMED[len(sent[0]) :]) + r"\r?\n")
            term.expect(r"> ")
            term.send("/exit\n")
            status, rest = term.wait()
            assert status == 0, rest
        finally:
            seen_on_terminal.set()
            remove_served_hook(slow_model)
            term.close()


APPROVAL_TOOLS = """\
from adk_actors.tools import FunctionTool


def transfer(amount: int) -> dict:
    \"\"\"Move money between two accounts.

    Args:
        amount: How much to move.
    \"\"\"
    return {"moved": amount}


confirmed_transfer = FunctionTool(transfer, requires_confirmation=True)
"""
APPROVAL_SCRIPT = {
    "rules": [
        {"when": {"has_function_response": True}, "respond": {"text": "Transfer done: {response_text}."}},
        {
            "when": {"user_text_contains": "transfer"},
            "respond": {"function_calls": [{"name": "transfer", "args": {"amount": 25}}]},
        },
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}


def test_console_resume_completes_a_confirmation_pause(workdir: Path, no_leftovers: None) -> None:
    (workdir / "cli_approval_tools.py").write_text(APPROVAL_TOOLS)
    config = _write(workdir / "agent.json", _agent(tools=["cli_approval_tools:confirmed_transfer"]))
    script = _write(workdir / "script.json", APPROVAL_SCRIPT)
    term = Pty(
        [
            sys.executable,
            "-m",
            "adk_actors.cli.main",
            "console",
            "--config",
            str(config),
            "--emulator",
            "--script",
            str(script),
            "--session",
            "cli-approval",
        ],
        cwd=workdir,
        env=_env(workdir, PYTHONPATH=str(workdir)),
    )
    try:
        term.expect(r"> ")
        term.send("Please transfer 25\n")
        term.expect(r"\[calling transfer\]")
        term.expect(r"\[paused: tool_confirmation\] \{[^\n]*\"function_name\": \"transfer\"[^\n]*/resume JSON")
        term.expect(r"> ")
        term.send("/inspect\n")
        continuation = term.expect(r"paused   (cont_\w+) \(tool_confirmation\)").group(1)
        term.expect(r"> ")
        term.send('/resume {"confirmed": true}\n')
        term.expect(r"Transfer done: 25\.\r?\n")
        term.expect(r"> ")
        term.send("/inspect\n")
        term.expect(r"paused   none")
        term.send('/resume {"confirmed": true}\n')  # nothing is paused any more
        term.expect(r"\[no_paused_invocation\]")
        term.send("/exit\n")
        status, rest = term.wait()
        assert status == 0, rest
        assert continuation.decode() not in rest.decode(errors="replace")
    finally:
        term.close()


def test_parse_line_separates_messages_from_commands() -> None:
    assert parse_line("  hello  ").name == "message" and parse_line("hello").argument == "hello"
    assert parse_line("").name == "empty"
    assert (parse_line("/session abc").name, parse_line("/session abc").argument) == ("session", "abc")
    assert parse_line('/resume {"confirmed": true}').argument == '{"confirmed": true}'
    assert parse_line("/session").name == "invalid" and parse_line("/exit now").name == "invalid"
    assert parse_line("/nope").name == "invalid"
