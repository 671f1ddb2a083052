"""An A2A 1.0 server built with the official ``a2a-sdk`` (1.3.0): the peer our client is tested against.

``OfficialA2aServer`` serves the SDK's card route and JSON-RPC route (``DefaultRequestHandler``,
``InMemoryTaskStore``) with :func:`adk_actors.web.start_in_thread` on 127.0.0.1 and an ephemeral port; it is a
context manager that stops the server on exit. The executor answers by the user's text:

* anything else: one artifact ``echo: <text>``, then ``COMPLETED``;
* ``slow ...``: ``WORKING``, then waits until :meth:`OfficialA2aServer.release` (at most 10 s), then echoes;
* ``ask``: ``INPUT_REQUIRED`` with the question ``what is your name?``; the next message to that task completes it
  with ``hello, <text>`` (a multi-turn exchange);
* ``fail`` / ``reject``: ``FAILED`` / ``REJECTED`` with a status message and no artifact;
* ``big N``: an artifact of ``N`` characters (oversized answers).

Options: ``bearer`` (a set of accepted tokens: the card then declares an HTTP Bearer scheme and the RPC route answers
401 without one of them), ``interface_url`` (the card's interface URL, to publish a cross-origin interface) and
``redirect_rpc`` (the card's interface is ``/moved``, which answers 307 to the real endpoint). Every request's
method, path and ``Authorization`` header are recorded in :attr:`OfficialA2aServer.seen`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from adk_actors.web import ServerThread, start_in_thread

__all__ = ["OfficialA2aServer", "Seen"]

Scope = MutableMapping[str, Any]
Asgi = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
GATE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the server received."""

    method: str
    path: str
    authorization: str | None


def _agent_text(text: str, context: RequestContext) -> Message:
    return Message(
        message_id=f"m-{context.task_id}-{len(text)}",
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
        context_id=context.context_id,
        task_id=context.task_id,
    )


class _Gate:
    """Holds ``slow`` tasks until the test releases them (an event per waiting loop, set thread-safely)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.entered = threading.Event()

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._open:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        self.entered.set()
        try:
            await asyncio.wait_for(event.wait(), GATE_TIMEOUT_S)
        except TimeoutError:
            pass

    def release(self) -> None:
        with self._lock:
            self._open = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)


class _Executor(AgentExecutor):
    def __init__(self, gate: _Gate) -> None:
        self.gate = gate

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        assert context.task_id is not None and context.context_id is not None
        task = context.current_task
        if task is None:
            assert context.message is not None
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.add_artifact([Part(text=f"hello, {text}")], name="greeting", last_chunk=True)
            await updater.complete()
            return
        await updater.start_work()
        if text == "ask":
            await updater.requires_input(_agent_text("what is your name?", context))
            return
        if text in ("fail", "reject"):
            message = _agent_text(f"cannot {text}", context)
            await (updater.failed(message) if text == "fail" else updater.reject(message))
            return
        if text.startswith("slow"):
            await self.gate.wait()
        answer = "x" * int(text.split()[1]) if text.startswith("big ") else f"echo: {text}"
        await updater.add_artifact([Part(text=answer)], name="echo", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class OfficialA2aServer:
    """The official SDK's A2A server on 127.0.0.1 (see the module docstring); stop it with :meth:`stop`."""

    def __init__(
        self,
        *,
        bearer: set[str] | None = None,
        interface_url: str | None = None,
        redirect_rpc: bool = False,
        streaming: bool = True,
    ) -> None:
        self.bearer = bearer
        self.seen: list[Seen] = []
        self._gate = _Gate()
        self._interface_url = interface_url
        self._redirect_rpc = redirect_rpc
        self._streaming = streaming
        self._base = ""
        self._thread: ServerThread = start_in_thread(self._app())
        self.url = self._thread.url
        """``http://127.0.0.1:PORT`` (the card is at ``/.well-known/agent-card.json``, JSON-RPC at ``/``)."""
        self._base = self.url

    def _card(self) -> AgentCard:
        url = self._interface_url or (self._base + ("/moved" if self._redirect_rpc else "/"))
        card = AgentCard(
            name="official-echo",
            description="Echoes text",
            version="1.0.0",
            supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
            capabilities=AgentCapabilities(streaming=self._streaming, push_notifications=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="Echo", description="echo back", tags=["echo"])],
        )
        if self.bearer is not None:
            card.security_schemes["bearer"].CopyFrom(
                SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
            )
            card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
        return card

    def _app(self) -> Asgi:
        card = self._card()

        async def current_card(_card: AgentCard) -> AgentCard:
            return self._card()  # the interface URL names the port, known only once the socket is bound

        handler = DefaultRequestHandler(
            agent_executor=_Executor(self._gate), task_store=InMemoryTaskStore(), agent_card=card
        )

        async def moved(request: Request) -> Response:
            return RedirectResponse(self._base + "/", status_code=307)

        routes = create_agent_card_routes(card, card_modifier=current_card) + create_jsonrpc_routes(handler, "/")
        app = Starlette(routes=[Route("/moved", moved, methods=["POST"]), *routes])

        async def recording(scope: Scope, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                auth = headers.get(b"authorization")
                path = scope["path"]
                self.seen.append(Seen(scope["method"], path, auth.decode() if auth is not None else None))
                if self.bearer is not None and not path.startswith("/.well-known/"):
                    token = auth.decode().removeprefix("Bearer ") if auth is not None else ""
                    if token not in self.bearer:
                        await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                        return
            await app(scope, receive, send)

        return recording

    @property
    def rpc_calls(self) -> list[Seen]:
        """The JSON-RPC requests received (card requests excluded)."""
        return [s for s in self.seen if s.method == "POST"]

    def release(self) -> None:
        """Let every ``slow`` task (waiting or still to come) finish."""
        self._gate.release()

    def wait_slow_started(self, timeout: float = 10.0) -> bool:
        """Block until a ``slow`` task is waiting at the gate (or ``timeout`` passed); return whether one is."""
        return self._gate.entered.wait(timeout)

    def stop(self) -> None:
        self._gate.release()
        self._thread.stop()

    def __enter__(self) -> OfficialA2aServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
