"""Servers that break the protocol, hang, exit, flood or never start: each fails with a clear ``McpError`` reason,
leaves no process, actor or file descriptor behind, and the node goes on serving. A stdio server never outlives the
process that owns its connection (SIGKILL included) nor the node. Server-initiated requests: ``ping`` is answered,
``sampling/createMessage`` is refused."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.mcp.conftest import (
    Connector,
    fd_count,
    line_args,
    log_records,
    marker_pids,
    pid_alive,
    until,
)
from adk_actors import mcp
from adk_actors.errors import McpError
from adk_actors.runtime.system import ActorSystemHandle

pytestmark = pytest.mark.timeout(60)


def _garbage(client: mcp.McpClient) -> Any:
    return client.list_tools()


def _call(**kwargs: Any) -> Callable[[mcp.McpClient], Any]:
    return lambda client: client.execute_tool("search", {"query": "q"}, **kwargs)


# (mode, connect options, what to do once connected, the reason)
BAD_SERVERS = [
    pytest.param("garbage", {}, _garbage, "mcp_protocol_error", id="garbage"),
    pytest.param("hang", {}, _call(timeout=0.5), "mcp_timeout", id="hang"),
    pytest.param("exit", {}, _call(), "mcp_connection_closed", id="exit"),
    pytest.param("huge", {"max_message_bytes": 1024}, _call(), "mcp_message_too_large", id="huge"),
    pytest.param("silent", {"connect_timeout_s": 1.0}, None, "mcp_timeout", id="silent-initialize"),
]


@pytest.fixture(scope="module")
def warmed(system: ActorSystemHandle) -> None:
    """A connection, a call, a status and a listing first: the baseline then counts the lanes a first ask opens."""
    with mcp.connect("stdio", sys.executable, args=line_args(), system=system) as client:
        client.execute_tool("search", {"query": "warm"})
        client.status()
    mcp.connection_ids(system)


def assert_node_serves(system: ActorSystemHandle) -> None:
    with mcp.connect("stdio", sys.executable, args=line_args(), system=system) as client:
        assert client.execute_tool("search", {"query": "after"})["content"] == [
            {"type": "text", "text": "found: after"}
        ]


def provoke(
    system: ActorSystemHandle, mode: str, options: dict[str, Any], action: Any, log: Path, marker: str
) -> tuple[mcp.McpClient | None, McpError]:
    """Connect to the line server in ``mode`` and run ``action``; returns the client (if connected) and the error."""
    client = None
    with pytest.raises(McpError) as caught:
        client = mcp.connect(
            "stdio",
            sys.executable,
            args=line_args(mode, "--log", str(log), "--marker", marker),
            system=system,
            **options,
        )
        assert action is not None, "the handshake should not have completed"
        action(client)
    return client, caught.value


@pytest.mark.parametrize(
    ("mode", "options", "action", "reason"), [p.values for p in BAD_SERVERS], ids=[p.id for p in BAD_SERVERS]
)
def test_a_bad_server_fails_with_its_reason_and_the_node_goes_on(
    system: ActorSystemHandle,
    tmp_path: Path,
    mode: str,
    options: dict[str, Any],
    action: Callable[[mcp.McpClient], Any] | None,
    reason: str,
) -> None:
    log = tmp_path / "log.jsonl"
    started = time.monotonic()
    client, error = provoke(system, mode, options, action, log, f"marker-{uuid.uuid4().hex}")
    assert error.reason == reason
    if mode == "silent":
        assert time.monotonic() - started < options["connect_timeout_s"] + 2.5
    if mode == "hang":  # the abandoned request was cancelled on the server; the connection stays usable
        assert client is not None
        ids = until(lambda: [r["cancelled"] for r in log_records(log) if "cancelled" in r], 5, "a cancel notification")
        assert len(ids) == 1 and isinstance(ids[0], int)
        assert client.status()["in_flight"] == 0
        client.ping()
    if client is not None:
        client.close()
    assert_node_serves(system)


@pytest.mark.parametrize(("mode", "options", "action", "reason"), BAD_SERVERS)
def test_a_bad_server_leaves_no_process_actor_or_fd_behind(
    system: ActorSystemHandle,
    warmed: None,
    tmp_path: Path,
    mode: str,
    options: dict[str, Any],
    action: Callable[[mcp.McpClient], Any] | None,
    reason: str,
) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    fds, connections = fd_count(), set(mcp.connection_ids(system))
    client, _error = provoke(system, mode, options, action, tmp_path / "log.jsonl", marker)
    try:
        if mode == "hang":  # a timeout keeps the connection: closing it is the caller's part
            assert client is not None
            client.close()
        until(lambda: set(mcp.connection_ids(system)) == connections, 5, "the connection actor is gone")
        until(lambda: not marker_pids(marker), 5, "the server process is gone")
        until(lambda: fd_count() <= fds, 5, "the test process's fds are back to the baseline")
    finally:
        if client is not None:  # whatever the outcome, nothing of this test outlives it
            with contextlib.suppress(McpError):
                client.close()


def test_a_command_that_does_not_exist_is_mcp_spawn_failed(system: ActorSystemHandle, warmed: None) -> None:
    fds, connections = fd_count(), set(mcp.connection_ids(system))
    with pytest.raises(McpError) as caught:
        mcp.connect("stdio", f"/nonexistent/{uuid.uuid4().hex}", system=system)
    assert caught.value.reason == "mcp_spawn_failed"
    until(lambda: set(mcp.connection_ids(system)) == connections, 10, "the connection actor is gone")
    until(lambda: fd_count() <= fds, 10, "the test process's fds are back to the baseline")
    assert_node_serves(system)


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique argv marker for this test's servers; any server still carrying it afterwards is killed (so a
    regression cannot leave orphans behind)."""
    text = f"marker-{uuid.uuid4().hex}"
    yield text
    for pid in marker_pids(text):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_host_takes_its_stdio_server_with_it(fresh_system: ActorSystemHandle, marker: str) -> None:
    # --stay: the server ignores the end of its stdin, so only the kernel's parent-death signal can end it.
    args = line_args("normal", "--stay", "1", "--marker", marker)
    client = mcp.connect("stdio", sys.executable, args=args, system=fresh_system)
    status = client.status()
    host_pid, server_pid = status["pid"], status["server_pid"]
    assert marker_pids(marker) == [server_pid] and host_pid != os.getpid()
    os.kill(host_pid, signal.SIGKILL)
    until(lambda: not pid_alive(server_pid), 10, "the orphaned server is gone")
    assert marker_pids(marker) == []


def test_stopping_the_node_stops_its_stdio_servers(fresh_system: ActorSystemHandle, marker: str) -> None:
    clients = [
        mcp.connect(
            "stdio", sys.executable, args=line_args("normal", "--stay", "1", "--marker", marker), system=fresh_system
        )
        for _ in range(2)
    ]
    pids = sorted(c.status()["server_pid"] for c in clients)
    assert sorted(marker_pids(marker)) == pids
    fresh_system.stop()
    until(lambda: not marker_pids(marker), 10, "every server is gone")


def test_server_ping_is_answered_and_sampling_is_refused(connect: Connector, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    client = connect("stdio", sys.executable, args=line_args("ping", "--log", str(log)))
    assert client.execute_tool("search", {"query": "q"})["content"] == [{"type": "text", "text": "found: q"}]
    answers = {r["answer"]: r["message"] for r in log_records(log) if "answer" in r}
    assert answers["ping"] == {"jsonrpc": "2.0", "id": "s-ping", "result": {}}
    sampling = answers["sampling"]
    assert sampling["id"] == "s-sampling" and "result" not in sampling
    assert isinstance(sampling["error"]["code"], int) and sampling["error"]["message"]
