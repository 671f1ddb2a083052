"""The edge guard, errors, JSON bodies, the offload pool and the server helpers, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import pickle
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from actor_tests.web.conftest import FAILURES, INTERNAL_TEXT, TOKEN, Edge, auth, error_of
from adk_actors import errors
from adk_actors.web import DevToken, EdgeGuard, EdgeLimits, Offload, check_bind, start_in_thread, status_for
from adk_actors.web.edge import LIMIT_BOUNDS, error_response
from adk_actors.web.serve import uvicorn_config

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"

EDGE_REASONS = {
    "headers_too_large",
    "token_in_query",
    "unauthorized",
    "cross_origin",
    "body_too_large",
    "invalid_content_length",
    "unsupported_media_type",
    "invalid_json",
    "invalid_body",
    "not_found",
    "method_not_allowed",
}
KNOWN_REASONS = EDGE_REASONS | {err.reason for err in FAILURES.values()}


def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        threading.Event().wait(0.01)


# --- limits and token -----------------------------------------------------------------------------------------


def test_limits_defaults_are_the_reference_bounds() -> None:
    limits = EdgeLimits()
    assert (limits.max_body_bytes, limits.max_header_bytes, limits.max_headers) == (1 << 20, 16 << 10, 64)
    assert (limits.sse_max_events, limits.sse_max_bytes, limits.sse_max_duration_ms) == (128, 1 << 20, 300_000)
    assert (limits.max_concurrent_streams, limits.max_page_size, limits.keepalive_s) == (64, 100, 15.0)
    assert LIMIT_BOUNDS["sse_max_events"][1] == 10_000
    assert LIMIT_BOUNDS["sse_max_bytes"][1] == 16 << 20
    assert LIMIT_BOUNDS["sse_max_duration_ms"][1] == 3_600_000


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sse_max_events", 10_001),
        ("sse_max_bytes", (16 << 20) + 1),
        ("sse_max_duration_ms", 3_600_001),
        ("sse_max_events", 0),
        ("max_body_bytes", -1),
        ("max_headers", True),
        ("max_page_size", 1.5),
        ("keepalive_s", float("nan")),
        ("keepalive_s", 0),
        ("max_concurrent_streams", "64"),
    ],
)
def test_limits_out_of_bounds_are_refused_with_the_key(key: str, value: Any) -> None:
    with pytest.raises(errors.ConfigError) as info:
        EdgeLimits(**{key: value})
    assert info.value.reason == "invalid_value"
    assert info.value.details["key"] == key
    assert info.value.details["maximum"] == LIMIT_BOUNDS[key][1]


def test_limits_at_the_hard_maxima_are_accepted() -> None:
    top = EdgeLimits(sse_max_events=10_000, sse_max_bytes=16 << 20, sse_max_duration_ms=3_600_000, keepalive_s=1)
    assert top.sse_max_events == 10_000 and top.keepalive_s == 1


@pytest.mark.parametrize("raw", ["", "short", "x" * 15, "é" * 7])
def test_a_weak_token_is_refused_without_echoing_it(raw: str) -> None:
    with pytest.raises(errors.ConfigError) as info:
        DevToken(raw)
    assert info.value.reason == "weak_token"
    if raw:
        assert raw not in str(info.value) and raw not in json.dumps(info.value.to_dict())


@pytest.mark.parametrize("raw", ["has a space in it!!", "tab\tseparated-token-x", "nonascii-token-ééééé", None, 12])
def test_a_token_that_cannot_travel_in_a_header_is_refused(raw: Any) -> None:
    with pytest.raises(errors.ConfigError) as info:
        DevToken(raw)
    assert info.value.reason == "invalid_token"


def test_token_keeps_only_its_digest_and_checks_bearer_headers() -> None:
    raw = "tok-" + secrets.token_hex(16)
    token = DevToken(raw)
    assert raw not in repr(token) and raw not in str(token)
    assert raw.encode() not in pickle.dumps(token)
    assert [getattr(token, name) for name in type(token).__slots__] == [token._digest]
    assert token.check(f"Bearer {raw}") and token.check(f"bearer {raw}") and token.check(f"BEARER  {raw}".encode())
    for wrong in [raw, f"Bearer {raw}x", f"Bearer {raw[:-1]}", f"Basic {raw}", f"Bearer{raw}", "", None, 7]:
        assert not token.check(wrong), wrong


def test_token_from_env_reads_the_variable_and_names_it_when_missing() -> None:
    raw = secrets.token_urlsafe(24)
    assert DevToken.from_env(environ={"ADK_DEV_TOKEN": raw}).check(f"Bearer {raw}")
    with pytest.raises(errors.ConfigError) as info:
        DevToken.from_env("MY_TOKEN", environ={})
    assert (info.value.reason, info.value.details) == ("missing_token", {"env": "MY_TOKEN"})


def test_guard_refuses_a_token_that_is_not_a_dev_token() -> None:
    with pytest.raises(errors.ConfigError) as info:
        EdgeGuard(error_response(200, "x"), token=TOKEN)  # type: ignore[arg-type]
    assert info.value.details == {"key": "token"}


# --- auth, query, origin, CORS --------------------------------------------------------------------------------


def test_a_valid_bearer_token_passes(edge: Edge) -> None:
    response = edge.client.get("/api/hello", headers=auth())
    assert (response.status_code, response.json()) == (200, {"hello": "edge"})


def test_missing_and_wrong_tokens_get_the_same_401(edge: Edge) -> None:
    missing = edge.client.get("/api/hello")
    wrong = edge.client.get("/api/hello", headers=auth("w" * 40))
    basic = edge.client.get("/api/hello", headers={"Authorization": f"Basic {TOKEN}"})
    twice = edge.client.get("/api/hello", headers=[("Authorization", f"Bearer {TOKEN}")] * 2)
    for response in (missing, wrong, basic, twice):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert error_of(response)["reason"] == "unauthorized"
    assert missing.content == wrong.content == basic.content == twice.content


def test_a_public_path_needs_no_token_but_unknown_paths_do(edge: Edge) -> None:
    assert edge.client.get("/public/ping").text == "pong"
    assert edge.client.get("/nowhere").status_code == 401
    assert edge.client.get("/public/nowhere").status_code == 404


@pytest.mark.parametrize(
    "query", ["token=abc", "access_token=abc", "auth=abc", "x=1&ACCESS%5FTOKEN=abc", "a=1;token=abc", "Token"]
)
def test_a_credential_in_the_query_string_is_refused(edge: Edge, query: str) -> None:
    for path in ("/api/hello", "/public/ping"):
        response = edge.client.get(f"{path}?{query}", headers=auth())
        assert response.status_code == 400
        error = error_of(response)
        assert error["reason"] == "token_in_query"
        assert "abc" not in response.text


def test_other_query_parameters_pass(edge: Edge) -> None:
    assert edge.client.get("/api/hello?tokens=1&page=2", headers=auth()).status_code == 200


def test_cross_origin_requests_are_refused_and_same_origin_ones_pass(edge: Edge) -> None:
    port = edge.server.port
    assert edge.client.get("/api/hello", headers={**auth(), "Origin": f"http://127.0.0.1:{port}"}).status_code == 200
    assert edge.client.get("/api/hello", headers={**auth(), "Origin": f"HTTP://127.0.0.1:{port}"}).status_code == 200
    assert edge.client.get("/api/hello", headers=auth()).status_code == 200
    for origin in [
        "http://evil.example",
        f"http://localhost:{port}",
        f"https://127.0.0.1:{port}",
        f"http://127.0.0.1:{port + 1}",
        f"http://127.0.0.1:{port}/path",
        f"http://user@127.0.0.1:{port}",
        "null",
        "",
        "http://[::1",
    ]:
        response = edge.client.get("/api/hello", headers={**auth(), "Origin": origin})
        assert response.status_code == 403, origin
        assert error_of(response)["reason"] == "cross_origin"
    twice = [*auth().items(), ("Origin", f"http://127.0.0.1:{port}"), ("Origin", f"http://127.0.0.1:{port}")]
    assert edge.client.get("/api/hello", headers=twice).status_code == 403
    assert edge.client.get("/public/ping", headers={"Origin": "http://evil.example"}).status_code == 403


def test_no_cors_header_ever_leaves_the_edge(edge: Edge) -> None:
    responses = [
        edge.client.get("/api/cors", headers=auth()),
        edge.client.get("/api/cors", headers={**auth(), "Origin": "http://evil.example"}),
        edge.client.options(
            "/api/hello",
            headers={
                **auth(),
                "Origin": f"http://127.0.0.1:{edge.server.port}",
                "Access-Control-Request-Method": "GET",
            },
        ),
        edge.client.get("/api/hello"),
    ]
    assert responses[0].json() == {"ok": True}
    assert error_of(responses[2])["reason"] == "method_not_allowed"
    for response in responses:
        assert not [name for name in response.headers if name.lower().startswith("access-control-")]
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "server" not in response.headers


# --- bodies and headers ---------------------------------------------------------------------------------------


def test_a_declared_body_over_the_bound_is_refused_before_the_app_runs(serve: Callable[..., Edge]) -> None:
    edge = serve(limits=EdgeLimits(max_body_bytes=1024))
    assert edge.client.post("/api/size", headers=auth(), content=b"x" * 1024).json() == {"bytes": 1024}
    calls = edge.calls["size"]
    response = edge.client.post("/api/size", headers=auth(), content=b"x" * 1025)
    assert response.status_code == 413
    assert error_of(response) == {
        "reason": "body_too_large",
        "message": "the request body exceeds the edge's bound",
        "max_bytes": 1024,
    }
    assert edge.calls["size"] == calls


def test_a_chunked_body_is_cut_off_at_the_bound(serve: Callable[..., Edge]) -> None:
    edge = serve(limits=EdgeLimits(max_body_bytes=1024))
    small = edge.client.post("/api/size", headers=auth(), content=iter([b"a" * 500, b"b" * 500]))
    assert small.json() == {"bytes": 1000}
    assert small.request.headers["transfer-encoding"] == "chunked"
    response = edge.client.post("/api/size", headers=auth(), content=iter([b"a" * 600, b"b" * 600, b"c" * 600]))
    assert response.status_code == 413
    assert error_of(response)["reason"] == "body_too_large"


def test_a_lying_content_length_does_not_let_more_body_through() -> None:
    """A server that passes more body than ``Content-Length`` declares (h11 enforces framing, so this drives the
    guard as the ASGI app it is): the guard counts what arrives, answers 413 and the app sees a disconnect."""
    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            seen.append(message)
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"app answered"})

    guard = EdgeGuard(app, token=DevToken(TOKEN), limits=EdgeLimits(max_body_bytes=1024))
    chunks = [{"type": "http.request", "body": b"x" * 600, "more_body": True} for _ in range(5)]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return chunks.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/size",
        "query_string": b"",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-length", b"10")],
    }
    asyncio.run(guard(scope, receive, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["reason"] == "body_too_large"
    assert b"app answered" not in b"".join(m.get("body", b"") for m in sent)
    assert [m["type"] for m in seen] == ["http.request", "http.disconnect"]


@pytest.mark.parametrize("lengths", [[b"5", b"6"], [b"abc"], [b"-5"], [b"1" * 20]])
def test_a_malformed_content_length_is_refused(lengths: list[bytes]) -> None:
    """h11 refuses these itself; the guard refuses them too for servers that pass them on (driven as ASGI)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise AssertionError("the app must not run")

    guard = EdgeGuard(app, token=DevToken(TOKEN))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"hello", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {TOKEN}".encode())] + [(b"content-length", v) for v in lengths]
    scope = {"type": "http", "method": "POST", "path": "/", "query_string": b"", "headers": headers}
    asyncio.run(guard(scope, receive, send))
    assert sent[0]["status"] == 400
    assert json.loads(sent[1]["body"])["error"]["reason"] == "invalid_content_length"


def test_too_many_or_too_large_headers_get_431(edge: Edge) -> None:
    many = {f"x-h{i}": "v" for i in range(70)}
    response = edge.client.get("/api/hello", headers={**auth(), **many})
    assert response.status_code == 431
    assert error_of(response)["reason"] == "headers_too_large"
    large = edge.client.get("/api/hello", headers={**auth(), "x-big": "v" * (17 * 1024)})
    assert large.status_code == 431
    assert error_of(large)["reason"] == "headers_too_large"
    fits = edge.client.get("/api/hello", headers={**auth(), "x-big": "v" * (15 * 1024)})
    assert fits.status_code == 200


@pytest.mark.parametrize(
    ("content_type", "body", "status", "reason"),
    [
        ("text/plain", b"{}", 415, "unsupported_media_type"),
        ("application/json; charset=latin-1", b"{}", 415, "unsupported_media_type"),
        ("", b"{}", 415, "unsupported_media_type"),
        ("application/json", b"{", 400, "invalid_json"),
        ("application/json", b"", 400, "invalid_json"),
        ("application/json", b'{"a": NaN}', 400, "invalid_json"),
        ("application/json", b'{"a": 1, "a": 2}', 400, "invalid_json"),
        ("application/json", b"\xff\xfe{}", 400, "invalid_json"),
        ("application/json", b"[1, 2]", 400, "invalid_body"),
        ("application/json", b'"text"', 400, "invalid_body"),
    ],
)
def test_bad_json_bodies_are_refused_with_their_reason(
    edge: Edge, content_type: str, body: bytes, status: int, reason: str
) -> None:
    response = edge.client.post("/api/echo", headers={**auth(), "Content-Type": content_type}, content=body)
    assert response.status_code == status
    assert error_of(response)["reason"] == reason


def test_a_json_object_body_is_read(edge: Edge) -> None:
    for content_type in ("application/json", "Application/JSON; charset=UTF-8"):
        response = edge.client.post(
            "/api/echo", headers={**auth(), "Content-Type": content_type}, content=b'{"b": 1, "a": [true]}'
        )
        assert response.json() == {"keys": ["a", "b"]}


# --- errors -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("validation", 400),
        ("schema", 400),
        ("name", 404),
        ("run", 404),
        ("session", 404),
        ("conflict", 409),
        ("rate", 429),
        ("timeout", 504),
        ("down", 503),
        ("tool", 500),
    ],
)
def test_domain_errors_map_to_their_status_and_reason(edge: Edge, kind: str, status: int) -> None:
    err = FAILURES[kind]
    response = edge.client.get(f"/api/fail/{kind}", headers=auth())
    assert response.status_code == status
    if isinstance(err, errors.SessionNotFound):  # its message and details name the requested ids: not echoed
        assert error_of(response) == {"reason": err.reason, "message": "the session does not exist"}
        return
    assert error_of(response) == {"reason": err.reason, "message": err.message, **err.details}


def test_status_for_walks_the_class_tree_and_knows_the_edge_reasons() -> None:
    assert status_for(errors.ContentError("x")) == 400  # via ValidationError
    assert status_for(errors.AdkError("x")) == 500
    assert status_for(errors.RuntimeFailure("x", reason="edge_busy")) == 503
    assert status_for(errors.ValidationError("x", reason="unsupported_media_type")) == 415
    assert status_for(errors.ValidationError("x", reason="body_too_large")) == 413


def test_an_unexpected_exception_is_a_bare_500_and_logged_as_a_crash(
    edge: Edge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="adk_actors.web")
    response = edge.client.get("/api/fail/boom", headers=auth())
    assert response.status_code == 500
    assert error_of(response) == {"reason": "internal", "message": "internal error"}
    assert INTERNAL_TEXT not in response.text and "RuntimeError" not in response.text
    until(lambda: any("edge_unhandled_exception" in r.getMessage() for r in caplog.records))


def test_unknown_routes_and_methods_answer_json(edge: Edge) -> None:
    missing = edge.client.get("/api/nothing/here", headers=auth())
    assert missing.status_code == 404
    assert error_of(missing) == {"reason": "not_found", "message": "no such resource"}
    wrong = edge.client.delete("/api/hello", headers=auth())
    assert wrong.status_code == 405
    assert error_of(wrong)["reason"] == "method_not_allowed"
    assert set(wrong.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}


def test_error_details_cannot_replace_reason_or_message() -> None:
    response = error_response(400, "invalid_value", reason="forged", message_text="kept", key="k")
    assert json.loads(response.body) == {
        "error": {"reason": "invalid_value", "message": "bad request", "message_text": "kept", "key": "k"}
    }


# --- trace context ----------------------------------------------------------------------------------------------


def test_trace_context_is_extracted_into_the_request_state(edge: Edge) -> None:
    assert edge.client.get("/api/trace", headers={**auth(), "traceparent": TRACEPARENT}).json() == {
        "trace_id": TRACE_ID
    }
    assert edge.client.get("/api/trace", headers={**auth(), "traceparent": "00-zz-11-01"}).json() == {"trace_id": None}
    assert edge.client.get("/api/trace", headers=auth()).json() == {"trace_id": None}


# --- offload ------------------------------------------------------------------------------------------------------


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def test_the_event_loop_answers_while_an_offloaded_call_blocks(edge: Edge) -> None:
    with httpx.Client(base_url=edge.url, timeout=10.0, trust_env=False) as other:
        thread, out = _in_thread(lambda: other.get("/api/slow", headers=auth()))
        assert edge.gate.entered.wait(10.0)
        assert edge.client.get("/api/hello", headers=auth()).status_code == 200
        assert not edge.gate.opened.is_set() and thread.is_alive()
        edge.gate.open()
        thread.join(10.0)
    assert out[0].json() == {"result": "released"}


def test_offload_refuses_with_edge_busy_past_max_pending(serve: Callable[..., Edge]) -> None:
    edge = serve(offload=Offload(max_workers=1, max_pending=1))
    with httpx.Client(base_url=edge.url, timeout=10.0, trust_env=False) as other:
        thread, out = _in_thread(lambda: other.get("/api/slow", headers=auth()))
        assert edge.gate.entered.wait(10.0)
        busy = edge.client.get("/api/slow", headers=auth())
        assert busy.status_code == 503
        assert error_of(busy)["reason"] == "edge_busy"
        assert error_of(busy)["max_pending"] == 1
        edge.gate.open()
        thread.join(10.0)
    assert out[0].status_code == 200
    until(lambda: edge.offload.stats()["pending"] == 0)
    assert edge.client.get("/api/slow", headers=auth()).status_code == 200
    assert edge.gate.calls == 2


def test_offload_call_returns_raises_and_carries_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    offload = Offload(max_workers=2, max_pending=4)

    def fail() -> None:
        raise errors.SessionNotFound("gone")

    async def main() -> tuple[Any, ...]:
        var.set("from-the-handler")
        value = await offload.call(lambda a, b=0: a + b, 2, b=3)
        seen = await offload.call(var.get)
        thread = await offload.call(lambda: threading.current_thread().name)
        with pytest.raises(errors.SessionNotFound):
            await offload.call(fail)
        return value, seen, thread

    try:
        value, seen, thread = asyncio.run(main())
    finally:
        offload.close()
    assert (value, seen) == (5, "from-the-handler")
    assert thread.startswith("adk-edge") and thread != threading.current_thread().name
    assert offload.stats() == {"pending": 0, "iterators": 0}


def test_offload_after_close_refuses_with_edge_closed() -> None:
    offload = Offload()
    offload.close()

    async def main() -> None:
        await offload.call(lambda: None)

    with pytest.raises(errors.RuntimeFailure) as info:
        asyncio.run(main())
    assert info.value.reason == "edge_closed" and status_for(info.value) == 503


@pytest.mark.parametrize("kwargs", [{"max_workers": 0}, {"max_pending": True}, {"max_iterators": 10_001}])
def test_offload_bounds_are_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(errors.ConfigError) as info:
        Offload(**kwargs)
    assert info.value.details["key"] == next(iter(kwargs))


# --- serving --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "opt_in", "ok"),
    [
        ("127.0.0.1", False, True),
        ("127.1.2.3", False, True),
        ("::1", False, True),
        ("[::1]", False, True),
        ("::ffff:127.0.0.1", False, True),
        ("localhost", False, True),
        ("LOCALHOST", False, True),
        ("0.0.0.0", False, False),
        ("::", False, False),
        ("192.168.1.10", False, False),
        ("10.0.0.1", False, False),
        ("example.com", False, False),
        ("localhost.evil.example", False, False),
        ("127.0.0.1.nip.io", False, False),
        ("0.0.0.0", True, True),
        ("example.com", True, True),
    ],
)
def test_check_bind_allows_loopback_and_needs_the_opt_in_for_anything_else(host: str, opt_in: bool, ok: bool) -> None:
    if ok:
        check_bind(host, opt_in)
        return
    with pytest.raises(errors.ConfigError) as info:
        check_bind(host, opt_in)
    assert (info.value.reason, info.value.details) == ("non_loopback_bind", {"host": host})


@pytest.mark.parametrize(("host", "opt_in"), [("", True), ("  ", False), (None, True), ("127.0.0.1", 1)])
def test_check_bind_refuses_malformed_arguments(host: Any, opt_in: Any) -> None:
    with pytest.raises(errors.ConfigError) as info:
        check_bind(host, opt_in)
    assert info.value.reason == "invalid_value"


def test_start_in_thread_refuses_a_public_bind_without_opt_in() -> None:
    with pytest.raises(errors.ConfigError) as info:
        start_in_thread(error_response(200, "x"), "0.0.0.0", 0)
    assert info.value.reason == "non_loopback_bind"


def test_start_in_thread_serves_on_a_free_port_and_stop_closes_it() -> None:
    server = start_in_thread(error_response(418, "teapot"), "127.0.0.1", 0)
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
        response = httpx.get(server.url + "/", trust_env=False, timeout=10.0)
        assert (response.status_code, response.json()["error"]["reason"]) == (418, "teapot")
    finally:
        assert server.stop()
    assert not server.running
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=2):
        pass


def test_uvicorn_runs_with_the_edge_bounds() -> None:
    config = uvicorn_config(error_response(200, "x"), limits=EdgeLimits(max_header_bytes=4096), max_connections=9)
    assert config.h11_max_incomplete_event_size == 4096 + 8192
    assert (config.limit_concurrency, config.server_header, config.proxy_headers) == (9, False, False)
    assert (config.access_log, config.log_config, config.http) == (False, None, "h11")


# --- secrets and fuzzing ----------------------------------------------------------------------------------------


def test_the_token_never_appears_in_a_response_or_a_log(edge: Edge, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + secrets.token_hex(16)
    port = edge.server.port
    responses = [
        edge.client.get("/api/hello", headers=auth()),
        edge.client.get("/api/hello", headers=auth(wrong)),
        edge.client.get(f"/api/hello?token={TOKEN}", headers=auth()),
        edge.client.get(f"/api/hello?access_token={wrong}"),
        edge.client.get("/api/hello", headers={**auth(), "Origin": "http://evil.example"}),
        edge.client.get("/api/fail/boom", headers=auth()),
        edge.client.get("/api/fail/validation", headers=auth()),
        edge.client.get("/api/nothing", headers=auth()),
        edge.client.get("/api/hello", headers={**auth(), **{f"x-{i}": TOKEN for i in range(70)}}),
        edge.client.post("/api/echo", headers={**auth(), "Content-Type": "application/json"}, content=TOKEN.encode()),
        edge.client.post(
            "/api/echo",
            headers={**auth(), "Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"},
            content=json.dumps({"token": TOKEN}).encode(),
        ),
    ]
    until(lambda: any("edge_unhandled_exception" in r.getMessage() for r in caplog.records))
    for response in responses:
        text = response.text + json.dumps(dict(response.headers))
        assert TOKEN not in text and wrong not in text
    # The client's own httpx/httpcore records log the URLs the test sent; everything else is the server side.
    server_side = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert server_side, "nothing was captured from the server side"
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in server_side)
    assert TOKEN not in logged and wrong not in logged


_SEGMENTS = ["api", "public", "hello", "ping", "echo", "trace", "fail", "cors", "dev", "v1", "runs", "..", ".", ""]
_PATH_TEXT = st.text(alphabet="abcXYZ019-._~!$&'()*+,;=:@%", max_size=12)


@st.composite
def _paths(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(_SEGMENTS), _PATH_TEXT, st.binary(max_size=6).map(lambda b: quote(b, safe=""))),
            max_size=5,
        )
    )
    return "/" + "/".join(parts)


def _assert_json_refusal_or_success(response: httpx.Response) -> None:
    assert response.status_code != 500 and response.status_code < 600
    if response.status_code >= 400 and response.request.method != "HEAD":
        assert error_of(response)["reason"] in KNOWN_REASONS
    assert not [name for name in response.headers if name.lower().startswith("access-control-")]
    assert TOKEN not in response.text


_FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(
    path=_paths(),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]),
    authorized=st.booleans(),
    query=st.dictionaries(st.sampled_from(["page", "limit", "q", "x"]), st.text(max_size=8), max_size=3),
)
def test_fuzzed_paths_never_get_a_500(
    shared_edge: Edge, path: str, method: str, authorized: bool, query: dict[str, str]
) -> None:
    assume(not path.rstrip("/").endswith("/fail/boom"))
    headers = auth() if authorized else {}
    url = httpx.URL(shared_edge.url).copy_with(raw_path=path.encode("ascii"))  # no "//x" read as a host
    response = shared_edge.client.request(method, url, headers=headers, params=query)
    _assert_json_refusal_or_success(response)


_HEADER_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789-", min_size=1, max_size=20)
_HEADER_VALUE = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=300)
_FRAMING = {"content-length", "transfer-encoding", "host", "connection", "expect", "upgrade", "te", "trailer"}


@_FUZZ
@given(headers=st.lists(st.tuples(_HEADER_NAME, _HEADER_VALUE), max_size=80), authorized=st.booleans())
def test_fuzzed_headers_never_get_a_500(shared_edge: Edge, headers: list[tuple[str, str]], authorized: bool) -> None:
    assume(all(name.lower() not in _FRAMING for name, _ in headers))
    sent = (list(auth().items()) if authorized else []) + headers
    response = shared_edge.client.get("/api/hello", headers=sent)
    _assert_json_refusal_or_success(response)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@_FUZZ
@given(
    body=st.one_of(_JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200)),
    content_type=st.sampled_from(
        ["application/json", "application/json; charset=utf-8", "text/plain", "application/JSON", ""]
    ),
)
def test_fuzzed_json_bodies_never_get_a_500(shared_edge: Edge, body: bytes, content_type: str) -> None:
    response = shared_edge.client.post("/api/echo", headers={**auth(), "Content-Type": content_type}, content=body)
    _assert_json_refusal_or_success(response)
    if response.status_code == 200:
        assert isinstance(json.loads(body), dict)
