"""Compilation of an OpenAPI 3.0/3.1 document into an :class:`OpenApiCatalog` of tool declarations.

Each operation (one path and method) becomes one :class:`Operation`: a function name, a description, the argument
JSON Schema (an object whose properties are the path/query/header/cookie parameters and ``body``), and what a
transport needs to make the request (method, path template, each parameter's location and style, the body's media
type, the security requirements). Nothing here touches the network.

Whatever the compiler cannot represent faithfully (a ``multipart`` body, ``callbacks``, a parameter described by
``content``, a schema keyword outside the projection) is refused with a reason that names the operation; an
application that wants the rest of such a document leaves those operations out with ``exclude=``/``include=``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from adk_actors.errors import ConfigError, SchemaError
from adk_actors.openapi.document import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_REF_DEPTH,
    Document,
    load_document,
)
from adk_actors.openapi.project import DEFAULT_MAX_SCHEMA_NODES, SchemaProjector
from adk_actors.schema import compile_schema, gemini_function_declaration

__all__ = [
    "BODY_ARGUMENT",
    "DEFAULT_MAX_OPERATIONS",
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

Location = Literal["path", "query", "header", "cookie"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
"""The HTTP methods a Path Item may hold, in the order operations are listed."""
BODY_ARGUMENT = "body"
"""The argument that carries the request body."""
DEFAULT_MAX_OPERATIONS = 1000
MAX_NAME_CHARS = 64
"""Gemini's bound on a function name."""
MAX_PARAMETER_NAME_CHARS = 128
MAX_PATH_CHARS = 2048
MAX_DESCRIPTION_CHARS = 4096
MAX_PARAMETERS = 128
MAX_SERVERS = 32

_STYLES: dict[str, tuple[str, ...]] = {
    # location: allowed styles, the default first (OpenAPI 3.x "style" table)
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
"""Header parameters the specification says to ignore: the transport and the auth broker own these."""
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TEMPLATE_VAR = re.compile(r"\{([^{}]*)\}")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")
_JSON_MEDIA = re.compile(r"application/(?:[A-Za-z0-9.+-]+\+)?json")


@dataclass(frozen=True, slots=True, kw_only=True)
class Parameter:
    """One request parameter, as the transport must send it."""

    name: str
    """The parameter's name on the wire (also its argument name)."""
    location: Location
    """Where it goes: ``path``, ``query``, ``header`` or ``cookie``."""
    style: str
    """Serialization style (the location's default when the document names none)."""
    explode: bool
    """Whether arrays/objects are exploded (defaults: ``True`` for ``form``, else ``False``)."""
    allow_reserved: bool
    """Query only: whether reserved characters are sent without percent-encoding."""
    required: bool
    """Whether the argument is required (path parameters always are)."""
    schema: Any
    """The parameter's projected JSON Schema (its argument's schema)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestBody:
    """The request body, sent as the ``body`` argument."""

    media_type: str
    """The chosen JSON media type (``application/json``, ``application/*+json`` or a wildcard)."""
    required: bool
    """Whether ``body`` is a required argument."""
    schema: Any
    """The body's projected JSON Schema."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityRequirement:
    """One alternative of an operation's ``security`` list: all its schemes apply together."""

    schemes: tuple[str, ...]
    """Security scheme names (keys of ``components.securitySchemes``); empty means anonymous access is allowed."""
    scopes: tuple[tuple[str, ...], ...]
    """The scopes each scheme asks for, aligned with :attr:`schemes`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityScheme:
    """A security scheme the document declares (what a transport's auth broker needs, no secret)."""

    name: str
    """Its key in ``components.securitySchemes``."""
    type: str
    """``apiKey``, ``http``, ``oauth2``, ``openIdConnect`` or ``mutualTLS``."""
    location: str | None = None
    """apiKey: ``header``, ``query`` or ``cookie``."""
    parameter_name: str | None = None
    """apiKey: the header/query/cookie name."""
    scheme: str | None = None
    """http: the scheme (``bearer``, ``basic`` ...)."""
    flows: tuple[str, ...] = ()
    """oauth2: the flow names the document declares."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One compiled operation: a tool declaration plus what the transport needs."""

    name: str
    """The function name the model calls (Gemini's rules, at most :data:`MAX_NAME_CHARS`)."""
    operation_id: str | None
    """The document's ``operationId``, if any."""
    method: str
    """Upper-case HTTP method."""
    path: str
    """The path template (``/pet/{petId}``), relative to a server URL."""
    description: str
    """What the operation does (summary and description), for the model."""
    schema: dict[str, Any]
    """The argument JSON Schema; compiles with :func:`adk_actors.schema.compile_schema`."""
    parameters: tuple[Parameter, ...]
    """Path-item and operation parameters, in document order."""
    body: RequestBody | None
    """The request body, if the operation takes one."""
    security: tuple[SecurityRequirement, ...]
    """Alternatives, any one of which suffices; empty: no authentication."""
    servers: tuple[str, ...]
    """Server URLs for this operation (operation, path item or document level, with variables at defaults)."""
    ignored_headers: tuple[str, ...] = ()
    """Header parameters the specification ignores (``Accept``, ``Content-Type``, ``Authorization``)."""
    deprecated: bool = False
    """Whether the document marks the operation deprecated."""

    def declaration(self) -> dict[str, Any]:
        """The Gemini ``functionDeclarations`` entry for this operation."""
        return gemini_function_declaration(self.name, self.description, self.schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenApiCatalog:
    """The operations of one document, by function name."""

    openapi: str
    """The document's OpenAPI version."""
    title: str
    """``info.title``."""
    version: str
    """``info.version``."""
    servers: tuple[str, ...]
    """Document-level server URLs."""
    operations: tuple[Operation, ...]
    """Compiled operations in document order (paths, then methods in :data:`METHODS` order)."""
    security_schemes: tuple[SecurityScheme, ...]
    """Declared security schemes, sorted by name."""

    def names(self) -> tuple[str, ...]:
        """Function names in catalog order."""
        return tuple(op.name for op in self.operations)

    def get(self, name: str) -> Operation:
        """The operation with function name ``name``.

        Raises:
            ConfigError: reason ``unknown_operation``.
        """
        for op in self.operations:
            if op.name == name:
                return op
        raise ConfigError("no such operation", reason="unknown_operation", details={"name": name})

    def declarations(self) -> list[dict[str, Any]]:
        """Gemini function declarations for every operation."""
        return [op.declaration() for op in self.operations]


def function_name(operation_id: str | None, method: str, path: str) -> str:
    """The function name for an operation: from ``operationId``, else from method and path.

    Characters outside ``[A-Za-z0-9_]`` become ``_`` (runs collapse), a leading digit gets an ``op_`` prefix, and
    a name longer than :data:`MAX_NAME_CHARS` is cut and suffixed with a digest of its source, so distinct sources
    stay distinct and the same source always gives the same name.
    """
    source = operation_id if operation_id else f"{method.lower()} {path}"
    name = _NAME_CHARS.sub("_", source).strip("_")
    if not name:
        name = "op"
    if not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        name = "op_" + name
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = name[: MAX_NAME_CHARS - 9].rstrip("_") + "_" + digest
    return name


def _error(reason: str, message: str, where: str, **details: Any) -> ConfigError:
    return ConfigError(message, reason=reason, details={"operation": where, **details})


def _text(value: Any) -> str:
    """A printable, bounded description text (NUL and lone surrogates replaced)."""
    if not isinstance(value, str):
        return ""
    text = value.replace("\x00", "\ufffd")
    text = text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text
    return text.strip()


def _description(op: dict[str, Any], label: str) -> str:
    parts = [t for t in (_text(op.get("summary")), _text(op.get("description"))) if t]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    text = "\n\n".join(parts) or label
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


def _servers(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_SERVERS:
        raise _error("invalid_server", "servers must be a bounded list", where)
    urls = []
    for server in value:
        url = server.get("url") if isinstance(server, dict) else None
        if not isinstance(url, str) or not url.isprintable() or len(url) > MAX_PATH_CHARS:
            raise _error("invalid_server", "a server needs a printable url", where)
        variables = server.get("variables") or {}
        if not isinstance(variables, dict):
            raise _error("invalid_server", "server variables must be an object", where)

        def _default(match: re.Match[str], variables: dict[str, Any] = variables) -> str:
            var = variables.get(match.group(1))
            default = var.get("default") if isinstance(var, dict) else None
            if not isinstance(default, str):
                raise _error("invalid_server", "server variable without a default", where)
            return default

        urls.append(_TEMPLATE_VAR.sub(_default, url))
    return tuple(urls)


def _security(value: Any, schemes: dict[str, SecurityScheme], where: str) -> tuple[SecurityRequirement, ...]:
    if not isinstance(value, list):
        raise _error("invalid_security", "security must be a list", where)
    out = []
    for requirement in value:
        if not isinstance(requirement, dict):
            raise _error("invalid_security", "a security requirement is an object", where)
        names, scopes = [], []
        for name, wanted in requirement.items():
            if name not in schemes:
                raise _error("unknown_security_scheme", "security names an undeclared scheme", where, scheme=name)
            if not isinstance(wanted, list) or not all(isinstance(s, str) for s in wanted):
                raise _error("invalid_security", "security scopes are a list of strings", where, scheme=name)
            names.append(name)
            scopes.append(tuple(wanted))
        out.append(SecurityRequirement(schemes=tuple(names), scopes=tuple(scopes)))
    return tuple(out)


def _security_schemes(doc: Document) -> dict[str, SecurityScheme]:
    components = doc.root.get("components") or {}
    raw = components.get("securitySchemes") if isinstance(components, dict) else None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _error("invalid_security", "securitySchemes must be an object", "components")
    out = {}
    for name in sorted(raw):
        scheme = doc.deref(raw[name], where=f"securitySchemes.{name}")
        kind = scheme.get("type") if isinstance(scheme, dict) else None
        if not isinstance(kind, str):
            raise _error("invalid_security", "a security scheme needs a type", "components", scheme=name)
        flows = scheme.get("flows")
        out[name] = SecurityScheme(
            name=name,
            type=kind,
            location=scheme.get("in") if isinstance(scheme.get("in"), str) else None,
            parameter_name=scheme.get("name") if isinstance(scheme.get("name"), str) else None,
            scheme=scheme.get("scheme") if isinstance(scheme.get("scheme"), str) else None,
            flows=tuple(sorted(flows)) if isinstance(flows, dict) else (),
        )
    return out


def _iter_operations(doc: Document, max_operations: int) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """``(method, path, operation, path_item)`` in document order, counting against ``max_operations`` first."""
    paths = doc.root.get("paths")
    if paths is None and doc.is_31:
        paths = {}
    if not isinstance(paths, dict):
        raise ConfigError("paths must be an object", reason="invalid_document", details={"field": "paths"})
    items: list[tuple[str, dict[str, Any]]] = []
    count = 0
    for path, raw_item in paths.items():
        if path.startswith("x-"):
            continue
        if not path.startswith("/"):
            raise _error("invalid_path", "a path starts with /", path[:MAX_PATH_CHARS])
        item = doc.deref(raw_item, where=path)
        if not isinstance(item, dict):
            raise _error("invalid_operation", "a path item is an object", path)
        count += sum(1 for m in METHODS if m in item)
        if count > max_operations:
            raise ConfigError(
                "OpenAPI document has too many operations",
                reason="limit_exceeded",
                details={"limit": "max_operations", "max": max_operations},
            )
        items.append((path, item))
    for path, item in items:
        for method in METHODS:
            if method in item:
                op = item[method]
                if not isinstance(op, dict):
                    raise _error("invalid_operation", "an operation is an object", f"{method.upper()} {path}")
                yield method, path, op, item


def _check_path(path: str, where: str) -> list[str]:
    if (
        not path.startswith("/")
        or len(path) > MAX_PATH_CHARS
        or not path.isascii()
        or not path.isprintable()
        or any(c in path for c in " ?#\\")
    ):
        raise _error("invalid_path", "path must be a printable ASCII template starting with /", where)
    variables = _TEMPLATE_VAR.findall(path)
    stripped = _TEMPLATE_VAR.sub("", path)
    if "{" in stripped or "}" in stripped or any(not v for v in variables):
        raise _error("invalid_path_template", "path template braces do not pair", where)
    if len(set(variables)) != len(variables):
        raise _error("invalid_path_template", "path template repeats a variable", where)
    return variables


def _check_parameter_name(name: Any, location: str, where: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_PARAMETER_NAME_CHARS
        or not name.isprintable()
        or (location in ("header", "cookie") and not _TOKEN.fullmatch(name))
        or (location == "path" and any(c in name for c in "{}/"))
    ):
        raise _error(
            "invalid_parameter_name",
            "parameter name is empty, too long, not printable or not a valid header/cookie token",
            where,
            location=location,
        )
    return name


class _Compiler:
    def __init__(self, doc: Document, max_schema_nodes: int) -> None:
        self.doc = doc
        self.projector = SchemaProjector(doc, max_nodes=max_schema_nodes)
        self.schemes = _security_schemes(doc)
        self.servers = _servers(doc.root.get("servers"), "servers") or ()
        self.security = _security(doc.root.get("security", []), self.schemes, "security")

    def parameters(self, op: dict[str, Any], item: dict[str, Any], where: str) -> list[dict[str, Any]]:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for level in (item.get("parameters", []), op.get("parameters", [])):
            if not isinstance(level, list) or len(level) > MAX_PARAMETERS:
                raise _error("invalid_parameter", "parameters must be a bounded list", where)
            seen: set[tuple[str, str]] = set()
            for raw in level:
                param = self.doc.deref(raw, where=where)
                if not isinstance(param, dict):
                    raise _error("invalid_parameter", "a parameter is an object", where)
                location = param.get("in")
                if location not in _STYLES:
                    raise _error("invalid_parameter", "parameter location is not path/query/header/cookie", where)
                name = _check_parameter_name(param.get("name"), location, where)
                key = (location, name.lower() if location == "header" else name)
                if key in seen:
                    raise _error("invalid_parameter", "parameter declared twice", where, parameter=name)
                seen.add(key)
                merged[key] = param  # an operation-level parameter overrides the path item's
        return list(merged.values())

    def parameter(self, param: dict[str, Any], where: str) -> Parameter:
        name, location = param["name"], param["in"]
        label = f"{where} parameter {name}"
        if "content" in param:
            raise _error("unsupported_parameter_content", "parameters described by content are not supported", label)
        if "schema" not in param:
            raise _error("invalid_parameter", "a parameter needs a schema", label)
        styles = _STYLES[location]
        style = param.get("style", styles[0])
        if style not in styles:
            raise _error("unsupported_parameter_style", "style not allowed for this location", label, style=style)
        explode = param.get("explode", style == "form")
        allow_reserved = param.get("allowReserved", False)
        required = param.get("required", False)
        if not all(isinstance(v, bool) for v in (explode, allow_reserved, required)):
            raise _error("invalid_parameter", "explode/allowReserved/required must be booleans", label)
        if location == "path" and required is not True:
            raise _error("invalid_parameter", "a path parameter must be required", label)
        schema = self.projector.project(param["schema"], where=label)
        description = _text(param.get("description"))
        if description and isinstance(schema, dict) and "description" not in schema:
            schema = {**schema, "description": description[:MAX_DESCRIPTION_CHARS]}
        return Parameter(
            name=name,
            location=location,
            style=style,
            explode=explode,
            allow_reserved=allow_reserved,
            required=required,
            schema=schema,
        )

    def body(self, op: dict[str, Any], where: str) -> RequestBody | None:
        if "requestBody" not in op:
            return None
        label = f"{where} requestBody"
        body = self.doc.deref(op["requestBody"], where=label)
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, dict) or not content:
            raise _error("invalid_request_body", "a request body needs content", label)
        required = body.get("required", False)
        if not isinstance(required, bool):
            raise _error("invalid_request_body", "required must be a boolean", label)
        media_type = _choose_media_type(list(content))
        if media_type is None:
            raise _error(
                "unsupported_media_type",
                "only JSON request bodies are supported",
                label,
                media_types=sorted(content)[:16],
            )
        media = content[media_type]
        if not isinstance(media, dict):
            raise _error("invalid_request_body", "a media type entry is an object", label)
        schema = self.projector.project(media.get("schema", {}), where=label)
        description = _text(body.get("description"))
        if description and isinstance(schema, dict) and "description" not in schema:
            schema = {**schema, "description": description[:MAX_DESCRIPTION_CHARS]}
        return RequestBody(media_type=media_type, required=required, schema=schema)

    def operation(self, name: str, method: str, path: str, op: dict[str, Any], item: dict[str, Any]) -> Operation:
        where = f"{method.upper()} {path}"
        self.projector.start()
        variables = _check_path(path, where)
        if op.get("callbacks"):
            raise _error("unsupported_callbacks", "callbacks are not supported", where)
        ignored: list[str] = []
        params: list[Parameter] = []
        for raw in self.parameters(op, item, where):
            if raw["in"] == "header" and raw["name"].lower() in _IGNORED_HEADERS:
                ignored.append(raw["name"])
                continue
            params.append(self.parameter(raw, where))
        path_names = sorted(p.name for p in params if p.location == "path")
        if path_names != sorted(variables):
            raise _error(
                "invalid_path_template",
                "path template variables and path parameters differ",
                where,
                template=sorted(variables),
                parameters=path_names,
            )
        body = self.body(op, where)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in params:
            if param.name in properties:
                raise _error(
                    "duplicate_argument_name",
                    "two parameters in different locations share a name",
                    where,
                    argument=param.name,
                )
            properties[param.name] = param.schema
            if param.required:
                required.append(param.name)
        if body is not None:
            if BODY_ARGUMENT in properties:
                raise _error(
                    "duplicate_argument_name", "a parameter is named like the body argument", where, argument="body"
                )
            properties[BODY_ARGUMENT] = body.schema
            if body.required:
                required.append(BODY_ARGUMENT)
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        description = _description(op, where)
        try:
            schema = compile_schema(schema).schema  # type: ignore[assignment]
            gemini_function_declaration(name, description, schema)
        except SchemaError as exc:
            raise _error(exc.reason, "operation schema does not compile", where, **exc.details) from None
        servers = _servers(op.get("servers"), where) or _servers(item.get("servers"), where) or self.servers
        security = _security(op["security"], self.schemes, where) if "security" in op else self.security
        deprecated = op.get("deprecated", False)
        return Operation(
            name=name,
            operation_id=op.get("operationId"),
            method=method.upper(),
            path=path,
            description=description,
            schema=schema,
            parameters=tuple(params),
            body=body,
            security=security,
            servers=servers,
            ignored_headers=tuple(ignored),
            deprecated=deprecated if isinstance(deprecated, bool) else False,
        )


def _choose_media_type(media_types: list[str]) -> str | None:
    def base(media_type: str) -> str:
        return media_type.split(";", 1)[0].strip().lower()

    for wanted in ("application/json",):
        for media_type in media_types:
            if base(media_type) == wanted:
                return media_type
    for media_type in sorted(media_types):
        if _JSON_MEDIA.fullmatch(base(media_type)):
            return media_type
    for media_type in media_types:
        if base(media_type) in ("*/*", "application/*"):
            return media_type
    return None


def _selectors(value: Collection[str] | None, field: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            "operation selectors are a collection of str", reason="invalid_value", details={"field": field}
        )
    return frozenset(value)


def compile_openapi(
    document: dict[str, Any] | str | bytes,
    *,
    include: Collection[str] | None = None,
    exclude: Collection[str] = (),
    max_operations: int = DEFAULT_MAX_OPERATIONS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_ref_depth: int = DEFAULT_MAX_REF_DEPTH,
    max_schema_nodes: int = DEFAULT_MAX_SCHEMA_NODES,
) -> OpenApiCatalog:
    """Compile an OpenAPI 3.0.x/3.1.x document into a catalog of operations.

    Args:
        document: the decoded document, or its JSON text (YAML too when PyYAML is installed).
        include: if given, only these operations (by ``operationId`` or function name) are compiled.
        exclude: operations (by ``operationId`` or function name) left out on purpose.
        max_operations: refuse a document with more operations (counted before any other work).
        max_bytes: refuse a larger document (bytes given, or estimated JSON size of a ``dict``).
        max_depth: refuse deeper nesting in the document.
        max_ref_depth: refuse longer reference chains and deeper nested schema references.
        max_schema_nodes: refuse an operation whose argument schema expands to more nodes.

    Raises:
        ConfigError: the document is malformed, too large, or uses something unsupported; ``reason`` says what
            (``duplicate_operation_name``, ``remote_ref``, ``ref_cycle``, ``limit_exceeded``,
            ``unsupported_media_type``, ``unsupported_callbacks``, ``unsupported_parameter_content``,
            ``unsupported_schema_keyword``, ``yaml_unavailable``, ``unknown_operation`` ...) and ``details``
            name the operation.
    """
    if isinstance(max_operations, bool) or not isinstance(max_operations, int) or max_operations < 1:
        raise ConfigError("limit must be a positive int", reason="invalid_value", details={"field": "max_operations"})
    if isinstance(max_schema_nodes, bool) or not isinstance(max_schema_nodes, int) or max_schema_nodes < 1:
        raise ConfigError("limit must be a positive int", reason="invalid_value", details={"field": "max_schema_nodes"})
    wanted, unwanted = _selectors(include, "include"), _selectors(exclude, "exclude") or frozenset()
    doc = load_document(document, max_bytes=max_bytes, max_depth=max_depth, max_ref_depth=max_ref_depth)
    compiler = _Compiler(doc, max_schema_nodes)
    matched: set[str] = set()
    chosen: list[tuple[str, str, str, dict[str, Any], dict[str, Any]]] = []
    for method, path, op, item in _iter_operations(doc, max_operations):
        operation_id = op.get("operationId")
        if operation_id is not None and (not isinstance(operation_id, str) or not operation_id):
            raise _error("invalid_operation", "operationId must be a non-empty string", f"{method.upper()} {path}")
        name = function_name(operation_id, method, path)
        keys = {name} | ({operation_id} if operation_id else set())
        matched |= keys & ((wanted or frozenset()) | unwanted)
        if (wanted is not None and not keys & wanted) or keys & unwanted:
            continue
        chosen.append((name, method, path, op, item))
    unknown = ((wanted or frozenset()) | unwanted) - matched
    if unknown:
        raise ConfigError(
            "include/exclude name operations the document does not have",
            reason="unknown_operation",
            details={"names": sorted(unknown)[:16]},
        )
    owners: dict[str, str] = {}
    for name, method, path, _, _ in chosen:
        where = f"{method.upper()} {path}"
        if name in owners:
            raise _error(
                "duplicate_operation_name",
                "two operations get the same function name; give them distinct operationIds",
                where,
                name=name,
                other=owners[name],
            )
        owners[name] = where
    operations = tuple(compiler.operation(name, method, path, op, item) for name, method, path, op, item in chosen)
    info = doc.root.get("info")
    info = info if isinstance(info, dict) else {}
    return OpenApiCatalog(
        openapi=doc.version,
        title=_text(info.get("title"))[:256],
        version=_text(info.get("version"))[:64],
        servers=compiler.servers,
        operations=operations,
        security_schemes=tuple(compiler.schemes.values()),
    )
