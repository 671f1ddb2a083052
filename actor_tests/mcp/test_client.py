"""The MCP client against real servers: the official SDK server over stdio and Streamable HTTP and the hand-written
line server; every operation of :class:`adk_actors.mcp.McpClient`; tokens kept out of status, errors and logs; and
the option and URL checks under hypothesis."""

from __future__ import annotations

import ipaddress
import sys
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actor_tests.mcp.conftest import Connector, line_args, official_args
from adk_actors import mcp
from adk_actors.errors import ConfigError, McpError
from adk_actors.mcp.core import CONNECT_OPTIONS, ClientOptions, check_options
from adk_actors.mcp.http import check_url
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import ProbeArgs

pytestmark = pytest.mark.timeout(60)


def exercise_official(client: mcp.McpClient) -> None:
    """Every client operation against the official server (same answers over stdio and HTTP)."""
    assert client.protocol_version == "2025-11-25"
    assert client.server_info["name"] == "official-peer"
    assert [t["name"] for t in client.list_tools()] == ["add", "fail", "slow", "change_catalog"]
    assert client.execute_tool("add", {"a": 2, "b": 3}) == {
        "content": [{"type": "text", "text": "5"}],
        "structuredContent": {"result": 5},
        "isError": False,
    }
    failed = client.execute_tool("fail")
    assert failed["isError"] is True and failed["content"][0]["type"] == "text"
    assert [r["uri"] for r in client.list_resources()] == ["memo://hello"]
    assert client.read_resource("memo://hello") == {
        "contents": [{"uri": "memo://hello", "mimeType": "text/plain", "text": "hello world"}]
    }
    assert client.read_resource("greet://bob")["contents"][0]["text"] == "hi bob"
    assert [p["name"] for p in client.list_prompts()] == ["review"]
    prompt = client.get_prompt("review", {"code": "x = 1"})
    assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "Please review:\nx = 1"}}]
    client.ping()
    status = client.status()
    assert status["state"] == "open" and status["protocol_version"] == "2025-11-25"
    assert status["tools"] == ["add", "change_catalog", "fail", "slow"]
    assert status["calls"] == 9 and status["in_flight"] == 0


def test_stdio_to_the_official_server_negotiates_2025_11_25_and_runs_every_operation(connect: Connector) -> None:
    client = connect("stdio", sys.executable, args=official_args())
    assert client.transport == "stdio"
    exercise_official(client)
    assert client.status()["server_pid"] > 0


def test_streamable_http_to_the_official_server_runs_every_operation(connect: Connector, official_http: str) -> None:
    client = connect("http", official_http, allow_http_loopback=True)
    assert client.transport == "http"
    exercise_official(client)
    assert client.status()["url"] == official_http


def test_stdio_to_the_line_server_calls_its_tool(connect: Connector) -> None:
    client = connect("stdio", sys.executable, args=line_args())
    assert (client.protocol_version, client.server_info) == ("2025-11-25", {"name": "line-server", "version": "1.0"})
    assert [t["name"] for t in client.list_tools()] == ["search"]
    assert client.execute_tool("search", {"query": "otp"}) == {
        "content": [{"type": "text", "text": "found: otp"}],
        "isError": False,
    }


def test_close_stops_the_connection_and_is_idempotent(connect: Connector) -> None:
    client = connect("stdio", sys.executable, args=line_args())
    client.close()
    client.close()
    with pytest.raises(McpError) as caught:
        client.list_tools()
    assert caught.value.reason == "mcp_connection_closed"
    assert (0, client.ref.local_id) not in mcp.connection_ids(client.system)


def test_a_token_never_appears_in_status_errors_or_logs(
    system: ActorSystemHandle, connect: Connector, official_http: str
) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    client = connect("http", official_http, allow_http_loopback=True, token=token)
    assert client.execute_tool("add", {"a": 1, "b": 1})["structuredContent"] == {"result": 2}
    seen: list[str] = [repr(client), repr(client.status()), repr(client.list_tools())]
    with pytest.raises(McpError) as bad_call:
        client.execute_tool("x" * 129)
    dead_port = official_http.rsplit(":", 1)[0] + ":9/mcp"
    with pytest.raises(McpError) as refused:
        mcp.connect("http", dead_port, system=system, allow_http_loopback=True, token=token, connect_timeout_s=2)
    options = check_options("http", official_http, allow_http_loopback=True, token=token)
    for err in (bad_call.value, refused.value):
        seen += [str(err), repr(err), repr(err.details)]
    seen.append(repr(options))
    client.close()
    for path in (system.log_sink, system.thesplog):
        if path.exists():
            seen.append(path.read_text(errors="replace"))
    assert refused.value.reason in ("mcp_connection_closed", "mcp_protocol_error", "mcp_timeout")
    assert all(token not in text for text in seen)


# ---- option and URL checks ---------------------------------------------------------------------------------------

OPTION_KEYS = [*sorted(CONNECT_OPTIONS), "bogus"]
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.binary(max_size=8),
    st.lists(st.text(max_size=8), max_size=4),
    st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
)
URLS = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda scheme, host, port, path, tail: f"{scheme}://{host}{port}{path}{tail}",
        st.sampled_from(["http", "https", "ftp", "HTTP", ""]),
        st.sampled_from(
            ["127.0.0.1", "localhost", "[::1]", "example.com", "user:pw@localhost", "[::1", "", "10.0.0.1"]
        ),
        st.sampled_from(["", ":8080", ":0", ":99999", ":x"]),
        st.sampled_from(["", "/mcp", "/a b"]),
        st.sampled_from(["", "?q=1", "#f", "?", "#"]),
    ),
)


def is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def assert_valid(opts: ClientOptions) -> None:
    assert opts.transport in ("stdio", "http")
    assert 1024 <= opts.max_message_bytes <= 64 * 1024 * 1024
    assert 0 < opts.request_timeout_s <= 3600 and 0 < opts.connect_timeout_s <= 600
    assert isinstance(opts.name, str) and len(opts.name) <= 128
    if opts.transport == "stdio":
        assert opts.command and all(isinstance(a, str) for a in opts.args)
    else:
        assert urlsplit(opts.url).scheme in ("https", "http")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transport=st.sampled_from(["stdio", "http", "sse", "ws", ""]),
    target=st.one_of(URLS, st.none(), st.integers()),
    options=st.dictionaries(st.sampled_from(OPTION_KEYS), ANY_VALUE, max_size=4),
)
@example(transport="stdio", target="server", options={"request_timeout_s": float("inf"), "args": "not-a-list"})
@example(transport="http", target="http://127.0.0.1:1/mcp", options={"allow_http_loopback": True, "token": "a\nb"})
def test_check_options_returns_valid_options_or_raises_a_tagged_error(
    transport: str, target: Any, options: dict[str, Any]
) -> None:
    try:
        opts = check_options(transport, target, **options)
    except (ConfigError, McpError) as err:
        assert err.reason and err.reason != "error"
        return
    assert_valid(opts)


@settings(max_examples=400, deadline=None)
@given(url=st.one_of(URLS, st.none(), st.integers(), st.binary(max_size=10)), loopback=st.booleans())
def test_check_url_returns_the_url_or_raises_invalid_or_insecure_url(url: Any, loopback: bool) -> None:
    try:
        checked = check_url(url, allow_http_loopback=loopback)
    except McpError as err:
        assert err.reason in ("invalid_url", "insecure_url")
        return
    assert checked == url
    parts = urlsplit(url)  # schemes are case-insensitive
    assert parts.scheme == "https" or (loopback and parts.scheme == "http" and is_loopback(parts.hostname))
    assert parts.username is None and not parts.query and not parts.fragment


@pytest.mark.parametrize("key", ["request_timeout_s", "connect_timeout_s"])
def test_a_timeout_too_large_for_a_float_is_an_invalid_value(key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_options("stdio", "server", **{key: 10**400})
    assert caught.value.reason == "invalid_value" and caught.value.details == {"key": key}


def test_connections_are_found_on_a_host_with_more_inner_actors_than_its_status_lists(
    system: ActorSystemHandle, connect: Connector
) -> None:
    """Host status lists 200 inner actors; discovery asks the hosts for connection actors by class instead. The
    filler is started first on every host, so a connection started after it is past the status list's 200."""
    from adk_actors.runtime.host import InnerSpec, SpawnMany
    from adk_actors.runtime.refs import host_name

    spawned = []
    for host in range(system.settings.hosts):
        specs = tuple(
            InnerSpec(
                local_id=f"filler-{uuid.uuid4().hex}",
                actor="adk_actors.testing.actors.Probe",
                args=ProbeArgs(),
                restart="temporary",
            )
            for _ in range(210)
        )
        spawned.extend(system.ask(host_name(host), SpawnMany(specs=specs), 30))
    try:
        client = connect("stdio", sys.executable, args=official_args())
        assert (client.ref.host_id, client.ref.local_id) in mcp.connection_ids(system)
        assert mcp.connection_ids(system, limit=0) == []
    finally:
        for ref in spawned:
            system.stop_inner(ref, 10)
