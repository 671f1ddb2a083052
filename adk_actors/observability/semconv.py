"""The GenAI semantic conventions we map, pinned to one version (:data:`SEMCONV_VERSION`).

Each builder returns ``(span_name, attributes)`` for one kind of span. Attribute values are ``str``, ``int``,
``float`` or ``bool`` — except ``gen_ai.response.finish_reasons``, which the convention types as ``string[]`` and
we give as a tuple of strings. Content (prompts, responses, tool arguments and results, media) is never an
attribute here: the builders take names, ids and counts only.

Attributes the pinned version does not define are ours and start with ``adk.`` (``adk.run.id``,
``adk.model.streaming``, ``adk.workflow.node``, ...).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ADK_OPERATION",
    "ADK_RUN_ID",
    "ADK_STREAMING",
    "ADK_WORKFLOW_NAME",
    "ADK_WORKFLOW_NODE",
    "ERROR_TYPE",
    "GEN_AI_AGENT_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "MAX_NAME_CHARS",
    "PROVIDER_NAMES",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "admission_wait",
    "agent_invocation",
    "model_call",
    "provider_name",
    "run",
    "tool_call",
    "workflow_node",
]

SEMCONV_VERSION = "1.37.0"
"""The OpenTelemetry semantic conventions release whose (Development-status) GenAI attributes we emit: the first
with ``gen_ai.provider.name`` (which replaced ``gen_ai.system``)."""
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"

ADK_OPERATION = "adk.operation"
"""Our operation tag on spans that are not GenAI operations (``run``, ``admission_wait``, ``workflow_node``)."""
ADK_RUN_ID = "adk.run.id"
ADK_STREAMING = "adk.model.streaming"
"""Whether the model call streamed (the pinned version has no attribute for it)."""
ADK_WORKFLOW_NAME = "adk.workflow.name"
ADK_WORKFLOW_NODE = "adk.workflow.node"

PROVIDER_NAMES: dict[str, str] = {
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "openai": "openai",
    "anthropic": "anthropic",
}
"""Our provider ids → the convention's well-known ``gen_ai.provider.name`` values (others pass through)."""

MAX_NAME_CHARS = 128
"""Names and ids in attributes and span names are cut to this length (they are tags, not payloads)."""


def _tag(value: Any) -> str:
    return str(value)[:MAX_NAME_CHARS]


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def provider_name(provider: str) -> str:
    """The ``gen_ai.provider.name`` value of one of our provider ids (``"gemini"`` → ``"gcp.gemini"``)."""
    return PROVIDER_NAMES.get(provider, _tag(provider))


def model_call(
    provider: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    finish_reason: str | None = None,
    streaming: bool = False,
    response_model: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """An inference span (kind ``client``): ``"chat {model}"``. Token counts are set when known (non-negative
    ints); the finish reason becomes the one-element ``gen_ai.response.finish_reasons``."""
    attrs: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "chat",
        GEN_AI_PROVIDER_NAME: provider_name(provider),
        GEN_AI_REQUEST_MODEL: _tag(model),
        ADK_STREAMING: bool(streaming),
    }
    if (tokens := _count(input_tokens)) is not None:
        attrs[GEN_AI_USAGE_INPUT_TOKENS] = tokens
    if (tokens := _count(output_tokens)) is not None:
        attrs[GEN_AI_USAGE_OUTPUT_TOKENS] = tokens
    if finish_reason:
        attrs[GEN_AI_RESPONSE_FINISH_REASONS] = (_tag(finish_reason),)
    if response_model:
        attrs[GEN_AI_RESPONSE_MODEL] = _tag(response_model)
    return f"chat {_tag(model)}", attrs


def tool_call(tool: str, call_id: str | None, *, tool_type: str = "function") -> tuple[str, dict[str, Any]]:
    """A tool execution span: ``"execute_tool {tool}"``. Never the arguments or the result."""
    attrs: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: _tag(tool),
        GEN_AI_TOOL_TYPE: _tag(tool_type),
    }
    if call_id:
        attrs[GEN_AI_TOOL_CALL_ID] = _tag(call_id)
    return f"execute_tool {_tag(tool)}", attrs


def agent_invocation(
    agent: str, *, conversation_id: str | None = None, provider: str | None = None
) -> tuple[str, dict[str, Any]]:
    """An agent invocation span (kind ``internal``): ``"invoke_agent {agent}"`` (also for a sub-agent)."""
    attrs: dict[str, Any] = {GEN_AI_OPERATION_NAME: "invoke_agent", GEN_AI_AGENT_NAME: _tag(agent)}
    if conversation_id:
        attrs[GEN_AI_CONVERSATION_ID] = _tag(conversation_id)
    if provider:
        attrs[GEN_AI_PROVIDER_NAME] = provider_name(provider)
    return f"invoke_agent {_tag(agent)}", attrs


def run(agent: str, run_id: str) -> tuple[str, dict[str, Any]]:
    """A Runner run (the root of our spans for one request): ``"run {agent}"``."""
    return f"run {_tag(agent)}", {ADK_OPERATION: "run", GEN_AI_AGENT_NAME: _tag(agent), ADK_RUN_ID: _tag(run_id)}


def admission_wait(agent: str) -> tuple[str, dict[str, Any]]:
    """The time a run waited in admission control's queue: ``"admission_wait {agent}"``."""
    return f"admission_wait {_tag(agent)}", {ADK_OPERATION: "admission_wait", GEN_AI_AGENT_NAME: _tag(agent)}


def workflow_node(workflow: str, node: str) -> tuple[str, dict[str, Any]]:
    """One node of a workflow: ``"workflow_node {workflow}.{node}"``."""
    return f"workflow_node {_tag(workflow)}.{_tag(node)}", {
        ADK_OPERATION: "workflow_node",
        ADK_WORKFLOW_NAME: _tag(workflow),
        ADK_WORKFLOW_NODE: _tag(node),
    }
