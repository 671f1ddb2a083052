"""OpenAPI 3.0/3.1 documents as agent tools: the compiler, the HTTP transport, the auth broker and the toolset.

::

    from adk_actors.openapi import AuthBroker, StoredCredential, compile_openapi, openapi_toolset

    catalog = compile_openapi(petstore_json, exclude=["uploadFile"])   # ConfigError(reason=...) on bad input
    op = catalog.get("getPetById")
    op.method, op.path, [p.location for p in op.parameters]              # "GET", "/pet/{petId}", ["path"]
    op.declaration()                                                     # a Gemini functionDeclarations entry

    pets = openapi_toolset(catalog, allowed_hosts=["https://petstore3.swagger.io"],
                           auth=AuthBroker({"api_key": StoredCredential(store, "petstore-key")}))
"""

from adk_actors.openapi.broker import (
    AuthBroker,
    ClientCredentials,
    CredentialSource,
    Injection,
    StoredCredential,
    UserAuthorization,
)
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
from adk_actors.openapi.toolset import SAFE_METHODS, OpenApiTool, openapi_toolset
from adk_actors.openapi.transport import HttpRequest, HttpTransport

__all__ = [
    "BODY_ARGUMENT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_OPERATIONS",
    "DEFAULT_MAX_REF_DEPTH",
    "DEFAULT_MAX_SCHEMA_NODES",
    "MAX_NAME_CHARS",
    "METHODS",
    "SAFE_METHODS",
    "AuthBroker",
    "ClientCredentials",
    "CredentialSource",
    "HttpRequest",
    "HttpTransport",
    "Injection",
    "OpenApiCatalog",
    "OpenApiTool",
    "Operation",
    "Parameter",
    "RequestBody",
    "SecurityRequirement",
    "SecurityScheme",
    "StoredCredential",
    "UserAuthorization",
    "compile_openapi",
    "function_name",
    "openapi_toolset",
]
