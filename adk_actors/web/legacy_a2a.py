"""``POST /a2a/prompt``: the legacy simple HTTP endpoint (the reference's small JSON protocol, not A2A 1.0).

::

    check_legacy_bind(host)                                  # before serving: loopback only, fail closed
    app = legacy_a2a_app(system, agents={"HttpAgent"})
    with start_legacy_a2a(app, "127.0.0.1", 8080) as server:  # or mount ``app`` in your own loopback service
        ...

The request is ``{"agent": name, "prompt": text}`` (exactly those two keys, strict UTF-8 JSON, at most
``max_body_bytes``) and the answer ``{"response": text}``: one turn of the agent's compatibility conversation
(``adk_actors.prompt``), run on a bounded thread pool so no ask blocks the event loop. There is no authentication,
so the endpoint is a loopback-only convenience and never a public API:

* a listener binds only IPv4 ``127.0.0.0/8``, IPv6 ``::1`` or the name ``localhost`` (:func:`check_legacy_bind`
  raises ``legacy_a2a_server_must_bind_loopback`` otherwise, wildcards included); the A2A 1.0 public-listener
  opt-ins do not apply here;
* a request from a peer that is not on loopback is refused (403 ``loopback_only``) before anything else, and one
  whose ``Host`` is not a loopback name (a DNS-rebinding page) with 421 ``misdirected_host``;
* the :class:`~adk_actors.web.edge.EdgeGuard` in front refuses cross-origin requests, oversized headers and
  bodies, and credentials in the query string.

Errors are the edge's JSON shape ``{"error": {"reason", "message", ...}}``: 400 for a bad body (``invalid_json``,
``invalid_body``, ``unknown_key``, ``missing_key``, ``invalid_value``, ``invalid_utf8``, ``invalid_agent_name``),
404 ``agent_not_found`` (also for an agent outside the ``agents`` allow-list), 413 ``body_too_large``, 415
``unsupported_media_type``, 504 when the turn does not finish within ``timeout_s``, 503 when the pool is full, and
502 with the failure's reason (and a fixed message, nothing of the model's error) when the turn fails.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from adk_actors.agents.api import prompt
from adk_actors.agents.spec import check_agent_name
from adk_actors.content.model import validate
from adk_actors.content.validation import check_text
from adk_actors.errors import ActorCrashed, AdkError, AskTimeout, ConfigError, NameNotFound, ValidationError
from adk_actors.web.edge import EdgeLimits, check_limits, edge_app, error_response, read_json, status_for
from adk_actors.web.offload import Offload
from adk_actors.web.serve import ServerThread, start_in_thread

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT_S",
    "LEGACY_PATH",
    "check_legacy_bind",
    "legacy_a2a_app",
    "start_legacy_a2a",
]

LEGACY_PATH: Final = "/a2a/prompt"
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024
"""The reference's ``a2a_max_body_bytes``."""
DEFAULT_TIMEOUT_S: Final = 120.0
"""How long one prompt may take before the request answers 504."""

_BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {"max_body_bytes": (1, 64 * 1024 * 1024), "timeout_s": (0.001, 3600.0)}
)
_KEYS = frozenset({"agent", "prompt"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Bounds:
    max_body_bytes: int
    timeout_s: float

    def __post_init__(self) -> None:
        check_limits(self, _BOUNDS)


# ---- loopback --------------------------------------------------------------------------------------------------


def _bind_is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` (bracketed or not) or the literal name ``localhost``; nothing else, no mapped forms."""
    name = host.strip()
    if name.lower() == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return False  # only IPv4 127/8 and ::1 themselves, whatever this Python thinks of mapped forms
    return address.is_loopback


def check_legacy_bind(host: Any) -> None:
    """Refuse to serve the legacy endpoint anywhere but on loopback.

    Accepted: an IPv4 address in ``127.0.0.0/8``, ``::1`` (also as ``[::1]``) and the name ``localhost``. Every other
    address or name is refused, wildcards (``0.0.0.0``, ``::``, ``""``) included; there is no opt-in.

    Raises:
        ConfigError: reason ``legacy_a2a_server_must_bind_loopback`` (details: ``host``, cut to 64 characters).
    """
    if isinstance(host, str) and len(host) <= 253 and _bind_is_loopback(host):
        return
    shown = host[:64] if isinstance(host, str) else type(host).__name__
    raise ConfigError(
        "the legacy A2A endpoint binds only IPv4 127.0.0.0/8, ::1 or localhost",
        reason="legacy_a2a_server_must_bind_loopback",
        details={"host": shown},
    )


def _peer_is_loopback(client: Any) -> bool:
    """Whether an ASGI ``client`` (``(host, port)``) is on loopback; a dual-stack socket reports mapped IPv4."""
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _host_is_loopback(raw: str | None) -> bool:
    """Whether a ``Host`` header names a loopback host (port ignored)."""
    if not raw:
        return False
    raw = raw.strip()
    if raw.startswith("["):
        end = raw.find("]")
        name = raw[1:end] if end > 0 else ""
    else:
        name = raw.partition(":")[0]
    return bool(name) and _bind_is_loopback(name)


class _LoopbackOnly:
    """Pure-ASGI gate in front of the guard: refuse peers off loopback, and ``Host`` names that are not loopback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if not _peer_is_loopback(scope.get("client")):
                response = error_response(403, "loopback_only", message="the legacy endpoint serves loopback only")
                await response(scope, receive, send)
                return
            hosts = [v for k, v in scope.get("headers") or () if k.lower() == b"host"]
            if len(hosts) != 1 or not _host_is_loopback(hosts[0].decode("latin-1")):
                response = error_response(421, "misdirected_host", message="the Host is not a loopback name")
                await response(scope, receive, send)
                return
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)


# ---- the route -------------------------------------------------------------------------------------------------


def _answer_text(answer: Any) -> str:
    """The reply text of ``adk_actors.prompt``: its string, or the visible text of a content answer."""
    if isinstance(answer, str):
        return answer
    return validate(answer).visible_text()


def _turn_error(err: AdkError) -> Response:
    """The answer to a failed turn: the reason, a fixed message, no details (they may hold a model's error body)."""
    if isinstance(err, NameNotFound) or (isinstance(err, ActorCrashed) and err.reason == "noproc"):
        return _not_found()
    if isinstance(err, AskTimeout):
        return error_response(504, err.reason, message="the agent did not answer in time")
    status = status_for(err)
    if status == 503:
        return error_response(503, err.reason, message="the node cannot take the prompt now; retry later")
    return error_response(502, err.reason, message="the agent could not answer the prompt")


def _not_found() -> Response:
    return error_response(404, "agent_not_found", message="no agent of that name is served here")


def _fields(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(agent, prompt)`` of a request body, checked.

    Raises:
        ValidationError: ``unknown_key`` / ``missing_key`` (details: ``allowed``), ``invalid_agent_name``,
            ``invalid_value`` / ``invalid_utf8`` / ``limit_exceeded`` (details: ``key``).
    """
    if set(body) != _KEYS:
        reason = "unknown_key" if set(body) - _KEYS else "missing_key"
        raise ValidationError(
            'the body is {"agent": name, "prompt": text}', reason=reason, details={"allowed": sorted(_KEYS)}
        )
    try:
        agent = check_agent_name(body["agent"], field_name="agent")
    except AdkError:
        raise ValidationError(
            "agent must be an agent name", reason="invalid_agent_name", details={"key": "agent"}
        ) from None
    text = check_text(body["prompt"], "prompt", allow_empty=False)
    return agent, text


class _Handler:
    def __init__(self, system: Any, bounds: _Bounds, agents: frozenset[str] | None, offload: Offload) -> None:
        self.system = system
        self.bounds = bounds
        self.agents = agents
        self.offload = offload

    async def handle(self, request: Request) -> Response:
        agent, text = _fields(await read_json(request))
        if self.agents is not None and agent not in self.agents:
            return _not_found()
        try:
            answer = await self.offload.call(prompt, agent, text, timeout=self.bounds.timeout_s, system=self.system)
        except AdkError as err:
            return _turn_error(err)
        return JSONResponse({"response": _answer_text(answer)})


def _allow_list(agents: Iterable[str] | None) -> frozenset[str] | None:
    if agents is None:
        return None
    if isinstance(agents, str):
        raise ConfigError("agents is a collection of names", reason="invalid_value", details={"key": "agents"})
    names = set()
    for name in agents:
        try:
            names.add(check_agent_name(name, field_name="agents"))
        except AdkError:
            raise ConfigError("agents holds agent names", reason="invalid_value", details={"key": "agents"}) from None
    return frozenset(names)


def _everything_public(path: str) -> bool:
    return True


def legacy_a2a_app(
    system: Any,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    agents: Iterable[str] | None = None,
) -> ASGIApp:
    """The legacy ``POST /a2a/prompt`` endpoint for ``system``'s agents, as a plain ASGI app (see the module).

    Serve it only on loopback (:func:`check_legacy_bind`, :func:`start_legacy_a2a`); the app itself refuses peers
    that are not on loopback. Its thread pool is closed when the server's lifespan ends.

    Args:
        system: The node (an ``ActorSystemHandle``).
        max_body_bytes: Largest request body (413 ``body_too_large`` above it).
        timeout_s: How long one prompt may take (504 after it).
        agents: The only agent names served (others answer 404 ``agent_not_found``); ``None``: every agent.

    Raises:
        ConfigError: ``invalid_value`` (details: ``key``) for a bound outside its range or a bad allow-list.
    """
    bounds = _Bounds(max_body_bytes=max_body_bytes, timeout_s=timeout_s)
    allowed = _allow_list(agents)
    pool = Offload(max_workers=8, max_pending=64, max_iterators=1)
    handler = _Handler(system, bounds, allowed, pool)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.close()

    guarded = edge_app(
        [Route(LEGACY_PATH, handler.handle, methods=["POST"])],
        token=None,
        limits=EdgeLimits(max_body_bytes=bounds.max_body_bytes),
        public=_everything_public,
        lifespan=lifespan,
    )
    return _LoopbackOnly(guarded)


def start_legacy_a2a(
    app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, start_timeout_s: float = 10.0
) -> ServerThread:
    """Serve a :func:`legacy_a2a_app` on a thread, after :func:`check_legacy_bind` (a context manager stops it).

    Raises:
        ConfigError: ``legacy_a2a_server_must_bind_loopback``, or as
            :func:`~adk_actors.web.serve.start_in_thread` (``bind_failed``, ``server_start_failed``).
    """
    check_legacy_bind(host)
    return start_in_thread(app, host, port, start_timeout_s=start_timeout_s)
