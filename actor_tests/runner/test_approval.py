"""Human approval and long-running tools under the Runner: pauses, resumes, their validation and atomicity, policy
interplay, stable runs, fail-closed paths off the Runner, and pauses that survive in a SQLite store."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.runner.conftest import (
    Journal,
    function_responses,
    journal_tool,
    long_running_tool,
    model_contents,
    production_gate,
    publish_tool,
    read_events,
    tool_hook_counter,
    unique,
)
from adk_actors import Runner, prompt, runs
from adk_actors.errors import RunError, ValidationError
from adk_actors.events import Event
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef, SqlSessionService
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import CrossProcessCounter

APP = "approval_tests"
USER = "u1"

PUBLISH = {
    "when": {"user_text_regex": "(?i)publish to (?P<env>[\\w-]+)", "has_function_response": False},
    "respond": {"function_calls": [{"name": "publish_release", "args": {"environment": "{match.env}"}}]},
}
EXPORT = {
    "when": {"user_text_contains": "export", "has_function_response": False},
    "respond": {"function_calls": [{"name": "start_export", "args": {"name": "quarterly"}}]},
}
AFTER_TOOL = {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}}
ECHO = {"when": {}, "respond": {"text": "You said: {user_text}"}}
SCRIPT = {"rules": [PUBLISH, EXPORT, AFTER_TOOL, ECHO]}


def ref_of(session_id: str) -> SessionRef:
    return SessionRef(app_name=APP, user_id=USER, session_id=session_id)


def pause_of(result: Any) -> Any:
    assert isinstance(result, runs.Paused), f"expected a pause, got {result!r}"
    pause = result.event.actions.pause
    assert pause is not None
    return pause


def model_call(events: list[Event], name: str) -> dict[str, Any]:
    """The last function call named ``name`` among the stored model events."""
    calls = [
        p
        for e in events
        if e.content is not None and not e.partial
        for p in e.content.to_dict()["parts"]
        if p["type"] == "function_call" and p["name"] == name
    ]
    return calls[-1]


@pytest.fixture
def runner_for(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> Callable[..., Runner]:
    """``runner_for(tools, **runner_options)``: a Runner of a fresh agent on the emulator's approval script."""
    emu.set_script(SCRIPT)

    def make(tools: Any, **options: Any) -> Runner:
        return Runner(agent_factory("Approver", tools), APP, svc, system=system, **options)

    return make


# ---- confirmation ----------------------------------------------------------------------------------------------


def test_a_statically_gated_call_pauses_unexecuted_and_approval_runs_it_exactly_once(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    paused = runner.run(USER, sid, "Please publish to production-eu-7 now.")
    pause = pause_of(paused)

    events = read_events(svc, APP, USER, sid)
    call = model_call(events, "publish_release")
    assert pause.reason == "tool_confirmation" and pause.continuation_id.startswith("cont_")
    assert pause.details["type"] == "tool_confirmation" and pause.details["function_name"] == "publish_release"
    assert pause.details["call_id"] == call["id"] and pause.details["action_id"].startswith("act_")
    assert "production-eu-7" not in json.dumps(paused.event.to_dict()), "the pause carries no raw arguments"
    assert events[-1].id == paused.event.id and events[-1].content is None
    assert svc.get_session(ref_of(sid)).state[f"adk_pause:{pause.continuation_id}"] == "open"
    assert counter.value == 0

    assert runner.resume(USER, sid, pause.continuation_id, {"confirmed": True}) == "Tool said: production-eu-7"
    assert counter.value == 1
    [response] = function_responses(emu.requests[-1])
    assert response["id"] == call["id"] and response["response"] == {"published": "production-eu-7"}
    events = read_events(svc, APP, USER, sid)
    assert sum(e.is_final for e in events) == 1 and events[-1].is_final
    assert {e.invocation_id for e in events} == {paused.event.invocation_id}
    assert svc.get_session(ref_of(sid)).state[f"adk_pause:{pause.continuation_id}"] == "consumed"


def test_an_argument_dependent_gate_pauses_only_when_it_requires_and_carries_its_hint(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter, requires_confirmation=production_gate())])
    staging = unique("s")
    assert runner.run(USER, staging, "Publish to staging please.") == "Tool said: staging"
    assert counter.value == 1 and not any(e.actions.pause for e in read_events(svc, APP, USER, staging))

    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Publish to production please."))
    assert pause.details["hint"] == "Publishing to production is visible."
    assert "production" not in pause.details["action_id"]
    assert counter.value == 1
    assert runner.resume(USER, sid, None, {"confirmed": True}) == "Tool said: production"
    assert counter.value == 2


def test_a_rejection_runs_nothing_and_the_model_sees_tool_confirmation_rejected(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Publish to production."))
    output = runner.resume(USER, sid, pause.continuation_id, {"confirmed": False})

    assert counter.value == 0
    [response] = function_responses(emu.requests[-1])
    assert response["name"] == "publish_release"
    assert response["response"]["error"]["reason"] == "tool_confirmation_rejected"
    assert output.startswith("Tool said:") and read_events(svc, APP, USER, sid)[-1].is_final


def test_a_gated_call_with_invalid_arguments_fails_its_schema_and_never_becomes_a_pause(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    """The gate is evaluated after schema validation: a call the schema refuses is answered as failed at once."""
    runner = runner_for([publish_tool(counter)])
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "publish_release", "args": {"environment": 42}}]},
                },
                AFTER_TOOL,
                ECHO,
            ]
        }
    )
    sid = unique("s")
    output = runner.run(USER, sid, "Publish it.")

    assert isinstance(output, str) and output.startswith("Tool said:"), output
    [response] = function_responses(emu.requests[-1])
    assert response["name"] == "publish_release" and response["response"]["error"]["type"] == "SchemaError"
    events = read_events(svc, APP, USER, sid)
    assert not any(e.actions.pause for e in events) and events[-1].is_final
    assert counter.value == 0


def test_tool_callbacks_never_run_while_paused_or_after_a_rejection_and_run_once_after_approval(
    system: ActorSystemHandle,
    emu: Any,
    svc: ActorSessionService,
    counter: CrossProcessCounter,
    tmp_path: Path,
    agent_factory: Callable[..., str],
) -> None:
    """The gate is evaluated before the tool callbacks: ``before_tool`` sees only an approved call."""
    emu.set_script(SCRIPT)
    hooks = CrossProcessCounter(tmp_path / "before_tool")
    agent = agent_factory("Hooked", [publish_tool(counter)], callbacks=[tool_hook_counter(hooks)])
    runner = Runner(agent, APP, svc, system=system)

    rejected = unique("s")
    pause = pause_of(runner.run(USER, rejected, "Publish to production."))
    assert hooks.value == 0, "a before_tool callback ran for a call that is only waiting for approval"
    assert runner.resume(USER, rejected, pause.continuation_id, {"confirmed": False}).startswith("Tool said:")
    assert (hooks.value, counter.value) == (0, 0), "a rejected call reached its callbacks"

    approved = unique("s")
    pause = pause_of(runner.run(USER, approved, "Publish to staging."))
    assert hooks.value == 0
    assert runner.resume(USER, approved, pause.continuation_id, {"confirmed": True}) == "Tool said: staging"
    assert (hooks.value, counter.value) == (1, 1)


def test_stream_of_a_gated_call_yields_the_stored_events_and_ends_after_the_pause_event(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)], streaming_mode="text")
    sid = unique("s")
    streamed = list(runner.stream(USER, sid, "Publish to production.", timeout=20))

    stored = read_events(svc, APP, USER, sid)
    assert [e.id for e in streamed] == [e.id for e in stored]
    pause = streamed[-1].actions.pause
    assert pause is not None and pause.reason == "tool_confirmation" and counter.value == 0
    assert runner.resume(USER, sid, pause.continuation_id, {"confirmed": True}) == "Tool said: production"
    assert counter.value == 1


RESPONSES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6), st.sampled_from(["yes", "true"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["confirmed", "approved", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)


def is_confirmation(response: Any) -> bool:
    return isinstance(response, dict) and set(response) == {"confirmed"} and isinstance(response["confirmed"], bool)


def test_invalid_resume_responses_consume_nothing_and_a_valid_resume_still_works(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Publish to production."))
    stored = len(read_events(svc, APP, USER, sid))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        response=st.one_of(
            st.sampled_from(
                [{"confirmed": "yes"}, {"confirmed": 1}, {"confirmed": True, "x": 1}, {}, [], None, True, "confirmed"]
            ),
            RESPONSES.filter(lambda r: not is_confirmation(r)),
        )
    )
    def refused(response: Any) -> None:
        with pytest.raises(ValidationError) as info:
            runner.resume(USER, sid, pause.continuation_id, response)
        assert info.value.reason == "invalid_resume_response"
        # Text that JSON refuses (a NUL, a lone surrogate) is refused as JSON before its shape is looked at.
        assert info.value.details["rule"] in ("confirmation_shape", "invalid_json")

    refused()
    assert len(read_events(svc, APP, USER, sid)) == stored and counter.value == 0
    assert runner.resume(USER, sid, pause.continuation_id, {"confirmed": True}) == "Tool said: production"
    assert counter.value == 1


def test_a_used_continuation_cannot_be_replayed(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    paused = runner.run(USER, sid, "Publish to production.")
    pause = pause_of(paused)
    runner.resume(USER, sid, pause.continuation_id, {"confirmed": True})
    stored = len(read_events(svc, APP, USER, sid))

    for key in (pause.continuation_id, paused.event.invocation_id, None):
        with pytest.raises(RunError) as info:
            runner.resume(USER, sid, key, {"confirmed": True})
        assert info.value.reason == "no_paused_invocation"
    assert counter.value == 1 and len(read_events(svc, APP, USER, sid)) == stored


def test_two_concurrent_resumes_of_one_pause_succeed_exactly_once(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Publish to production."))
    results: list[Any] = []
    barrier = threading.Barrier(2)

    def resume() -> None:
        barrier.wait(10)
        try:
            results.append(runner.resume(USER, sid, pause.continuation_id, {"confirmed": True}))
        except RunError as err:
            results.append(err.reason)

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == ["Tool said: production", "no_paused_invocation"]
    assert counter.value == 1
    assert sum(e.is_final for e in read_events(svc, APP, USER, sid)) == 1


def two_paused_invocations(emu: Any, runner: Runner, sid: str) -> tuple[runs.Paused, runs.Paused]:
    first, second = runner.run(USER, sid, "Publish to alpha."), runner.run(USER, sid, "Publish to beta.")
    assert pause_of(first).continuation_id != pause_of(second).continuation_id
    return first, second


def test_resume_without_an_id_is_ambiguous_with_two_paused_invocations_and_each_resumes_by_id(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    first, second = two_paused_invocations(emu, runner, sid)
    emu.set_script({"rules": [AFTER_TOOL, ECHO]})  # no third call, whatever history the model is shown

    with pytest.raises(RunError) as info:
        runner.resume(USER, sid, None, {"confirmed": True})
    assert info.value.reason == "ambiguous_paused_invocation"
    assert info.value.details["invocation_ids"] == sorted([first.event.invocation_id, second.event.invocation_id])
    assert counter.value == 0

    for paused in (second, first):
        assert isinstance(runner.resume(USER, sid, paused.event.invocation_id, {"confirmed": True}), str)
    assert counter.value == 2
    finals = [e.invocation_id for e in read_events(svc, APP, USER, sid) if e.is_final]
    assert finals == [second.event.invocation_id, first.event.invocation_id]


def test_a_resumed_invocation_sees_its_own_tool_round_trip_when_another_paused_in_between(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    first, _ = two_paused_invocations(emu, runner, sid)
    emu.set_script({"rules": [AFTER_TOOL, ECHO]})
    call = model_call(
        [e for e in read_events(svc, APP, USER, sid) if e.invocation_id == first.event.invocation_id], "publish_release"
    )

    runner.resume(USER, sid, first.event.invocation_id, {"confirmed": True})
    assert counter.value == 1
    contents = model_contents(emu.requests[-1])
    calls = [i for i, c in enumerate(contents) for p in c["parts"] if p.get("functionCall", {}).get("id") == call["id"]]
    assert calls, "the model was not shown its own approved call"
    following = [p["functionResponse"] for p in contents[calls[0] + 1]["parts"] if "functionResponse" in p]
    assert [r["id"] for r in following] == [call["id"]]


def test_an_approval_covers_only_the_approved_call(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    emu.set_script(
        {
            "rules": [
                PUBLISH,
                {
                    "when": {"has_function_response": True},
                    "times": 1,  # the model follows up with a second release
                    "respond": {"function_calls": [{"name": "publish_release", "args": {"environment": "production"}}]},
                },
                AFTER_TOOL,
                ECHO,
            ]
        }
    )
    sid = unique("s")
    first = pause_of(runner.run(USER, sid, "Publish to staging."))

    second = runner.resume(USER, sid, first.continuation_id, {"confirmed": True})
    assert counter.value == 1, "the second, unapproved call was executed"
    assert pause_of(second).continuation_id != first.continuation_id


def test_runs_resume_links_the_runs_and_a_second_resume_fails_already_resumed(
    system: ActorSystemHandle, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([publish_tool(counter)])
    run_id = runs.start(runner, USER, unique("s"), "Publish to production.", system=system)
    outcome = runs.wait(run_id, 30, system=system)
    assert isinstance(outcome, runs.Paused) and pause_of(outcome).reason == "tool_confirmation"
    assert runs.status(run_id, system=system)["state"] == "paused"

    child = runs.resume(run_id, {"confirmed": True}, system=system)
    assert runs.wait(child, 30, system=system) == runs.Completed("Tool said: production")
    with pytest.raises(RunError) as info:
        runs.resume(run_id, {"confirmed": True}, system=system)
    assert info.value.reason == "already_resumed" and info.value.details["resumed_to"] == child
    assert runs.status(run_id, system=system)["resumed_to"] == child
    assert runs.status(child, system=system)["parent_run_id"] == run_id
    assert counter.value == 1


def test_a_tool_denied_by_policy_never_becomes_a_pause(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for(
        [publish_tool(counter)], runtime_policy={"id": "no-publish", "agents": {"allow": "all"}, "tools": {"allow": []}}
    )
    sid = unique("s")
    output = runner.run(USER, sid, "Publish to production.")

    assert isinstance(output, str) and counter.value == 0
    [response] = function_responses(emu.requests[-1])
    assert response["response"]["error"]["reason"] == "not_allowed"
    events = read_events(svc, APP, USER, sid)
    assert not any(e.actions.pause for e in events)
    [audit] = [e for e in events if e.author == "system"]
    assert audit.actions.runtime_policy_decision is not None
    assert audit.actions.runtime_policy_decision["subject"] == "publish_release"


def test_a_gated_call_is_a_serial_barrier_in_its_round(
    emu: Any,
    svc: ActorSessionService,
    journal: Journal,
    counter: CrossProcessCounter,
    runner_for: Callable[..., Runner],
) -> None:
    runner = runner_for([publish_tool(counter), journal_tool(journal, "note", parallel_safe=True)])
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"user_text_contains": "release", "has_function_response": False},
                    "respond": {
                        "function_calls": [
                            {"name": "note", "args": {"city": "before"}},
                            {"name": "publish_release", "args": {"environment": "production"}},
                            {"name": "note", "args": {"city": "after"}},
                        ]
                    },
                },
                AFTER_TOOL,
                ECHO,
            ]
        }
    )
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Prepare the release."))

    assert [r["city"] for r in journal.records()] == ["before"] and counter.value == 0
    tool_event = read_events(svc, APP, USER, sid)[-2]
    assert tool_event.content is not None, "the round's answers so far are stored before the pause"
    assert [p["name"] for p in tool_event.content.to_dict()["parts"]] == ["note"]

    runner.resume(USER, sid, pause.continuation_id, {"confirmed": True})
    assert [r["city"] for r in journal.records()] == ["before", "after"] and counter.value == 1
    assert [r["name"] for r in function_responses(emu.requests[-1])] == ["note", "publish_release", "note"]


def test_approval_rechecks_the_current_policy(
    system: ActorSystemHandle,
    emu: Any,
    svc: ActorSessionService,
    counter: CrossProcessCounter,
    runner_for: Callable[..., Runner],
) -> None:
    runner = runner_for([publish_tool(counter)])
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Publish to production."))
    stricter = Runner(
        runner.agent_name,
        APP,
        svc,
        system=system,
        runtime_policy={
            "id": "frozen",
            "agents": {"allow": "all"},
            "tools": {"allow": "all", "deny": ["publish_release"]},
        },
    )

    output = stricter.resume(USER, sid, pause.continuation_id, {"confirmed": True})
    assert counter.value == 0 and isinstance(output, str)
    [response] = function_responses(emu.requests[-1])
    assert response["response"]["error"]["reason"] == "denied"
    [audit] = [e for e in read_events(svc, APP, USER, sid) if e.author == "system"]
    decision = audit.actions.runtime_policy_decision or {}
    assert (decision["policy_id"], decision["operation"], decision["reason"]) == ("frozen", "tool", "denied")


# ---- long-running tools ------------------------------------------------------------------------------------------

COMPLETED = {"operation_id": "export-42", "status": "completed", "result": {"artifact": "export.zip"}}


def test_a_long_running_tool_pauses_without_holding_a_worker(
    system: ActorSystemHandle, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([long_running_tool(counter)])
    sid = unique("s")
    paused = runner.run(USER, sid, "Start the export.")
    pause = pause_of(paused)

    call = model_call(read_events(svc, APP, USER, sid), "start_export")
    assert pause.reason == "long_running" and pause.details["operation_id"] == "export-42"
    assert pause.details["function_name"] == "start_export" and pause.details["call_id"] == call["id"]
    assert pause.details["message"] == "The external export is running."
    assert counter.value == 1
    workers = system.ask("workers", GetStatus())
    assert workers["running"] == 0 and all(w["state"] != "busy" for w in workers["workers"])


def test_progress_updates_are_partial_events_only_while_the_pause_is_open(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([long_running_tool(counter)])
    sid = unique("s")
    paused = runner.run(USER, sid, "Start the export.")
    invocation = paused.event.invocation_id
    updates = [
        runner.update_long_running(
            USER, sid, invocation, "export-42", {"operation_id": "export-42", "status": "running", "progress": p}
        )
        for p in (10, 60)
    ]

    stored = read_events(svc, APP, USER, sid)
    assert [e.id for e in stored[-2:]] == [u.id for u in updates]
    for update, progress in zip(stored[-2:], (10, 60), strict=True):
        assert update.partial and update.invocation_id == invocation and update.content is not None
        [part] = update.content.to_dict()["parts"]
        assert part["type"] == "function_response" and part["response"]["progress"] == progress

    assert runner.resume(USER, sid, invocation, COMPLETED).startswith("Tool said:")
    [response] = function_responses(emu.requests[-1])
    assert response["response"]["status"] == "completed", "progress never reaches the model"
    with pytest.raises(RunError) as info:
        runner.update_long_running(
            USER, sid, invocation, "export-42", {"operation_id": "export-42", "status": "running", "progress": 90}
        )
    assert info.value.reason == "no_paused_invocation"
    after = read_events(svc, APP, USER, sid)[len(stored) :]
    assert [e.is_final for e in after] == [False, True], "the terminal response, then the final event"


def test_update_long_running_refuses_an_operation_id_other_than_the_paused_one_and_stores_nothing(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([long_running_tool(counter)])
    sid = unique("s")
    paused = runner.run(USER, sid, "Start the export.")
    pause, invocation = pause_of(paused), paused.event.invocation_id
    stored = [e.id for e in read_events(svc, APP, USER, sid)]

    running = {"status": "running", "progress": 10}
    for argument, update, rule in [
        ("export-43", {"operation_id": "export-42", **running}, "operation_id"),
        ("export-43", {"operation_id": "export-43", **running}, "operation_id"),
        ("", {"operation_id": "export-42", **running}, "operation_id"),
        ("export-42", {"operation_id": "export-43", **running}, "operation_id"),
        ("export-42", dict(running), "operation_id"),
        ("export-42", ["export-42", "running"], "not_a_mapping"),
        ("export-42", {"operation_id": "export-42", "status": "completed"}, "terminal_status"),
        ("export-42", {"operation_id": "export-42", "status": "running", "progress": float("nan")}, "not_json"),
    ]:
        with pytest.raises(ValidationError) as info:
            runner.update_long_running(USER, sid, invocation, argument, update)  # type: ignore[arg-type]
        assert (info.value.reason, info.value.details["rule"]) == ("invalid_resume_response", rule), (argument, update)

    assert [e.id for e in read_events(svc, APP, USER, sid)] == stored
    assert svc.get_session(ref_of(sid)).state[f"adk_pause:{pause.continuation_id}"] == "open"
    progress = runner.update_long_running(USER, sid, invocation, "export-42", {"operation_id": "export-42", **running})
    assert read_events(svc, APP, USER, sid)[-1].id == progress.id
    assert runner.resume(USER, sid, invocation, COMPLETED).startswith("Tool said:")


def _signature_bytes(signature: str) -> bytes:
    """A thought signature's bytes, whichever base64 alphabet carried it."""
    return base64.urlsafe_b64decode(signature.replace("+", "-").replace("/", "_") + "=" * (-len(signature) % 4))


def test_a_long_running_resume_keeps_the_thought_signature_of_the_original_call(
    emu: Any, svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([long_running_tool(counter)])
    sid = unique("s")
    invocation = runner.run(USER, sid, "Start the export.").event.invocation_id
    before = read_events(svc, APP, USER, sid)
    call = model_call(before, "start_export")
    assert call.get("thought_signature"), "the emulator signs every function call (Gemini 3)"

    runner.resume(USER, sid, invocation, COMPLETED)
    [(event, part)] = [
        (e, p)
        for e in read_events(svc, APP, USER, sid)[len(before) :]
        if e.content is not None
        for p in e.content.to_dict()["parts"]
        if p["type"] == "function_response"
    ]
    assert (event.invocation_id, part["id"]) == (invocation, call["id"])
    assert event.thought_signature == call["thought_signature"] and event.provider_metadata is None
    sent = [
        p
        for c in model_contents(emu.requests[-1])
        if c["role"] == "model"
        for p in c["parts"]
        if p.get("functionCall", {}).get("id") == call["id"]
    ]
    assert [_signature_bytes(p.get("thoughtSignature", "")) for p in sent] == [
        _signature_bytes(call["thought_signature"])
    ], "the resumed model call lost the call's signature"


LR_RESPONSES = st.one_of(
    st.fixed_dictionaries(
        {
            "operation_id": st.sampled_from(["export-42", "export-43", "", None, 42]),
            "status": st.sampled_from(["completed", "failed", "cancelled", "running", "done", None]),
        },
        optional={"result": st.one_of(st.floats(allow_nan=True), st.text(max_size=4))},
    ),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.text(max_size=5),
)


def is_terminal_response(response: Any) -> bool:
    import math

    return (
        isinstance(response, dict)
        and response.get("operation_id") == "export-42"
        and response.get("status") in ("completed", "failed", "cancelled")
        and not (isinstance(response.get("result"), float) and not math.isfinite(response["result"]))
    )


def test_invalid_long_running_responses_and_updates_consume_nothing(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([long_running_tool(counter)])
    sid = unique("s")
    invocation = runner.run(USER, sid, "Start the export.").event.invocation_id
    stored = len(read_events(svc, APP, USER, sid))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(response=LR_RESPONSES.filter(lambda r: not is_terminal_response(r)))
    def refused(response: Any) -> None:
        with pytest.raises(ValidationError) as info:
            runner.resume(USER, sid, invocation, response)
        assert info.value.reason == "invalid_resume_response"

    refused()
    for update in ({"operation_id": "export-43", "status": "running"}, COMPLETED):
        with pytest.raises(ValidationError) as info:
            runner.update_long_running(USER, sid, invocation, "export-42", update)
        assert info.value.reason == "invalid_resume_response"
    assert len(read_events(svc, APP, USER, sid)) == stored
    assert runner.resume(USER, sid, invocation, COMPLETED).startswith("Tool said:")


def test_a_terminal_resume_records_the_response_under_the_original_invocation_and_call(
    svc: ActorSessionService, counter: CrossProcessCounter, runner_for: Callable[..., Runner]
) -> None:
    runner = runner_for([long_running_tool(counter)])
    sid = unique("s")
    invocation = runner.run(USER, sid, "Start the export.").event.invocation_id
    before = read_events(svc, APP, USER, sid)
    call = model_call(before, "start_export")

    runner.resume(USER, sid, invocation, COMPLETED)
    after = read_events(svc, APP, USER, sid)[len(before) :]
    responses = [
        (e, p)
        for e in after
        if e.content is not None
        for p in e.content.to_dict()["parts"]
        if p["type"] == "function_response"
    ]
    [(event, part)] = responses
    assert event.invocation_id == invocation and not event.partial
    assert (part["name"], part["id"], part["response"]) == ("start_export", call["id"], COMPLETED)
    assert after[-1].is_final and {e.invocation_id for e in after} == {invocation}
    assert counter.value == 1, "the tool is not run again on resume"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Start the export.", "long_running_requires_runner"),
        ("Publish to production.", "tool_confirmation_requires_runner"),
    ],
)
def test_off_the_runner_long_running_and_gated_tools_fail_closed(
    text: str, reason: str, system: ActorSystemHandle, emu: Any, tmp_path: Path, agent_factory: Callable[..., str]
) -> None:
    emu.set_script(SCRIPT)
    published = CrossProcessCounter(tmp_path / "published")
    agent = agent_factory(
        "OffRunner", [publish_tool(published), long_running_tool(CrossProcessCounter(tmp_path / "exports"))]
    )

    output = prompt(agent, text, timeout=30, system=system)
    [response] = function_responses(emu.requests[-1])
    assert response["response"]["error"]["reason"] == reason
    assert output.startswith("Tool said:") and published.value == 0


# ---- a durable store ---------------------------------------------------------------------------------------------


def test_a_pause_in_a_sqlite_store_resumes_through_a_new_runner_and_is_single_use(
    system: ActorSystemHandle, emu: Any, tmp_path: Path, counter: CrossProcessCounter, agent_factory: Callable[..., str]
) -> None:
    emu.set_script(SCRIPT)
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    agent = agent_factory("Durable", [publish_tool(counter)])
    first_store, second_store = SqlSessionService(url), SqlSessionService(url)
    try:
        sid = unique("s")
        pause = pause_of(Runner(agent, APP, first_store, system=system).run(USER, sid, "Publish to production."))
        assert counter.value == 0

        later = Runner(agent, APP, second_store, system=system)
        assert later.resume(USER, sid, pause.continuation_id, {"confirmed": True}) == "Tool said: production"
        with pytest.raises(RunError) as info:
            Runner(agent, APP, first_store, system=system).resume(USER, sid, pause.continuation_id, {"confirmed": True})
        assert info.value.reason == "no_paused_invocation"
        assert counter.value == 1
        assert second_store.get_session(ref_of(sid)).state[f"adk_pause:{pause.continuation_id}"] == "consumed"
    finally:
        first_store.close()
        second_store.close()
