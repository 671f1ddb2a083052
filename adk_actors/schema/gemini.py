"""The Gemini projection of a tool's JSON Schema: legacy ``parameters`` or ``parametersJsonSchema``.

Gemini has two mutually exclusive function-parameter fields. The legacy ``parameters`` Schema object is emitted
only for a deliberately small positive subset (an ``object`` at the top, lowercase JSON Schema types that map to
``STRING NUMBER INTEGER BOOLEAN ARRAY OBJECT``, and only the keywords below); anything else — ``oneOf``,
``additionalProperties``, type unions, boolean subschemas, ``$ref``, unknown keywords — is sent unchanged as
``parametersJsonSchema``. Local validation always uses the full JSON Schema either way.
"""

from __future__ import annotations

from typing import Any, Literal

from adk_actors.content.canonical import check_json_safe
from adk_actors.content.parts import check_function_name
from adk_actors.errors import ContentError, SchemaError, ValidationError
from adk_actors.schema.compiler import JsonSchema, compile_schema

__all__ = ["LEGACY_KEYWORDS", "LEGACY_TYPES", "gemini_function_declaration", "gemini_parameters", "legacy_schema"]

LEGACY_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
        "default",
        "example",
    }
)
LEGACY_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object"})
_COUNTS = frozenset({"minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength"})
_TEXTS = frozenset({"format", "title", "description", "pattern"})
MAX_DESCRIPTION_CHARS = 16 * 1024


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_str_list(value: Any, *, non_empty: bool = False) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and (bool(value) or not non_empty)


def legacy_schema(schema: Any) -> dict[str, Any] | None:
    """Translate ``schema`` to Gemini's legacy Schema object, or return ``None`` if it is outside the subset.

    Types are uppercased recursively; everything else is copied as is.
    """
    if not isinstance(schema, dict) or not set(schema) <= LEGACY_KEYWORDS:
        return None
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            if not isinstance(value, str) or value not in LEGACY_TYPES:
                return None
            out[key] = value.upper()
        elif key == "properties":
            if not isinstance(value, dict):
                return None
            props: dict[str, Any] = {}
            for name, sub in value.items():
                converted = legacy_schema(sub)
                if converted is None:
                    return None
                props[name] = converted
            out[key] = props
        elif key == "items":
            converted = legacy_schema(value)
            if converted is None:
                return None
            out[key] = converted
        elif key == "anyOf":
            if not isinstance(value, list) or not value:
                return None
            branches = [legacy_schema(sub) for sub in value]
            if any(b is None for b in branches):
                return None
            out[key] = branches
        elif key in ("required", "propertyOrdering"):
            if not _is_str_list(value):
                return None
            out[key] = list(value)
        elif key == "enum":
            if not _is_str_list(value, non_empty=True):
                return None
            out[key] = list(value)
        elif key in _COUNTS:
            if not _is_count(value):
                return None
            out[key] = value
        elif key in ("minimum", "maximum"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            out[key] = value
        elif key in _TEXTS:
            if not isinstance(value, str):
                return None
            out[key] = value
        elif key == "nullable":
            if not isinstance(value, bool):
                return None
            out[key] = value
        else:  # default, example: arbitrary JSON values
            out[key] = value
    return out


def gemini_parameters(schema: Any) -> tuple[Literal["parameters", "parametersJsonSchema"], Any]:
    """Choose the Gemini parameter field for a tool schema and project the schema onto it.

    Returns:
        ``("parameters", legacy_schema)`` for an ``object`` schema inside the accepted subset, else
        ``("parametersJsonSchema", normalized_schema)`` with the schema unchanged.

    Raises:
        SchemaError: the schema does not normalize or compile.
    """
    normalized: JsonSchema = compile_schema(schema).schema
    if isinstance(normalized, dict) and normalized.get("type") == "object":
        legacy = legacy_schema(normalized)
        if legacy is not None:
            return "parameters", legacy
    return "parametersJsonSchema", normalized


def _is_json_text(text: str) -> bool:
    try:
        check_json_safe(text)
    except ValidationError:
        return False
    return True


def gemini_function_declaration(name: str, description: str, schema: Any = None) -> dict[str, Any]:
    """Build one Gemini ``functionDeclarations`` entry in camelCase wire form.

    Args:
        name: the function name (letter or ``_`` first, then ``[A-Za-z0-9_.:-]``, at most 128 characters).
        description: what the function does, for the model.
        schema: the argument JSON Schema; ``None`` declares a function without parameters.

    Returns:
        ``{"name", "description", "parameters": ...}`` or ``{"name", "description", "parametersJsonSchema": ...}``
        (neither key when ``schema`` is ``None``).

    Raises:
        SchemaError: reason ``invalid_function_name``, ``invalid_description`` or a compilation reason.
    """
    try:
        check_function_name(name)
    except ContentError:
        raise SchemaError("invalid function name", reason="invalid_function_name") from None
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS or not _is_json_text(description):
        raise SchemaError(
            "description must be a bounded str without NUL or lone surrogates",
            reason="invalid_description",
            details={"max_chars": MAX_DESCRIPTION_CHARS, "type": type(description).__name__},
        )
    declaration: dict[str, Any] = {"name": name, "description": description}
    if schema is not None:
        key, projected = gemini_parameters(schema)
        declaration[key] = projected
    return declaration
