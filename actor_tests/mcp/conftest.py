"""MCP-client test fixtures: the fixture servers (``servers/``), connections that are closed after each test, the
official server over Streamable HTTP in a subprocess, and probes for leaked processes and file descriptors.

The agent and Runner fixtures (``emu``, ``spawn``, ``svc``) are the ones of the agent and Runner tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.agents.conftest import config_for, emu, spawn, unique
from actor_tests.runner.conftest import function_responses, svc, until
from adk_actors import mcp
from adk_actors.errors import AdkError
from adk_actors.runtime.system import ActorSystemHandle

__all__ = [
    "LINE_SERVER",
    "OFFICIAL",
    "Connector",
    "config_for",
    "emu",
    "fd_count",
    "function_responses",
    "line_args",
    "log_records",
    "marker_pids",
    "official_args",
    "spawn",
    "svc",
    "unique",
    "until",
]

SERVERS = Path(__file__).parent / "servers"
OFFICIAL = str(SERVERS / "official.py")
LINE_SERVER = str(SERVERS / "line_server.py")

Connector = Callable[..., mcp.McpClient]


def official_args(*extra: str) -> list[str]:
    """Arguments (after ``sys.executable``) that start the official server over stdio."""
    return [OFFICIAL, "stdio", *extra]


def line_args(mode: str = "normal", *extra: str) -> list[str]:
    """Arguments (after ``sys.executable``) that start the line server in ``mode``."""
    return [LINE_SERVER, mode, *extra]


def log_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a line server appended to its ``--log`` file (none yet: empty)."""
    try:
        return [json.loads(line) for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []


def marker_pids(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (a /proc scan; zombies do not count)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def fd_count() -> int:
    """This test process's open file descriptors, except pidfds: the runtime keeps a bounded cache of those for the
    node's processes (``adk_actors.runtime.procs``), so the first ask to another host adds one for good."""
    count = 0
    for entry in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{entry}") != "anon_inode:[pidfd]":
                count += 1
    return count


@pytest.fixture
def connect(system: ActorSystemHandle) -> Iterator[Connector]:
    """``connect(transport, target, **options)`` on the shared system; every connection is closed after the test."""
    opened: list[mcp.McpClient] = []

    def make(transport: str, target: str, **options: Any) -> mcp.McpClient:
        client = mcp.connect(transport, target, system=system, **options)
        opened.append(client)
        return client

    yield make
    for client in opened:
        with contextlib.suppress(AdkError):
            client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"port {port} never opened"
            time.sleep(0.02)


@pytest.fixture(scope="module")
def official_http(tmp_module_dir: Path) -> Iterator[str]:
    """The official server over Streamable HTTP in a subprocess on a free loopback port; yields the endpoint URL."""
    port = free_port()
    with open(tmp_module_dir / f"http-{uuid.uuid4().hex}.log", "wb") as stderr:
        proc = subprocess.Popen([sys.executable, OFFICIAL, "http", str(port)], stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            wait_port(port, 20.0)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
