"""The built-in plugins, run through ``run_plugin_hook`` in this process and interpreted like the engine does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from adk_actors.errors import ConfigError
from adk_actors.plugins import HOOKS, PluginStep, compile_plugins, interpret, run_plugin_hook
from adk_actors.plugins.builtins import ContextFilter

BUILTINS = "adk_actors.plugins.builtins"
BASE: dict[str, Any] = {
    "plugin_id": "builtin",
    "run_id": "run-1",
    "invocation_id": "inv-1",
    "app_name": "app",
    "user_id": "user-1",
    "session_id": "session-1",
    "agent": "Root",
}


def content(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "parts": list(parts)}


def text(role: str, words: str) -> dict[str, Any]:
    return {"role": role, "content": content({"type": "text", "text": words})}


def call(name: str, call_id: str) -> dict[str, Any]:
    return {"role": "model", "content": content({"type": "function_call", "name": name, "args": {}, "id": call_id})}


def answer(name: str, call_id: str) -> dict[str, Any]:
    part = {"type": "function_response", "name": name, "response": {"ok": True}, "id": call_id}
    return {"role": "user", "content": content(part)}


def step(name: str, config: dict[str, Any], hook: str, context: dict[str, Any]) -> PluginStep:
    """Compile one built-in, run its hook here and interpret the answer (what the engine does with a job)."""
    descriptor = compile_plugins(
        [
            {
                "id": "builtin",
                "plugin": f"{BUILTINS}:{name}",
                "mode": "intervene",
                "failure_policy": "closed",
                "config": config,
            }
        ]
    ).plugins[0]
    result = run_plugin_hook(descriptor.plugin, descriptor.config, hook, {**BASE, "hook": hook, **context})
    return interpret(descriptor, hook, result, None)


def request(history: list[dict[str, Any]] | None = None, instructions: str | None = "Answer well.") -> dict[str, Any]:
    history = [text("user", "hi")] if history is None else history
    return {"request": {"history": history, "instructions": instructions, "tools": ["f"], "model": "m"}}


# ---- GlobalInstruction ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "instructions", "expected"),
    [
        ({"instruction": "Be brief."}, "Answer well.", "Be brief.\n\nAnswer well."),
        ({"instruction": "Be brief.", "position": "append"}, "Answer well.", "Answer well.\n\nBe brief."),
        ({"instruction": "Be brief."}, None, "Be brief."),
        ({"instruction": "Be brief.", "position": "append"}, "", "Be brief."),
    ],
)
def test_the_global_instruction_is_added_to_the_requests_instructions(
    config: dict[str, Any], instructions: str | None, expected: str
) -> None:
    result = step("GlobalInstruction", config, "before_model", request(instructions=instructions))
    assert result == PluginStep("amend", value={"instructions": expected})


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"instruction": ""},
        {"instruction": 3},
        {"instruction": "x" * (64 * 1024 + 1)},
        {"instruction": "é" * (32 * 1024 + 1)},
        {"instruction": "ok", "position": "middle"},
        {"instruction": "ok", "extra": 1},
    ],
)
def test_a_malformed_global_instruction_is_refused_when_compiled(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        compile_plugins(
            [
                {
                    "id": "g",
                    "plugin": f"{BUILTINS}:GlobalInstruction",
                    "mode": "intervene",
                    "failure_policy": "open",
                    "config": config,
                }
            ]
        )
    assert info.value.reason in ("invalid_value", "unknown_key") and info.value.details["plugin"] == "g"


# ---- ContextFilter ----------------------------------------------------------------------------------------------

CONVERSATION = [
    text("user", "q1"),
    text("model", "a1"),
    text("user", "q2"),
    call("f", "c1"),
    answer("f", "c1"),
    text("model", "a2"),
    text("user", "q3"),
]


def kept(config: dict[str, Any], history: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    result = step("ContextFilter", config, "before_model", request(history))
    if result.kind == "continue":
        return None
    assert result.kind == "amend" and set(result.value) == {"history"}
    history_out: list[dict[str, Any]] = result.value["history"]
    return history_out


def test_the_newest_whole_exchanges_that_fit_are_kept() -> None:
    # Exchanges: [q1, a1], [q2, call, answer, a2], [q3].
    assert kept({"max_messages": 5}, CONVERSATION) == CONVERSATION[2:]
    assert kept({"max_messages": 6}, CONVERSATION) == CONVERSATION[2:]
    assert kept({"max_messages": 4}, CONVERSATION) == [CONVERSATION[6]]  # never half of the q2 exchange
    assert kept({"max_messages": 1}, CONVERSATION) == [CONVERSATION[6]]


def test_the_newest_exchange_stays_whole_in_the_middle_of_a_tool_round() -> None:
    in_round = CONVERSATION[:5]  # the model called f and its answer is in: the next call needs all of it
    assert kept({"max_messages": 1}, in_round) == CONVERSATION[2:5]


def test_a_role_filter_drops_whole_tool_exchanges() -> None:
    assert kept({"roles": ["user"]}, CONVERSATION) == [CONVERSATION[0], CONVERSATION[2], CONVERSATION[6]]


def test_the_kept_history_starts_with_a_user_message() -> None:
    history = [text("model", "a0"), call("f", "c0"), answer("f", "c0"), text("user", "q1"), text("model", "a1")]
    assert kept({}, history) == history[3:]


def test_nothing_to_change_or_nothing_left_goes_on_unchanged() -> None:
    assert kept({}, CONVERSATION) is None
    assert kept({"max_messages": 7}, CONVERSATION) is None
    assert kept({"roles": ["model"]}, CONVERSATION) is None


@pytest.mark.parametrize(
    "config", [{"roles": []}, {"roles": ["system"]}, {"roles": "user"}, {"max_messages": 0}, {"max_messages": True}]
)
def test_a_malformed_context_filter_is_refused_when_compiled(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        compile_plugins(
            [
                {
                    "id": "f",
                    "plugin": f"{BUILTINS}:ContextFilter",
                    "mode": "intervene",
                    "failure_policy": "open",
                    "config": config,
                }
            ]
        )


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for index in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["user", "model", "tool"]))
        if kind == "tool":
            entries += [call("f", f"c{index}"), answer("f", f"c{index}")]
        else:
            entries.append(text(kind, f"m{index}"))
    return entries


def _is_user_text(entry: dict[str, Any]) -> bool:
    return entry["role"] == "user" and entry["content"]["parts"][0]["type"] == "text"


def _pairs_intact(history: list[dict[str, Any]]) -> bool:
    for index, entry in enumerate(history):
        parts = entry["content"]["parts"]
        if parts[0]["type"] == "function_call":
            following = history[index + 1]["content"]["parts"] if index + 1 < len(history) else []
            if not following or following[0].get("id") != parts[0]["id"]:
                return False
        if parts[0]["type"] == "function_response":
            before = history[index - 1]["content"]["parts"] if index else []
            if not before or before[0].get("id") != parts[0]["id"]:
                return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([["user"], ["model"], ["user", "model"]]), st.none() | st.integers(1, 8))
def test_the_filter_is_a_deterministic_order_keeping_selection_that_keeps_tool_exchanges_whole(
    history: list[dict[str, Any]], roles: list[str], limit: int | None
) -> None:
    plugin = ContextFilter({"roles": roles, "max_messages": limit})
    chosen = plugin.select(history)
    assert chosen == sorted(set(chosen)) and chosen == plugin.select(history)
    out = [history[i] for i in chosen]
    assert _pairs_intact(out)
    assert all(entry["role"] in roles for entry in out)
    if out:
        assert _is_user_text(out[0])
    starts = [i for i in chosen if _is_user_text(history[i])]
    if limit is not None and len(out) > limit:  # only the newest exchange may go over the limit
        assert len(starts) == 1
    if limit is None and roles == ["user", "model"]:  # no cut: only model turns before the first user message go
        first_user = next((i for i, e in enumerate(history) if _is_user_text(e)), None)
        assert out == ([] if first_user is None else history[first_user:])
    if chosen:  # whole newest exchanges: everything the role filter keeps from the first kept user message on
        assert chosen == [i for i in range(chosen[0], len(history)) if all_roles_kept(history, i, roles)]


def all_roles_kept(history: list[dict[str, Any]], index: int, roles: list[str]) -> bool:
    """Whether entry ``index`` survives the role filter (a call and its answer go together)."""
    kind = history[index]["content"]["parts"][0]["type"]
    pair = {"function_call": (index, index + 1), "function_response": (index - 1, index)}.get(kind, (index, index))
    return all(history[i]["role"] in roles for i in pair)


# ---- ReflectRetry -----------------------------------------------------------------------------------------------

FAILED = {"error": {"reason": "invalid_city", "type": "ToolError"}}
GUIDANCE = {
    "error": {"reason": "invalid_city"},
    "guidance": "The tool call failed (invalid_city); check the arguments and try again.",
}


def tool_context(**fields: Any) -> dict[str, Any]:
    return {"tool": "get_weather", "call_id": "c1", "args": {"city": "Atlantis"}, **fields}


def test_a_failed_tool_result_becomes_guidance_without_the_raw_failure() -> None:
    result = step("ReflectRetry", {}, "after_tool", tool_context(result=FAILED, tool_failures=0))
    assert result == PluginStep("return", value=GUIDANCE)
    assert "ToolError" not in str(result.value)


def test_a_tool_error_becomes_guidance_too() -> None:
    error = {"reason": "tool_timeout", "type": "AskTimeout"}
    result = step("ReflectRetry", {"max_retries": 1}, "on_tool_error", tool_context(error=error, tool_failures=0))
    assert result.kind == "return" and result.value["error"] == {"reason": "tool_timeout"}


def test_a_successful_tool_result_goes_on() -> None:
    ok = step("ReflectRetry", {}, "after_tool", tool_context(result={"forecast": "rain"}, tool_failures=0))
    assert ok == PluginStep("continue")


def test_retries_stop_after_max_retries_failures_of_the_tool() -> None:
    for failures, kind in [(0, "return"), (1, "return"), (2, "continue"), (5, "continue")]:
        result = step("ReflectRetry", {}, "after_tool", tool_context(result=FAILED, tool_failures=failures))
        assert result.kind == kind, failures
    never = step("ReflectRetry", {"max_retries": 0}, "after_tool", tool_context(result=FAILED, tool_failures=0))
    assert never.kind == "continue"


def test_a_reason_that_is_not_a_tag_is_reported_as_tool_error() -> None:
    failed = {"error": {"reason": "the city Atlantis does not exist", "type": "ValueError"}}
    result = step("ReflectRetry", {}, "after_tool", tool_context(result=failed, tool_failures=0))
    assert result.value["error"] == {"reason": "tool_error"} and "Atlantis" not in str(result.value)


@pytest.mark.parametrize("config", [{"max_retries": -1}, {"max_retries": 101}, {"max_retries": "2"}, {"tries": 1}])
def test_a_malformed_reflect_retry_is_refused_when_compiled(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        compile_plugins(
            [
                {
                    "id": "r",
                    "plugin": f"{BUILTINS}:ReflectRetry",
                    "mode": "intervene",
                    "failure_policy": "open",
                    "config": config,
                }
            ]
        )


# ---- MetadataLogger ---------------------------------------------------------------------------------------------

SECRET_WORDS = "private words xyzzy"


def hook_context(hook: str) -> dict[str, Any]:
    context: dict[str, Any] = {**BASE, "hook": hook}
    user = {"role": "user", "content": content({"type": "text", "text": SECRET_WORDS})}
    extra: dict[str, dict[str, Any]] = {
        "on_user_message": {"user_content": SECRET_WORDS},
        "after_run": {"output": SECRET_WORDS},
        "after_agent": {"output": SECRET_WORDS},
        "before_model": {"request": {"history": [user], "instructions": SECRET_WORDS, "tools": [], "model": "m"}},
        "after_model": {
            "response": {
                "text": SECRET_WORDS,
                "content": user["content"],
                "function_calls": [],
                "finish_reason": "STOP",
            }
        },
        "on_model_error": {"error": {"reason": "rate_limited", "type": "RateLimited"}},
        "before_tool": {"tool": "f", "call_id": "c1", "args": {"q": SECRET_WORDS}},
        "after_tool": {"tool": "f", "call_id": "c1", "args": {"q": SECRET_WORDS}, "result": {"r": SECRET_WORDS}},
        "on_event": {"event": {"id": "e1", "partial": True, "is_final": False, "content": user["content"]}},
    }
    context.update(extra.get(hook, {}))
    return context


def metadata_logger(**config: Any) -> Any:
    entry = {"id": "meta", "plugin": f"{BUILTINS}:MetadataLogger", "mode": "observe", "failure_policy": "open"}
    return compile_plugins([{**entry, "config": config}]).plugins[0]


def test_the_metadata_logger_logs_the_run_lifecycle_and_errors_by_default() -> None:
    descriptor = metadata_logger()
    assert descriptor.hooks == (
        "before_run",
        "after_run",
        "on_model_error",
        "on_tool_error",
        "on_agent_error",
        "on_run_error",
    )
    assert not descriptor.handles("before_model") and not descriptor.handles("on_event")
    assert metadata_logger(detail="run").hooks == descriptor.hooks


@pytest.mark.parametrize("config", [{"detail": "all"}, {"detail": "run", "level": "debug"}])
def test_a_bad_metadata_logger_config_is_refused_when_the_runner_is_built(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        metadata_logger(**config)
    assert info.value.reason == "invalid_value" and info.value.details["key"] == "config"


def test_the_metadata_logger_observes_every_hook_with_one_content_free_record() -> None:
    descriptor = metadata_logger(detail="hooks")
    assert descriptor.hooks == HOOKS
    for hook in HOOKS:
        with capture_logs() as records:
            result = run_plugin_hook(descriptor.plugin, descriptor.config, hook, hook_context(hook))
        assert interpret(descriptor, hook, result, None) == PluginStep("continue")
        assert len(records) == 1, hook
        record = records[0]
        assert record["event"] == "adk_actors.plugins.metadata" and record["hook"] == hook
        assert (record["run_id"], record["invocation_id"], record["agent"]) == ("run-1", "inv-1", "Root")
        assert SECRET_WORDS not in str(record) and "user-1" not in str(record)
    with capture_logs() as records:
        run_plugin_hook(descriptor.plugin, {}, "after_tool", hook_context("after_tool"))
        run_plugin_hook(descriptor.plugin, {}, "on_model_error", hook_context("on_model_error"))
        run_plugin_hook(descriptor.plugin, {}, "after_model", hook_context("after_model"))
        run_plugin_hook(descriptor.plugin, {}, "on_event", hook_context("on_event"))
    tool, error, model, event = records
    assert (tool["tool"], tool["call_id"]) == ("f", "c1")
    assert error["reason"] == "rate_limited" and model["finish_reason"] == "STOP"
    assert (event["event_id"], event["partial"], event["is_final"]) == ("e1", True, False)
