"""``adk mcp list-tools`` as a subprocess, against :mod:`actor_tests.web.mcp_peer` (the official ``mcp`` SDK) over
stdio and over Streamable HTTP, with no node running.

It prints the server, the negotiated protocol version and each tool with the first line of its description (all of
it with ``--json``), leaves no server process behind, never prints the bearer token, and fails by reason: a command
that does not start (``mcp_spawn_failed``), plain http without the loopback opt-in (``insecure_url``), a token
variable that is not set (``missing_token``), words after a URL (exit 2).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from actor_tests.web.mcp_peer import SERVER_NAME, SERVER_VERSION, http_peer
from adk_actors.mcp import PROTOCOL_VERSIONS
from adk_actors.testing import pids_with_cmdline

ADK = str(Path(sys.executable).with_name("adk"))
PEER = str(Path(__file__).resolve().parents[1] / "web" / "mcp_peer.py")
TOKEN = "cli-mcp-token-" + secrets.token_hex(12)


def adk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ADK, *args], capture_output=True, text=True, timeout=60, env=env)


def no_process_with(marker: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while pids_with_cmdline(marker.encode()):
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.05)
    return True


def test_a_stdio_server_is_listed_with_its_version_server_and_first_description_lines_then_stopped() -> None:
    marker = f"--run={uuid.uuid4().hex}"  # the peer ignores words after "stdio"

    done = adk("mcp", "list-tools", sys.executable, PEER, "stdio", marker)

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == f"server: {SERVER_NAME} {SERVER_VERSION}"
    assert lines[1].startswith("protocol: ") and lines[1].split()[1] in PROTOCOL_VERSIONS
    assert lines[1].endswith("(stdio)") and lines[2] == "tools: 3"
    assert [line.split(None, 1) for line in lines[3:]] == [
        ["add", "Add two integers."],
        ["summarize", "Shorten a text to its first sentence."],
        ["fail", "Always fails."],
    ]
    assert no_process_with(marker), "the stdio server outlived the command"


def test_json_output_carries_the_whole_descriptions_and_schemas() -> None:
    done = adk("mcp", "list-tools", "--json", sys.executable, PEER, "stdio")

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["ok"] is True and found["transport"] == "stdio"
    assert found["protocol_version"] in PROTOCOL_VERSIONS
    assert found["server"] == {"name": SERVER_NAME, "version": SERVER_VERSION}
    tools = {tool["name"]: tool for tool in found["tools"]}
    assert list(tools) == ["add", "summarize", "fail"]
    assert "only in full (JSON) form" in tools["summarize"]["description"]
    assert tools["add"]["input_schema"]["required"] == ["a", "b"]


def test_an_http_server_is_listed_with_the_token_from_the_environment_and_the_token_is_never_printed() -> None:
    env = {**os.environ, "PEER_TOKEN": TOKEN}
    with http_peer() as url:
        done = adk("mcp", "list-tools", url, "--allow-http-loopback", "--token-env", "PEER_TOKEN", env=env)
        as_json = adk("mcp", "list-tools", "--json", url, "--allow-http-loopback", env=env)
        refused = adk("mcp", "list-tools", url, env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"server: {SERVER_NAME} {SERVER_VERSION}"
    assert "(http)" in done.stdout.splitlines()[1] and "tools: 3" in done.stdout
    assert json.loads(as_json.stdout)["transport"] == "http"
    assert refused.returncode == 1 and "[insecure_url]" in refused.stderr and refused.stdout == ""
    for result in (done, as_json, refused):
        assert TOKEN not in result.stdout + result.stderr


def test_a_command_that_does_not_start_fails_with_mcp_spawn_failed() -> None:
    missing = f"/nonexistent/mcp-server-{uuid.uuid4().hex}"

    plain = adk("mcp", "list-tools", missing, "--flag")
    as_json = adk("mcp", "list-tools", "--json", missing)

    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.startswith("error: ") and "[mcp_spawn_failed]" in plain.stderr
    assert "Traceback" not in plain.stderr
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["reason"] == "mcp_spawn_failed"


def test_bad_arguments_are_refused_by_reason_before_connecting() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_TOKEN_VAR"}

    after_url = adk("mcp", "list-tools", "http://127.0.0.1:9/mcp", "stdio")
    unset = adk("mcp", "list-tools", "https://mcp.invalid/mcp", "--token-env", "NO_SUCH_TOKEN_VAR", env=env)
    token_for_command = adk("mcp", "list-tools", "--token-env", "PEER_TOKEN", sys.executable, PEER, "stdio")

    assert after_url.returncode == 2 and "[invalid_arguments]" in after_url.stderr
    assert unset.returncode == 1 and "[missing_token]" in unset.stderr and "NO_SUCH_TOKEN_VAR" in unset.stderr
    assert token_for_command.returncode == 1 and "[invalid_value]" in token_for_command.stderr
