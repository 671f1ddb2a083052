"""An OpenAPI document as an agent toolset: one tool per operation, sent through an :class:`HttpTransport`.

::

    broker = AuthBroker({"api_key": StoredCredential(store, "petstore-key")})
    pets = openapi_toolset(Path("petstore3.json"), allowed_hosts=["https://petstore3.swagger.io"],
                           auth=broker, exclude=["uploadFile"])
    spawn_agent("pets", model=..., tools=[pets])

The toolset is a snapshot (:meth:`~adk_actors.tools.Toolset.refresh` compiles the source again: a file path is read
again; a catalog stays as it is). Each :class:`OpenApiTool` carries its compiled operation, the transport settings
and the auth broker, so it runs in the node's worker processes like any tool and always makes the request the
model was shown. Every operation's server (or ``server_url``) must be an allowed origin when the toolset is built.
Read-only methods (GET, HEAD, OPTIONS) are parallel-safe unless ``parallel_safe`` says otherwise; runtime policy
and confirmation apply before a request is made.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adk_actors.errors import ConfigError, ToolError
from adk_actors.openapi.broker import AuthBroker
from adk_actors.openapi.compile import OpenApiCatalog, Operation, compile_openapi
from adk_actors.openapi.document import DEFAULT_MAX_BYTES
from adk_actors.openapi.transport import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_S,
    HttpTransport,
    is_forbidden_header,
)
from adk_actors.tools.catalog import Toolset

__all__ = ["SAFE_METHODS", "OpenApiTool", "openapi_toolset"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods whose operations are parallel-safe by default."""
MAX_PREFIX_CHARS = 32

Source = OpenApiCatalog | dict[str, Any] | str | bytes | os.PathLike[str]


class OpenApiTool:
    """One operation as a tool (the ``Tool`` protocol): the model's arguments become one HTTP request."""

    def __init__(
        self,
        operation: Operation,
        transport: HttpTransport,
        auth: AuthBroker | None = None,
        *,
        prefix: str = "",
        requires_confirmation: bool = False,
        parallel_safe: bool | None = None,
    ) -> None:
        self.operation = operation
        self.transport = transport
        self.auth = auth
        self.name = prefix + operation.name
        self.description = operation.description
        self.requires_confirmation = requires_confirmation is True
        self.parallel_safe = operation.method in SAFE_METHODS if parallel_safe is None else parallel_safe is True

    def schema(self) -> dict[str, Any]:
        return self.operation.schema

    def execute(self, args: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """Make the request and return ``{"status", "content_type", "body"}`` (a 4xx/5xx is a result too).

        Raises:
            ToolError: see :meth:`HttpTransport.send`.
        """
        return self.transport.send(self.operation, args, self.auth, context)

    def __repr__(self) -> str:
        return f"OpenApiTool(name={self.name!r}, {self.operation.method} {self.operation.path})"


def _selected(value: bool | Collection[str], key: str, names: dict[str, str]) -> frozenset[str] | bool:
    """``True``/``False``, or the function names a collection of operation names / ``operationId`` s picks."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) or not isinstance(value, Collection) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{key} is a bool or a collection of operation names", reason="invalid_value", details={"key": key}
        )
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ConfigError(
            f"{key} names operations the toolset does not have",
            reason="unknown_operation",
            details={"key": key, "names": unknown[:16]},
        )
    return frozenset(names[v] for v in value)


@dataclass(frozen=True, slots=True)
class _Lister:
    """Compiles the source and makes the tools (a picklable loader for ``Toolset.dynamic``)."""

    source: Any
    include: tuple[str, ...] | None
    exclude: tuple[str, ...]
    transport: HttpTransport
    auth: AuthBroker | None
    prefix: str
    requires_confirmation: bool | frozenset[str]
    parallel_safe: bool | frozenset[str] | None

    def catalog(self) -> OpenApiCatalog:
        if isinstance(self.source, OpenApiCatalog):
            return self.source
        document = self.source
        if isinstance(document, os.PathLike):
            document = _read(Path(document))
        return compile_openapi(document, include=self.include, exclude=self.exclude)

    def __call__(self) -> list[OpenApiTool]:
        return self.tools(self.catalog())

    def tools(self, catalog: OpenApiCatalog) -> list[OpenApiTool]:
        auth = self.auth.bind(catalog.security_schemes) if self.auth is not None else None
        tools = []
        for op in catalog.operations:
            _check_operation(op, self.transport)
            confirm = self.requires_confirmation
            parallel = self.parallel_safe
            tools.append(
                OpenApiTool(
                    op,
                    self.transport,
                    auth,
                    prefix=self.prefix,
                    requires_confirmation=confirm if isinstance(confirm, bool) else op.name in confirm,
                    parallel_safe=parallel if parallel is None or isinstance(parallel, bool) else op.name in parallel,
                )
            )
        return tools


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(DEFAULT_MAX_BYTES + 1)
    except OSError:
        raise ConfigError(
            "the OpenAPI document cannot be read", reason="document_unreadable", details={"file": path.name[:128]}
        ) from None
    return data  # compile_openapi refuses it when over DEFAULT_MAX_BYTES


def _check_operation(op: Operation, transport: HttpTransport) -> None:
    """Refuse an operation that could never be sent: a server outside the allow-list, a header the transport owns."""
    try:
        base = transport.base_url(op)
        transport.check_origin(op, base + "/")
    except ToolError as exc:
        raise ConfigError(
            "the operation's server is not an allowed origin (or give server_url=)",
            reason=exc.reason,
            details=exc.details,
        ) from None
    for param in op.parameters:
        if param.location == "header" and is_forbidden_header(param.name):
            raise ConfigError(
                "the operation declares a header parameter that only the transport may set; exclude the operation",
                reason="forbidden_header",
                details={"operation": op.name, "header": param.name},
            )


def openapi_toolset(
    source: Source,
    *,
    allowed_hosts: Sequence[str],
    server_url: str | None = None,
    auth: AuthBroker | None = None,
    include: Collection[str] | None = None,
    exclude: Collection[str] = (),
    prefix: str = "",
    name: str | None = None,
    requires_confirmation: bool | Collection[str] = False,
    parallel_safe: bool | Collection[str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    verify_tls: bool = True,
    allow_http_loopback: bool = False,
) -> Toolset:
    """A :class:`~adk_actors.tools.Toolset` with one :class:`OpenApiTool` per selected operation.

    Args:
        source: A compiled :class:`OpenApiCatalog`, a decoded document, its JSON/YAML text or bytes, or a path to
            it (``pathlib.Path``; read again by ``refresh()``).
        allowed_hosts: Exact origins requests may go to (see :class:`HttpTransport`).
        server_url: Base URL for every operation instead of the document's servers.
        auth: Credential sources by security scheme name.
        include: Only these operations (function names or ``operationId`` s); not with a catalog.
        exclude: Leave these operations out; not with a catalog.
        prefix: Prepended to every function name (to avoid collisions with other tools).
        name: The toolset's name (default: the document's title, else ``"openapi"``).
        requires_confirmation: Every call (``True``), or calls of the named operations, pause for human approval.
        parallel_safe: ``None``: GET/HEAD/OPTIONS operations are parallel-safe; a bool for all; or the names.
        timeout_s, max_request_bytes, max_response_bytes, verify_tls, allow_http_loopback: the transport's.

    Raises:
        ConfigError: the document does not compile (see :func:`compile_openapi`), ``host_not_allowed`` (an
            operation's server is not in ``allowed_hosts``), ``no_server``, ``invalid_server_url``,
            ``forbidden_header``, ``unknown_security_scheme``, ``unsupported_security_scheme``,
            ``unknown_operation``, ``invalid_allowed_host``, ``insecure_allowed_host``, ``invalid_value``.
        ToolError / SchemaError: a tool the model cannot be shown (a prefixed name too long ...).
    """
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX_CHARS or not (prefix == "" or prefix.isidentifier()):
        raise ConfigError(
            f"prefix must be an identifier of at most {MAX_PREFIX_CHARS} characters",
            reason="invalid_value",
            details={"key": "prefix"},
        )
    if auth is not None and not isinstance(auth, AuthBroker):
        raise ConfigError("auth must be an AuthBroker", reason="invalid_value", details={"key": "auth"})
    if isinstance(source, OpenApiCatalog) and (include is not None or tuple(exclude)):
        raise ConfigError(
            "include/exclude select operations when compiling; a catalog is already compiled",
            reason="invalid_value",
            details={"key": "include"},
        )
    transport = HttpTransport(
        allowed_hosts,
        server_url=server_url,
        timeout_s=timeout_s,
        max_request_bytes=max_request_bytes,
        max_response_bytes=max_response_bytes,
        verify_tls=verify_tls,
        allow_http_loopback=allow_http_loopback,
    )
    include_names = tuple(include) if include is not None else None
    if isinstance(source, dict):
        source = _frozen_copy(source)
    catalog = _Lister(source, include_names, tuple(exclude), transport, auth, prefix, False, None).catalog()
    names = {op.name: op.name for op in catalog.operations}
    names.update({op.operation_id: op.name for op in catalog.operations if op.operation_id})
    lister = _Lister(
        source,
        include_names,
        tuple(exclude),
        transport,
        auth,
        prefix,
        _selected(requires_confirmation, "requires_confirmation", names),
        None if parallel_safe is None else _selected(parallel_safe, "parallel_safe", names),
    )
    toolset_name = (name if name is not None else catalog.title or "openapi")[:64]
    # The catalog just compiled is the first snapshot; refresh() compiles the source again.
    return Toolset(name=toolset_name, tools=tuple(lister.tools(catalog)), loader=lister, late_bound=False)


def _frozen_copy(document: dict[str, Any]) -> dict[str, Any]:
    """A private copy of a decoded document, so a caller's later edits do not change what ``refresh()`` compiles."""
    return copy.deepcopy(document)
