"""Schema normalization, cached compilation, strict validation and the Gemini parameter projection."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.content import MAX_JSON_DEPTH, canonical_dumps
from adk_actors.errors import SchemaError
from adk_actors.schema import (
    MAX_SCHEMA_BYTES,
    clear_schema_cache,
    compile_schema,
    gemini_function_declaration,
    gemini_parameters,
    normalize_schema,
    schema_cache_size,
    schema_digest,
)

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"]}


def test_compiled_once_per_schema_digest() -> None:
    clear_schema_cache()
    first = compile_schema(WEATHER)
    reordered = {"required": ["city"], "properties": {"city": {"minLength": 1, "type": "string"}}, "type": "object"}
    assert compile_schema(reordered) is first
    assert schema_cache_size() == 1
    assert first.digest == schema_digest(WEATHER)
    compile_schema({"type": "object"})
    assert schema_cache_size() == 2


def test_validate_returns_private_copy() -> None:
    args = {"city": "Oslo"}
    out = compile_schema(WEATHER).validate(args)
    assert out == args and out is not args


@pytest.mark.parametrize(
    ("args", "path", "rule"),
    [
        ({}, "$", "required"),
        ({"city": 3}, "$.city", "type"),
        ({"city": ""}, "$.city", "minLength"),
        ([], "$", "type"),
    ],
)
def test_invalid_arguments_report_structure_only(args: Any, path: str, rule: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(WEATHER).validate(args)
    assert info.value.reason == "invalid_arguments"
    assert info.value.details == {"field": "args", "path": path, "rule": rule}


def test_invalid_value_is_never_reflected() -> None:
    secret = "hunter2-very-secret"
    schemas: list[dict[str, Any]] = [
        {"type": "object", "additionalProperties": False},
        {"type": "object", "properties": {"x": {"enum": ["a"]}}},
        {"type": "object", "properties": {"x": {"pattern": "^a$"}}},
        {"type": "object", "properties": {"x": {"const": "a"}}},
        {"type": "object", "properties": {"x": {"type": "integer"}}},
        {"type": "object", "properties": {"x": {"maxLength": 2}}},
        {"type": "object", "properties": {"x": {"format": "email"}}},
    ]
    for schema in schemas:
        with pytest.raises(SchemaError) as info:
            compile_schema(schema).validate({"x": secret, secret: 1} if "additional" in str(schema) else {"x": secret})
        text = f"{info.value} {info.value!r} {info.value.details} {info.value.to_dict()}"
        assert secret not in text


@pytest.mark.parametrize("args", [{"x": float("nan")}, {"x": "\x00"}, {"x": object()}, {1: 2}])
def test_non_json_arguments_are_rejected(args: Any) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema({"type": "object"}).validate(args)
    assert info.value.reason == "invalid_arguments"


def test_defaults_are_not_injected() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 3}}}
    assert compile_schema(schema).validate({}) == {}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "nope"}, "invalid_schema"),
        ({"properties": 3}, "invalid_schema"),
        ({"pattern": "("}, "invalid_schema"),
        ({"minLength": "a"}, "invalid_schema"),
        ([], "invalid_schema"),
        ("object", "invalid_schema"),
        ({"type": "number", "maximum": float("inf")}, "invalid_schema"),
        ({"$ref": "https://example.com/schema.json"}, "remote_ref"),
        ({"properties": {"a": {"$ref": "file:///etc/passwd"}}}, "remote_ref"),
        ({"$id": "https://example.com/root.json", "properties": {"a": {"$ref": "other.json"}}}, "remote_ref"),
    ],
)
def test_invalid_schemas_are_rejected(schema: Any, reason: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema)
    assert info.value.reason == reason


def test_local_refs_and_boolean_schemas_compile() -> None:
    schema = {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    compiled = compile_schema(schema)
    assert compiled.is_valid({"a": 1}) and not compiled.is_valid({"a": "x"})
    assert compile_schema(True).is_valid({"anything": [1]})
    assert not compile_schema(False).is_valid({})


def test_oversized_schema_is_rejected() -> None:
    schema = {"type": "object", "description": "x" * (256 * 1024)}
    with pytest.raises(SchemaError) as info:
        compile_schema(schema)
    assert info.value.reason == "limit_exceeded"


def _schema_of_size(size: int) -> dict[str, Any]:
    base = {"type": "object", "description": ""}
    padding = size - len(canonical_dumps(base).encode("utf-8"))
    schema = {"type": "object", "description": "x" * padding}
    assert len(canonical_dumps(schema).encode("utf-8")) == size
    return schema


def test_schema_size_limit_is_inclusive() -> None:
    assert MAX_SCHEMA_BYTES == 256 * 1024
    assert compile_schema(_schema_of_size(MAX_SCHEMA_BYTES)).is_valid({})
    assert normalize_schema(_schema_of_size(MAX_SCHEMA_BYTES)) == _schema_of_size(MAX_SCHEMA_BYTES)
    with pytest.raises(SchemaError) as info:
        compile_schema(_schema_of_size(MAX_SCHEMA_BYTES + 1))
    assert info.value.reason == "limit_exceeded"
    assert info.value.details["max"] == MAX_SCHEMA_BYTES and info.value.details["size"] == MAX_SCHEMA_BYTES + 1


def _nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _ in range(levels - 1):
        schema = {"not": schema}
    return schema


def test_schema_depth_limit_is_inclusive() -> None:
    assert normalize_schema(_nested_schema(MAX_JSON_DEPTH))
    with pytest.raises(SchemaError) as info:
        normalize_schema(_nested_schema(MAX_JSON_DEPTH + 1))
    assert info.value.reason == "limit_exceeded" and info.value.details["max"] == MAX_JSON_DEPTH


def test_argument_depth_limit_is_inclusive() -> None:
    def nested(levels: int) -> Any:
        value: Any = []
        for _ in range(levels - 1):
            value = [value]
        return value

    compiled = compile_schema({"type": "array"})
    assert compiled.validate(nested(MAX_JSON_DEPTH)) == nested(MAX_JSON_DEPTH)
    with pytest.raises(SchemaError) as info:
        compiled.validate(nested(MAX_JSON_DEPTH + 1))
    assert info.value.reason == "invalid_arguments" and info.value.details["rule"] == "limit_exceeded"


SECRET_KEY = "sk-SECRET-0123456789abcdef"


@pytest.mark.parametrize(
    ("schema", "args", "path"),
    [
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {SECRET_KEY: "x"}, "$.<key#0>"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": 1, SECRET_KEY: "x"}, "$.<key#1>"),
        (
            {"type": "object", "patternProperties": {"^sk-": {"type": "integer"}}},
            {"b": 1, SECRET_KEY: "x"},
            "$.<key#1>",
        ),
        (
            {"type": "object", "properties": {"city": {"type": "object", "additionalProperties": {"type": "string"}}}},
            {"city": {SECRET_KEY: 3}},
            "$.city.<key#0>",
        ),
        (
            {
                "type": "array",
                "items": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            },
            [{}, {"x": [], SECRET_KEY: ["a", 1]}],
            "$[1].<key#1>[1]",
        ),
        ({"type": "object", "propertyNames": {"maxLength": 3}}, {SECRET_KEY: 1}, "$"),
        ({"type": "object"}, {"ok": 1, SECRET_KEY: float("nan")}, "$.<key#1>"),
        ({"type": "object"}, {"ok": 1, SECRET_KEY: {"x": "\ud800"}}, "$.<key#1>.<key#0>"),
        ({"type": "object"}, {"ok": 1, SECRET_KEY + "\x00": 1}, "$.<key#1>"),
    ],
)
def test_error_paths_never_echo_caller_supplied_keys(schema: Any, args: Any, path: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema).validate(args)
    assert info.value.reason == "invalid_arguments"
    assert info.value.details["path"] == path
    text = f"{info.value} {info.value!r} {info.value.details} {info.value.to_dict()}"
    assert SECRET_KEY not in text and "SECRET" not in text


def test_declared_property_names_stay_readable_in_paths() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer"}}}}
        },
    }
    with pytest.raises(SchemaError) as info:
        compile_schema(schema).validate({"items": [{"qty": 1}, {"qty": "two"}]})
    assert info.value.details["path"] == "$.items[1].qty"


@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb"])
def test_lone_surrogates_in_schemas_and_descriptions_are_schema_errors(bad: str) -> None:
    with pytest.raises(SchemaError) as info:
        gemini_function_declaration("f", bad, WEATHER)
    assert info.value.reason == "invalid_description"
    for schema in (
        {"type": "object", "description": bad},
        {"type": "object", "properties": {bad: {}}},
        {"enum": [bad]},
    ):
        with pytest.raises(SchemaError) as info:
            compile_schema(schema)
        assert info.value.reason == "invalid_schema"
        with pytest.raises(SchemaError):
            schema_digest(schema)
    with pytest.raises(SchemaError) as info:
        compile_schema({"type": "object"}).validate({bad: 1})
    assert info.value.reason == "invalid_arguments" and info.value.details["rule"] == "invalid_json"


def test_compiled_schema_pickles() -> None:
    compiled = compile_schema(WEATHER)
    clone = pickle.loads(pickle.dumps(compiled))
    assert clone == compiled
    assert clone.validate({"city": "x"}) == {"city": "x"}


OBJ = "object"
PROJECTION_TABLE: list[tuple[str, Any, str]] = [
    ("simple object", WEATHER, "parameters"),
    ("empty object", {"type": OBJ}, "parameters"),
    (
        "nested arrays and objects",
        {
            "type": OBJ,
            "properties": {
                "tags": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"k": {"type": "string", "enum": ["a", "b"]}}},
                    "minItems": 1,
                }
            },
        },
        "parameters",
    ),
    (
        "numbers with bounds",
        {
            "type": OBJ,
            "properties": {
                "n": {"type": "number", "minimum": 0, "maximum": 1.5},
                "i": {"type": "integer", "format": "int32"},
            },
        },
        "parameters",
    ),
    (
        "anyOf of accepted",
        {"type": OBJ, "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
        "parameters",
    ),
    (
        "metadata keywords",
        {
            "type": OBJ,
            "title": "T",
            "description": "D",
            "propertyOrdering": ["a"],
            "properties": {"a": {"type": "boolean", "default": False, "example": True, "nullable": True}},
            "minProperties": 0,
            "maxProperties": 3,
        },
        "parameters",
    ),
    (
        "string bounds",
        {"type": OBJ, "properties": {"s": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"}}},
        "parameters",
    ),
    (
        "oneOf",
        {"type": OBJ, "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
        "parametersJsonSchema",
    ),
    ("additionalProperties", {"type": OBJ, "additionalProperties": False}, "parametersJsonSchema"),
    ("type union", {"type": OBJ, "properties": {"v": {"type": ["string", "null"]}}}, "parametersJsonSchema"),
    ("top-level type union", {"type": [OBJ, "null"]}, "parametersJsonSchema"),
    ("boolean subschema", {"type": OBJ, "properties": {"v": True}}, "parametersJsonSchema"),
    ("boolean items", {"type": OBJ, "properties": {"v": {"type": "array", "items": False}}}, "parametersJsonSchema"),
    ("top-level true", True, "parametersJsonSchema"),
    ("top-level false", False, "parametersJsonSchema"),
    ("unknown keyword", {"type": OBJ, "x-custom": 1}, "parametersJsonSchema"),
    ("const", {"type": OBJ, "properties": {"v": {"const": "a"}}}, "parametersJsonSchema"),
    (
        "$ref",
        {"type": OBJ, "$defs": {"a": {"type": "string"}}, "properties": {"v": {"$ref": "#/$defs/a"}}},
        "parametersJsonSchema",
    ),
    ("null type", {"type": OBJ, "properties": {"v": {"type": "null"}}}, "parametersJsonSchema"),
    (
        "non-string enum",
        {"type": OBJ, "properties": {"v": {"type": "integer", "enum": [1, 2]}}},
        "parametersJsonSchema",
    ),
    (
        "exclusiveMinimum",
        {"type": OBJ, "properties": {"v": {"type": "number", "exclusiveMinimum": 0}}},
        "parametersJsonSchema",
    ),
    ("top-level not object", {"type": "string"}, "parametersJsonSchema"),
    ("no type at top", {"properties": {"a": {"type": "string"}}}, "parametersJsonSchema"),
    ("patternProperties", {"type": OBJ, "patternProperties": {"^a": {"type": "string"}}}, "parametersJsonSchema"),
    ("allOf", {"type": OBJ, "allOf": [{"type": OBJ}]}, "parametersJsonSchema"),
    ("$schema", {"$schema": "http://json-schema.org/draft-07/schema#", "type": OBJ}, "parametersJsonSchema"),
]


@pytest.mark.parametrize(("label", "schema", "field"), PROJECTION_TABLE, ids=[row[0] for row in PROJECTION_TABLE])
def test_gemini_projection_table(label: str, schema: Any, field: str) -> None:
    key, projected = gemini_parameters(schema)
    assert key == field
    if field == "parametersJsonSchema":
        assert projected == schema
    declaration = gemini_function_declaration("tool_x", "does x", schema)
    assert set(declaration) == {"name", "description", field}


def test_legacy_projection_uppercases_types_recursively() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "v": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        },
        "required": ["tags"],
    }
    assert gemini_function_declaration("f", "d", schema) == {
        "name": "f",
        "description": "d",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
                "v": {"anyOf": [{"type": "INTEGER"}, {"type": "BOOLEAN"}]},
            },
            "required": ["tags"],
        },
    }
    assert schema["type"] == "object"


def test_declaration_without_schema_and_bad_names() -> None:
    assert gemini_function_declaration("f", "d") == {"name": "f", "description": "d"}
    for bad in ("", "1abc", "a b", "x" * 129):
        with pytest.raises(SchemaError) as info:
            gemini_function_declaration(bad, "d", WEATHER)
        assert info.value.reason == "invalid_function_name"
    with pytest.raises(SchemaError):
        gemini_function_declaration("f", 3, WEATHER)  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        gemini_function_declaration("f", "d", {"type": "bogus"})


keywords = st.sampled_from(
    [
        "type",
        "properties",
        "items",
        "required",
        "enum",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "additionalProperties",
        "$ref",
        "format",
        "const",
        "minItems",
        "uniqueItems",
        "if",
        "then",
        "else",
        "dependencies",
        "patternProperties",
        "$defs",
        "definitions",
        "x-any",
        "$id",
        "contains",
        "propertyNames",
        "multipleOf",
        "exclusiveMinimum",
        "default",
    ]
)
# Lone surrogates and huge integers are drawn explicitly (the default text strategy never yields surrogates).
odd_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=4) | st.sampled_from(
    ["\ud800", "x\udfff", "\x00"]
)
huge_ints = st.builds(lambda e, sign: sign * 10**e, st.sampled_from([309, 400, 5000]), st.sampled_from([1, -1]))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        [
            "string",
            "object",
            "array",
            "integer",
            "number",
            "null",
            "boolean",
            "#",
            "#/a",
            "#/$defs/x",
            "^a+$",
            "(",
            "email",
            "date-time",
            "x",
        ]
    )
    | huge_ints
    | odd_text
)
schemas = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(keywords | st.text(max_size=4) | odd_text, inner, max_size=4)
    ),
    max_leaves=16,
)
data = st.recursive(
    st.none() | st.booleans() | st.integers() | huge_ints | st.floats() | st.text(max_size=6) | odd_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4) | odd_text, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(schemas, data)
def test_schema_compilation_and_validation_raise_only_schema_errors(schema: Any, value: Any) -> None:
    try:
        compiled = compile_schema(schema)
    except SchemaError:
        return
    try:
        compiled.validate(value)
    except SchemaError as exc:
        assert exc.reason == "invalid_arguments"
    gemini_parameters(compiled.schema)
