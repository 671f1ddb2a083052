"""Through a real node: host processes configure span export from the node's settings, and the telemetry hub's
metrics after real agent turns reach ``snapshot()`` and ``adk status``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.observability.emitter import EmitSpan
from actor_tests.observability.otlp_receiver import OtlpReceiver
from adk_actors import observability, telemetry
from adk_actors.agents import prompt, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool

ADK = str(Path(sys.executable).with_name("adk"))


def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    return {"city": city, "forecast": "sunny"}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def test_a_host_process_exports_its_spans_as_the_node_settings_say(
    receiver: OtlpReceiver, make_system: Callable[..., ActorSystemHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The node's boot process hands these settings to every actor process it forks (node.preflight).
    handle = make_system(otel_endpoint=receiver.url, otel_service_name="node-under-test")
    try:
        ref = handle.spawn("actor_tests.observability.emitter.SpanEmitter", id=f"emitter-{uuid.uuid4().hex[:8]}")
        caller = observability.new_trace()
        answer = handle.ask(ref, EmitSpan(name="host span", parent=caller), 30)
    finally:
        handle.stop()
    assert answer["pid"] != os.getpid() and answer["flushed"] is True
    assert answer["stats"]["configured"] is True and answer["stats"]["exported"] == 1
    (span,) = receiver.spans
    assert (span.name, span.trace_id, span.parent_span_id) == ("host span", caller.trace_id, caller.span_id)
    assert span.span_id == answer["span_id"] and span.resource["service.name"] == "node-under-test"


def test_snapshot_and_adk_status_show_turn_and_model_call_counts_after_agent_turns(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    name = f"Metrics_{uuid.uuid4().hex[:8]}"
    agent = spawn_agent(
        name,
        {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"},
        [FunctionTool(get_weather)],
        system=system,
    )
    try:
        with telemetry.attach("agent.prompt.stop", system=system) as sub:
            for _ in range(2):
                prompt(agent, "What is the weather in Tokyo?", timeout=30, system=system)
            # The hub records an event's metrics before it fans the event out: once both stops arrived here,
            # both turns are counted.
            seen = 0
            while seen < 2:
                event = sub.next(10)
                seen += event.metadata.get("agent") == name
    finally:
        stop_agent(agent, system=system)
    snap = observability.snapshot(system)
    turns = {json.dumps(s["labels"], sort_keys=True): s["value"] for s in snap["instruments"]["adk.turns"]["series"]}
    assert turns[json.dumps({"agent": name, "outcome": "ok"}, sort_keys=True)] == 2
    calls = [s for s in snap["instruments"]["adk.model.calls"]["series"] if s["labels"].get("agent") == name]
    assert sum(s["value"] for s in calls) == 4  # per turn: the call that asks for the tool, then the answer
    tools = [s for s in snap["instruments"]["adk.tool.calls"]["series"] if s["labels"].get("agent") == name]
    assert tools == [{"labels": {"agent": name, "outcome": "ok", "tool": "get_weather"}, "value": 2}]
    assert "Tokyo" not in json.dumps(snap) and "sunny" not in json.dumps(snap)

    out = subprocess.run(
        [ADK, "status", "--port", str(system.port)], capture_output=True, text=True, timeout=60, check=True
    )
    metrics = json.loads(out.stdout)["metrics"]
    assert metrics["adk.turns"][f"agent={name},outcome=ok"] == 2
    assert metrics["overflowed"] == 0


def test_status_says_metrics_are_unavailable_when_the_node_has_no_telemetry_hub() -> None:
    from adk_actors.cli.main import node_metrics
    from adk_actors.errors import NameNotFound

    class NoHub:
        def ask(self, *args: object) -> object:
            raise NameNotFound("no telemetry hub", reason="not_found")

    assert node_metrics(NoHub()) == {"unavailable": "not_found"}


def test_async_delivery_reaches_the_nodes_bus_and_an_oversized_envelope_is_dropped_and_counted(
    make_system: Callable[..., ActorSystemHandle], monkeypatch: pytest.MonkeyPatch, emu: Emulator, tmp_path: Path
) -> None:
    from adk_actors import Runner
    from adk_actors.observability.bus import BUS_ENV
    from adk_actors.sessions.actor import ActorSessionService

    # node.preflight writes the bus into this process's environment for the node's processes; restore it after.
    monkeypatch.setenv(BUS_ENV, "")
    envelopes = str(tmp_path / "bus-envelopes.jsonl")
    bus = {
        "exporters": [
            {
                "id": "journal",
                "exporter": "actor_tests.observability.exporter_support:JournalExporter",
                "config": {"journal": envelopes},
            }
        ],
        "max_event_bytes": 4096,
        "batch_size": 8,
    }
    handle = make_system(observability_bus=bus)
    name = f"Bussed_{uuid.uuid4().hex[:8]}"
    agent = spawn_agent(name, {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}, system=handle)
    try:
        svc = ActorSessionService(system=handle)
        quiet = Runner(name, "bus_app", svc, system=handle, observability={"delivery": "async"})
        quiet.run("u1", "s-meta", "Hello, private-text-b3.")
        seen = until_journal(envelopes, lambda got: any(e["hook"] == "after_run" for e in got))
        assert {e["session_id"] for e in seen} == {"s-meta"} and seen[0]["hook"] == "on_user_message"
        assert "private-text-b3" not in json.dumps(seen)

        loud = Runner(name, "bus_app", svc, system=handle, observability={"delivery": "async", "capture_content": True})
        # Its input (and the emulator's echo of it) makes every envelope that carries them larger than 4096 bytes.
        loud.run("u1", "s-content", "x" * 6000)
        later = until_journal(
            envelopes, lambda got: any(e.get("session_id") == "s-content" and e["hook"] == "before_agent" for e in got)
        )
        mine = [e["hook"] for e in later if e.get("session_id") == "s-content"]
        assert mine[0] == "before_run" and "on_user_message" not in mine and "after_run" not in mine
        assert all(e["content_captured"] for e in later if e.get("session_id") == "s-content")
    finally:
        stop_agent(agent, system=handle)

    def dropped() -> float:
        series = observability.snapshot(handle)["instruments"].get("adk.observability.dropped", {}).get("series", [])
        return sum(s["value"] for s in series if s["labels"].get("reason") == "bus.event_too_large")

    deadline = time.monotonic() + 30
    while not dropped():
        assert time.monotonic() < deadline, "the bus drop reached the node's metrics"


def until_journal(path: str, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The journal's envelopes once ``done`` holds for them (the bus delivers in the background)."""
    from actor_tests.observability import exporter_support

    deadline = time.monotonic() + 30
    while not done(got := exporter_support.read_journal(path)):
        assert time.monotonic() < deadline, f"envelopes in {path}: {[(e['hook'], e.get('session_id')) for e in got]}"
    return got
