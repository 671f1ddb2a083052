"""Unit tests of the agent turn engine (``agents/turn/engine.py``): scripted results in, effects out.

No actor system, no HTTP, no worker processes: each test builds an agent's plan from a real spec, drives one
:class:`Turn` with :mod:`.turn_driver` (tool jobs, gates, hooks and instruction providers run in this process,
Runner sessions against an in-process ``InMemorySessionService``) and asserts on the effects it hands out. They pin
the branches the integration tests in ``actor_tests/agents`` and ``actor_tests/runner`` reach through a node.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from adk_actors.admission.logic import Permit
from adk_actors.agents import blocking
from adk_actors.agents.agent_tool import AgentTool
from adk_actors.agents.messages import Delegated, PromptOutcome, ResumeSpec, RunnerTurn, TurnEvent, TurnResult
from adk_actors.agents.spec import build_spec
from adk_actors.agents.turn.effects import (
    AcquirePermit,
    CallAgent,
    CallModel,
    Cancel,
    CheckGate,
    Fail,
    LoadConversation,
    Log,
    Notify,
    ReleasePermit,
    Reply,
    ResolveInstructions,
    RunHook,
    RunTool,
    SaveConversation,
    SessionCall,
    Telemetry,
)
from adk_actors.agents.turn.engine import AgentPlan, Conversation, Turn
from adk_actors.agents.turn.options import runner_options
from adk_actors.agents.turn.pauses import action_id, pause_key
from adk_actors.errors import (
    ActorCrashed,
    AdkError,
    AgentError,
    AskTimeout,
    BudgetExceeded,
    ConcurrencyConflict,
    PolicyDenied,
    ProviderError,
    ProviderHttpError,
    RunError,
    SchemaError,
    SessionError,
    SessionNotFound,
    StorageError,
    ToolError,
    ValidationError,
    WorkerError,
)
from adk_actors.events import Event
from adk_actors.models import ModelResponse
from adk_actors.runtime.callables import CallableRef
from adk_actors.sessions import InMemorySessionService
from adk_actors.tools import FunctionTool, ToolContext, long_running

from .turn_driver import FakeClock, TurnDriver, call, calls, run, text

BASE = {"provider": "gemini", "api_key": "test-key"}
APP, USER, SID = "app", "u1", "s1"
SCOPE = {"app_name": APP, "user_id": USER, "session_id": SID}
SINK = "run-sink"


# ---- tools, callbacks and providers (module level: loaded by reference, as a worker would) -----------------------


def lookup(city: str) -> dict:
    """Look a city up.

    Args:
        city: The city.
    """
    return {"city": city, "found": True}


def handoff(city: str, tool_context: ToolContext) -> dict:
    """Hand the turn to the helper agent."""
    tool_context.actions.transfer_to_agent = "Helper"
    return {"handed": city}


def stray_handoff(city: str, tool_context: ToolContext) -> dict:
    """Hand the turn to an agent that is not a sub-agent."""
    tool_context.actions.transfer_to_agent = "Stranger"
    return {"handed": city}


def approve(city: str, tool_context: ToolContext) -> dict:
    """Approve the draft and escalate."""
    tool_context.actions.escalate = True
    return {"approved": city}


def start_job(city: str) -> dict:
    """Start long-running work for a city."""
    return long_running("op-42", f"working on {city}")


def paris_gate(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    return {"required": args["city"] == "Paris", "hint": "Paris needs a yes"}


def greet(scope: dict[str, Any]) -> str:
    return f"Greet {scope['state'].get('user:name', 'stranger')} for {scope['agent']}."


def broken_provider(scope: dict[str, Any]) -> str:
    raise KeyError("private detail")


class HaltModel:
    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> tuple[str, Any]:
        return ("halt", "halted by callback")


class ReplaceHistory:
    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> tuple[str, Any]:
        return ("replace", [{"role": "user", "content": "replaced"}])


class ReplaceAnswer:
    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> tuple[str, Any]:
        return ("replace", "rewritten " + result["text"])


class InvalidAnswer:
    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> tuple[str, Any]:
        return ("replace", {"schema_version": 1, "parts": [{"type": "no_such_part"}]})


class WatchErrors:
    @staticmethod
    def on_error(config: dict[str, Any], error: dict[str, Any]) -> None:
        return None


class ConversationStore:
    """A stand-in for a shared session service (the spec only checks its shape; the driver scripts its answers)."""

    def save_conversation(self, app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> None:
        raise AssertionError("the engine never calls the store itself")

    def load_conversation(self, app_name: str, agent_name: str, key: str) -> list[Any]:
        raise AssertionError("the engine never calls the store itself")


# ---- builders -----------------------------------------------------------------------------------------------------


def agent(
    name: str = "Solo",
    tools: Sequence[Any] = (),
    *,
    call_timeout_ms: int = 60000,
    turn_timeout_ms: int = 60000,
    **config: Any,
) -> AgentPlan:
    """The plan of an agent built like ``spawn_agent`` builds it."""
    spec = build_spec(name, {**BASE, **config}, tools, call_timeout_ms=call_timeout_ms, turn_timeout_ms=turn_timeout_ms)
    return AgentPlan(spec)


def prompt_turn(plan: AgentPlan, input: Any = "hi", clock: FakeClock | None = None, **kw: Any) -> Turn:
    return Turn(
        plan, input=input, conversation=kw.pop("conversation", Conversation()), clock=clock or FakeClock(), **kw
    )


def invoke_turn(plan: AgentPlan, input: Any = "hi", clock: FakeClock | None = None, **kw: Any) -> Turn:
    return Turn(plan, input=input, scope=SCOPE, clock=clock or FakeClock(), **kw)


def runner_turn(
    plan: AgentPlan,
    service: InMemorySessionService,
    input: Any = "hi",
    *,
    resume: ResumeSpec | None = None,
    clock: FakeClock | None = None,
    **options: Any,
) -> Turn:
    """A Runner invocation as ``AgentActor`` builds it from a ``RunnerTurn``."""
    request = RunnerTurn(
        **SCOPE,
        session_service=service,
        options=runner_options(**options),
        input=input,
        resume=resume,
        sink=SINK,
        run_id="run-1",
    )
    return Turn(plan, input=request.input, scope=SCOPE, runner=request, clock=clock or FakeClock())


def ok(effect: RunTool, **response: Any) -> dict[str, Any]:
    """A tool job's successful function response for ``effect``."""
    part = {"type": "function_response", "name": effect.name, "response": response or {"ok": True}}
    return {**part, "id": effect.call_id} if effect.call_id else part


def responses(model: CallModel) -> list[dict[str, Any]]:
    """The function-response parts of the last history entry of a model call."""
    content = model.history[-1]["content"]
    return [p for p in content["parts"] if p["type"] == "function_response"]


def written(driver: TurnDriver) -> list[Event]:
    """The events the turn stored, in order (each is sent to the sink once stored)."""
    notes = driver.of(Notify)
    assert all(n.target == SINK and isinstance(n.message, TurnEvent) for n in notes)
    assert [n.message.index for n in notes] == list(range(1, len(notes) + 1))
    return [n.message.event for n in notes]


def stored_responses(events: list[Event]) -> list[dict[str, Any]]:
    """The function-response parts of stored events, in order."""
    return [
        p
        for e in events
        if e.content is not None
        for p in e.content.to_dict()["parts"]
        if p["type"] == "function_response"
    ]


def methods(effect: SessionCall) -> list[str]:
    """The session-service methods one ``SessionCall`` runs, in order."""
    return [op.method for op in effect.ops]


def fail_writes(predicate: Callable[[SessionCall], bool], error: AdkError) -> Callable[[SessionCall], AdkError | None]:
    """A ``session_error`` script: the session calls ``predicate`` picks fail with ``error``."""
    return lambda effect: error if predicate(effect) else None


GUARDED = FunctionTool(lookup, name="transfer_money", requires_confirmation=True)


def paused(service: InMemorySessionService, plan: AgentPlan, model: list[Any]) -> Event:
    """Run an invocation to its pause; the pause event."""
    result = run(runner_turn(plan, service), model=model).value
    assert isinstance(result, TurnResult) and result.kind == "paused" and result.event is not None
    return result.event


# ---- a direct prompt ----------------------------------------------------------------------------------------------


def test_a_prompt_asks_the_model_once_and_replies_with_its_text() -> None:
    clock = FakeClock()
    plan = agent(tools=[FunctionTool(lookup)], instructions="Be brief.")
    conversation = Conversation()
    turn = prompt_turn(plan, "hi", clock, conversation=conversation)
    [model] = turn.start(caller_deadline=clock.now + 5)

    assert isinstance(model, CallModel) and model.streaming == "none"
    assert model.history == [{"role": "user", "content": "hi"}]
    assert model.config["instructions"] == "Be brief." and model.tools == plan.declarations
    assert model.deadline == clock.now + 5, "the caller's deadline bounds the call"
    telemetry, reply = turn.on(model.id, text("hello"), None)
    assert isinstance(telemetry, Telemetry) and reply == Reply(value="hello")
    names = [e.name for e in telemetry.events]
    assert names == ["agent.prompt.start", "agent.model.start", "agent.model.stop", "agent.prompt.stop"]
    assert conversation.history == [model.history[0], {"role": "model", "content": text("hello").content}]
    assert turn.in_flight() == 0


def test_the_turn_end_reports_the_providers_token_counts_summed_over_its_model_calls() -> None:
    clock = FakeClock()
    plan = agent(tools=[FunctionTool(lookup)])
    turn = prompt_turn(plan, "hi", clock)
    [first] = turn.start(caller_deadline=clock.now + 5)
    usage = {"prompt_token_count": 100, "candidates_token_count": 7, "cached_content_token_count": 80,
             "total_token_count": 107}  # fmt: skip
    effects = turn.on(first.id, dataclasses.replace(calls(call("lookup", {"city": "x"})), usage=usage), None)
    tool = next(e for e in effects if isinstance(e, RunTool))
    [second] = [e for e in turn.on(tool.id, ok(tool), None) if isinstance(e, CallModel)]
    usage2 = {"prompt_token_count": 120, "candidates_token_count": 3, "total_token_count": 123}
    telemetry, _reply = turn.on(second.id, dataclasses.replace(text("done"), usage=usage2), None)
    [stop] = [e for e in telemetry.events if e.name == "agent.prompt.stop"]
    assert {k: stop.measurements[k] for k in ("input_tokens", "output_tokens", "cached_tokens", "total_tokens")} == {
        "input_tokens": 220,
        "output_tokens": 10,
        "cached_tokens": 80,
        "total_tokens": 230,
    }


def test_a_prompt_answered_with_non_text_parts_replies_with_the_content_dict() -> None:
    content = {
        "schema_version": 1,
        "parts": [
            {"type": "text", "text": "see"},
            {"type": "file_data", "mime_type": "image/png", "uri": "gs://b/x.png"},
        ],
    }
    assert run(prompt_turn(agent()), model=[content]).value == content


@pytest.mark.parametrize("policy", ["include", "exclude"])
def test_history_policy_decides_whether_earlier_prompts_reach_the_model(policy: str) -> None:
    prior: list[dict[str, Any]] = [
        {"role": "user", "content": "one"},
        {"role": "model", "content": text("first").content},
    ]
    conversation = Conversation(history=list(prior))
    driver = run(prompt_turn(agent(history_policy=policy), "two", conversation=conversation), model=["second"])

    [model] = driver.of(CallModel)
    earlier = prior if policy == "include" else []
    assert model.history == [*earlier, {"role": "user", "content": "two"}]
    assert driver.value == "second"
    assert len(conversation.history) == (4 if policy == "include" else 2), "exclude keeps no conversation"


def test_a_prompt_with_a_session_id_loads_the_conversation_first_and_answers_once_it_is_saved() -> None:
    store = ConversationStore()
    plan = agent(session_id="conv-1", session_service=store)
    prior = [{"role": "user", "content": "one"}, {"role": "model", "content": text("first").content}]
    conversation = Conversation(loaded=False)
    turn = prompt_turn(plan, "two", conversation=conversation)

    [load] = turn.start()
    assert isinstance(load, LoadConversation)
    assert (load.service, load.agent, load.key) == (store, "Solo", "conv-1")
    [model] = turn.on(load.id, prior, None)
    assert isinstance(model, CallModel) and model.history == [*prior, {"role": "user", "content": "two"}]
    telemetry, save = turn.on(model.id, text("second"), None)
    assert isinstance(telemetry, Telemetry) and isinstance(save, SaveConversation), "the answer waits for the save"
    assert (save.service, save.agent, save.key) == (store, "Solo", "conv-1")
    assert save.history == [*model.history, {"role": "model", "content": text("second").content}]
    assert turn.on(save.id, None, None) == [Reply(value="second")]
    assert conversation.loaded and len(conversation.history) == 4


@pytest.mark.parametrize(
    ("error", "answered"),
    [(SessionNotFound("none saved", reason="not_found"), True), (StorageError("db down", reason="unavailable"), False)],
)
def test_nothing_saved_starts_an_empty_conversation_and_a_failed_load_fails_the_prompt(
    error: AdkError, answered: bool
) -> None:
    conversation = Conversation(loaded=False)
    plan = agent(session_id="conv-1", session_service=ConversationStore())
    driver = run(prompt_turn(plan, "two", conversation=conversation), model=["fresh"], conversation=error)

    if answered:
        assert driver.of(CallModel)[0].history == [{"role": "user", "content": "two"}]
        assert driver.value == "fresh"
    else:
        assert driver.of(CallModel) == [] and driver.error is error
        assert not conversation.loaded, "the next prompt tries the load again"


def test_a_failed_save_logs_a_structural_warning_before_the_answer_goes_out() -> None:
    error = StorageError("disk full under /srv/SECRET-PATH", reason="write_failed")
    turn = prompt_turn(agent(session_id="conv-1", session_service=ConversationStore()), "two")
    driver = TurnDriver(turn, model=["second"], hold=(SaveConversation,)).start()
    [save] = driver.held

    log, answer = driver.feed(save, None, error)
    assert log == Log(
        level="warning", message="conversation not saved", fields={"agent": "Solo", "reason": "write_failed"}
    )
    assert isinstance(answer, Reply | Fail)
    assert "SECRET" not in repr(log)


def test_a_failed_save_fails_the_prompt_and_leaves_the_conversation_as_it_was() -> None:
    conversation = Conversation(
        history=[{"role": "user", "content": {"schema_version": 1, "parts": [{"type": "text", "text": "one"}]}}],
        loaded=True,
    )
    turn = Turn(agent(session_id="conv-1", session_service=ConversationStore()), input="two", conversation=conversation)
    driver = TurnDriver(turn, model=["second"], hold=(SaveConversation,)).start()
    [save] = driver.held
    out = driver.feed(save, None, StorageError("disk full", reason="write_failed"))
    assert [type(e) for e in out] == [Log, Fail] and out[-1].error.reason == "write_failed"
    assert conversation.history == [
        {"role": "user", "content": {"schema_version": 1, "parts": [{"type": "text", "text": "one"}]}}
    ]


# ---- invoke, input and output -------------------------------------------------------------------------------------


def test_an_invoke_with_commit_answers_delegated_with_its_output_key_and_what_was_committed_below() -> None:
    plan = agent("Writer", sub_agents=["Helper"], output_key="draft")
    turn = invoke_turn(plan, "write", commit=True)
    helper = Delegated(output="notes", state_delta={"research": "notes"})
    driver = run(
        turn, model=[calls(call("Helper", {"prompt": "research"}, "c1")), "the draft"], agents={"Helper": helper}
    )

    [ask] = driver.of(CallAgent)
    assert ask.request.commit is True, "a committing turn delegates with commit"
    assert driver.value == Delegated(output="the draft", state_delta={"research": "notes", "draft": "the draft"})
    assert responses(driver.of(CallModel)[1])[0]["response"] == {"result": "notes"}


def test_an_invoke_without_commit_answers_the_bare_output() -> None:
    assert run(invoke_turn(agent(output_key="draft"), "write"), model=["the draft"]).value == "the draft"


@pytest.mark.parametrize("value", [42, None, ["a list"], b"bytes"])
def test_input_that_is_not_a_str_or_content_dict_fails_before_the_model(value: Any) -> None:
    driver = run(prompt_turn(agent(), value))
    assert driver.of(CallModel) == []
    assert isinstance(driver.error, ValidationError) and driver.error.reason == "invalid_input"


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize(
    ("value", "valid"),
    [('{"city": "Oslo"}', True), ({"city": "Oslo"}, True), ('{"town": "Oslo"}', False), ("not json", False)],
)
def test_input_schema_is_checked_before_the_model(value: Any, valid: bool) -> None:
    driver = run(prompt_turn(agent(input_schema=SCHEMA), value), model=["ok"])
    if valid:
        assert driver.of(CallModel)[0].history[-1] == {"role": "user", "content": value}
        assert driver.value == "ok"
    else:
        assert driver.of(CallModel) == []
        error = driver.error
        assert isinstance(error, SchemaError) and error.reason == "invalid_input"
        assert error.details == {"agent": "Solo"}


def test_an_output_schema_accepts_valid_json_and_commits_the_parsed_object() -> None:
    plan = agent(output_schema=SCHEMA, output_key="place")
    driver = run(invoke_turn(plan, "where?", commit=True), model=['{"city": "Oslo"}'])
    assert driver.value == Delegated(output='{"city": "Oslo"}', state_delta={"place": {"city": "Oslo"}})


@pytest.mark.parametrize("answer", ['{"town": "Oslo"}', "Oslo, I think"])
def test_an_answer_that_breaks_the_output_schema_fails_with_invalid_output(answer: str) -> None:
    conversation = Conversation()
    driver = run(prompt_turn(agent(output_schema=SCHEMA), conversation=conversation), model=[answer])
    error = driver.error
    assert isinstance(error, SchemaError) and error.reason == "invalid_output" and error.details == {"agent": "Solo"}
    assert conversation.history == [], "a failed turn leaves the conversation alone"


# ---- a round of tool calls ----------------------------------------------------------------------------------------


def test_a_tool_call_runs_as_a_run_tool_effect_and_its_response_goes_back_to_the_model() -> None:
    clock = FakeClock()
    plan = agent(tools=[FunctionTool(lookup)])
    turn = invoke_turn(plan, "weather?", clock, state={"user:name": "Ada"}, ancestry=("Root",))
    asked = calls(call("lookup", {"city": "Oslo"}, "c1"))
    driver = run(turn, model=[asked, "sunny"])

    [tool] = driver.of(RunTool)
    assert (tool.index, tool.name, tool.args, tool.call_id) == (0, "lookup", {"city": "Oslo"}, "c1")
    assert (tool.runner, tool.callbacks, tool.inline) == (False, (), False)
    assert tool.payload == plan.tools["lookup"].payload and tool.deadline == clock.now + 60
    context = dict(tool.context)
    assert isinstance(context.pop("invocation_id"), str)
    assert context == {**SCOPE, "agent_name": "Solo", "state": {"user:name": "Ada"}, "ancestry": ("Root", "Solo")}
    second = driver.of(CallModel)[1]
    assert second.history[-2] == {"role": "model", "content": asked.content}
    assert responses(second) == [
        {"type": "function_response", "name": "lookup", "id": "c1", "response": {"city": "Oslo", "found": True}}
    ]
    assert driver.value == "sunny"


FAST = [
    FunctionTool(lookup, name="fast_a", parallel_safe=True),
    FunctionTool(lookup, name="fast_b", parallel_safe=True),
    FunctionTool(lookup, name="slow"),
]


def test_neighbouring_parallel_safe_calls_start_together_and_any_other_call_runs_alone() -> None:
    batch = calls(
        call("fast_a", {"city": "1"}, "c1"),
        call("fast_b", {"city": "2"}, "c2"),
        call("slow", {"city": "3"}, "c3"),
        call("fast_a", {"city": "4"}, "c4"),
    )
    driver = TurnDriver(prompt_turn(agent(tools=FAST)), model=[batch, "done"], hold=(RunTool,)).start()

    first, second = driver.held
    assert [t.call_id for t in (first, second)] == ["c1", "c2"]
    assert driver.feed(second, ok(second)) == [], "the group waits for all its calls"
    [slow] = driver.feed(first, ok(first))
    assert slow.call_id == "c3"
    [last] = driver.feed(slow, ok(slow))
    assert last.call_id == "c4", "a safe call after an unsafe one starts a new group"
    driver.feed(last, ok(last))
    assert [p["id"] for p in responses(driver.of(CallModel)[1])] == ["c1", "c2", "c3", "c4"], "answers in call order"
    assert driver.value == "done"


@pytest.mark.parametrize(
    ("execution", "widths"),
    [({}, [3]), ({"max_concurrency": 2}, [2, 1]), ({"mode": "serial"}, [1, 1, 1])],
)
def test_under_a_runner_the_tool_execution_options_bound_each_group(
    execution: dict[str, Any], widths: list[int]
) -> None:
    batch = calls(*(call(name, {"city": str(i)}, f"c{i}") for i, name in enumerate(["fast_a", "fast_b", "fast_a"])))
    turn = runner_turn(agent(tools=FAST), InMemorySessionService(), tool_execution=execution)
    driver = TurnDriver(turn, model=[batch, "done"], hold=(RunTool,)).start()

    seen = []
    while driver.held:
        group = list(driver.held)
        seen.append(len(group))
        for tool in group:
            driver.feed(tool, ok(tool))
    assert seen == widths
    assert driver.value.output == "done"


def test_a_model_that_keeps_calling_tools_fails_with_max_tool_rounds() -> None:
    plan = agent(tools=[FunctionTool(lookup)])
    plan = AgentPlan(dataclasses.replace(plan.spec, max_tool_rounds=2))
    driver = run(prompt_turn(plan), model=[calls(call("lookup", {"city": "x"}))] * 3)

    error = driver.error
    assert isinstance(error, BudgetExceeded) and error.reason == "max_tool_rounds"
    assert error.details == {"agent": "Solo", "max": 2}
    assert (len(driver.of(CallModel)), len(driver.of(RunTool))) == (3, 2)


@pytest.mark.parametrize(
    "function_calls",
    [({"args": {}},), ({"name": "not a name!", "args": {}},), ({"name": "lookup", "args": "city=Oslo"},)],
    ids=["no_name", "bad_name", "args_not_an_object"],
)
def test_a_malformed_call_fails_the_whole_batch_before_anything_runs(function_calls: tuple[Any, ...]) -> None:
    content = {"schema_version": 1, "parts": []}
    good = {"name": "lookup", "args": {"city": "Oslo"}, "id": "c0"}
    answer = ModelResponse(content=content, function_calls=(good, *function_calls))
    driver = run(prompt_turn(agent(tools=[FunctionTool(lookup)])), model=[answer])
    assert driver.of(RunTool) == []
    assert isinstance(driver.error, ToolError) and driver.error.reason == "invalid_call"


def test_duplicate_call_ids_fail_the_turn_before_anything_runs() -> None:
    batch = calls(call("lookup", {"city": "a"}, "same"), call("lookup", {"city": "b"}, "same"))
    driver = run(prompt_turn(agent(tools=[FunctionTool(lookup)])), model=[batch])
    assert driver.of(RunTool) == []
    assert isinstance(driver.error, ToolError) and driver.error.reason == "duplicate_call_id"


@pytest.mark.parametrize(
    ("asked", "reason", "kind"),
    [
        (call("nowhere", {"city": "x"}, "c1"), "tool_not_found", "ToolError"),
        (call("lookup", {"town": "x"}, "c1"), None, "SchemaError"),
    ],
    ids=["unknown_tool", "invalid_arguments"],
)
def test_a_call_that_cannot_run_is_answered_to_the_model_as_a_failed_response(
    asked: dict[str, Any], reason: str | None, kind: str
) -> None:
    driver = run(prompt_turn(agent(tools=[FunctionTool(lookup)])), model=[calls(asked), "sorry"])
    assert driver.of(RunTool) == []
    [failed] = responses(driver.of(CallModel)[1])
    assert (failed["name"], failed["id"], failed["response"]["error"]["type"]) == (asked["name"], "c1", kind)
    if reason is not None:
        assert failed["response"]["error"]["reason"] == reason
    assert driver.value == "sorry"


@pytest.mark.parametrize(
    "error",
    [AskTimeout("late", reason="timeout"), WorkerError("late", reason="job_timeout")],
    ids=["ask_timeout", "job_timeout"],
)
def test_a_tool_job_past_its_deadline_reaches_the_model_as_tool_timeout(error: AdkError) -> None:
    turn = prompt_turn(agent(tools=[FunctionTool(lookup)]))
    driver = TurnDriver(turn, model=[calls(call("lookup", {"city": "x"}, "c1")), "gave up"], hold=(RunTool,)).start()
    [tool] = driver.held
    driver.feed(tool, None, error)
    [failed] = responses(driver.of(CallModel)[1])
    assert failed["response"]["error"] == {"reason": "tool_timeout", "type": "ToolError"}
    assert driver.value == "gave up"


# ---- other agents -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("root_global", "own", "sent"),
    [(None, "Root rules.", "Root rules."), (None, None, ""), ("From the root.", "Mine.", "From the root.")],
    ids=["root_with_own", "root_without", "delegated"],
)
def test_a_sub_agent_call_is_an_invoke_under_this_agents_ancestry_scope_and_root_global_instruction(
    root_global: str | None, own: str | None, sent: str
) -> None:
    clock = FakeClock()
    config: dict[str, Any] = {"sub_agents": {"Helper": {"description": "Helps."}}}
    if own is not None:
        config["global_instruction"] = own
    plan = agent("Coordinator", **config)
    turn = invoke_turn(plan, "go", clock, ancestry=("Top",), state={"k": 1}, root_global=root_global)
    driver = run(turn, model=[calls(call("Helper", {"prompt": "do it"}, "c1")), "done"], agents={"Helper": "helped"})

    [ask] = driver.of(CallAgent)
    request = ask.request
    assert ask.target == "Helper" and ask.deadline == clock.now + 60
    assert (request.input, request.ancestry, request.state) == ("do it", ("Top", "Coordinator"), {"k": 1})
    assert (request.app_name, request.user_id, request.session_id) == (APP, USER, SID)
    assert request.root_global_instruction == sent and request.commit is False
    [answer] = responses(driver.of(CallModel)[1])
    assert (answer["name"], answer["id"], answer["response"]) == ("Helper", "c1", {"result": "helped"})


def test_an_agent_tool_calls_its_agent_with_the_validated_prompt() -> None:
    plan = agent("Boss", [AgentTool("Researcher", name="Search")])
    driver = run(
        invoke_turn(plan), model=[calls(call("Search", {"prompt": "facts"})), "done"], agents={"Researcher": "42"}
    )
    [ask] = driver.of(CallAgent)
    assert (ask.target, ask.request.input) == ("Researcher", "facts")
    assert responses(driver.of(CallModel)[1])[0]["response"] == {"result": "42"}


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (AskTimeout("late", reason="timeout"), "agent_call_timeout"),
        (AskTimeout("late", reason="agent_turn_timeout"), "agent_turn_timeout"),
        (AgentError("loop", reason="agent_cycle"), "agent_cycle"),
    ],
)
def test_a_failed_sub_agent_call_reaches_the_model_with_its_reason(error: AdkError, reason: str) -> None:
    plan = agent("Coordinator", sub_agents=["Helper"])
    driver = run(
        invoke_turn(plan), model=[calls(call("Helper", {"prompt": "x"}, "c1")), "done"], agents={"Helper": error}
    )
    [failed] = responses(driver.of(CallModel)[1])
    assert failed["response"]["error"]["reason"] == reason
    assert driver.value == "done"


def test_a_tool_that_transfers_hands_the_turn_to_the_sub_agent_whose_answer_is_the_turns() -> None:
    plan = agent("Front", [FunctionTool(handoff)], sub_agents=["Helper"])
    turn = invoke_turn(plan, "route me", ancestry=("Top",))
    driver = run(turn, model=[calls(call("handoff", {"city": "x"}, "c1"))], agents={"Helper": "helper answer"})

    [ask] = driver.of(CallAgent)
    assert (ask.target, ask.request.input, ask.request.ancestry) == ("Helper", "route me", ("Top", "Front"))
    assert len(driver.of(CallModel)) == 1, "the sub-agent answers instead of the model"
    assert driver.value == "helper answer"


def test_a_transfer_to_an_agent_that_is_no_sub_agent_fails_the_call_not_the_turn() -> None:
    plan = agent("Front", [FunctionTool(stray_handoff)], sub_agents=["Helper"])
    driver = run(invoke_turn(plan), model=[calls(call("stray_handoff", {"city": "x"}, "c1")), "stayed"])
    assert driver.of(CallAgent) == []
    [failed] = responses(driver.of(CallModel)[1])
    assert failed["response"]["error"]["reason"] == "invalid_transfer_target"
    assert driver.value == "stayed"


@pytest.mark.parametrize(("tool", "escalate"), [(approve, True), (lookup, False)])
def test_a_prompt_outcome_says_whether_a_tool_escalated(tool: Callable[..., dict], escalate: bool) -> None:
    name = tool.__name__
    turn = prompt_turn(agent("Reviewer", [FunctionTool(tool)]), "review", outcome=True)
    driver = run(turn, model=[calls(call(name, {"city": "x"})), "LGTM"])
    assert driver.value == PromptOutcome(output="LGTM", escalate=escalate)


# ---- callbacks ----------------------------------------------------------------------------------------------------


def test_a_before_model_halt_answers_without_calling_the_model() -> None:
    plan = agent(callbacks=[HaltModel], callback_config={"team": "a"})
    driver = run(prompt_turn(plan))

    [hook] = driver.of(RunHook)
    assert hook.hook == "before_model" and hook.id != 0 and hook.callbacks == plan.spec.callbacks
    view, history, tools = hook.args
    assert view == {
        "agent": "Solo",
        "provider": "gemini",
        "model": None,
        "generation_config": {},
        "callback_config": {"team": "a"},
    }
    assert history == [{"role": "user", "content": "hi"}] and tools == plan.declarations
    assert driver.of(CallModel) == []
    assert driver.value == "halted by callback"


def test_a_before_model_replace_sends_the_replaced_history() -> None:
    driver = run(prompt_turn(agent(callbacks=[ReplaceHistory])), model=["answer"])
    assert driver.of(CallModel)[0].history == [{"role": "user", "content": "replaced"}]


def test_an_after_model_replace_becomes_the_answer() -> None:
    driver = run(prompt_turn(agent(callbacks=[ReplaceAnswer])), model=["original"])
    [hook] = driver.of(RunHook)
    assert hook.hook == "after_model"
    assert hook.args[1] == {
        "text": "original",
        "content": text("original").content,
        "function_calls": [],
        "finish_reason": None,
    }
    assert driver.value == "rewritten original"


def test_an_answer_a_callback_makes_is_validated_and_an_invalid_one_fails_the_turn() -> None:
    conversation = Conversation()
    driver = run(prompt_turn(agent(callbacks=[InvalidAnswer]), conversation=conversation), model=["original"])
    error = driver.error
    assert isinstance(error, ProviderError) and error.reason == "invalid_model_output"
    assert conversation.history == []


def test_the_error_hook_is_fire_and_forget_and_hears_structural_tags_only() -> None:
    failure = ProviderHttpError(
        "upstream SECRET-BODY", reason="http_error", details={"status": 500, "body": "SECRET-BODY"}
    )
    plan = agent(callbacks=[WatchErrors])
    driver = run(prompt_turn(plan), model=[failure])

    [hook] = driver.of(RunHook)
    assert hook.id == 0 and hook.hook == "on_error", "nothing waits for the error hook"
    info = hook.args[1]
    assert isinstance(info.pop("invocation_id"), str)
    assert info == {"reason": "http_error", "type": "ProviderHttpError", "agent": "Solo", "kind": "prompt"}
    assert "SECRET" not in repr(hook.args)
    assert [type(e) for e in driver.batches[-1]] == [RunHook, Telemetry, Fail], "the failure goes out at once"


# ---- instructions -------------------------------------------------------------------------------------------------


def test_dynamic_instructions_are_resolved_before_the_model_call() -> None:
    plan = agent(instructions=greet)
    driver = run(invoke_turn(plan, state={"user:name": "Ada", "api_key": "sk-SECRET"}), model=["hello Ada"])

    [resolve] = driver.of(ResolveInstructions)
    assert isinstance(resolve.local, CallableRef) and resolve.global_ is None
    assert resolve.scope["agent"] == "Solo" and {k: resolve.scope[k] for k in SCOPE} == SCOPE
    assert resolve.scope["state"]["user:name"] == "Ada" and "SECRET" not in json.dumps(resolve.scope)
    assert driver.of(CallModel)[0].config["instructions"] == "Greet Ada for Solo."


@pytest.mark.parametrize("job_failed", [False, True])
def test_a_failing_instruction_provider_fails_the_turn_before_the_model(job_failed: bool) -> None:
    answers = {ResolveInstructions: lambda e: WorkerError("gone", reason="worker_lost")} if job_failed else {}
    driver = run(invoke_turn(agent(instructions=broken_provider)), answers=answers)
    assert driver.of(CallModel) == []
    error = driver.error
    assert isinstance(error, AgentError) and error.reason == "instruction_provider_failed"
    assert error.details == ({} if job_failed else {"key": "instructions", "type": "KeyError"})


def test_an_instruction_template_reading_a_missing_state_key_fails_with_its_name() -> None:
    driver = run(invoke_turn(agent(instructions="Hello {user:name}."), state={}))
    assert driver.error.reason == "missing_state_key" and driver.error.details == {"key": "user:name"}


# ---- deadlines and provider failures ------------------------------------------------------------------------------


def test_a_turn_past_its_deadline_fails_with_agent_turn_timeout_at_its_next_step() -> None:
    clock = FakeClock()
    plan = agent(tools=[FunctionTool(lookup)], turn_timeout_ms=1000, call_timeout_ms=800)
    turn = prompt_turn(plan, clock=clock)
    driver = TurnDriver(turn, model=[calls(call("lookup", {"city": "x"}))], hold=(RunTool,)).start()

    [model] = driver.of(CallModel)
    [tool] = driver.held
    assert model.deadline == tool.deadline == clock.now + 0.8, "a call's bound is agent_call_timeout"
    clock.advance(1.0)
    out = driver.feed(tool, ok(tool))
    assert not any(isinstance(e, CallModel) for e in out)
    error = driver.error
    assert isinstance(error, AskTimeout) and error.reason == "agent_turn_timeout" and error.details == {"agent": "Solo"}


@pytest.mark.parametrize(("elapsed", "reason"), [(0.8, "agent_call_timeout"), (1.0, "agent_turn_timeout")])
def test_a_model_call_that_times_out_fails_with_the_bound_it_passed(elapsed: float, reason: str) -> None:
    clock = FakeClock()
    turn = prompt_turn(agent(turn_timeout_ms=1000, call_timeout_ms=800), clock=clock)

    def slow(effect: CallModel) -> AdkError:
        clock.advance(elapsed)
        return AskTimeout("no answer", reason="timeout")

    driver = run(turn, model=[slow])
    assert isinstance(driver.error, AskTimeout) and driver.error.reason == reason


def test_a_provider_failure_fails_the_turn_with_structural_tags_only() -> None:
    failure = ProviderHttpError(
        "upstream said SECRET-BODY",
        reason="http_error",
        details={
            "status": 503,
            "google_status": "UNAVAILABLE",
            "retry_delay_s": 2,
            "body": "SECRET-BODY",
            "error_reason": "has SECRET spaces",
        },
    )
    driver = run(prompt_turn(agent()), model=[failure])

    error = driver.error
    assert type(error) is ProviderHttpError and error.reason == "http_error"
    assert error.message == "the model provider answered HTTP 503"
    assert error.details == {"status": 503, "google_status": "UNAVAILABLE", "retry_delay_s": 2}
    [telemetry] = driver.of(Telemetry)
    assert "SECRET" not in repr([(e.measurements, e.metadata) for e in telemetry.events])


# ---- Runner invocations -------------------------------------------------------------------------------------------


def test_a_runner_invocation_is_admitted_first_and_gives_its_permit_back_before_it_answers() -> None:
    clock = FakeClock()
    turn = runner_turn(
        agent(), InMemorySessionService(), clock=clock, admission_control={"overflow": "queue", "queue_timeout": 250}
    )
    driver = TurnDriver(turn, model=["done"], hold=(AcquirePermit,)).start()

    [acquire] = driver.effects
    assert isinstance(acquire, AcquirePermit)
    assert (acquire.agent, acquire.overflow, acquire.queue_timeout_ms, acquire.deadline) == (
        "Solo",
        "queue",
        250,
        clock.now + 60,
    )
    driver.feed(acquire, Permit(permit_id="p-7", agent="Solo", owner=1))
    kinds = driver.kinds(Notify, Telemetry)
    assert kinds == ["AcquirePermit", "SessionCall", "CallModel", "SessionCall", "ReleasePermit", "Reply"]
    assert driver.of(ReleasePermit) == [ReleasePermit(permit_id="p-7")]


@pytest.mark.parametrize(
    ("error", "elapsed", "reason"),
    [
        (PolicyDenied("busy", reason="busy"), 0.0, "busy"),
        (PolicyDenied("queued too long", reason="admission_timeout"), 0.0, "admission_timeout"),
        (PolicyDenied("queued too long", reason="admission_timeout"), 61.0, "agent_turn_timeout"),
        (AskTimeout("no answer", reason="timeout"), 61.0, "agent_turn_timeout"),
    ],
)
def test_a_refused_admission_fails_the_invocation_without_touching_the_session(
    error: AdkError, elapsed: float, reason: str
) -> None:
    clock = FakeClock()
    turn = runner_turn(agent(), InMemorySessionService(), clock=clock, admission_control={"overflow": "queue"})

    def refuse(effect: AcquirePermit) -> AdkError:
        clock.advance(elapsed)
        return error

    driver = run(turn, answers={AcquirePermit: refuse})
    assert driver.kinds(Telemetry) == ["AcquirePermit", "Fail"]
    assert driver.error.reason == reason


def test_a_permit_granted_after_the_invocation_was_cancelled_is_released_at_once() -> None:
    turn = runner_turn(agent(), InMemorySessionService(), admission_control={})
    driver = TurnDriver(turn, hold=(AcquirePermit,)).start()
    [acquire] = driver.held
    cancelled = RunError("cancelled", reason="cancelled")
    assert [type(e) for e in driver.cancel(cancelled)] == [Telemetry, Fail]
    assert driver.feed(acquire, Permit(permit_id="late", agent="Solo", owner=1)) == [ReleasePermit(permit_id="late")]


def test_a_runner_invocation_reads_its_session_and_stores_the_user_event_in_one_session_call() -> None:
    service = InMemorySessionService()
    driver = run(runner_turn(agent(), service, "hello"), model=["done"])

    first = driver.of(SessionCall)[0]
    assert first.service is service and methods(first) == ["create_session", "add_event"]
    assert first.ops[0].kwargs == SCOPE
    user = first.ops[1].args[1]
    assert user.author == "user" and user.content is not None and user.content.to_dict()["parts"][0]["text"] == "hello"
    assert [e.author for e in service.get_session(first.ops[1].args[0]).events] == ["user", "Solo"]


def test_a_runner_input_that_fails_its_checks_touches_no_session() -> None:
    driver = run(runner_turn(agent(), InMemorySessionService(), 42))
    assert driver.of(SessionCall) == [] and driver.error.reason == "invalid_input"


def _piece(value: str) -> tuple[dict[str, Any], None]:
    return {"schema_version": 1, "parts": [{"type": "text", "text": value}]}, None


def test_events_are_written_one_at_a_time_in_order_and_each_is_sent_to_the_sink_once_stored() -> None:
    service = InMemorySessionService()
    turn = runner_turn(agent(tools=[FunctionTool(lookup)]), service, streaming_mode="text")
    driver = TurnDriver(turn, hold=(CallModel, SessionCall)).start()
    answers = iter([calls(call("lookup", {"city": "x"}, "c1")), text("done")])

    stored = []
    while driver.held:
        writes = [e for e in driver.held if isinstance(e, SessionCall)]
        assert len(writes) <= 1, "never two writes at once"
        if writes:
            [write] = writes
            event = next(op.args[1] for op in write.ops if op.method == "add_event")
            out = driver.feed(write, blocking.session_calls(None, service, write.ops))
            stored.append(event)
            assert out[0] == Notify(
                target=SINK, message=TurnEvent(turn_id=turn.turn_id or "", index=len(stored), event=event)
            )
            continue
        [model] = driver.held
        driver.progress(model, _piece("part 1"))
        driver.progress(model, _piece("part 2"))  # queued behind the first partial's write
        driver.feed(model, next(answers))  # queued behind both
    assert written(driver) == stored
    parts = [[p.get("text", p["type"]) for p in e.content.to_dict()["parts"]] if e.content else [] for e in stored]
    assert parts == [
        ["hi"],
        ["part 1"],
        ["part 2"],
        ["function_call"],
        ["function_response"],
        ["part 1"],
        ["part 2"],
        ["done"],
    ]
    assert [(e.partial, e.is_final) for e in stored].count((True, False)) == 4 and stored[-1].is_final
    assert driver.value == TurnResult(kind="completed", output="done", events=8, invocation_id=stored[0].invocation_id)


def test_the_final_event_carries_the_output_key_and_clears_temp_state_in_the_same_write() -> None:
    service = InMemorySessionService()
    driver = run(runner_turn(agent(output_key="answer"), service), model=["done"])

    last = driver.of(SessionCall)[-1]
    assert methods(last) == ["add_event", "clear_temp_state"]
    final = last.ops[0].args[1]
    assert final.is_final and final.author == "Solo" and final.actions.state_delta == {"answer": "done"}
    assert service.get_session(last.ops[0].args[0]).state["answer"] == "done"


def test_max_llm_calls_ends_the_invocation_with_an_error_event_that_clears_temp_state() -> None:
    turn = runner_turn(agent(tools=[FunctionTool(lookup)]), InMemorySessionService(), max_llm_calls=2)
    driver = run(turn, model=[calls(call("lookup", {"city": "x"}))] * 2)

    error = driver.error
    assert isinstance(error, BudgetExceeded) and error.reason == "max_llm_calls" and error.details == {"max": 2}
    assert len(driver.of(CallModel)) == 2
    last = driver.of(SessionCall)[-1]
    assert methods(last) == ["add_event", "clear_temp_state"]
    boundary = written(driver)[-1]
    assert boundary.error is not None and boundary.error.reason == "max_llm_calls" and not boundary.is_final


def test_streamed_batches_become_partial_events_before_the_final_event() -> None:
    turn = runner_turn(agent(), InMemorySessionService(), streaming_mode="text", max_stream_output_bytes=1000)
    driver = TurnDriver(turn, hold=(CallModel,)).start()
    [model] = driver.held
    assert (model.streaming, model.max_stream_bytes) == ("text", 1000)

    for piece in ("Hel", "lo"):
        driver.progress(model, ({"schema_version": 1, "parts": [{"type": "text", "text": piece}]}, None))
    driver.feed(model, text("Hello"))
    events = written(driver)
    texts = [e.content.to_dict()["parts"][0]["text"] if e.content else None for e in events]
    assert texts == ["hi", "Hel", "lo", "Hello"]
    assert [(e.partial, e.is_final) for e in events] == [(False, False), (True, False), (True, False), (False, True)]


def test_a_batch_for_a_call_that_does_not_stream_is_ignored() -> None:
    driver = TurnDriver(runner_turn(agent(), InMemorySessionService()), hold=(CallModel,)).start()
    [model] = driver.held
    assert driver.progress(model, ({"schema_version": 1, "parts": [{"type": "text", "text": "x"}]}, None)) == []


POLICY = {"id": "small", "agents": {"allow": "all"}, "max_content_bytes": 16}


def _audits(events: list[Event]) -> list[dict[str, Any]]:
    return [dict(e.actions.runtime_policy_decision or {}) for e in events if e.author == "system"]


def test_an_output_over_the_policy_budget_is_audited_and_never_stored() -> None:
    turn = runner_turn(agent(), InMemorySessionService(), runtime_policy=POLICY)
    driver = run(turn, model=["A reply far over the budget: OUTPUT-MARK."])

    error = driver.error
    assert isinstance(error, PolicyDenied) and error.reason == "content_budget_exceeded"
    assert error.details == {"operation": "output_content", "subject": "Solo", "policy_id": "small"}
    events = written(driver)
    assert [e.author for e in events] == ["user", "system", "Solo"] and events[-1].error is not None
    [record] = _audits(events)
    assert (record["operation"], record["outcome"], record["run_id"]) == ("output_content", "denied", "run-1")
    assert not any(e.is_final for e in events)
    assert "OUTPUT-MARK" not in json.dumps([e.to_dict() for e in events])


def test_a_stream_past_the_policy_budget_is_denied_and_its_model_call_cancelled() -> None:
    turn = runner_turn(agent(), InMemorySessionService(), runtime_policy=POLICY, streaming_mode="text")
    driver = TurnDriver(turn, hold=(CallModel,)).start()
    [model] = driver.held
    out = driver.progress(model, ({"schema_version": 1, "parts": [{"type": "text", "text": "STREAM-MARK " * 4}]}, None))

    assert Cancel(ids=(model.id,)) in out
    assert driver.error.reason == "content_budget_exceeded"
    events = written(driver)
    assert [e.author for e in events] == ["user", "system", "Solo"]
    assert "STREAM-MARK" not in json.dumps([e.to_dict() for e in events])


def test_a_denied_agent_stores_only_the_audit_event() -> None:
    policy = {"id": "others", "agents": {"allow": ["SomeoneElse"]}}
    driver = run(runner_turn(agent(), InMemorySessionService(), "SECRET-INPUT", runtime_policy=policy))
    assert driver.of(CallModel) == [] and driver.error.reason == "not_allowed"
    events = written(driver)
    assert [e.author for e in events] == ["system"] and _audits(events)[0]["operation"] == "agent"
    assert "SECRET-INPUT" not in json.dumps([e.to_dict() for e in events])


def test_an_always_gated_call_pauses_the_invocation_unexecuted_and_keeps_temp_state() -> None:
    service = InMemorySessionService()
    driver = run(
        runner_turn(agent(tools=[GUARDED]), service), model=[calls(call("transfer_money", {"city": "x"}, "c1"))]
    )

    result = driver.value
    assert isinstance(result, TurnResult) and result.kind == "paused" and result.events == 3
    pause = result.event
    assert pause is not None and pause == written(driver)[-1] and pause.actions.pause is not None
    assert pause.actions.pause.reason == "tool_confirmation"
    assert pause.actions.pause.details == {
        "type": "tool_confirmation",
        "function_name": "transfer_money",
        "call_id": "c1",
        "action_id": action_id(result.invocation_id, "transfer_money", "c1", {"city": "x"}),
    }
    assert driver.of(RunTool) == [] and driver.of(CheckGate) == []
    assert all("clear_temp_state" not in methods(c) for c in driver.of(SessionCall)), "a pause keeps temp state"
    state = service.get_session(driver.of(SessionCall)[0].ops[1].args[0]).state
    assert state[pause_key(pause.actions.pause.continuation_id)] == "open"


@pytest.mark.parametrize(("city", "pauses"), [("Paris", True), ("Oslo", False)])
def test_a_dynamic_gate_pauses_only_when_it_requires_confirmation(city: str, pauses: bool) -> None:
    clock = FakeClock()
    gated = FunctionTool(lookup, name="guarded", requires_confirmation=paris_gate)
    plan = agent(tools=[gated])
    driver = run(
        runner_turn(plan, InMemorySessionService(), clock=clock),
        model=[calls(call("guarded", {"city": city}, "c1")), "done"],
    )

    [gate] = driver.of(CheckGate)
    assert (gate.index, gate.args, gate.call_id, gate.deadline) == (0, {"city": city}, "c1", clock.now + 60)
    assert gate.payload == plan.tools["guarded"].payload and gate.context["agent_name"] == "Solo"
    if pauses:
        pause = driver.value.event.actions.pause
        assert pause.details["hint"] == "Paris needs a yes" and driver.of(RunTool) == []
    else:
        assert [t.name for t in driver.of(RunTool)] == ["guarded"] and driver.value.output == "done"


@pytest.mark.parametrize("answer", [{"error": "invalid_confirmation"}, ToolError("gone", reason="worker_lost")])
def test_a_broken_gate_fails_its_call_closed(answer: Any) -> None:
    gated = FunctionTool(lookup, name="guarded", requires_confirmation=paris_gate)
    turn = runner_turn(agent(tools=[gated]), InMemorySessionService())
    driver = run(
        turn, model=[calls(call("guarded", {"city": "Paris"}, "c1")), "done"], answers={CheckGate: lambda e: answer}
    )
    assert driver.of(RunTool) == []
    reason = "invalid_confirmation" if isinstance(answer, dict) else "confirmation_failed"
    assert [p["response"]["error"]["reason"] for p in stored_responses(written(driver))] == [reason]
    assert driver.value.output == "done"


def test_a_long_running_tool_suspends_the_invocation() -> None:
    driver = run(
        runner_turn(agent(tools=[FunctionTool(start_job)]), InMemorySessionService()),
        model=[calls(call("start_job", {"city": "x"}, "c1"))],
    )
    pause = driver.value.event.actions.pause
    assert pause.reason == "long_running"
    assert pause.details == {
        "type": "long_running",
        "function_name": "start_job",
        "call_id": "c1",
        "operation_id": "op-42",
        "message": "working on x",
    }


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_resumed_confirmation_runs_the_approved_call_or_tells_the_model_it_was_rejected(confirmed: bool) -> None:
    service = InMemorySessionService()
    plan = agent(tools=[GUARDED])
    pause_event = paused(service, plan, [calls(call("transfer_money", {"city": "x"}, "c1"))])
    pause = pause_event.actions.pause
    assert pause is not None
    resume = ResumeSpec(key="", response={"confirmed": confirmed})
    driver = run(runner_turn(plan, service, None, resume=resume), model=["finished"])

    load, claim = driver.of(SessionCall)[:2]
    assert methods(load) == ["create_session"]
    assert methods(claim) == ["add_event_if_state"]
    ref, claim_event, expected = claim.ops[0].args
    assert expected == {pause_key(pause.continuation_id): "open"}
    assert claim_event.actions.state_delta == {pause_key(pause.continuation_id): "consumed"}
    [model] = driver.of(CallModel)
    [answer] = [p for entry in model.history for p in entry["content"]["parts"] if p["type"] == "function_response"]
    if confirmed:
        assert [(t.name, t.call_id, t.args) for t in driver.of(RunTool)] == [("transfer_money", "c1", {"city": "x"})]
        assert answer["response"] == {"city": "x", "found": True}
    else:
        assert driver.of(RunTool) == []
        assert answer["response"]["error"]["reason"] == "tool_confirmation_rejected"
    assert driver.value == TurnResult(
        kind="completed", output="finished", events=len(written(driver)), invocation_id=pause_event.invocation_id
    )
    again = run(runner_turn(plan, service, None, resume=resume))
    assert again.error.reason == "no_paused_invocation" and methods(again.of(SessionCall)[-1]) == ["create_session"]


def test_a_long_running_resume_records_the_terminal_response_against_the_original_call() -> None:
    service = InMemorySessionService()
    plan = agent(tools=[FunctionTool(start_job)])
    pause_event = paused(service, plan, [calls(call("start_job", {"city": "x"}, "c1"))])
    response = {"operation_id": "op-42", "status": "completed", "result": 7}
    driver = run(
        runner_turn(plan, service, None, resume=ResumeSpec(key=pause_event.invocation_id, response=response)),
        model=["all done"],
    )

    assert driver.of(RunTool) == []
    claim = written(driver)[0]
    assert (claim.author, claim.invocation_id) == ("Solo", pause_event.invocation_id)
    [part] = claim.content.to_dict()["parts"] if claim.content else []
    assert (part["type"], part["name"], part["id"], part["response"]) == (
        "function_response",
        "start_job",
        "c1",
        response,
    )
    assert driver.value.output == "all done"


def test_an_invalid_resume_response_claims_nothing() -> None:
    service = InMemorySessionService()
    plan = agent(tools=[GUARDED])
    paused(service, plan, [calls(call("transfer_money", {"city": "x"}, "c1"))])
    driver = run(runner_turn(plan, service, None, resume=ResumeSpec(key="", response={"confirmed": "yes"})))
    assert driver.error.reason == "invalid_resume_response"
    assert [methods(c) for c in driver.of(SessionCall)] == [["create_session"]]


def test_a_resume_whose_claim_loses_the_race_fails_with_no_paused_invocation() -> None:
    service = InMemorySessionService()
    plan = agent(tools=[GUARDED])
    paused(service, plan, [calls(call("transfer_money", {"city": "x"}, "c1"))])
    conflict = ConcurrencyConflict("state changed", reason="state_mismatch")
    race = fail_writes(lambda e: methods(e) == ["add_event_if_state"], conflict)
    driver = run(
        runner_turn(plan, service, None, resume=ResumeSpec(key="", response={"confirmed": True})), session_error=race
    )
    assert isinstance(driver.error, RunError) and driver.error.reason == "no_paused_invocation"
    assert driver.of(RunTool) == [] and len(driver.of(SessionCall)) == 2, "nothing is written after a failed write"


def test_cancel_of_a_running_invocation_cancels_in_flight_work_and_ends_with_an_error_event() -> None:
    turn = runner_turn(agent(), InMemorySessionService(), admission_control={})
    driver = TurnDriver(turn, hold=(CallModel,)).start()
    [model] = driver.held
    cancelled = RunError("the invocation was cancelled", reason="cancelled")

    out = driver.cancel(cancelled)
    assert out[0] == Cancel(ids=(model.id,))
    boundary = driver.of(SessionCall)[-1]
    assert methods(boundary) == ["add_event", "clear_temp_state"]
    assert boundary.ops[0].args[1].error.reason == "cancelled"
    assert driver.kinds(Telemetry, Notify)[-4:] == ["Cancel", "SessionCall", "ReleasePermit", "Fail"]
    assert driver.error is cancelled
    assert driver.feed(model, text("late")) == [], "a late answer is ignored"
    assert driver.cancel(cancelled) == [], "a finished turn is left alone"


def test_a_failed_event_write_fails_the_invocation_and_nothing_more_is_written() -> None:
    outage = SessionError("store down", reason="unavailable")
    model_event = fail_writes(lambda e: methods(e) == ["add_event"], outage)
    turn = runner_turn(agent(tools=[FunctionTool(lookup)]), InMemorySessionService(), admission_control={})
    driver = run(turn, model=[calls(call("lookup", {"city": "x"}))], session_error=model_event)

    assert driver.error is outage
    assert driver.of(RunTool) == [], "the calls of an answer that was not stored never run"
    assert [methods(c) for c in driver.of(SessionCall)] == [["create_session", "add_event"], ["add_event"]]
    assert driver.kinds(Telemetry, Notify)[-2:] == ["ReleasePermit", "Fail"]


def test_abort_releases_the_permit_and_fails_the_turn_without_running_anything_else() -> None:
    turn = runner_turn(agent(), InMemorySessionService(), admission_control={})
    driver = TurnDriver(turn, hold=(CallModel,)).start()
    [model] = driver.held
    exited = ActorCrashed("the agent exited", reason="agent_exited")

    assert driver.abort(exited) == [ReleasePermit(permit_id="permit-1"), Fail(error=exited)]
    assert driver.feed(model, text("late")) == []
    assert driver.abort(exited) == [], "an answered turn answers once"
