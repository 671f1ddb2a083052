"""Hostile OpenAPI documents: cycles, remote refs, huge and deep documents, hostile names, unsupported constructs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.content.parts import check_function_name
from adk_actors.errors import ConfigError, ValidationError
from adk_actors.openapi import MAX_NAME_CHARS, OpenApiCatalog, compile_openapi, function_name


def _doc(paths: dict[str, Any], version: str = "3.0.3", **components: Any) -> dict[str, Any]:
    return {"openapi": version, "info": {"title": "t", "version": "1"}, "paths": paths, "components": components}


def _get(op_id: str, **fields: Any) -> dict[str, Any]:
    return {"get": {"operationId": op_id, "responses": {}, **fields}}


def _op(op_id: str, **fields: Any) -> dict[str, Any]:
    return {f"/{op_id}": _get(op_id, **fields)}


def _query(schema: Any, name: str = "q") -> list[dict[str, Any]]:
    return [{"name": name, "in": "query", "schema": schema}]


def _reason(doc: Any, **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_openapi(doc, **kwargs)
    return info.value


def test_self_and_indirect_schema_cycles_are_refused() -> None:
    self_ref = _doc(
        _op("tree", parameters=_query({"$ref": "#/components/schemas/Node"})),
        schemas={"Node": {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"}}}},
    )
    err = _reason(self_ref)
    assert err.reason == "ref_cycle" and err.details["operation"] == "GET /tree parameter q"
    indirect = _doc(
        _op("ab", parameters=_query({"$ref": "#/components/schemas/A"})),
        schemas={
            "A": {"items": {"$ref": "#/components/schemas/B"}},
            "B": {"allOf": [{"$ref": "#/components/schemas/A"}]},
        },
    )
    assert _reason(indirect).reason == "ref_cycle"


def test_parameter_and_path_item_reference_cycles_are_refused() -> None:
    params = _doc(
        _op("p", parameters=[{"$ref": "#/components/parameters/A"}]),
        parameters={"A": {"$ref": "#/components/parameters/B"}, "B": {"$ref": "#/components/parameters/A"}},
    )
    assert _reason(params).reason == "ref_cycle"
    items = _doc(
        {"/x": {"$ref": "#/components/pathItems/X"}}, "3.1.0", pathItems={"X": {"$ref": "#/components/pathItems/X"}}
    )
    assert _reason(items).reason == "ref_cycle"


@pytest.mark.parametrize(
    "ref",
    [
        "https://user:secret@evil.example/s.json#/A",
        "other.yaml#/components/schemas/A",
        "//evil.example/x",
        "file:///etc/passwd",
    ],
)
def test_remote_refs_are_refused_and_not_echoed(ref: str) -> None:
    for doc in (
        _doc(_op("s", parameters=_query({"$ref": ref}))),
        _doc(_op("p", parameters=[{"$ref": ref}])),
        _doc({"/x": {"$ref": ref}}),
        _doc(_op("b", requestBody={"$ref": ref})),
    ):
        err = _reason(doc)
        assert err.reason == "remote_ref"
        assert "secret" not in json.dumps(err.to_dict())


def test_dangling_local_ref_is_invalid_ref() -> None:
    assert _reason(_doc(_op("d", parameters=_query({"$ref": "#/components/schemas/Missing"})))).reason == "invalid_ref"


def test_ten_thousand_operations_are_refused_fast() -> None:
    paths = {f"/r{i}": _get(f"op{i}") for i in range(10_000)}
    text = json.dumps(_doc(paths))
    started = time.monotonic()
    err = _reason(text)
    assert time.monotonic() - started < 2.0
    assert err.reason == "limit_exceeded" and err.details["limit"] == "max_operations"
    assert len(compile_openapi(_doc(dict(list(paths.items())[:50]))).operations) == 50


def test_size_and_depth_bounds() -> None:
    err = _reason(json.dumps(_doc({"/a": _get("a", description="x" * 2000)})), max_bytes=1000)
    assert err.reason == "limit_exceeded" and err.details["limit"] == "max_bytes"
    deep = '{"openapi": "3.0.3", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert _reason(deep).reason == "limit_exceeded"
    nested: Any = {}
    for _ in range(300):
        nested = {"n": nested}
    err = _reason({**_doc({}), "x-deep": nested})
    assert err.reason == "limit_exceeded" and err.details["limit"] == "max_depth"


def test_shared_reference_expansion_is_bounded() -> None:
    schemas = {
        f"L{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/L{i + 1}"},
                "b": {"$ref": f"#/components/schemas/L{i + 1}"},
            },
        }
        for i in range(40)
    }
    schemas["L40"] = {"type": "string"}
    started = time.monotonic()
    err = _reason(_doc(_op("bomb", parameters=_query({"$ref": "#/components/schemas/L0"})), schemas=schemas))
    assert time.monotonic() - started < 2.0
    assert err.reason == "limit_exceeded" and err.details["limit"] in ("max_schema_nodes", "max_schema_depth")


def test_hostile_operation_ids_are_sanitized_deterministically() -> None:
    assert function_name("get pet; DROP TABLE pets--", "get", "/p") == "get_pet_DROP_TABLE_pets"
    assert function_name("pétÉ\u202eexe", "get", "/p") == "p_t_exe"
    assert function_name("123abc", "get", "/p") == "op_123abc"
    assert function_name("<script>", "get", "/p") == "script"
    assert function_name("???", "get", "/p") == "op"
    assert function_name(None, "delete", "/users/{id}/keys") == "delete_users_id_keys"
    long_a, long_b = function_name("a" * 500, "get", "/"), function_name("a" * 499 + "b", "get", "/")
    assert len(long_a) == MAX_NAME_CHARS and long_a != long_b and long_a == function_name("a" * 500, "get", "/")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["get", "post"]), st.text(max_size=100))
def test_any_operation_id_gives_a_valid_function_name(operation_id: str, method: str, path: str) -> None:
    check_function_name(function_name(operation_id or None, method, "/" + path))


def test_names_that_sanitize_alike_collide_instead_of_being_renamed() -> None:
    doc = _doc({"/a": _get("get-pet"), "/b": _get("get pet")})
    err = _reason(doc)
    assert err.reason == "duplicate_operation_name"
    assert (err.details["operation"], err.details["other"], err.details["name"]) == ("GET /b", "GET /a", "get_pet")
    assert _reason(_doc({"/a": _get("same"), "/b": _get("same")})).reason == "duplicate_operation_name"
    assert compile_openapi(doc, exclude=["get pet"]).names() == ("get_pet",)


@pytest.mark.parametrize(
    ("param", "reason"),
    [
        ({"name": "X-A\r\nX-Evil: 1", "in": "header", "schema": {}}, "invalid_parameter_name"),
        ({"name": "a=b; c", "in": "cookie", "schema": {}}, "invalid_parameter_name"),
        ({"name": "q\x00", "in": "query", "schema": {}}, "invalid_parameter_name"),
        ({"name": "q" * 200, "in": "query", "schema": {}}, "invalid_parameter_name"),
        ({"name": "q", "in": "body", "schema": {}}, "invalid_parameter"),
        (
            {"name": "q", "in": "query", "content": {"application/json": {"schema": {}}}},
            "unsupported_parameter_content",
        ),
        ({"name": "q", "in": "header", "style": "form", "schema": {}}, "unsupported_parameter_style"),
        ({"name": "q", "in": "query", "schema": {"prefixItems": [{}]}}, "unsupported_schema_keyword"),
        (
            {"name": "q", "in": "query", "schema": {"$id": "https://x/y", "type": "string"}},
            "unsupported_schema_keyword",
        ),
        ({"name": "q", "in": "query", "schema": {"type": "file"}}, "invalid_schema"),
    ],
)
def test_bad_parameters_are_refused_with_a_reason(param: dict[str, Any], reason: str) -> None:
    err = _reason(_doc(_op("op", parameters=[param])))
    assert err.reason == reason
    assert err.details["operation"].startswith("GET /op")


def test_unsupported_operation_constructs_name_the_operation() -> None:
    callbacks = _get("cb", callbacks={"done": {"{$request.body#/url}": {"post": {"responses": {}}}}})
    err = _reason(_doc({"/cb": callbacks}))
    assert (err.reason, err.details["operation"]) == ("unsupported_callbacks", "GET /cb")
    multipart = {"post": {"operationId": "up", "requestBody": {"content": {"multipart/form-data": {"schema": {}}}}}}
    assert _reason(_doc({"/up": multipart})).reason == "unsupported_media_type"
    form = {"post": {"operationId": "f", "requestBody": {"content": {"application/x-www-form-urlencoded": {}}}}}
    assert _reason(_doc({"/f": form})).reason == "unsupported_media_type"


def test_path_templates_and_argument_names_are_checked() -> None:
    path_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    assert _reason(_doc({"/a/{id}": _get("a")})).reason == "invalid_path_template"
    assert _reason(_doc({"/a": _get("a", parameters=[path_param])})).reason == "invalid_path_template"
    assert _reason(_doc({"/a/{id": _get("a")})).reason == "invalid_path_template"
    assert _reason(_doc({"/a?x=1": _get("a")})).reason == "invalid_path"
    assert _reason(_doc({"/é": _get("a")})).reason == "invalid_path"
    clash = [path_param, {"name": "id", "in": "query", "schema": {}}]
    assert _reason(_doc({"/a/{id}": _get("a", parameters=clash)})).reason == "duplicate_argument_name"
    body_clash = {
        "post": {
            "operationId": "b",
            "parameters": _query({}, "body"),
            "requestBody": {"content": {"application/json": {}}},
        }
    }
    assert _reason(_doc({"/b": body_clash})).reason == "duplicate_argument_name"
    undeclared = _get("s", security=[{"nope": []}])
    assert _reason(_doc({"/s": undeclared})).reason == "unknown_security_scheme"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
KEYS = st.sampled_from(
    [
        "$ref",
        "type",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "schema",
        "in",
        "name",
        "content",
        "parameters",
        "requestBody",
        "operationId",
        "style",
        "explode",
        "allOf",
        "oneOf",
        "callbacks",
        "security",
    ]
)
OPENAPI_ISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(
        [
            "query",
            "path",
            "header",
            "cookie",
            "string",
            "object",
            "array",
            "#/components/schemas/A",
            "http://x/y",
            "application/json",
            "/p/{id}",
            "id",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            KEYS | st.sampled_from(["get", "post", "/p", "/p/{id}", "A", "application/json"]), inner, max_size=4
        )
    ),
    max_leaves=40,
)


def _check(doc: Any) -> None:
    try:
        catalog = compile_openapi(doc)
    except (ConfigError, ValidationError) as exc:
        assert exc.reason and isinstance(exc.reason, str)
        json.dumps(exc.to_dict())
        return
    assert isinstance(catalog, OpenApiCatalog)
    for op in catalog.operations:
        op.declaration()


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_random_json_gives_a_catalog_or_a_reasoned_error(doc: Any) -> None:
    _check(doc)
    _check(json.dumps(doc))


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["/p", "/p/{id}", "/q"]), OPENAPI_ISH, max_size=3),
    OPENAPI_ISH,
    st.sampled_from(["3.0.3", "3.1.0"]),
)
def test_random_openapi_shaped_documents_give_a_catalog_or_a_reasoned_error(
    paths: Any, schemas: Any, version: str
) -> None:
    _check({"openapi": version, "paths": paths, "components": {"schemas": {"A": schemas}}})
