"""OpenAPI transport and toolset fixtures: the test API (``petstore_api.py``) served per test on 127.0.0.1 (also
over TLS), an OpenAPI document describing its test endpoints, a tool context, and an encrypted SQLite credential
store in the test's temp dir. The agent and Runner fixtures (``emu``, ``spawn``, ``svc``) are the agent tests'."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.agents.conftest import config_for, emu, spawn, unique
from actor_tests.openapi.petstore_api import ApiServer, ApiState, make_app, self_signed
from actor_tests.runner.conftest import function_responses, svc, until
from adk_actors.auth.credentials import SqlCredentialStore
from adk_actors.openapi import HttpTransport
from adk_actors.tools.context import ToolContext

__all__ = [
    "APP",
    "LIBRARY_TEXT",
    "PETSTORE_TEXT",
    "SPECS",
    "USER",
    "config_for",
    "context",
    "emu",
    "function_responses",
    "probe_document",
    "spawn",
    "svc",
    "unique",
    "until",
]

SPECS = Path(__file__).parent / "specs"
PETSTORE_TEXT = (SPECS / "petstore3.json").read_text(encoding="utf-8")
LIBRARY_TEXT = (SPECS / "library31.json").read_text(encoding="utf-8")
APP = "petapp"
USER = "u1"


def context(app: str = APP, user: str = USER, **extra: Any) -> ToolContext:
    """A tool context as a Runner gives one (app and user set)."""
    return ToolContext(invocation_id="inv-1", agent_name="tester", app_name=app, user_id=user, **extra)


@pytest.fixture
def api() -> Iterator[ApiServer]:
    """The test API over plain HTTP on a free loopback port, stopped after the test."""
    state = ApiState()
    server = ApiServer(make_app(state), state)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[ApiServer]:
    """The test API over HTTPS with a self-signed certificate (that no client trusts)."""
    state = ApiState()
    server = ApiServer(make_app(state), state, tls=self_signed(tmp_path))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def transports() -> Iterator[list[HttpTransport]]:
    """Transports a test made; their HTTP sessions are closed after it."""
    made: list[HttpTransport] = []
    yield made
    for transport in made:
        transport.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlCredentialStore]:
    """An encrypted SQLite credential store (keys from the session's ADK_CREDENTIAL_KEYS), closed after the test."""
    made = SqlCredentialStore(f"sqlite:///{tmp_path}/credentials.db")
    try:
        yield made
    finally:
        made.close()


def _param(name: str, where: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema, **extra}


STRING = {"type": "string"}
STRINGS = {"type": "array", "items": {"type": "string"}}
OBJECT = {"type": "object", "additionalProperties": {"type": "string"}}


def probe_document(origin: str) -> dict[str, Any]:
    """An OpenAPI 3.0 document of the test endpoints (``/test/...``) served at ``origin``."""

    def get(op_id: str, *params: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "get": {
                "operationId": op_id,
                "parameters": list(params),
                "responses": {"200": {"description": "ok"}},
                **extra,
            }
        }

    required = {"required": True}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Probe", "version": "1"},
        "servers": [{"url": origin}],
        "paths": {
            "/test/echo/p/{value}": get("echoPath", _param("value", "path", STRING, **required)),
            "/test/echo/n/{value}": get("echoNumber", _param("value", "path", {"type": "integer"}, **required)),
            "/test/echo/label/{value}": get("echoLabel", _param("value", "path", STRINGS, style="label", **required)),
            "/test/echo/matrix/{value}": get(
                "echoMatrix", _param("value", "path", OBJECT, style="matrix", explode=True, **required)
            ),
            "/test/echo/simple/{value}": get(
                "echoSimpleObject", _param("value", "path", OBJECT, style="simple", explode=False, **required)
            ),
            "/test/echo/q": get(
                "echoQuery",
                _param("plain", "query", STRING),
                _param("list", "query", STRINGS),
                _param("csv", "query", STRINGS, explode=False),
                _param("spaced", "query", STRINGS, style="spaceDelimited", explode=False),
                _param("piped", "query", STRINGS, style="pipeDelimited", explode=False),
                _param("obj", "query", OBJECT),
                _param("flat", "query", OBJECT, explode=False),
                _param("deep", "query", OBJECT, style="deepObject", explode=True),
                _param("reserved", "query", STRING, allowReserved=True),
                _param("flag", "query", {"type": "boolean"}),
            ),
            "/test/echo/h": get("echoHeader", _param("X-Note", "header", STRING), _param("X-List", "header", STRINGS)),
            "/test/echo/c": get(
                "echoCookie", _param("session", "cookie", STRING), _param("prefs", "cookie", STRINGS, explode=False)
            ),
            "/test/echo/b": {
                "post": {
                    "operationId": "echoBody",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/test/echo/key": get(
                "echoKeyed",
                _param("X-Api-Key", "header", STRING),
                security=[{"bearer": []}, {"headerKey": [], "queryKey": []}, {"cookieKey": []}],
            ),
            "/test/echo/open": get("echoOpen", security=[{"headerKey": []}, {}]),
            "/test/echo/oidc": get("echoOidc", security=[{"oidc": []}]),
            "/test/echo/basic": get("echoBasic", security=[{"basic": []}]),
            "/test/redirect": get("redirect"),
            "/test/huge": get("huge", _param("bytes", "query", {"type": "integer"})),
            "/test/slow": get("slow"),
            "/test/trickle": get("trickle"),
            "/test/text": get("text"),
            "/test/binary": get("binary"),
            "/test/badjson": get("badJson"),
            "/test/teapot": get("teapot"),
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
                "headerKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "queryKey": {"type": "apiKey", "in": "query", "name": "key"},
                "cookieKey": {"type": "apiKey", "in": "cookie", "name": "ck"},
                "oidc": {
                    "type": "openIdConnect",
                    "openIdConnectUrl": "https://id.example/.well-known/openid-configuration",
                },
            }
        },
    }


def echoed(result: dict[str, Any]) -> dict[str, Any]:
    """The echo endpoint's report of what it received (headers as a lower-case dict)."""
    assert result["status"] == 200, result
    body: dict[str, Any] = result["body"]
    return {**body, "headers": {k.lower(): v for k, v in body["headers"]}}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
