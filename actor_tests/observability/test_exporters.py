"""Observation exporters (``observability={"exporters": [...]}``): validation, the envelopes they get through the
turn engine, content capture, failure policies and the async hand-off (``delivery="async"``).

The engine is driven in process (scripted model and tools); ``test_runner_plugins.py``-style node tests of the same
exporters through worker processes are in ``actor_tests/observability/test_exporters_node.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.agents.test_turn_engine import SCOPE, agent, lookup, runner_turn
from actor_tests.agents.turn_driver import call, calls, run
from actor_tests.observability import exporter_support as support
from adk_actors.agents.turn.effects import Telemetry
from adk_actors.agents.turn.options import runner_options
from adk_actors.errors import ConfigError, PluginError
from adk_actors.observability.exporters import ENVELOPE_SCHEMA, MAX_EXPORTERS, build_envelope
from adk_actors.sessions import InMemorySessionService
from adk_actors.tools import FunctionTool

JOURNAL = f"{support.__name__}:JournalExporter"


def exporter(journal: Path, **more: Any) -> dict[str, Any]:
    return {"id": "journal", "exporter": JOURNAL, "inline": True, "config": {"journal": str(journal)}, **more}


def tool_turn(journal: Path, text: str = "hi", **observability: Any) -> Any:
    """A Runner turn that calls ``lookup`` once, then answers, with ``observability``."""
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo-k3"}, "c1")), "It is sunny-v9."]
    turn = runner_turn(plan, InMemorySessionService(), text, observability=observability)
    return run(turn, model=script)


def test_a_sync_exporter_gets_one_metadata_envelope_per_lifecycle_point_in_order(tmp_path: Path) -> None:
    journal = tmp_path / "envelopes.jsonl"
    driver = tool_turn(journal, "private-input-q2", exporters=[exporter(journal)], attributes={"env": "dev"})
    assert driver.value.output == "It is sunny-v9."
    envelopes = support.read_journal(str(journal))
    hooks = [e["hook"] for e in envelopes]
    assert hooks[:3] == ["on_user_message", "before_run", "before_agent"]
    assert hooks.count("before_model") == 2 and hooks.count("after_model") == 2
    assert hooks.index("before_tool") < hooks.index("after_tool") < len(hooks) - 1
    assert hooks[-2:] == ["after_agent", "on_event"]  # after_run is a notification, handed out after the result
    for envelope in envelopes:
        assert envelope["schema"] == ENVELOPE_SCHEMA and envelope["content_captured"] is False
        assert envelope["run_id"] == "run-1" and envelope["session_id"] == SCOPE["session_id"]
        assert envelope["attributes"] == {"env": "dev"} and "content" not in envelope
    tool = next(e for e in envelopes if e["hook"] == "before_tool")
    assert (tool["tool"], tool["call_id"]) == ("lookup", "c1")
    final = envelopes[-1]
    assert final["event"]["is_final"] is True
    text = journal.read_text()
    for content in ("private-input-q2", "Oslo-k3", "sunny-v9"):
        assert content not in text, "metadata only: no input, argument or answer"


def test_capture_content_puts_the_pruned_hook_content_in_the_envelopes_only(tmp_path: Path) -> None:
    journal = tmp_path / "envelopes.jsonl"
    tool_turn(journal, "visible-input-q2", exporters=[exporter(journal)], capture_content=True)
    envelopes = support.read_journal(str(journal))
    assert all(e["content_captured"] is True for e in envelopes)
    first = envelopes[0]
    assert first["hook"] == "on_user_message" and "visible-input-q2" in json.dumps(first["content"])
    tool = next(e for e in envelopes if e["hook"] == "before_tool")
    assert tool["content"]["args"] == {"city": "Oslo-k3"}


def test_captured_content_is_secret_pruned(tmp_path: Path) -> None:
    journal = tmp_path / "envelopes.jsonl"
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo", "api_key": "AIzaSyD-not-a-real-key-0000000000000"}, "c1")), "ok"]
    turn = runner_turn(
        plan, InMemorySessionService(), observability={"exporters": [exporter(journal)], "capture_content": True}
    )
    run(turn, model=script)
    assert "AIzaSyD-not-a-real-key" not in journal.read_text()


def test_a_failing_exporter_is_counted_when_open_and_stops_the_run_when_closed(tmp_path: Path) -> None:
    failing = {"id": "down", "exporter": f"{support.__name__}:FailingExporter", "inline": True}
    opened = tool_turn(tmp_path / "x", exporters=[failing])
    assert opened.value.output == "It is sunny-v9."
    failed = [ev for t in opened.of(Telemetry) for ev in t.events if ev.name == "plugin.failed"]
    assert failed and {e.metadata["plugin"] for e in failed} == {"observability:down"}
    assert {e.metadata["reason"] for e in failed} == {"plugin_raised"}
    closed = tool_turn(tmp_path / "x", exporters=[{**failing, "failure_policy": "closed"}])
    assert isinstance(closed.error, PluginError) and closed.error.details["plugin"] == "observability:down"
    assert "collector refused" not in str(closed.error) and "collector refused" not in repr(closed.error.details)


def test_exporters_run_after_the_runners_own_plugins_as_observe_only_metadata_plugins(tmp_path: Path) -> None:
    own = {
        "id": "own",
        "plugin": "adk_actors.plugins.builtins:MetadataLogger",
        "mode": "observe",
        "failure_policy": "open",
    }
    options = runner_options(plugins=[own], observability={"exporters": [exporter(tmp_path / "j")]})
    assert options.plugins is not None
    assert [p.id for p in options.plugins.plugins] == ["own", "observability:journal"]
    added = options.plugins.plugins[1]
    assert added.metadata_only is True and added.mode == "observe" and added.inline is True
    captured = runner_options(observability={"exporters": [exporter(tmp_path / "j")], "capture_content": True})
    assert captured.plugins is not None and captured.plugins.plugins[0].metadata_only is False


def test_async_delivery_without_a_bus_fails_closed_or_goes_on_open(tmp_path: Path) -> None:
    closed = tool_turn(tmp_path / "x", delivery="async", failure_policy="closed")
    assert isinstance(closed.error, PluginError) and closed.error.details["plugin"] == "observability:bus"
    opened = tool_turn(tmp_path / "x", delivery="async")
    assert opened.value.output == "It is sunny-v9."


@pytest.mark.parametrize(
    ("observability", "reason", "key"),
    [
        (
            {"delivery": "async", "exporters": [{"id": "a", "exporter": JOURNAL}]},
            "exporters_in_async_mode",
            "observability.exporters",
        ),
        ({"capture_content": True}, "invalid_value", "observability.capture_content"),
        ({"capture_content": "yes", "exporters": []}, "invalid_value", "observability.capture_content"),
        ({"delivery": "later"}, "invalid_value", "observability.delivery"),
        ({"delivery": "async", "failure_policy": "maybe"}, "invalid_value", "observability.failure_policy"),
        ({"exporters": {"id": "a"}}, "invalid_value", "observability.exporters"),
        (
            {"exporters": [{"id": "a", "exporter": JOURNAL, "colour": 1}]},
            "unknown_key",
            "observability.exporters.colour",
        ),
        ({"exporters": [{"id": "a"}]}, "invalid_value", "observability.exporters"),
        (
            {"exporters": [{"id": "a", "exporter": "no.such.module:X"}]},
            "plugin_not_importable",
            "observability.exporters",
        ),
        (
            {"exporters": [{"id": "a", "exporter": f"{support.__name__}:NotAnExporter"}]},
            "invalid_value",
            "observability.exporters",
        ),
        (
            {"exporters": [{"id": f"e{i}", "exporter": JOURNAL} for i in range(MAX_EXPORTERS + 1)]},
            "too_many_exporters",
            "observability.exporters",
        ),
    ],
)
def test_a_bad_exporter_configuration_is_refused_when_the_runner_is_built(
    observability: dict[str, Any], reason: str, key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        runner_options(observability=observability)
    assert info.value.reason == reason and info.value.details["key"] == key


def test_duplicate_exporter_ids_and_a_bad_timeout_are_refused_like_plugin_descriptors() -> None:
    twice = [{"id": "a", "exporter": JOURNAL}, {"id": "a", "exporter": JOURNAL}]
    with pytest.raises(ConfigError) as info:
        runner_options(observability={"exporters": twice})
    assert info.value.reason == "duplicate_plugin_id"
    with pytest.raises(ConfigError) as info:
        runner_options(observability={"exporters": [{"id": "a", "exporter": JOURNAL, "timeout_ms": 120_001}]})
    assert info.value.reason == "limit_exceeded" and info.value.details["key"] == "timeout_ms"


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.lists(st.integers(), max_size=2))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["exporters", "delivery", "failure_policy", "capture_content", "attributes", "x"]),
        _scalars,
        max_size=5,
    )
)
def test_any_observability_mapping_is_accepted_or_refused_with_a_config_error(value: dict[str, Any]) -> None:
    try:
        runner_options(observability=value)
    except ConfigError as err:
        assert err.details.get("key", "").startswith("observability")


def test_an_envelope_reads_the_trace_from_the_hook_context_and_keeps_reason_tags() -> None:
    context = {
        "hook": "on_tool_error",
        "run_id": "r",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "error": {"reason": "job_timeout", "message": "private text"},
        "args": {"city": "x"},
    }
    envelope = build_envelope(context, attributes={}, capture_content=False)
    assert envelope["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" and envelope["span_id"] == "00f067aa0ba902b7"
    assert envelope["reason"] == "job_timeout" and "private text" not in json.dumps(envelope)
