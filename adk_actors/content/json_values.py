"""Bounded copies of JSON values: depth-limited, canonical, measured in UTF-8 bytes.

Every map that a value class stores (function arguments, state deltas, metadata) is copied through
:func:`copy_json`, so a frozen value never shares a mutable dict with its caller and its size is known.
"""

from __future__ import annotations

import json
from typing import Any

from adk_actors.content.canonical import MAX_JSON_DEPTH, canonical_dumps
from adk_actors.errors import ValidationError

__all__ = ["MAX_JSON_DEPTH", "copy_json", "utf8_size"]


def utf8_size(text: str, *, error: type[ValidationError] = ValidationError, field: str = "$") -> int:
    """Return the UTF-8 size of ``text`` in bytes.

    Raises:
        ValidationError: (of class ``error``) reason ``invalid_utf8`` for lone surrogates.
    """
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise error("text is not valid Unicode", reason="invalid_utf8", details={"field": field}) from None


def copy_json(
    value: Any,
    *,
    error: type[ValidationError] = ValidationError,
    field: str = "$",
    max_bytes: int | None = None,
    limit_name: str = "max_bytes",
    max_depth: int = MAX_JSON_DEPTH,
) -> tuple[Any, int]:
    """Deep-copy a JSON-safe value and measure its canonical UTF-8 size.

    Args:
        value: dicts with str keys, lists/tuples, str, int, finite float, bool or None.
        error: the ``ValidationError`` subclass to raise.
        field: the structural name reported in error details.
        max_bytes: an optional bound on the canonical JSON size.
        limit_name: the limit's name reported when ``max_bytes`` is exceeded.
        max_depth: the deepest nesting accepted.

    Returns:
        ``(copy, size)``; tuples in ``value`` become lists in the copy.

    Raises:
        ValidationError: (of class ``error``) reason ``invalid_json``, ``invalid_utf8`` or ``limit_exceeded``.
    """
    try:
        text = canonical_dumps(value, max_depth=max_depth)  # bounds depth and cycles before anything recurses
    except ValidationError as exc:
        message = exc.message if exc.reason == "limit_exceeded" else "value is not JSON-safe"
        raise error(message, reason=exc.reason, details={"field": field, **exc.details}) from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise error(
            "value is not JSON-safe", reason="invalid_json", details={"field": field, "error": type(exc).__name__}
        ) from None
    size = utf8_size(text, error=error, field=field)
    if max_bytes is not None and size > max_bytes:
        raise error(
            "JSON value too large",
            reason="limit_exceeded",
            details={"field": field, "limit": limit_name, "max": max_bytes, "size": size},
        )
    return json.loads(text), size
