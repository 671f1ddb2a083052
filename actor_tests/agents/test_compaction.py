"""Automatic compaction (``context_policy`` overflow ``"compress"``): the policy's compressor spec, the pure fold
selection and checkpoint projection, the engine's pass (in process, with a held compressor to race a writer), and
the Runner against the emulator: a model compressor, a function compressor in the worker pool, its bounds, and a
conversation compacted on SQLite that answers the same from its checkpoint after the node restarted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.agents.conftest import make_spawner
from actor_tests.agents.turn_driver import TurnDriver
from actor_tests.runner import conftest as runner_fixtures
from actor_tests.runner.conftest import config_for, model_contents, read_events, unique
from adk_actors import Runner
from adk_actors.agents.context import (
    COMPACTION,
    SUMMARY_PREFIX,
    CompressorSpec,
    ContextPolicy,
    history_from_events,
    is_compaction,
    plan_compaction,
)
from adk_actors.agents.messages import RunnerTurn
from adk_actors.agents.spec import build_spec
from adk_actors.agents.turn import effects as fx
from adk_actors.agents.turn.engine import AgentPlan, Turn
from adk_actors.agents.turn.options import runner_options
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, AgentError, BudgetExceeded, ConfigError
from adk_actors.events import Event, EventActions
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import InMemorySessionService, SessionRef, SqlSessionService
from adk_actors.sessions.actor import ActorSessionService

svc = runner_fixtures.svc  # the Runner tests' fixtures, used here too
agent_factory = runner_fixtures.agent_factory

APP, USER = "compaction_tests", "u1"
SUMMARY = "SUMMARY-7Q: the user asked about cities ALPHA to DELTA; code word ZEBRA-42."
SUMMARIZE = {"when": {"user_text_contains": "Summarize the conversation above"}, "respond": {"text": SUMMARY}}
ECHO = {"when": {}, "respond": {"text": "You said: {user_text}"}}


def compress(max_bytes: int = 900, **compressor: Any) -> dict[str, Any]:
    return {"max_bytes": max_bytes, "overflow": "compress", "compressor": compressor}


def old_invocations(agent: str, n: int, *, words: int = 12, tool_every: int = 0) -> list[Event]:
    """``n`` finished invocations (a question and an answer each; every ``tool_every``-th with a tool round)."""
    events: list[Event] = []
    for i in range(n):
        inv = f"old-{i:04d}"
        events.append(Event.new(invocation_id=inv, author="user", content=f"question {i} " + "word " * words))
        if tool_every and i % tool_every == 0:
            call = {"type": "function_call", "name": "lookup", "args": {"city": f"C{i}"}, "id": f"call-{i}"}
            reply = {"type": "function_response", "name": "lookup", "id": f"call-{i}", "response": {"ok": i}}
            events.append(Event.new(invocation_id=inv, author=agent, content={"schema_version": 1, "parts": [call]}))
            events.append(Event.new(invocation_id=inv, author=agent, content={"schema_version": 1, "parts": [reply]}))
        events.append(
            Event.new(invocation_id=inv, author=agent, content=f"answer {i} " + "text " * words, is_final=True)
        )
    return events


def checkpoint(summary: str, inv: str = "ckpt") -> Event:
    effect = {"type": COMPACTION, "through_seq": 1, "folded_events": 1, "summary_bytes": len(summary)}
    return Event.new(invocation_id=inv, author="Bot", content=summary, actions=EventActions(context_effects=(effect,)))


# ---- the policy --------------------------------------------------------------------------------------------------


def test_compress_policies_validate_model_and_function_compressors() -> None:
    model = ContextPolicy.from_config(compress(model="gemini-x", instructions="Be brief.", timeout_ms=5))
    assert model.overflow == "compress" and model.compressor is not None
    assert model.compressor.kind == "model" and model.compressor.timeout_ms == 5
    fn = ContextPolicy.from_config(compress(function="json:dumps", max_memory_mb=256, max_events=3))
    assert fn.compressor is not None and fn.compressor.kind == "function"
    assert fn.compressor.function is not None and fn.compressor.function.name == "json:dumps"
    by_value = CompressorSpec(function=lambda request: "x")  # type: ignore[arg-type]
    assert by_value.kind == "function" and by_value.function is not None and by_value.function.payload


@pytest.mark.parametrize(
    ("config", "key", "reason"),
    [
        ({"max_bytes": 10, "overflow": "compress"}, "compressor", "invalid_value"),
        ({"max_bytes": 10, "compressor": {}}, "compressor", "invalid_value"),
        (compress(bogus=1), "compressor.bogus", "unknown_key"),
        ({"overflow": "compress", "compressor": "model"}, "compressor", "invalid_value"),
        (compress(model=""), "compressor.model", "invalid_value"),
        (compress(model=7), "compressor.model", "invalid_value"),
        (compress(instructions=["x"]), "compressor.instructions", "invalid_value"),
        (compress(function="no_module"), "compressor.function", "invalid_value"),
        (compress(function="pkg.mod:fn", model="m"), "compressor.function", "invalid_value"),
        (compress(function=42), "compressor.function", "invalid_value"),
        (compress(max_memory_mb=64), "compressor.max_memory_mb", "invalid_value"),
        (compress(function="a.b:c", max_memory_mb=0), "compressor.max_memory_mb", "invalid_value"),
        (compress(timeout_ms=0), "compressor.timeout_ms", "invalid_value"),
        (compress(timeout_ms=True), "compressor.timeout_ms", "invalid_value"),
        (compress(max_events=10**7), "compressor.max_events", "invalid_value"),
        (compress(max_summary_bytes=1.5), "compressor.max_summary_bytes", "invalid_value"),
    ],
)
def test_bad_compressor_configs_are_config_errors_naming_the_key(config: Any, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        ContextPolicy.from_config(config)
    assert info.value.reason == reason and info.value.details == {"key": key}


# ---- pure selection and projection -------------------------------------------------------------------------------


def test_a_checkpoint_projects_as_a_leading_summary_entry_that_filters_do_not_remove() -> None:
    events = [checkpoint("the earlier facts"), *old_invocations("Bot", 1)]
    policy = ContextPolicy.from_config({"filters": {"authors": ["user"], "final_only": True}})
    history, stats = history_from_events(events, current_invocation_id="now", policy=policy)
    assert history[0] == {
        "role": "user",
        "content": {"schema_version": 1, "parts": [{"type": "text", "text": SUMMARY_PREFIX + "the earlier facts"}]},
    }
    assert [e["role"] for e in history] == ["user", "user"]
    _, other = history_from_events([checkpoint("other facts"), *events[1:]], current_invocation_id="now", policy=policy)
    assert other["fingerprint"] != stats["fingerprint"], "the summary is part of the fingerprint"


def test_compress_overflow_raises_the_budget_error_for_the_engine_to_compact() -> None:
    policy = ContextPolicy.from_config(compress(max_bytes=100, function="json:dumps"))
    with pytest.raises(BudgetExceeded) as info:
        history_from_events(old_invocations("Bot", 3), current_invocation_id="now", policy=policy)
    assert info.value.reason == "context_budget_exceeded"


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Event], str, set[str], int, int]:
    """Invocations (some with tool rounds, one maybe interleaved by a late answer), the current one last."""
    n = draw(st.integers(1, 8))
    events = old_invocations("Bot", n, words=draw(st.integers(0, 20)), tool_every=draw(st.integers(0, 3)))
    if draw(st.booleans()) and n > 1:  # an invocation answered late, after the next one started
        late = Event.new(invocation_id="old-0000", author="Bot", content="late answer")
        events.insert(draw(st.integers(1, len(events))), late)
    if draw(st.booleans()):
        events.insert(0, checkpoint("before"))
    events.append(Event.new(invocation_id="current", author="user", content="the current question"))
    pinned = {f"old-{i:04d}" for i in range(n) if draw(st.integers(0, 9)) == 0}
    return events, "current", pinned, draw(st.integers(50, 3000)), draw(st.integers(1, 40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_a_fold_is_a_prefix_of_whole_unpinned_invocations_and_deterministic(
    case: tuple[list[Event], str, set[str], int, int],
) -> None:
    events, current, pinned, budget, max_events = case
    seqs = list(range(10, 10 + 3 * len(events), 3))
    policy = ContextPolicy.from_config(compress(max_bytes=budget, function="json:dumps", max_events=max_events))
    plan = plan_compaction(events, seqs, current_invocation_id=current, policy=policy, pinned_invocations=pinned)
    again = plan_compaction(events, seqs, current_invocation_id=current, policy=policy, pinned_invocations=pinned)
    assert plan == again, "the same session folds the same way"
    if plan is None:
        return
    folded, kept = events[: plan.folded_events], events[plan.folded_events :]
    assert plan.through_seq == seqs[plan.folded_events - 1] and 1 <= plan.folded_events <= max_events
    assert not {e.invocation_id for e in folded} & {e.invocation_id for e in kept}, "an invocation was split"
    assert not {e.invocation_id for e in folded} & (pinned | {current})
    assert any(not is_compaction(e) for e in folded), "a pass folds more than the previous checkpoint"
    calls = {p["id"] for e in folded if e.content for p in e.content.to_dict()["parts"] if "id" in p}
    answers = {p["id"] for e in kept if e.content for p in e.content.to_dict()["parts"] if "id" in p}
    assert not calls & answers, "a tool call was separated from its response"
    assert all(h["role"] in ("user", "model") for h in plan.history)


def test_the_shortest_fold_that_leaves_room_for_the_summary_is_chosen() -> None:
    events = [*old_invocations("Bot", 10), Event.new(invocation_id="now", author="user", content="q")]
    seqs = list(range(1, len(events) + 1))
    loose = ContextPolicy.from_config(compress(max_bytes=1400, function="json:dumps", max_summary_bytes=200))
    tight = ContextPolicy.from_config(compress(max_bytes=900, function="json:dumps", max_summary_bytes=200))
    a = plan_compaction(events, seqs, current_invocation_id="now", policy=loose)
    b = plan_compaction(events, seqs, current_invocation_id="now", policy=tight)
    assert a is not None and b is not None and 0 < a.folded_events < b.folded_events < len(events) - 1
    assert a.remaining_bytes <= 1400 - 200 and b.remaining_bytes <= 900 - 200
    assert a.folded_events % 2 == 0, "whole invocations (two events each)"
    nothing = plan_compaction(events[-1:], [1], current_invocation_id="now", policy=tight)
    assert nothing is None


# ---- the engine, in process ----------------------------------------------------------------------------------------

SCOPE = {"app_name": APP, "user_id": USER, "session_id": "s1"}


def runner_turn(service: InMemorySessionService, policy: dict[str, Any], text: str = "the new question") -> Turn:
    plan = AgentPlan(build_spec("Bot", {"provider": "gemini", "api_key": "test-key", "model": "m-1"}, []))
    request = RunnerTurn(
        **SCOPE,
        session_service=service,
        options=runner_options(context_policy=policy),
        input=text,
        resume=None,
        sink="sink",
        run_id="run-1",
    )
    return Turn(plan, input=text, scope=SCOPE, runner=request)


def seeded(n: int = 12) -> InMemorySessionService:
    service = InMemorySessionService()
    service.create_session(**SCOPE, events=old_invocations("Bot", n))
    return service


def stored(service: InMemorySessionService) -> list[Event]:
    return list(service.get_session(SessionRef(**SCOPE)).events)


def test_the_engine_folds_old_invocations_into_one_checkpoint_and_calls_the_model_with_it() -> None:
    service = seeded()
    before = stored(service)
    driver = TurnDriver(
        runner_turn(service, compress(function="json:dumps", max_summary_bytes=200)),
        model=["fine"],
        answers={fx.Compress: lambda e: "SUM: " + str(e.request["folded_events"])},
    ).start()
    assert isinstance(driver.end, fx.Reply)
    [job] = driver.of(fx.Compress)
    folded = job.request["folded_events"]
    events = stored(service)
    head = events[0]
    assert is_compaction(head) and head.content is not None and head.content.visible_text() == f"SUM: {folded}"
    [record] = head.actions.context_effects
    assert record["through_seq"] == folded and record["folded_events"] == folded and record["compressor"] == "function"
    assert record["summary_bytes"] == len(f"SUM: {folded}") and len(record["fingerprint"]) == 32
    assert [e.id for e in events[1 : len(before) - folded + 1]] == [e.id for e in before[folded:]]
    [model] = driver.of(fx.CallModel)
    assert model.history[0]["content"]["parts"][0]["text"] == SUMMARY_PREFIX + f"SUM: {folded}"
    assert model.history[-1]["content"]["parts"][0]["text"] == "the new question"
    telemetry = [t for batch in driver.of(fx.Telemetry) for t in batch.events if t.name == "agent.context.compact"]
    [compact] = telemetry
    assert compact.measurements["folded_events"] == folded and compact.metadata["fingerprint"] == record["fingerprint"]
    assert "SUM" not in repr(compact.measurements) + repr(compact.metadata)


def test_a_write_that_lands_during_the_pass_makes_it_read_and_fold_again_once() -> None:
    service = seeded()
    driver = TurnDriver(
        runner_turn(service, compress(function="json:dumps", max_summary_bytes=200)), model=["ok"], hold=(fx.Compress,)
    ).start()
    [first] = driver.held
    service.add_event(SessionRef(**SCOPE), Event.new(invocation_id="other", author="user", content="meanwhile"))
    driver.feed(first, "first summary")
    [second] = driver.held  # the checkpoint was refused (stale): read again, summarize again
    driver.feed(second, "second summary")
    assert isinstance(driver.end, fx.Reply)
    events = stored(service)
    assert events[0].content is not None and events[0].content.visible_text() == "second summary"
    assert sum(is_compaction(e) for e in events) == 1
    assert any(e.content is not None and e.content.visible_text() == "meanwhile" for e in events)


def test_a_second_stale_checkpoint_fails_the_turn_with_context_compaction_failed() -> None:
    service = seeded()
    before = stored(service)
    driver = TurnDriver(
        runner_turn(service, compress(function="json:dumps", max_summary_bytes=200)), hold=(fx.Compress,)
    ).start()
    for i in range(2):
        [held] = driver.held
        service.add_event(SessionRef(**SCOPE), Event.new(invocation_id=f"o{i}", author="user", content="x"))
        driver.feed(held, "summary")
    error = driver.error
    assert isinstance(error, AgentError) and error.reason == "context_compaction_failed"
    assert error.details == {"stage": "checkpoint_write", "cause": "stale_session"}
    assert not any(is_compaction(e) for e in stored(service)) and len(stored(service)) > len(before)


@pytest.mark.parametrize(
    ("answer", "details"),
    [
        ("x" * 201, {"stage": "summary_too_large", "summary_bytes": 201, "max_summary_bytes": 200}),
        ("   ", {"stage": "invalid_summary", "type": "str"}),
        ({"not": "text"}, {"stage": "invalid_summary", "type": "dict"}),
    ],
)
def test_a_refused_summary_fails_the_turn_and_replaces_nothing(answer: Any, details: dict[str, Any]) -> None:
    service = seeded()
    before = [e.id for e in stored(service)]
    driver = TurnDriver(
        runner_turn(service, compress(function="json:dumps", max_summary_bytes=200)),
        answers={fx.Compress: lambda e: answer},
    ).start()
    assert driver.error.reason == "context_compaction_failed" and driver.error.details == details
    assert [e.id for e in stored(service)][: len(before)] == before
    assert driver.of(fx.CallModel) == []


def test_nothing_foldable_fails_like_overflow_error() -> None:
    service = InMemorySessionService()
    driver = TurnDriver(
        runner_turn(service, compress(max_bytes=60, function="json:dumps"), text="a long question " * 10)
    ).start()
    assert driver.error.reason == "context_budget_exceeded" and driver.of(fx.Compress) == []


# ---- the Runner on a node, against the emulator --------------------------------------------------------------------


def test_a_model_compressor_summarizes_through_the_provider_and_the_next_call_reads_the_checkpoint(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [SUMMARIZE, ECHO]})
    agent = agent_factory("Compact", instructions="Answer plainly.")
    sid = unique("s")
    svc.create_session(app_name=APP, user_id=USER, session_id=sid, events=old_invocations(agent, 12))
    policy = compress(max_bytes=1200, instructions="Keep the code words.", max_summary_bytes=400)
    runner = Runner(agent, APP, svc, context_policy=policy, system=system)
    assert runner.run(USER, sid, "What now?") == "You said: What now?"
    summarize, answer = emu.requests[-2:]
    assert "Keep the code words." in str(summarize["body"]["systemInstruction"])
    assert "tools" not in summarize["body"]
    first = model_contents(answer)[0]
    assert first["role"] == "user" and first["parts"][0]["text"] == SUMMARY_PREFIX + SUMMARY
    events = read_events(svc, APP, USER, sid)
    assert is_compaction(events[0]) and events[0].actions.context_effects[0]["compressor"] == "model"
    assert events[-1].is_final and events[-2].content is not None  # the user event and the answer follow


def test_a_function_compressor_runs_in_the_worker_pool(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [ECHO]})
    agent = agent_factory("CompactFn")
    sid = unique("s")
    svc.create_session(app_name=APP, user_id=USER, session_id=sid, events=old_invocations(agent, 12))

    def squeeze(request: dict[str, Any]) -> str:
        import os

        return f"FOLDED {request['folded_events']} events in pid {os.getpid()}"

    policy = compress(function=squeeze, max_memory_mb=1024)
    assert Runner(agent, APP, svc, context_policy=policy, system=system).run(USER, sid, "Go on") == "You said: Go on"
    head = read_events(svc, APP, USER, sid)[0]
    text = head.content.visible_text() if head.content is not None else ""
    assert text.startswith("FOLDED ") and int(text.split()[-1]) != __import__("os").getpid()
    assert model_contents(emu.requests[-1])[0]["parts"][0]["text"] == SUMMARY_PREFIX + text


def test_a_compressor_past_its_timeout_fails_the_run_and_the_session_keeps_its_events(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> None:
    emu.set_script({"rules": [ECHO]})
    agent = agent_factory("CompactSlow")
    sid = unique("s")
    seeded_events = old_invocations(agent, 12)
    svc.create_session(app_name=APP, user_id=USER, session_id=sid, events=seeded_events)

    def slow(request: dict[str, Any]) -> str:
        time.sleep(5)  # the behaviour under test: a compressor that does not finish in time
        return "late"

    started = time.monotonic()
    with pytest.raises(AdkError) as info:
        Runner(agent, APP, svc, context_policy=compress(function=slow, timeout_ms=300), system=system).run(
            USER, sid, "Go on"
        )
    assert info.value.reason == "context_compaction_failed" and info.value.details["stage"] == "compressor"
    assert time.monotonic() - started < 4
    events = read_events(svc, APP, USER, sid)
    assert [e.id for e in events[: len(seeded_events)]] == [e.id for e in seeded_events]
    assert not any(is_compaction(e) for e in events) and emu.requests == []


def test_a_long_conversation_compacted_on_sqlite_answers_the_same_after_a_node_restart(
    make_system: Callable[..., ActorSystemHandle], emu: Emulator, tmp_path: Path
) -> None:
    emu.set_script({"rules": [SUMMARIZE, ECHO]})
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    agent, sid = unique("Long"), unique("s")
    policy = compress(max_bytes=1500, max_summary_bytes=300)

    def node_run(handle: ActorSystemHandle, texts: list[str]) -> list[str]:
        spawn, cleanup = make_spawner(handle)
        store = SqlSessionService(url)
        try:
            spawn(agent, config_for(emu), ())
            runner = Runner(agent, APP, store, context_policy=policy, system=handle)
            return [runner.run(USER, sid, text) for text in texts]
        finally:
            cleanup()
            store.close()

    first = make_system()
    questions = [f"Tell me about city {i} " + "and its long history " * 4 for i in range(8)]
    node_run(first, questions)
    before = [model_contents(r) for r in emu.requests if "Summarize the conversation" not in str(r["body"])]
    first.stop()
    assert sum("Summarize the conversation" in str(r["body"]) for r in emu.requests) >= 1, "nothing was compacted"

    second = make_system()
    [after] = node_run(second, [questions[-1]])
    assert after == f"You said: {questions[-1]}"
    request = model_contents(emu.requests[-1])
    assert request[0]["parts"][0]["text"] == SUMMARY_PREFIX + SUMMARY, "the checkpoint is the history's base"
    assert request[0] == before[-1][0], "the same checkpoint before and after the restart"
    store = SqlSessionService(url)
    try:
        events = list(store.get_session(SessionRef(app_name=APP, user_id=USER, session_id=sid)).events)
    finally:
        store.close()
    assert is_compaction(events[0]) and sum(is_compaction(e) for e in events) == 1
