"""GenAI semantic-convention builders: pinned version, span names, attribute names, no content."""

from __future__ import annotations

from adk_actors.observability import semconv
from adk_actors.observability.semconv import (
    SEMCONV_VERSION,
    admission_wait,
    agent_invocation,
    model_call,
    run,
    tool_call,
    workflow_node,
)


def _scalar_or_str_tuple(value: object) -> bool:
    if isinstance(value, tuple):
        return all(isinstance(v, str) for v in value)
    return isinstance(value, str | int | float | bool)


def test_the_pinned_version_is_exposed_with_its_schema_url() -> None:
    assert SEMCONV_VERSION == "1.37.0"
    assert semconv.SCHEMA_URL == "https://opentelemetry.io/schemas/1.37.0"


def test_model_call_names_the_span_chat_model_with_the_genai_attributes() -> None:
    name, attrs = model_call(
        "gemini", "gemini-2.5-flash", input_tokens=12, output_tokens=7, finish_reason="STOP", streaming=True
    )
    assert name == "chat gemini-2.5-flash"
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("STOP",),
        "adk.model.streaming": True,
    }
    _, bare = model_call("custom", "m", input_tokens=-1, output_tokens=True)  # type: ignore[arg-type]
    assert "gen_ai.usage.input_tokens" not in bare and "gen_ai.usage.output_tokens" not in bare
    assert bare["gen_ai.provider.name"] == "custom"


def test_tool_agent_run_admission_and_workflow_builders() -> None:
    assert tool_call("get_weather", "call-1") == (
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": "call-1",
        },
    )
    assert agent_invocation("Helper", conversation_id="s-1", provider="gemini") == (
        "invoke_agent Helper",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "Helper",
            "gen_ai.conversation.id": "s-1",
            "gen_ai.provider.name": "gcp.gemini",
        },
    )
    assert run("Helper", "r-1") == (
        "run Helper",
        {"adk.operation": "run", "gen_ai.agent.name": "Helper", "adk.run.id": "r-1"},
    )
    assert admission_wait("Helper")[0] == "admission_wait Helper"
    assert workflow_node("Pipeline", "fetch") == (
        "workflow_node Pipeline.fetch",
        {"adk.operation": "workflow_node", "adk.workflow.name": "Pipeline", "adk.workflow.node": "fetch"},
    )


def test_attribute_values_are_scalars_and_names_are_bounded() -> None:
    long = "x" * 1000
    for name, attrs in (
        model_call("gemini", long, finish_reason=long),
        tool_call(long, long),
        agent_invocation(long, conversation_id=long),
        run(long, long),
        admission_wait(long),
        workflow_node(long, long),
    ):
        assert all(_scalar_or_str_tuple(v) for v in attrs.values())
        assert all(len(v) <= semconv.MAX_NAME_CHARS for v in attrs.values() if isinstance(v, str))
        assert len(name) <= 2 * semconv.MAX_NAME_CHARS + 16
