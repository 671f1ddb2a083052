"""The MCP server (``mcp_app``) against the official ``mcp`` client and raw HTTP, over a real node.

Every server is served by uvicorn on 127.0.0.1; tools run in the node's worker pool, the agent talks to the Gemini
emulator (``dev_agent`` / ``dev_emu`` of ``dev_support``), and every call is a stable run checked through
``adk_actors.runs``.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from actor_tests.web.dev_support import script_emulator
from actor_tests.web.mcp_server_support import (
    ACCEPT,
    INIT,
    PROMPTS,
    RESOURCES,
    TOKEN,
    TOOLS,
    McpServer,
    official_client,
    read_logo,
    read_note,
    serve_mcp,
)
from adk_actors import FunctionTool, runs
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web import start_in_thread
from adk_actors.web.mcp_server import McpLimits, McpResource, mcp_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def mcp_server(system: ActorSystemHandle, dev_emu: Emulator, dev_agent: str) -> Iterator[McpServer]:
    """A served ``mcp_app`` over the shared node with the test tools and the dev agent."""
    script_emulator(dev_emu)
    with serve_mcp(system, (dev_agent,)) as served:
        yield served


def until(condition: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} not reached before the deadline"
        threading.Event().wait(0.02)
    return value


def run_state(served: McpServer, run_id: str) -> str:
    return str(runs.status(run_id, system=served.system)["state"])


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST answer (one JSON body or an SSE stream)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:]]


def open_session(http: httpx.Client, version: str = "2025-11-25") -> tuple[str, dict[str, Any]]:
    """A raw ``initialize`` + ``notifications/initialized``: the session id and the initialize result."""
    body = {**INIT, "params": {**INIT["params"], "protocolVersion": version}}
    answer = http.post("/mcp", json=body, headers=ACCEPT)
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    negotiated = messages_of(answer)[-1]["result"]["protocolVersion"]
    note = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": negotiated},
    )
    assert note.status_code == 202, note.text
    return session, messages_of(answer)[-1]["result"]


def session_headers(session: str, version: str = "2025-11-25") -> dict[str, str]:
    return {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": version}


def refusal(response: httpx.Response) -> dict[str, Any]:
    """The error object of a refusal (JSON-RPC or the edge's shape), asserting nothing secret is in the answer."""
    assert TOKEN not in response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    return dict(response.json()["error"])


async def good_call_works(url: str) -> None:
    async with official_client(url) as client:
        result = await client.call_tool("add", {"a": 20, "b": 22})
        assert result.is_error is False and result.structured_content == {"result": 42}


# --- interop with the official client ---------------------------------------------------------------------------


async def test_official_client_initializes_lists_and_calls_a_function_tool(
    mcp_server: McpServer, dev_agent: str
) -> None:
    async with official_client(mcp_server.url) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "adk_actors"
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"add", "fail", "sleepy", "big", dev_agent}
        assert tools["add"].input_schema["required"] == ["a", "b"]
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.is_error is False
        assert result.structured_content == {"result": 5} and result.content[0].text == "5"
    run_id = mcp_server.app.started_runs[-1]
    assert run_state(mcp_server, run_id) == "completed", "the call was not a stable run of the node"


async def test_agent_tool_runs_the_emulator_backed_agent(mcp_server: McpServer, dev_agent: str) -> None:
    async with official_client(mcp_server.url) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == dev_agent)
        assert tool.input_schema["required"] == ["prompt"]
        result = await client.call_tool(dev_agent, {"prompt": "what is the weather?"})
        assert result.is_error is False, result
        assert result.content[0].text == "The weather in Tokyo is sunny."
        echoed = await client.call_tool(dev_agent, {"prompt": "hello there"})
        assert echoed.content[0].text == "You said: hello there"
        bad = await client.call_tool(dev_agent, {"question": "no prompt"})
        assert bad.is_error is True and json.loads(bad.content[0].text)["error"]["reason"] == "invalid_arguments"


async def test_tool_failure_is_a_structural_is_error_result(mcp_server: McpServer) -> None:
    async with official_client(mcp_server.url) as client:
        failed = await client.call_tool("fail", {})
        assert failed.is_error is True
        text = failed.content[0].text
        assert json.loads(text) == {"error": {"reason": "tool_exception"}}
        assert "secret" not in text and TOKEN not in text and "Traceback" not in text
        bad_args = await client.call_tool("add", {"a": "two", "b": 3})
        assert bad_args.is_error is True
        assert json.loads(bad_args.content[0].text)["error"]["reason"] == "invalid_arguments"
        with pytest.raises(MCPError):
            await client.call_tool("no_such_tool", {})
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def test_resources_and_prompts(mcp_server: McpServer) -> None:
    async with official_client(mcp_server.url) as client:
        listed = (await client.list_resources()).resources
        assert [(str(r.uri), r.name, r.mime_type) for r in listed] == [
            ("memo://otp", "otp-note", "text/plain"),
            ("memo://logo", "logo", "application/octet-stream"),
        ]
        read = await client.read_resource("memo://otp")
        assert read.contents[0].text == read_note()
        blob = (await client.read_resource("memo://logo")).contents[0]
        assert base64.b64decode(blob.blob) == read_logo()
        with pytest.raises(MCPError):
            await client.read_resource("memo://missing")
        prompts = (await client.list_prompts()).prompts
        assert prompts[0].name == "explain" and prompts[0].arguments[0].required is True
        got = await client.get_prompt("explain", {"topic": "OTP"})
        assert got.messages[0].role == "user" and got.messages[0].content.text == "Explain OTP"
        with pytest.raises(MCPError):
            await client.get_prompt("explain", {})
        with pytest.raises(MCPError):
            await client.get_prompt("explain", {"topic": "x", "other": "y"})


async def test_auto_mode_falls_back_to_the_handshake_at_once(mcp_server: McpServer) -> None:
    started = time.monotonic()
    async with official_client(mcp_server.url, mode="auto") as client:
        assert client.protocol_version == "2025-11-25"
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    # The SDK waits 10 s for an unanswered discover probe: a 400 to it must make the fallback immediate.
    assert time.monotonic() - started < 5.0


async def test_cancelling_a_slow_call_cancels_its_run(mcp_server: McpServer) -> None:
    async with official_client(mcp_server.url) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "sleepy", {"seconds": 60})
            run_id = await anyio.to_thread.run_sync(lambda: until(lambda: mcp_server.app.started_runs[-1:]))
            run_id = run_id[0]
            assert run_state(mcp_server, run_id) == "running"
            group.cancel_scope.cancel()  # the client sends notifications/cancelled
        await anyio.to_thread.run_sync(
            lambda: until(lambda: run_state(mcp_server, run_id) == "cancelled", what="run cancelled")
        )
        outcome = runs.wait(run_id, 5.0, system=mcp_server.system)
        assert isinstance(outcome, runs.Cancelled)
        assert (await client.call_tool("add", {"a": 2, "b": 2})).structured_content == {"result": 4}


async def test_a_client_that_disconnects_leaves_no_running_work(mcp_server: McpServer, dev_agent: str) -> None:
    http = mcp_server.http
    session, _ = open_session(http)
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": dev_agent, "arguments": {}}}
    call["params"]["arguments"] = {"prompt": "a slow question"}  # the emulator answers "slow" after 30 s
    other = httpx.Client(base_url=mcp_server.server.url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False)
    with other.stream("POST", "/mcp", json=call, headers=session_headers(session)) as answer:
        assert answer.status_code == 200
        run_id = until(lambda: mcp_server.app.started_runs[-1:])[0]
        assert run_state(mcp_server, run_id) == "running"
    other.close()  # the connection drops before the answer
    until(lambda: run_state(mcp_server, run_id) == "cancelled", what="the orphaned run cancelled")
    await good_call_works(mcp_server.url)


async def test_deleting_the_session_ends_it_and_cancels_its_calls(mcp_server: McpServer) -> None:
    http = mcp_server.http
    session, _ = open_session(http)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sleepy", "arguments": {}}}
    call["params"]["arguments"] = {"seconds": 60}
    answers: list[httpx.Response] = []
    caller = threading.Thread(
        target=lambda: answers.append(http.post("/mcp", json=call, headers=session_headers(session)))
    )
    caller.start()
    run_id = until(lambda: mcp_server.app.started_runs[-1:])[0]
    deleted = http.delete("/mcp", headers=session_headers(session))
    assert deleted.status_code == 200, deleted.text
    until(lambda: run_state(mcp_server, run_id) == "cancelled", what="the session's run cancelled")
    caller.join(15.0)
    assert not caller.is_alive()
    listed = http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=session_headers(session)
    )
    assert listed.status_code == 404
    await good_call_works(mcp_server.url)


async def test_a_call_over_its_time_bound_is_cancelled(system: ActorSystemHandle) -> None:
    with serve_mcp(system, limits=McpLimits(call_timeout_s=1.0)) as served:
        async with official_client(served.url) as client:
            result = await client.call_tool("sleepy", {"seconds": 30})
            assert result.is_error is True
            assert json.loads(result.content[0].text)["error"]["reason"] in ("job_timeout", "call_timeout")
        assert run_state(served, served.app.started_runs[-1]) in ("failed", "cancelled")


async def test_json_response_mode(system: ActorSystemHandle) -> None:
    with serve_mcp(system, json_response=True) as served:
        answer = served.http.post("/mcp", json=INIT, headers=ACCEPT)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
        assert answer.json()["result"]["protocolVersion"] == "2025-11-25"
        await good_call_works(served.url)


async def test_results_and_concurrent_calls_are_bounded(system: ActorSystemHandle) -> None:
    with serve_mcp(system, limits=McpLimits(max_result_bytes=1024, max_concurrent_calls=1)) as served:
        async with official_client(served.url) as client, official_client(served.url) as other:
            too_big = await client.call_tool("big", {"size": 4096})
            assert too_big.is_error is True
            assert json.loads(too_big.content[0].text)["error"]["reason"] == "result_too_large"
            assert (await client.call_tool("big", {"size": 10})).content[0].text == "x" * 10
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "sleepy", {"seconds": 60})
                await anyio.to_thread.run_sync(lambda: until(lambda: len(served.app.started_runs) == 3))
                busy = await other.call_tool("add", {"a": 1, "b": 1})
                assert busy.is_error is True
                assert json.loads(busy.content[0].text)["error"]["reason"] == "server_busy"
                group.cancel_scope.cancel()
            await anyio.to_thread.run_sync(lambda: until(lambda: served.app.handlers.calls.used == 0))
            assert (await other.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def test_mounted_in_a_users_starlette_app(system: ActorSystemHandle) -> None:
    mcp = mcp_app(system, token=TOKEN, tools=TOOLS, resources=RESOURCES, prompts=PROMPTS)

    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("user route")

    outer = Starlette(routes=[Route("/hello", hello), Mount("/tools", app=mcp)], lifespan=lambda app: mcp.lifespan())
    server = start_in_thread(outer, "127.0.0.1", 0)
    try:
        async with official_client(server.url + "/tools/mcp") as client:
            assert (await client.call_tool("add", {"a": 3, "b": 4})).structured_content == {"result": 7}
        assert httpx.get(server.url + "/hello", trust_env=False).text == "user route"
    finally:
        assert server.stop()


# --- bad input over raw HTTP ------------------------------------------------------------------------------------


def test_version_negotiation(mcp_server: McpServer) -> None:
    http = mcp_server.http
    assert open_session(http, "2025-06-18")[1]["protocolVersion"] == "2025-06-18"
    assert open_session(http, "2099-01-01")[1]["protocolVersion"] == "2025-11-25"
    assert open_session(http, "2024-11-05")[1]["protocolVersion"] == "2025-11-25"


async def test_malformed_messages_are_refused_and_the_node_is_unharmed(mcp_server: McpServer) -> None:
    http = mcp_server.http
    session, _ = open_session(http)
    headers = session_headers(session)
    parse = http.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers=headers)
    assert parse.status_code == 400 and refusal(parse)["code"] == -32700
    for bad in ([INIT], {"id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": None, "method": "x"}, "text"):
        answer = http.post("/mcp", json=bad, headers=headers)
        assert answer.status_code == 400, bad
        assert refusal(answer)["reason"] == "invalid_message"
    no_session = http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=ACCEPT)
    assert no_session.status_code == 400 and refusal(no_session)["reason"] == "missing_session"
    text_body = http.post("/mcp", content=b"{}", headers={**headers, "Content-Type": "text/plain"})
    assert text_body.status_code == 415
    get = http.get("/mcp", headers=headers)
    assert get.status_code == 405 and "POST" in get.headers["allow"]
    await good_call_works(mcp_server.url)


async def test_wrong_protocol_version_header_is_400(mcp_server: McpServer) -> None:
    http = mcp_server.http
    session, _ = open_session(http)
    for version in ("2026-07-28", "2025-03-26", "1999-01-01"):
        answer = http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, headers=session_headers(session, version)
        )
        assert answer.status_code == 400
        assert refusal(answer)["reason"] == "unsupported_protocol_version"
    await good_call_works(mcp_server.url)


async def test_oversize_body_is_413(system: ActorSystemHandle) -> None:
    with serve_mcp(system, limits=McpLimits(max_body_bytes=4096)) as served:
        session, _ = open_session(served.http)
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {}}}
        big["params"]["arguments"] = {"a": 1, "b": 2, "pad": "x" * 8192}
        answer = served.http.post("/mcp", json=big, headers=session_headers(session))
        assert answer.status_code == 413 and refusal(answer)["reason"] == "body_too_large"
        assert served.app.started_runs == []
        await good_call_works(served.url)


async def test_unknown_session_is_404(mcp_server: McpServer) -> None:
    answer = mcp_server.http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=session_headers("f" * 32)
    )
    assert answer.status_code == 404
    assert refusal(answer)["message"]
    await good_call_works(mcp_server.url)


async def test_missing_and_wrong_token_get_the_same_401(mcp_server: McpServer) -> None:
    url = mcp_server.server.url + "/mcp"
    missing = httpx.post(url, json=INIT, headers=ACCEPT, trust_env=False)
    wrong = httpx.post(url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer " + "w" * 40}, trust_env=False)
    assert missing.status_code == wrong.status_code == 401
    assert missing.json() == wrong.json() and refusal(missing)["reason"] == "unauthorized"
    assert "mcp-session-id" not in missing.headers
    with pytest.raises(ExceptionGroup) as refused:
        async with official_client(mcp_server.url, token="x" * 40) as client:
            await client.list_tools()
    assert refused.group_contains(MCPError, depth=2)
    await good_call_works(mcp_server.url)


async def test_a_session_answers_only_the_principal_that_opened_it(mcp_server: McpServer) -> None:
    """With one token every caller is the same principal; this stands in a second authenticated principal (as a
    multi-token deployment would have) by swapping the credential behind the guard."""
    route = mcp_server.app.guard.app

    async def as_other_principal(scope: Any, receive: Any, send: Any) -> None:
        swap = [v for k, v in scope["headers"] if k == b"x-test-principal"]
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"x-test-principal", b"authorization")]
        credential = b"Bearer " + swap[0] if swap else next(v for k, v in scope["headers"] if k == b"authorization")
        await route({**scope, "headers": [*headers, (b"authorization", credential)]}, receive, send)

    mcp_server.app.guard.app = as_other_principal
    http = mcp_server.http
    session, _ = open_session(http)
    listing = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    stolen = http.post("/mcp", json=listing, headers={**session_headers(session), "x-test-principal": "o" * 32})
    assert stolen.status_code == 404
    owned = http.post("/mcp", json=listing, headers=session_headers(session))
    assert owned.status_code == 200 and messages_of(owned)[-1]["result"]["tools"]


async def test_hostile_origin_is_403_and_a_foreign_host_421(mcp_server: McpServer) -> None:
    http = mcp_server.http
    evil = http.post("/mcp", json=INIT, headers={**ACCEPT, "Origin": "http://evil.example"})
    assert evil.status_code == 403 and refusal(evil)["reason"] == "cross_origin"
    rebound = http.post("/mcp", json=INIT, headers={**ACCEPT, "Host": "evil.example:80"})
    assert rebound.status_code == 421 and refusal(rebound)["reason"] == "misdirected_host"
    own = http.post("/mcp", json=INIT, headers={**ACCEPT, "Origin": mcp_server.server.url})
    assert own.status_code == 200
    await good_call_works(mcp_server.url)


async def test_allowed_origin_is_accepted(system: ActorSystemHandle) -> None:
    with serve_mcp(system, allowed_origins=("http://app.example:3000",)) as served:
        ok = served.http.post("/mcp", json=INIT, headers={**ACCEPT, "Origin": "http://app.example:3000"})
        assert ok.status_code == 200
        other = served.http.post("/mcp", json=INIT, headers={**ACCEPT, "Origin": "http://app.example:3001"})
        assert other.status_code == 403


async def test_too_many_sessions_is_a_clear_refusal(system: ActorSystemHandle) -> None:
    with serve_mcp(system, limits=McpLimits(max_sessions=2)) as served:
        first, _ = open_session(served.http)
        open_session(served.http)
        third = served.http.post("/mcp", json=INIT, headers=ACCEPT)
        assert third.status_code == 503 and "mcp-session-id" not in third.headers
        assert "session" in refusal(third)["message"].lower()
        assert served.http.delete("/mcp", headers=session_headers(first)).status_code == 200
        await good_call_works(served.url)  # room again once one ended


async def test_in_flight_requests_per_session_are_bounded(system: ActorSystemHandle) -> None:
    with serve_mcp(system, limits=McpLimits(max_inflight_per_session=1)) as served:
        session, _ = open_session(served.http)
        slow = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sleepy", "arguments": {}}}
        slow["params"]["arguments"] = {"seconds": 60}
        caller = threading.Thread(target=lambda: served.http.post("/mcp", json=slow, headers=session_headers(session)))
        caller.start()
        run_id = until(lambda: served.app.started_runs[-1:])[0]
        second = served.http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session_headers(session)
        )
        assert second.status_code == 429 and refusal(second)["reason"] == "too_many_requests"
        served.http.delete("/mcp", headers=session_headers(session))
        caller.join(15.0)
        until(lambda: run_state(served, run_id) == "cancelled")


# --- configuration ----------------------------------------------------------------------------------------------


def _noop() -> str:
    return ""


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"token": "short"}, "weak_token"),
        ({"tools": [FunctionTool(_noop), FunctionTool(_noop)]}, "duplicate_name"),
        ({"tools": [FunctionTool(lambda: "x", name="lam")]}, "unpicklable_tool"),
        ({"tools": ["not a tool"]}, "invalid_descriptor"),
        ({"agents": ["bad name!"]}, "invalid_tool_name"),
        ({"tools": [FunctionTool(_noop, name="dup")], "agents": ["dup"]}, "duplicate_name"),
        ({"resources": [{"uri": "no scheme", "name": "n", "read": _noop}]}, "invalid_uri"),
        ({"resources": [{"uri": "memo://a", "name": "n", "read": "not callable"}]}, "invalid_descriptor"),
        ({"resources": [{"uri": "memo://a", "name": "n", "read": _noop, "mime_type": "bad"}]}, "invalid_mime_type"),
        ({"resources": [{"uri": "memo://a", "name": "n", "read": _noop, "size": 3}]}, "unknown_key"),
        ({"resources": [McpResource(uri="m://a", name="a", read=_noop)] * 2}, "duplicate_name"),
        ({"prompts": [{"name": "p", "get": _noop, "arguments": [{"name": "a", "required": "yes"}]}]}, "invalid_value"),
        ({"prompts": [{"name": "p p", "get": _noop}]}, "invalid_prompt_name"),
        ({"allowed_origins": ["evil.example"]}, "invalid_value"),
        ({"path": "mcp"}, "invalid_value"),
    ],
)
def test_descriptors_are_validated_up_front(system: ActorSystemHandle, options: dict[str, Any], reason: str) -> None:
    arguments = {"token": TOKEN, **options}
    with pytest.raises(ConfigError) as caught:
        mcp_app(system, **arguments)
    assert caught.value.reason == reason
    assert TOKEN not in str(caught.value) and "short" not in str(caught.value.details)


def test_limits_are_bounded() -> None:
    with pytest.raises(ConfigError) as caught:
        McpLimits(max_sessions=0)
    assert caught.value.reason == "invalid_value" and caught.value.details["key"] == "max_sessions"
    with pytest.raises(ConfigError):
        McpLimits(call_timeout_s=float("nan"))
