"""``run_plugin_hook``, in this process: loading and caching, read-only pruned contexts, the legacy ``on_error``
fallback and the normalization of every kind of result (halt, amend, return, raise, invalid, oversized, leaking)."""

from __future__ import annotations

import logging
import types
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from adk_actors.plugins.descriptors import plugin_entry
from adk_actors.plugins.hooks import HOOKS, MAX_RESULT_BYTES, NOTIFY_ONLY, normalize_result, run_plugin_hook
from adk_actors.secrets import REDACTED, register_secret

MOD = "actor_tests.plugins.test_hooks"
CONTEXT: dict[str, Any] = {
    "hook": "before_model",
    "plugin_id": "p1",
    "run_id": "run-1",
    "invocation_id": "inv-1",
    "app_name": "app",
    "user_id": "u",
    "session_id": "s",
    "agent": "Root",
    "request": {
        "history": [{"role": "user", "content": {"schema_version": 1, "parts": [{"type": "text", "text": "hi"}]}}],
        "instructions": "Be kind.",
        "tools": ["get_weather"],
        "model": "gemini-test",
    },
}
LEAKED = "sk-plugin-leak-0123456789"


def run(plugin: str, hook: str = "before_model", context: dict[str, Any] | None = None, **config: Any) -> Any:
    return run_plugin_hook(plugin, config, hook, CONTEXT if context is None else context)


class Halter:
    """Halts with whatever reason its config names."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.reason = config.get("reason", "policy_violation")

    def before_model(self, context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("halt", self.reason)


class Amender:
    @staticmethod
    def before_model(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("amend", {"instructions": "AMENDED " + context["request"]["instructions"]})


class Returner:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.alias = config.get("alias", "return")

    def before_tool(self, context: Mapping[str, Any]) -> tuple[str, Any]:
        return (self.alias, {"cached": True, "args": context["args"]})


class Raiser:
    @staticmethod
    def before_model(context: Mapping[str, Any]) -> None:
        raise ValueError(f"boom with {LEAKED} and the user's words")


class Invalid:
    """Returns whatever its config names as ``result`` (``nan`` and ``object`` stand for non-JSON values)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.result = config["result"]

    def before_model(self, context: Mapping[str, Any]) -> Any:
        special = {"nan": ("amend", float("nan")), "object": ("amend", object()), "bare": 42}
        return special.get(self.result, self.result) if isinstance(self.result, str) else self.result


class Oversized:
    @staticmethod
    def after_tool(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", {"blob": "x" * MAX_RESULT_BYTES})


class Leaker:
    @staticmethod
    def after_tool(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", {"api_key": "AIza-not-for-the-model", "note": f"token is {LEAKED}", "nested": [{"token": 1}]})


class Mutator:
    """Tries to change its context in place (the context is read-only)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.where = config["where"]

    def before_model(self, context: Any) -> None:
        if self.where == "top":
            context["agent"] = "Other"
        elif self.where == "nested":
            context["request"]["instructions"] = "changed"
        else:
            context["request"]["history"].append({})


class Inspector:
    """Reports the types it sees, and whether a secret reached it."""

    @staticmethod
    def before_tool(context: Mapping[str, Any]) -> tuple[str, Any]:
        return (
            "return",
            {
                "context": type(context).__name__,
                "args": type(context["args"]).__name__,
                "list": type(context["args"]["items"]).__name__,
                "seen": context["args"]["api_key"],  # a key name the result's own pruning would not catch
                "hook": context["hook"],
            },
        )


class LegacyOnError:
    @staticmethod
    def on_error(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", {"phase": context["phase"], "hook": context["hook"]})


class Both:
    @staticmethod
    def on_tool_error(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", {"by": "phase hook"})

    @staticmethod
    def on_error(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", {"by": "legacy"})


class Counted:
    built: ClassVar[list[Any]] = []

    def __init__(self, config: Mapping[str, Any]) -> None:
        Counted.built.append(dict(config))

    def before_agent(self, context: Mapping[str, Any]) -> str:
        return "ok"


class Bare:
    """No constructor: instantiated without its config."""

    def before_run(self, context: Mapping[str, Any]) -> str:
        return "observe"


class Async:
    async def before_agent(self, context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", "from a coroutine")


class Hungry:
    @staticmethod
    def before_model(context: Mapping[str, Any]) -> None:
        raise MemoryError


def test_the_hook_names_are_the_references_and_notifications_are_a_subset() -> None:
    assert len(HOOKS) == 15 and len(set(HOOKS)) == 15
    assert {"after_run", "on_agent_error", "on_run_error", "on_error"} == NOTIFY_ONLY and set(HOOKS) >= NOTIFY_ONLY


@pytest.mark.parametrize("raw", [None, "ok", "continue", "observe"])
def test_the_carry_on_results_normalize_to_continue(raw: Any) -> None:
    assert normalize_result(raw) == {"action": "continue"}


def test_a_halt_keeps_a_tag_and_reduces_free_text_to_unspecified() -> None:
    assert run(f"{MOD}:Halter") == {"action": "halt", "reason": "policy_violation"}
    leaky = run(f"{MOD}:Halter", reason=f"the user asked about {LEAKED}")
    assert leaky == {"action": "halt", "reason": "unspecified"}
    assert run(f"{MOD}:Halter", reason=None) == {"action": "halt", "reason": "unspecified"}


def test_an_amendment_carries_the_new_value() -> None:
    assert run(f"{MOD}:Amender") == {"action": "amend", "value": {"instructions": "AMENDED Be kind."}}


@pytest.mark.parametrize("alias", ["return", "replace"])
def test_return_and_its_alias_replace_return_the_value(alias: str) -> None:
    context = {**CONTEXT, "hook": "before_tool", "tool": "t", "call_id": "c1", "args": {"city": "Paris"}}
    result = run(f"{MOD}:Returner", "before_tool", context, alias=alias)
    assert result == {"action": "return", "value": {"cached": True, "args": {"city": "Paris"}}}


def test_a_raising_plugin_fails_with_its_class_name_and_its_text_only_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    register_secret(LEAKED)
    with caplog.at_level(logging.ERROR, logger="adk_actors.plugins"):
        result = run(f"{MOD}:Raiser")
    assert result == {"action": "failed", "reason": "plugin_raised", "type": "ValueError"}
    records = [r for r in caplog.records if r.name == "adk_actors.plugins"]
    assert len(records) == 1
    message = records[0].getMessage()
    assert "plugin hook raised" in message and "hook=before_model" in message and "boom with" in message
    assert LEAKED not in message


@pytest.mark.parametrize(
    "result",
    ["bare", ["frobnicate", 1], ["halt"], "nan", "object", "yes"],
    ids=["not-a-pair", "unknown-action", "short", "nan", "object", "unknown-word"],
)
def test_anything_else_is_an_invalid_plugin_result(result: Any) -> None:
    assert run(f"{MOD}:Invalid", result=result) == {"action": "failed", "reason": "invalid_plugin_result"}


def test_a_value_over_one_mebibyte_is_too_large() -> None:
    context = {**CONTEXT, "hook": "after_tool"}
    assert run(f"{MOD}:Oversized", "after_tool", context) == {"action": "failed", "reason": "plugin_result_too_large"}


def test_a_secret_leaked_into_a_result_is_pruned() -> None:
    register_secret(LEAKED)
    result = run(f"{MOD}:Leaker", "after_tool", {**CONTEXT, "hook": "after_tool"})
    assert result["action"] == "return"
    value = result["value"]
    assert value["api_key"] == REDACTED and value["nested"] == [{"token": REDACTED}]
    assert value["note"] == f"token is {REDACTED}"


@pytest.mark.parametrize("where", ["top", "nested", "list"])
def test_the_context_is_read_only_all_the_way_down(where: str) -> None:
    result = run(f"{MOD}:Mutator", where=where)
    assert result["action"] == "failed" and result["reason"] == "plugin_raised"
    assert result["type"] in ("TypeError", "AttributeError")
    assert CONTEXT["agent"] == "Root" and CONTEXT["request"]["instructions"] == "Be kind."


def test_the_context_is_a_pruned_copy_and_names_its_hook() -> None:
    context = {k: v for k, v in CONTEXT.items() if k != "hook"}
    context.update(tool="t", call_id="c", args={"api_key": "AIza-secret", "items": [1, 2]})
    result = run(f"{MOD}:Inspector", "before_tool", context)
    assert result["value"] == {
        "context": "mappingproxy",
        "args": "mappingproxy",
        "list": "tuple",
        "seen": REDACTED,
        "hook": "before_tool",
    }
    assert context["args"]["api_key"] == "AIza-secret"  # the engine's own copy is untouched


@pytest.mark.parametrize(
    ("hook", "phase"),
    [("on_model_error", "model"), ("on_tool_error", "tool"), ("on_agent_error", "agent"), ("on_run_error", "run")],
)
def test_a_phase_error_hook_falls_back_to_the_legacy_on_error_with_the_phase(hook: str, phase: str) -> None:
    context = {**CONTEXT, "hook": hook, "error": {"reason": "timeout", "type": "AskTimeout"}}
    assert run(f"{MOD}:LegacyOnError", hook, context) == {"action": "return", "value": {"phase": phase, "hook": hook}}


def test_the_phase_hook_wins_over_the_legacy_one_and_other_hooks_do_not_fall_back() -> None:
    context = {**CONTEXT, "hook": "on_tool_error"}
    assert run(f"{MOD}:Both", "on_tool_error", context)["value"] == {"by": "phase hook"}
    assert run(f"{MOD}:LegacyOnError", "before_model") == {"action": "continue"}


def test_a_hook_the_plugin_lacks_continues_and_an_unknown_hook_fails() -> None:
    assert run(f"{MOD}:Amender", "after_model") == {"action": "continue"}
    assert run(f"{MOD}:Amender", "before_everything") == {"action": "failed", "reason": "unknown_hook"}


def test_an_unloadable_plugin_fails_without_the_import_error() -> None:
    assert run("no.such.module:Plugin") == {"action": "failed", "reason": "plugin_not_importable"}
    assert run(f"{MOD}:Missing") == {"action": "failed", "reason": "plugin_not_importable"}


def test_a_class_is_built_once_per_process_and_configuration() -> None:
    Counted.built.clear()
    for _ in range(3):
        assert run(f"{MOD}:Counted", "before_agent", size=1) == {"action": "continue"}
    run(f"{MOD}:Counted", "before_agent", size=2)
    assert Counted.built == [{"size": 1}, {"size": 2}]


def test_a_class_without_a_constructor_is_built_bare() -> None:
    assert run(f"{MOD}:Bare", "before_run", anything=True) == {"action": "continue"}


def test_an_object_or_a_pickled_value_is_used_as_it_is() -> None:
    def before_run(context: Mapping[str, Any]) -> tuple[str, Any]:
        return ("return", f"run {context['run_id']}")

    plugin = plugin_entry(types.SimpleNamespace(before_run=before_run))
    assert isinstance(plugin, bytes)
    assert run_plugin_hook(plugin, {}, "before_run", CONTEXT) == {"action": "return", "value": "run run-1"}


def test_a_coroutine_hook_is_awaited() -> None:
    assert run(f"{MOD}:Async", "before_agent") == {"action": "return", "value": "from a coroutine"}


def test_running_out_of_memory_is_reported_as_memory_limit() -> None:
    assert run(f"{MOD}:Hungry") == {"action": "failed", "reason": "memory_limit"}
