"""``/dev/v1``: the developer API, and the browser console at ``/dev``.

:func:`dev_app` builds the surface for one node as a plain ASGI app (Starlette behind :class:`EdgeGuard`): mount it
in your own service or let ``adk serve`` run it. Every route is a :class:`~adk_actors.devapi.DevOps` call made on
the :class:`Offload` pool, so no facade ask blocks the event loop; errors are the edge's JSON shape with the
operation's reason (409 for a request the resource's state refuses: ``already_exists``, ``already_resumed``,
``not_paused``, ``not_resumable``). docs/DEV_CONSOLE.md documents the routes.

| route | operation |
|---|---|
| ``GET /dev/v1/agents``, ``GET /dev/v1/agents/{name}`` | discovery |
| ``POST /dev/v1/runs`` | start a stable run (``{"agent", "input", "user_id"?, "session_id"?, "app_name"?}``);  |
| | with ``Accept: text/event-stream``, answered with its event stream (``event: run`` first) |
| ``GET /dev/v1/runs/{id}``, ``POST .../cancel``, ``POST .../resume`` | status, cancel, resume (``{"tool_response"}``) |
| ``GET /dev/v1/runs/{id}/events`` | SSE: replay and live events, ``Last-Event-ID`` to reconnect |
| ``GET/POST /dev/v1/sessions``, ``GET/DELETE /dev/v1/sessions/{app}/{user}/{id}``, ``PATCH .../state`` | sessions |
| ``GET /dev/v1/mcp/connections``, ``GET /dev/v1/mcp/connections/{id}`` | MCP client connections (read-only) |
| ``GET /dev/v1/a2a``, ``GET /dev/v1/a2a/tasks`` | the A2A server of ``adk serve --a2a``: card, counts, tasks |
| ``GET /dev/v1/triggers``, ``GET /dev/v1/triggers/{name}`` | registered triggers: queue depth, counters, recent |
| ``GET /dev/v1/triggers/{name}/events/{event_id}`` | one trigger event's status (docs/TRIGGERS.md) |
| ``GET /dev/v1/diagnostics``, ``GET /dev/v1/observability`` | node status (and the resource configuration), metrics |
| ``GET /dev/v1/context/{app}/{user}/{session}`` | explain: bounded history counts and fingerprint, no events/state |
| ``GET .../lifecycle?model=M`` | latest compaction checkpoint (whitelisted) and the cache scope's counts |
| ``POST .../cache/invalidate`` | ``{"model", "confirmation"}``: invalidate the cache scope across sessions |
| ``GET /dev/v1/artifacts/{app}/{user}/{session}`` | a page of names (``limit`` 1..100, exclusive ``cursor``) |
| ``GET .../versions?name=N`` | a page of one artifact's versions, metadata only (``limit``, ``cursor``) |
| ``POST .../delete`` | ``{"name", "selector", "confirmation"}``: delete ``latest``, ``all`` or one version |
| ``GET /dev/v1/memory/{app}/{user}`` | the scoped adapter's capabilities, limits and entry count |
| ``POST .../search`` | ``{"query", "limit"?, "filter"?}``: bounded hits, content cut and scrubbed |
| ``POST .../erase`` | ``{"target": "entry"|"session"|"user", "identifier", "confirmation"}`` |
| ``POST /dev/v1/evaluation/render`` | a saved eval result or comparison: ``{"kind", "summary", "markdown"}``, or the |
| | self-contained HTML report with ``?format=html`` |
| ``POST /dev/v1/evaluation/compare`` | ``{"baseline", "current", "options"?}``: the comparison document |
| ``GET /dev/v1/live/sessions``, ``GET /dev/v1/live/sessions/{id}`` | Live sessions of the developer principal |
| ``POST /dev/v1/live/sessions/{id}/text`` | ``{"text"}``: one text input, ``{"input_seq": n}`` |
| ``GET /dev/v1/live/sessions/{id}/events`` | SSE of future events only (no ``Last-Event-ID``: Live is not replayed) |
| ``WS /dev/v1/live/sessions/{id}/voice`` | the voice bridge (:mod:`adk_actors.web.voice_page`; page ``/dev/voice``) |

Memory, artifact and context-cache routes use the services of the ``resources`` argument of :func:`dev_app` (a
:data:`~adk_actors.devapi.resources.ResourceProvider` called with each request's exact scope), never a lookup by
path text; destructive ones need a ``confirmation`` equal to the expected object (400 ``confirmation_required`` /
``confirmation_mismatch``); an adapter answer for another scope is 503 ``<kind>_unavailable``; a scope the provider
denies is 403 ``resource_forbidden``.

Live routes act as the configured developer Live principal (:class:`~adk_actors.devapi.live.LiveOps`; the
``live_principal`` argument of :func:`dev_app`): unset, they answer 503 ``live_unavailable``; a session of another
principal is 404 ``live_session_not_found`` like a missing one; ``live_not_active`` is 409, ``ingress_full`` and
``subscriber_limit`` are 429. The events stream starts with ``event: subscribed`` (the subscription is in place),
then one ``event: live`` per session event (``{"kind", "seq", "payload"}``; audio as ``{"kind": "audio", "seq",
"bytes"}``), without ``id:`` lines: Live is not replayed. Each event is acknowledged to the session after it was
written; the stream unsubscribes when it ends (terminal event, bound, client gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from adk_actors.devapi import DevOps, item_json
from adk_actors.devapi.evaluation import compare_results, render_document
from adk_actors.devapi.live import LiveOps
from adk_actors.devapi.resources import DevResources, ResourceOps, ResourceProvider
from adk_actors.devapi.triggers import TriggerOps
from adk_actors.errors import AdkError, NameNotFound, RunError, SessionError, ValidationError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.secrets import Secret
from adk_actors.sessions.base import BaseSessionService
from adk_actors.web.edge import DevToken, EdgeGuard, EdgeLimits, edge_app, error_response, read_json, status_for
from adk_actors.web.offload import BlockingIterator, Offload
from adk_actors.web.sse import SseEvent, SseStream, parse_last_event_id
from adk_actors.web.voice_page import VOICE_PAGE, VOICE_PATH, VoiceSocket, voice_page

__all__ = ["API_PREFIX", "CONSOLE_FILES", "FUTURE_SURFACES", "dev_app"]

API_PREFIX = "/dev/v1"
FUTURE_SURFACES: Mapping[str, str] = {}
"""Rows of the reference's ``/dev/v1`` table that this node does not serve yet: 404 ``surface_not_available``."""
CONSOLE_FILES: Mapping[str, str] = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "voice.js": "text/javascript; charset=utf-8",
    "voice-worklet.js": "text/javascript; charset=utf-8",
}
"""The console's and the voice page's static files (``/dev/static/<name>``) besides their pages."""
_PEEK_S = 0.5
"""How long the events route waits for a subscription's first item before it starts the stream anyway."""
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_REPORT_HEADERS: Mapping[str, str] = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox",
    "content-disposition": 'attachment; filename="eval-report.html"',
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}
"""Headers of the HTML evaluation report: a download that runs nothing, even if opened in place."""


_CONFLICTS: Mapping[str, str] = {
    "already_exists": "the session already exists",
    "already_resumed": "the run was already resumed",
    "not_paused": "only a paused run can be resumed",
    "not_resumable": "this run cannot be resumed",
}
"""Reasons of ``SessionError``/``RunError`` that say the resource's current state refuses the request: 409 here (the
edge's class table has no row for those classes, so they would be 500), with a fixed message."""
_CONFLICT_DETAILS = frozenset({"resumed_to", "state"})
"""Details a conflict keeps: server-made facts only (the ids the request named are not echoed back)."""

_Handler = Callable[[Request], Awaitable[Response]]

_LIVE_STATUS: Mapping[str, int] = {
    "live_unavailable": 503,
    "live_session_not_found": 404,
    "live_not_active": 409,
    "voice_bridge_exists": 409,
    "ingress_full": 429,
    "subscriber_limit": 429,
}
"""Statuses of the Live routes' reasons (``LiveError`` would be 500). The answer carries no details: a missing
session and another principal's look the same."""
_LIVE_SESSION = re.compile(r"/dev/v1/live/sessions/[A-Za-z0-9._-]{1,128}/voice")

_RESOURCE_STATUS: Mapping[str, int] = {
    "resource_forbidden": 403,
    "artifact_not_found": 404,
    "memory_entry_not_found": 404,
    "artifact_unavailable": 503,
    "memory_unavailable": 503,
    "context_cache_unavailable": 503,
}
"""Statuses of the resource routes' reasons (their classes, ``PolicyDenied``/``StorageError``, would be 500)."""

_TRIGGER_STATUS: Mapping[str, int] = {
    "unknown_trigger": 404,
    "unknown_event": 404,
    "unknown_ref": 404,
}
"""Statuses of the trigger routes' reasons that name something missing (``TriggerError`` would be 500)."""


def _conflicts_as_409(handler: _Handler) -> _Handler:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except (SessionError, RunError) as err:
            if err.reason not in _CONFLICTS or status_for(err) != 500:
                raise
            details = {k: v for k, v in err.details.items() if k in _CONFLICT_DETAILS}
            return error_response(409, err.reason, message=_CONFLICTS[err.reason], **details)

    return endpoint


def _resource_statuses(handler: _Handler) -> _Handler:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except AdkError as err:
            status = _RESOURCE_STATUS.get(err.reason)
            if status is None:
                raise
            return error_response(status, err.reason, message=err.message, **err.details)

    return endpoint


def _trigger_statuses(handler: _Handler) -> _Handler:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except AdkError as err:
            status = _TRIGGER_STATUS.get(err.reason)
            if status is None:
                raise
            return error_response(status, err.reason, message=err.message)

    return endpoint


def _live_statuses(handler: _Handler) -> _Handler:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except AdkError as err:
            status = _LIVE_STATUS.get(err.reason)
            if status is None:
                raise
            return error_response(status, err.reason, message=err.message)

    return endpoint


def _console_file(name: str) -> bytes:
    return resources.files("adk_actors.web").joinpath("static", name).read_bytes()


def _query_int(request: Request, key: str, default: int) -> int:
    raw = request.query_params.get(key)
    if raw is None:
        return default
    if not raw.isdigit() or len(raw) > 9:
        raise ValidationError(f"{key} must be a non-negative integer", reason="invalid_value", details={"key": key})
    return int(raw)


def _allowed(body: Mapping[str, Any], keys: set[str]) -> None:
    unknown = sorted(k for k in body if k not in keys)
    if unknown:
        raise ValidationError("the body has an unknown key", reason="unknown_key", details={"allowed": sorted(keys)})


class _Routes:
    """The route handlers of one :func:`dev_app`."""

    def __init__(
        self,
        ops: DevOps,
        offload: Offload,
        a2a: Any = None,
        resources: ResourceOps | None = None,
        live: LiveOps | None = None,
    ) -> None:
        self.ops = ops
        self.offload = offload
        self.a2a = a2a
        self.resources = resources or ResourceOps(None, ops.sessions)
        self.triggers = TriggerOps(ops.system)
        self.live = live or LiveOps(ops.system, None)

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await self.offload.call(fn, *args, **kwargs)

    # agents

    async def agents(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.list_agents))

    async def agent(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.describe, request.path_params["name"]))

    # runs

    async def start_run(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"agent", "input", "user_id", "session_id", "app_name"})
        trace = request.scope.get("state", {}).get("trace")
        started = await self._call(
            self.ops.start_run,
            agent=body.get("agent"),
            input=body.get("input"),
            user_id=body.get("user_id", "dev-user"),
            session_id=body.get("session_id"),
            app_name=body.get("app_name"),
            trace=trace.traceparent if trace is not None else None,
        )
        if "text/event-stream" not in request.headers.get("accept", ""):
            return JSONResponse(started, status_code=201)
        # Started and streamed in one request: a `run` message with the ids first (no event id: a reconnect goes to
        # GET .../events with the last event id), then the run's messages as GET .../events sends them.
        return await self._subscribe(request, started["run_id"], 0, head=SseEvent(None, "run", started))

    async def run(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.run_status, request.path_params["run_id"]))

    async def cancel(self, request: Request) -> Response:
        body = await read_json(request) if request.headers.get("content-length", "0") != "0" else {}
        _allowed(body, {"reason"})
        outcome = await self._call(self.ops.cancel_run, request.path_params["run_id"], body.get("reason", "cancelled"))
        return JSONResponse(outcome)

    async def resume(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"tool_response"})
        if "tool_response" not in body:
            raise ValidationError(
                'the body is {"tool_response": ...}', reason="invalid_resume_response", details={"key": "tool_response"}
            )
        resumed = await self._call(self.ops.resume_run, request.path_params["run_id"], body["tool_response"])
        return JSONResponse(resumed, status_code=201)

    async def events(self, request: Request) -> Response:
        after = parse_last_event_id(request.headers.get("last-event-id"))
        if after is None:
            after = _query_int(request, "after_seq", 0)
        if request.method == "HEAD":
            # Starlette serves HEAD with the GET handler; a subscription here would hold the connection (and a
            # stream slot) for a body the client never reads.
            await self._call(self.ops.run_status, request.path_params["run_id"])
            return Response(media_type=SseStream.media_type, headers={"cache-control": "no-store"})
        return await self._subscribe(request, request.path_params["run_id"], after)

    async def _subscribe(self, request: Request, run_id: Any, after: int, head: SseEvent | None = None) -> Response:
        limits: EdgeLimits = request.scope.get("state", {}).get("edge_limits") or EdgeLimits()
        idle = limits.sse_max_duration_ms / 1000 + 5.0
        # The subscription runs on its own thread. Its first item is awaited here for a moment, so an unknown run
        # or a bad argument is an error answer (404, 400) before the stream starts, without a separate status ask.
        iterator = self.offload.iterate(self.ops.subscribe, run_id, after, idle)
        first: asyncio.Future[Any] = asyncio.ensure_future(anext(iterator))
        await asyncio.wait({first}, timeout=_PEEK_S)
        if first.done() and first.exception() is not None:
            await iterator.aclose()
            raise first.exception()  # type: ignore[misc]
        return SseStream(self._stream(iterator, first, head))

    async def _stream(
        self, iterator: BlockingIterator[Any], first: asyncio.Future[Any], head: SseEvent | None = None
    ) -> AsyncIterator[SseEvent]:
        try:
            if head is not None:
                yield head
            item = await first
            while True:
                name, data = item_json(item)
                final = name == "outcome"
                yield SseEvent(id=item.seq if name == "event" else None, event=name, data=data, last=final)
                if final:
                    return
                item = await anext(iterator)
        except StopAsyncIteration:
            return
        finally:
            if not first.done():
                first.cancel()
            await iterator.aclose()

    # sessions

    async def sessions(self, request: Request) -> Response:
        q = request.query_params
        page = await self._call(
            self.ops.list_sessions,
            q.get("app_name", "dev"),
            q.get("user_id"),
            _query_int(request, "limit", 20),
        )
        return JSONResponse(page)

    async def create_session(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"app_name", "user_id", "session_id", "state"})
        created = await self._call(
            self.ops.create_session,
            body.get("app_name", "dev"),
            body.get("user_id", "dev-user"),
            body.get("session_id"),
            body.get("state"),
        )
        return JSONResponse(created, status_code=201)

    def _ref(self, request: Request) -> tuple[str, str, str]:
        p = request.path_params
        return p["app"], p["user"], p["session_id"]

    async def session(self, request: Request) -> Response:
        return JSONResponse(
            await self._call(self.ops.show_session, *self._ref(request), _query_int(request, "max_events", 100))
        )

    async def delete_session(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.delete_session, *self._ref(request)))

    async def state(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"delta"})
        return JSONResponse(await self._call(self.ops.update_state, *self._ref(request), body.get("delta")))

    # MCP connections

    async def mcp_connections(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.list_mcp_connections))

    async def mcp_connection(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.mcp_connection, request.path_params["connection_id"]))

    # A2A (the server this edge also serves, if any; read on the event loop, where its task store lives)

    async def a2a_status(self, request: Request) -> Response:
        if self.a2a is None:
            return JSONResponse({"enabled": False})
        return JSONResponse({"enabled": True, "card": self.a2a.card, "status": self.a2a.status()})

    async def a2a_tasks(self, request: Request) -> Response:
        if self.a2a is None:
            raise NameNotFound("this server has no A2A endpoint", reason="a2a_not_enabled")
        limit = _query_int(request, "limit", 100)
        if not 1 <= limit <= 1000:
            raise ValidationError("limit must be in [1, 1000]", reason="invalid_value", details={"key": "limit"})
        return JSONResponse({"tasks": self.a2a.tasks(limit)})

    # triggers (adk_actors.triggers: each registered trigger's actor answers its own status)

    async def trigger_list(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.triggers.list_triggers))

    async def trigger(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.triggers.trigger, request.path_params["name"]))

    async def trigger_event(self, request: Request) -> Response:
        p = request.path_params
        return JSONResponse(await self._call(self.triggers.event, f"{p['name']}/{p['event_id']}"))

    # Live (adk_actors.live: sessions an application started with the developer Live principal)

    async def live_sessions(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.live.list_sessions))

    async def live_session(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.live.status, request.path_params["session_id"]))

    async def live_text(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"text"})
        sent = await self._call(self.live.send_text, request.path_params["session_id"], body.get("text"))
        return JSONResponse(sent)

    async def live_events(self, request: Request) -> Response:
        if request.headers.get("last-event-id") is not None:
            raise ValidationError(
                "Live events are not replayed: subscribe again without Last-Event-ID",
                reason="live_replay_unsupported",
            )
        session_id = request.path_params["session_id"]
        if request.method == "HEAD":
            await self._call(self.live.status, session_id)
            return Response(media_type=SseStream.media_type, headers={"cache-control": "no-store"})
        if not self.live.available:
            self.live.status(session_id)  # raises live_unavailable without starting a thread
        limits: EdgeLimits = request.scope.get("state", {}).get("edge_limits") or EdgeLimits()
        idle = limits.sse_max_duration_ms / 1000 + 5.0
        iterator = self.offload.iterate(self.live.subscribe, session_id, idle)
        try:
            first = await anext(iterator)  # the subscription is in place, or its error answers the request
        except BaseException:
            await iterator.aclose()
            raise
        return SseStream(self._live_stream(iterator, session_id, first or {}))

    async def _live_stream(
        self, iterator: BlockingIterator[Any], session_id: str, first: Mapping[str, Any]
    ) -> AsyncIterator[SseEvent]:
        try:
            yield SseEvent(None, "subscribed", {"session_id": session_id, "state": first.get("state")})
            async for item in iterator:
                if item is not None:
                    yield SseEvent(None, "live", item, last=item.get("kind") == "terminal")
        finally:
            await iterator.aclose()

    # node

    async def diagnostics(self, request: Request) -> Response:
        found = await self._call(self.ops.diagnostics)
        return JSONResponse({**found, "resources": self.resources.describe()})

    # memory, artifacts, context (ResourceOps: the application's services for the path's exact scope)

    def _scope(self, request: Request) -> tuple[str, ...]:
        p = request.path_params
        return tuple(p[k] for k in ("app", "user", "session_id") if k in p)

    async def artifacts(self, request: Request) -> Response:
        q = request.query_params
        page = await self._call(
            self.resources.list_artifacts,
            *self._scope(request),
            _query_int(request, "limit", 20),
            q.get("cursor"),
        )
        return JSONResponse(page)

    async def artifact_versions(self, request: Request) -> Response:
        q = request.query_params
        cursor = _query_int(request, "cursor", 0) if "cursor" in q else None
        page = await self._call(
            self.resources.artifact_versions,
            *self._scope(request),
            q.get("name"),
            _query_int(request, "limit", 20),
            cursor,
        )
        return JSONResponse(page)

    async def delete_artifact(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"name", "selector", "confirmation"})
        done = await self._call(
            self.resources.delete_artifact,
            *self._scope(request),
            body.get("name"),
            body.get("selector"),
            body.get("confirmation"),
        )
        return JSONResponse(done)

    async def memory(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.resources.memory_info, *self._scope(request)))

    async def search_memory(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"query", "limit", "filter"})
        hits = await self._call(
            self.resources.search_memory,
            *self._scope(request),
            body.get("query"),
            body.get("limit"),
            body.get("filter"),
        )
        return JSONResponse(hits)

    async def erase_memory(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"target", "identifier", "confirmation"})
        done = await self._call(
            self.resources.erase_memory,
            *self._scope(request),
            body.get("target"),
            body.get("identifier"),
            body.get("confirmation"),
        )
        return JSONResponse(done)

    async def context(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.resources.explain_context, *self._scope(request)))

    async def context_lifecycle(self, request: Request) -> Response:
        model = request.query_params.get("model")
        return JSONResponse(await self._call(self.resources.context_lifecycle, *self._scope(request), model))

    async def invalidate_cache(self, request: Request) -> Response:
        body = await read_json(request)
        _allowed(body, {"model", "confirmation"})
        done = await self._call(
            self.resources.invalidate_cache, *self._scope(request), body.get("model"), body.get("confirmation")
        )
        return JSONResponse(done)

    async def observability(self, request: Request) -> Response:
        return JSONResponse(await self._call(self.ops.metrics))

    # evaluation (pure CPU over the posted documents: on the offload pool)

    async def render_evaluation(self, request: Request) -> Response:
        body = await read_json(request)
        fmt = request.query_params.get("format", "markdown")
        rendered = await self._call(render_document, body, fmt)
        if isinstance(rendered, str):
            return Response(rendered, media_type="text/html; charset=utf-8", headers=_REPORT_HEADERS)
        return JSONResponse(rendered)

    async def compare_evaluation(self, request: Request) -> Response:
        return JSONResponse(await self._call(compare_results, await read_json(request)))

    async def not_yet(self, request: Request) -> Response:
        surface = request.path_params["surface"]
        if surface not in FUTURE_SURFACES:
            return error_response(404, "not_found")
        raise NameNotFound(FUTURE_SURFACES[surface], reason="surface_not_available", details={"surface": surface})

    # console

    async def voice(self, request: Request) -> Response:
        return await voice_page(request)

    async def console(self, request: Request) -> Response:
        return Response(
            _console_file("console.html"),
            media_type="text/html; charset=utf-8",
            headers={"content-security-policy": _CSP, "cache-control": "no-store", "referrer-policy": "no-referrer"},
        )

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in CONSOLE_FILES:
            return error_response(404, "not_found")
        return Response(_console_file(name), media_type=CONSOLE_FILES[name], headers={"cache-control": "no-store"})


def _routes(r: _Routes, console: bool, voice: VoiceSocket) -> list[BaseRoute]:
    v1 = API_PREFIX
    api = [
        (f"{v1}/agents", r.agents, "GET"),
        (f"{v1}/agents/{{name}}", r.agent, "GET"),
        (f"{v1}/runs", r.start_run, "POST"),
        (f"{v1}/runs/{{run_id}}", r.run, "GET"),
        (f"{v1}/runs/{{run_id}}/cancel", r.cancel, "POST"),
        (f"{v1}/runs/{{run_id}}/resume", r.resume, "POST"),
        (f"{v1}/runs/{{run_id}}/events", r.events, "GET"),
        (f"{v1}/sessions", r.sessions, "GET"),
        (f"{v1}/sessions", r.create_session, "POST"),
        (f"{v1}/sessions/{{app}}/{{user}}/{{session_id}}", r.session, "GET"),
        (f"{v1}/sessions/{{app}}/{{user}}/{{session_id}}", r.delete_session, "DELETE"),
        (f"{v1}/sessions/{{app}}/{{user}}/{{session_id}}/state", r.state, "PATCH"),
        (f"{v1}/mcp/connections", r.mcp_connections, "GET"),
        (f"{v1}/mcp/connections/{{connection_id}}", r.mcp_connection, "GET"),
        (f"{v1}/a2a", r.a2a_status, "GET"),
        (f"{v1}/a2a/tasks", r.a2a_tasks, "GET"),
        (f"{v1}/diagnostics", r.diagnostics, "GET"),
        (f"{v1}/observability", r.observability, "GET"),
        (f"{v1}/evaluation/render", r.render_evaluation, "POST"),
        (f"{v1}/evaluation/compare", r.compare_evaluation, "POST"),
    ]
    scoped = "{app}/{user}/{session_id}"
    resources = [
        (f"{v1}/artifacts/{scoped}", r.artifacts, "GET"),
        (f"{v1}/artifacts/{scoped}/versions", r.artifact_versions, "GET"),
        (f"{v1}/artifacts/{scoped}/delete", r.delete_artifact, "POST"),
        (f"{v1}/memory/{{app}}/{{user}}", r.memory, "GET"),
        (f"{v1}/memory/{{app}}/{{user}}/search", r.search_memory, "POST"),
        (f"{v1}/memory/{{app}}/{{user}}/erase", r.erase_memory, "POST"),
        (f"{v1}/context/{scoped}", r.context, "GET"),
        (f"{v1}/context/{scoped}/lifecycle", r.context_lifecycle, "GET"),
        (f"{v1}/context/{scoped}/cache/invalidate", r.invalidate_cache, "POST"),
    ]
    routes: list[BaseRoute] = [
        Route(path, _conflicts_as_409(handler), methods=[method]) for path, handler, method in api
    ]
    routes += [Route(path, _resource_statuses(handler), methods=[method]) for path, handler, method in resources]
    triggers = [
        (f"{v1}/triggers", r.trigger_list),
        (f"{v1}/triggers/{{name}}", r.trigger),
        (f"{v1}/triggers/{{name}}/events/{{event_id}}", r.trigger_event),
    ]
    routes += [Route(path, _trigger_statuses(handler), methods=["GET"]) for path, handler in triggers]
    live = [
        (f"{v1}/live/sessions", r.live_sessions, "GET"),
        (f"{v1}/live/sessions/{{session_id}}", r.live_session, "GET"),
        (f"{v1}/live/sessions/{{session_id}}/text", r.live_text, "POST"),
        (f"{v1}/live/sessions/{{session_id}}/events", r.live_events, "GET"),
    ]
    routes += [Route(path, _live_statuses(handler), methods=[method]) for path, handler, method in live]
    routes.append(WebSocketRoute(VOICE_PATH, voice.endpoint))
    routes += [Route(f"{v1}/{{surface}}", r.not_yet), Route(f"{v1}/{{surface}}/{{rest:path}}", r.not_yet)]
    if console:
        routes += [
            Route("/dev", r.console, methods=["GET"]),
            Route(VOICE_PAGE, r.voice, methods=["GET"]),
            Route("/dev/static/{name}", r.static, methods=["GET"]),
        ]
    return routes


def _public(path: str) -> bool:
    # The voice WebSocket authenticates itself (a browser cannot send the Authorization header on a WebSocket);
    # an HTTP request to that path matches no route and is 404 whatever it carries.
    return path in ("/dev", VOICE_PAGE) or path.startswith("/dev/static/") or bool(_LIVE_SESSION.fullmatch(path))


def dev_app(
    system: ActorSystemHandle,
    *,
    token: DevToken | None,
    limits: EdgeLimits | None = None,
    sessions: BaseSessionService | None = None,
    offload: Offload | None = None,
    console: bool = True,
    a2a: Any = None,
    resources: ResourceProvider | DevResources | None = None,
    live_principal: Secret | str | None = None,
) -> EdgeGuard:
    """The ``/dev/v1`` API (and, with ``console``, the console at ``/dev``) for ``system``, as an ASGI app.

    Args:
        system: the node (attached or owned).
        token: the developer token (:meth:`DevToken.from_env` reads ``ADK_DEV_TOKEN``); ``None`` refuses every API
            request (the console page still loads).
        limits: the edge's bounds (default :class:`EdgeLimits`).
        sessions: the session service runs and session routes use (default: the node's).
        offload: the thread pool for facade calls (default 8 threads, 256 pending); closed when the app shuts down.
        console: serve the console page and its static files.
        a2a: the :class:`~adk_actors.web.a2a_server.A2aApp` served next to this app (``adk serve --a2a``), whose
            card, counts and tasks ``/dev/v1/a2a`` shows (same process and event loop).
        resources: the application's memory, artifact and context-cache services for the resource routes: a
            :data:`~adk_actors.devapi.resources.ResourceProvider` called with each request's exact scope
            (:func:`~adk_actors.devapi.resources.single_tenant` builds one), or one
            :class:`~adk_actors.devapi.resources.DevResources` for every scope. Never taken from a request;
            ``None``: those routes answer 503 ``<kind>_unavailable`` (context explanation still works).
        live_principal: the exact principal the Live routes and the voice bridge act as; ``None``: the node's
            ``dev_live_principal`` setting, else ``$ADK_DEV_LIVE_PRINCIPAL``
            (:func:`~adk_actors.devapi.live.live_principal`); with neither, they answer 503 ``live_unavailable``.
    """
    ops = DevOps(system, sessions)
    pool = offload or Offload()
    live = LiveOps(system, live_principal) if live_principal is not None else LiveOps.from_settings(system)
    handlers = _Routes(ops, pool, a2a, ResourceOps(resources, ops.sessions, system=system), live)
    voice = VoiceSocket(live, token, pool)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.close()

    return edge_app(_routes(handlers, console, voice), token=token, limits=limits, public=_public, lifespan=lifespan)
