"""Tools used by the agent tests (module level, so workers import them by name)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adk_actors.tools import FunctionTool, ToolContext


def get_weather(city: str) -> dict:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return {"city": city, "forecast": "sunny"}


def explode(city: str) -> dict:
    """Get the weather for a city (always fails)."""
    raise RuntimeError(f"secret internal detail for {city}")


def hang(city: str) -> dict:
    """Get the weather for a city (never returns in time)."""
    time.sleep(3600)
    return {"city": city}


def record(city: str, tool_context: ToolContext) -> dict:
    """Record the call start and end in the journal named by the city argument (a file path)."""
    path = Path(city)
    with path.open("a") as fh:
        fh.write(f"start {tool_context.function_call_id}\n")
    time.sleep(0.2)  # widens the window in which an unwanted overlap would show in the journal
    with path.open("a") as fh:
        fh.write(f"end {tool_context.function_call_id}\n")
    return {"ok": True}


def weather_tool() -> FunctionTool:
    return FunctionTool(get_weather)


def whoami(city: str, tool_context: ToolContext) -> dict:
    """Report what the tool context carries."""
    return {
        "city": city,
        "user": tool_context.state.get("user:name"),
        "agent_is_set": bool(tool_context.agent_name),
        "session": tool_context.session_id,
    }


def greeting_provider(scope: dict) -> str:
    """A dynamic instruction provider (runs in a worker)."""
    return f"Greet {scope['state'].get('user:name', 'stranger')} on behalf of {scope['agent']}."


def team_provider(scope: dict) -> str:
    return f"Team root for {scope['session_id'] or 'no session'}."


def failing_provider(scope: dict) -> str:
    raise KeyError("private detail")


def tool_pid(city: str) -> dict:
    """Report the process the tool runs in."""
    return {"pid": os.getpid()}


class PlainProvider:
    """A custom model provider (the reference's ``generate/3`` + ``stream/4`` only): it answers JSON saying whether
    the request asked for structured output. ``structured=True`` makes it declare the capability."""

    def __init__(self, structured: bool = False) -> None:
        self.structured = structured

    def capabilities(self) -> dict[str, Any]:
        return {"structured_output": True} if self.structured else {}

    def generate(
        self, config: Mapping[str, Any], history: Sequence[Any], tools: Sequence[Any] = (), *, cancel: Any = None
    ) -> str:
        asked = "response_json_schema" in (config.get("generation_config") or {})
        return json.dumps({"answer": "structured" if asked else "plain"})

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any],
        on_delta: Callable[[str], None],
        *,
        cancel: Any = None,
    ) -> str:
        text = self.generate(config, history, tools)
        on_delta(text)
        return text


def read_json_line(fd: int, timeout: float = 30.0) -> dict[str, Any]:
    """One JSON line from a non-blocking FIFO reader (a callback in a worker writes it); fails after ``timeout``."""
    import select
    import time

    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "nothing was written to the FIFO"
        try:
            data += os.read(fd, 65536)
        except BlockingIOError:  # readiness without data (a writer opened or closed): wait again
            continue
    line: dict[str, Any] = json.loads(data)
    return line


DELEGATION_RULES = [
    {
        "when": {
            "system_text_contains": "Delegate research",
            "has_function_response": False,
            "tool_declared": "Search*",
        },
        "respond": {"function_calls": [{"name": "{tool}", "args": {"prompt": "{user_text}"}}]},
    },
    {"when": {"has_function_response": True}, "respond": {"text": "Coordinator summary: {response_text}"}},
    {"when": {"system_text_contains": "Research the requested"}, "respond": {"text": "Research notes on {user_text}"}},
]
"""Emulator rules of a coordinator that delegates to a research agent (a sub-agent or an AgentTool named Search*)."""
