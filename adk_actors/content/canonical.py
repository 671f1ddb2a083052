"""Canonical JSON: sorted keys, compact separators, no NaN/Infinity, no NUL characters, no lone surrogates.

Everything adk_actors writes as JSON (sessions, events, ledgers, cursors, hashes) goes through these two
functions, so SQLite and PostgreSQL behave the same and hashes over stored JSON agree.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from adk_actors.errors import ValidationError

__all__ = ["canonical_dumps", "canonical_loads", "check_json_safe"]


def _bad_text(text: str) -> str | None:
    """Why ``text`` cannot be canonical JSON text (NUL or lone surrogate), or ``None`` when it can."""
    if "\x00" in text:
        return "NUL characters are not allowed"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "lone surrogates are not valid Unicode"
    return None


def _int_fits(value: int) -> bool:
    """Whether ``value`` can be written as JSON text (the interpreter caps int-to-str conversion)."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if not limit or value.bit_length() * 0.30103 + 2 < limit:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def check_json_safe(value: Any, path: str = "$") -> None:
    """Raise ``ValidationError`` unless ``value`` is JSON-safe.

    JSON-safe means: str keys, finite numbers, ints the interpreter can write as text, and no string (value or
    key) containing a NUL character or a lone surrogate (U+D800-U+DFFF, which UTF-8 cannot encode).

    ``details["path"]`` locates the offending item structurally: list items by index, object members by their
    position as ``<key#N>`` (the N-th key of that object, from 0). Key names are never reported, since they are
    part of the (possibly secret) value.
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if not _int_fits(item):
                raise ValidationError("integer too large to write as JSON", reason="invalid_json",
                                      details={"path": where})
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValidationError("NaN and Infinity are not JSON", reason="invalid_json",
                                      details={"path": where})
            continue
        if isinstance(item, str):
            problem = _bad_text(item)
            if problem is not None:
                raise ValidationError(problem, reason="invalid_json", details={"path": where})
            continue
        if isinstance(item, dict):
            for i, (k, v) in enumerate(item.items()):
                member = f"{where}.<key#{i}>"
                if not isinstance(k, str):
                    raise ValidationError("object keys must be strings", reason="invalid_json",
                                          details={"path": member, "key_type": type(k).__name__})
                problem = _bad_text(k)
                if problem is not None:
                    raise ValidationError(f"object key: {problem}", reason="invalid_json",
                                          details={"path": member})
                stack.append((v, member))
            continue
        if isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
            continue
        raise ValidationError("value is not JSON-safe", reason="invalid_json",
                              details={"path": where, "type": type(item).__name__})


def canonical_dumps(value: Any) -> str:
    """Serialize ``value`` as canonical JSON (sorted keys, ``(",", ":")`` separators, UTF-8 text).

    Raises:
        ValidationError: reason ``invalid_json`` for NaN/Infinity, NUL characters, lone surrogates, non-str
            keys, integers too large to write, non-JSON types.
    """
    check_json_safe(value)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError:
        # The stdlib encoder recurses; callers that can bound depth first (copy_json) never get here.
        raise ValidationError("JSON value nested too deeply", reason="invalid_json",
                              details={"error": "RecursionError"}) from None


def _reject_constant(name: str) -> Any:
    raise ValidationError("NaN and Infinity are not JSON", reason="invalid_json", details={"constant": name})


def canonical_loads(text: str | bytes) -> Any:
    """Parse JSON strictly (NaN/Infinity, NUL characters and lone surrogates such as ``"\\ud800"`` rejected).

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
