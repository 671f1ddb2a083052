"""Grounding under a Runner with the emulator's grounding script: the reference's envelope is on the partial,
tool-call and final events whose candidates carried grounding (streamed or not), and the thought signature has its
own field."""

from __future__ import annotations

from typing import Any

import pytest

from actor_tests.runner.conftest import read_events, svc  # noqa: F401 - fixture
from adk_actors import Runner
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService

from .conftest import Spawner, config_for, unique
from .support import weather_tool

GROUNDED_CALL = {
    "when": {"has_function_response": False},
    "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Paris"}}], "grounding": True},
}
GROUNDED_ANSWER = {
    "when": {"has_function_response": True},
    "respond": {"text": "Paris is sunny today. It stays dry.", "grounding": True, "grounding_chunks": 2},
}


def _envelope(event: Any) -> dict[str, Any]:
    envelope = event.provider_metadata
    assert envelope is not None, f"no grounding envelope on {event!r}"
    assert {k: envelope[k] for k in ("schema_version", "provider", "type")} == {
        "schema_version": 1,
        "provider": "gemini",
        "type": "google_search_grounding",
    }
    metadata: dict[str, Any] = envelope["metadata"]
    return metadata


@pytest.mark.parametrize("streaming_mode", ["none", "text"])
def test_grounding_reaches_the_tool_call_and_final_events(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,  # noqa: F811
    streaming_mode: str,
) -> None:
    emu.set_script({"rules": [GROUNDED_CALL, GROUNDED_ANSWER]})
    name = unique("Grounded")
    spawn(name, config_for(emu, builtin_tools=["google_search"]), [weather_tool()])
    sid = unique("s")
    runner = Runner(name, "grounding", svc, system=system, streaming_mode=streaming_mode)
    assert runner.run("u1", sid, "Weather in Paris?") == "Paris is sunny today. It stays dry."
    events = [e for e in read_events(svc, "grounding", "u1", sid) if not e.partial]
    [call_event] = [
        e for e in events if e.content is not None and any(p.type == "function_call" for p in e.content.parts)
    ]
    assert _envelope(call_event)["webSearchQueries"] == ["Weather in Paris?"]
    final = events[-1]
    assert final.is_final
    metadata = _envelope(final)
    assert metadata["webSearchQueries"] and len(metadata["groundingChunks"]) == 2  # combined over the stream
    assert "thought_signature" not in (final.provider_metadata or {})
    [tool_event] = [
        e for e in events if e.content is not None and any(p.type == "function_response" for p in e.content.parts)
    ]
    assert tool_event.provider_metadata is None  # no candidate: no envelope


def test_grounding_reaches_the_partial_events_of_a_content_stream(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,  # noqa: F811
) -> None:
    # The answer streams as several frames; the grounding lists spread over its last two.
    emu.set_script({"rules": [GROUNDED_CALL, GROUNDED_ANSWER]})
    name = unique("GroundedPartials")
    spawn(name, config_for(emu, builtin_tools=["google_search"]), [weather_tool()])
    sid = unique("s")
    runner = Runner(name, "grounding", svc, system=system, streaming_mode="content")
    assert runner.run("u1", sid, "Weather in Paris?") == "Paris is sunny today. It stays dry."
    events = read_events(svc, "grounding", "u1", sid)
    partials = [e for e in events if e.partial]
    assert partials, "the content stream stored no partial events"
    grounded = [e for e in partials if e.provider_metadata is not None]
    assert grounded, "no partial event carries the grounding its frames brought"
    assert _envelope(grounded[-1])["webSearchQueries"]
    final = [e for e in events if e.is_final][-1]
    assert len(_envelope(final)["groundingChunks"]) == 2
