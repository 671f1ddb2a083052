"""Edge fixtures: a tiny Starlette app behind the real :class:`EdgeGuard`, served by real uvicorn on 127.0.0.1 port 0
(``start_in_thread``), and an httpx client that never uses a proxy. Every server, client and offload pool a test
starts is stopped at its end, and the test fails if the server thread outlives it."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

# The developer API's fixtures, for every test here (the console's browser tests reuse ``dev_server``).
from actor_tests.web.dev_support import dev_agent, dev_emu, dev_server  # noqa: F401
from adk_actors import errors
from adk_actors.web import (
    DevToken,
    EdgeGuard,
    EdgeLimits,
    Offload,
    ServerThread,
    SseEvent,
    SseStream,
    edge_app,
    parse_last_event_id,
    read_json,
    start_in_thread,
)

TOKEN = "edge-test-" + secrets.token_hex(16)
"""This session's developer token (random, so a leak check cannot pass by accident)."""

FAILURES: dict[str, errors.AdkError] = {
    "validation": errors.ValidationError("bad value", reason="invalid_value", details={"key": "x"}),
    "schema": errors.SchemaError("bad args", reason="invalid_arguments"),
    "name": errors.NameNotFound("no such agent", reason="agent_not_found", details={"name": "a"}),
    "run": errors.RunNotFound("no such run", details={"run_id": "r1"}),
    "session": errors.SessionNotFound("no such session"),
    "conflict": errors.ConcurrencyConflict("stale", reason="stale_session"),
    "rate": errors.RateLimited("slow down", reason="rate_limited"),
    "timeout": errors.AskTimeout("too slow", reason="ask_timeout"),
    "down": errors.SystemNotRunning("no system", reason="system_not_running"),
    "tool": errors.ToolError("tool broke", reason="tool_failed"),
}
"""What ``GET /api/fail/{kind}`` raises."""

INTERNAL_TEXT = "internal detail that must stay inside"


def auth(token: str = TOKEN) -> dict[str, str]:
    """The ``Authorization`` header for ``token``."""
    return {"Authorization": f"Bearer {token}"}


class Gate:
    """A blocking call the test controls: :meth:`wait` blocks its thread until :meth:`open` (bounded)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.calls = 0

    def wait(self) -> str:
        self.calls += 1
        self.entered.set()
        assert self.opened.wait(10.0), "the gate was never opened"
        return "released"

    def open(self) -> None:
        self.opened.set()


@dataclass
class Sources:
    """Book-keeping of the SSE sources the app creates (which ones were closed)."""

    started: int = 0
    closed: int = 0
    blocking_closed: threading.Event = field(default_factory=threading.Event)
    more: threading.Event = field(default_factory=threading.Event)
    """The blocking feed gives three items, then blocks in ``next()`` until this is set."""
    feed: list[int] = field(default_factory=list)


def _sources_routes(sources: Sources, offload: Offload) -> list[Route]:
    async def events(
        count: int, size: int, idle: bool, fail: str | None, after: int, last: bool = False
    ) -> AsyncIterator[SseEvent]:
        sources.started += 1
        try:
            for seq in range(after + 1, after + count + 1):
                yield SseEvent(seq, "item", {"seq": seq, "pad": "x" * size}, last=last and seq == after + count)
            if fail == "adk":
                raise errors.RunError("the run failed", reason="run_failed")
            if fail == "boom":
                raise RuntimeError(INTERNAL_TEXT)
            if idle:
                await asyncio.Event().wait()
        finally:
            sources.closed += 1

    async def stream(request: Request) -> Response:
        q = request.query_params
        after = parse_last_event_id(request.headers.get("last-event-id")) or 0
        return SseStream(
            events(int(q.get("count", "0")), int(q.get("size", "0")), "idle" in q, q.get("fail"), after, "last" in q)
        )

    def blocking_feed() -> Iterator[int]:
        try:
            n = 0
            while True:
                n += 1
                sources.feed.append(n)
                if n > 3:
                    assert sources.more.wait(10.0), "the test never let the feed go on"
                yield n
        finally:
            sources.blocking_closed.set()

    async def blocking_events() -> AsyncIterator[SseEvent]:
        async with offload.iterate(blocking_feed) as items:
            async for n in items:
                yield SseEvent(n, "tick", {"n": n})

    async def blocking_stream(request: Request) -> Response:
        return SseStream(blocking_events())

    return [Route("/api/stream", stream), Route("/api/blocking-stream", blocking_stream)]


@dataclass
class Edge:
    """One served edge app and a client for it."""

    guard: EdgeGuard
    server: ServerThread
    client: httpx.Client
    offload: Offload
    gate: Gate
    sources: Sources
    calls: dict[str, int]

    @property
    def url(self) -> str:
        return self.server.url


def build_app(
    *, limits: EdgeLimits | None, offload: Offload, gate: Gate, sources: Sources, calls: dict[str, int]
) -> EdgeGuard:
    """The test app: a public page, JSON routes, failures, a slow offloaded call and SSE streams."""

    async def hello(request: Request) -> Response:
        return JSONResponse({"hello": "edge"})

    async def ping(request: Request) -> Response:
        return PlainTextResponse("pong")

    async def echo(request: Request) -> Response:
        calls["echo"] = calls.get("echo", 0) + 1
        body = await read_json(request)
        return JSONResponse({"keys": sorted(body)})

    async def size(request: Request) -> Response:
        calls["size"] = calls.get("size", 0) + 1
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
        return JSONResponse({"bytes": total})

    async def trace(request: Request) -> Response:
        ctx = request.state.trace
        return JSONResponse({"trace_id": None if ctx is None else ctx.trace_id})

    async def fail(request: Request) -> Response:
        kind = request.path_params["kind"]
        if kind == "boom":
            raise RuntimeError(INTERNAL_TEXT)
        if kind not in FAILURES:
            raise errors.NameNotFound("no such failure kind", reason="not_found")
        raise FAILURES[kind]

    async def cors(request: Request) -> Response:
        return JSONResponse(
            {"ok": True}, headers={"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "*"}
        )

    async def slow(request: Request) -> Response:
        return JSONResponse({"result": await offload.call(gate.wait)})

    routes = [
        Route("/public/ping", ping),
        Route("/api/hello", hello),
        Route("/api/echo", echo, methods=["POST"]),
        Route("/api/size", size, methods=["POST"]),
        Route("/api/trace", trace),
        Route("/api/fail/{kind}", fail),
        Route("/api/cors", cors),
        Route("/api/slow", slow),
        *_sources_routes(sources, offload),
    ]
    return edge_app(routes, token=DevToken(TOKEN), limits=limits, public=lambda path: path.startswith("/public/"))


def _serve(limits: EdgeLimits | None = None, offload: Offload | None = None) -> Edge:
    offload = offload or Offload(max_workers=4, max_pending=64)
    gate, sources, calls = Gate(), Sources(), {}
    guard = build_app(limits=limits, offload=offload, gate=gate, sources=sources, calls=calls)
    server = start_in_thread(guard, "127.0.0.1", 0, limits=limits)
    client = httpx.Client(base_url=server.url, timeout=10.0, trust_env=False)
    return Edge(guard, server, client, offload, gate, sources, calls)


def _close(edge: Edge) -> None:
    edge.gate.open()
    edge.sources.more.set()
    edge.client.close()
    assert edge.server.stop(), "the edge server thread outlived its test"
    edge.offload.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Edge]]:
    """``serve(limits=None, offload=None)``: a fresh served edge app, stopped after the test."""
    started: list[Edge] = []

    def make(limits: EdgeLimits | None = None, offload: Offload | None = None) -> Edge:
        edge = _serve(limits, offload)
        started.append(edge)
        return edge

    yield make
    for edge in started:
        _close(edge)


@pytest.fixture
def edge(serve: Callable[..., Edge]) -> Edge:
    """A served edge app with the default limits."""
    return serve()


def _edge_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("adk-edge")}


@pytest.fixture(autouse=True)
def no_edge_thread_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every server, pool and iterator thread a test starts has ended when it is over (the module's shared edge
    keeps its own until the module ends)."""
    before = _edge_threads()
    yield
    if "shared_edge" in request.fixturenames:
        return
    deadline = time.monotonic() + 10.0
    while _edge_threads() - before and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    assert not _edge_threads() - before, f"threads outlived the test: {_edge_threads() - before}"


@pytest.fixture(scope="module")
def shared_edge() -> Iterator[Edge]:
    """One served edge app for a module's property tests (hypothesis runs many examples against it)."""
    edge = _serve()
    yield edge
    _close(edge)


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of a JSON error response (asserting the shape)."""
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["reason"], str) and isinstance(body["error"]["message"], str)
    return dict(body["error"])
