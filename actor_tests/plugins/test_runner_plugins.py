"""Runner plugins end to end: a real node runs every hook as a worker job (or inline, or on a stateful instance),
the emulator plays the model, and the tests read what reached the model, the stored events, the metrics and the
node log (``docs/PLUGINS.md``)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.plugins import runner_plugins_support as support
from actor_tests.runner.conftest import (
    Journal,
    Spawner,
    config_for,
    function_responses,
    journal_tool,
    make_spawner,
    model_contents,
    read_events,
    unique,
    until,
)
from adk_actors import FunctionTool, Runner
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.agents.api import agent_ref
from adk_actors.emulator import Emulator
from adk_actors.errors import ActorCrashed, AdkError, PluginError, ToolError
from adk_actors.events import Event
from adk_actors.observability import snapshot
from adk_actors.plugins.api import instance_status, start_plugin_instance
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService

APP = "plugin_tests"
USER = "u1"
HOOK_MS = 10_000
"""Deadline of every hook that is not about deadlines: a worker that has just started imports the plugin module
first, which on a loaded machine can take longer than the 1 s default."""
WAIT_S = 30.0
"""Upper bound for anything a test waits on (never reached when the code works)."""

LOOKUP = {
    "when": {"user_text_contains": "look", "has_function_response": False},
    "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Zanzibar-Q7"}}]},
}
AFTER_TOOL = {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}}
ECHO = {"when": {}, "respond": {"text": "You said: {user_text}"}}


def plugin(cls: type, *, id: str | None = None, **options: Any) -> dict[str, Any]:
    """A descriptor for one support plugin: intervene, closed, a generous deadline unless the test says otherwise."""
    return {
        "id": id or unique(cls.__name__.lower()),
        "plugin": cls,
        "mode": "intervene",
        "failure_policy": "closed",
        "timeout_ms": HOOK_MS,
        **options,
    }


def system_text(request: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in (request["body"].get("systemInstruction") or {}).get("parts", []))


def user_texts(request: dict[str, Any]) -> list[str]:
    return [
        "".join(p.get("text", "") for p in c["parts"])
        for c in model_contents(request)
        if c["role"] == "user" and any("text" in p for p in c["parts"])
    ]


def series(system: ActorSystemHandle, instrument: str, **labels: str) -> list[dict[str, Any]]:
    """The series of one of the node's metrics whose labels include ``labels``."""
    found = snapshot(system).get("instruments", {}).get(instrument, {}).get("series", [])
    return [s for s in found if labels.items() <= s["labels"].items()]


def failures(system: ActorSystemHandle, plugin_id: str) -> dict[tuple[str, str], float]:
    """``adk.plugin.failures`` of one plugin, by ``(hook, reason)``."""
    return {
        (s["labels"]["hook"], s["labels"]["reason"]): s["value"]
        for s in series(system, "adk.plugin.failures", plugin=plugin_id)
    }


def counted(system: ActorSystemHandle, plugin_id: str, hook: str, reason: str) -> float:
    """Wait until the node's metrics count a failure of ``plugin_id`` (telemetry reaches the hub in batches)."""
    value: float = until(
        lambda: failures(system, plugin_id).get((hook, reason)), WAIT_S, f"{plugin_id} {hook} {reason} counted"
    )
    return value


def texts(events: list[Event]) -> list[str]:
    return [e.text() or "" for e in events]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """An emulator of the test's own (each test scripts it)."""
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def spawn(system: ActorSystemHandle) -> Iterator[Spawner]:
    """``spawn(name, config, tools)`` on the shared system; every agent is stopped after the test."""
    spawner, cleanup = make_spawner(system)
    yield spawner
    cleanup()


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    """Lines the tools append, one per call (the witness that a tool ran)."""
    return Journal(tmp_path)


@pytest.fixture
def svc(system: ActorSystemHandle) -> ActorSessionService:
    return ActorSessionService(system=system)


@pytest.fixture
def make_runner(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, spawn: Callable[..., Any]
) -> Callable[..., Runner]:
    """``make_runner(plugins, tools=(), **agent_config)``: a fresh agent on the emulator (instructions
    ``"Be terse."`` unless given) and a Runner over it with ``plugins``; ``runner_options`` go to the Runner."""

    def make(
        plugins: list[Any], tools: Any = (), runner_options: dict[str, Any] | None = None, **config: Any
    ) -> Runner:
        name = unique("Plugged")
        config.setdefault("instructions", "Be terse.")
        spawn(name, config_for(emu, **config), tools)
        return Runner(name, APP, svc, system=system, plugins=plugins, **(runner_options or {}))

    return make


@pytest.fixture
def notes(tmp_path: Path) -> str:
    """A journal file the plugins of a test write to (see ``runner_plugins_support``)."""
    return str(tmp_path / "plugin-notes.jsonl")


# ---- halt, amend, return ---------------------------------------------------------------------------------------------


def test_a_before_tool_halt_fails_the_run_with_a_structural_plugin_error_and_the_tool_never_runs(
    emu: Emulator, svc: ActorSessionService, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    runner = make_runner(
        [plugin(support.HaltTool, id="no-lookups", config={"tools": ["lookup"], "cause": "lookup_forbidden"})],
        [journal_tool(journal, "lookup")],
    )
    sid = unique("s")
    with pytest.raises(PluginError) as info:
        runner.run(USER, sid, "Please look it up.")
    assert info.value.reason == "plugin_halted"
    assert info.value.details == {"plugin": "no-lookups", "hook": "before_tool", "cause": "lookup_forbidden"}
    assert journal.records() == []
    events = read_events(svc, APP, USER, sid)
    assert events[-1].error is not None and events[-1].error.reason == "plugin_halted"
    assert not any(e.is_final for e in events)


def test_a_before_model_amendment_of_the_instructions_reaches_the_model_request(
    emu: Emulator, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [{"when": {"system_text_contains": "[stamp:k7]"}, "respond": {"text": "stamped"}}, ECHO]})
    runner = make_runner([plugin(support.Stamp, config={"mark": "k7"})])
    assert runner.run(USER, unique("s"), "Hello") == "stamped"
    (request,) = emu.requests
    assert system_text(request).endswith("Be terse. [stamp:k7]")


@pytest.mark.parametrize(
    ("kind", "answer"),
    [("return", "The plugin answered."), ("amend", "The plugin answered. (checked)")],
)
def test_an_after_model_return_skips_the_agents_callback_and_an_amendment_flows_into_it(
    emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner], kind: str, answer: str
) -> None:
    emu.set_script({"rules": [ECHO]})
    runner = make_runner(
        [plugin(support.AnswerFromPlugin, config={"text": "The plugin answered.", "kind": kind})],
        callbacks=["actor_tests.plugins.runner_plugins_support:CheckedByCallback"],
    )
    sid = unique("s")
    assert runner.run(USER, sid, "Hello") == answer
    final = read_events(svc, APP, USER, sid)[-1]
    assert final.is_final and final.text() == answer
    assert len(emu.requests) == 1  # the model was asked; its answer was replaced


def test_a_before_tool_return_answers_the_call_without_running_the_tool(
    emu: Emulator, svc: ActorSessionService, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    runner = make_runner(
        [plugin(support.StubTool, config={"result": {"city": "cached", "ok": False}})],
        [journal_tool(journal, "lookup")],
    )
    sid = unique("s")
    assert runner.run(USER, sid, "Please look it up.") == "Tool said: city: cached, ok: False"
    assert journal.records() == []  # the tool never ran
    assert [r["response"] for r in function_responses(emu.requests[-1])] == [{"city": "cached", "ok": False}]


def test_an_on_user_message_amendment_is_the_input_the_session_stores_and_the_model_sees(
    emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    runner = make_runner([plugin(support.RewriteInput, config={"text": "Rewritten question."})])
    sid = unique("s")
    assert runner.run(USER, sid, "Original question.") == "You said: Rewritten question."
    assert texts(read_events(svc, APP, USER, sid)) == ["Rewritten question.", "You said: Rewritten question."]


def test_a_before_agent_return_ends_the_run_with_its_output_and_stores_nothing(
    emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner]
) -> None:
    runner = make_runner([plugin(support.AgentShortcut, config={"text": "Closed for maintenance."})])
    sid = unique("s")
    assert runner.run(USER, sid, "Hello") == "Closed for maintenance."
    assert emu.requests == []
    assert sid not in {s.id for s in svc.list_sessions(app_name=APP, user_id=USER)}  # not even created


def test_an_on_model_error_return_recovers_the_failed_model_call(
    emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 400}}}]})
    runner = make_runner([plugin(support.RecoverModel)])
    sid = unique("s")
    output = runner.run(USER, sid, "Hello")
    assert output.startswith("Recovered from ") and len(emu.requests) == 1
    assert read_events(svc, APP, USER, sid)[-1].text() == output


def test_before_tool_amended_arguments_are_validated_against_the_tools_schema_again(
    system: ActorSystemHandle, emu: Emulator, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    good = make_runner(
        [plugin(support.ArgsOverride, config={"args": {"city": "Oslo"}})], [journal_tool(journal, "lookup")]
    )
    assert good.run(USER, unique("s"), "Please look it up.") == "Tool said: city: Oslo, ok: True"
    bad = make_runner([plugin(support.ArgsOverride, config={"args": {"town": 42}})], [journal_tool(journal, "lookup")])
    bad.run(USER, unique("s"), "Please look it up.")
    (response,) = [r["response"] for r in function_responses(emu.requests[-1])]
    assert response == {"error": {"reason": "invalid_arguments", "type": "SchemaError"}}
    assert [r["city"] for r in journal.records()] == ["Oslo"]
    # The engine refused the amended arguments itself: no tool job was started for them (a turn's telemetry
    # reaches the hub in one batch, so once its turn is counted its tool calls would be too).
    until(lambda: series(system, "adk.turns", agent=bad.agent_name), WAIT_S, "the turn counted")
    assert series(system, "adk.tool.calls", agent=bad.agent_name) == []
    assert series(system, "adk.tool.calls", agent=good.agent_name)


# ---- failures: timeout, raise, observe-only, per policy -------------------------------------------------------------


def test_a_plugin_past_its_deadline_is_counted_and_skipped_when_open(
    system: ActorSystemHandle, emu: Emulator, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    slow = plugin(support.Stall, failure_policy="open", timeout_ms=150, config={"sleep_s": 2.0})
    stamp = plugin(support.Stamp, config={"mark": "after-the-slow-one"})
    runner = make_runner([slow, stamp])
    assert runner.run(USER, unique("s"), "Hello") == "You said: Hello"
    assert counted(system, slow["id"], "before_model", "plugin_timeout") == 1
    assert system_text(emu.requests[0]).endswith("[stamp:after-the-slow-one]")  # the next plugin still ran


def test_a_plugin_past_its_deadline_fails_the_run_when_closed(
    emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    slow = plugin(support.Stall, timeout_ms=150, config={"sleep_s": 2.0})
    runner = make_runner([slow])
    sid = unique("s")
    with pytest.raises(PluginError) as info:
        runner.run(USER, sid, "Hello")
    assert (info.value.reason, info.value.details) == (
        "plugin_timeout",
        {"plugin": slow["id"], "hook": "before_model"},
    )
    assert emu.requests == []  # the model was never asked
    error = read_events(svc, APP, USER, sid)[-1].error
    assert error is not None and error.reason == "plugin_timeout"


@pytest.mark.parametrize("policy", ["open", "closed"])
def test_a_raising_plugin_is_plugin_raised_and_its_message_never_reaches_the_caller(
    system: ActorSystemHandle, emu: Emulator, make_runner: Callable[..., Runner], policy: str
) -> None:
    emu.set_script({"rules": [ECHO]})
    boom = plugin(support.Boom, failure_policy=policy, config={"message": "internal-detail-q9"})
    runner = make_runner([boom])
    if policy == "open":
        assert runner.run(USER, unique("s"), "Hello") == "You said: Hello"
        assert counted(system, boom["id"], "before_model", "plugin_raised") == 1
        return
    with pytest.raises(PluginError) as info:
        runner.run(USER, unique("s"), "Hello")
    assert (info.value.reason, info.value.details) == ("plugin_raised", {"plugin": boom["id"], "hook": "before_model"})
    assert "internal-detail-q9" not in str(info.value)


@pytest.mark.parametrize("policy", ["open", "closed"])
def test_an_observe_mode_plugin_that_amends_is_an_observe_only_failure(
    system: ActorSystemHandle, emu: Emulator, make_runner: Callable[..., Runner], policy: str
) -> None:
    emu.set_script({"rules": [ECHO]})
    watcher = plugin(support.Stamp, mode="observe", failure_policy=policy, config={"mark": "observer"})
    runner = make_runner([watcher])
    if policy == "closed":
        with pytest.raises(PluginError) as info:
            runner.run(USER, unique("s"), "Hello")
        assert (info.value.reason, info.value.details["hook"]) == ("observe_only", "before_model")
        assert emu.requests == []
        return
    assert runner.run(USER, unique("s"), "Hello") == "You said: Hello"
    assert counted(system, watcher["id"], "before_model", "observe_only") == 1
    assert "[stamp:observer]" not in system_text(emu.requests[0])  # its amendment was not applied


# ---- secrets ---------------------------------------------------------------------------------------------------------


def test_credentials_a_plugin_leaks_into_its_result_are_pruned_before_storage_and_the_model(
    emu: Emulator, svc: ActorSessionService, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, {"when": {"has_function_response": True}, "respond": {"text": "{response}"}}]})
    leak = "sk-live-Q5v1LeakedCredential"
    runner = make_runner([plugin(support.LeakyResult, config={"leak": leak})], [journal_tool(journal, "lookup")])
    sid = unique("s")
    output = runner.run(USER, sid, "Please look it up.")
    stored = json.dumps([e.to_dict() for e in read_events(svc, APP, USER, sid)])
    sent = json.dumps(emu.requests)
    assert leak not in output and leak not in stored and leak not in sent
    (response,) = [r["response"] for r in function_responses(emu.requests[-1])]
    assert response == {"city": "Zanzibar-Q7", "ok": True, "api_key": "[REDACTED]", "auth": "[REDACTED]"}


# ---- events and the output -------------------------------------------------------------------------------------------


def test_on_event_may_amend_a_streamed_partial_event_but_not_the_final_event(
    system: ActorSystemHandle, emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner]
) -> None:
    answer = "Supervisors restart failed children."
    emu.set_script({"rules": [{"when": {}, "respond": {"text": answer, "chunks": 4}}]})
    shout = plugin(support.Shout, failure_policy="open")
    runner = make_runner([shout], runner_options={"streaming_mode": "text"})
    sid = unique("s")
    assert runner.run(USER, sid, "Explain supervisors.") == answer
    events = read_events(svc, APP, USER, sid)
    partials = [e for e in events if e.partial]
    assert partials and "".join(texts(partials)) == answer.upper()  # the partials' content was amended
    (final,) = [e for e in events if e.is_final]
    assert final.text() == answer  # the final event's content is locked: the refused amendment changed nothing
    assert counted(system, shout["id"], "on_event", "invalid_plugin_result") == 1


def test_an_after_agent_return_replaces_the_output_the_final_event_and_the_output_key(
    emu: Emulator, svc: ActorSessionService, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    runner = make_runner([plugin(support.RewriteOutput, config={"text": "Rewritten."})], output_key="answer")
    sid = unique("s")
    assert runner.run(USER, sid, "Hello") == "Rewritten."
    final = read_events(svc, APP, USER, sid)[-1]
    assert final.is_final and final.text() == "Rewritten."
    assert final.actions.state_delta == {"answer": "Rewritten."}
    assert svc.get_session(SessionRef(app_name=APP, user_id=USER, session_id=sid)).state["answer"] == "Rewritten."


def test_the_notification_hooks_hear_a_completed_and_a_failed_run(
    emu: Emulator, notes: str, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [{"when": {"user_text_contains": "fail"}, "respond": {"fault": {"status": 400}}}, ECHO]})
    runner = make_runner(
        [
            plugin(support.Notes, mode="observe", config={"journal": notes}),
            plugin(support.LegacyErrors, mode="observe", config={"journal": notes}),
        ]
    )
    assert runner.run(USER, unique("s"), "Hello") == "You said: Hello"
    with pytest.raises(AdkError) as info:
        runner.run(USER, unique("s"), "Please fail.")
    reason = info.value.reason
    expected = [
        ("before_run", None, None, None),
        ("after_run", None, None, "You said: Hello"),
        ("before_run", None, None, None),
        ("on_model_error", "model", reason, None),  # LegacyErrors: a phase error hook falls back to on_error
        ("on_agent_error", None, reason, None),
        ("on_agent_error", "agent", reason, None),
        ("on_run_error", None, reason, None),
        ("on_run_error", "run", reason, None),
    ]
    heard = until(lambda: len(lines := support.journal_lines(notes)) >= len(expected) and lines, WAIT_S, "notes")
    assert Counter((r["hook"], r["phase"], r["reason"], r.get("output")) for r in heard) == Counter(expected)


# ---- the built-in plugins through a Runner ---------------------------------------------------------------------------

BUILTINS = "adk_actors.plugins.builtins"


def builtin(name: str, **options: Any) -> dict[str, Any]:
    return {
        "id": unique(name.lower()),
        "plugin": f"{BUILTINS}:{name}",
        "failure_policy": "closed",
        "timeout_ms": HOOK_MS,
        "mode": "intervene",
        **options,
    }


def test_the_global_instruction_plugin_puts_its_instruction_before_the_agents_own(
    emu: Emulator, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    runner = make_runner([builtin("GlobalInstruction", config={"instruction": "Answer in French."})])
    runner.run(USER, unique("s"), "Hello")
    assert system_text(emu.requests[0]) == "Answer in French.\n\nBe terse."


def test_the_context_filter_plugin_sends_only_the_newest_exchange(
    emu: Emulator, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    runner = make_runner([builtin("ContextFilter", config={"max_messages": 1})])
    sid = unique("s")
    for text in ("first question", "second question", "third question"):
        runner.run(USER, sid, text)
    assert [user_texts(r) for r in emu.requests] == [["first question"], ["second question"], ["third question"]]


def test_the_reflect_retry_plugin_turns_a_failing_tool_into_guidance_without_the_raw_failure(
    emu: Emulator, make_runner: Callable[..., Runner]
) -> None:
    def lookup(city: str) -> dict:
        """Look a city up."""
        raise ToolError(f"backend refused {city} with internal-detail-z3", reason="unknown_city")

    emu.set_script({"rules": [LOOKUP, {"when": {"has_function_response": True}, "respond": {"text": "{response}"}}]})
    runner = make_runner([builtin("ReflectRetry", config={"max_retries": 1})], [FunctionTool(lookup)])
    runner.run(USER, unique("s"), "Please look it up.")
    (response,) = [r["response"] for r in function_responses(emu.requests[-1])]
    assert response == {
        "error": {"reason": "unknown_city"},
        "guidance": "The tool call failed (unknown_city); check the arguments and try again.",
    }
    assert "internal-detail-z3" not in json.dumps(emu.requests)


def test_the_metadata_logger_plugin_logs_content_free_records_to_the_node_log(
    system: ActorSystemHandle, emu: Emulator, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    audit = builtin("MetadataLogger", mode="observe", failure_policy="open", config={"detail": "hooks"})
    runner = make_runner([audit], [journal_tool(journal, "lookup")], instructions="Secret-instruction-w4.")
    runner.run(USER, unique("s"), "Please look it up, private-text-p8.")

    def records() -> list[str]:
        """The logger's lines of this run, once the last hooks of the run (``after_run``) are among them."""
        mine = [x for x in system.log_sink.read_text(errors="replace").splitlines() if f"plugin_id={audit['id']} " in x]
        return mine if any(" hook=after_run " in x for x in mine) else []

    logged = until(records, WAIT_S, "the metadata records in the node log")
    assert all("adk_actors.plugins.metadata" in line for line in logged)
    hooks = {m.group(1) for line in logged if (m := re.search(r" hook=(\w+) ", line))}
    assert {
        "before_run",
        "before_model",
        "after_model",
        "before_tool",
        "after_tool",
        "on_event",
        "after_agent",
    } <= hooks
    assert any(re.search(r" tool=lookup\b", line) for line in logged)  # metadata: the tool's name is there ...
    text = "\n".join(logged)
    for content in ("private-text-p8", "Secret-instruction-w4", "Zanzibar-Q7", "Tool said"):
        assert content not in text  # ... never the input, the instructions, the arguments or a result


def test_the_metadata_logger_logs_only_the_run_lifecycle_by_default(
    system: ActorSystemHandle, emu: Emulator, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    audit = builtin("MetadataLogger", mode="observe", failure_policy="open")
    runner = make_runner([audit], [journal_tool(journal, "lookup")])
    runner.run(USER, unique("s"), "Please look it up.")

    def records() -> list[str]:
        mine = [x for x in system.log_sink.read_text(errors="replace").splitlines() if f"plugin_id={audit['id']} " in x]
        return mine if any(" hook=after_run " in x for x in mine) else []

    logged = until(records, WAIT_S, "the metadata records in the node log")
    assert [m.group(1) for line in logged if (m := re.search(r" hook=(\w+) ", line))] == ["before_run", "after_run"]


def test_a_sync_exporter_in_the_worker_pool_gets_the_metadata_envelopes_of_a_tool_run(
    emu: Emulator, journal: Journal, make_runner: Callable[..., Runner], tmp_path: Path
) -> None:
    from actor_tests.observability import exporter_support

    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    envelopes = str(tmp_path / "envelopes.jsonl")
    exporter = {
        "id": "journal",
        "exporter": exporter_support.JournalExporter,
        "timeout_ms": HOOK_MS,
        "failure_policy": "closed",
        "config": {"journal": envelopes},
    }
    runner = make_runner(
        [],
        [journal_tool(journal, "lookup")],
        runner_options={"observability": {"exporters": [exporter], "attributes": {"env": "test"}}},
    )
    sid = unique("s")
    assert runner.run(USER, sid, "Please look it up, private-text-p8.").startswith("Tool said")
    seen = until(
        lambda: (got := exporter_support.read_journal(envelopes)) and got[-1]["hook"] == "after_run" and got,
        WAIT_S,
        "the after_run envelope",
    )
    hooks = [e["hook"] for e in seen]
    assert hooks[0] == "on_user_message" and "before_tool" in hooks and hooks[-1] == "after_run"
    assert {e["session_id"] for e in seen} == {sid} and len({e["invocation_id"] for e in seen}) == 1
    assert all(e["attributes"] == {"env": "test"} and e["content_captured"] is False for e in seen)
    text = json.dumps(seen)
    for content in ("private-text-p8", "Zanzibar-Q7", "Tool said"):
        assert content not in text


@pytest.mark.parametrize("filter_first", [True, False])
def test_the_amendments_of_two_before_model_plugins_both_reach_the_request(
    emu: Emulator, make_runner: Callable[..., Runner], filter_first: bool
) -> None:
    emu.set_script({"rules": [ECHO]})
    context_filter = builtin("ContextFilter", config={"max_messages": 1})
    instruction = builtin("GlobalInstruction", config={"instruction": "Answer in French."})
    runner = make_runner([context_filter, instruction] if filter_first else [instruction, context_filter])
    sid = unique("s")
    runner.run(USER, sid, "first question")
    runner.run(USER, sid, "second question")
    assert (system_text(emu.requests[-1]), user_texts(emu.requests[-1])) == (
        "Answer in French.\n\nBe terse.",
        ["second question"],
    )


def test_a_plugin_after_an_after_model_amendment_sees_the_amended_response_view(
    emu: Emulator, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [ECHO]})
    runner = make_runner(
        [
            plugin(support.AnswerFromPlugin, config={"text": "Amended.", "kind": "amend"}),
            plugin(support.SignAnswer, config={"signature": "-- the bot"}),
        ]
    )
    assert runner.run(USER, unique("s"), "Hello") == "Amended. -- the bot"


def test_the_global_instruction_is_added_once_to_every_model_call_of_a_tool_round(
    emu: Emulator, journal: Journal, make_runner: Callable[..., Runner]
) -> None:
    emu.set_script({"rules": [LOOKUP, AFTER_TOOL, ECHO]})
    runner = make_runner(
        [builtin("GlobalInstruction", config={"instruction": "Answer in French."})], [journal_tool(journal, "lookup")]
    )
    runner.run(USER, unique("s"), "Please look it up.")
    assert [system_text(r) for r in emu.requests] == ["Answer in French.\n\nBe terse."] * 2


def test_a_sub_agents_model_call_goes_through_the_runners_before_model_plugins(
    emu: Emulator, spawn: Callable[..., Any], make_runner: Callable[..., Runner]
) -> None:
    helper = unique("Helper")
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"user_text_contains": "delegate", "has_function_response": False},
                    "respond": {"function_calls": [{"name": helper, "args": {"prompt": "inner question"}}]},
                },
                AFTER_TOOL,
                ECHO,
            ]
        }
    )
    spawn(helper, config_for(emu, instructions="Help."))
    runner = make_runner([plugin(support.Stamp, config={"mark": "runner-wide"})], sub_agents=[helper])
    assert runner.run(USER, unique("s"), "Please delegate this.") == "Tool said: You said: inner question"
    (inner,) = [r for r in emu.requests if user_texts(r) == ["inner question"]]
    assert system_text(inner).endswith("[stamp:runner-wide]")


# ---- where plugin code runs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("inline", [True, False])
def test_an_inline_plugin_runs_in_the_agents_host_and_another_in_a_worker(
    system: ActorSystemHandle, emu: Emulator, make_runner: Callable[..., Runner], inline: bool
) -> None:
    runner = make_runner([plugin(support.PidHalt, inline=inline)])
    with pytest.raises(PluginError) as info:
        runner.run(USER, unique("s"), "Hello")
    pid = int(info.value.details["cause"].removeprefix("pid-"))
    host = system.ask(runner.agent_name, GetStatus())["pid"]
    workers = {w["pid"] for w in system.ask("workers", GetStatus())["workers"]}
    assert (pid == host, pid in workers) == (inline, not inline)
    assert emu.requests == []


# ---- a stateful plugin instance whose host dies ----------------------------------------------------------------------


def _kill_and_wait(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it has exited (its pidfd turns readable)."""
    fd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        readable, _, _ = select.select([fd], [], [], WAIT_S)
        assert readable, "the killed process did not exit"
    finally:
        os.close(fd)


def test_a_runner_whose_stateful_plugin_instance_was_sigkilled_fails_closed_or_proceeds_open(
    fresh_system: ActorSystemHandle, emu: Emulator
) -> None:
    system = fresh_system
    emu.set_script({"rules": [ECHO]})
    instance = start_plugin_instance(
        unique("counter"), support.RunCounter, system=system, invocation_timeout_ms=HOOK_MS
    )
    instance_host = instance.ref.host_id
    name = next(n for n in (unique("Counted") for _ in range(64)) if agent_ref(n, 2).host_id != instance_host)
    spawn_agent(name, config_for(emu, instructions="Be terse."), system=system)  # on the host that survives
    svc = ActorSessionService(system=system)

    def runner(policy: str) -> tuple[Runner, str]:
        descriptor = plugin(support.RunCounter, failure_policy=policy, instance=instance.name, timeout_ms=1000)
        return Runner(name, APP, svc, system=system, plugins=[descriptor]), descriptor["id"]

    (closed, closed_id), (opened, open_id) = runner("closed"), runner("open")
    assert closed.run(USER, unique("s"), "one") == "You said: one"
    assert opened.run(USER, unique("s"), "two") == "You said: two"
    assert instance_status(instance, system=system)["commits"] == 2  # both runs went through the instance

    _kill_and_wait(instance_status(instance, system=system)["pid"])
    with pytest.raises(PluginError) as info:
        closed.run(USER, unique("s"), "three")
    # The Runner calls the instance by its registered name, which waits for a registration until the hook's
    # deadline: a lost instance is a plugin_timeout.
    assert (info.value.reason, info.value.details) == ("plugin_timeout", {"plugin": closed_id, "hook": "before_run"})
    assert opened.run(USER, unique("s"), "four") == "You said: four"
    assert counted(system, open_id, "before_run", "plugin_timeout") == 1
    with pytest.raises(ActorCrashed) as gone:
        instance_status(instance, system=system)
    assert gone.value.reason == "noproc"  # not silently restarted with an empty state
    stop_agent(name, system=system)
