"""Runner-test fixtures and tools: the emulator and agent spawner of the agent tests, a session service bound to the
shared system, readers for stored sessions and model requests, and tools that record their calls across processes.

Tools run in worker processes. The tool and gate factories below build their functions as closures (over a journal
or counter path), so cloudpickle sends them by value and a worker never imports test code; each call appends one
line to the journal or increments the ``CrossProcessCounter``.
"""

from __future__ import annotations

import contextlib
import json
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actor_tests.agents.conftest import Spawner, config_for, emu, make_spawner, spawn, unique
from adk_actors import FunctionTool, long_running, runs
from adk_actors.events import Event
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import CrossProcessCounter

__all__ = [
    "Journal",
    "Spawner",
    "config_for",
    "emu",
    "first_run_item",
    "function_responses",
    "journal_tool",
    "long_running_tool",
    "make_spawner",
    "model_contents",
    "production_gate",
    "publish_tool",
    "read_events",
    "spawn",
    "svc",
    "tool_hook_counter",
    "unique",
    "until",
]


@pytest.fixture
def svc(system: ActorSystemHandle) -> ActorSessionService:
    """The node's in-memory session service (what ``adk_actors.session_service()`` returns), bound to the shared
    system: other tests start and stop systems, so this process's default system is not necessarily it."""
    return ActorSessionService(system=system)


def read_events(service: Any, app: str, user: str, session_id: str) -> list[Event]:
    """The stored events of one session, oldest first."""
    return list(service.get_session(SessionRef(app_name=app, user_id=user, session_id=session_id)).events)


def first_run_item(run_id: str, system: ActorSystemHandle) -> runs.RunItem:
    """The first item a run publishes (the subscription is closed right after)."""
    items = runs.subscribe(run_id, system=system)
    with contextlib.closing(items):
        return next(items)


def until(check: Callable[[], Any], seconds: float, what: str) -> Any:
    """Call ``check`` again and again until it is truthy and return its value; checks ask the node, so each try is
    a real round trip (no sleep stands in for a condition)."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
    return value


def model_contents(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``contents`` of one logged emulator request."""
    contents: list[dict[str, Any]] = request["body"]["contents"]
    return contents


def function_responses(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``functionResponse`` the model was sent in one logged emulator request."""
    return [p["functionResponse"] for c in model_contents(request) for p in c["parts"] if "functionResponse" in p]


class Journal:
    """Lines appended by tools in any process (one per call), read back by the test."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "journal.txt")

    def lines(self) -> list[str]:
        try:
            return Path(self.path).read_text().splitlines()
        except FileNotFoundError:
            return []

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path)


def journal_tool(
    journal: Journal, name: str, *, hold_s: float = 0.0, parallel_safe: bool = False, requires_confirmation: Any = False
) -> FunctionTool:
    """A tool ``name(city)`` that journals ``{"tool", "city", "start", "end"}`` per call; ``hold_s`` keeps it
    running that long (a measurement window in which an overlap with another call would show)."""
    path = journal.path

    def tool(city: str) -> dict:
        """Look something up for a city."""
        start = time.time()
        if hold_s:
            time.sleep(hold_s)
        line = json.dumps({"tool": name, "city": city, "start": start, "end": time.time()})
        with open(path, "a") as fh:  # one short append per call: lines never interleave
            fh.write(line + "\n")
        return {"city": city, "ok": True}

    return FunctionTool(
        tool,
        name=name,
        description="Look something up for a city.",
        parallel_safe=parallel_safe,
        requires_confirmation=requires_confirmation,
    )


def publish_tool(counter: CrossProcessCounter, *, requires_confirmation: Any = True) -> FunctionTool:
    """``publish_release(environment)``: counts its executions; confirmation-gated by default."""
    path = counter.path

    def publish_release(environment: str) -> dict:
        """Publish the prepared release to an environment."""
        CrossProcessCounter(path).incr()
        return {"published": environment}

    return FunctionTool(publish_release, requires_confirmation=requires_confirmation)


def long_running_tool(counter: CrossProcessCounter, operation_id: str = "export-42") -> FunctionTool:
    """``start_export(name)``: counts its executions and suspends as the long-running ``operation_id``."""
    path = counter.path

    def start_export(name: str) -> dict:
        """Start an export."""
        CrossProcessCounter(path).incr()
        return long_running(operation_id, "The external export is running.")

    return FunctionTool(start_export)


def tool_hook_counter(counter: CrossProcessCounter) -> Any:
    """An agent callback (for the ``callbacks`` config) whose ``before_tool`` hook counts its runs in ``counter``;
    it lets every call go on. A plain object holding a closure, so it travels to workers by value."""
    path = counter.path

    def before_tool(tool_name: str, args: dict[str, Any], context: dict[str, Any]) -> None:
        CrossProcessCounter(path).incr()

    return types.SimpleNamespace(before_tool=before_tool)


def production_gate() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """An argument-dependent confirmation gate: only production needs a human."""

    def gate(args: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"required": args.get("environment") == "production", "hint": "Publishing to production is visible."}

    return gate


@pytest.fixture
def counter(tmp_path: Path) -> CrossProcessCounter:
    return CrossProcessCounter(tmp_path / "count")


@pytest.fixture
def agent_factory(emu: Any, spawn: Spawner) -> Callable[..., str]:
    """``agent_factory(prefix, tools=(), **config)``: a uniquely named agent on the emulator; returns its name."""

    def make(prefix: str, tools: Any = (), **config: Any) -> str:
        name = unique(prefix)
        spawn(name, config_for(emu, **config), tools)
        return name

    return make
