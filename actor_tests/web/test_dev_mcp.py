"""``/dev/v1/mcp``: the node's MCP client connections over real HTTP on 127.0.0.1.

Real connections from the shared node to :mod:`actor_tests.web.mcp_peer` (the official ``mcp`` SDK) over stdio and
Streamable HTTP, ``dev_app`` served by uvicorn, httpx as the client. The routes list connections with their server,
protocol, state and tools, show one connection, refuse unknown and malformed ids by reason, change nothing on the
connection, and never carry the connection's token or environment.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.web.dev_support import DevServer, until
from actor_tests.web.mcp_peer import SERVER_NAME, SERVER_VERSION, http_peer
from adk_actors import mcp
from adk_actors.runtime.system import ActorSystemHandle

PEER = str(Path(__file__).with_name("mcp_peer.py"))
TOOLS = ["add", "fail", "summarize"]
ENV_SECRET = "peer-env-" + secrets.token_hex(12)
"""A value in the stdio server's environment: it must appear in no answer."""
HTTP_TOKEN = "peer-token-" + secrets.token_hex(12)
"""The bearer token of the HTTP connection: it must appear in no answer."""


@pytest.fixture
def stdio_client(system: ActorSystemHandle) -> Iterator[mcp.McpClient]:
    """A stdio connection to the peer (its environment holds :data:`ENV_SECRET`), tools listed once."""
    client = mcp.connect("stdio", sys.executable, args=[PEER, "stdio"], env={"PEER_SETTING": ENV_SECRET}, system=system)
    try:
        client.list_tools()
        yield client
    finally:
        client.close()


@pytest.fixture
def http_client(system: ActorSystemHandle) -> Iterator[mcp.McpClient]:
    """A Streamable HTTP connection to the peer in a subprocess, with a bearer token, tools listed once."""
    with http_peer() as url:
        client = mcp.connect("http", url, token=HTTP_TOKEN, allow_http_loopback=True, system=system)
        try:
            client.list_tools()
            yield client
        finally:
            client.close()


def connection_id(client: mcp.McpClient) -> str:
    return client.ref.local_id


def listed(dev: DevServer, client: mcp.McpClient) -> dict[str, Any]:
    """The connection's row of ``GET /dev/v1/mcp/connections``."""
    answer = dev.client.get("/dev/v1/mcp/connections")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"connections", "truncated"} and body["truncated"] is False
    [row] = [c for c in body["connections"] if c["connection_id"] == connection_id(client)]
    return dict(row)


def assert_no_leak(dev: DevServer, *values: str) -> None:
    for response in dev.responses:
        for value in values:
            assert value not in response.text, f"{response.request.url.path} carried a secret"


def test_a_stdio_connection_is_listed_with_its_server_protocol_state_and_tools(
    dev_server: DevServer, stdio_client: mcp.McpClient
) -> None:
    row = listed(dev_server, stdio_client)

    assert row["name"] == stdio_client.name == "devtools-peer"  # the server's name labels the connection
    assert row["transport"] == "stdio" and row["url"] == "" and row["server_pid"] > 0
    assert row["server_info"] == {"name": SERVER_NAME, "version": SERVER_VERSION}
    assert row["protocol_version"] in mcp.PROTOCOL_VERSIONS
    assert row["state"] == "open" and row["available"] is True and row["catalog_changed"] is False
    assert row["tools"] == TOOLS and row["calls"] == 1 and row["in_flight"] == 0
    assert row["host_id"] == stdio_client.ref.host_id
    assert_no_leak(dev_server, ENV_SECRET, "PEER_SETTING", PEER)


def test_one_connection_shows_its_tools_and_reading_it_changes_nothing(
    dev_server: DevServer, stdio_client: mcp.McpClient
) -> None:
    before = stdio_client.status()

    answer = dev_server.client.get(f"/dev/v1/mcp/connections/{connection_id(stdio_client)}")

    assert answer.status_code == 200, answer.text
    shown = answer.json()
    assert shown["tools"] == [{"name": name} for name in TOOLS]
    assert shown["server_info"]["name"] == SERVER_NAME and shown["state"] == "open"
    listed(dev_server, stdio_client)
    after = stdio_client.status()
    assert (after["calls"], after["tools"], after["catalog_changed"]) == (
        before["calls"],
        before["tools"],
        before["catalog_changed"],
    ), "a read-only route made a request on the connection"


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("mcp-0123456789abcdef0123456789abcdef", 404, "mcp_connection_not_found"),
        ("registry", 404, "mcp_connection_not_found"),
        ("bad%01id", 400, "invalid_value"),
        ("x" * 300, 400, "limit_exceeded"),
    ],
    ids=["unknown", "another-actor", "control-character", "too-long"],
)
def test_an_id_that_is_no_open_connection_is_refused_by_reason(
    dev_server: DevServer, path: str, status: int, reason: str
) -> None:
    answer = dev_server.client.get(f"/dev/v1/mcp/connections/{path}")

    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"error"} and answer.json()["error"]["reason"] == reason
    assert path not in answer.text


def test_the_routes_need_the_token_and_take_no_writes(dev_server: DevServer, stdio_client: mcp.McpClient) -> None:
    bare = dev_server.client.get("/dev/v1/mcp/connections", headers={"Authorization": ""})
    assert bare.status_code == 401 and bare.json()["error"]["reason"] == "unauthorized"
    one = f"/dev/v1/mcp/connections/{connection_id(stdio_client)}"
    for method in ("POST", "DELETE", "PATCH"):
        assert dev_server.client.request(method, one).status_code == 405, method
    assert dev_server.client.post("/dev/v1/mcp/connections", json={}).status_code == 405
    assert stdio_client.status()["state"] == "open"


def test_an_http_connection_shows_its_url_and_never_its_token(
    dev_server: DevServer, http_client: mcp.McpClient
) -> None:
    row = listed(dev_server, http_client)
    assert row["transport"] == "http" and row["url"].startswith("http://127.0.0.1:") and row["server_pid"] == 0
    assert row["server_info"]["name"] == SERVER_NAME and row["tools"] == TOOLS
    one = dev_server.client.get(f"/dev/v1/mcp/connections/{connection_id(http_client)}")
    assert one.status_code == 200 and one.json()["url"] == row["url"]

    assert_no_leak(dev_server, HTTP_TOKEN)


def test_a_closed_connection_leaves_the_list(dev_server: DevServer, system: ActorSystemHandle) -> None:
    client = mcp.connect("stdio", sys.executable, args=[PEER, "stdio"], system=system)
    try:
        assert listed(dev_server, client)["state"] == "open"
    finally:
        client.close()

    def gone() -> bool:
        ids = [c["connection_id"] for c in dev_server.client.get("/dev/v1/mcp/connections").json()["connections"]]
        return connection_id(client) not in ids

    until(gone, what="the closed connection gone from the list")
    answer = dev_server.client.get(f"/dev/v1/mcp/connections/{connection_id(client)}")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "mcp_connection_not_found"
