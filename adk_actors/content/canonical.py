"""Canonical JSON: sorted keys, compact separators, no NaN/Infinity, no NUL characters.

Everything adk_actors writes as JSON (sessions, events, ledgers, cursors, hashes) goes through these two
functions, so SQLite and PostgreSQL behave the same and hashes over stored JSON agree.
"""

from __future__ import annotations

import json
from typing import Any

from adk_actors.errors import ValidationError

__all__ = ["canonical_dumps", "canonical_loads", "check_json_safe"]


def check_json_safe(value: Any, path: str = "$") -> None:
    """Raise ``ValidationError`` unless ``value`` is JSON-safe (str keys, finite numbers, no NUL characters)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValidationError("NaN and Infinity are not JSON", reason="invalid_json",
                                      details={"path": where})
            continue
        if isinstance(item, str):
            if "\x00" in item:
                raise ValidationError("NUL characters are not allowed", reason="invalid_json",
                                      details={"path": where})
            continue
        if isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    raise ValidationError("object keys must be strings", reason="invalid_json",
                                          details={"path": where})
                if "\x00" in k:
                    raise ValidationError("NUL characters are not allowed", reason="invalid_json",
                                          details={"path": where})
                stack.append((v, f"{where}.{k}"))
            continue
        if isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
            continue
        raise ValidationError("value is not JSON-safe", reason="invalid_json",
                              details={"path": where, "type": type(item).__name__})


def canonical_dumps(value: Any) -> str:
    """Serialize ``value`` as canonical JSON (sorted keys, ``(",", ":")`` separators, UTF-8 text).

    Raises:
        ValidationError: reason ``invalid_json`` for NaN/Infinity, NUL characters, non-str keys, non-JSON types.
    """
    check_json_safe(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _reject_constant(name: str) -> Any:
    raise ValidationError("NaN and Infinity are not JSON", reason="invalid_json", details={"constant": name})


def canonical_loads(text: str | bytes) -> Any:
    """Parse JSON strictly (NaN/Infinity and NUL characters rejected).

    Raises:
        ValidationError: reason ``invalid_json``.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValidationError:
        raise
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValidationError("malformed JSON", reason="invalid_json",
                              details={"error": type(exc).__name__}) from None
    check_json_safe(value)
    return value
