"""JSON Schema normalization, compilation with fastjsonschema (cached per process) and strict validation."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import fastjsonschema

from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.errors import SchemaError

__all__ = [
    "MAX_SCHEMA_BYTES",
    "CompiledSchema",
    "JsonSchema",
    "clear_schema_cache",
    "compile_schema",
    "normalize_schema",
    "schema_cache_size",
    "schema_digest",
]

JsonSchema: TypeAlias = dict[str, Any] | bool
MAX_SCHEMA_BYTES = 256 * 1024
"""Canonical JSON size bound for one schema; tool schemas are small and compilation cost grows with size."""
MAX_CACHED_SCHEMAS = 4096
MAX_PATH_CHARS = 256


def _refuse_remote(uri: str) -> Any:
    # Compiling a schema must never touch the network or the filesystem.
    raise SchemaError("remote $ref is not allowed", reason="remote_ref")


class _NoRemoteHandlers(dict[str, Callable[[str], Any]]):
    """A handler map claiming every URI scheme, so fastjsonschema never falls back to ``urlopen``."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Callable[[str], Any]:
        return _refuse_remote


def _check_refs(schema: Any) -> None:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                raise SchemaError("only local $ref values are allowed", reason="remote_ref")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def normalize_schema(schema: Any) -> JsonSchema:
    """Return a private, JSON-safe copy of a JSON Schema (object or boolean) with only local ``$ref`` values.

    Raises:
        SchemaError: reason ``invalid_schema`` (not an object/boolean, not JSON-safe), ``limit_exceeded``
            (deeper than 64 or larger than ``MAX_SCHEMA_BYTES``) or ``remote_ref``.
    """
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, dict):
        raise SchemaError(
            "a JSON Schema is an object or a boolean", reason="invalid_schema", details={"type": type(schema).__name__}
        )
    try:
        copied, _ = copy_json(
            schema, error=SchemaError, field="schema", max_bytes=MAX_SCHEMA_BYTES, limit_name="max_schema_bytes"
        )
    except SchemaError as exc:
        if exc.reason == "limit_exceeded":
            raise
        raise SchemaError("schema is not JSON-safe", reason="invalid_schema", details=exc.details) from None
    _check_refs(copied)
    return copied


def schema_digest(schema: JsonSchema) -> str:
    """SHA-256 hex digest of the schema's canonical JSON (the compile-cache key).

    Raises:
        SchemaError: reason ``invalid_schema`` when the schema is not JSON-safe.
    """
    try:
        text = canonical_dumps(schema)
    except Exception:
        raise SchemaError("schema is not JSON-safe", reason="invalid_schema") from None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _declared_names(schema: Any) -> frozenset[str]:
    """Every property name the schema itself declares (``properties`` keys and ``required`` entries)."""
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(k for k in props if isinstance(k, str))
            required = node.get("required")
            if isinstance(required, list):
                names.update(k for k in required if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(names)


def _format_path(path: Any, value: Any, declared: frozenset[str]) -> str:
    """The failing location as ``$.name[0].<key#2>``, never echoing a key the caller supplied.

    A key the schema declares (``properties``/``required``) is shown by name, because it comes from the schema;
    any other key is shown as ``<key#N>``, its position among the keys of its object in ``value``.
    """
    out, node = "$", value
    for item in list(path or [])[1:]:
        if isinstance(node, list | tuple):
            try:
                index = int(item)
                node = node[index]
            except (TypeError, ValueError, IndexError):
                out, node = out + "[?]", None
                continue
            out += f"[{index}]"
        elif isinstance(node, dict) and isinstance(item, str) and item in node:
            out += f".{item}" if item in declared else f".<key#{list(node).index(item)}>"
            node = node[item]
        else:
            out, node = out + ".<key>", None
    return out if len(out) <= MAX_PATH_CHARS else out[:MAX_PATH_CHARS] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledSchema:
    """A normalized schema with its compiled validator; pickles by schema and recompiles on arrival."""

    schema: JsonSchema
    """The normalized schema."""
    digest: str
    """SHA-256 of the schema's canonical JSON."""
    _validator: Callable[[Any], Any] = field(repr=False, compare=False)
    _declared: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (compile_schema, (self.schema,))

    def validate(self, value: Any, *, field: str = "args") -> Any:
        """Validate ``value`` and return a private, JSON-safe copy of it.

        The error never reflects the invalid value: ``details`` hold only the JSON path and the failed rule.
        The path names only keys the schema declares; any other key appears as ``<key#N>`` (its position in
        its object), so a caller-supplied key (perhaps a secret) is never echoed.

        Raises:
            SchemaError: reason ``invalid_arguments`` with ``details`` ``{"field", "path", "rule"}``.
        """
        try:
            copied, _ = copy_json(value, error=SchemaError, field=field)
        except SchemaError as exc:
            raise SchemaError(
                "arguments are not JSON-safe",
                reason="invalid_arguments",
                details={"field": field, "path": exc.details.get("path", "$"), "rule": exc.reason},
            ) from None
        try:
            self._validator(copied)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise SchemaError(
                "arguments do not match the schema",
                reason="invalid_arguments",
                details={
                    "field": field,
                    "path": _format_path(exc.path, value, self._declared),
                    "rule": str(exc.rule or "schema"),
                },
            ) from None
        except Exception as exc:
            raise SchemaError(
                "arguments could not be validated",
                reason="invalid_arguments",
                details={"field": field, "path": "$", "rule": "internal", "error": type(exc).__name__},
            ) from None
        return copied

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` validates."""
        try:
            self.validate(value)
        except SchemaError:
            return False
        return True


_cache: OrderedDict[str, CompiledSchema] = OrderedDict()
_cache_lock = threading.Lock()


def compile_schema(schema: Any) -> CompiledSchema:
    """Normalize and compile ``schema``; compiled once per process and reused by digest.

    Raises:
        SchemaError: reason ``invalid_schema`` (``details["error"]`` is the compiler's exception class name),
            ``remote_ref`` or ``limit_exceeded``.
    """
    normalized = normalize_schema(schema)
    digest = schema_digest(normalized)
    with _cache_lock:
        hit = _cache.get(digest)
        if hit is not None:
            _cache.move_to_end(digest)
            return hit
    try:
        validator = fastjsonschema.compile(normalized, handlers=_NoRemoteHandlers(), use_default=False)
    except SchemaError:
        raise
    except Exception as exc:
        # fastjsonschema reports malformed schemas through many exception types (definition errors, regex
        # errors, attribute/type errors from its code generator); all mean the same thing to a caller.
        raise SchemaError(
            "schema does not compile", reason="invalid_schema", details={"error": type(exc).__name__}
        ) from None
    compiled = CompiledSchema(
        schema=normalized, digest=digest, _validator=validator, _declared=_declared_names(normalized)
    )
    with _cache_lock:
        _cache[digest] = compiled
        while len(_cache) > MAX_CACHED_SCHEMAS:
            _cache.popitem(last=False)
    return compiled


def schema_cache_size() -> int:
    """How many compiled schemas this process holds."""
    with _cache_lock:
        return len(_cache)


def clear_schema_cache() -> None:
    """Drop every compiled schema (tests use this to observe compilation)."""
    with _cache_lock:
        _cache.clear()
