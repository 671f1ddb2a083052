"""MCP results as our values: a ``CallToolResult`` as a function response, content blocks kept exactly.

The model sees an MCP tool's result as ``{"content": [...], "structuredContent"?: {...}}``; a result with
``isError: true`` as the failed-call shape ``{"error": {"reason": "mcp_tool_error", "content": [...]}}`` (so
``on_tool_error`` plugins see it as a failure and the model sees the server's explanation and can correct itself).
Content blocks keep their type-specific keys (``text``; ``image``/``audio`` with ``mimeType`` and base64 ``data``;
``resource_link``; embedded ``resource`` with ``text`` or ``blob``); annotations and ``_meta`` are dropped. The
function response is bounded like any tool result (``limit_exceeded`` past the content limits).
"""

from __future__ import annotations

from typing import Any

from adk_actors.tools.responses import tool_result_response

__all__ = ["call_result", "content_block", "function_response"]

_BLOCK_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("mimeType", "data"),
    "audio": ("mimeType", "data"),
    "resource_link": ("uri", "name", "title", "description", "mimeType", "size"),
    "resource": ("resource",),
}
_RESOURCE_KEYS = ("uri", "mimeType", "text", "blob")


def content_block(block: Any) -> dict[str, Any]:
    """One MCP content block reduced to its type's keys (an unknown type becomes ``{"type": "unsupported"}``)."""
    if not isinstance(block, dict):
        return {"type": "unsupported"}
    kind = block.get("type")
    keys = _BLOCK_KEYS.get(kind) if isinstance(kind, str) else None
    if keys is None:
        return {"type": "unsupported", "original_type": str(kind)[:64]}
    out: dict[str, Any] = {"type": kind}
    for key in keys:
        if key in block:
            out[key] = block[key]
    if kind == "resource" and isinstance(out.get("resource"), dict):
        out["resource"] = {k: v for k, v in out["resource"].items() if k in _RESOURCE_KEYS}
    return out


def call_result(raw: dict[str, Any]) -> dict[str, Any]:
    """A ``CallToolResult`` as the client returns it: ``content``, ``structuredContent`` (when present) and
    ``isError`` (always present)."""
    out: dict[str, Any] = {"content": [content_block(b) for b in raw.get("content") or []]}
    if isinstance(raw.get("structuredContent"), dict):
        out["structuredContent"] = raw["structuredContent"]
    out["isError"] = raw.get("isError") is True
    return out


def function_response(name: str, call_id: str | None, raw: dict[str, Any]) -> dict[str, Any]:
    """The function-response part (as a dict) carrying an MCP tool's result to the model.

    Raises:
        ToolError: ``limit_exceeded`` or ``invalid_tool_result`` (the result cannot be returned to the model).
    """
    result = call_result(raw)
    if result["isError"]:
        response: dict[str, Any] = {"error": {"reason": "mcp_tool_error", "content": result["content"]}}
    else:
        response = {"content": result["content"]}
        if "structuredContent" in result:
            response["structuredContent"] = result["structuredContent"]
    return tool_result_response(name, call_id, response).to_dict()
