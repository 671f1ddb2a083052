"""The legacy simple HTTP endpoint ``POST /a2a/prompt`` and its client, over real HTTP on 127.0.0.1 against agents
on the Gemini emulator: a round trip, unknown and not-allowed agents, bad bodies (hypothesis: always 4xx with a
reason, never 500), too large bodies, the turn deadline, a failing turn that leaks nothing of the model's error, the
loopback-only bind check, peer and Host checks, and a client that talks only to loopback, follows no redirect and
bounds the answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from actor_tests.agents.conftest import Spawner, config_for, unique
from adk_actors.a2a.legacy import prompt
from adk_actors.emulator import Emulator
from adk_actors.errors import A2aError, ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web import start_in_thread
from adk_actors.web.legacy_a2a import LEGACY_PATH, check_legacy_bind, legacy_a2a_app, start_legacy_a2a

pytestmark = pytest.mark.timeout(90)

ECHO = {"rules": [{"when": {}, "respond": {"text": "echo: {user_text}"}}]}


@pytest.fixture(scope="module")
def url(system: ActorSystemHandle) -> Iterator[str]:
    """The endpoint of one legacy app with default bounds, served on 127.0.0.1 for the module."""
    with start_legacy_a2a(legacy_a2a_app(system)) as server:
        yield server.url + LEGACY_PATH


def post(target: str, body: bytes, **headers: str) -> requests.Response:
    return requests.post(target, data=body, headers={"content-type": "application/json", **headers}, timeout=30)


def reason_of(response: requests.Response | httpx.Response) -> str:
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    return str(error["reason"])


# ---- the round trip --------------------------------------------------------------------------------------------


def test_our_client_gets_the_agents_answer_over_http(url: str, emu: Emulator, spawn: Spawner) -> None:
    emu.set_script(ECHO)
    name = unique("Legacy")
    spawn(name, config_for(emu))
    assert prompt(url, name, "Hello from HTTP", timeout_s=30) == "echo: Hello from HTTP"
    raw = post(url, json.dumps({"agent": name, "prompt": "again"}).encode())
    assert raw.status_code == 200
    assert raw.json() == {"response": "echo: again"}


def test_localhost_is_a_loopback_url_for_the_client(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    emu.set_script(ECHO)
    name = unique("LegacyLocal")
    spawn(name, config_for(emu))
    with start_legacy_a2a(legacy_a2a_app(system), "localhost") as server:
        assert prompt(f"http://localhost:{server.port}{LEGACY_PATH}", name, "hi", timeout_s=30) == "echo: hi"


def test_an_unknown_agent_is_404_agent_not_found(url: str) -> None:
    with pytest.raises(A2aError) as caught:
        prompt(url, unique("Nobody"), "hello", timeout_s=30)
    assert caught.value.reason == "agent_not_found"
    assert caught.value.details["status"] == 404


def test_an_agent_outside_the_allow_list_is_404_and_never_prompted(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(ECHO)
    served, hidden = unique("Served"), unique("Hidden")
    spawn(served, config_for(emu))
    spawn(hidden, config_for(emu))
    with start_legacy_a2a(legacy_a2a_app(system, agents=[served])) as server:
        target = server.url + LEGACY_PATH
        with pytest.raises(A2aError) as caught:
            prompt(target, hidden, "hello", timeout_s=30)
        assert caught.value.reason == "agent_not_found"
        assert emu.requests == []
        assert prompt(target, served, "hello", timeout_s=30) == "echo: hello"


def test_a_turn_past_the_deadline_is_504(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "late", "delay_ms": 5000}}]})
    name = unique("Slow")
    spawn(name, config_for(emu))
    with start_legacy_a2a(legacy_a2a_app(system, timeout_s=0.5)) as server:
        with pytest.raises(A2aError) as caught:
            prompt(server.url + LEGACY_PATH, name, "hello", timeout_s=30)
    assert (caught.value.reason, caught.value.details["status"]) == ("timeout", 504)


def test_a_failing_turn_is_502_with_its_reason_and_none_of_the_models_text(
    url: str, emu: Emulator, spawn: Spawner
) -> None:
    secret = "model-said-SECRET-1234"
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 400, "message": secret}}}]})
    name = unique("Broken")
    spawn(name, config_for(emu))
    raw = post(url, json.dumps({"agent": name, "prompt": "hello"}).encode())
    assert raw.status_code == 502
    assert reason_of(raw) and secret not in raw.text
    assert set(raw.json()["error"]) == {"reason", "message"}


# ---- bad requests ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"not json", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_body"),
        (b'{"agent": "A", "agent": "B", "prompt": "x"}', 400, "invalid_json"),
        (b'{"agent": "A", "prompt": NaN}', 400, "invalid_json"),
        (b'{"agent": "A"}', 400, "missing_key"),
        (b'{"agent": "A", "prompt": "x", "user": "u"}', 400, "unknown_key"),
        (b'{"agent": 7, "prompt": "x"}', 400, "invalid_agent_name"),
        (b'{"agent": "bad name", "prompt": "x"}', 400, "invalid_agent_name"),
        (b'{"agent": "A", "prompt": ["x"]}', 400, "invalid_value"),
        (b'{"agent": "A", "prompt": ""}', 400, "invalid_value"),
        (b'{"agent": "A", "prompt": "\\ud800"}', 400, "invalid_utf8"),
        (b'{"agent": "A", "prompt": "a\\u0000b"}', 400, "invalid_value"),
        (b"\xff\xfe", 400, "invalid_json"),
    ],
)
def test_a_bad_body_is_400_with_its_reason(url: str, body: bytes, status: int, reason: str) -> None:
    response = post(url, body)
    assert (response.status_code, reason_of(response)) == (status, reason)


def test_a_body_that_is_not_json_by_its_type_is_415(url: str) -> None:
    response = post(url, b'{"agent": "A", "prompt": "x"}', **{"content-type": "text/plain"})
    assert (response.status_code, reason_of(response)) == (415, "unsupported_media_type")


def test_wrong_methods_and_paths_answer_in_the_edge_shape(url: str) -> None:
    assert reason_of(requests.get(url, timeout=30)) == "method_not_allowed"
    assert reason_of(requests.post(url.replace(LEGACY_PATH, "/a2a/other"), timeout=30)) == "not_found"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "agent": st.one_of(json_values, st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,70}", fullmatch=True)),
            "prompt": st.one_of(json_values, st.text(max_size=40)),
            "extra": json_values,
        },
    ).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_any_body_is_answered_4xx_with_a_reason_never_500(url: str, body: bytes) -> None:
    response = post(url, body)
    assert 400 <= response.status_code < 500, response.text
    assert reason_of(response)


def test_a_body_over_the_bound_is_413_declared_or_streamed(system: ActorSystemHandle) -> None:
    with start_legacy_a2a(legacy_a2a_app(system, max_body_bytes=1024)) as server:
        target = server.url + LEGACY_PATH
        with pytest.raises(A2aError) as caught:
            prompt(target, "Anyone", "x" * 4096, timeout_s=30)
        assert (caught.value.reason, caught.value.details["status"]) == ("body_too_large", 413)
        chunks = iter([b'{"agent": "Anyone", "prompt": "', b"x" * 4096, b'"}'])
        streamed = requests.post(target, data=chunks, headers={"content-type": "application/json"}, timeout=30)
        assert (streamed.status_code, reason_of(streamed)) == (413, "body_too_large")


# ---- loopback only ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "", "10.0.0.1", "192.168.1.1", "::ffff:127.0.0.1", "example.com", "127.0.0.1.nip.io"]
)
def test_the_legacy_listener_refuses_every_non_loopback_bind(host: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_legacy_bind(host)
    assert caught.value.reason == "legacy_a2a_server_must_bind_loopback"
    with pytest.raises(ConfigError) as started:
        start_legacy_a2a(Starlette(), host)
    assert started.value.reason == "legacy_a2a_server_must_bind_loopback"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_the_legacy_listener_binds_loopback(host: str) -> None:
    check_legacy_bind(host)


def test_a_peer_off_loopback_is_refused_403_before_anything_else(system: ActorSystemHandle) -> None:
    app = legacy_a2a_app(system)

    async def send_from(peer: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(peer, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post(LEGACY_PATH, content=b"x" * 10, headers={"content-type": "application/json"})

    for peer in ("10.0.0.5", "192.168.1.1", "::ffff:10.0.0.5"):
        response = asyncio.run(send_from(peer))
        assert (response.status_code, reason_of(response)) == (403, "loopback_only")
    assert reason_of(asyncio.run(send_from("::ffff:127.0.0.1"))) == "invalid_json"


def test_a_foreign_host_or_origin_is_refused(url: str) -> None:
    body = b'{"agent": "A", "prompt": "x"}'
    rebound = post(url, body, host="attacker.example")
    assert (rebound.status_code, reason_of(rebound)) == (421, "misdirected_host")
    cross = post(url, body, origin="http://attacker.example")
    assert (cross.status_code, reason_of(cross)) == (403, "cross_origin")


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("http://10.0.0.1:8080/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("http://192.168.1.1/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("http://0.0.0.0:8080/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("http://example.com/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("http://[::ffff:10.0.0.1]/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("https://127.0.0.1/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("ftp://127.0.0.1/a2a/prompt", "legacy_a2a_requires_loopback"),
        ("http://user:pw@127.0.0.1/a2a/prompt", "invalid_url"),
        ("http://127.0.0.1:99999/a2a/prompt", "invalid_url"),
        ("/a2a/prompt", "invalid_url"),
    ],
)
def test_the_client_talks_only_to_loopback(target: str, reason: str) -> None:
    with pytest.raises(A2aError) as caught:
        prompt(target, "Agent", "hello", timeout_s=5)
    assert caught.value.reason == reason


# ---- the client against odd servers ----------------------------------------------------------------------------


async def redirect(request: Request) -> Response:
    return RedirectResponse("http://127.0.0.1:9/elsewhere", status_code=307)


async def huge(request: Request) -> Response:
    return JSONResponse({"response": "x" * 100_000})


async def odd(request: Request) -> Response:
    return JSONResponse({"answer": "not the legacy shape"})


async def unshaped_error(request: Request) -> Response:
    return Response("Internal Server Error <b>boom</b>", status_code=500, media_type="text/html")


@pytest.fixture(scope="module")
def odd_server() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/redirect", redirect, methods=["POST"]),
            Route("/huge", huge, methods=["POST"]),
            Route("/odd", odd, methods=["POST"]),
            Route("/error", unshaped_error, methods=["POST"]),
        ]
    )
    with start_in_thread(app) as server:
        yield server.url


@pytest.mark.parametrize(
    ("path", "reason", "extra"),
    [
        ("/redirect", "legacy_a2a_http_error", {}),
        ("/huge", "a2a_response_too_large", {"max_response_bytes": 10_000}),
        ("/odd", "a2a_invalid_response", {}),
        ("/error", "legacy_a2a_http_error", {}),
    ],
)
def test_the_client_follows_no_redirect_and_bounds_and_checks_the_answer(
    odd_server: str, path: str, reason: str, extra: dict[str, Any]
) -> None:
    with pytest.raises(A2aError) as caught:
        prompt(odd_server + path, "Agent", "hello", timeout_s=10, **extra)
    assert caught.value.reason == reason
    assert "boom" not in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [({"timeout_s": 0}, "invalid_value"), ({"max_response_bytes": 0}, "invalid_value")],
)
def test_the_client_checks_its_bounds(url: str, kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(A2aError) as caught:
        prompt(url, "Agent", "hello", **kwargs)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"timeout_s": 0}, "timeout_s"), ({"max_body_bytes": 0}, "max_body_bytes"), ({"agents": ["bad name"]}, "agents")],
)
def test_the_app_checks_its_configuration(system: ActorSystemHandle, kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        legacy_a2a_app(system, **kwargs)
    assert (caught.value.reason, caught.value.details["key"]) == ("invalid_value", key)
