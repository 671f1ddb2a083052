"""ToolContext, confirmation gates, model-visible responses, toolsets and catalog compilation."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import content as c
from adk_actors.errors import ContentError, SchemaError, ToolError
from adk_actors.tools import (
    Confirmation,
    FunctionTool,
    ReadOnlyState,
    ToolActions,
    ToolContext,
    Toolset,
    call_tool,
    call_tool_sync,
    compile_catalog,
    confirmation_for,
    failed_function_response,
    is_inline,
    is_parallel_safe,
    result_payload,
    tool_declaration,
    tool_result_response,
)

from . import helpers


def ctx(**state: Any) -> ToolContext:
    return ToolContext(invocation_id="inv", agent_name="agent", function_call_id="c1", state=state)


class PlainTool:
    """A hand-written tool satisfying the protocol with plain attributes."""

    name = "plain"
    description = "A plain tool."
    requires_confirmation = True

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    def execute(self, args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {"echo": args["q"]}


class GatedTool(PlainTool):
    name = "gated"

    def require_confirmation(self, args: dict[str, Any], context: ToolContext) -> Any:
        return args["q"] == "danger"


class BadSchemaTool(PlainTool):
    name = "bad_schema"

    def schema(self) -> dict[str, Any]:
        return {"type": "no-such-type"}


# ToolContext ---------------------------------------------------------------------------------------------------


def test_tool_context_state_is_read_only_and_private() -> None:
    state: dict[str, Any] = {"user:name": "Ada", "nested": {"a": [1]}}
    context = ctx(**state)
    state["nested"]["a"].append(2)
    assert context.state["nested"] == {"a": [1]}
    context.state["nested"]["a"].append(3)
    assert context.state["nested"] == {"a": [1]}
    with pytest.raises(TypeError):
        context.state["x"] = 1  # type: ignore[index]
    assert dict(context.state) == {"user:name": "Ada", "nested": {"a": [1]}}


def test_tool_context_has_reference_fields_and_no_service_handles() -> None:
    import dataclasses

    names = {f.name for f in dataclasses.fields(ToolContext)}
    assert names == {
        "invocation_id",
        "agent_name",
        "function_call_id",
        "app_name",
        "user_id",
        "session_id",
        "state",
        "actions",
        "ancestry",
        "traceparent",  # correlation for the tool's outbound requests, not a service handle
        "artifacts",  # the artifact service bound to the Runner's session: no other scope is reachable through it
        "memory",  # the memory service bound to the Runner's app and user, the same way
    }
    context = ToolContext(invocation_id="i", agent_name="A", function_call_id="c")
    assert context.call_id == "c"  # the reference's name beside ours


def test_tool_actions_record_json_safe_state() -> None:
    context = ctx(count=1)
    context.actions.set_state("count", 2)
    assert context.get_state("count") == 2 and context.state["count"] == 1
    for key, value in (("", 1), ("k", float("nan")), ("k", object()), (3, 1)):
        with pytest.raises(ToolError) as info:
            context.actions.set_state(key, value)  # type: ignore[arg-type]
        assert info.value.reason == "invalid_state"
    context.actions.escalate = True
    assert context.actions.to_event_actions().escalate is True


def test_tool_context_rejects_bad_fields_and_redacts() -> None:
    with pytest.raises(ToolError):
        ToolContext(invocation_id=1, agent_name="a")  # type: ignore[arg-type]
    with pytest.raises(ToolError):
        ToolContext(invocation_id="i", agent_name="a", state={"x": float("inf")})
    context = ctx(api_key="sk-123456789", plain="ok")
    context.actions.set_state("k", 1)
    remote = context.redacted()
    assert dict(remote.state) == {"api_key": "[REDACTED]", "plain": "ok"}
    assert remote.actions.state_delta == {}


@pytest.mark.parametrize(
    "value",
    [ctx(a=1), ReadOnlyState({"a": [1]}), ToolActions(state_delta={"a": 1}), Confirmation(required=True, hint="h")],
)
def test_tool_values_pickle(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value


# Confirmation --------------------------------------------------------------------------------------------------


def test_static_and_dynamic_confirmation() -> None:
    assert confirmation_for(PlainTool(), {"q": "x"}, ctx()) == Confirmation(required=True)
    gated = GatedTool()
    assert confirmation_for(gated, {"q": "safe"}, ctx()) == Confirmation(required=False)  # method wins
    assert confirmation_for(gated, {"q": "danger"}, ctx()).required is True
    assert confirmation_for(object(), {}, ctx()) == Confirmation(required=False)

    tool = FunctionTool(helpers.publish, requires_confirmation=helpers.needs_publish_confirmation)
    assert confirmation_for(tool, {"target": "prod", "dry_run": True}, ctx()).required is False
    gate = confirmation_for(tool, {"target": "prod"}, ctx())
    assert gate == Confirmation(required=True, hint="Publish prod")
    assert gate.to_dict() == {"required": True, "hint": "Publish prod"}
    assert confirmation_for(FunctionTool(helpers.publish, requires_confirmation=True), {}, ctx()).required


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "yes",
        1,
        {"hint": "x"},
        {"required": "yes"},
        {"required": True, "x": 1},
        {"required": True, "hint": "h" * 1025},
        {"required": True, "hint": 3},
    ],
)
def test_malformed_confirmation_answers_are_rejected(answer: Any) -> None:
    class Tool(PlainTool):
        def require_confirmation(self, args: dict[str, Any], context: ToolContext) -> Any:
            return answer

    with pytest.raises(ToolError) as info:
        confirmation_for(Tool(), {}, ctx())
    assert info.value.reason == "invalid_confirmation"


def test_confirmation_gate_exception_is_structural() -> None:
    class Tool(PlainTool):
        def require_confirmation(self, args: dict[str, Any], context: ToolContext) -> Any:
            raise KeyError("secret-value-123")

    with pytest.raises(ToolError) as info:
        confirmation_for(Tool(), {}, ctx())
    assert info.value.reason == "confirmation_failed" and "secret" not in str(info.value.to_dict())


def test_flags_default_false() -> None:
    assert not is_parallel_safe(PlainTool()) and not is_inline(PlainTool())
    tool = FunctionTool(helpers.get_weather, parallel_safe=True, inline=True)
    assert is_parallel_safe(tool) and is_inline(tool)


# Responses -----------------------------------------------------------------------------------------------------


def test_failed_function_response_is_structural() -> None:
    part = failed_function_response("get_weather", "c1", RuntimeError("secret sk-123"))
    assert part.to_dict() == {
        "type": "function_response",
        "name": "get_weather",
        "id": "c1",
        "response": {"error": {"reason": "tool_exception", "type": "RuntimeError"}},
    }
    adk = failed_function_response("f", None, ToolError("secret sk-123", reason="quota_exhausted"))
    assert adk.response == {"error": {"reason": "quota_exhausted", "type": "ToolError"}}
    weird = failed_function_response("f", None, ToolError("x", reason="Not A Tag!"))
    assert weird.response == {"error": {"reason": "tool_error", "type": "ToolError"}}


def test_results_are_shaped_and_secret_pruned() -> None:
    assert result_payload({"a": 1}) == {"a": 1}
    assert result_payload(3) == {"result": 3}
    assert result_payload(None) == {"result": None}
    assert result_payload(helpers.Point(x=1)) == {"x": 1, "y": 0.0}
    assert result_payload({"token": "abc123456"}) == {"token": "[REDACTED]"}
    part = tool_result_response("f", "c1", {"password": "hunter2", "ok": True})
    assert part.response == {"password": "[REDACTED]", "ok": True}
    with pytest.raises(ToolError) as info:
        tool_result_response("f", None, {"x": {1, 2}})
    assert info.value.reason == "invalid_tool_result"
    with pytest.raises(ToolError) as info:
        tool_result_response("f", None, {"x": "a" * (1024 * 1024)})
    assert info.value.reason == "limit_exceeded"


def call(name: str, args: dict[str, Any], call_id: str = "c1") -> c.FunctionCallPart:
    return c.function_call(name, args, id=call_id)


def test_call_tool_success_failure_and_invalid_arguments() -> None:
    weather = FunctionTool(helpers.get_weather)
    ok = call_tool_sync(weather, call("get_weather", {"city": "Oslo"}), ctx())
    assert ok.response == {"city": "Oslo", "unit": "c", "forecast": "sunny"} and ok.id == "c1"

    bad = call_tool_sync(weather, call("get_weather", {"city": "sk-secret-999"[:0] or 7}), ctx())
    assert bad.response == {"error": {"reason": "invalid_arguments", "type": "SchemaError"}}

    boom = FunctionTool(helpers.explode)
    failed = call_tool_sync(boom, call("explode", {"reason": "plain"}), ctx())
    assert failed.response == {"error": {"reason": "tool_exception", "type": "RuntimeError"}}
    failed = call_tool_sync(boom, call("explode", {"reason": "adk"}), ctx())
    assert failed.response == {"error": {"reason": "quota_exhausted", "type": "ToolError"}}
    assert "sk-1234567890" not in str(failed.to_dict())

    leak = call_tool_sync(FunctionTool(helpers.leak), call("leak", {}), ctx())
    assert leak.response == {"api_key": "[REDACTED]", "ok": True}

    unserialisable = call_tool_sync(FunctionTool(lambda: {1, 2}, name="sets"), call("sets", {}), ctx())
    assert unserialisable.response == {"error": {"reason": "invalid_tool_result", "type": "ToolError"}}


def test_call_tool_async_and_plain_tools() -> None:
    doubled = asyncio.run(call_tool(FunctionTool(helpers.slow_double), call("slow_double", {"n": 2}), ctx()))
    assert doubled.response == {"result": 4}
    plain = asyncio.run(call_tool(PlainTool(), call("plain", {"q": "hi"}), ctx()))
    assert plain.response == {"echo": "hi"}
    assert call_tool_sync(FunctionTool(helpers.slow_double), call("slow_double", {"n": 3}), ctx()).response == {
        "result": 6
    }


# Toolsets and catalogs -----------------------------------------------------------------------------------------


def test_catalog_compiles_declarations_and_versions() -> None:
    catalog = compile_catalog(
        [FunctionTool(helpers.get_weather), PlainTool()],
        [Toolset.of("extra", [FunctionTool(helpers.publish)])],
        sub_agents=["Helper"],
    )
    assert catalog.names() == ("get_weather", "plain", "publish")
    declarations = catalog.declarations()
    assert declarations[1] == {
        "name": "plain",
        "description": "A plain tool.",
        "parameters": {"type": "OBJECT", "properties": {"q": {"type": "STRING"}}, "required": ["q"]},
    }
    assert "parametersJsonSchema" in declarations[0]
    assert catalog.get("publish") is not None and catalog.get("publish").source == "toolset:extra"  # type: ignore
    again = compile_catalog(
        [FunctionTool(helpers.get_weather), PlainTool()],
        [Toolset.of("extra", [FunctionTool(helpers.publish)])],
        sub_agents=["Helper"],
    )
    assert again.version == catalog.version and len(catalog.version) == 64
    assert compile_catalog([PlainTool()]).version != catalog.version


@pytest.mark.parametrize(
    ("kwargs", "source"),
    [
        ({"tools": [PlainTool(), PlainTool()]}, "tool"),
        ({"tools": [PlainTool()], "toolsets": [Toolset.of("ts", [PlainTool()])]}, "toolset:ts"),
        ({"toolsets": [Toolset.of("a", [PlainTool()]), Toolset.of("b", [PlainTool()])]}, "toolset:b"),
        ({"tools": [PlainTool()], "sub_agents": ["plain"]}, "sub_agent"),
        ({"sub_agents": ["x", "x"]}, "sub_agent"),
    ],
)
def test_duplicate_names_are_rejected_across_sources(kwargs: dict[str, Any], source: str) -> None:
    with pytest.raises(ToolError) as info:
        compile_catalog(**kwargs)
    assert info.value.reason == "duplicate_tool_name"
    assert info.value.details["source"] == source


def test_invalid_tools_and_schemas_are_rejected() -> None:
    with pytest.raises(SchemaError) as info:
        compile_catalog([BadSchemaTool()])
    assert info.value.details["tool"] == "bad_schema"
    with pytest.raises(SchemaError):
        Toolset.of("ts", [BadSchemaTool()])
    with pytest.raises(ToolError) as tool_info:
        compile_catalog([object()])
    assert tool_info.value.reason == "invalid_tool"

    class BadName(PlainTool):
        name = "has space"

    with pytest.raises(ToolError) as tool_info:
        compile_catalog([BadName()])
    assert tool_info.value.reason == "invalid_tool_name"

    class Raises(PlainTool):
        def schema(self) -> dict[str, Any]:
            raise RuntimeError("secret")

    with pytest.raises(ToolError) as tool_info:
        compile_catalog([Raises()])
    assert tool_info.value.reason == "invalid_tool"


def test_resolve_and_stale_catalog_version() -> None:
    catalog = compile_catalog([PlainTool()])
    entry, args = catalog.validate_call(call("plain", {"q": "x"}), version=catalog.version)
    assert entry.name == "plain" and args == {"q": "x"}
    with pytest.raises(ToolError) as info:
        catalog.resolve("plain", version="0" * 64)
    assert info.value.reason == "tool_catalog_changed"
    with pytest.raises(ToolError) as info:
        catalog.resolve("missing")
    assert info.value.reason == "tool_not_found"
    with pytest.raises(SchemaError) as schema_info:
        catalog.validate_call(call("plain", {"q": 1}))
    assert schema_info.value.reason == "invalid_arguments" and schema_info.value.details["tool"] == "plain"


def test_check_batch() -> None:
    catalog = compile_catalog([PlainTool(), FunctionTool(helpers.get_weather)])
    catalog.check_batch([call("plain", {"q": 1}, "a"), call("get_weather", {}, "b")])
    with pytest.raises(ToolError) as info:
        catalog.check_batch([call("plain", {}, "a"), call("nope", {}, "b")])
    assert info.value.reason == "tool_not_found" and info.value.details["index"] == 1
    with pytest.raises(ToolError) as info:
        catalog.check_batch([call("plain", {}, "a"), call("plain", {}, "a")])
    assert info.value.reason == "duplicate_call_id"


def test_toolset_refresh_returns_new_snapshot_and_stale_calls_fail_closed() -> None:
    backend: list[Any] = [PlainTool()]
    toolset = Toolset.dynamic("remote", lambda: list(backend))
    catalog = compile_catalog(toolsets=[toolset])
    assert toolset.refresh() == toolset and toolset.refresh() is not toolset

    backend[:] = [GatedTool()]
    refreshed = toolset.refresh()
    assert [t.name for t in toolset.tools] == ["plain"]
    assert [t.name for t in refreshed.tools] == ["gated"]
    assert refreshed.version != toolset.version
    new_catalog = compile_catalog(toolsets=[refreshed])
    with pytest.raises(ToolError) as info:
        new_catalog.resolve("plain", version=catalog.version)
    assert info.value.reason == "tool_catalog_changed"
    recorded = catalog.resolve("plain").digest
    with pytest.raises(ToolError) as info:
        new_catalog.resolve("plain", digest=recorded)
    assert info.value.reason == "tool_catalog_changed"

    static = Toolset.of("static", [PlainTool()])
    assert static.refresh() is static

    def failing() -> list[Any]:
        raise ConnectionError("secret-host")

    with pytest.raises(ToolError) as info:
        Toolset.dynamic("remote", failing)
    assert info.value.reason == "toolset_load_failed" and info.value.details["type"] == "ConnectionError"


tool_names = st.text(alphabet="abcxyz_1", min_size=1, max_size=3)


@settings(max_examples=100, deadline=None)
@given(st.lists(tool_names, max_size=5), st.lists(tool_names, max_size=3))
def test_catalog_compilation_raises_only_adk_errors(names: list[str], agents: list[str]) -> None:
    tools = [FunctionTool(helpers.get_weather, name=n) if n[0] != "1" else None for n in names]
    try:
        catalog = compile_catalog([t for t in tools if t is not None], sub_agents=agents)
    except ToolError as exc:
        assert exc.reason in {"duplicate_tool_name", "invalid_tool_name"}
        return
    assert len(set(catalog.names()) | set(agents)) == len(catalog.names()) + len(agents)


def test_catalogs_and_static_toolsets_pickle() -> None:
    toolset = Toolset.of("extra", [FunctionTool(helpers.publish), PlainTool()])
    catalog = compile_catalog([FunctionTool(helpers.get_weather)], [toolset], sub_agents=["Helper"])
    clone = pickle.loads(pickle.dumps(catalog))
    assert clone.version == catalog.version and clone.declarations() == catalog.declarations()
    assert clone.validate_call(call("get_weather", {"city": "x"}))[1] == {"city": "x"}
    assert pickle.loads(pickle.dumps(toolset)).version == toolset.version


def test_entry_digest_survives_unrelated_catalog_changes() -> None:
    before = compile_catalog([PlainTool()])
    after = compile_catalog([PlainTool(), FunctionTool(helpers.get_weather)])
    recorded = before.resolve("plain").digest
    assert after.resolve("plain", digest=recorded).name == "plain"

    class ChangedPlain(PlainTool):
        def schema(self) -> dict[str, Any]:
            return {"type": "object", "properties": {"q": {"type": "integer"}}}

    with pytest.raises(ToolError) as info:
        compile_catalog([ChangedPlain()]).resolve("plain", digest=recorded)
    assert info.value.reason == "tool_catalog_changed"


LONE_SURROGATES = ["\ud800", "weather \udfff", "\udc00!"]


@pytest.mark.parametrize("bad", LONE_SURROGATES)
def test_lone_surrogates_in_declarations_are_schema_errors(bad: str) -> None:
    described = FunctionTool(helpers.get_weather, description=bad)
    for attempt in (
        lambda: compile_catalog([described]),
        lambda: Toolset.of("ts", [described]),
        lambda: tool_declaration(described),
    ):
        with pytest.raises(SchemaError) as info:
            attempt()
        assert info.value.reason == "invalid_description" and info.value.details["tool"] == "get_weather"

    def documented(city: str) -> str:
        return city

    documented.__doc__ = f"Look up a city.\n\nArgs:\n    city: the city {bad}\n"
    with pytest.raises(SchemaError) as info:
        compile_catalog([FunctionTool(documented)])
    assert info.value.reason == "invalid_schema"


@pytest.mark.parametrize("bad", LONE_SURROGATES)
def test_lone_surrogates_in_call_arguments_and_state_are_rejected(bad: str) -> None:
    entry = compile_catalog([FunctionTool(helpers.get_weather)]).get("get_weather")
    assert entry is not None
    for args in ({"city": bad}, {"city": "Oslo", bad: 1}):
        with pytest.raises(SchemaError) as info:
            entry.validate_args(args)
        assert info.value.reason == "invalid_arguments" and info.value.details["rule"] == "invalid_json"
        with pytest.raises(ContentError):
            call("get_weather", args)
    context = ctx()
    for key, value in ((bad, 1), ("k", bad), ("k", {bad: 1})):
        with pytest.raises(ToolError) as tool_info:
            context.actions.set_state(key, value)
        assert tool_info.value.reason == "invalid_state"
    with pytest.raises(ToolError):
        ToolContext(invocation_id="i", agent_name="a", state={bad: 1})


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=20) | st.sampled_from(LONE_SURROGATES))
def test_any_description_compiles_or_raises_a_schema_error(description: str) -> None:
    tool = FunctionTool(helpers.get_weather, description=description)
    try:
        catalog = compile_catalog([tool])
    except SchemaError as exc:
        assert exc.reason == "invalid_description"
        return
    assert catalog.get("get_weather") is not None and len(catalog.version) == 64
