"""The Runner against the Gemini emulator: stored events, streaming, ``temp:`` state, ``output_key``, budgets,
runtime policy, admission, tool execution, session lanes, secrets and option validation (``docs/RUNNER.md``)."""

from __future__ import annotations

import json
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.runner.conftest import (
    Journal,
    Spawner,
    config_for,
    first_run_item,
    function_responses,
    journal_tool,
    make_spawner,
    model_contents,
    publish_tool,
    read_events,
    tool_hook_counter,
    unique,
    until,
)
from adk_actors import ConfigError, FunctionTool, Runner, invoke, runs, telemetry
from adk_actors.admission.logic import AdmissionConfig, AdmissionState, Grant, Reject, Waiting
from adk_actors.agents.context import ContextPolicy
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, AskTimeout, BudgetExceeded, PolicyDenied, RunError
from adk_actors.events import Event
from adk_actors.policy import RuntimePolicy
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import CrossProcessCounter
from adk_actors.tools import ToolContext

APP = "runner_tests"
USER = "u1"

LOOKUP = {
    "when": {"user_text_contains": "look", "has_function_response": False},
    "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Zanzibar-Q7"}}]},
}
AFTER_TOOL = {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}}
ECHO = {"when": {}, "respond": {"text": "You said: {user_text}"}}


def parts_of(event: Event) -> list[str]:
    return [] if event.content is None else [p["type"] for p in event.content.to_dict()["parts"]]


def ref_of(session_id: str) -> SessionRef:
    return SessionRef(app_name=APP, user_id=USER, session_id=session_id)


def system_text(request: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in (request["body"].get("systemInstruction") or {}).get("parts", []))


def texts_by_role(request: dict[str, Any], role: str) -> list[str]:
    return [
        "".join(p.get("text", "") for p in c["parts"])
        for c in model_contents(request)
        if c["role"] == role and any("text" in p for p in c["parts"])
    ]


def one_final_per_invocation(events: list[Event]) -> dict[str, Event]:
    finals: dict[str, Event] = {}
    for event in events:
        if event.is_final:
            assert event.invocation_id not in finals, "two final events in one invocation"
            finals[event.invocation_id] = event
    return finals


# ---- events ------------------------------------------------------------------------------------------------------


def test_an_invocation_stores_user_model_tool_and_exactly_one_final_event_in_order(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    agent = agent_factory("Events", [journal_tool(journal, "lookup")])
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    first = runner.run(USER, sid, "Please look it up.")
    second = runner.run(USER, sid, "Thanks")

    events = read_events(svc, APP, USER, sid)
    assert [(e.author, parts_of(e)) for e in events] == [
        ("user", ["text"]),
        (agent, ["function_call"]),
        (agent, ["function_response"]),
        (agent, ["text"]),
        ("user", ["text"]),
        (agent, ["text"]),
    ]
    assert [e.invocation_id for e in events[:4]] == [events[0].invocation_id] * 4
    assert events[4].invocation_id == events[5].invocation_id != events[0].invocation_id
    finals = one_final_per_invocation(events)
    assert [finals[events[0].invocation_id].text(), finals[events[4].invocation_id].text()] == [first, second]
    assert first == "Tool said: city: Zanzibar-Q7, ok: True" and second == "You said: Thanks"
    assert not any(e.partial for e in events)
    assert len(journal.records()) == 1


def test_consecutive_tool_rounds_each_store_their_answer_and_the_model_sees_both(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    """Answers are indexed per round: the second round's call #0 is stored and sent, not taken for the first's."""
    second = {"function_calls": [{"name": "lookup", "args": {"city": "Second-R2"}}], "times": 1}
    again = {"when": {"has_function_response": True}, "respond": second}
    emu.set_script({"rules": [again, LOOKUP, AFTER_TOOL, ECHO]})
    agent = agent_factory("TwoRounds", [journal_tool(journal, "lookup")])
    sid = unique("s")
    answer = Runner(agent, APP, svc, system=system, max_tool_rounds=4).run(USER, sid, "Please look it up.")
    assert answer == "Tool said: city: Second-R2, ok: True"
    events = read_events(svc, APP, USER, sid)
    assert [parts_of(e) for e in events] == [
        ["text"], ["function_call"], ["function_response"], ["function_call"], ["function_response"], ["text"]
    ]  # fmt: skip
    assert len(journal.records()) == 2 and len(emu.requests) == 3


@pytest.mark.parametrize("mode", ["text", "content"])
def test_streamed_partials_are_stored_replayable_and_kept_out_of_the_next_model_call(
    mode: str, system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    answer = "Supervisors restart children according to their strategy, one_for_one by default here."
    emu.set_script(
        {"rules": [{"when": {"user_text_contains": "explain"}, "respond": {"text": answer, "chunks": 40}}, ECHO]}
    )
    agent = agent_factory("Streaming")
    runner = Runner(agent, APP, svc, streaming_mode=mode, system=system)
    sid = unique("s")
    streamed = list(runner.stream(USER, sid, "Please explain supervisors."))

    stored = read_events(svc, APP, USER, sid)
    assert emu.requests[0]["path"].endswith(":streamGenerateContent")
    assert [e.to_dict() for e in streamed] == [e.to_dict() for e in stored]
    partials = [e for e in stored if e.partial]
    assert len(partials) >= 2, "40 deltas make at least two batches of at most 32"
    assert all(not e.is_final and e.author == agent for e in partials)
    assert "".join(p.text() or "" for p in partials) == answer
    finals = [e for e in stored if e.is_final]
    assert len(finals) == 1 and finals[0] is stored[-1] and finals[0].text() == answer
    assert stored[0].author == "user" and stored.index(partials[-1]) < stored.index(finals[0])

    assert runner.run(USER, sid, "And again") == "You said: And again"
    request = emu.requests[-1]
    assert [c["role"] for c in model_contents(request)] == ["user", "model", "user"]
    assert texts_by_role(request, "model") == [answer], "the final answer once, no partial snapshot"


@pytest.mark.parametrize(
    ("script", "options", "reason", "error_type"),
    [
        ({"rules": [{"when": {}, "respond": {"fault": {"status": 400}}}]}, {}, None, None),
        (
            {"rules": [{"when": {}, "respond": {"text": "An answer far longer than eight bytes.", "chunks": 8}}]},
            {"max_stream_output_bytes": 8},
            "max_stream_output_bytes",
            "BudgetExceeded",
        ),
    ],
)
def test_stream_of_a_failing_invocation_yields_its_events_then_raises_run_error_with_its_reason(
    script: dict[str, Any],
    options: dict[str, Any],
    reason: str | None,
    error_type: str | None,
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script(script)
    runner = Runner(agent_factory("StreamFails"), APP, svc, streaming_mode="text", system=system, **options)
    sid = unique("s")
    seen: list[Event] = []
    with pytest.raises(RunError) as info:
        for event in runner.stream(USER, sid, "Hello", timeout=20):
            seen.append(event)

    stored = read_events(svc, APP, USER, sid)
    error = stored[-1].error
    assert error is not None and not any(e.is_final for e in stored)
    assert (info.value.reason, info.value.details["type"]) == (error.reason, error.type)
    if reason is not None:
        assert (error.reason, error.type) == (reason, error_type)
    assert seen and seen[0].author == "user"
    assert [e.id for e in seen] == [e.id for e in stored[: len(seen)]]


# ---- temp: state ---------------------------------------------------------------------------------------------------


def test_temp_state_is_visible_during_the_invocation_and_cleared_after_its_final_event(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    agent = agent_factory("TempFinal", instructions="Clearance level {temp:x}.")
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    svc.create_session(app_name=APP, user_id=USER, session_id=sid)
    svc.update_state(ref_of(sid), {"temp:x": 7, "kept": "yes"})

    assert runner.run(USER, sid, "Hello") == "You said: Hello"
    assert system_text(emu.requests[-1]) == "Clearance level 7."
    state = svc.get_session(ref_of(sid)).state
    assert "temp:x" not in state and state["kept"] == "yes"


def test_temp_state_is_cleared_after_an_error_event(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 400}}}]})
    agent = agent_factory("TempError", instructions="Clearance level {temp:x}.")
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    svc.create_session(app_name=APP, user_id=USER, session_id=sid)
    svc.update_state(ref_of(sid), {"temp:x": 7})

    with pytest.raises(AdkError) as info:
        runner.run(USER, sid, "Hello")
    assert system_text(emu.requests[-1]) == "Clearance level 7."
    events = read_events(svc, APP, USER, sid)
    assert [e.author for e in events] == ["user", agent]
    assert events[-1].error is not None and events[-1].error.reason == info.value.reason
    assert events[-1].error.type == type(info.value).__name__ and not events[-1].is_final
    assert "temp:x" not in svc.get_session(ref_of(sid)).state


def test_temp_state_is_kept_while_paused_and_cleared_when_the_resumed_invocation_ends(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    counter: CrossProcessCounter,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"user_text_contains": "publish", "has_function_response": False},
                    "respond": {"function_calls": [{"name": "publish_release", "args": {"environment": "production"}}]},
                },
                AFTER_TOOL,
                ECHO,
            ]
        }
    )
    agent = agent_factory("TempPause", [publish_tool(counter)], instructions="Clearance level {temp:x}.")
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    svc.create_session(app_name=APP, user_id=USER, session_id=sid)
    svc.update_state(ref_of(sid), {"temp:x": 7})

    paused = runner.run(USER, sid, "Publish the release.")
    assert isinstance(paused, runs.Paused)
    assert svc.get_session(ref_of(sid)).state["temp:x"] == 7
    assert runner.resume(USER, sid, None, {"confirmed": True}) == "Tool said: production"
    assert system_text(emu.requests[-1]) == "Clearance level 7.", "the resumed invocation still sees it"
    assert "temp:x" not in svc.get_session(ref_of(sid)).state


# ---- output_key ----------------------------------------------------------------------------------------------------


def test_output_key_commits_the_output_with_the_final_event(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    agent = agent_factory("OutputKey", output_key="last_answer")
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    output = runner.run(USER, sid, "Hello")

    final = read_events(svc, APP, USER, sid)[-1]
    assert final.is_final and final.actions.state_delta == {"last_answer": output}
    assert svc.get_session(ref_of(sid)).state["last_answer"] == output == "You said: Hello"


def test_state_a_tool_writes_through_its_context_is_stored_with_the_round(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    def remember(key: str, value: str, tool_context: ToolContext) -> str:
        """Store a value for the user."""
        tool_context.actions.set_state(f"user:{key}", value)
        tool_context.actions.set_state("temp:seen", True)
        return "ok"

    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "remember", "args": {"key": "colour", "value": "teal"}}]},
                },
                {"when": {}, "respond": {"text": "Noted."}},
            ]
        }
    )
    agent = agent_factory("Remembering", tools=[FunctionTool(remember, inline=True)])
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    assert runner.run(USER, sid, "Remember teal") == "Noted."
    tool_event = next(
        e
        for e in read_events(svc, APP, USER, sid)
        if e.content is not None and e.content.parts[0].type == "function_response"
    )
    assert tool_event.actions.state_delta["user:colour"] == "teal"
    state = svc.get_session(ref_of(sid)).state
    assert state["user:colour"] == "teal" and "temp:seen" not in state  # temp: cleared at the final event


def test_output_key_with_an_output_schema_stores_the_parsed_object(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {"json_mode": True}, "respond": {"json": {"answer": "42", "sure": True}}}]})
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "sure": {"type": "boolean"}},
        "required": ["answer", "sure"],
    }
    agent = agent_factory("OutputSchema", output_key="last_answer", output_schema=schema)
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    output = runner.run(USER, sid, "What is the answer?")

    assert json.loads(output) == {"answer": "42", "sure": True}
    final = read_events(svc, APP, USER, sid)[-1]
    assert final.is_final and final.actions.state_delta == {"last_answer": {"answer": "42", "sure": True}}
    assert svc.get_session(ref_of(sid)).state["last_answer"] == {"answer": "42", "sure": True}


# ---- budgets -------------------------------------------------------------------------------------------------------


def assert_failed_without_final(events: list[Event], reason: str) -> None:
    assert not any(e.is_final for e in events)
    assert events[-1].error is not None and events[-1].error.reason == reason


@pytest.mark.parametrize(
    ("options", "reason", "model_calls"),
    [
        ({"max_llm_calls": 2, "max_tool_rounds": 5}, "max_llm_calls", 2),
        ({"max_llm_calls": 5, "max_tool_rounds": 2}, "max_tool_rounds", 3),
    ],
)
def test_a_model_that_always_calls_a_tool_hits_the_lower_of_the_call_and_round_budgets(
    options: dict[str, int],
    reason: str,
    model_calls: int,
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script(
        {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Paris"}}]}}]}
    )
    agent = agent_factory("Budget", [journal_tool(journal, "lookup")])
    runner = Runner(agent, APP, svc, system=system, **options)
    sid = unique("s")
    with pytest.raises(BudgetExceeded) as info:
        runner.run(USER, sid, "Loop forever")
    assert info.value.reason == reason
    assert len(emu.requests) == model_calls
    assert len(journal.records()) == 2, "two complete tool rounds ran before the budget stopped the third"
    assert_failed_without_final(read_events(svc, APP, USER, sid), reason)


def test_run_timeout_bounds_the_whole_invocation_across_its_tool_rounds(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    """Every round (a model call and a 0.3 s tool) is far inside ``run_timeout``; the invocation as a whole is not."""
    emu.set_script(
        {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Paris"}}]}}]}
    )
    agent = agent_factory("RunTimeout", [journal_tool(journal, "lookup", hold_s=0.3)])
    runner = Runner(agent, APP, svc, run_timeout=2000, system=system)
    sid = unique("s")
    started = time.monotonic()
    with pytest.raises(AskTimeout) as info:
        runner.run(USER, sid, "Loop until the deadline")
    elapsed = time.monotonic() - started

    assert info.value.reason == "agent_turn_timeout"
    assert 2.0 <= elapsed < 6.0, elapsed
    assert len(journal.records()) >= 2, "several rounds completed before the deadline"
    assert len(emu.requests) < runner.options.max_tool_rounds, "a budget, not the deadline, ended it"
    assert_failed_without_final(read_events(svc, APP, USER, sid), "agent_turn_timeout")


def test_a_stream_over_max_stream_output_bytes_fails_and_stores_no_final(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script(
        {"rules": [{"when": {}, "respond": {"text": "This answer is far longer than eight bytes.", "chunks": 8}}]}
    )
    agent = agent_factory("StreamBudget")
    runner = Runner(agent, APP, svc, streaming_mode="text", max_stream_output_bytes=8, system=system)
    sid = unique("s")
    with pytest.raises(BudgetExceeded) as info:
        runner.run(USER, sid, "Talk")
    assert info.value.reason == "max_stream_output_bytes"
    events = read_events(svc, APP, USER, sid)
    assert_failed_without_final(events, "max_stream_output_bytes")
    assert sum(len((e.text() or "").encode()) for e in events if e.partial) <= 8


def test_context_overflow_error_fails_before_any_provider_request(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    agent = agent_factory("ContextError")
    sid = unique("s")
    Runner(agent, APP, svc, system=system).run(USER, sid, "long history " * 40)
    strict = Runner(agent, APP, svc, context_policy={"max_bytes": 300, "overflow": "error"}, system=system)
    before = len(emu.requests)
    with pytest.raises(BudgetExceeded) as info:
        strict.run(USER, sid, "Short question")
    assert info.value.reason == "context_budget_exceeded"
    assert info.value.details["max_bytes"] == 300 and info.value.details["bytes"] > 300
    assert len(emu.requests) == before
    assert_failed_without_final(read_events(svc, APP, USER, sid)[2:], "context_budget_exceeded")


def _history(agent: str) -> list[Event]:
    """Three old exchanges; the middle one is a tool round trip."""
    call = {"type": "function_call", "name": "lookup", "args": {"city": "Paris"}, "id": "call-beta"}
    response = {"type": "function_response", "name": "lookup", "id": "call-beta", "response": {"ok": True}}
    items: list[tuple[str, str, Any]] = [
        ("alpha", "user", "ALPHA question"),
        ("alpha", agent, "ALPHA answer"),
        ("beta", "user", "BETA question"),
        ("beta", agent, {"schema_version": 1, "parts": [call]}),
        ("beta", agent, {"schema_version": 1, "parts": [response]}),
        ("beta", agent, "BETA answer"),
        ("gamma", "user", "GAMMA question"),
        ("gamma", agent, "GAMMA answer"),
    ]
    return [
        Event.new(
            invocation_id=inv, author=author, content=content, is_final=author != "user" and isinstance(content, str)
        )
        for inv, author, content in items
    ]


def assert_calls_and_responses_paired(contents: list[dict[str, Any]]) -> None:
    for i, content in enumerate(contents):
        calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
        answers = [p["functionResponse"] for p in content["parts"] if "functionResponse" in p]
        if calls:
            following = [p["functionResponse"] for p in contents[i + 1]["parts"] if "functionResponse" in p]
            assert [(c["name"], c.get("id")) for c in calls] == [(r["name"], r.get("id")) for r in following]
        if answers:
            preceding = [p["functionCall"] for p in contents[i - 1]["parts"] if "functionCall" in p] if i else []
            assert [(c["name"], c.get("id")) for c in preceding] == [(r["name"], r.get("id")) for r in answers]


def test_truncation_keeps_the_newest_exchanges_and_never_splits_a_tool_round_trip(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    agent = agent_factory("Truncate")
    questions = ["ALPHA question", "BETA question", "GAMMA question", "DELTA question"]
    kept_counts = []
    for budget in range(150, 1650, 100):
        sid = unique("s")
        svc.create_session(app_name=APP, user_id=USER, session_id=sid, events=_history(agent))
        runner = Runner(agent, APP, svc, context_policy={"max_bytes": budget, "overflow": "truncate"}, system=system)
        assert runner.run(USER, sid, "DELTA question") == "You said: DELTA question"
        contents = model_contents(emu.requests[-1])
        asked = texts_by_role(emu.requests[-1], "user")
        assert asked == questions[len(questions) - len(asked) :], f"not the newest exchanges at {budget} bytes"
        assert contents[0]["role"] == "user" and "text" in contents[0]["parts"][0]
        assert_calls_and_responses_paired(contents)
        kept_counts.append(len(asked))
    assert kept_counts == sorted(kept_counts), "a bigger budget never keeps less"
    assert kept_counts[0] == 1 and kept_counts[-1] == 4 and {2, 3} <= set(kept_counts)


def test_max_request_bytes_fails_before_provider_io(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    agent = agent_factory("RequestBudget", instructions="Answer with care. " * 20)
    runner = Runner(agent, APP, svc, context_policy={"max_request_bytes": 256}, system=system)
    sid = unique("s")
    with pytest.raises(BudgetExceeded) as info:
        runner.run(USER, sid, "Hello")
    assert info.value.reason == "request_context_budget_exceeded"
    assert info.value.details["max_request_bytes"] == 256 and info.value.details["bytes"] > 256
    assert emu.requests == []
    assert_failed_without_final(read_events(svc, APP, USER, sid), "request_context_budget_exceeded")


def test_context_overflow_compress_without_a_compressor_is_refused_when_the_runner_is_built() -> None:
    with pytest.raises(ConfigError) as info:
        Runner("AnyAgent", APP, ActorSessionService(), context_policy={"max_bytes": 100, "overflow": "compress"})
    assert info.value.reason == "invalid_value" and info.value.details == {"key": "compressor"}


# ---- runtime policy ------------------------------------------------------------------------------------------------

AUDIT_KEYS = {"policy_id", "policy_fingerprint", "operation", "subject", "outcome", "reason"}


def audit_events(events: list[Event]) -> list[dict[str, Any]]:
    audits = [e for e in events if e.author == "system"]
    assert all(e.content is None and e.actions.runtime_policy_decision for e in audits)
    return [dict(e.actions.runtime_policy_decision or {}) for e in audits]


@pytest.mark.parametrize(
    ("policy", "text", "reason", "operation"),
    [
        ({"id": "only-others", "agents": {"allow": ["SomeoneElse"]}}, "Confidential-input-Zq9", "not_allowed", "agent"),
        (
            {"id": "deny-wins", "agents": {"allow": "all", "deny": ["{agent}"]}},
            "Confidential-input-Zq9",
            "denied",
            "agent",
        ),
        (
            {"id": "small-input", "agents": {"allow": "all"}, "max_content_bytes": 16},
            "Confidential-input-Zq9 " * 3,
            "content_budget_exceeded",
            "input_content",
        ),
    ],
)
def test_a_denied_agent_or_input_fails_with_one_audit_event_and_nothing_of_the_input_stored(
    policy: dict[str, Any],
    text: str,
    reason: str,
    operation: str,
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
) -> None:
    agent = agent_factory("Guarded")
    policy = json.loads(json.dumps(policy).replace("{agent}", agent))
    runner = Runner(agent, APP, svc, runtime_policy=policy, system=system)
    sid = unique("s")
    with pytest.raises(PolicyDenied) as info:
        runner.run(USER, sid, text)
    assert info.value.reason == reason

    events = read_events(svc, APP, USER, sid)
    assert [e.author for e in events] == ["system"]
    [record] = audit_events(events)
    assert set(record) >= AUDIT_KEYS
    assert record["policy_id"] == policy["id"] and record["operation"] == operation
    assert record["subject"] == agent and record["outcome"] == "denied" and record["reason"] == reason
    assert record["policy_fingerprint"] == RuntimePolicy.from_config(policy).fingerprint
    assert record["invocation_id"] == events[0].invocation_id
    assert "Confidential" not in json.dumps([e.to_dict() for e in events])
    assert emu.requests == []


def test_a_denied_tool_becomes_a_failed_response_is_never_executed_and_the_invocation_goes_on(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    agent = agent_factory("NoTools", [journal_tool(journal, "lookup")])
    policy = {"id": "no-tools", "agents": {"allow": "all"}, "tools": {"allow": []}}
    runner = Runner(agent, APP, svc, runtime_policy=policy, system=system)
    sid = unique("s")
    output = runner.run(USER, sid, "Please look it up.")

    assert journal.records() == []
    [response] = function_responses(emu.requests[-1])
    assert response["name"] == "lookup" and response["response"]["error"]["reason"] == "not_allowed"
    assert output.startswith("Tool said:")
    events = read_events(svc, APP, USER, sid)
    [record] = audit_events(events)
    assert set(record) >= AUDIT_KEYS and record["operation"] == "tool" and record["subject"] == "lookup"
    assert record["reason"] == "not_allowed" and record["policy_id"] == "no-tools"
    audit = next(e for e in events if e.author == "system")
    assert "Zanzibar" not in json.dumps(audit.to_dict())
    assert len(one_final_per_invocation(events)) == 1 and events[-1].is_final


def test_arguments_over_the_policy_budget_are_refused_before_the_tool_runs(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    agent = agent_factory("BigArgs", [journal_tool(journal, "lookup")])
    policy = {"id": "small-args", "agents": {"allow": "all"}, "tools": {"allow": "all"}, "max_argument_bytes": 8}
    runner = Runner(agent, APP, svc, runtime_policy=policy, system=system)
    sid = unique("s")
    runner.run(USER, sid, "Please look it up.")

    assert journal.records() == []
    [response] = function_responses(emu.requests[-1])
    assert response["response"]["error"]["reason"] == "argument_budget_exceeded"
    events = read_events(svc, APP, USER, sid)
    [record] = audit_events(events)
    assert record["operation"] == "arguments" and record["reason"] == "argument_budget_exceeded"
    assert record["limit_bytes"] == 8 and record["bytes"] == len(b'{"city":"Zanzibar-Q7"}')
    assert "Zanzibar" not in json.dumps(next(e for e in events if e.author == "system").to_dict())


@pytest.mark.parametrize("mode", ["none", "text"])
def test_an_output_over_the_content_budget_is_denied_and_never_stored(
    mode: str, system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "A reply far over the budget: OUTPUT-MARK-77."}}]})
    agent = agent_factory("BigOutput")
    policy = {"id": "small-output", "agents": {"allow": "all"}, "max_content_bytes": 16}
    runner = Runner(agent, APP, svc, runtime_policy=policy, streaming_mode=mode, system=system)
    sid = unique("s")
    with pytest.raises(PolicyDenied) as info:
        runner.run(USER, sid, "hi")
    assert info.value.reason == "content_budget_exceeded"

    events = read_events(svc, APP, USER, sid)
    [record] = audit_events(events)
    assert record["operation"] == "output_content" and record["reason"] == "content_budget_exceeded"
    assert not any(e.is_final for e in events)
    assert "OUTPUT-MARK" not in json.dumps([e.to_dict() for e in events]), "the rejected output was stored"


def test_a_tool_denied_by_policy_never_reaches_a_before_tool_callback(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    counter: CrossProcessCounter,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    agent = agent_factory("DeniedHooked", [journal_tool(journal, "lookup")], callbacks=[tool_hook_counter(counter)])
    policy = {"id": "deny-lookup", "agents": {"allow": "all"}, "tools": {"allow": "all", "deny": ["lookup"]}}
    output = Runner(agent, APP, svc, runtime_policy=policy, system=system).run(USER, unique("s"), "Please look it up.")

    [response] = function_responses(emu.requests[-1])
    assert response["response"]["error"]["reason"] == "denied" and output.startswith("Tool said:")
    assert (counter.value, journal.records()) == (0, []), "the denied call reached its callbacks"
    Runner(agent, APP, svc, system=system).run(USER, unique("s"), "Please look it up.")
    assert (counter.value, len(journal.records())) == (1, 1), "without the policy the callback runs once"


def test_a_tool_result_over_the_content_budget_is_audited_and_never_stored_or_sent(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    def lookup(city: str) -> dict:
        """Look something up for a city."""
        return {"city": city, "report": "RESULT-MARK-93 " * 20}

    emu.set_script({"rules": [LOOKUP, {"when": {"has_function_response": True}, "respond": {"text": "Noted."}}]})
    agent = agent_factory("BigResult", [FunctionTool(lookup)])
    policy = {"id": "small-results", "agents": {"allow": "all"}, "tools": {"allow": "all"}, "max_content_bytes": 128}
    sid = unique("s")
    runner = Runner(agent, APP, svc, runtime_policy=policy, system=system)
    assert runner.run(USER, sid, "Please look it up.") == "Noted."

    [response] = function_responses(emu.requests[-1])
    assert response["name"] == "lookup" and response["response"]["error"]["reason"] == "content_budget_exceeded"
    events = read_events(svc, APP, USER, sid)
    [record] = audit_events(events)
    assert set(record) >= AUDIT_KEYS and (record["operation"], record["subject"]) == ("tool_result", "lookup")
    assert record["reason"] == "content_budget_exceeded" and record["policy_id"] == "small-results"
    assert "RESULT-MARK" not in json.dumps([e.to_dict() for e in events]), "the rejected result was stored"
    assert "RESULT-MARK" not in json.dumps([r["body"] for r in emu.requests]), "the rejected result reached the model"
    assert len(one_final_per_invocation(events)) == 1 and events[-1].is_final


# ---- admission -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def narrow_node(make_system: Callable[..., ActorSystemHandle]) -> Iterator[ActorSystemHandle]:
    """A node that admits one run per agent at a time."""
    node = make_system(default_agent_limit=1, hosts=1, workers=1)
    yield node
    node.stop()


@pytest.fixture
def narrow_agent(narrow_node: ActorSystemHandle, emu: Emulator) -> Iterator[str]:
    emu.set_script(
        {"rules": [{"when": {"user_text_contains": "slow"}, "respond": {"text": "finally", "delay_ms": 30000}}, ECHO]}
    )
    spawner, cleanup = make_spawner(narrow_node)
    name = unique("Admitted")
    spawner(name, config_for(emu))
    yield name
    cleanup()


def hold_permit(runner: Runner, node: ActorSystemHandle) -> str:
    """Start a slow run and return once it holds its permit (its user event is stored after admission)."""
    run_id = runs.start(runner, USER, unique("holder"), "slow work", system=node)
    first = first_run_item(run_id, node)
    assert not first.terminal and first.item.author == "user"
    return run_id


def admission(node: ActorSystemHandle) -> dict[str, Any]:
    status: dict[str, Any] = node.ask("admission", GetStatus())
    return status


def test_admission_reject_fails_busy_while_the_agent_is_at_its_limit(
    narrow_node: ActorSystemHandle, narrow_agent: str
) -> None:
    svc = ActorSessionService(system=narrow_node)
    holder = hold_permit(
        Runner(narrow_agent, APP, svc, admission_control={"overflow": "reject"}, system=narrow_node), narrow_node
    )
    status = admission(narrow_node)
    assert status["in_use"] == 1 and status["per_agent"] == {narrow_agent: 1}
    rejected_before = status["rejected_total"]

    sid = unique("s")
    with pytest.raises(PolicyDenied) as info:
        Runner(narrow_agent, APP, svc, admission_control={"overflow": "reject"}, system=narrow_node).run(
            USER, sid, "hi"
        )
    assert info.value.reason == "busy"
    assert admission(narrow_node)["rejected_total"] == rejected_before + 1
    assert svc.list_sessions(app_name=APP, user_id=USER) and sid not in {
        s.id for s in svc.list_sessions(app_name=APP, user_id=USER)
    }, "nothing was stored for the rejected run"
    assert isinstance(runs.cancel(holder, system=narrow_node), runs.Cancelled)


def test_admission_queue_times_out_with_admission_timeout(narrow_node: ActorSystemHandle, narrow_agent: str) -> None:
    svc = ActorSessionService(system=narrow_node)
    holder = hold_permit(
        Runner(narrow_agent, APP, svc, admission_control={"overflow": "reject"}, system=narrow_node), narrow_node
    )
    queued = Runner(
        narrow_agent, APP, svc, admission_control={"overflow": "queue", "queue_timeout": 150}, system=narrow_node
    )
    started = time.monotonic()
    with pytest.raises(PolicyDenied) as info:
        queued.run(USER, unique("s"), "hi")
    assert info.value.reason == "admission_timeout"
    assert time.monotonic() - started >= 0.15
    assert isinstance(runs.cancel(holder, system=narrow_node), runs.Cancelled)


def test_a_completed_run_gives_its_permit_back_to_the_queue(
    narrow_node: ActorSystemHandle, emu: Emulator, narrow_agent: str
) -> None:
    emu.set_script(
        {"rules": [{"when": {"user_text_contains": "slow"}, "respond": {"text": "finally", "delay_ms": 300}}, ECHO]}
    )
    svc = ActorSessionService(system=narrow_node)
    holder = hold_permit(
        Runner(narrow_agent, APP, svc, admission_control={"overflow": "reject"}, system=narrow_node), narrow_node
    )
    queued = Runner(
        narrow_agent, APP, svc, admission_control={"overflow": "queue", "queue_timeout": 20000}, system=narrow_node
    )
    assert queued.run(USER, unique("s"), "hi") == "You said: hi"
    assert runs.wait(holder, 10, system=narrow_node) == runs.Completed("finally")
    holder_asked = emu.requests[0]["timestamp"]
    assert emu.requests[1]["timestamp"] >= holder_asked + 0.3, "the queued run waited for the permit"


def test_a_queued_admission_request_leaves_the_queue_when_its_caller_stops_waiting() -> None:
    state = AdmissionState(AdmissionConfig(default_agent_limit=1, overflow="queue"))
    assert isinstance(state.acquire("held", "a", 1, 0.0), Grant)
    assert isinstance(state.acquire("late", "a", 1, 0.0, queue_timeout_ms=20000, caller_deadline=0.3), Waiting)
    assert isinstance(state.acquire("patient", "a", 1, 0.0, queue_timeout_ms=20000, caller_deadline=99.0), Waiting)
    assert state.next_deadline() == 0.3
    assert state.expire(0.3) == [Reject("late", "admission_timeout")]
    assert state.snapshot()["queued"] == 1 and state.next_deadline() == 20.0, "the queue timeout came first"


def test_a_run_that_times_out_gives_back_its_permit_or_its_queue_place(
    narrow_node: ActorSystemHandle, narrow_agent: str
) -> None:
    """``run_timeout`` while holding the agent's one permit, then while queued for it: each time the run ends with
    ``agent_turn_timeout``, nothing of it stays in the controller, and exactly one new run is admitted after."""
    svc = ActorSessionService(system=narrow_node)
    rejecting = Runner(narrow_agent, APP, svc, admission_control={"overflow": "reject"}, system=narrow_node)
    admitted = Runner(
        narrow_agent, APP, svc, run_timeout=300, admission_control={"overflow": "reject"}, system=narrow_node
    )
    with pytest.raises(AskTimeout) as info:
        admitted.run(USER, unique("s"), "slow work")
    assert info.value.reason == "agent_turn_timeout"
    until(lambda: admission(narrow_node)["in_use"] == 0, 5, "the timed-out run's permit released")

    holder = hold_permit(rejecting, narrow_node)
    queued = Runner(
        narrow_agent,
        APP,
        svc,
        run_timeout=300,
        admission_control={"overflow": "queue", "queue_timeout": 20000},
        system=narrow_node,
    )
    with pytest.raises(AskTimeout) as info:
        queued.run(USER, unique("s"), "hi")
    assert info.value.reason == "agent_turn_timeout"
    status = until(
        lambda: (s := admission(narrow_node))["queued"] == 0 and s,
        5,
        "the timed-out request left the admission queue (its queue_timeout is 20 s)",
    )
    assert status["in_use"] == 1 and status["per_agent"] == {narrow_agent: 1}, "only the holder's permit"
    assert isinstance(runs.cancel(holder, system=narrow_node), runs.Cancelled)
    until(lambda: admission(narrow_node)["in_use"] == 0, 5, "the holder's permit released")

    again = hold_permit(rejecting, narrow_node)
    with pytest.raises(PolicyDenied) as denied:
        rejecting.run(USER, unique("s"), "hi")
    assert denied.value.reason == "busy", "more than the limit was admitted"
    assert isinstance(runs.cancel(again, system=narrow_node), runs.Cancelled)
    until(lambda: admission(narrow_node)["in_use"] == 0, 5, "every permit released")


# ---- tool execution ------------------------------------------------------------------------------------------------

TWO_LOOKUPS = {
    "when": {"user_text_contains": "both", "has_function_response": False},
    "respond": {
        "function_calls": [
            {"name": "lookup_a", "args": {"city": "Paris"}},
            {"name": "lookup_b", "args": {"city": "Rome"}},
        ]
    },
}


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_parallel_safe_calls_overlap_only_in_parallel_mode(
    mode: str,
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    journal: Journal,
    agent_factory: Callable[..., str],
) -> None:
    emu.set_script({"rules": [TWO_LOOKUPS, AFTER_TOOL, ECHO]})
    tools = [
        journal_tool(journal, "lookup_a", hold_s=0.4, parallel_safe=True),
        journal_tool(journal, "lookup_b", hold_s=0.4, parallel_safe=True),
    ]
    agent = agent_factory("ToolModes", tools)
    runner = Runner(agent, APP, svc, tool_execution={"mode": mode, "max_concurrency": 2}, system=system)
    runner.run(USER, unique("s"), "Look up both")

    first, second = sorted(journal.records(), key=lambda r: r["start"])
    assert (second["start"] < first["end"]) == (mode == "parallel")
    responses = function_responses(emu.requests[-1])
    assert [r["name"] for r in responses] == ["lookup_a", "lookup_b"], "answered in call order"


@pytest.fixture(scope="module")
def wide_node(make_system: Callable[..., ActorSystemHandle]) -> Iterator[ActorSystemHandle]:
    """A node with more worker processes than the ``max_concurrency`` under test, so the pool does not bound it."""
    node = make_system(hosts=1, workers=4)
    yield node
    node.stop()


def max_overlap(records: list[dict[str, Any]]) -> int:
    """The most journaled calls that were running at one moment."""
    edges = sorted([(r["start"], 1) for r in records] + [(r["end"], -1) for r in records])  # an end sorts first
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def test_max_concurrency_bounds_how_many_parallel_safe_calls_run_at_once(
    wide_node: ActorSystemHandle, emu: Emulator, journal: Journal
) -> None:
    cities = [f"city-{i}" for i in range(6)]
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "lookup", "args": {"city": c}} for c in cities]},
                },
                {"when": {}, "respond": {"text": "Looked up all six."}},
            ]
        }
    )
    spawner, cleanup = make_spawner(wide_node)
    try:
        agent = unique("Bounded")
        spawner(agent, config_for(emu), [journal_tool(journal, "lookup", hold_s=0.4, parallel_safe=True)])
        until(
            lambda: [w["state"] for w in wide_node.ask("workers", GetStatus())["workers"]] == ["idle"] * 4,
            30,
            "four idle workers",
        )
        runner = Runner(
            agent,
            APP,
            ActorSessionService(system=wide_node),
            tool_execution={"mode": "parallel", "max_concurrency": 2},
            system=wide_node,
        )
        assert runner.run(USER, unique("s"), "Look up every city") == "Looked up all six."
    finally:
        cleanup()

    records = journal.records()
    assert sorted(r["city"] for r in records) == cities
    assert max_overlap(records) == 2, "max_concurrency=2 with four idle workers"
    assert [r["response"]["city"] for r in function_responses(emu.requests[-1])] == cities, "answered in call order"


def test_a_tool_over_its_tool_timeout_is_answered_as_failed_with_tool_timeout(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    def lookup(city: str) -> dict:
        """Look something up (never in time)."""
        time.sleep(60)
        return {"city": city}

    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    agent = agent_factory("SlowTool", [FunctionTool(lookup)])
    runner = Runner(agent, APP, svc, tool_execution={"tool_timeout": 300}, system=system)
    started = time.monotonic()
    output = runner.run(USER, unique("s"), "Please look it up.")
    assert time.monotonic() - started < 30
    [response] = function_responses(emu.requests[-1])
    assert response["response"]["error"]["reason"] == "tool_timeout"
    assert output.startswith("Tool said:")


# ---- lanes ---------------------------------------------------------------------------------------------------------


def test_two_runs_on_one_session_execute_one_after_the_other(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "You said: {user_text}", "delay_ms": 300}}]})
    agent = agent_factory("OneLane")
    runner = Runner(agent, APP, svc, system=system)
    sid = unique("s")
    outputs: dict[str, Any] = {}
    threads = [
        threading.Thread(target=lambda t=text: outputs.__setitem__(t, runner.run(USER, sid, t)))
        for text in ("first", "second")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert outputs == {"first": "You said: first", "second": "You said: second"}

    invocations = [e.invocation_id for e in read_events(svc, APP, USER, sid)]
    assert len(invocations) == 4 and invocations[0] == invocations[1] != invocations[2] == invocations[3]
    first, second = emu.requests
    assert second["timestamp"] >= first["timestamp"] + 0.3, "the second model call waited for the first run"


def test_runs_on_different_sessions_overlap(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script(
        {"rules": [{"when": {"user_text_contains": "slow"}, "respond": {"text": "late", "delay_ms": 30000}}, ECHO]}
    )
    agent = agent_factory("TwoLanes")
    runner = Runner(agent, APP, svc, system=system)
    slow = runs.start(runner, USER, unique("s"), "slow work", system=system)
    assert first_run_item(slow, system).item.author == "user"
    assert runner.run(USER, unique("s"), "quick") == "You said: quick"
    assert runs.status(slow, system=system)["state"] == "running"
    assert isinstance(runs.cancel(slow, system=system), runs.Cancelled)


def test_a_runner_turn_and_an_invoke_on_the_same_session_share_one_fifo_lane(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script(
        {
            "rules": [
                {"when": {"user_text_contains": "runner"}, "respond": {"text": "runner done", "delay_ms": 400}},
                ECHO,
            ]
        }
    )
    agent = agent_factory("SharedLane")
    sid = unique("s")
    run_id = runs.start(Runner(agent, APP, svc, system=system), USER, sid, "runner first", system=system)
    assert first_run_item(run_id, system).item.author == "user", "the Runner turn holds the session's lane"

    scope = {"app_name": APP, "user_id": USER, "session_id": sid}
    assert invoke(agent, "then invoke", scope=scope, timeout=30, system=system) == "You said: then invoke"
    assert runs.wait(run_id, 30, system=system) == runs.Completed("runner done")
    by_text = {texts_by_role(r, "user")[-1]: r["timestamp"] for r in emu.requests}
    assert by_text["then invoke"] >= by_text["runner first"] + 0.4, "the invoke overlapped the Runner turn"


def test_closing_a_subscription_removes_its_subscriber_while_the_run_goes_on(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "late", "delay_ms": 30000}}]})
    runner = Runner(agent_factory("Unsubscribe"), APP, svc, system=system)
    run_id = runs.start(runner, USER, unique("s"), "slow work", system=system)
    leaving, staying = runs.subscribe(run_id, system=system), runs.subscribe(run_id, system=system)
    assert next(leaving).item.author == "user" and next(staying).item.author == "user"
    assert runs.status(run_id, system=system)["subscribers"] == 2

    leaving.close()
    until(lambda: runs.status(run_id, system=system)["subscribers"] == 1, 5, "the closed subscription removed")
    assert runs.status(run_id, system=system)["state"] == "running"
    assert runs.cancel(run_id, system=system) == runs.Cancelled("cancelled")
    rest = list(staying)
    assert [(i.terminal, i.item) for i in rest] == [(True, runs.Cancelled("cancelled"))]
    assert runs.status(run_id, system=system)["subscribers"] == 0


# ---- secrets -------------------------------------------------------------------------------------------------------


def test_the_api_key_never_appears_in_events_status_or_telemetry(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, journal: Journal, spawn: Spawner
) -> None:
    secret = "AIzaSy-RUNNER-SECRET-5d1e"
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    agent = unique("Keyed")
    spawn(agent, {**config_for(emu), "api_key": secret}, [journal_tool(journal, "lookup")])
    runner = Runner(agent, APP, svc, streaming_mode="text", system=system)
    sid = unique("s")
    with telemetry.attach("agent.", system=system) as sub:
        run_id = runs.start(runner, USER, sid, "Please look it up.", system=system)
        assert isinstance(runs.wait(run_id, 30, system=system), runs.Completed)
        emitted = list(sub.until("agent.prompt.stop", timeout=10))

    stored = json.dumps([e.to_dict() for e in read_events(svc, APP, USER, sid)])
    assert "Zanzibar" in stored and secret not in stored
    assert secret not in json.dumps([{"m": e.metadata, "x": e.measurements} for e in emitted], default=str)
    assert secret not in json.dumps(runs.status(run_id, system=system), default=str)
    assert secret not in json.dumps(system.ask(agent, GetStatus()), default=str)
    assert all(r["headers"].get("x-goog-api-key") == "REDACTED" for r in emu.requests)


# ---- options -------------------------------------------------------------------------------------------------------

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 1 << 27),
    st.floats(allow_nan=True),
    st.sampled_from(
        [
            "none",
            "text",
            "content",
            "serial",
            "parallel",
            "reject",
            "queue",
            "truncate",
            "error",
            "compress",
            "all",
            "",
            "x",
            "function_call",
        ]
    ),
    st.lists(st.sampled_from(["AnyAgent", "lookup", "", 1, None]), max_size=3),
    st.dictionaries(st.sampled_from(["junk", "allow", "mode"]), st.none(), max_size=1),
)
COUNT = st.one_of(st.integers(1, 1 << 20), JUNK)


def strict_map(values: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """A mapping over documented keys (sometimes with an unknown one) or junk: validators are reached in depth."""
    return st.one_of(
        st.fixed_dictionaries({}, optional=values), st.fixed_dictionaries({"junk": JUNK}, optional=values), JUNK
    )


SELECTOR = strict_map({"allow": st.one_of(st.just("all"), JUNK), "deny": JUNK})
FILTERS = strict_map(
    {
        k: JUNK
        for k in (
            "authors",
            "exclude_authors",
            "invocation_ids",
            "content_types",
            "since",
            "until",
            "include_partial",
            "final_only",
        )
    }
)
OPTION_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "run_timeout": COUNT,
    "max_llm_calls": COUNT,
    "max_tool_rounds": COUNT,
    "streaming_mode": JUNK,
    "max_stream_output_bytes": st.one_of(COUNT, st.integers(60 * 1024 * 1024, 70 * 1024 * 1024)),
    "tool_execution": strict_map({"mode": JUNK, "max_concurrency": COUNT, "tool_timeout": COUNT}),
    "admission_control": strict_map({"overflow": JUNK, "queue_timeout": COUNT}),
    "context_policy": strict_map(
        {
            "max_bytes": COUNT,
            "max_tokens": COUNT,
            "max_request_bytes": COUNT,
            "max_request_tokens": COUNT,
            "overflow": JUNK,
            "filters": FILTERS,
        }
    ),
    "runtime_policy": strict_map(
        {
            "id": st.one_of(st.just("policy-1"), JUNK),
            "agents": SELECTOR,
            "tools": SELECTOR,
            "max_argument_bytes": COUNT,
            "max_content_bytes": COUNT,
        }
    ),
    "max_calls": JUNK,
}


def check_options(options: dict[str, Any]) -> None:
    """A Runner is built with valid options or refuses them with a ConfigError naming the key."""
    try:
        runner = Runner("AnyAgent", APP, ActorSessionService(), **options)
    except ConfigError as err:
        assert err.reason in {"unknown_key", "invalid_value", "context_compress_unsupported"}
        assert isinstance(err.details.get("key"), str) and err.details["key"]
        return
    opts = runner.options
    assert opts.streaming_mode in ("none", "text", "content") and opts.tool_mode in ("serial", "parallel")
    for value in (opts.max_llm_calls, opts.max_concurrency, opts.max_stream_output_bytes):
        assert isinstance(value, int) and not isinstance(value, bool) and value >= 1
    assert opts.max_stream_output_bytes <= 64 * 1024 * 1024
    assert isinstance(opts.context_policy, ContextPolicy)
    assert opts.runtime_policy is None or isinstance(opts.runtime_policy, RuntimePolicy)
    assert opts.admission is None or set(opts.admission) <= {"overflow", "queue_timeout"}


@pytest.mark.parametrize("key", sorted(OPTION_VALUES))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_runner_option_is_either_valid_or_a_config_error_naming_the_key(key: str, data: st.DataObject) -> None:
    check_options({key: data.draw(OPTION_VALUES[key], label=key)})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=st.fixed_dictionaries({}, optional=OPTION_VALUES))
def test_runner_options_together_are_either_valid_or_a_config_error_naming_the_key(options: dict[str, Any]) -> None:
    check_options(options)


def test_runner_budgets_default_to_the_reference_values() -> None:
    options = Runner("AnyAgent", APP, ActorSessionService()).options
    assert (options.max_llm_calls, options.max_tool_rounds) == (32, 16)
    assert options.max_stream_output_bytes == 16 * 1024 * 1024
    assert (options.run_timeout_ms, options.streaming_mode, options.tool_mode) == (None, "none", "parallel")
    ceiling = 64 * 1024 * 1024
    assert (
        Runner("AnyAgent", APP, ActorSessionService(), max_stream_output_bytes=ceiling).options.max_stream_output_bytes
        == ceiling
    )
    with pytest.raises(ConfigError) as info:
        Runner("AnyAgent", APP, ActorSessionService(), max_stream_output_bytes=ceiling + 1)
    assert (info.value.reason, info.value.details["key"]) == ("invalid_value", "max_stream_output_bytes")


def test_a_runner_pickles_as_a_value_with_its_app_name_and_options() -> None:
    runner = Runner(
        "PickledAgent",
        APP,
        ActorSessionService(),
        max_llm_calls=3,
        streaming_mode="content",
        tool_execution={"mode": "serial", "tool_timeout": 500},
        admission_control={"overflow": "queue", "queue_timeout": 100},
        runtime_policy={"id": "p", "agents": {"allow": "all"}},
        context_policy={"max_bytes": 1000, "filters": {"exclude_authors": ["system"]}},
    )
    copy = pickle.loads(pickle.dumps(runner))
    assert (copy.app_name, copy.agent_name, copy.options) == (APP, "PickledAgent", runner.options)
    assert isinstance(copy.session_service, ActorSessionService)
    assert copy.options.tool_mode == "serial" and copy.options.tool_timeout_ms == 500
