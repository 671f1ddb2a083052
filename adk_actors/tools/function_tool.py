"""``FunctionTool``: a tool made from a typed Python function, its schema derived from annotations and docstring.

::

    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict:
        \"\"\"Get the weather for a city.

        Args:
            city: The city name.
            unit: Temperature unit.
        \"\"\"
        return {"city": city, "forecast": "sunny"}

    tool = FunctionTool(get_weather)

A parameter named ``tool_context`` (or annotated ``ToolContext``) receives the context and is not part of the
schema. ``async def`` functions are supported: ``execute`` then returns an awaitable.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

from adk_actors.content.json_values import copy_json
from adk_actors.content.parts import check_function_name
from adk_actors.errors import ContentError, SchemaError, ToolError, ValidationError
from adk_actors.schema import CompiledSchema, compile_schema
from adk_actors.tools.context import ToolContext

__all__ = ["FunctionTool", "parse_docstring", "schema_for_annotation"]

_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "returns",
        "return",
        "raises",
        "yields",
        "examples",
        "example",
        "note",
        "notes",
        "attributes",
        "see also",
        "warnings",
        "warning",
    }
)
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params"})
_ARG_LINE = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_CONTEXT_PARAM = "tool_context"


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument descriptions.

    Returns:
        ``(description, {arg_name: description})``; the description is the text before the first section.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    base_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        header = stripped[:-1].lower() if stripped.endswith(":") else None
        if header in _SECTIONS and (len(line) - len(line.lstrip())) == 0:
            section, base_indent, current = header, None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _ARG_SECTIONS or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if base_indent is None:
            base_indent = indent
        match = _ARG_LINE.fullmatch(stripped)
        if indent == base_indent and match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current is not None and indent > base_indent:
            args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args


def _unsupported(annotation: Any, rule: str = "unsupported_annotation") -> SchemaError:
    label = getattr(annotation, "__name__", None) or type(annotation).__name__
    return SchemaError(
        "annotation cannot be expressed as a JSON Schema",
        reason="unsupported_annotation",
        details={"annotation": str(label)[:128], "rule": rule},
    )


def _literal_type(values: Sequence[Any]) -> str | None:
    if all(isinstance(v, bool) for v in values):
        return "boolean"
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "integer"
    return None


def _enum_schema(values: list[Any], annotation: Any) -> dict[str, Any]:
    for value in values:
        if value is not None and not isinstance(value, str | int | float | bool):
            raise _unsupported(annotation, "literal_value")
    schema: dict[str, Any] = {}
    kind = _literal_type(values)
    if kind is not None:
        schema["type"] = kind
    schema["enum"] = values
    return schema


def _object_schema(hints: Mapping[str, Any], required: Iterable[str], seen: frozenset[int]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: _schema(v, seen) for k, v in hints.items()},
        "required": sorted(required),
        "additionalProperties": False,
    }


def _is_typeddict(annotation: Any) -> bool:
    return isinstance(annotation, type) and typing.is_typeddict(annotation)


def _typeddict_required(annotation: Any, hints: Mapping[str, Any]) -> list[str]:
    # ``__required_keys__`` misses NotRequired/Required written as strings (``from __future__ import annotations``),
    # so read the resolved hints; totality is per class, so fall back to the class's own verdict otherwise.
    required = []
    for key, hint in hints.items():
        origin = get_origin(hint)
        if origin is typing.NotRequired:
            continue
        if origin is typing.Required or key in annotation.__required_keys__:
            required.append(key)
    return required


def _schema(annotation: Any, seen: frozenset[int]) -> dict[str, Any]:
    if annotation is Any or annotation is inspect.Parameter.empty:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    for py_type, json_type in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if annotation is py_type:
            return {"type": json_type}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is typing.Required or origin is typing.NotRequired:
        return _schema(args[0], seen)
    if origin is typing.Annotated:
        schema = dict(_schema(args[0], seen))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin is Literal:
        return _enum_schema(list(args), annotation)
    if origin is Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        inner = _schema(members[0], seen) if len(members) == 1 else {"anyOf": [_schema(m, seen) for m in members]}
        if len(members) == len(args):
            return inner
        return {"anyOf": [inner, {"type": "null"}]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_schema([m.value for m in annotation], annotation)
    if annotation in (list, tuple, set, frozenset) or origin in (list, set, frozenset, Sequence, Iterable):
        schema = {"type": "array"}
        if args:
            schema["items"] = _schema(args[0], seen)
        if annotation in (set, frozenset) or origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], seen)}
        return {
            "type": "array",
            "items": [_schema(a, seen) for a in args],
            "additionalItems": False,
            "minItems": len(args),
            "maxItems": len(args),
        }
    if annotation is dict or origin in (dict, Mapping):
        schema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise _unsupported(annotation, "non_str_keys")
            schema["additionalProperties"] = _schema(args[1], seen)
        return schema
    if _is_typeddict(annotation) or (dataclasses.is_dataclass(annotation) and isinstance(annotation, type)):
        if id(annotation) in seen:
            raise _unsupported(annotation, "recursive_annotation")
        inner_seen = seen | {id(annotation)}
        try:
            hints = typing.get_type_hints(annotation, include_extras=True)
        except Exception:
            raise _unsupported(annotation, "unresolvable_annotation") from None
        if _is_typeddict(annotation):
            return _object_schema(hints, _typeddict_required(annotation, hints), inner_seen)
        fields = dataclasses.fields(annotation)
        required = [
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        return _object_schema({f.name: hints.get(f.name, Any) for f in fields if f.init}, required, inner_seen)
    raise _unsupported(annotation)


def schema_for_annotation(annotation: Any) -> dict[str, Any]:
    """The JSON Schema for a Python type annotation.

    Supports ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``list[...]``, ``Sequence[...]``,
    ``set[...]``, ``tuple[...]``, ``dict[str, ...]``, ``Literal[...]``, ``Enum`` subclasses, ``Optional``/unions,
    ``Annotated[T, "description"]``, ``TypedDict`` and dataclasses (closed objects: ``additionalProperties: false``).

    Raises:
        SchemaError: reason ``unsupported_annotation`` (``details["rule"]`` says why).
    """
    return _schema(annotation, frozenset())


def _coerce(value: Any, annotation: Any) -> Any:
    """Turn validated JSON back into the Python types the function declared (dataclasses, enums, tuples)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (typing.Annotated, typing.Required, typing.NotRequired):
        return _coerce(value, args[0])
    if value is None:
        return None
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if origin is Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        return _coerce(value, members[0]) if len(members) == 1 else value
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation(value)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type) and isinstance(value, dict):
        hints = typing.get_type_hints(annotation)
        return annotation(**{k: _coerce(v, hints.get(k, Any)) for k, v in value.items()})
    if isinstance(value, list):
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_coerce(v, args[0]) for v in value)
            return tuple(_coerce(v, a) for v, a in zip(value, args, strict=False)) if args else tuple(value)
        item = args[0] if args else Any
        items = [_coerce(v, item) for v in value]
        if annotation in (set, frozenset) or origin in (set, frozenset):
            return (frozenset if frozenset in (annotation, origin) else set)(items)
        if annotation is tuple:
            return tuple(items)
        return items
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        return {k: _coerce(v, args[1]) for k, v in value.items()}
    return value


ConfirmationGate = Callable[[dict[str, Any], ToolContext], Any]


class FunctionTool:
    """A tool wrapping a typed Python function (plain or ``async def``).

    Attributes:
        name: The function name the model sees (defaults to ``func.__name__``).
        description: From the docstring's text before its first section, unless given.
        requires_confirmation: Static confirmation gate.
        parallel_safe: Whether calls may run concurrently with neighbours.
        inline: Whether the runtime may run it inside the agent's process.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_confirmation: bool | ConfirmationGate = False,
        parallel_safe: bool = False,
        inline: bool = False,
    ) -> None:
        """Derive the tool from ``func``.

        Args:
            func: The function; every parameter except ``tool_context`` needs a supported annotation.
            name: Overrides the function name.
            description: Overrides the docstring description.
            requires_confirmation: ``True``/``False``, or a gate ``(args, context) -> bool | {"required", "hint"}``.
            parallel_safe: Whether calls may run concurrently.
            inline: Whether the runtime may run it inline.

        Raises:
            ToolError: reason ``invalid_tool`` (not callable, bad flag), ``invalid_tool_name``.
            SchemaError: reason ``unsupported_annotation`` or a compilation reason.
        """
        if not callable(func):
            raise ToolError(
                "FunctionTool needs a callable", reason="invalid_tool", details={"type": type(func).__name__}
            )
        for flag, value in (("parallel_safe", parallel_safe), ("inline", inline)):
            if not isinstance(value, bool):
                raise ToolError("tool flags are bool", reason="invalid_tool", details={"field": flag})
        if not (isinstance(requires_confirmation, bool) or callable(requires_confirmation)):
            raise ToolError(
                "requires_confirmation is a bool or a callable",
                reason="invalid_tool",
                details={"field": "requires_confirmation"},
            )
        self.func = func
        self.name = name if name is not None else getattr(func, "__name__", "")
        try:
            check_function_name(self.name)
        except ContentError:
            raise ToolError("invalid tool name", reason="invalid_tool_name") from None
        summary, arg_docs = parse_docstring(inspect.getdoc(func))
        self.description = description if description is not None else summary
        self.parallel_safe = parallel_safe
        self.inline = inline
        self._gate = requires_confirmation
        self.requires_confirmation = requires_confirmation if isinstance(requires_confirmation, bool) else False
        # An async __call__ makes an async callable object.
        call = getattr(func, "__call__", None)  # noqa: B004 - the method itself, not whether func is callable
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)
        self._context_param: str | None = None
        self._hints: dict[str, Any] = {}
        self._schema = self._derive(arg_docs)
        self._compiled: CompiledSchema = compile_schema(self._schema)

    def _derive(self, arg_docs: Mapping[str, str]) -> dict[str, Any]:
        try:
            signature = inspect.signature(self.func)
            hints = _parameter_hints(self.func)
        except Exception:
            raise SchemaError(
                "function signature cannot be read",
                reason="unsupported_annotation",
                details={"tool": self.name, "rule": "unresolvable_annotation"},
            ) from None
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in signature.parameters.values():
            annotation = hints.get(param.name, param.annotation)
            if param.name == _CONTEXT_PARAM or annotation is ToolContext:
                self._context_param = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise SchemaError(
                    "tool functions take keyword arguments only",
                    reason="unsupported_annotation",
                    details={"tool": self.name, "rule": "parameter_kind"},
                )
            try:
                schema = dict(schema_for_annotation(annotation))
            except SchemaError as exc:
                raise SchemaError(
                    exc.message, reason=exc.reason, details={**exc.details, "tool": self.name, "parameter": param.name}
                ) from None
            if param.name in arg_docs and arg_docs[param.name] and "description" not in schema:
                schema["description"] = arg_docs[param.name]
            if param.default is param.empty:
                required.append(param.name)
            else:
                try:
                    default = param.default.value if isinstance(param.default, enum.Enum) else param.default
                    schema["default"] = copy_json(default)[0]
                except ValidationError:
                    pass  # a non-JSON default still makes the parameter optional; it just is not advertised
            self._hints[param.name] = annotation
            properties[param.name] = schema
        out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            out["required"] = required
        return out

    def schema(self) -> dict[str, Any]:
        """The derived argument JSON Schema (a fresh copy)."""
        schema: dict[str, Any] = copy_json(self._schema)[0]
        return schema

    def require_confirmation(self, args: dict[str, Any], context: ToolContext) -> Any:
        """The confirmation gate: the callable given at construction, else the static flag."""
        if callable(self._gate) and not isinstance(self._gate, bool):
            return self._gate(args, context)
        return self._gate

    def execute(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Validate ``args`` against the derived schema and call the function (awaitable for ``async def``).

        Raises:
            SchemaError: reason ``invalid_arguments``.
            Exception: whatever the function raises.
        """
        validated = self._compiled.validate(args)
        kwargs = {k: _coerce(v, self._hints.get(k, Any)) for k, v in validated.items()}
        if self._context_param is not None:
            kwargs[self._context_param] = context
        return self.func(**kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The derived schema, context parameter and resolved hints travel with the function: a function pickled
        # by value carries only the globals its body uses, so its string annotations could not be resolved again.
        return (
            _restore,
            (
                self.func,
                self.name,
                self.description,
                self._gate,
                self.parallel_safe,
                self.inline,
                self._schema,
                self._context_param,
                self._hints,
            ),
        )


class _Annotations:
    """Just the parameter annotations of a function, for ``typing.get_type_hints``."""

    def __init__(self, annotations: dict[str, Any]) -> None:
        self.__annotations__ = annotations


def _parameter_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The resolved parameter annotations of ``func``; the return annotation is not needed and not resolved (a
    function pickled by value carries only the globals its body uses, so ``-> dict[str, Any]`` under postponed
    annotations could not be resolved in a worker)."""
    target = inspect.unwrap(func)
    annotations = getattr(target, "__annotations__", None)
    if not isinstance(annotations, dict):
        return typing.get_type_hints(func, include_extras=True)
    params = {k: v for k, v in annotations.items() if k != "return"}
    return typing.get_type_hints(
        _Annotations(params), globalns=getattr(target, "__globals__", None), include_extras=True
    )


def _restore(
    func: Callable[..., Any],
    name: str,
    description: str,
    gate: bool | ConfirmationGate,
    parallel_safe: bool,
    inline: bool,
    schema: dict[str, Any],
    context_param: str | None,
    hints: dict[str, Any],
) -> FunctionTool:
    tool = FunctionTool.__new__(FunctionTool)
    tool.func, tool.name, tool.description = func, name, description
    tool.parallel_safe, tool.inline, tool._gate = parallel_safe, inline, gate
    tool.requires_confirmation = gate if isinstance(gate, bool) else False
    tool.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))  # noqa: B004 - an async __call__ makes an async callable object
    tool._context_param, tool._hints, tool._schema = context_param, dict(hints), schema
    tool._compiled = compile_schema(schema)
    return tool
