"""Projection of OpenAPI 3.0/3.1 Schema Objects onto the JSON Schema (draft 7) that ``compile_schema`` accepts.

* local ``$ref`` values are inlined (a reference to itself, directly or not, is refused as ``ref_cycle``; the
  expansion is bounded in nodes, so shared references cannot blow up);
* ``nullable: true`` (3.0) and type arrays (3.1) both become a JSON Schema type list with ``"null"``;
* 3.0's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become draft 7's numeric form;
* annotations with no effect on what a valid argument is (``xml``, ``example``, ``readOnly``, ``discriminator``,
  ``x-*`` ...) are left out; any keyword that constrains values and is not understood (``$id``,
  ``prefixItems``, ``unevaluatedProperties`` ...) is refused as ``unsupported_schema_keyword``, never dropped.
"""

from __future__ import annotations

from typing import Any

from adk_actors.errors import ConfigError
from adk_actors.openapi.document import Document

__all__ = ["DEFAULT_MAX_SCHEMA_NODES", "MAX_SCHEMA_DEPTH", "SchemaProjector"]

DEFAULT_MAX_SCHEMA_NODES = 20_000
"""Bound on the schema nodes one operation's arguments expand to once references are inlined."""
MAX_SCHEMA_DEPTH = 60
"""Bound on a projected schema's nesting (``compile_schema`` refuses deeper than 64, and arguments add levels)."""

_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_KEEP = frozenset(
    {
        "format",
        "title",
        "description",
        "const",
        "default",
        "multipleOf",
        "maximum",
        "minimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
    }
)
_ONE = frozenset({"additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"})
_MANY = frozenset({"allOf", "anyOf", "oneOf"})
_MAPS = frozenset({"properties", "patternProperties"})
_ANNOTATIONS = frozenset(
    {
        "xml",
        "externalDocs",
        "discriminator",
        "readOnly",
        "writeOnly",
        "deprecated",
        "example",
        "examples",
        "$comment",
        "$schema",
        "$defs",
        "definitions",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "summary",
    }
)
_REF_TEXT = frozenset({"description", "summary", "title"})


def _invalid(where: str, rule: str) -> ConfigError:
    return ConfigError("invalid schema", reason="invalid_schema", details={"operation": where, "rule": rule})


class SchemaProjector:
    """Projects the schemas of one document; reference expansions are shared between operations.

    Call :meth:`start` before each operation to reset the node budget.
    """

    def __init__(self, document: Document, *, max_nodes: int = DEFAULT_MAX_SCHEMA_NODES) -> None:
        self._doc = document
        self._max_nodes = max_nodes
        self._nodes = 0
        self._memo: dict[str, tuple[Any, int]] = {}

    def start(self) -> None:
        """Begin a new operation (a fresh node budget)."""
        self._nodes = 0

    def project(self, schema: Any, *, where: str) -> Any:
        """The draft 7 projection of one Schema Object.

        Raises:
            ConfigError: reason ``invalid_schema``, ``unsupported_schema_keyword``, ``remote_ref``,
                ``invalid_ref``, ``ref_cycle`` or ``limit_exceeded``.
        """
        out, _ = self._schema(schema, where, 0, ())
        return out

    def _charge(self, size: int, where: str) -> None:
        self._nodes += size
        if self._nodes > self._max_nodes:
            raise ConfigError(
                "schema expands beyond the node limit",
                reason="limit_exceeded",
                details={"limit": "max_schema_nodes", "max": self._max_nodes, "operation": where},
            )

    def _schema(self, node: Any, where: str, depth: int, refs: tuple[str, ...]) -> tuple[Any, int]:
        if depth > MAX_SCHEMA_DEPTH:
            raise ConfigError(
                "schema nests too deeply",
                reason="limit_exceeded",
                details={"limit": "max_schema_depth", "max": MAX_SCHEMA_DEPTH, "operation": where},
            )
        self._charge(1, where)
        if isinstance(node, bool):
            return node, 1
        if not isinstance(node, dict):
            raise _invalid(where, "schema_not_object")
        if "$ref" in node:
            return self._reference(node, where, depth, refs)
        out: dict[str, Any] = {}
        size = 1
        for key, value in node.items():
            if key in _KEEP:
                out[key] = value
            elif key in ("type", "nullable", "enum", "required", "exclusiveMinimum", "exclusiveMaximum"):
                continue  # handled below, together with their companions
            elif key == "items":
                if isinstance(value, list):
                    raise _unsupported(where, "items (array form)")
                out[key], sub = self._schema(value, where, depth + 1, refs)
                size += sub
            elif key in _ONE:
                out[key], sub = self._schema(value, where, depth + 1, refs)
                size += sub
            elif key in _MANY:
                if not isinstance(value, list) or not value:
                    raise _invalid(where, key)
                branches = []
                for branch in value:
                    projected, sub = self._schema(branch, where, depth + 1, refs)
                    branches.append(projected)
                    size += sub
                out[key] = branches
            elif key in _MAPS:
                if not isinstance(value, dict):
                    raise _invalid(where, key)
                members = {}
                for name, member in value.items():
                    members[name], sub = self._schema(member, where, depth + 1, refs)
                    size += sub
                out[key] = members
            elif key in _ANNOTATIONS or key.startswith("x-"):
                continue
            else:
                raise _unsupported(where, key)
        self._types(node, out, where)
        self._bounds(node, out)
        if "required" in node:
            required = node["required"]
            if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                raise _invalid(where, "required")
            if required:
                out["required"] = list(dict.fromkeys(required))
        return out, size

    def _types(self, node: dict[str, Any], out: dict[str, Any], where: str) -> None:
        raw = node.get("type")
        nullable = node.get("nullable") is True
        if raw is not None:
            types = [raw] if isinstance(raw, str) else raw
            if not isinstance(types, list) or not types or not all(isinstance(t, str) and t in _TYPES for t in types):
                raise _invalid(where, "type")
            types = list(dict.fromkeys(types))
            if nullable and "null" not in types:
                types.append("null")
            out["type"] = types[0] if len(types) == 1 else types
        if "enum" in node:
            enum = node["enum"]
            if not isinstance(enum, list) or not enum:
                raise _invalid(where, "enum")
            enum = list(enum)
            if nullable and None not in enum:
                enum.append(None)
            out["enum"] = enum

    @staticmethod
    def _bounds(node: dict[str, Any], out: dict[str, Any]) -> None:
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if exclusive not in node:
                continue
            value = node[exclusive]
            if isinstance(value, bool):
                # OpenAPI 3.0 (JSON Schema draft 4): a flag on the inclusive bound.
                if value and bound in out:
                    out[exclusive] = out.pop(bound)
            else:
                out[exclusive] = value

    def _reference(self, node: dict[str, Any], where: str, depth: int, refs: tuple[str, ...]) -> tuple[Any, int]:
        ref = node["$ref"]
        if ref in refs:
            raise ConfigError(
                "schema references form a cycle (recursive schemas are not supported)",
                reason="ref_cycle",
                details={"operation": where, "refs": [*refs, ref]},
            )
        if len(refs) >= self._doc.max_ref_depth:
            raise ConfigError(
                "schema references nest too deeply",
                reason="limit_exceeded",
                details={"limit": "max_ref_depth", "max": self._doc.max_ref_depth, "operation": where},
            )
        memo = self._memo.get(ref) if isinstance(ref, str) else None
        if memo is None:
            target = self._doc.pointer(ref, where=where)
            resolved, size = self._schema(target, where, depth + 1, (*refs, ref))
            self._memo[ref] = (resolved, size)
        else:
            resolved, size = memo
            self._charge(size, where)
        siblings = {k: v for k, v in node.items() if k != "$ref" and k not in _ANNOTATIONS and not k.startswith("x-")}
        if not siblings:
            return resolved, size
        if set(siblings) <= _REF_TEXT and isinstance(resolved, dict):
            # A Reference Object may override the target's summary/description (3.1); keep the texts that apply.
            merged = dict(resolved)
            for key in ("title", "description"):
                if isinstance(siblings.get(key), str):
                    merged[key] = siblings[key]
            return merged, size
        rest, extra = self._schema(siblings, where, depth + 1, refs)
        return {"allOf": [resolved, rest]}, size + extra + 1


def _unsupported(where: str, keyword: str) -> ConfigError:
    return ConfigError(
        "schema uses a keyword this projection does not support",
        reason="unsupported_schema_keyword",
        details={"operation": where, "keyword": keyword},
    )
