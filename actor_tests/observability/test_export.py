"""Span export over OTLP/HTTP to a real receiver: exact ids, parents, times and attributes; bounded and never
blocking when the collector is down or slow; a no-op without OpenTelemetry."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from opentelemetry.sdk.trace import TracerProvider

from actor_tests.observability.conftest import counters, delta
from actor_tests.observability.otlp_receiver import OtlpReceiver
from adk_actors.observability import semconv, setup
from adk_actors.observability.spans import SpanRecord, export_spans, span_start, take_dropped
from adk_actors.observability.spans import stats as spans_stats
from adk_actors.observability.trace import TraceContext, current

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SECRET_WORDS = ("Tokyo", "sunny", "What is the weather")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _record(i: int = 0, **kw: object) -> SpanRecord:
    values: dict[str, object] = {
        "name": f"span {i}",
        "trace_id": TRACE,
        "span_id": format(i + 1, "016x"),
        "parent_span_id": None,
        "start_ns": 1_700_000_000_000_000_000 + i,
        "end_ns": 1_700_000_000_000_000_500 + i,
    }
    values.update(kw)
    return SpanRecord(**values)  # type: ignore[arg-type]


def test_a_turns_spans_arrive_with_their_ids_parents_times_and_genai_attributes(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    export_to(receiver.url, service_name="adk-test", resource_attributes={"deployment.environment.name": "test"})
    caller = TraceContext(TRACE, "00f067aa0ba902b7", True, "vendor=abc")
    name, attrs = semconv.agent_invocation("Weather", conversation_id="session-1", provider="gemini")
    agent = span_start(name, caller, attrs)
    name, attrs = semconv.model_call("gemini", "gemini-2.5-flash")
    model = span_start(name, agent.context, attrs, kind="client")
    model_rec = model.end(**{"gen_ai.usage.input_tokens": 21, "gen_ai.usage.output_tokens": 5})
    name, attrs = semconv.tool_call("get_weather", "call-1")
    tool = span_start(name, agent.context, attrs)
    tool_rec = tool.end(error_type="tool_failed")
    agent_rec = agent.end()
    before = counters()
    export_spans([model_rec, tool_rec, agent_rec])
    assert setup.flush()
    got = receiver.by_name()
    assert set(got) == {"invoke_agent Weather", "chat gemini-2.5-flash", "execute_tool get_weather"}
    for rec in (model_rec, tool_rec, agent_rec):
        span = got[rec.name]
        assert (span.trace_id, span.span_id, span.parent_span_id) == (rec.trace_id, rec.span_id, rec.parent_span_id)
        assert (span.start_ns, span.end_ns) == (rec.start_ns, rec.end_ns)
        assert span.resource["service.name"] == "adk-test"
        assert span.resource["deployment.environment.name"] == "test"
        assert span.scope_name == "adk_actors" and span.scope_schema_url == semconv.SCHEMA_URL
    assert got["invoke_agent Weather"].parent_span_id == "00f067aa0ba902b7"  # the caller's span
    assert got["chat gemini-2.5-flash"].parent_span_id == agent_rec.span_id
    assert got["chat gemini-2.5-flash"].attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": "gemini-2.5-flash",
        "adk.model.streaming": False,
        "gen_ai.usage.input_tokens": 21,
        "gen_ai.usage.output_tokens": 5,
    }
    assert got["chat gemini-2.5-flash"].kind == 3  # SPAN_KIND_CLIENT
    tool_span = got["execute_tool get_weather"]
    assert tool_span.status_code == 2 and tool_span.attributes["error.type"] == "tool_failed"  # STATUS_CODE_ERROR
    assert got["invoke_agent Weather"].status_code == 0  # success leaves the status unset
    assert got["invoke_agent Weather"].attributes["gen_ai.conversation.id"] == "session-1"
    blob = json.dumps([s.attributes for s in receiver.spans])
    assert not any(word in blob for word in SECRET_WORDS)
    assert delta(before, counters())["exported"] == 3


def test_the_callers_opentelemetry_span_becomes_the_parent(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    export_to(receiver.url)
    tracer = TracerProvider().get_tracer("user-web-app")
    with tracer.start_as_current_span("POST /chat") as web:
        parent = current()
    assert parent is not None
    name, attrs = semconv.run("Weather", "run-1")
    run = span_start(name, parent, attrs)
    export_spans([run.end()])
    assert setup.flush()
    (span,) = receiver.spans
    web_ctx = web.get_span_context()
    assert span.trace_id == format(web_ctx.trace_id, "032x")
    assert span.parent_span_id == format(web_ctx.span_id, "016x")
    assert span.attributes["adk.run.id"] == "run-1"


def test_malformed_records_are_dropped_and_counted_without_losing_the_good_ones(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    export_to(receiver.url)
    before = counters()
    export_spans([_record(0, trace_id="not hex"), _record(1), _record(2, span_id="zz"), _record(3, start_ns="x")])
    assert setup.flush()
    assert [s.name for s in receiver.spans] == ["span 1"]
    assert delta(before, counters())["dropped.invalid"] == 3


def test_unsampled_traces_and_sampled_out_ratios_are_not_exported(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    export_to(receiver.url, sample_ratio=0.5)
    before = counters()
    low = "0" * 16 + "0000000000000001"  # low 64 bits ≈ 0: under any ratio > 0
    high = "0" * 16 + "ffffffffffffffff"  # never under 0.5
    export_spans([_record(0, trace_id="1" * 16 + low[16:]), _record(1, trace_id="1" * 16 + high[16:])])
    export_spans([_record(2, sampled=False)])
    assert setup.flush()
    assert [s.name for s in receiver.spans] == ["span 0"]
    assert delta(before, counters())["sampled_out"] == 2


def test_with_the_collector_down_export_returns_at_once_and_counts_the_failure(
    export_to: Callable[..., None],
) -> None:
    export_to(f"http://127.0.0.1:{_closed_port()}", export_timeout_ms=200)
    take_dropped()
    before = counters()
    records = [_record(i) for i in range(50)]
    started = time.perf_counter()
    export_spans(records)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.05, f"export_spans took {elapsed * 1000:.1f} ms with the collector down"
    setup.flush()  # the export thread's attempt fails (connection refused)
    change = delta(before, counters())
    assert change["export_failures"] >= 1 and change["dropped.export_failed"] == 50 and change["exported"] == 0
    assert take_dropped() == {"export_failed": 50}  # what an observability.dropped event reports, once
    assert take_dropped() == {}


def test_a_slow_collector_does_not_slow_export_and_a_full_queue_drops_and_counts(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    receiver.gate = threading.Event()  # every request is held until released (or 5 s)
    export_to(receiver.url, max_queue=20, batch_size=10, export_timeout_ms=3000, schedule_delay_ms=1)
    before = counters()
    worst = 0.0
    for i in range(200):
        started = time.perf_counter()
        export_spans([_record(i)])
        worst = max(worst, time.perf_counter() - started)
    assert worst < 0.05, f"one export_spans call took {worst * 1000:.1f} ms behind a slow collector"
    change = delta(before, counters())
    assert change["dropped.queue_full"] >= 200 - 20  # the queue holds 20; the rest are dropped and counted
    receiver.gate.set()
    assert setup.flush()
    after = delta(before, counters())
    assert after["exported"] + after["dropped"] == 200
    assert after["exported"] == len(receiver.spans) <= 20


def test_shutdown_gives_queued_spans_a_bounded_time_and_counts_the_rest(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    receiver.gate = threading.Event()
    receiver.hold_s = 2.0
    export_to(receiver.url, batch_size=5, export_timeout_ms=1000, schedule_delay_ms=1)
    before = counters()
    export_spans([_record(i) for i in range(15)])
    started = time.perf_counter()
    setup.shutdown(timeout_s=0.2)
    took = time.perf_counter() - started
    assert took < 0.2 + 1.0 + 1.0, f"shutdown took {took:.2f} s"  # its budget + at most one request under way
    change = delta(before, counters())
    assert change["exported"] + change["dropped"] == 15 and change["dropped.shutdown"] >= 5
    assert counters()["configured"] is False and counters()["queued"] == 0
    export_spans([_record(99)])  # export is off now: nothing is counted
    assert delta(before, counters()) == change


def test_configure_is_idempotent_and_endpoint_none_turns_export_off(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    export_to(receiver.url)
    first = setup._active
    export_to(receiver.url)
    assert setup._active is first  # same arguments: same pipeline
    assert setup.configure(endpoint=None) is False and setup.configured() is False
    before = counters()
    export_spans([_record(1)])
    assert delta(before, counters()) == delta(before, before)


def test_without_opentelemetry_the_package_imports_and_export_is_a_no_op() -> None:
    code = """
import sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
import adk_actors
from adk_actors import observability
from adk_actors.observability import setup
from adk_actors.observability.spans import SpanRecord, export_spans, span_start, stats
import adk_actors.telemetry.hub
assert observability.current() is None
assert setup.configure(endpoint="http://127.0.0.1:9") is False
span = span_start("run A", observability.new_trace())
export_spans([span.end()])
s = stats()
assert s["configured"] is False and s["exported"] == 0 and s["dropped"] == 0, s
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_process_configures_itself_from_the_inherited_node_environment(receiver: OtlpReceiver) -> None:
    from adk_actors.settings import Settings

    env = setup.node_environment(Settings(otel_endpoint=receiver.url, otel_service_name="from-env"))
    code = """
from adk_actors.observability import setup
from adk_actors.observability.spans import export_spans, span_start, stats
assert stats()["configured"] is False  # nothing happens until a span is exported
export_spans([span_start("child process span", None).end()])
assert setup.flush(), stats()
print(stats()["exported"])
"""
    import os

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env}
    )
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
    (span,) = receiver.spans
    assert span.name == "child process span" and span.resource["service.name"] == "from-env"


def test_a_forked_child_does_not_inherit_the_parents_pipeline(
    receiver: OtlpReceiver, export_to: Callable[..., None]
) -> None:
    export_to(receiver.url)
    export_spans([_record(1)])
    pid = os.fork()
    if pid == 0:  # the child: no pipeline (its thread did not survive the fork), fresh counters
        state = spans_stats()
        os._exit(0 if state["configured"] is False and state["queued"] == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert setup.flush() and [s.name for s in receiver.spans] == ["span 1"]  # the parent's still works
