"""The A2A 1.0 server: an agent of the node over the JSON-RPC binding (docs/A2A.md).

:func:`a2a_app` builds a plain ASGI app: the Agent Card at ``/.well-known/agent-card.json`` and JSON-RPC at
``/a2a/v1`` (``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``ListTasks``, ``CancelTask``,
``SubscribeToTask``). Mount it in your own Starlette/FastAPI service or serve it with
:func:`~adk_actors.web.serve.start_in_thread`. The app is a facade client: each task's work is a stable run of the
given :class:`~adk_actors.Runner` (``runs.start``), owned by the node and not by the HTTP request, so a client that
disconnects neither owns nor cancels it; ``CancelTask`` cancels it, and a task past ``task_timeout_s`` is cancelled
and failed. The task store (:mod:`adk_actors.a2a.tasks`) holds the protocol view, bounded.

Multi-turn: a task's ``contextId`` is the Runner session (one per context and principal); a new message with only
the ``contextId`` starts a new task in the same conversation. A run that pauses (a confirmation, long-running work,
a credential request) puts its task in ``TASK_STATE_INPUT_REQUIRED`` (``TASK_STATE_AUTH_REQUIRED`` for a credential
request) with a status message carrying the pause's public details as a ``data`` part; the client's next message
to that task is the resume answer: one ``data`` part holding the answer object, or text (``yes``/``no`` for a
confirmation, else JSON).

What a request meets, in order: the ``Host`` check (loopback, or ``allowed_hosts``); without ``auth`` a client
that is not on loopback is refused (403 ``unauthenticated_remote``); ``A2A-Version: 1.0`` (absent means 0.3:
``-32009``); the bearer token against the :class:`~adk_actors.auth.JwtPolicy` (401/403 in the edge's shape); the
body bound; strict JSON (``-32700``); one JSON-RPC 2.0 request (``-32600``); a known 1.0 method (``-32601``, 0.3
names included); its params. Protocol errors are answered with HTTP 200 and a JSON-RPC error whose ``data`` is one
``google.rpc.ErrorInfo`` (the protocol reason) whose metadata carries our ``reason``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from adk_actors.a2a.tasks import A2aLimits, Task, TaskStore, page_offset, page_token
from adk_actors.a2a.wire import (
    PROTOCOL_VERSION,
    Code,
    a2a_error,
    agent_message,
    check_message,
    check_state,
    content_of,
    error_body,
    new_id,
    text_of,
)
from adk_actors.errors import A2aError, AdkError, AuthError, ConfigError, ValidationError
from adk_actors.logs import log_crash
from adk_actors.web.edge import error_response, host_header_name, is_loopback_name, strict_json
from adk_actors.web.offload import Offload
from adk_actors.web.sse import parse_last_event_id

__all__ = ["A2A_PATH", "CARD_PATH", "A2aApp", "A2aLimits", "a2a_app", "agent_card", "check_public_serving", "serve_a2a"]

A2A_PATH = "/a2a/v1"
CARD_PATH = "/.well-known/agent-card.json"
_KEEPALIVE_S = 15.0
_LEGACY_METHODS = frozenset(
    {
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "agent/getAuthenticatedExtendedCard",
    }
)
_YES = frozenset({"yes", "y", "approve", "approved", "ok", "true", "confirm", "confirmed"})
_NO = frozenset({"no", "n", "reject", "rejected", "deny", "denied", "false"})


# ---- the Agent Card ----------------------------------------------------------------------------------------------


def agent_card(
    *,
    name: str,
    description: str,
    url: str,
    version: str = "1.0.0",
    skills: Sequence[Mapping[str, Any]] = (),
    streaming: bool = True,
    security_schemes: Mapping[str, Any] | None = None,
    security_requirements: Sequence[Mapping[str, Any]] | None = None,
    provider: Mapping[str, str] | None = None,
    input_modes: Sequence[str] = ("text/plain",),
    output_modes: Sequence[str] = ("text/plain",),
) -> dict[str, Any]:
    """An A2A 1.0 Agent Card for a JSON-RPC interface at ``url`` (absolute, ending in the RPC path).

    Raises:
        ConfigError: ``invalid_card`` (``details["field"]`` names what is wrong).
    """

    def bad(field: str) -> ConfigError:
        return ConfigError("the agent card is not valid", reason="invalid_card", details={"field": field})

    for key, value in (("name", name), ("description", description), ("version", version)):
        if not isinstance(value, str) or not value.strip() or len(value) > 4096:
            raise bad(key)
    if not isinstance(url, str) or not url.startswith(("https://", "http://")) or len(url) > 2048:
        raise bad("url")
    card: dict[str, Any] = {
        "name": name,
        "description": description,
        "version": version,
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}],
        "capabilities": {"streaming": bool(streaming), "pushNotifications": False, "extendedAgentCard": False},
        "defaultInputModes": list(input_modes),
        "defaultOutputModes": list(output_modes),
        "skills": [],
    }
    for index, skill in enumerate(skills):
        if not isinstance(skill, Mapping) or not all(
            isinstance(skill.get(k), str) for k in ("id", "name", "description")
        ):
            raise bad(f"skills[{index}]")
        tags = skill.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise bad(f"skills[{index}].tags")
        card["skills"].append({**dict(skill), "tags": list(tags)})
    if provider is not None:
        if not isinstance(provider.get("url"), str) or not isinstance(provider.get("organization"), str):
            raise bad("provider")
        card["provider"] = dict(provider)
    if security_schemes:
        for scheme_name, scheme in security_schemes.items():
            if not isinstance(scheme, Mapping) or len(scheme) != 1:
                raise bad(f"securitySchemes.{scheme_name}")
        card["securitySchemes"] = {k: dict(v) for k, v in security_schemes.items()}
    if security_requirements:
        declared = set(card.get("securitySchemes", {}))
        for index, requirement in enumerate(security_requirements):
            schemes = requirement.get("schemes") if isinstance(requirement, Mapping) else None
            if not isinstance(schemes, Mapping) or not schemes or not set(schemes) <= declared:
                raise bad(f"securityRequirements[{index}]")
        card["securityRequirements"] = [dict(r) for r in security_requirements]
    return card


_BEARER_KINDS = ("httpAuthSecurityScheme", "openIdConnectSecurityScheme", "oauth2SecurityScheme")


def _check_card_auth(card: Mapping[str, Any], auth: Any) -> None:
    """The card's security must say what the server does: nothing without auth, a bearer scheme with it."""
    requirements = card.get("securityRequirements") or []
    if auth is None:
        if requirements:
            raise ConfigError(
                "the card declares security but the server has no auth", reason="card_auth_mismatch", details={}
            )
        return
    schemes = card.get("securitySchemes") or {}
    bearer = {
        name
        for name, scheme in schemes.items()
        if isinstance(scheme, Mapping)
        and any(kind in scheme for kind in _BEARER_KINDS)
        and (
            "httpAuthSecurityScheme" not in scheme
            or str(scheme["httpAuthSecurityScheme"].get("scheme", "")).lower() == "bearer"
        )
    }
    if not requirements or not any(set(r.get("schemes", {})) <= bearer for r in requirements):
        raise ConfigError(
            "with auth, the card must require a bearer, OAuth 2.0 or OpenID Connect scheme",
            reason="card_auth_mismatch",
            details={},
        )


# ---- helpers -----------------------------------------------------------------------------------------------------


def _rpc(request_id: Any, error: A2aError, status: int = 200) -> Response:
    return JSONResponse(error_body(request_id, error), status_code=status)


def _result(request_id: Any, result: Any) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})


def _frame(request_id: Any, seq: int | None, result: Any) -> bytes:
    data = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, ensure_ascii=False, separators=(",", ":"))
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}data: {data}\n\n".encode()


def _int_param(params: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise a2a_error(
            Code.INVALID_PARAMS, f"{key} must be an integer in [{low}, {high}]", "invalid_params", field=key
        )
    return value


def _id_param(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= 256:
        raise a2a_error(Code.INVALID_PARAMS, f"{key} is required", "invalid_params", field=key)
    return value


def _parts_of_output(output: Any) -> list[dict[str, Any]]:
    """An agent's final output as A2A parts (text, or our content's parts)."""
    if isinstance(output, str):
        return [{"text": output, "mediaType": "text/plain"}]
    if isinstance(output, Mapping) and isinstance(output.get("parts"), list):
        parts: list[dict[str, Any]] = []
        for part in output["parts"]:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text" and not part.get("thought"):
                parts.append({"text": part["text"], "mediaType": "text/plain"})
            elif kind == "inline_data":
                parts.append({"raw": part["data"], "mediaType": part["mime_type"]})
            elif kind == "file_data":
                parts.append({"url": part["uri"], "mediaType": part["mime_type"]})
        return parts or [{"text": ""}]
    return [{"data": output, "mediaType": "application/json"}]


def _resume_answer(parts: list[dict[str, Any]], pause: Any) -> Any:
    """The resume response a client's message to an interrupted task carries."""
    data = [p["data"] for p in parts if "data" in p]
    if len(data) == 1 and isinstance(data[0], dict):
        return data[0]
    text = text_of([p for p in parts if "text" in p]).strip()
    if getattr(pause, "reason", "") == "tool_confirmation" and text.lower() in _YES | _NO:
        return {"confirmed": text.lower() in _YES}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    raise a2a_error(
        Code.INVALID_PARAMS,
        "the answer to an input-required task is one data part (an object), yes/no, or a JSON object",
        "invalid_resume_answer",
        field="message.parts",
    )


# ---- the app -----------------------------------------------------------------------------------------------------


class A2aApp:
    """The ASGI app :func:`a2a_app` returns (call :meth:`close` when it is served no more)."""

    def __init__(
        self,
        system: Any,
        runner: Any,
        card: dict[str, Any] | None,
        *,
        auth: Any,
        limits: A2aLimits,
        offload: Offload,
        owns_offload: bool,
        allowed_hosts: frozenset[str],
        rpc_path: str,
        app_scope_salt: str,
    ) -> None:
        self.system = system
        self.runner = runner
        self.card = card
        self.auth = auth
        self.limits = limits
        self.offload = offload
        self.owns_offload = owns_offload
        self.allowed_hosts = allowed_hosts
        self.rpc_path = rpc_path
        self.salt = app_scope_salt
        self.store = TaskStore(limits)
        self.followers: set[asyncio.Task[None]] = set()
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.streams = 0
        self.requests = 0

    def set_card(self, card: dict[str, Any]) -> None:
        """Publish ``card`` (for a server whose URL is known only once it listens).

        Raises:
            ConfigError: ``card_auth_mismatch``.
        """
        _check_card_auth(card, self.auth)
        self.card = card

    def status(self) -> dict[str, Any]:
        """Counts for the developer API (no task content, no principals)."""
        return {
            **self.store.stats(),
            "streams": self.streams,
            "requests": self.requests,
            "auth": "jwt" if self.auth is not None else "none",
        }

    def tasks(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest tasks of every principal, for the developer API: ids, context, state, time, scope prefix."""
        found = sorted(self.store.tasks.values(), key=lambda t: t.timestamp, reverse=True)[:limit]
        return [
            {
                "id": t.id,
                "contextId": t.context_id,
                "state": t.state,
                "timestamp": t.timestamp,
                "scope": t.scope[:12],
                "runs": t.run_count,
                "artifacts": len(t.artifacts),
            }
            for t in found
        ]

    async def close(self) -> None:
        for timer in self.timers.values():
            timer.cancel()
        for follower in list(self.followers):
            follower.cancel()
        if self.followers:
            await asyncio.gather(*self.followers, return_exceptions=True)
        if self.owns_offload:
            self.offload.close()

    # ---- ASGI ----------------------------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = Headers(scope=scope)
        host = host_header_name(headers.get("host", ""))
        if not (is_loopback_name(host) or host in self.allowed_hosts):
            await error_response(421, "misdirected_host")(scope, receive, send)
            return
        client = scope.get("client") or ("", 0)
        if self.auth is None and not is_loopback_name(str(client[0])):
            await error_response(403, "unauthenticated_remote")(scope, receive, send)
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if path == CARD_PATH and scope.get("method") == "GET":
            await self._card(scope, receive, send)
        elif path == self.rpc_path:
            if scope.get("method") != "POST":
                await error_response(405, "method_not_allowed", headers={"allow": "POST"})(scope, receive, send)
                return
            self.requests += 1
            response = await self._rpc(scope, receive, headers)
            await response(scope, receive, send)
        else:
            await error_response(404, "not_found")(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _card(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.card is None:
            await error_response(503, "card_not_ready")(scope, receive, send)
            return
        body = json.dumps(self.card, separators=(",", ":")).encode()
        etag = 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        response = Response(
            body, media_type="application/json", headers={"etag": etag, "cache-control": "public, max-age=300"}
        )
        await response(scope, receive, send)

    async def _body(self, receive: Receive) -> bytes | None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > self.limits.max_input_bytes:
                raise a2a_error(
                    Code.INVALID_REQUEST,
                    "the request body is too large",
                    "body_too_large",
                    limit=self.limits.max_input_bytes,
                )
            if not message.get("more_body", False):
                return bytes(body)

    async def _principal(self, headers: Headers) -> str:
        """The SHA-256 scope of the caller (the principal is never kept)."""
        if self.auth is None:
            identity = "anonymous@loopback"
        else:
            from adk_actors.auth.jwt_policy import bearer_claims

            claims = await self.offload.call(bearer_claims, headers, self.auth)
            identity = claims.principal
        return hashlib.sha256(f"{self.salt}\x00{identity}".encode()).hexdigest()

    async def _rpc(self, scope: Scope, receive: Receive, headers: Headers) -> Response:
        try:
            scope_hash = await self._principal(headers)
        except AuthError as err:
            from adk_actors.auth.jwt_policy import guard_response

            status, extra, body = guard_response(err)
            return Response(body, status_code=status, headers={k.decode(): v.decode() for k, v in extra})
        try:
            raw = await self._body(receive)
        except A2aError as err:
            return _rpc(None, err, 413)
        if raw is None:
            return Response(status_code=400)
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if media not in ("application/json", "application/a2a+json"):
            return _rpc(
                None, a2a_error(Code.INVALID_REQUEST, "the body must be application/json", "unsupported_media_type")
            )
        try:
            message = strict_json(raw)
        except (ValueError, RecursionError):
            return _rpc(None, a2a_error(Code.PARSE, "the body is not valid JSON", "invalid_json"))
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            request_id = None
        versions = headers.getlist("a2a-version")
        if versions != [PROTOCOL_VERSION]:
            seen = "0.3 (no A2A-Version header)" if not versions else "an unsupported A2A-Version"
            return _rpc(
                request_id,
                a2a_error(
                    Code.VERSION_NOT_SUPPORTED,
                    f"{seen}; this server speaks A2A 1.0",
                    "version_not_supported",
                    header="A2A-Version",
                ),
            )
        if (
            not isinstance(message, dict)
            or message.get("jsonrpc") != "2.0"
            or not isinstance(message.get("method"), str)
            or request_id is None
            or not isinstance(message.get("params", {}), dict)
            or set(message) - {"jsonrpc", "id", "method", "params"}
        ):
            return _rpc(request_id, a2a_error(Code.INVALID_REQUEST, "not one JSON-RPC 2.0 request", "invalid_request"))
        method, params = message["method"], message.get("params") or {}
        try:
            return await self._dispatch(method, params, request_id, scope_hash, headers)
        except A2aError as err:
            return _rpc(request_id, err)
        except ValidationError as err:
            return _rpc(request_id, a2a_error(Code.INVALID_PARAMS, "invalid params", err.reason))
        except AdkError as err:
            return _rpc(request_id, a2a_error(Code.INTERNAL, "the request failed", err.reason))
        except Exception as exc:
            log_crash("adk_actors.web.a2a", "A2A request raised", exc, method=str(method)[:64])
            return _rpc(request_id, a2a_error(Code.INTERNAL, "internal error", "internal_error"))

    async def _dispatch(
        self, method: str, params: dict[str, Any], rid: Any, scope_hash: str, headers: Headers
    ) -> Response:
        if method == "SendMessage":
            return await self._send(params, rid, scope_hash, stream=False)
        if method == "SendStreamingMessage":
            return await self._send(params, rid, scope_hash, stream=True)
        if method == "GetTask":
            task = self.store.get(_id_param(params, "id"), scope_hash)
            length = _int_param(params, "historyLength", 0, 10_000)
            return _result(rid, task.snapshot(history_length=length))
        if method == "ListTasks":
            return _result(rid, self._list(params, scope_hash))
        if method == "CancelTask":
            return _result(rid, await self._cancel(_id_param(params, "id"), scope_hash))
        if method == "SubscribeToTask":
            task = self.store.get(_id_param(params, "id"), scope_hash)
            if task.terminal:
                raise a2a_error(Code.UNSUPPORTED_OPERATION, "the task has ended", "task_terminal")
            try:
                after = parse_last_event_id(headers.get("last-event-id"))
            except ValidationError:
                raise a2a_error(
                    Code.INVALID_PARAMS,
                    "Last-Event-ID must be an event id",
                    "invalid_last_event_id",
                    header="Last-Event-ID",
                ) from None
            return self._stream(task, rid, after=after)
        if method in (
            "CreateTaskPushNotificationConfig",
            "GetTaskPushNotificationConfig",
            "ListTaskPushNotificationConfigs",
            "DeleteTaskPushNotificationConfig",
        ):
            raise a2a_error(Code.PUSH_NOT_SUPPORTED, "push notifications are not supported", "push_not_supported")
        if method == "GetExtendedAgentCard":
            raise a2a_error(Code.UNSUPPORTED_OPERATION, "no extended agent card", "extended_card_not_supported")
        reason = "pre_1_0_method" if method in _LEGACY_METHODS else "method_not_found"
        raise a2a_error(Code.METHOD_NOT_FOUND, "Method not found", reason, method=method[:64])

    # ---- SendMessage ---------------------------------------------------------------------------------------------
    async def _send(self, params: dict[str, Any], rid: Any, scope_hash: str, *, stream: bool) -> Response:
        if stream and not (self.card or {}).get("capabilities", {}).get("streaming", True):
            raise a2a_error(Code.UNSUPPORTED_OPERATION, "streaming is not supported", "streaming_not_supported")
        message = check_message(params.get("message"), max_bytes=self.limits.max_message_bytes)
        if message["role"] != "ROLE_USER":
            raise a2a_error(Code.INVALID_PARAMS, "a client's message has role ROLE_USER", "invalid_role", field="role")
        config = params.get("configuration") or {}
        if not isinstance(config, dict):
            raise a2a_error(
                Code.INVALID_PARAMS, "configuration must be an object", "invalid_params", field="configuration"
            )
        history_length = _int_param(config, "historyLength", 0, 10_000)
        immediately = config.get("returnImmediately", False)
        if not isinstance(immediately, bool):
            raise a2a_error(
                Code.INVALID_PARAMS,
                "returnImmediately must be a bool",
                "invalid_params",
                field="configuration.returnImmediately",
            )
        task_id = message.get("taskId")
        if task_id is not None:
            task = self.store.get(task_id, scope_hash)
            if message.get("contextId") not in (None, task.context_id):
                raise a2a_error(
                    Code.INVALID_PARAMS,
                    "taskId and contextId do not match",
                    "context_mismatch",
                    field="message.contextId",
                )
            if task.terminal:
                raise a2a_error(Code.UNSUPPORTED_OPERATION, "the task has ended", "task_terminal")
            if not task.interrupted:
                raise a2a_error(Code.UNSUPPORTED_OPERATION, "the task is working; wait for it", "task_busy")
            answer = _resume_answer(message["parts"], task.pause)
            parent = task.run_id
            run_id = await self.offload.call(self._resume_run, parent, answer)
            self.store.add_history(task, message)
        else:
            context_id = message.get("contextId") or new_id()
            task = self.store.create(scope_hash, context_id, message)
            run_id = ""
        waiter = None
        backlog: list[tuple[int, dict[str, Any]]] = []
        snapshot_seq = task.seq
        snapshot = task.snapshot(history_length=history_length)
        if stream or not immediately:
            backlog, waiter = self.store.subscribe(task, after_seq=task.seq)
        try:
            if not run_id:
                run_id = await self.offload.call(self._start_run, task, message)
            self._follow(task, run_id)
        except BaseException as err:
            if waiter is not None:
                self.store.unsubscribe(task, waiter)
            if not task.terminal:
                reason = err.reason if isinstance(err, AdkError) else "internal_error"
                self.store.set_state(
                    task,
                    "TASK_STATE_FAILED",
                    agent_message(
                        [{"text": f"the task could not start: {reason}"}], context_id=task.context_id, task_id=task.id
                    ),
                )
            raise
        if stream:
            assert waiter is not None
            return self._sse(task, rid, snapshot, snapshot_seq, backlog, waiter)
        if waiter is not None:
            try:
                await asyncio.wait_for(self._drain(waiter), self.limits.task_timeout_s + 5.0)
            except TimeoutError:
                pass
            finally:
                self.store.unsubscribe(task, waiter)
        return _result(rid, {"task": task.snapshot(history_length=history_length)})

    @staticmethod
    async def _drain(waiter: Any) -> None:
        while await waiter.queue.get() is not None:
            pass

    def _user_id(self, task: Task) -> str:
        return "a2a-" + task.scope[:40]

    def _start_run(self, task: Task, message: dict[str, Any]) -> str:
        from adk_actors import runs

        return runs.start(
            self.runner,
            self._user_id(task),
            task.context_id,
            content_of(message["parts"]),
            retention_ms=int(self.limits.retention_s * 1000),
            max_buffered_events=self.limits.max_events,
            system=self.system,
        )

    def _resume_run(self, run_id: str, answer: Any) -> str:
        from adk_actors import runs

        return runs.resume(run_id, answer, system=self.system)

    # ---- following a run -----------------------------------------------------------------------------------------
    def _follow(self, task: Task, run_id: str) -> None:
        task.run_id = run_id
        task.pause = None
        task.run_count += 1
        task.deadline = self.store.clock() + self.limits.task_timeout_s
        self.store.set_state(task, "TASK_STATE_WORKING")
        loop = asyncio.get_running_loop()
        old = self.timers.pop(task.id, None)
        if old is not None:
            old.cancel()
        self.timers[task.id] = loop.call_later(self.limits.task_timeout_s, self._expire, task, run_id)
        follower = loop.create_task(self._watch(task, run_id))
        self.followers.add(follower)
        follower.add_done_callback(self.followers.discard)

    def _expire(self, task: Task, run_id: str) -> None:
        self.timers.pop(task.id, None)
        if task.run_id != run_id or task.terminal or task.interrupted:
            return
        self.store.set_state(
            task,
            "TASK_STATE_FAILED",
            agent_message(
                [{"text": "the task passed its deadline"}, {"data": {"reason": "task_timeout"}}],
                context_id=task.context_id,
                task_id=task.id,
            ),
        )
        follower = asyncio.get_running_loop().create_task(self._cancel_run(run_id, "task_timeout"))
        self.followers.add(follower)
        follower.add_done_callback(self.followers.discard)

    async def _cancel_run(self, run_id: str, reason: str) -> None:
        from adk_actors import runs

        with contextlib.suppress(AdkError):
            await self.offload.call(runs.cancel, run_id, reason, system=self.system)

    async def _watch(self, task: Task, run_id: str) -> None:
        from adk_actors.runs.logic import Cancelled, Completed, Failed, Paused

        outcome: Any = None
        try:
            # One ask for the outcome, on the iterator's own thread (a wait may last the whole task, so it must not
            # hold a pool worker); the run's events are not needed here, its outcome is the task's answer.
            waiting = self.offload.iterate(_outcome_of, run_id, self.limits.task_timeout_s + 5.0, self.system)
            async with waiting:
                async for item in waiting:
                    outcome = item
        except AdkError as err:
            outcome = Failed(reason=err.reason)
        except asyncio.CancelledError:
            return
        if task.run_id != run_id or task.terminal:
            return
        timer = self.timers.pop(task.id, None)
        if timer is not None:
            timer.cancel()
        ids = {"context_id": task.context_id, "task_id": task.id}
        if isinstance(outcome, Completed):
            try:
                self.store.add_artifact(task, _parts_of_output(outcome.output))
            except A2aError as err:
                self.store.set_state(
                    task,
                    "TASK_STATE_FAILED",
                    agent_message([{"text": "the answer was refused"}, {"data": {"reason": err.reason}}], **ids),
                )
                return
            self.store.set_state(task, "TASK_STATE_COMPLETED")
        elif isinstance(outcome, Paused):
            pause = outcome.event.actions.pause
            task.pause = pause
            state = "TASK_STATE_AUTH_REQUIRED" if pause.reason == "credential" else "TASK_STATE_INPUT_REQUIRED"
            name = pause.details.get("function_name", "a tool")
            text = {
                "tool_confirmation": f"{name} needs your approval: answer yes or no.",
                "long_running": f"{name} runs outside the agent: send its final result.",
                "credential": f"{name} needs a sign-in with {pause.details.get('provider', 'a provider')}.",
            }.get(pause.reason, f"the task paused ({pause.reason})")
            data = {"pause": {"reason": pause.reason, "details": dict(pause.details)}}
            self.store.set_state(task, state, agent_message([{"text": text}, {"data": data}], **ids))
        elif isinstance(outcome, Cancelled):
            self.store.set_state(task, "TASK_STATE_CANCELED")
        else:
            reason = outcome.reason if isinstance(outcome, Failed) else "run_lost"
            self.store.set_state(
                task,
                "TASK_STATE_FAILED",
                agent_message([{"text": f"the task failed: {reason}"}, {"data": {"reason": reason}}], **ids),
            )

    # ---- other methods -------------------------------------------------------------------------------------------
    async def _cancel(self, task_id: str, scope_hash: str) -> dict[str, Any]:
        task = self.store.get(task_id, scope_hash)
        if task.terminal:
            raise a2a_error(Code.TASK_NOT_CANCELABLE, "the task has ended", "task_not_cancelable")
        working = not task.interrupted
        self.store.set_state(task, "TASK_STATE_CANCELED")
        timer = self.timers.pop(task.id, None)
        if timer is not None:
            timer.cancel()
        if working and task.run_id:
            await self._cancel_run(task.run_id, "a2a_cancel")
        return task.snapshot()

    def _list(self, params: dict[str, Any], scope_hash: str) -> dict[str, Any]:
        context_id = params.get("contextId")
        if context_id is not None and (not isinstance(context_id, str) or len(context_id) > 256):
            raise a2a_error(Code.INVALID_PARAMS, "contextId must be a string", "invalid_params", field="contextId")
        state = check_state(params["status"]) if params.get("status") not in (None, "") else None
        size = _int_param(params, "pageSize", 1, 100) or 50
        history_length = _int_param(params, "historyLength", 0, 10_000)
        after = params.get("statusTimestampAfter")
        if after is not None and not isinstance(after, str):
            raise a2a_error(
                Code.INVALID_PARAMS,
                "statusTimestampAfter must be a timestamp",
                "invalid_params",
                field="statusTimestampAfter",
            )
        include = params.get("includeArtifacts", False)
        if not isinstance(include, bool):
            raise a2a_error(
                Code.INVALID_PARAMS, "includeArtifacts must be a bool", "invalid_params", field="includeArtifacts"
            )
        offset = page_offset(params.get("pageToken"))
        found = self.store.listing(scope_hash, context_id=context_id, state=state, after=after)
        page = found[offset : offset + size]
        following = offset + size if offset + size < len(found) else None
        return {
            "tasks": [t.snapshot(history_length=history_length, artifacts=include) for t in page],
            "nextPageToken": page_token(following) if following is not None else "",
            "pageSize": size,
            "totalSize": len(found),
        }

    # ---- streams -------------------------------------------------------------------------------------------------
    def _stream(self, task: Task, rid: Any, *, after: Any = None) -> Response:
        snapshot_seq = task.seq
        snapshot = task.snapshot()
        backlog, sub = self.store.subscribe(task, after_seq=after if isinstance(after, int) else task.seq)
        if task.terminal or task.interrupted:
            self.store._close(sub)  # the snapshot is the whole story
        return self._sse(task, rid, snapshot, snapshot_seq, backlog, sub)

    def _sse(
        self,
        task: Task,
        rid: Any,
        snapshot: dict[str, Any],
        snapshot_seq: int,
        backlog: list[tuple[int, dict[str, Any]]],
        sub: Any,
    ) -> Response:
        if self.streams >= self.limits.max_concurrent_streams:
            self.store.unsubscribe(task, sub)
            raise a2a_error(
                Code.INTERNAL, "too many open streams", "too_many_streams", limit=self.limits.max_concurrent_streams
            )
        self.streams += 1

        async def frames() -> AsyncIterator[bytes]:
            try:
                yield _frame(rid, snapshot_seq, {"task": snapshot})
                for seq, event in backlog:
                    yield _frame(rid, seq, event)
                while True:
                    try:
                        item = await asyncio.wait_for(sub.queue.get(), _KEEPALIVE_S)
                    except TimeoutError:
                        yield b": keepalive\n\n"
                        continue
                    if item is None:
                        return
                    yield _frame(rid, item[0], item[1])
            finally:
                self.streams -= 1
                self.store.unsubscribe(task, sub)

        return StreamingResponse(
            frames(), media_type="text/event-stream", headers={"cache-control": "no-store", "x-accel-buffering": "no"}
        )


def _outcome_of(run_id: str, timeout: float, system: Any) -> Iterator[Any]:
    """The run's terminal outcome, as a one-item iterator (for :meth:`Offload.iterate`)."""
    from adk_actors import runs

    yield runs.wait(run_id, timeout, system=system)


def a2a_app(
    system: Any,
    *,
    runner: Any,
    card: dict[str, Any] | None,
    auth: Any = None,
    limits: A2aLimits | None = None,
    allowed_hosts: Sequence[str] = (),
    rpc_path: str = A2A_PATH,
    offload: Offload | None = None,
) -> A2aApp:
    """The A2A 1.0 server app for ``runner``'s agent (see the module docstring).

    Args:
        system: The node (an ``ActorSystemHandle``).
        runner: The :class:`~adk_actors.Runner` whose agent answers; its session service keeps the conversations.
        card: The Agent Card (:func:`agent_card`), or ``None`` to publish it later with :meth:`A2aApp.set_card`.
        auth: A :class:`~adk_actors.auth.JwtPolicy` for bearer tokens, or ``None`` (then only loopback clients).
        limits: The task store's bounds.
        allowed_hosts: ``Host`` names accepted besides loopback ones (the public name of the server).
        rpc_path: Where JSON-RPC is served.
        offload: The thread pool for blocking facade calls (default: one of the app's own).

    Raises:
        ConfigError: ``card_auth_mismatch`` (the card's security does not say what ``auth`` does),
            ``invalid_value``.
    """
    from adk_actors.runner import Runner

    if not isinstance(runner, Runner):
        raise ConfigError("runner must be a Runner", reason="invalid_value", details={"key": "runner"})
    if auth is not None:
        from adk_actors.auth.jwt_policy import JwtPolicy

        if not isinstance(auth, JwtPolicy):
            raise ConfigError("auth must be a JwtPolicy or None", reason="invalid_value", details={"key": "auth"})
    if card is not None:
        _check_card_auth(card, auth)
    if not isinstance(rpc_path, str) or not rpc_path.startswith("/") or rpc_path == CARD_PATH:
        raise ConfigError("rpc_path must be an absolute path", reason="invalid_value", details={"key": "rpc_path"})
    limits = limits or A2aLimits()
    owns = offload is None
    pool = offload or Offload(max_workers=16, max_pending=1024, max_iterators=limits.max_active + 16)
    hosts = frozenset(host_header_name(h) for h in allowed_hosts)
    salt = hashlib.sha256(f"{getattr(runner, 'app_name', '')}".encode()).hexdigest()[:16]
    return A2aApp(
        system,
        runner,
        card,
        auth=auth,
        limits=limits,
        offload=pool,
        owns_offload=owns,
        allowed_hosts=hosts,
        rpc_path=rpc_path,
        app_scope_salt=salt,
    )


def check_public_serving(
    app: A2aApp, host: str, *, allow_public: bool, tls: tuple[str, str] | None, trusted_tls_proxy: bool
) -> None:
    """The conditions of an A2A listener on a non-loopback address: an explicit opt-in, bearer auth, and TLS
    (direct, or a declared trusted proxy that alone reaches the listener). A loopback listener needs none.

    Raises:
        ConfigError: ``a2a_public_bind_not_allowed``, ``a2a_public_requires_auth``, ``a2a_public_requires_tls``.
    """
    if is_loopback_name(host.strip()):
        return
    if not allow_public:
        raise ConfigError(
            "an A2A listener on a non-loopback address needs allow_public=True",
            reason="a2a_public_bind_not_allowed",
            details={"host": host[:64]},
        )
    if app.auth is None:
        raise ConfigError(
            "a public A2A listener needs auth (a JwtPolicy)", reason="a2a_public_requires_auth", details={}
        )
    if tls is None and not trusted_tls_proxy:
        raise ConfigError(
            "a public A2A listener needs TLS: tls=(certfile, keyfile), or trusted_tls_proxy=True when only a TLS "
            "proxy can reach it",
            reason="a2a_public_requires_tls",
            details={},
        )


def serve_a2a(
    app: A2aApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    allow_public: bool = False,
    tls: tuple[str, str] | None = None,
    trusted_tls_proxy: bool = False,
    **options: Any,
) -> Any:
    """Serve ``app`` on its own listener (a thread; see :func:`~adk_actors.web.serve.start_in_thread`) after
    :func:`check_public_serving`; ``tls`` serves HTTPS directly. Publish the card with the listener's URL
    (``app.set_card(...)``) once it returns.

    Raises:
        ConfigError: as :func:`check_public_serving`; ``tls_unreadable``; as ``start_in_thread``.
    """
    from adk_actors.web.serve import start_in_thread

    check_public_serving(app, host, allow_public=allow_public, tls=tls, trusted_tls_proxy=trusted_tls_proxy)
    public = not is_loopback_name(host.strip())
    return start_in_thread(app, host, port, allow_non_loopback=public, tls=tls, **options)
