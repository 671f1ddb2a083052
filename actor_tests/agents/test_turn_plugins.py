"""Runner plugins and spans as effects of the turn engine: no node, no HTTP (scripted results in, effects out).

The plugins below are real plugin classes run in process by ``run_plugin_hook`` (the worker-side function); the
Runner-level tests through a node are in ``actor_tests/plugins/test_runner_plugins.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.agents.messages import Invoke, TurnResult
from adk_actors.agents.turn.effects import CallAgent, CallModel, Fail, RunPlugin, RunTool, Spans, Telemetry
from adk_actors.agents.turn.engine import Turn
from adk_actors.agents.turn.options import runner_options
from adk_actors.errors import AskTimeout, ConfigError, PluginError
from adk_actors.observability.trace import new_trace, parse_traceparent
from adk_actors.sessions import InMemorySessionService
from adk_actors.tools import FunctionTool, ToolContext

from .test_turn_engine import SCOPE, agent, invoke_turn, lookup, runner_turn, written
from .turn_driver import FakeClock, call, calls, run

CALLS: list[tuple[str, dict[str, Any]]] = []
"""What the recording plugin saw (it runs in this process)."""


class Recorder:
    """Observes every hook; records (hook, context)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def _seen(self, context: Any) -> None:
        CALLS.append((context["hook"], dict(context)))

    on_user_message = before_run = after_run = before_agent = after_agent = _seen
    before_model = after_model = before_tool = after_tool = on_event = on_run_error = on_agent_error = _seen


class Steer:
    """Intervenes as its config says: ``{"hook": ..., "result": [action, value]}``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def _act(self, context: Any) -> Any:
        if context["hook"] != self.config["hook"]:
            return None
        action, value = self.config["result"]
        return (action, value)

    before_model = after_model = before_tool = after_tool = on_tool_error = on_event = after_agent = _act
    on_user_message = before_run = _act


def plugin(cls: type, mode: str = "intervene", policy: str = "closed", **config: Any) -> dict[str, Any]:
    return {
        "id": f"{cls.__name__.lower()}-{len(config)}",
        "plugin": f"{__name__}:{cls.__name__}",
        "mode": mode,
        "failure_policy": policy,
        "config": config,
    }


def test_a_runner_text_turn_runs_the_plugin_hooks_in_lifecycle_order_with_immutable_metadata_contexts() -> None:
    CALLS.clear()
    plan = agent()
    driver = run(runner_turn(plan, InMemorySessionService(), plugins=[plugin(Recorder, mode="observe")]), model=["ok"])
    assert isinstance(driver.value, TurnResult) and driver.value.output == "ok"
    hooks = [h for h, _ in CALLS]
    assert hooks == [
        "on_user_message",
        "before_run",
        "before_agent",
        "on_event",  # the user event
        "before_model",
        "after_model",
        "after_agent",
        "on_event",  # the final event
    ]  # after_run is a notification: handed out (below), not awaited
    first = CALLS[0][1]
    assert first["run_id"] == "run-1" and first["agent"] == "Solo" and first["session_id"] == SCOPE["session_id"]
    notification = driver.of(RunPlugin)[-1]
    assert notification.hook == "after_run" and notification.id == 0, "after_run is fire and forget"


def test_before_model_amends_the_instructions_the_model_gets() -> None:
    steer = plugin(Steer, hook="before_model", result=["amend", {"instructions": "Answer in French."}])
    driver = run(runner_turn(agent(instructions="Be brief."), InMemorySessionService(), plugins=[steer]), model=["oui"])
    [model] = driver.of(CallModel)
    assert model.config["instructions"] == "Answer in French."


def test_before_model_return_skips_the_model_and_is_the_answer() -> None:
    steer = plugin(Steer, hook="before_model", result=["return", "cached answer"])
    driver = run(runner_turn(agent(), InMemorySessionService(), plugins=[steer]))
    assert driver.of(CallModel) == [], "the model was not called"
    assert driver.value.output == "cached answer"


def test_after_model_return_replaces_the_answer_stored_as_the_final_event() -> None:
    steer = plugin(Steer, hook="after_model", result=["return", "replaced"])
    driver = run(runner_turn(agent(), InMemorySessionService(), plugins=[steer]), model=["original"])
    assert driver.value.output == "replaced"
    final = written(driver)[-1]
    assert final.is_final and final.content is not None and final.content.to_dict()["parts"][0]["text"] == "replaced"


def test_before_tool_return_answers_the_call_without_running_the_tool() -> None:
    steer = plugin(Steer, hook="before_tool", result=["return", {"from": "plugin"}])
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo"}, "c1")), "done"]
    driver = run(runner_turn(plan, InMemorySessionService(), plugins=[steer]), model=script)
    assert driver.of(RunTool) == [], "the tool did not run"
    second = driver.of(CallModel)[1]
    parts = [p for e in second.history for p in e["content"]["parts"] if p["type"] == "function_response"]
    assert parts[0]["response"] == {"from": "plugin"}


def test_before_tool_amended_arguments_are_validated_against_the_tool_schema_again() -> None:
    steer = plugin(Steer, hook="before_tool", result=["amend", {"city": 7}])
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo"}, "c1")), "done"]
    driver = run(runner_turn(plan, InMemorySessionService(), plugins=[steer]), model=script)
    assert driver.of(RunTool) == []
    second = driver.of(CallModel)[1]
    parts = [p for e in second.history for p in e["content"]["parts"] if p["type"] == "function_response"]
    assert parts[0]["response"]["error"]["reason"] == "invalid_arguments"


def test_a_halting_plugin_fails_the_run_with_a_structural_plugin_error() -> None:
    steer = plugin(Steer, hook="before_tool", result=["halt", "not_allowed"])
    plan = agent(tools=[FunctionTool(lookup)])
    driver = run(
        runner_turn(plan, InMemorySessionService(), plugins=[steer]),
        model=[calls(call("lookup", {"city": "Oslo"}, "c1"))],
    )
    error = driver.error
    assert isinstance(error, PluginError) and error.reason == "plugin_halted"
    assert error.details["hook"] == "before_tool" and error.details["cause"] == "not_allowed"
    assert written(driver)[-1].error is not None, "the run's error event closes it"


def test_a_plugin_that_misses_its_deadline_fails_closed_or_is_counted_open() -> None:
    timeout = AskTimeout("late", reason="job_timeout")
    closed = run(
        runner_turn(agent(), InMemorySessionService(), plugins=[plugin(Recorder, mode="observe")]),
        model=["ok"],
        answers={RunPlugin: lambda e: timeout if e.hook == "before_model" else {"action": "continue"}},
    )
    assert isinstance(closed.error, PluginError) and closed.error.reason == "plugin_timeout"
    opened = run(
        runner_turn(agent(), InMemorySessionService(), plugins=[plugin(Recorder, mode="observe", policy="open")]),
        model=["ok"],
        answers={RunPlugin: lambda e: timeout if e.hook == "before_model" else {"action": "continue"}},
    )
    assert opened.value.output == "ok"
    events = [ev for t in opened.of(Telemetry) for ev in t.events if ev.name == "plugin.failed"]
    assert [(e.metadata["hook"], e.metadata["reason"]) for e in events] == [("before_model", "plugin_timeout")]


def test_on_tool_error_may_recover_a_failed_call() -> None:
    steer = plugin(Steer, hook="on_tool_error", result=["return", {"guidance": "try another city"}])
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo"}, "c1")), "done"]
    failing = {RunTool: lambda e: AskTimeout("late", reason="job_timeout")}
    driver = run(runner_turn(plan, InMemorySessionService(), plugins=[steer]), model=script, answers=failing)
    second = driver.of(CallModel)[1]
    parts = [p for e in second.history for p in e["content"]["parts"] if p["type"] == "function_response"]
    assert parts[0]["response"] == {"guidance": "try another city"}


def test_after_agent_replaces_the_output_and_its_output_key() -> None:
    steer = plugin(Steer, hook="after_agent", result=["amend", "edited"])
    service = InMemorySessionService()
    driver = run(runner_turn(agent(output_key="answer"), service, plugins=[steer]), model=["draft"])
    assert driver.value.output == "edited"
    final = written(driver)[-1]
    assert final.actions.state_delta == {"answer": "edited"}


def test_an_on_event_amendment_of_a_final_event_is_refused_and_the_original_stored() -> None:
    steer = plugin(
        Steer,
        policy="open",
        hook="on_event",
        result=["amend", {"content": {"schema_version": 1, "parts": [{"type": "text", "text": "forged"}]}}],
    )
    driver = run(runner_turn(agent(), InMemorySessionService(), plugins=[steer]), model=["genuine"])
    final = written(driver)[-1]
    assert final.content is not None and final.content.to_dict()["parts"][0]["text"] == "genuine"
    failed = [ev for t in driver.of(Telemetry) for ev in t.events if ev.name == "plugin.failed"]
    assert failed, "the refused amendment is a counted plugin failure"


def test_on_user_message_amends_the_input_the_user_event_stores() -> None:
    steer = plugin(Steer, hook="on_user_message", result=["amend", "rewritten"])
    driver = run(runner_turn(agent(), InMemorySessionService(), "original", plugins=[steer]), model=["ok"])
    user = written(driver)[0]
    assert user.author == "user" and user.content is not None
    assert user.content.to_dict()["parts"][0]["text"] == "rewritten"


def test_before_run_return_ends_the_run_before_the_session_is_touched() -> None:
    steer = plugin(Steer, hook="before_run", result=["return", "handled upstream"])
    service = InMemorySessionService()
    driver = run(runner_turn(agent(), service, plugins=[steer]))
    assert driver.value.output == "handled upstream"
    assert written(driver) == [] and driver.of(CallModel) == []


def test_a_failed_run_notifies_on_agent_error_and_on_run_error() -> None:
    plan = agent()
    driver = run(
        runner_turn(plan, InMemorySessionService(), plugins=[plugin(Recorder, mode="observe")]),
        model=[AskTimeout("late", reason="timeout")],
    )
    assert isinstance(driver.end, Fail)
    notes = [(e.hook, e.id) for e in driver.of(RunPlugin) if e.hook in ("on_agent_error", "on_run_error")]
    assert notes == [("on_agent_error", 0), ("on_run_error", 0)]
    assert driver.of(RunPlugin)[-1].context["error"]["reason"] == "agent_call_timeout"


def test_direct_turns_run_no_plugins() -> None:
    driver = run(invoke_turn(agent()), model=["hi"])
    assert driver.of(RunPlugin) == []


# ---- spans ------------------------------------------------------------------------------------------------------


def test_a_traced_turn_nests_its_spans_under_the_callers_and_passes_its_own_on() -> None:
    caller = new_trace()
    plan = agent(tools=[FunctionTool(lookup)], sub_agents=["Helper"])
    turn = Turn(plan, input="hi", scope=SCOPE, trace=caller.traceparent, tracing=True, clock=FakeClock())
    script = [calls(call("lookup", {"city": "Oslo"}, "c1"), call("Helper", {"prompt": "p"}, "c2")), "done"]
    driver = run(turn, model=script, agents={"Helper": "helped"})
    [spans] = driver.of(Spans)
    by_name = {r.name: r for r in spans.records}
    root = by_name["invoke_agent Solo"]
    assert root.trace_id == caller.trace_id and root.parent_span_id == caller.span_id
    tool = by_name["execute_tool lookup"]
    assert tool.parent_span_id == root.span_id and tool.attributes["gen_ai.tool.call.id"] == "c1"
    model = driver.of(CallModel)[0]
    assert parse_traceparent(model.trace).span_id == root.span_id, "the model call's span nests under the turn's"
    [ask] = driver.of(CallAgent)
    assert isinstance(ask.request, Invoke) and parse_traceparent(ask.request.trace).span_id == root.span_id
    assert not any("Oslo" in str(v) for r in spans.records for v in r.attributes.values()), "no content"


def test_an_untraced_turn_still_passes_the_callers_trace_to_its_model_call() -> None:
    caller = new_trace()
    turn = Turn(agent(), input="hi", scope=SCOPE, trace=caller.traceparent, clock=FakeClock())
    driver = run(turn, model=["ok"])
    assert driver.of(Spans) == []
    assert driver.of(CallModel)[0].trace == caller.traceparent


def test_observability_disabled_on_a_runner_records_no_spans() -> None:
    request_turn = runner_turn(agent(), InMemorySessionService(), observability="disabled")
    traced = Turn(
        request_turn.plan,
        input="hi",
        scope=SCOPE,
        runner=request_turn.session.request if request_turn.session else None,
        tracing=True,
        clock=FakeClock(),
    )
    driver = run(traced, model=["ok"])
    assert driver.of(Spans) == []


def test_an_agent_a_runner_delegates_to_inherits_its_plugins_and_run_id() -> None:
    steer = plugin(Steer, hook="before_model", result=["amend", {"instructions": "Inherited."}])
    plan = agent(sub_agents=["Helper"])
    script = [calls(call("Helper", {"prompt": "p"}, "c1")), "done"]
    driver = run(runner_turn(plan, InMemorySessionService(), plugins=[steer]), model=script, agents={"Helper": "ok"})
    [ask] = driver.of(CallAgent)
    assert ask.request.plugins is not None and ask.request.run_id == "run-1"
    child = Turn(
        agent("Helper"),
        input="p",
        scope=SCOPE,
        plugins=ask.request.plugins,
        run_id=ask.request.run_id,
        clock=FakeClock(),
    )
    assert run(child, model=["helped"]).of(CallModel)[0].config["instructions"] == "Inherited."
    plain = run(Turn(agent("Helper"), input="p", scope=SCOPE, clock=FakeClock()), model=["helped"])
    assert plain.of(RunPlugin) == [], "a direct invoke runs no plugins"


class MetaRecorder(Recorder):
    """Records like :class:`Recorder` but declares ``metadata_only``."""

    metadata_only = True


def test_a_metadata_only_plugin_gets_ids_names_and_reasons_but_no_content() -> None:
    CALLS.clear()
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo"}, "c1")), "secret answer"]
    run(
        runner_turn(plan, InMemorySessionService(), "private words", plugins=[plugin(MetaRecorder, mode="observe")]),
        model=script,
    )
    seen = {hook: context for hook, context in CALLS}
    assert "request" not in seen["before_model"] and "user_content" not in seen["on_user_message"]
    assert dict(seen["after_model"]["response"]) == {"finish_reason": None}  # a scripted answer has none
    assert seen["before_tool"]["tool"] == "lookup" and "args" not in seen["before_tool"]
    assert set(seen["on_event"]["event"]) == {"id", "partial", "is_final"}
    assert not any(w in repr(CALLS) for w in ("Oslo", "private words", "secret answer")), "no content at all"


def where_am_i(city: str, tool_context: ToolContext) -> dict:
    """Report the trace this call continues.

    Args:
        city: Any city.
    """
    return {"traceparent": tool_context.traceparent}


def test_a_tool_call_gets_the_traceparent_of_its_own_span_to_continue_the_trace() -> None:
    caller = new_trace()
    plan = agent(tools=[FunctionTool(where_am_i)])

    def script() -> list[Any]:
        return [calls(call("where_am_i", {"city": "Oslo"}, "c1")), "done"]

    traced = run(
        Turn(plan, input="hi", scope=SCOPE, trace=caller.traceparent, tracing=True, clock=FakeClock()), model=script()
    )
    [spans] = traced.of(Spans)
    tool_span = next(r for r in spans.records if r.name == "execute_tool where_am_i")
    seen = parse_traceparent(traced.of(RunTool)[0].context["traceparent"])
    assert (seen.trace_id, seen.span_id) == (caller.trace_id, tool_span.span_id)
    second = traced.of(CallModel)[1]
    entries = [e["content"] for e in second.history if isinstance(e["content"], dict)]
    parts = [p for c in entries for p in c["parts"] if p["type"] == "function_response"]
    assert parse_traceparent(parts[0]["response"]["traceparent"]).span_id == tool_span.span_id
    untraced = run(Turn(plan, input="hi", scope=SCOPE, trace=caller.traceparent, clock=FakeClock()), model=script())
    assert untraced.of(RunTool)[0].context["traceparent"] == caller.traceparent, "without spans: the caller's trace"


def test_a_runner_turn_reports_its_admission_wait_policy_denials_and_outcome_for_the_metrics() -> None:
    policy = {"id": "p1", "agents": {"allow": "all"}, "tools": {"deny": ["lookup"], "allow": "all"}}
    plan = agent(tools=[FunctionTool(lookup)])
    script = [calls(call("lookup", {"city": "Oslo"}, "c1")), "done"]
    driver = run(runner_turn(plan, InMemorySessionService(), admission_control={}, runtime_policy=policy), model=script)
    events = {ev.name: ev for t in driver.of(Telemetry) for ev in t.events}
    assert events["runner.admission.wait"].metadata["outcome"] == "granted"
    assert "wait_ms" in events["runner.admission.wait"].measurements
    assert events["policy.denied"].metadata["policy"] == "p1"
    assert events["runner.run.stop"].metadata["outcome"] == "completed"


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"capture_content": True}, "observability.capture_content"),
        ({"attributes": {"k": object()}}, "observability.attributes"),
        ({"attributes": {f"k{i}": i for i in range(33)}}, "observability.attributes"),
        ({"colour": "red"}, "observability.colour"),
        ("bogus", "observability"),
    ],
)
def test_a_bad_observability_option_is_refused_with_its_key(value: Any, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        runner_options(observability=value)
    assert info.value.details["key"] == key


@given(st.dictionaries(st.text(min_size=1, max_size=40), st.one_of(st.integers(), st.text(max_size=40)), max_size=8))
def test_observability_attributes_of_names_and_short_scalars_are_kept(attributes: dict[str, Any]) -> None:
    options = runner_options(observability={"attributes": attributes})
    assert options.observability is True and options.span_attributes == attributes
    assert runner_options(observability="disabled").observability is False
