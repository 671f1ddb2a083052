"""Bounded metrics: instrument and series caps with explicit overflow, and the telemetry-event mapping."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.observability.metrics import (
    MAX_LABEL_CHARS,
    OVERFLOW_COUNTER,
    OVERFLOW_HISTOGRAM,
    OVERFLOW_LABELS,
    MetricsRegistry,
    compact,
    record_event,
)


def _series(snapshot: dict, name: str) -> dict[str, object]:
    inst = snapshot["instruments"][name]
    key = "value" if inst["kind"] == "counter" else "count"
    return {",".join(f"{k}={v}" for k, v in sorted(s["labels"].items())): s[key] for s in inst["series"]}


def test_counters_and_histograms_keep_one_series_per_label_set() -> None:
    reg = MetricsRegistry()
    reg.counter("adk.turns").add(1, {"agent": "A", "outcome": "ok"})
    reg.counter("adk.turns").add(2, {"outcome": "ok", "agent": "A"})  # label order does not matter
    reg.counter("adk.turns").add(1, {"agent": "B", "outcome": "ok"})
    reg.counter("adk.turns").add(-1, {"agent": "B", "outcome": "ok"})  # ignored: counters only grow
    for value in (0.5, 3, 12, 12, 90000):
        reg.histogram("adk.model.duration").record(value, {"model": "m"})
    snap = reg.snapshot()
    assert _series(snap, "adk.turns") == {"agent=A,outcome=ok": 3, "agent=B,outcome=ok": 1}
    (hist,) = snap["instruments"]["adk.model.duration"]["series"]
    assert (hist["count"], hist["sum"], hist["min"], hist["max"]) == (5, 90027.5, 0.5, 90000)
    bounds = snap["instruments"]["adk.model.duration"]["bounds"]
    assert sum(hist["buckets"]) == 5 and len(hist["buckets"]) == len(bounds) + 1
    assert hist["buckets"][bounds.index(25)] == 2  # both 12s fall in (10, 25]
    reg.histogram("edge").record(10, {})
    edge = reg.snapshot()["instruments"]["edge"]["series"][0]["buckets"]
    assert edge[bounds.index(10)] == 1  # a bucket holds values up to and including its bound
    json.dumps(snap)  # JSON-safe
    assert snap["overflowed"] == 0


def test_label_names_and_values_are_cut_to_the_bound() -> None:
    reg = MetricsRegistry()
    reg.counter("adk.tool.calls").add(1, {"tool": "t" * 1000, "k" * 300: "v"})
    (series,) = reg.snapshot()["instruments"]["adk.tool.calls"]["series"]
    assert series["labels"] == {"tool": "t" * MAX_LABEL_CHARS, "k" * MAX_LABEL_CHARS: "v"}


def test_past_the_series_cap_values_go_to_the_overflow_series_and_are_counted() -> None:
    reg = MetricsRegistry(max_series=3)
    calls = reg.counter("adk.tool.calls")
    for i in range(10):
        calls.add(1, {"tool": f"t{i}"})
    calls.add(5, {"tool": "t0"})  # an existing series still takes values
    series = _series(reg.snapshot(), "adk.tool.calls")
    assert series == {"tool=t0": 6, "tool=t1": 1, "tool=t2": 1, "otel.metric.overflow=true": 7}
    assert reg.overflowed == 7


def test_past_the_instrument_cap_values_go_to_the_reserved_overflow_instruments() -> None:
    reg = MetricsRegistry(max_instruments=2)
    reg.counter("a").add(1)
    reg.histogram("b").record(1.0)
    reg.counter("c").add(4, {"agent": "X"})
    reg.histogram("d").record(2.0, {"agent": "X"})
    reg.counter("b").add(1)  # a histogram's name used as a counter: overflow, not a type confusion
    snap = reg.snapshot()
    assert set(snap["instruments"]) == {"a", "b", OVERFLOW_COUNTER, OVERFLOW_HISTOGRAM}
    assert snap["instruments"][OVERFLOW_COUNTER]["series"] == [{"labels": OVERFLOW_LABELS, "value": 5}]
    assert snap["instruments"][OVERFLOW_HISTOGRAM]["series"][0]["labels"] == OVERFLOW_LABELS
    assert snap["overflowed"] == 3


label_values = st.text(max_size=300)


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["c1", "c2", "c3", "h1"]),
            st.dictionaries(st.sampled_from(["agent", "tool", "reason", "x"]), label_values, max_size=4),
            st.integers(min_value=0, max_value=1000),
        ),
        max_size=200,
    )
)
def test_caps_hold_and_no_value_is_lost_whatever_the_labels(events: list) -> None:
    reg = MetricsRegistry(max_instruments=3, max_series=5)
    total = 0
    for name, labels, value in events:
        if name.startswith("h"):
            reg.histogram(name).record(value, labels)
        else:
            reg.counter(name).add(value, labels)
        total += value
    snap = reg.snapshot()
    assert len([n for n in snap["instruments"] if not n.startswith("adk.metrics.overflow")]) <= 3
    kept = 0.0
    for inst in snap["instruments"].values():
        assert len(inst["series"]) <= 5 + 1  # the cap, plus the overflow series
        for series in inst["series"]:
            assert all(len(k) <= MAX_LABEL_CHARS and len(v) <= MAX_LABEL_CHARS for k, v in series["labels"].items())
            kept += series["value"] if inst["kind"] == "counter" else series["sum"]
    assert kept == total


def _event(reg: MetricsRegistry, name: str, measurements: dict | None = None, **metadata: object) -> None:
    record_event(reg, name, measurements or {}, metadata)


def test_agent_events_feed_turns_model_calls_tokens_tools_and_errors() -> None:
    reg = MetricsRegistry()
    _event(reg, "agent.prompt.start", agent="A", invocation_id="inv-1")
    measured = {"duration_ms": 12.5, "input_tokens": 30, "output_tokens": 4, "cached_tokens": 20}
    _event(reg, "agent.model.stop", measured, agent="A", outcome="ok")
    _event(reg, "agent.model.stop", {"duration_ms": 3}, agent="A", outcome="rate_limited")
    _event(reg, "agent.tool.stop", {"duration_ms": 2}, agent="A", tool="get_weather", outcome="ok", call_id="c-1")
    _event(reg, "agent.tool.stop", {"duration_ms": 2}, agent="A", tool="get_weather", outcome="tool_failed")
    _event(reg, "agent.prompt.stop", {"duration_ms": 40}, agent="A", invocation_id="inv-1")
    _event(reg, "agent.prompt.exception", {"duration_ms": 5}, agent="A", reason="provider_error")
    snap = reg.snapshot()
    assert _series(snap, "adk.turns") == {"agent=A,outcome=ok": 1, "agent=A,outcome=error": 1}
    assert _series(snap, "adk.model.calls") == {"agent=A,outcome=ok": 1, "agent=A,outcome=rate_limited": 1}
    assert _series(snap, "adk.model.tokens") == {
        "agent=A,token_type=input": 30,
        "agent=A,token_type=output": 4,
        "agent=A,token_type=cached": 20,
    }
    assert _series(snap, "adk.tool.calls") == {
        "agent=A,outcome=ok,tool=get_weather": 1,
        "agent=A,outcome=tool_failed,tool=get_weather": 1,
    }
    assert _series(snap, "adk.errors") == {
        "reason=rate_limited,source=model": 1,
        "reason=tool_failed,source=tool": 1,
        "reason=provider_error,source=agent": 1,
    }
    assert _series(snap, "adk.model.duration") == {"agent=A": 2}
    assert _series(snap, "adk.turn.duration") == {"agent=A": 2}
    assert "adk.events" not in snap["instruments"]  # .start events are not counted
    assert "inv-1" not in json.dumps(snap) and "c-1" not in json.dumps(snap)  # ids never become labels


def test_future_event_names_are_accepted_generically() -> None:
    reg = MetricsRegistry()
    _event(reg, "runner.admission.wait", {"wait_ms": 30, "queue_depth": 4}, agent="A", outcome="admitted")
    _event(reg, "runner.run.stop", {"duration_ms": 9}, agent="A", outcome="ok")
    _event(reg, "policy.denied", agent="A", policy="tools", reason="tool_not_allowed")
    _event(reg, "plugin.failed", plugin="logger", hook="before_model", reason="plugin_timeout")
    _event(reg, "observability.dropped", {"count": 17}, reason="queue_full")
    _event(reg, "workflow.node.stop", {"duration_ms": 1}, agent="A")
    _event(reg, "something.new", {"weird": "not a number"}, prompt="never a label")
    snap = reg.snapshot()
    assert _series(snap, "adk.admission.waits") == {"agent=A,outcome=admitted": 1}
    assert _series(snap, "adk.admission.wait") == {"agent=A": 1}
    assert _series(snap, "adk.admission.queue_depth") == {"agent=A": 1}
    assert _series(snap, "adk.runs") == {"agent=A,outcome=ok": 1}
    assert _series(snap, "adk.policy.denials") == {"agent=A,policy=tools,reason=tool_not_allowed": 1}
    assert _series(snap, "adk.plugin.failures") == {"hook=before_model,plugin=logger,reason=plugin_timeout": 1}
    assert _series(snap, "adk.observability.dropped") == {"reason=queue_full": 17}
    assert _series(snap, "adk.events") == {"event=workflow.node.stop": 1, "event=something.new": 1}
    assert "never a label" not in json.dumps(snap)


def test_compact_view_is_one_line_per_series() -> None:
    reg = MetricsRegistry()
    _event(reg, "agent.prompt.stop", {"duration_ms": 40}, agent="A")
    view = compact(reg.snapshot())
    assert view["adk.turns"] == {"agent=A,outcome=ok": 1}
    assert view["adk.turn.duration"] == {"agent=A": {"count": 1, "sum": 40.0, "max": 40}}
    assert view["overflowed"] == 0
