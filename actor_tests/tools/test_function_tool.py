"""FunctionTool: schema derivation from annotations and docstrings, execution, async, pickling."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import pickle
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest

from adk_actors.errors import SchemaError, ToolError
from adk_actors.schema import gemini_parameters
from adk_actors.tools import (
    FunctionTool,
    Tool,
    ToolContext,
    invoke_tool,
    invoke_tool_sync,
    parse_docstring,
    schema_for_annotation,
)

from . import helpers


def ctx(**state: Any) -> ToolContext:
    return ToolContext(
        invocation_id="inv",
        agent_name="agent",
        function_call_id="c1",
        app_name="app",
        user_id="u",
        session_id="s",
        state=state,
    )


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Box:
    w: int
    label: str = "x"


class Movie(TypedDict):
    title: str
    year: int


ANNOTATIONS: list[tuple[Any, dict[str, Any]]] = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (Any, {}),
    (list[str], {"type": "array", "items": {"type": "string"}}),
    (list, {"type": "array"}),
    (Sequence[int], {"type": "array", "items": {"type": "integer"}}),
    (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (
        tuple[int, str],
        {
            "type": "array",
            "items": [{"type": "integer"}, {"type": "string"}],
            "additionalItems": False,
            "minItems": 2,
            "maxItems": 2,
        },
    ),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict, {"type": "object"}),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
    (Literal["a", 1], {"enum": ["a", 1]}),
    (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045 - the spelling under test
    (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (Color, {"type": "string", "enum": ["red", "blue"]}),
    (Level, {"type": "integer", "enum": [1, 2]}),
    (Annotated[str, "The name"], {"type": "string", "description": "The name"}),
    (
        Box,
        {
            "type": "object",
            "properties": {"w": {"type": "integer"}, "label": {"type": "string"}},
            "required": ["w"],
            "additionalProperties": False,
        },
    ),
    (
        Movie,
        {
            "type": "object",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title", "year"],
            "additionalProperties": False,
        },
    ),
    (
        list[Box],
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"w": {"type": "integer"}, "label": {"type": "string"}},
                "required": ["w"],
                "additionalProperties": False,
            },
        },
    ),
]


@pytest.mark.parametrize(("annotation", "expected"), ANNOTATIONS, ids=[str(a[0]) for a in ANNOTATIONS])
def test_schema_for_common_annotations(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_for_annotation(annotation) == expected


@dataclasses.dataclass
class Node:
    child: Node | None = None


@pytest.mark.parametrize("annotation", [bytes, object, dict[int, str], Node, Literal[b"x"], complex])
def test_unsupported_annotations_are_rejected(annotation: Any) -> None:
    with pytest.raises(SchemaError) as info:
        schema_for_annotation(annotation)
    assert info.value.reason == "unsupported_annotation"


def test_function_tool_derives_name_description_and_schema() -> None:
    tool = FunctionTool(helpers.get_weather)
    assert isinstance(tool, Tool)
    assert tool.name == "get_weather"
    assert tool.description == "Get the weather for a city."
    assert tool.schema() == {
        "type": "object",
        "additionalProperties": False,
        "required": ["city"],
        "properties": {
            "city": {"type": "string", "description": "The city name, as the user wrote it."},
            "unit": {"type": "string", "enum": ["c", "f"], "description": "Temperature unit.", "default": "c"},
        },
    }
    assert gemini_parameters(tool.schema())[0] == "parametersJsonSchema"
    assert tool.parallel_safe is False and tool.inline is False and tool.requires_confirmation is False


def test_overrides_and_flags() -> None:
    tool = FunctionTool(helpers.get_weather, name="weather", description="d", parallel_safe=True, inline=True)
    assert (tool.name, tool.description, tool.parallel_safe, tool.inline) == ("weather", "d", True, True)
    with pytest.raises(ToolError) as info:
        FunctionTool(helpers.get_weather, name="bad name")
    assert info.value.reason == "invalid_tool_name"
    with pytest.raises(ToolError):
        FunctionTool(helpers.get_weather, parallel_safe="yes")  # type: ignore[arg-type]
    with pytest.raises(ToolError):
        FunctionTool(42)  # type: ignore[arg-type]


def test_execute_validates_and_calls() -> None:
    tool = FunctionTool(helpers.get_weather)
    assert tool.execute({"city": "Oslo"}, ctx()) == {"city": "Oslo", "unit": "c", "forecast": "sunny"}
    for bad in ({}, {"city": 1}, {"city": "Oslo", "unit": "k"}, {"city": "Oslo", "extra": 1}):
        with pytest.raises(SchemaError) as info:
            tool.execute(bad, ctx())
        assert info.value.reason == "invalid_arguments"


def test_typed_arguments_are_coerced_to_declared_types() -> None:
    tool = FunctionTool(helpers.typed)
    out = tool.execute(
        {"p": {"x": 1, "y": 2}, "u": "f", "f": {"owner": "me"}, "tags": ["b", "a"], "pair": [1, "x"]}, ctx()
    )
    assert out == {
        "p": {"x": 1, "y": 2.0},
        "u": "f",
        "f": {"owner": "me"},
        "tags": ["a", "b"],
        "pair": [1, "x"],
        "types": ["Point", "Unit", "set", "tuple", "float"],
        "maybe": None,
    }
    with pytest.raises(SchemaError):
        tool.execute({"p": {"x": 1}, "u": "f", "f": {"owner": "me"}, "tags": ["a", "a"], "pair": [1, "x"]}, ctx())


def test_async_def_tool() -> None:
    tool = FunctionTool(helpers.slow_double)
    assert tool.is_async
    assert tool.schema()["properties"] == {"n": {"type": "integer"}}
    assert asyncio.run(invoke_tool(tool, {"n": 21}, ctx())) == 42
    assert invoke_tool_sync(tool, {"n": 4}, ctx()) == 8

    async def inside_loop() -> None:
        with pytest.raises(ToolError) as info:
            invoke_tool_sync(tool, {"n": 1}, ctx())
        assert info.value.reason == "event_loop_running"

    asyncio.run(inside_loop())


def test_tool_context_is_injected_and_not_in_schema() -> None:
    tool = FunctionTool(helpers.remember)
    assert set(tool.schema()["properties"]) == {"key", "value"}
    context = ctx()
    assert tool.execute({"key": "user:color", "value": "red"}, context) == "stored red"
    assert context.actions.state_delta == {"user:color": "red"}
    assert context.actions.to_event_actions().state_delta == {"user:color": "red"}


def test_keyword_only_parameters_are_required() -> None:
    def only_kw(*, a: int) -> int:
        return a

    def var_args(*args: int) -> int:
        return 0

    assert FunctionTool(only_kw).schema()["required"] == ["a"]
    with pytest.raises(SchemaError):
        FunctionTool(var_args)


def test_no_parameter_tool() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    tool = FunctionTool(ping)
    assert tool.schema() == {"type": "object", "properties": {}, "additionalProperties": False}
    assert tool.execute({}, ctx()) == "pong"


def test_parse_docstring_google_style() -> None:
    summary, args = parse_docstring("""Summary line.

    Longer description.

    Args:
        a (int): First
            continued.
        *rest: Others.

    Raises:
        ValueError: never.
    """)
    assert summary == "Summary line.\n\nLonger description."
    assert args == {"a": "First continued.", "rest": "Others."}
    assert parse_docstring(None) == ("", {})


def test_function_tool_pickles() -> None:
    tool = FunctionTool(helpers.get_weather, description="custom", parallel_safe=True)
    clone = pickle.loads(pickle.dumps(tool))
    assert (clone.name, clone.description, clone.parallel_safe) == ("get_weather", "custom", True)
    assert clone.schema() == tool.schema()
    assert clone.execute({"city": "x"}, ctx())["city"] == "x"
