"""OpenAPI compilation on real documents: the Swagger Petstore 3.0 and a 3.1 document.

``specs/petstore3.json`` is the public Swagger Petstore 3.0 definition (swagger-api/swagger-petstore,
``src/main/resources/openapi.yaml``, version 1.0.27, Apache-2.0), converted from YAML to JSON unchanged; it is what
petstore3.swagger.io serves as ``openapi.json``. ``specs/library31.json`` is an OpenAPI 3.1 document written for
these tests (type arrays, ``components.pathItems``, cookie and deepObject parameters, webhooks, server variables).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from adk_actors.content.parts import check_function_name
from adk_actors.errors import ConfigError, SchemaError
from adk_actors.openapi import OpenApiCatalog, Operation, SecurityRequirement, compile_openapi
from adk_actors.schema import compile_schema

SPECS = Path(__file__).parent / "specs"
PETSTORE_TEXT = (SPECS / "petstore3.json").read_text(encoding="utf-8")
LIBRARY_TEXT = (SPECS / "library31.json").read_text(encoding="utf-8")
PETSTORE_IDS = [
    "updatePet",
    "addPet",
    "findPetsByStatus",
    "findPetsByTags",
    "getPetById",
    "updatePetWithForm",
    "deletePet",
    "getInventory",
    "placeOrder",
    "getOrderById",
    "deleteOrder",
    "createUser",
    "createUsersWithListInput",
    "loginUser",
    "logoutUser",
    "getUserByName",
    "updateUser",
    "deleteUser",
]


def petstore() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(PETSTORE_TEXT)
    return doc


@pytest.fixture(scope="module")
def pets() -> OpenApiCatalog:
    return compile_openapi(petstore(), exclude=["uploadFile"])


@pytest.fixture(scope="module")
def library() -> OpenApiCatalog:
    return compile_openapi(LIBRARY_TEXT)


def args_valid(op: Operation, args: Any) -> bool:
    return compile_schema(op.schema).is_valid(args)


def test_petstore_every_operation_becomes_a_named_declaration(pets: OpenApiCatalog) -> None:
    assert pets.names() == tuple(PETSTORE_IDS)
    assert (pets.openapi, pets.title) == ("3.0.4", "Swagger Petstore - OpenAPI 3.0")
    assert pets.servers == ("https://petstore3.swagger.io/api/v3",)
    for op in pets.operations:
        check_function_name(op.name)
        declaration = op.declaration()
        assert declaration["name"] == op.name and declaration["description"]
        assert compile_schema(op.schema).schema == op.schema


def test_petstore_octet_stream_upload_is_refused_naming_the_operation() -> None:
    with pytest.raises(ConfigError) as info:
        compile_openapi(petstore())
    assert info.value.reason == "unsupported_media_type"
    assert info.value.details["operation"] == "POST /pet/{petId}/uploadImage requestBody"
    assert info.value.details["media_types"] == ["application/octet-stream"]


def test_petstore_path_parameter_is_a_required_integer_argument(pets: OpenApiCatalog) -> None:
    op = pets.get("getPetById")
    assert (op.method, op.path, op.body) == ("GET", "/pet/{petId}", None)
    (param,) = op.parameters
    assert (param.name, param.location, param.style, param.explode, param.required) == (
        "petId",
        "path",
        "simple",
        False,
        True,
    )
    assert op.schema["required"] == ["petId"]
    assert op.schema["properties"]["petId"] == {
        "type": "integer",
        "format": "int64",
        "description": "ID of pet to return",
    }
    assert args_valid(op, {"petId": 1})
    assert not args_valid(op, {})
    assert not args_valid(op, {"petId": "1"})
    assert not args_valid(op, {"petId": 1, "Authorization": "Bearer x"})
    assert op.security == (
        SecurityRequirement(schemes=("api_key",), scopes=((),)),
        SecurityRequirement(schemes=("petstore_auth",), scopes=(("write:pets", "read:pets"),)),
    )


def test_petstore_body_takes_json_among_xml_and_form_and_inlines_refs(pets: OpenApiCatalog) -> None:
    op = pets.get("addPet")
    assert op.body is not None and op.body.media_type == "application/json" and op.body.required
    body = op.schema["properties"]["body"]
    assert body["required"] == ["name", "photoUrls"]
    assert body["properties"]["category"]["properties"]["name"] == {"type": "string"}
    assert "xml" not in json.dumps(body) and "$ref" not in json.dumps(body)
    assert op.schema["required"] == ["body"]
    assert args_valid(op, {"body": {"name": "doggie", "photoUrls": []}})
    assert not args_valid(op, {"body": {"name": "doggie"}})
    assert not args_valid(op, {"body": {"name": "doggie", "photoUrls": [], "status": "lost"}})


def test_petstore_optional_body_and_header_and_query_parameters(pets: OpenApiCatalog) -> None:
    order = pets.get("placeOrder")
    assert order.body is not None and not order.body.required and "required" not in order.schema
    delete = pets.get("deletePet")
    assert [(p.name, p.location, p.required) for p in delete.parameters] == [
        ("api_key", "header", False),
        ("petId", "path", True),
    ]
    status = pets.get("findPetsByStatus").parameters[0]
    assert (status.location, status.style, status.explode) == ("query", "form", True)
    assert status.schema["enum"] == ["available", "pending", "sold"]
    assert [s.name for s in pets.security_schemes] == ["api_key", "petstore_auth"]
    api_key = pets.security_schemes[0]
    assert (api_key.type, api_key.location, api_key.parameter_name) == ("apiKey", "header", "api_key")


def test_petstore_text_and_bytes_compile_to_the_same_catalog(pets: OpenApiCatalog) -> None:
    from_text = compile_openapi(PETSTORE_TEXT, exclude=["uploadFile"])
    from_bytes = compile_openapi(PETSTORE_TEXT.encode("utf-8"), exclude=["uploadFile"])
    assert from_text == from_bytes == pets


def test_include_selects_and_unknown_selectors_are_refused() -> None:
    catalog = compile_openapi(petstore(), include=["getPetById", "findPetsByTags"])
    assert catalog.names() == ("findPetsByTags", "getPetById")
    with pytest.raises(ConfigError) as info:
        compile_openapi(petstore(), exclude=["uploadFile", "getPetByld"])
    assert info.value.reason == "unknown_operation" and info.value.details["names"] == ["getPetByld"]


def test_catalog_and_operations_are_frozen(pets: OpenApiCatalog) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        pets.operations = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        pets.get("addPet").path = "/other"  # type: ignore[misc]
    with pytest.raises(ConfigError) as info:
        pets.get("nope")
    assert info.value.reason == "unknown_operation"


def test_31_type_arrays_path_item_refs_and_parameter_styles(library: OpenApiCatalog) -> None:
    assert library.names() == ("listBooks", "addBook", "get_books_isbn", "updateBook", "listLoans", "borrow")
    assert library.servers == ("https://eu.library.example/api/v2",)
    books = library.get("listBooks")
    assert books.schema["properties"]["cursor"] == {"type": ["string", "null"]}
    assert args_valid(books, {"cursor": None}) and not args_valid(books, {"cursor": 3})
    assert books.schema["properties"]["filter"]["properties"]["year"] == {"type": "integer", "exclusiveMinimum": 1400}
    assert not args_valid(books, {"filter": {"year": 1400}})
    assert [(p.name, p.location, p.style) for p in books.parameters] == [
        ("pageSize", "query", "form"),
        ("cursor", "query", "form"),
        ("filter", "query", "deepObject"),
        ("X-Request-Id", "header", "simple"),
    ]
    assert books.ignored_headers == ("Accept",)
    loans = library.get("listLoans")
    assert loans.path == "/members/{memberId}/loans"
    assert [(p.name, p.location, p.style, p.explode) for p in loans.parameters] == [
        ("memberId", "path", "simple", False),
        ("session", "cookie", "form", True),
        ("status", "query", "pipeDelimited", False),
    ]
    assert loans.schema["required"] == ["memberId"]


def test_31_bodies_security_and_ref_description_override(library: OpenApiCatalog) -> None:
    update = library.get("updateBook")
    assert update.body is not None and update.body.media_type == "application/merge-patch+json"
    assert update.schema["required"] == ["isbn", "body"]
    assert update.schema["properties"]["body"]["description"] == "Only the fields to change"
    assert args_valid(update, {"isbn": "9780306406157", "body": {"format": {"kind": "audio", "minutes": 5}}})
    assert not args_valid(update, {"isbn": "9780306406157", "body": {}})
    assert not args_valid(update, {"isbn": "12", "body": {"title": "x"}})
    assert library.get("get_books_isbn").security == ()
    assert library.get("get_books_isbn").operation_id is None
    assert library.get("addBook").security == (
        SecurityRequirement(schemes=("bearer",), scopes=((),)),
        SecurityRequirement(schemes=("libraryKey",), scopes=((),)),
    )
    assert library.get("borrow").security == (SecurityRequirement(schemes=("bearer",), scopes=((),)),)
    bearer = library.security_schemes[0]
    assert (bearer.name, bearer.type, bearer.scheme) == ("bearer", "http", "bearer")


def test_30_nullable_and_boolean_exclusive_bounds_are_normalized() -> None:
    doc = _doc(
        "3.0.3",
        {
            "/n": {
                "get": {
                    "operationId": "n",
                    "parameters": [
                        {"name": "a", "in": "query", "schema": {"type": "string", "nullable": True}},
                        {"name": "b", "in": "query", "schema": {"enum": ["x"], "type": "string", "nullable": True}},
                        {
                            "name": "c",
                            "in": "query",
                            "schema": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 9},
                        },
                    ],
                    "responses": {},
                }
            }
        },
    )
    op = compile_openapi(doc).get("n")
    props = op.schema["properties"]
    assert props["a"] == {"type": ["string", "null"]}
    assert props["b"] == {"type": ["string", "null"], "enum": ["x", None]}
    assert props["c"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 9}
    assert args_valid(op, {"a": None, "b": None, "c": 0.5})
    assert not args_valid(op, {"c": 0})


def _doc(version: str, paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": version, "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def test_yaml_text_needs_pyyaml() -> None:
    text = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n"
    try:
        import yaml  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError) as info:
            compile_openapi(text)
        assert info.value.reason == "yaml_unavailable"
    else:
        assert compile_openapi(text).operations == ()


def test_not_openapi_3_is_refused() -> None:
    for doc in ({"swagger": "2.0", "paths": {}}, {"openapi": "3.2.0", "paths": {}}, {"openapi": 3.0}):
        with pytest.raises(ConfigError) as info:
            compile_openapi(doc)
        assert info.value.reason == "unsupported_openapi_version"
    for bad in ("[1, 2]", b"\xff\xfe{", "{not json"):
        with pytest.raises(ConfigError) as info:
            compile_openapi(bad)
        assert info.value.reason in ("invalid_document", "invalid_json")


def test_schema_errors_are_config_errors_naming_the_operation() -> None:
    doc = _doc(
        "3.1.0",
        {"/r": {"get": {"operationId": "r", "parameters": [{"name": "q", "in": "query", "schema": {"pattern": "("}}]}}},
    )
    with pytest.raises(ConfigError) as info:
        compile_openapi(doc)
    assert info.value.reason == "invalid_schema" and info.value.details["operation"] == "GET /r"
    assert not isinstance(info.value, SchemaError)
