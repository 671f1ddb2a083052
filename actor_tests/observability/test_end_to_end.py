"""One trace end to end through a real node (two hosts, the Gemini emulator, a real OTLP/HTTP receiver), and span
export that never slows a run down when the collector is down or slow.

The node's processes export as its settings say (``otel_endpoint``). The test process only starts the caller's
span, with its own OpenTelemetry SDK ``TracerProvider`` (never installed globally), which the Runner reads
through ``observability.current()``. Every node process also puts its pid in its spans' resource
(``process.pid``, from the SDK's ``process`` resource detector, switched on through the environment the node
inherits), so each span says which process made it.

Spans leave a process in the order it ended them (one FIFO batch queue per process): once a later span of a
process has arrived, every earlier one of that process has arrived too, or was dropped. The tests that check
that nothing was exported rely on that (a marker run after the run under test) instead of waiting for nothing
to happen.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider

from actor_tests.observability.emitter import EmitSpan
from actor_tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan
from adk_actors import observability, telemetry
from adk_actors.agents import spawn_agent
from adk_actors.agents.api import agent_ref
from adk_actors.emulator import Emulator
from adk_actors.models.gemini.config import DEFAULT_MODEL
from adk_actors.node import session_service
from adk_actors.observability.semconv import SCHEMA_URL
from adk_actors.observability.trace import TraceContext, parse_traceparent
from adk_actors.runner import Runner
from adk_actors.runs import Completed
from adk_actors.runs import api as runs
from adk_actors.runtime.refs import place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.model import SessionRef
from adk_actors.tools import FunctionTool

MODEL = "gemini-2.5-flash"
APP = "trace_app"
WAIT_S = 20.0
"""How long a test waits for spans it expects (a node process sends a batch every second)."""
SLOWDOWN_BOUND_S = 1.0
"""How much slower a run exporting its spans may be than the same run with ``observability="disabled"``, while
the collector is down or holds every request (median and slowest of 6 runs each). A run that waited for its
export would take seconds longer (the 3 s export timeout; a refused connection's retries: 7 to 10 s a run when
measured); the measured difference is a few milliseconds either way (runs take 10 to 20 ms here)."""

# Content that must never reach an exported attribute: the prompt, the instructions, the tool's argument and
# result, the sub-agent's prompt and answer, and the final answer. Each holds one word found nowhere else, so
# a copy cut short is found too.
PROMPT = "Quokka: will it rain?"
ROOT_INSTRUCTIONS = "Pangolin. Coordinate the forecast."
SUB_INSTRUCTIONS = "Tapir. Forecast the week."
TOOL_ARG = "Zanzibar"
TOOL_RESULT = "Sunny with okapis"
SUB_PROMPT = "Axolotl outlook"
SUB_ANSWER = "Narwhal skies"
ANSWER = "Wombat weather ahead"
CONTENT_WORDS = ("quokka", "pangolin", "tapir", "zanzibar", "okapi", "axolotl", "narwhal", "wombat")


def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    return {"forecast": TOOL_RESULT}


def _named(prefix: str, host: int) -> str:
    """An agent name that places the agent on ``host`` of two (placement hashes the name)."""
    return next(f"{prefix}_{i}" for i in range(1000) if agent_ref(f"{prefix}_{i}", 2).host_id == host)


ROOT = _named("Weather", 0)
"""Calls the tool and the sub-agent in one round, then answers."""
SUB = _named("Forecaster", 1)
"""The sub-agent, on the other host."""
SOLO = _named("Solo", 0)
"""Calls the tool, then answers (no sub-agent)."""
PLAIN = _named("Plain", 0)
"""As ``SOLO``, with no model in its config (the provider's default model)."""

SCRIPT = {
    "rules": [
        {"when": {"system_text_contains": "Tapir"}, "respond": {"text": SUB_ANSWER}},
        {"when": {"has_function_response": True}, "respond": {"text": ANSWER}},
        {"when": {"system_text_contains": "Pangolin"},
         "respond": {"function_calls": [{"name": "get_weather", "args": {"city": TOOL_ARG}},
                                        {"name": SUB, "args": {"prompt": SUB_PROMPT}}]}},
        {"when": {}, "respond": {"function_calls": [{"name": "get_weather", "args": {"city": TOOL_ARG}}]}},
    ]
}  # fmt: skip

TRACER = TracerProvider().get_tracer(__name__)
"""The caller's OpenTelemetry SDK (not the global provider: its spans stay the test's own)."""


class Hold(threading.Event):
    """A receiver gate that stays shut until it is set (the receiver sets it when it closes): every export
    request waits there. ``holding`` is set once a request is being held."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.holding.set()
        return super().wait(timeout)


class Collector(OtlpReceiver):
    """The OTLP receiver, with a way to wait until the spans it received satisfy a condition."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Condition()

    def add(self, spans: list[ReceivedSpan], headers: dict[str, str]) -> None:
        super().add(spans, headers)
        with self.arrived:
            self.arrived.notify_all()

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, what: str, ready: Callable[[list[ReceivedSpan]], bool]) -> list[ReceivedSpan]:
        """Every span received, once ``ready(spans)`` holds (the test fails after :data:`WAIT_S`)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: ready(self.received()), WAIT_S):
                raise AssertionError(f"the collector never had {what}: {sorted(s.name for s in self.received())}")
        return self.received()

    def trace(self, trace_id: str, count: int) -> list[ReceivedSpan]:
        """The spans of one trace, once at least ``count`` of them arrived."""
        spans = self.wait_for(f"{count} spans of {trace_id}", lambda s: sum(x.trace_id == trace_id for x in s) >= count)
        return [s for s in spans if s.trace_id == trace_id]


@dataclass
class Node:
    """A started node with the test's agents."""

    handle: ActorSystemHandle
    collector: Collector | None

    def runner(self, agent: str, **options: Any) -> Runner:
        return Runner(agent, APP, session_service(self.handle.settings), system=self.handle, **options)

    def pid(self, host: int) -> int:
        return self.handle.host_entry(host).pid

    def run(self, runner: Runner, input: str = PROMPT) -> Any:
        """One stable run (``runs.start`` + ``runs.wait``) in a new session; returns its outcome."""
        run_id = runs.start(runner, "user-1", f"s-{uuid.uuid4().hex[:8]}", input, system=self.handle)
        return runs.wait(run_id, 60, system=self.handle)

    def host_stats(self, host: int) -> dict[str, Any]:
        """The export counters of ``host``'s process, after exporting (and flushing) one span there."""
        emitter = next(f"emitter-{i}" for i in range(1000) if place(f"emitter-{i}", 2) == host)
        ref = self.handle.spawn("actor_tests.observability.emitter.SpanEmitter", id=emitter)
        answer: dict[str, Any] = self.handle.ask(ref, EmitSpan(name="probe", parent=observability.new_trace()), 30)
        assert answer["pid"] == self.pid(host)
        self.handle.stop_inner(ref)
        return answer


def _start(make_system: Callable[..., ActorSystemHandle], emu: Emulator, endpoint: str) -> ActorSystemHandle:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "process")  # inherited by the node's processes only
        handle = make_system(otel_endpoint=endpoint, hosts=2)
    try:
        base = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        spawn_agent(SUB, {**base, "model": MODEL, "instructions": SUB_INSTRUCTIONS}, system=handle)
        sub_agents = {SUB: {"agent": SUB, "description": "Forecasts the week."}}
        root = {**base, "model": MODEL, "instructions": ROOT_INSTRUCTIONS, "sub_agents": sub_agents}
        spawn_agent(ROOT, root, [FunctionTool(get_weather)], system=handle)
        spawn_agent(SOLO, {**base, "model": MODEL}, [FunctionTool(get_weather)], system=handle)
        spawn_agent(PLAIN, base, [FunctionTool(get_weather)], system=handle)
    except BaseException:
        handle.stop()
        raise
    return handle


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(script=SCRIPT) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def node(make_system: Callable[..., ActorSystemHandle], emu: Emulator) -> Iterator[Node]:
    """A node exporting to a healthy collector."""
    with Collector() as collector:
        handle = _start(make_system, emu, collector.url)
        try:
            yield Node(handle, collector)
        finally:
            handle.stop()
    assert collector.failures == [], collector.failures


@pytest.fixture(scope="module")
def down_node(make_system: Callable[..., ActorSystemHandle], emu: Emulator) -> Iterator[Node]:
    """A node whose collector is down: its port is bound but nothing listens (connections are refused)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        handle = _start(make_system, emu, f"http://127.0.0.1:{closed.getsockname()[1]}")
        try:
            yield Node(handle, None)
        finally:
            handle.stop()


def _caller() -> TraceContext:
    context = observability.current()
    assert context is not None
    return context


@dataclass
class TracedRun:
    """One traced run: the caller's span, the run, its spans and the provider requests it made."""

    caller: TraceContext
    run_id: str
    session_id: str
    outcome: Any
    spans: list[ReceivedSpan]
    provider_requests: list[dict[str, Any]]


@pytest.fixture(scope="module")
def traced_run(node: Node, emu: Emulator) -> TracedRun:
    """A stable run of ``ROOT`` started in the caller's span (as a web handler would), and its 7 spans."""
    emu.clear_requests()
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    with TRACER.start_as_current_span("POST /chat"):
        caller = _caller()
        run_id = runs.start(node.runner(ROOT), "user-1", session_id, PROMPT, system=node.handle)
    outcome = runs.wait(run_id, 60, system=node.handle)
    assert node.collector is not None
    spans = node.collector.trace(caller.trace_id, 7)
    return TracedRun(caller, run_id, session_id, outcome, spans, emu.requests)


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_a_run_across_two_hosts_is_one_trace_under_the_callers_span(node: Node, traced_run: TracedRun) -> None:
    assert traced_run.outcome == Completed(output=ANSWER)
    spans = traced_run.spans
    assert sorted(s.name for s in spans) == sorted(
        [f"run {ROOT}", f"invoke_agent {ROOT}", f"invoke_agent {SUB}", "execute_tool get_weather"]
        + [f"chat {MODEL}"] * 3
    )
    run, root, sub = _one(spans, f"run {ROOT}"), _one(spans, f"invoke_agent {ROOT}"), _one(spans, f"invoke_agent {SUB}")
    tool = _one(spans, "execute_tool get_weather")
    chats = [s for s in spans if s.name == f"chat {MODEL}"]
    assert run.parent_span_id == traced_run.caller.span_id  # the caller's span is the parent of ours
    assert root.parent_span_id == run.span_id
    assert tool.parent_span_id == root.span_id and sub.parent_span_id == root.span_id
    assert sorted(c.parent_span_id or "" for c in chats) == sorted([root.span_id, root.span_id, sub.span_id])
    assert len({s.span_id for s in spans}) == len(spans)
    # The root agent (and its run) on host 0, the sub-agent on host 1: two host processes, neither the caller.
    assert (agent_ref(ROOT, 2).host_id, agent_ref(SUB, 2).host_id) == (0, 1)
    host0, host1 = node.pid(0), node.pid(1)
    assert len({host0, host1, os.getpid()}) == 3
    sub_chat = next(c for c in chats if c.parent_span_id == sub.span_id)
    for span in spans:
        assert span.resource["process.pid"] == (host1 if span in (sub, sub_chat) else host0), span.name


def test_the_spans_carry_the_genai_attribute_names_and_kinds(node: Node, traced_run: TracedRun) -> None:
    spans = traced_run.spans
    for span in spans:
        assert span.scope_name == "adk_actors" and span.scope_schema_url == SCHEMA_URL
        assert span.status_code == 0, span.name  # unset: success, as the conventions ask
        expected_kind = Span.SPAN_KIND_CLIENT if span.name.startswith("chat ") else Span.SPAN_KIND_INTERNAL
        assert span.kind == expected_kind, span.name
    for chat in [s for s in spans if s.name.startswith("chat ")]:
        assert {k: chat.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name")} == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "gcp.gemini",
        }
        assert chat.attributes["gen_ai.request.model"] == MODEL
    run = _one(spans, f"run {ROOT}")
    assert run.attributes == {"adk.operation": "run", "gen_ai.agent.name": ROOT, "adk.run.id": traced_run.run_id}
    for agent in (ROOT, SUB):
        assert _one(spans, f"invoke_agent {agent}").attributes == {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": traced_run.session_id,
        }
    # The tool span names the call the model made: its id is the function call's id in the session.
    session = session_service(node.handle.settings).get_session(
        SessionRef(app_name=APP, user_id="user-1", session_id=traced_run.session_id)
    )
    call_ids = [
        part["id"]
        for event in session.events
        for part in (event.to_dict().get("content") or {}).get("parts", [])
        if part.get("type") == "function_call" and part.get("name") == "get_weather"
    ]
    assert len(call_ids) == 1 and call_ids[0]
    assert _one(spans, "execute_tool get_weather").attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call_ids[0],
    }


def test_no_exported_span_carries_content(node: Node, traced_run: TracedRun) -> None:
    # The content did travel through the node (every word is in the provider requests or the answer)...
    seen = (json.dumps(traced_run.provider_requests) + str(traced_run.outcome)).lower()
    assert [word for word in CONTENT_WORDS if word not in seen] == []
    # ...and is in nothing the collector received: attributes, resources, names, status messages.
    assert node.collector is not None
    exported = json.dumps(
        [[s.name, s.attributes, s.resource, s.status_message] for s in node.collector.received()], default=str
    ).lower()
    assert [word for word in CONTENT_WORDS if word in exported] == []


def test_each_provider_request_carries_the_traceparent_of_its_model_call_span(traced_run: TracedRun) -> None:
    headers = [r["headers"].get("traceparent") for r in traced_run.provider_requests]
    assert len(headers) == 3 and all(headers)
    contexts = [parse_traceparent(h) for h in headers]
    assert {c.trace_id for c in contexts} == {traced_run.caller.trace_id}
    chats = {s.span_id for s in traced_run.spans if s.name.startswith("chat ")}
    assert {c.span_id for c in contexts} == chats  # the provider side of the trace nests under each chat span


def test_model_call_spans_carry_the_token_usage_the_provider_reported(traced_run: TracedRun) -> None:
    chats = [s for s in traced_run.spans if s.name.startswith("chat ")]
    for chat in chats:
        assert chat.attributes.get("gen_ai.usage.input_tokens", 0) > 0
        assert chat.attributes.get("gen_ai.usage.output_tokens", 0) > 0


def test_runner_run_without_a_run_actor_nests_under_the_callers_span(node: Node) -> None:
    assert node.collector is not None
    with TRACER.start_as_current_span("POST /chat"):
        caller = _caller()
        assert node.runner(ROOT).run("user-1", f"s-{uuid.uuid4().hex[:8]}", PROMPT, timeout=60) == ANSWER
    spans = node.collector.trace(caller.trace_id, 6)
    assert sorted(s.name for s in spans) == sorted(
        [f"invoke_agent {ROOT}", f"invoke_agent {SUB}", "execute_tool get_weather"] + [f"chat {MODEL}"] * 3
    )
    root = _one(spans, f"invoke_agent {ROOT}")
    assert root.parent_span_id == caller.span_id
    assert _one(spans, f"invoke_agent {SUB}").parent_span_id == root.span_id


def test_the_chat_span_names_the_providers_default_model(node: Node) -> None:
    assert node.collector is not None
    with TRACER.start_as_current_span("POST /chat"):
        caller = _caller()
        assert node.runner(PLAIN).run("user-1", f"s-{uuid.uuid4().hex[:8]}", "weather?", timeout=60) == ANSWER
    chats = [s for s in node.collector.trace(caller.trace_id, 4) if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 2
    for chat in chats:
        assert (chat.name, chat.attributes["gen_ai.request.model"]) == (f"chat {DEFAULT_MODEL}", DEFAULT_MODEL)


def _exported_nothing_but(node: Node, before: set[str], marker: TraceContext, count: int) -> list[ReceivedSpan]:
    """Spans that arrived since ``before`` (span ids) outside the marker's trace, once ``count`` marker spans
    arrived (the marker run came after the run under test, in the same processes)."""
    assert node.collector is not None
    node.collector.trace(marker.trace_id, count)
    return [s for s in node.collector.received() if s.span_id not in before and s.trace_id != marker.trace_id]


def _marker_run(node: Node, agent: str) -> TraceContext:
    with TRACER.start_as_current_span("marker"):
        marker = _caller()
        assert node.runner(agent).run("user-1", f"s-{uuid.uuid4().hex[:8]}", PROMPT, timeout=60) == ANSWER
    return marker


def test_a_disabled_runner_exports_no_spans(node: Node) -> None:
    assert node.collector is not None
    before = {s.span_id for s in node.collector.received()}
    disabled = node.runner(SOLO, observability="disabled")
    assert node.run(disabled) == Completed(output=ANSWER)
    assert disabled.run("user-1", f"s-{uuid.uuid4().hex[:8]}", PROMPT, timeout=60) == ANSWER
    marker = _marker_run(node, SOLO)  # host 0, like SOLO and its runs: its 4 spans come after any of theirs
    assert _exported_nothing_but(node, before, marker, 4) == []


def test_a_disabled_runner_exports_no_spans_of_its_sub_agents(node: Node) -> None:
    assert node.collector is not None
    before = {s.span_id for s in node.collector.received()}
    assert node.run(node.runner(ROOT, observability="disabled")) == Completed(output=ANSWER)
    marker = _marker_run(node, ROOT)  # hosts 0 and 1, like ROOT's and SUB's turns
    leaked = _exported_nothing_but(node, before, marker, 6)
    assert [s.name for s in leaked] == []


def test_a_disabled_runner_exports_no_spans_inside_a_callers_span(node: Node) -> None:
    assert node.collector is not None
    before = {s.span_id for s in node.collector.received()}
    with TRACER.start_as_current_span("POST /chat"):
        caller = _caller()
        disabled = node.runner(SOLO, observability="disabled")
        assert disabled.run("user-1", f"s-{uuid.uuid4().hex[:8]}", PROMPT, timeout=60) == ANSWER
    marker = _marker_run(node, SOLO)
    leaked = _exported_nothing_but(node, before, marker, 4)
    assert [(s.name, s.trace_id == caller.trace_id) for s in leaked] == []


def _timed_runs(node: Node, pairs: int) -> tuple[list[float], list[float]]:
    """Run ``SOLO`` alternately with and without span export; the wall time of each run, in seconds."""
    exporting, disabled = node.runner(SOLO), node.runner(SOLO, observability="disabled")
    on: list[float] = []
    off: list[float] = []
    for _ in range(pairs):
        for runner, times in ((exporting, on), (disabled, off)):
            t0 = time.perf_counter()
            assert node.run(runner) == Completed(output=ANSWER)
            times.append(time.perf_counter() - t0)
    return on, off


def _assert_not_slowed(on: list[float], off: list[float]) -> None:
    ms = {k: round(v * 1000, 1) for k, v in (("on_p50", statistics.median(on)), ("off_p50", statistics.median(off)))}
    ms.update(on_max=round(max(on) * 1000, 1), off_max=round(max(off) * 1000, 1))
    assert statistics.median(on) <= statistics.median(off) + SLOWDOWN_BOUND_S, ms
    assert max(on) <= max(off) + SLOWDOWN_BOUND_S, ms


def test_runs_are_not_slowed_and_drops_are_counted_when_the_collector_is_down(down_node: Node) -> None:
    node = down_node
    assert node.run(node.runner(SOLO)) == Completed(output=ANSWER)  # warm: the host's pipeline is configured
    on, off = _timed_runs(node, 6)
    _assert_not_slowed(on, off)
    # Drops are counted in the process that made the spans (host 0 runs SOLO and its runs): every span of the
    # 7 exporting runs (run, invoke_agent, execute_tool and two chat spans each) and the probe's own span.
    stats = node.host_stats(0)["stats"]
    assert stats["configured"] is True and stats["exported"] == 0
    assert stats["dropped_by_reason"]["export_failed"] == stats["dropped"] == 7 * 5 + 1
    assert stats["export_failures"] >= 1


def test_the_hub_counts_the_export_drops_of_the_node_processes(down_node: Node) -> None:
    node = down_node
    assert node.run(node.runner(SOLO)) == Completed(output=ANSWER)
    assert node.host_stats(0)["stats"]["dropped"] > 0  # flushed: host 0 has counted its drops
    with telemetry.attach("agent.prompt.stop", system=node.handle) as sub:
        assert node.run(node.runner(SOLO)) == Completed(output=ANSWER)
        while sub.next(10).metadata.get("agent") != SOLO:
            pass  # the hub has handled host 0's telemetry sent after the drops
    instruments = observability.snapshot(node.handle)["instruments"]
    assert "adk.observability.dropped" in instruments


def test_runs_are_not_slowed_while_the_collector_holds_every_export(
    make_system: Callable[..., ActorSystemHandle], emu: Emulator
) -> None:
    with Collector() as collector:
        hold = Hold()
        collector.gate, collector.hold_s = hold, 60.0
        handle = _start(make_system, emu, collector.url)
        try:
            node = Node(handle, collector)
            assert node.run(node.runner(SOLO)) == Completed(output=ANSWER)
            assert hold.holding.wait(WAIT_S)  # host 0 sent its first batch: the collector holds it
            on, off = _timed_runs(node, 6)
            assert collector.requests == 0  # every export of the measured runs waited on the collector
            _assert_not_slowed(on, off)
        finally:
            hold.set()
            handle.stop()


def test_a_workflow_exports_its_span_a_span_per_node_attempt_and_its_agents_nest_under_their_node(
    node: Node,
) -> None:
    from adk_actors.workflows import Completed as WorkflowCompleted
    from adk_actors.workflows.api import run_workflow
    from adk_actors.workflows.spec import compile_workflow

    assert node.collector is not None
    workflow_id = f"traced-{uuid.uuid4().hex[:8]}"
    compiled = compile_workflow(
        {
            "version": 1,
            "id": workflow_id,
            "kind": "graph",
            "entry": "ask",
            "nodes": [{"id": "ask", "type": "agent", "agent": {"name": SOLO, "prompt": "workflow question"}}],
            "edges": {"ask": "end_node"},
        }
    )
    outcome = run_workflow(compiled, {}, system=node.handle, timeout=60)
    assert isinstance(outcome, WorkflowCompleted)
    name = f"workflow {workflow_id}"

    def whole(spans: list[ReceivedSpan]) -> bool:
        roots = [s for s in spans if s.name == name]
        return bool(roots) and any(s.trace_id == roots[0].trace_id and s.name == f"invoke_agent {SOLO}" for s in spans)

    spans = node.collector.wait_for(f"{name} and its agent", whole)
    root = next(s for s in spans if s.name == name)
    mine = [s for s in spans if s.trace_id == root.trace_id]
    step = next(s for s in mine if s.name == f"workflow_node {workflow_id}.ask")
    assert step.parent_span_id == root.span_id and step.attributes["adk.workflow.node"] == "ask"
    agent = next(s for s in mine if s.name == f"invoke_agent {SOLO}")
    assert agent.parent_span_id == step.span_id, "the agent the node asked nests under the node's span"
