"""Tools: the ``Tool`` protocol, ``FunctionTool``, ``ToolContext``, toolsets, catalog compilation, and the
model-visible success/failure function responses.

::

    from adk_actors.tools import FunctionTool, compile_catalog

    def get_weather(city: str) -> dict:
        \"\"\"Get the weather for a city.\"\"\"
        return {"city": city, "forecast": "sunny"}

    catalog = compile_catalog([FunctionTool(get_weather)])
    catalog.declarations()   # Gemini functionDeclarations
"""

from adk_actors.tools.base import (
    MAX_HINT_CHARS,
    Confirmation,
    Tool,
    confirmation_for,
    invoke_tool,
    invoke_tool_sync,
    is_inline,
    is_parallel_safe,
)
from adk_actors.tools.catalog import CatalogEntry, ToolCatalog, Toolset, compile_catalog, tool_declaration
from adk_actors.tools.code_execution import CodeExecutionTool, capabilities, code_toolset
from adk_actors.tools.context import ReadOnlyState, ToolActions, ToolContext
from adk_actors.tools.function_tool import FunctionTool, parse_docstring, schema_for_annotation
from adk_actors.tools.responses import (
    call_tool,
    call_tool_sync,
    failed_function_response,
    result_payload,
    tool_result_response,
)
from adk_actors.tools.sandbox import CodeExecutor, CodeRequest, CodeResult, ProcessSandbox
from adk_actors.tools.suspension import long_running, request_credential

__all__ = [
    "MAX_HINT_CHARS",
    "CatalogEntry",
    "CodeExecutionTool",
    "CodeExecutor",
    "CodeRequest",
    "CodeResult",
    "Confirmation",
    "FunctionTool",
    "ProcessSandbox",
    "ReadOnlyState",
    "Tool",
    "ToolActions",
    "ToolCatalog",
    "ToolContext",
    "Toolset",
    "call_tool",
    "call_tool_sync",
    "capabilities",
    "code_toolset",
    "compile_catalog",
    "confirmation_for",
    "failed_function_response",
    "invoke_tool",
    "invoke_tool_sync",
    "is_inline",
    "is_parallel_safe",
    "long_running",
    "parse_docstring",
    "request_credential",
    "result_payload",
    "schema_for_annotation",
    "tool_declaration",
    "tool_result_response",
]
