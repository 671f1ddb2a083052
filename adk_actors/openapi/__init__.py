"""OpenAPI 3.0/3.1 documents compiled into tool declarations (no network here; the transport is separate).

::

    from adk_actors.openapi import compile_openapi

    catalog = compile_openapi(petstore_json, exclude=["uploadFile"])   # ConfigError(reason=...) on bad input
    op = catalog.get("getPetById")
    op.method, op.path, [p.location for p in op.parameters]              # "GET", "/pet/{petId}", ["path"]
    op.declaration()                                                     # a Gemini functionDeclarations entry
"""

from adk_actors.openapi.compile import (
    BODY_ARGUMENT,
    DEFAULT_MAX_OPERATIONS,
    MAX_NAME_CHARS,
    METHODS,
    OpenApiCatalog,
    Operation,
    Parameter,
    RequestBody,
    SecurityRequirement,
    SecurityScheme,
    compile_openapi,
    function_name,
)
from adk_actors.openapi.document import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, DEFAULT_MAX_REF_DEPTH
from adk_actors.openapi.project import DEFAULT_MAX_SCHEMA_NODES

__all__ = [
    "BODY_ARGUMENT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_OPERATIONS",
    "DEFAULT_MAX_REF_DEPTH",
    "DEFAULT_MAX_SCHEMA_NODES",
    "MAX_NAME_CHARS",
    "METHODS",
    "OpenApiCatalog",
    "Operation",
    "Parameter",
    "RequestBody",
    "SecurityRequirement",
    "SecurityScheme",
    "compile_openapi",
    "function_name",
]
