"""Fixtures and helpers for the ``/dev/v1`` developer API over real parts.

* ``dev_emu`` (module): a Gemini emulator; every ``dev_server`` resets it to :func:`script_emulator`'s rules.
* ``dev_agent`` (module): an agent on the shared node with ``get_weather(city)`` and the gated ``book_trip(city)``
  (``requires_confirmation=True``), stopped after the module.
* ``dev_server`` (per test): ``dev_app`` for that node served by uvicorn on 127.0.0.1 (``start_in_thread``), with
  an httpx client holding the token; a :class:`DevServer` (``.url``, ``.token``, ``.system``, ``.emu``,
  ``.agent``), stopped after the test.

The fixtures reach the tests of ``actor_tests/web`` through its ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from adk_actors import FunctionTool, spawn_agent, stop_agent
from adk_actors.devapi import DevOps
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.web import DevToken, EdgeLimits, ServerThread, start_in_thread
from adk_actors.web.dev import dev_app

TOKEN = "dev-api-" + secrets.token_hex(16)
"""This session's developer token (random, so a leak check cannot pass by accident)."""
APP = "dev"
USER = "dev-user"
"""The app and user a run started without them uses."""
SLOW_MS = 30_000
"""The model delay of an input containing ``slow`` (far longer than any test waits)."""


def get_weather(city: str) -> dict[str, str]:
    """The forecast for a city."""
    return {"city": city, "forecast": "sunny"}


def book_trip(city: str) -> dict[str, str]:
    """Book a trip to a city (the user confirms first)."""
    return {"booked": city}


def script_emulator(emu: Emulator, *, answer_delay_ms: int = 0) -> None:
    """Script ``emu`` for the dev agent.

    * input containing ``slow``: the model answers after :data:`SLOW_MS`;
    * ``book ...``: a ``book_trip(Paris)`` call (gated), then ``Booked.``;
    * ``weather ...``: a ``get_weather(Tokyo)`` call, then ``The weather in Tokyo is sunny.`` (the answer after the
      tool delayed by ``answer_delay_ms``);
    * anything else: ``You said: <input>``.
    """
    emu.set_script(
        {
            "rules": [
                {"when": {"user_text_contains": "slow"}, "respond": {"text": "finally", "delay_ms": SLOW_MS}},
                {
                    "when": {"user_text_contains": "book", "has_function_response": False},
                    "respond": {"function_calls": [{"name": "book_trip", "args": {"city": "Paris"}}]},
                },
                {"when": {"user_text_contains": "book", "has_function_response": True}, "respond": {"text": "Booked."}},
                {
                    "when": {"user_text_contains": "weather", "has_function_response": False},
                    "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
                },
                {
                    "when": {"has_function_response": True},
                    "respond": {"text": "The weather in Tokyo is {response.forecast}.", "delay_ms": answer_delay_ms},
                },
                {"when": {}, "respond": {"text": "You said: {user_text}"}},
            ]
        }
    )


def until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it is truthy (returned), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} not reached before the deadline"
        threading.Event().wait(0.01)
    return value


@dataclass(frozen=True, slots=True)
class SseItem:
    """One parsed server-sent event."""

    id: int | None
    event: str
    data: Any


def read_sse(response: httpx.Response, stop_after: int | None = None) -> list[SseItem]:
    """The events of a streaming ``response`` until it ends (or after ``stop_after`` events with an id)."""
    items: list[SseItem] = []
    fields: dict[str, str] = {}
    with_id = 0
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(": ")
            fields[name] = fields[name] + "\n" + value if name == "data" and name in fields else value
            continue
        if not fields:
            continue
        raw_id = fields.get("id")
        items.append(SseItem(None if raw_id is None else int(raw_id), fields["event"], json.loads(fields["data"])))
        fields = {}
        with_id += raw_id is not None
        if stop_after is not None and with_id >= stop_after:
            break
    return items


@dataclass
class DevServer:
    """One served ``dev_app`` over the shared node, and what a test needs to drive and check it."""

    url: str
    token: str
    system: ActorSystemHandle
    emu: Emulator
    agent: str
    server: ServerThread
    client: httpx.Client
    """Sends the token; base URL is :attr:`url`."""
    ops: DevOps
    """The same operations, for checks that bypass HTTP (the session service is ``ops.sessions``)."""
    responses: list[httpx.Response] = field(default_factory=list)
    """Every non-streamed response :attr:`client` received (for leak checks)."""

    def script(self, *, answer_delay_ms: int = 0) -> None:
        """Re-script the emulator (:func:`script_emulator`)."""
        script_emulator(self.emu, answer_delay_ms=answer_delay_ms)

    def start_run(self, text: str, **body: Any) -> dict[str, Any]:
        """``POST /dev/v1/runs`` for the dev agent; the 201 body."""
        answer = self.client.post("/dev/v1/runs", json={"agent": self.agent, "input": text, **body})
        assert answer.status_code == 201, answer.text
        return dict(answer.json())

    def events(self, run_id: str, *, last_event_id: str | None = None, stop_after: int | None = None) -> list[SseItem]:
        """The SSE events of a run (from ``last_event_id``) until the stream ends or ``stop_after`` events."""
        headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
        with self.client.stream("GET", f"/dev/v1/runs/{run_id}/events", headers=headers) as answer:
            assert answer.status_code == 200, answer.read().decode()
            assert answer.headers["content-type"].startswith("text/event-stream")
            return read_sse(answer, stop_after)

    def outcome(self, run_id: str) -> dict[str, Any]:
        """The run's terminal outcome, read to the end of its event stream."""
        items = self.events(run_id)
        assert items and items[-1].event == "outcome", items
        return dict(items[-1].data)

    def stored_events(self, session_id: str, user_id: str = USER, app_name: str = APP) -> list[Any]:
        """The session's events as the session service holds them."""
        ref = SessionRef(app_name=app_name, user_id=user_id, session_id=session_id)
        return list(self.ops.sessions.get_session(ref).events)

    def state(self, session_id: str, user_id: str = USER, app_name: str = APP) -> dict[str, Any]:
        """The session's state as the session service holds it."""
        ref = SessionRef(app_name=app_name, user_id=user_id, session_id=session_id)
        return dict(self.ops.sessions.get_session(ref).state)

    def session_count(self, app_name: str = APP) -> int:
        """How many sessions the app has (all users)."""
        return len(self.ops.sessions.list_sessions(app_name=app_name))


@contextlib.contextmanager
def serve_dev(
    system: ActorSystemHandle, emu: Emulator, agent: str, *, limits: EdgeLimits | None = None, a2a: Any = None
) -> Iterator[DevServer]:
    """``dev_app`` for ``system`` served on 127.0.0.1 with a token-holding client; stopped on exit. With ``a2a`` (an
    ``A2aApp``) the server also serves it, composed as ``adk serve --a2a`` does."""
    ops = DevOps(system)
    app: Any = dev_app(system, token=DevToken(TOKEN), limits=limits, a2a=a2a)
    if a2a is not None:
        from adk_actors.web.process import _Composite

        app = _Composite(app, a2a=a2a)
    server = start_in_thread(app, "127.0.0.1", 0, limits=limits)
    client, responses = recording_client(server.url, TOKEN)
    try:
        yield DevServer(server.url, TOKEN, system, emu, agent, server, client, ops, responses)
    finally:
        client.close()
        assert server.stop(), "the dev server thread outlived its test"


@pytest.fixture(scope="module")
def dev_emu() -> Iterator[Emulator]:
    """The module's emulator (each ``dev_server`` re-scripts it)."""
    with Emulator() as emu:
        script_emulator(emu)
        yield emu


@pytest.fixture(scope="module")
def dev_agent(system: ActorSystemHandle, dev_emu: Emulator) -> Iterator[str]:
    """The name of an agent on the shared node with ``get_weather`` and the gated ``book_trip``."""
    name = f"DevWeather_{uuid.uuid4().hex[:8]}"
    config = {"provider": "gemini", "base_url": dev_emu.base_url, "api_key": "test-key"}
    spawn_agent(
        name, config, [FunctionTool(get_weather), FunctionTool(book_trip, requires_confirmation=True)], system=system
    )
    yield name
    stop_agent(name, system=system)


@pytest.fixture
def dev_server(system: ActorSystemHandle, dev_emu: Emulator, dev_agent: str) -> Iterator[DevServer]:
    """A served ``dev_app`` over the shared node with the dev agent, its emulator freshly scripted."""
    script_emulator(dev_emu)
    dev_emu.clear_requests()
    with serve_dev(system, dev_emu, dev_agent) as served:
        yield served


def recording_client(url: str, token: str) -> tuple[httpx.Client, list[httpx.Response]]:
    """An ``httpx`` client that sends the bearer ``token`` to ``url`` and keeps every non-streamed response it
    received (for the leak checks)."""
    responses: list[httpx.Response] = []

    def keep(response: httpx.Response) -> None:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.read()
            responses.append(response)

    client = httpx.Client(
        base_url=url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30.0,
        trust_env=False,
        event_hooks={"response": [keep]},
    )
    return client, responses
