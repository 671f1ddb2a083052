"""Loading an OpenAPI document within bounds, and resolving its local ``$ref`` values.

A document arrives as a decoded ``dict`` or as JSON (or YAML, when PyYAML is installed) text or bytes. Before any
other work it is checked in one iterative walk: JSON types only, string keys, bounded nesting and a bounded
approximate size, so a hostile document is refused before it can cost much. References are local JSON pointers
(``#/components/...``); anything else is a remote reference and is refused, never fetched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from adk_actors.errors import ConfigError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_DEPTH", "DEFAULT_MAX_REF_DEPTH", "Document", "load_document"]

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
"""Bound on a document's size: its bytes as given, or an estimate of its JSON size for a decoded ``dict``."""
DEFAULT_MAX_DEPTH = 128
"""Bound on the nesting of a document (objects and arrays)."""
DEFAULT_MAX_REF_DEPTH = 32
"""Bound on a chain of references followed to reach one object, and on nested schema references."""
MAX_POINTER_CHARS = 1024


def _limit(limit: str, value: int, **details: Any) -> ConfigError:
    return ConfigError(
        "OpenAPI document exceeds a limit", reason="limit_exceeded", details={"limit": limit, "max": value, **details}
    )


def _decode_text(raw: str | bytes, max_bytes: int) -> Any:
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise _limit("max_bytes", max_bytes, size=size)
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError("OpenAPI document is not UTF-8", reason="invalid_document") from None
    else:
        text = raw.removeprefix("\ufeff")
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")) or not stripped:
        try:
            return json.loads(text)
        except RecursionError:
            raise _limit("max_depth", DEFAULT_MAX_DEPTH) from None
        except ValueError as exc:
            raise ConfigError(
                "OpenAPI document is not valid JSON",
                reason="invalid_json",
                details={"line": getattr(exc, "lineno", None), "column": getattr(exc, "colno", None)},
            ) from None
    try:
        import yaml
    except ImportError:
        raise ConfigError(
            "OpenAPI document is not JSON and PyYAML is not installed to read YAML", reason="yaml_unavailable"
        ) from None
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise _limit("max_depth", DEFAULT_MAX_DEPTH) from None
    except yaml.YAMLError:
        raise ConfigError("OpenAPI document is not valid YAML", reason="invalid_yaml") from None


def _check_tree(value: Any, *, max_bytes: int, max_depth: int) -> None:
    """Walk ``value`` once without recursion: JSON types, string keys, nesting and estimated size.

    YAML aliases share one object between several places; each place is counted, so an alias bomb meets the size
    bound like its expansion would.
    """
    budget = max_bytes
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise _limit("max_depth", max_depth)
        if isinstance(node, dict):
            budget -= 2 + len(node)
            for key, item in node.items():
                if not isinstance(key, str):
                    raise ConfigError(
                        "OpenAPI document has a non-string key",
                        reason="invalid_document",
                        details={"type": type(key).__name__},
                    )
                budget -= len(key) + 3
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            budget -= 2 + len(node)
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            budget -= len(node) + 2
        elif node is None or isinstance(node, bool | int):
            budget -= 5
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise ConfigError("OpenAPI document has a non-finite number", reason="invalid_document")
            budget -= 8
        else:
            raise ConfigError(
                "OpenAPI document holds a value that is not JSON",
                reason="invalid_document",
                details={"type": type(node).__name__},
            )
        if budget < 0:
            raise _limit("max_bytes", max_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """A checked OpenAPI document and the rules for following its references."""

    root: dict[str, Any]
    """The decoded document (checked, never modified)."""
    version: str
    """The ``openapi`` field: ``3.0.x`` or ``3.1.x``."""
    max_ref_depth: int
    """Bound on a reference chain and on nested schema references."""

    @property
    def is_31(self) -> bool:
        """Whether the document is OpenAPI 3.1."""
        return self.version.startswith("3.1")

    def pointer(self, ref: Any, *, where: str) -> Any:
        """The value a local reference points at.

        Raises:
            ConfigError: reason ``remote_ref`` (not ``#/...``) or ``invalid_ref`` (malformed or dangling).
        """
        if not isinstance(ref, str):
            raise ConfigError("$ref must be a string", reason="invalid_ref", details={"operation": where})
        if not ref.startswith("#/"):
            raise ConfigError(
                "only local references (#/...) are allowed; remote references are never fetched",
                reason="remote_ref",
                # The reference itself is not echoed: a URL can carry credentials in its userinfo or query.
                details={"operation": where},
            )
        if len(ref) > MAX_POINTER_CHARS:
            raise ConfigError("$ref is too long", reason="invalid_ref", details={"operation": where})
        node: Any = self.root
        for raw in ref[2:].split("/"):
            token = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise ConfigError(
                    "$ref points at nothing", reason="invalid_ref", details={"operation": where, "ref": ref}
                )
        return node

    def deref(self, value: Any, *, where: str) -> Any:
        """Follow ``value``'s ``$ref`` chain (if any) to a non-reference object.

        Raises:
            ConfigError: reason ``remote_ref``, ``invalid_ref``, ``ref_cycle`` or ``limit_exceeded``.
        """
        seen: list[str] = []
        while isinstance(value, dict) and "$ref" in value:
            ref = value["$ref"]
            if ref in seen:
                raise ConfigError(
                    "references form a cycle", reason="ref_cycle", details={"operation": where, "refs": [*seen, ref]}
                )
            if len(seen) >= self.max_ref_depth:
                raise _limit("max_ref_depth", self.max_ref_depth, operation=where)
            seen.append(ref)
            value = self.pointer(ref, where=where)
        return value


def load_document(
    document: Any,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_ref_depth: int = DEFAULT_MAX_REF_DEPTH,
) -> Document:
    """Decode (if text) and check an OpenAPI 3.0/3.1 document.

    Raises:
        ConfigError: reason ``invalid_document``, ``invalid_json``, ``invalid_yaml``, ``yaml_unavailable``,
            ``limit_exceeded`` or ``unsupported_openapi_version``.
    """
    for name, bound in (("max_bytes", max_bytes), ("max_depth", max_depth), ("max_ref_depth", max_ref_depth)):
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ConfigError("limit must be a positive int", reason="invalid_value", details={"field": name})
    decoded = _decode_text(document, max_bytes) if isinstance(document, str | bytes) else document
    if not isinstance(decoded, dict):
        raise ConfigError(
            "an OpenAPI document is a JSON object",
            reason="invalid_document",
            details={"type": type(decoded).__name__},
        )
    _check_tree(decoded, max_bytes=max_bytes, max_depth=max_depth)
    version = decoded.get("openapi")
    if not isinstance(version, str) or not _is_supported_version(version):
        raise ConfigError(
            "only OpenAPI 3.0.x and 3.1.x documents are supported",
            reason="unsupported_openapi_version",
            details={"openapi": version if isinstance(version, str) else None, "swagger": "swagger" in decoded},
        )
    return Document(root=decoded, version=version, max_ref_depth=max_ref_depth)


def _is_supported_version(version: str) -> bool:
    parts = version.split(".")
    return len(parts) == 3 and parts[0] == "3" and parts[1] in ("0", "1") and parts[2].isdigit() and len(version) < 16
