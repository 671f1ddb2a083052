"""``adk_actors.testing.turns``: agent turns in this process with a scripted model, no actor system (except the one
cross-check against the node, and the sample's own process)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import adk_actors as adk
from actor_tests.agents.support import explode, get_weather, greeting_provider
from actor_tests.samples_runner import assert_lines, run_sample
from adk_actors.agents.spec import build_spec
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, AgentError, ConfigError, ProviderError, ProviderHttpError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import InMemorySessionService, SessionRef
from adk_actors.testing import (
    AgentCall,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    TurnHarness,
    function_call,
    run_turn,
)

WEATHER = adk.Agent(
    name="Weather",
    instruction="Be concise.",
    tools=[adk.FunctionTool(get_weather), adk.FunctionTool(explode)],
    provider_config={"api_key": "test-key-SECRET"},
)
SUNNY = {"city": "Tokyo", "forecast": "sunny"}


def _parts(entry: dict[str, Any]) -> list[dict[str, Any]]:
    content = entry["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content["parts"])


def _responses(request: ModelRequest) -> list[dict[str, Any]]:
    """The function responses the last history entry of ``request`` gives the model."""
    return [p for p in _parts(request.history[-1]) if p["type"] == "function_response"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Hooks:
    """Callbacks (imported by name in the job, as a worker would): a ``before_model`` that answers "halt" itself,
    an ``after_tool`` that replaces every tool result."""

    @staticmethod
    def before_model(config: dict, history: list, tools: list) -> Any:
        last = history[-1]["content"]
        return ("halt", "halted by the callback") if last == "halt" else None

    @staticmethod
    def after_tool(name: str, args: dict, context: dict, result: dict) -> Any:
        return ("replace", {"replaced": name})


# ---- the model and tools ----------------------------------------------------------------------------------------
def test_a_text_answer_is_the_output_and_the_request_is_recorded_without_secrets() -> None:
    model = ScriptedModel(["Hello."])
    outcome = run_turn(WEATHER, "Hi", model=model)
    assert outcome.error is None and outcome.output == "Hello." and outcome.result() == "Hello."
    assert model.remaining == 0 and model.requests == list(outcome.model_calls)
    [request] = outcome.model_calls
    assert request.agent == "Weather" and request.history == [{"role": "user", "content": "Hi"}]
    assert [t["name"] for t in request.tools] == ["get_weather", "explode"]
    assert request.config == {"api_key": "[REDACTED]", "instructions": "Be concise."}
    assert "SECRET" not in repr(outcome)


@pytest.mark.parametrize("form", ["agent", "dict", "spec"])
def test_a_scripted_call_runs_the_tool_in_process_and_its_response_reaches_the_model(form: str) -> None:
    """The root as an ``Agent`` value, a dict config naming itself (tools beside it) and an ``AgentSpec``."""
    tools = [adk.FunctionTool(get_weather)]
    agents: dict[str, Any] = {
        "agent": adk.Agent(name="Weather", tools=tools),
        "dict": {"name": "Weather"},
        "spec": build_spec("Weather", {}, tools),
    }
    model = ScriptedModel(
        [{"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}, "id": "c1"}]}, "Sunny."]
    )
    outcome = run_turn(agents[form], "Weather in Tokyo?", model=model, tools=tools if form == "dict" else ())
    assert outcome.output == "Sunny."
    assert outcome.tool_calls == (
        ToolCall(agent="Weather", name="get_weather", args={"city": "Tokyo"}, call_id="c1", response=SUNNY),
    )
    assert _responses(outcome.model_calls[1]) == [
        {"type": "function_response", "name": "get_weather", "id": "c1", "response": SUNNY}
    ]


def test_a_failing_tool_and_invalid_arguments_are_answered_to_the_model_as_in_production() -> None:
    calls = [{"name": "explode", "args": {"city": "Oslo"}}, {"name": "get_weather", "args": {"city": 3}}]
    model = ScriptedModel([{"function_calls": calls}, "Sorry."])
    outcome = run_turn(WEATHER, "Weather?", model=model)
    assert outcome.output == "Sorry."
    failed, invalid = (p["response"] for p in _responses(outcome.model_calls[1]))
    assert failed == {"error": {"reason": "tool_exception", "type": "RuntimeError"}}  # never the message
    assert invalid["error"]["type"] == "SchemaError"
    assert [c.name for c in outcome.tool_calls] == ["explode"]  # the invalid call never reached a job
    assert "secret internal detail" not in repr(outcome)


@pytest.mark.parametrize(
    ("scripted", "expected"),
    [
        (
            ProviderHttpError("upstream said: SECRET body", reason="unavailable", details={"status": 503, "body": "x"}),
            (ProviderHttpError, "unavailable", {"status": 503}),
        ),
        (RuntimeError("socket detail"), (ProviderError, "io_failed", {})),
    ],
)
def test_a_scripted_exception_fails_the_turn_as_the_provider_call_would(
    scripted: BaseException, expected: tuple[type[AdkError], str, dict]
) -> None:
    outcome = run_turn(WEATHER, "Hi", model=ScriptedModel([scripted]))
    cls, reason, details = expected
    error = outcome.error
    assert type(error) is cls and error.reason == reason and error.details == details
    assert outcome.output is None and "detail" not in str(error) and "SECRET" not in str(error)
    with pytest.raises(cls):
        outcome.result()


def test_an_answer_the_content_model_refuses_fails_the_turn_with_invalid_model_output() -> None:
    bogus = {"schema_version": 1, "parts": [{"type": "no_such_part"}]}
    outcome = run_turn(WEATHER, "Hi", model=ScriptedModel([bogus]))
    assert isinstance(outcome.error, ProviderError) and outcome.error.reason == "invalid_model_output"


def test_a_function_of_the_request_answers_from_it() -> None:
    model = ScriptedModel([lambda request: f"echo: {request.history[-1]['content']}"])
    assert run_turn(WEATHER, "ping", model=model).output == "echo: ping"


def test_an_exhausted_script_raises_script_exhausted_out_of_the_harness() -> None:
    model = ScriptedModel([function_call("get_weather", city="Tokyo")])
    with pytest.raises(AgentError) as caught:
        run_turn(WEATHER, "Weather?", model=model)
    assert caught.value.reason == "script_exhausted" and caught.value.details == {"agent": "Weather", "calls": 2}


# ---- misuse -----------------------------------------------------------------------------------------------------
HELPER = adk.Agent(name="Helper", description="Helps.", instruction="Help.")


@pytest.mark.parametrize(
    ("make", "reason", "details"),
    [
        (
            lambda: TurnHarness(adk.Agent(name="Root", sub_agents=["Helper"]), model=ScriptedModel([])),
            "unknown_sub_agent",
            {"agent": "Root", "name": "Helper"},
        ),
        (
            lambda: TurnHarness(adk.Agent(name="Root", tools=[adk.AgentTool("Search")]), model=ScriptedModel([])),
            "unknown_sub_agent",
            {"agent": "Root", "name": "Search"},
        ),
        (
            lambda: TurnHarness(adk.Agent(name="Root", sub_agents=[HELPER]), models={"Root": ScriptedModel([])}),
            "no_scripted_model",
            {"agent": "Helper"},
        ),
        (
            lambda: TurnHarness(HELPER, models={"Helpr": ScriptedModel([])}),
            "unknown_agent",
            {"name": "Helpr"},
        ),
        (
            lambda: TurnHarness(HELPER, model=ScriptedModel([]), sub_agents=[adk.Agent(name="Helper")]),
            "duplicate_agent",
            {"name": "Helper"},
        ),
        (lambda: ScriptedModel(["ok", 42]), "invalid_value", {"key": "responses[1]"}),
        (lambda: ScriptedModel([{"function_calls": [{"args": {}}]}]), "invalid_value", {"key": "responses[0]"}),
        (
            lambda: TurnHarness(HELPER, model=ScriptedModel([]), tools=[adk.FunctionTool(get_weather)]),
            "invalid_value",
            {"key": "tools"},
        ),
        (lambda: TurnHarness({"instructions": "x"}, model=ScriptedModel([])), "invalid_value", {"key": "name"}),
    ],
)
def test_misuse_raises_a_config_error_at_once(make: Any, reason: str, details: dict) -> None:
    with pytest.raises(ConfigError) as caught:
        make()
    assert caught.value.reason == reason and caught.value.details == details


# ---- other agents -----------------------------------------------------------------------------------------------
def test_a_sub_agent_runs_as_a_nested_turn_that_consumes_a_shared_script_in_call_order() -> None:
    root = adk.Agent(name="Root", instruction="Delegate.", sub_agents=[HELPER])
    model = ScriptedModel([function_call("Helper", prompt="research OTP"), "notes on OTP", "Root: notes on OTP"])
    outcome = run_turn(root, "Explain OTP", model=model)
    assert outcome.output == "Root: notes on OTP"
    assert [r.agent for r in outcome.model_calls] == ["Root", "Helper", "Root"]
    assert outcome.model_calls[1].history == [{"role": "user", "content": "research OTP"}]
    assert outcome.agent_calls == (
        AgentCall(caller="Root", target="Helper", input="research OTP", output="notes on OTP"),
    )
    assert _responses(outcome.model_calls[2])[0]["response"] == {"result": "notes on OTP"}
    starts = [e.metadata["agent"] for e in outcome.telemetry if e.name == "agent.prompt.start"]
    assert starts == ["Helper", "Root"]  # each turn hands its telemetry over at its end


def test_an_agent_tool_target_comes_from_sub_agents_and_answers_with_its_own_model() -> None:
    search = adk.Agent(name="Search", instruction="Search.")
    root = adk.Agent(name="Root", tools=[adk.AgentTool("Search")])
    mine = ScriptedModel([function_call("Search", prompt="actors"), "Root: found actors"])
    theirs = ScriptedModel(["found actors"])
    outcome = run_turn(root, "Find actors", model=mine, models={"Search": theirs}, sub_agents=[search])
    assert outcome.output == "Root: found actors"
    assert [r.agent for r in theirs.requests] == ["Search"] and [r.agent for r in mine.requests] == ["Root", "Root"]
    assert outcome.agent_calls[0].target == "Search" and outcome.agent_calls[0].output == "found actors"


def test_a_failing_sub_agent_is_a_failed_call_the_model_is_told_about() -> None:
    root = adk.Agent(name="Root", sub_agents=[HELPER])
    model = ScriptedModel([function_call("Helper", prompt="q"), AgentError("no", reason="helper_down"), "Root: sorry"])
    outcome = run_turn(root, "q", model=model)
    assert outcome.output == "Root: sorry"
    assert outcome.agent_calls[0].error is not None and outcome.agent_calls[0].error.reason == "helper_down"
    assert _responses(outcome.model_calls[2])[0]["response"] == {
        "error": {"reason": "helper_down", "type": "AgentError"}
    }


# ---- callbacks and instructions ---------------------------------------------------------------------------------
def test_callbacks_run_in_process_around_the_model_and_the_tools() -> None:
    agent = adk.Agent(name="Hooked", tools=[adk.FunctionTool(get_weather)], callbacks=[Hooks])
    model = ScriptedModel([function_call("get_weather", city="Tokyo"), "done"])
    outcome = run_turn(agent, "Weather?", model=model)
    assert outcome.output == "done"
    assert _responses(outcome.model_calls[1])[0]["response"] == {"replaced": "get_weather"}
    halted = run_turn(agent, "halt", model=ScriptedModel(["never used"]))
    assert halted.output == "halted by the callback" and halted.model_calls == ()


def test_instruction_templates_and_providers_are_resolved_in_process_from_the_state() -> None:
    template = adk.Agent(name="Greeter", instruction="Greet {user:name}.")
    outcome = run_turn(template, "hi", model=ScriptedModel(["Hello Ada"]), state={"user:name": "Ada"})
    assert outcome.model_calls[0].config["instructions"] == "Greet Ada."
    provided = adk.Agent(name="Greeter", instruction=greeting_provider)
    outcome = run_turn(provided, "hi", model=ScriptedModel(["Hello Ada"]), state={"user:name": "Ada"})
    assert outcome.model_calls[0].config["instructions"] == "Greet Ada on behalf of Greeter."
    missing = run_turn(template, "hi", model=ScriptedModel([]))
    assert missing.error is not None and missing.error.reason == "missing_state_key"


# ---- conversations, Runner invocations --------------------------------------------------------------------------
def test_prompt_turns_of_a_harness_share_the_compatibility_conversation() -> None:
    harness = TurnHarness(HELPER, model=ScriptedModel(["first", "second"]))
    assert harness.prompt("one").output == "first"
    second = harness.prompt("two")
    assert second.output == "second"
    assert [e["content"] for e in second.model_calls[0].history] == ["one", _text("first"), "two"]


def _text(text: str) -> dict[str, Any]:
    return {"schema_version": 1, "parts": [{"type": "text", "text": text}]}


def test_a_runner_invocation_stores_its_events_and_commits_the_output_key() -> None:
    agent = adk.Agent(
        name="Weather", instruction="Help {user:name}.", tools=[adk.FunctionTool(get_weather)], output_key="answer"
    )
    service = InMemorySessionService()
    model = ScriptedModel([function_call("get_weather", city="Tokyo"), "Sunny."])
    outcome = run_turn(
        agent, "Weather?", model=model, runner_options={}, session_service=service, state={"user:name": "Ada"}
    )
    assert outcome.output == "Sunny." and outcome.paused is None
    assert [(e.author, e.is_final) for e in outcome.events] == [
        ("user", False),
        ("Weather", False),
        ("Weather", False),
        ("Weather", True),
    ]
    assert outcome.state == {"user:name": "Ada", "answer": "Sunny."}
    assert model.requests[0].config["instructions"] == "Help Ada."
    stored = service.get_session(SessionRef(app_name="app", user_id="user", session_id="session"))
    assert [e.id for e in stored.events] == [e.id for e in outcome.events]


def test_a_streamed_runner_answer_is_stored_as_a_partial_event_before_the_final_one() -> None:
    outcome = run_turn(HELPER, "hi", model=ScriptedModel(["Hello there."]), runner_options={"streaming_mode": "text"})
    assert [(e.partial, e.is_final, e.text()) for e in outcome.events[1:]] == [
        (True, False, "Hello there."),
        (False, True, "Hello there."),
    ]
    capped = run_turn(
        HELPER,
        "hi",
        model=ScriptedModel(["Hello there."]),
        runner_options={"streaming_mode": "text", "max_stream_output_bytes": 5},
    )
    assert capped.error is not None and capped.error.reason == "max_stream_output_bytes"


def test_a_confirmation_pauses_the_invocation_and_resume_runs_the_approved_call() -> None:
    gated = adk.Agent(name="Gated", tools=[adk.FunctionTool(get_weather, requires_confirmation=True)])
    harness = TurnHarness(gated, model=ScriptedModel([function_call("get_weather", city="Tokyo"), "Sunny."]))
    paused = harness.run("Weather?")
    assert paused.paused is not None and paused.output is None and paused.tool_calls == ()
    assert paused.result() is paused.paused
    assert paused.paused.actions.pause is not None and paused.paused.actions.pause.reason == "tool_confirmation"
    resumed = harness.resume({"confirmed": True})
    assert resumed.output == "Sunny." and [c.response for c in resumed.tool_calls] == [SUNNY]


# ---- deadlines --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("late_by", "reason"), [(2.0, "agent_call_timeout"), (61.0, "agent_turn_timeout")])
def test_a_model_answer_after_its_deadline_fails_the_turn_as_the_node_would(late_by: float, reason: str) -> None:
    clock = FakeClock()
    spec = build_spec("Slow", {}, call_timeout_ms=1000, turn_timeout_ms=60000)

    def slow(request: ModelRequest) -> str:
        clock.now += late_by
        return "too late"

    outcome = run_turn(spec, "hi", model=ScriptedModel([slow]), clock=clock)
    assert outcome.output is None and outcome.error is not None and outcome.error.reason == reason


# ---- the node path and the sample -------------------------------------------------------------------------------
@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def _emulator_rules(script: list[Any]) -> dict[str, Any]:
    """A script for :class:`ScriptedModel` as emulator rules answering the same calls in the same order."""
    respond = [{"text": s} if isinstance(s, str) else {"function_calls": s["function_calls"]} for s in script]
    return {"rules": [{"when": {}, "respond": r, "times": 1} for r in respond]}


def test_the_same_agent_and_script_give_the_same_turn_through_the_node_and_in_process(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    calls = [{"name": "get_weather", "args": {"city": "Tokyo"}}, {"name": "explode", "args": {"city": "Oslo"}}]
    script: list[Any] = [{"function_calls": calls}, "Tokyo is sunny; Oslo is unknown."]
    agent = adk.Agent(
        name=f"Cross_{uuid.uuid4().hex[:8]}",
        instruction="Be concise.",
        tools=[adk.FunctionTool(get_weather), adk.FunctionTool(explode)],
        provider_config={"base_url": emu.base_url, "api_key": "test-key"},
    )
    emu.set_script(_emulator_rules(script))
    ref = adk.spawn_agent(agent, system=system)
    try:
        node_output = adk.invoke(ref, "Weather in Tokyo and Oslo?", system=system, timeout=30)
    finally:
        adk.stop_agent(ref, system=system)
    outcome = run_turn(agent, "Weather in Tokyo and Oslo?", model=ScriptedModel(script))
    assert outcome.output == node_output == "Tokyo is sunny; Oslo is unknown."
    # What the model was told about the calls: the node's request on the wire, ours in the recorded history.
    wire = [p["functionResponse"]["response"] for p in emu.requests[-1]["body"]["contents"][-1]["parts"]]
    assert [p["response"] for p in _responses(outcome.model_calls[1])] == wire
    assert wire == [SUNNY, {"error": {"reason": "tool_exception", "type": "RuntimeError"}}]


def test_the_sample_runs_and_checks_its_outcomes() -> None:
    """``samples/testing_turns.py`` (its own assertions run too: a failing one exits non-zero)."""
    assert_lines(
        run_sample("testing_turns.py"),
        [
            "weather: Sunny in Tokyo.",
            "coordinator: Root: notes on OTP",
            "runner: ['user', 'Scribe'] {'summary': 'OTP is a toolkit.'}",
            "failure: unavailable",
            "conversation: 3 history entries",
        ],
    )


# ---- compaction ---------------------------------------------------------------------------------------------------
def _summary_or_ok(request: ModelRequest) -> str:
    last = request.history[-1]["content"]["parts"][-1].get("text", "")
    return "SUMMARY: earlier questions 0 to n." if "Summarize the conversation above" in last else "ok"


def _fold(request: dict[str, Any]) -> str:
    return f"folded {request['folded_events']} events"


@pytest.mark.parametrize("compressor", [{}, {"function": f"{__name__}:_fold"}], ids=["model", "function"])
def test_runner_turns_over_budget_compact_the_session_in_process(compressor: dict[str, Any]) -> None:
    policy = {"max_bytes": 900, "overflow": "compress", "compressor": {"max_summary_bytes": 200, **compressor}}
    harness = TurnHarness(HELPER, model=ScriptedModel([_summary_or_ok] * 40), runner_options={"context_policy": policy})
    for i in range(8):
        assert harness.run(f"question {i} " + "word " * 30).output == "ok"
    ref = SessionRef(app_name=harness.app_name, user_id="user", session_id="session")
    events = harness.session_service.get_session(ref).events
    checkpoints = [e for e in events if any(x.get("type") == "compaction" for x in e.actions.context_effects)]
    assert len(checkpoints) == 1 and checkpoints[0] is events[0]
    expected = "SUMMARY" if not compressor else "folded"
    assert expected in (checkpoints[0].text() or "")
