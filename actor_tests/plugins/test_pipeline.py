"""``interpret``, ``check_value`` and ``amend_event``: what one plugin's answer means for the turn (pure)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from adk_actors.errors import AdkError, AgentError, AskTimeout, PluginError, ValidationError, WorkerError
from adk_actors.events import Event, EventActions
from adk_actors.plugins import NOTIFY_ONLY, PluginDescriptor, PluginStep, amend_event, check_value, interpret
from adk_actors.plugins.pipeline import policy_failure

TEXT = {"schema_version": 1, "parts": [{"type": "text", "text": "hello"}]}
OTHER = {"schema_version": 1, "parts": [{"type": "text", "text": "HELLO"}]}
CALL = {"schema_version": 1, "parts": [{"type": "function_call", "name": "f", "args": {}, "id": "c1"}]}


def plugin(mode: str = "intervene", policy: str = "open") -> PluginDescriptor:
    return PluginDescriptor(id="p1", plugin="pkg.mod:P", mode=mode, failure_policy=policy, hooks=("before_model",))


def failure(hook: str, reason: str) -> dict[str, Any]:
    return {"plugin": "p1", "hook": hook, "reason": reason}


def test_continue_goes_on() -> None:
    assert interpret(plugin(), "before_model", {"action": "continue"}, None) == PluginStep("continue")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (AskTimeout("late"), "plugin_timeout"),
        (WorkerError("late", reason="job_timeout"), "plugin_timeout"),
        (WorkerError("big", reason="memory_limit"), "memory_limit"),
        (WorkerError("lost", reason="worker_lost"), "plugin_failed"),
        (AdkError("raised", reason="function_failed"), "plugin_failed"),
    ],
)
def test_a_job_error_is_recorded_open_and_stops_the_run_closed(error: AdkError, reason: str) -> None:
    opened = interpret(plugin(policy="open"), "before_tool", None, error)
    assert opened == PluginStep("continue", failure=failure("before_tool", reason))
    closed = interpret(plugin(policy="closed"), "before_tool", None, error)
    assert closed.kind == "halt" and closed.failure == failure("before_tool", reason)
    assert isinstance(closed.error, PluginError)
    assert (closed.error.reason, closed.error.details) == (reason, {"plugin": "p1", "hook": "before_tool"})


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"action": "failed", "reason": "plugin_raised", "type": "ValueError"}, "plugin_raised"),
        ({"action": "failed", "reason": "plugin_result_too_large"}, "plugin_result_too_large"),
        ({"action": "failed", "reason": "free text from somewhere"}, "plugin_failed"),
        ({"action": "explode"}, "invalid_plugin_result"),
        ("amend", "invalid_plugin_result"),
        (None, "invalid_plugin_result"),
    ],
)
def test_a_failed_or_malformed_result_follows_the_policy(result: Any, reason: str) -> None:
    assert interpret(plugin(policy="open"), "before_model", result, None).failure == failure("before_model", reason)
    closed = interpret(plugin(policy="closed"), "before_model", result, None)
    assert closed.kind == "halt" and isinstance(closed.error, PluginError) and closed.error.reason == reason


@pytest.mark.parametrize(
    "result",
    [
        {"action": "amend", "value": {"instructions": "x"}},
        {"action": "return", "value": "cached"},
        {"action": "halt", "reason": "nope"},
    ],
)
def test_an_observer_may_only_continue(result: dict[str, Any]) -> None:
    opened = interpret(plugin(mode="observe"), "before_model", result, None)
    assert opened == PluginStep("continue", failure=failure("before_model", "observe_only"))
    closed = interpret(plugin(mode="observe", policy="closed"), "before_model", result, None)
    assert closed.kind == "halt" and closed.error is not None and closed.error.reason == "observe_only"


@pytest.mark.parametrize("hook", sorted(NOTIFY_ONLY))
def test_notifications_ignore_interventions_and_never_stop_the_run(hook: str) -> None:
    for result in ({"action": "return", "value": "x"}, {"action": "halt", "reason": "stop"}):
        assert interpret(plugin(policy="closed"), hook, result, None) == PluginStep("continue")
    failed = interpret(plugin(policy="closed"), hook, None, AskTimeout("late"))
    assert failed == PluginStep("continue", failure=failure(hook, "plugin_timeout"))


def test_a_halt_stops_the_run_with_a_structural_error() -> None:
    step = interpret(plugin(), "before_tool", {"action": "halt", "reason": "policy_violation"}, None)
    assert step.kind == "halt" and step.failure is None and isinstance(step.error, PluginError)
    assert step.error.reason == "plugin_halted" and step.error.message == "a plugin halted the run"
    assert step.error.details == {"plugin": "p1", "hook": "before_tool", "cause": "policy_violation"}
    untagged = interpret(plugin(), "before_tool", {"action": "halt", "reason": "the user said something"}, None)
    assert untagged.error is not None and untagged.error.details["cause"] == "unspecified"
    assert pickle.loads(pickle.dumps(step.error)) == step.error


def test_an_amendment_or_return_carries_its_validated_value() -> None:
    amended = interpret(plugin(), "before_tool", {"action": "amend", "value": {"city": "Paris"}}, None)
    assert amended == PluginStep("amend", value={"city": "Paris"})
    returned = interpret(plugin(), "after_model", {"action": "return", "value": TEXT}, None)
    assert returned == PluginStep("return", value=TEXT)


def test_a_value_that_does_not_fit_the_hook_is_an_invalid_result_under_the_policy() -> None:
    bad = {"action": "amend", "value": ["not", "args"]}
    assert interpret(plugin(), "before_tool", bad, None).failure == failure("before_tool", "invalid_plugin_result")
    closed = interpret(plugin(policy="closed"), "before_tool", bad, None)
    assert closed.kind == "halt" and closed.error is not None and closed.error.reason == "invalid_plugin_result"
    wrong_kind = interpret(plugin(), "on_user_message", {"action": "return", "value": "x"}, None)
    assert wrong_kind.failure == failure("on_user_message", "invalid_plugin_result")


def test_policy_failure_is_the_engines_own_way_to_apply_a_policy() -> None:
    assert policy_failure(plugin(), "on_event", "invalid_plugin_result").kind == "continue"
    assert policy_failure(plugin(policy="closed"), "on_event", "invalid_plugin_result").kind == "halt"


# ---- check_value --------------------------------------------------------------------------------------------------

HISTORY = [{"role": "user", "content": TEXT}, {"role": "model", "content": CALL}]

ACCEPTED = [
    ("on_user_message", "amend", "new text"),
    ("on_user_message", "amend", TEXT),
    ("before_run", "return", "cached output"),
    ("before_agent", "return", TEXT),
    ("after_agent", "amend", "edited"),
    ("after_agent", "return", TEXT),
    ("before_model", "amend", {"history": HISTORY, "instructions": "Be brief."}),
    ("before_model", "amend", {"instructions": ""}),
    ("before_model", "return", "cached answer"),
    ("after_model", "amend", CALL),
    ("after_model", "return", "text"),
    ("on_model_error", "return", "fallback answer"),
    ("before_tool", "amend", {"city": "Paris"}),
    ("before_tool", "return", {"result": 1}),
    ("after_tool", "amend", {"result": 2}),
    ("after_tool", "return", {}),
    ("on_tool_error", "return", {"error": {"reason": "x"}, "guidance": "retry"}),
    ("on_event", "amend", {"content": TEXT, "partial": True}),
]


@pytest.mark.parametrize(("hook", "kind", "value"), ACCEPTED)
def test_each_hook_takes_its_kind_of_value(hook: str, kind: str, value: Any) -> None:
    assert check_value(hook, kind, value) == value


def test_a_checked_value_is_a_fresh_copy() -> None:
    args = {"nested": {"a": [1]}}
    checked = check_value("before_tool", "amend", args)
    checked["nested"]["a"].append(2)
    assert args == {"nested": {"a": [1]}}


REFUSED = [
    ("on_user_message", "amend", 42),
    ("on_user_message", "amend", {"parts": []}),
    ("on_user_message", "return", "x"),
    ("before_run", "amend", "x"),
    ("after_run", "amend", "x"),
    ("after_run", "return", "x"),
    ("on_event", "return", {}),
    ("on_event", "amend", {"colour": "red"}),
    ("on_event", "amend", {"content": {"parts": "x"}}),
    ("on_event", "amend", "new text"),
    ("before_agent", "return", {"text": "not content"}),
    ("before_model", "amend", {"history": []}),
    ("before_model", "amend", {"history": [{"role": "system", "content": TEXT}]}),
    ("before_model", "amend", {"history": [{"role": "user", "content": "plain text"}]}),
    ("before_model", "amend", {"history": [{"role": "user", "content": TEXT, "extra": 1}]}),
    ("before_model", "amend", {"history": "all of it"}),
    ("before_model", "amend", {"instructions": 3}),
    ("before_model", "amend", {"tools": []}),
    ("before_model", "amend", "instructions"),
    ("after_model", "return", None),
    ("before_tool", "amend", ["a"]),
    ("before_tool", "amend", {"x": float("inf")}),
    ("after_tool", "return", "text"),
    ("on_tool_error", "amend", {}),
    ("no_such_hook", "amend", {}),
    ("before_model", "halt", "x"),
]


@pytest.mark.parametrize(("hook", "kind", "value"), REFUSED)
def test_a_value_or_kind_the_hook_does_not_take_is_refused(hook: str, kind: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        check_value(hook, kind, value)


# ---- amend_event --------------------------------------------------------------------------------------------------


def event(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "invocation_id": "inv-1",
        "author": "Root",
        "content": TEXT,
        "partial": True,
        "id": "e1",
        "timestamp": 1_700_000_000.0,
        "branch": "Root",
    }
    values.update(fields)
    return Event.new(**values).to_dict()


def test_a_partial_events_content_may_change() -> None:
    original = event()
    assert amend_event(original, {"content": OTHER}) == {**original, "content": OTHER}
    assert amend_event(original, {**original, "content": OTHER}) == {**original, "content": OTHER}
    assert original["content"] == TEXT


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("id", "e2"),
        ("invocation_id", "inv-2"),
        ("author", "Other"),
        ("timestamp", 1.0),
        ("branch", "Other"),
        ("partial", False),
        ("is_final", True),
        ("actions", EventActions(state_delta={"x": 1}).to_dict()),
        ("error", {"reason": "x", "type": "AgentError", "details": {}}),
        ("provider_metadata", {"grounded": True}),
        ("thought_signature", "sig"),
    ],
)
def test_identity_actions_flags_and_errors_are_kept(key: str, value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        amend_event(event(), {"content": OTHER, key: value})
    assert info.value.reason == "event_field_locked" and info.value.details["field"] == key


def test_the_content_of_a_final_or_complete_event_is_kept() -> None:
    for original in (event(partial=False, is_final=True), event(partial=False)):
        with pytest.raises(ValidationError):
            amend_event(original, {"content": OTHER})
        assert amend_event(original, {"content": TEXT}) == original


@pytest.mark.parametrize(
    "amended", [{"content": None}, {"content": {"parts": "x"}}, {"colour": "red"}, ["content"], "text"]
)
def test_a_malformed_event_amendment_is_refused(amended: Any) -> None:
    with pytest.raises(ValidationError):
        amend_event(event(), amended)


def test_interpret_applies_an_event_amendment_to_the_original() -> None:
    original = event()
    step = interpret(plugin(), "on_event", {"action": "amend", "value": {"content": OTHER}}, None, event=original)
    assert step == PluginStep("amend", value={**original, "content": OTHER})
    locked = {"action": "amend", "value": {"content": OTHER, "author": "Mallory"}}
    refused = interpret(plugin(policy="closed"), "on_event", locked, None, event=original)
    assert refused.kind == "halt" and refused.error is not None and refused.error.reason == "invalid_plugin_result"


def test_plugin_error_is_an_adk_error_with_its_own_default_reason() -> None:
    assert issubclass(PluginError, AdkError) and not issubclass(PluginError, AgentError)
    assert PluginError().reason == "plugin_failed"
