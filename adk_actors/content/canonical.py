"""Canonical JSON: sorted keys, compact separators, no NaN/Infinity, no NUL characters, no lone surrogates.

Everything adk_actors writes as JSON (sessions, events, ledgers, cursors, hashes) goes through these two
functions, so SQLite and PostgreSQL behave the same and hashes over stored JSON agree.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from adk_actors.errors import ValidationError

__all__ = [
    "MAX_ENVELOPE_DEPTH",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "canonical_dumps",
    "canonical_loads",
    "check_json_safe",
]


MAX_JSON_DEPTH = 64
"""Deepest nesting of containers accepted in one value (a state, function-call arguments, a tool result, a
schema); the value's own container is the first level."""
MAX_ENVELOPE_DEPTH = MAX_JSON_DEPTH + 32
"""Deepest nesting accepted by :func:`check_json_safe` and canonical JSON by default: an event, a session or a
request body carries values bounded by :data:`MAX_JSON_DEPTH` inside a few levels of its own. Both limits stay far
below the interpreter's recursion limit, which the stdlib JSON encoder and decoder and pickle are bound by."""

_LOG10_2 = 0.30103
_MAX_QUICK_DEPTH = 256
MAX_JSON_NODES = 1_000_000
"""Most members (list items and object members, counted every time they are reached) one value may have: a value
that shares sub-values (``a = [a, a]`` nested 60 deep) is small in memory but would take 2**60 steps to walk, write
or copy. A million members is far above any content limit's worth of JSON (events, state, request bodies)."""
"""The quick walk recurses; above this ``max_depth`` only the iterative close look runs (the encoder would need
the recursion limit raised anyway)."""
_EXIT = object()
"""Marks, on the close look's stack, the point where a container's members are all done."""


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
    if not limit or value.bit_length() * _LOG10_2 + 2 < limit:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def _safe_int_bits() -> int:
    """Ints of at most this many bits are always writable as text (no need to ask :func:`_int_fits`)."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return sys.maxsize if not limit else max(0, int((limit - 2) / _LOG10_2) - 1)


def _scalar_ok(item: Any, int_bits: int) -> bool:
    kind = type(item)
    if kind is str:
        return "\x00" not in item and (item.isascii() or _bad_text(item) is None)
    if kind is int:
        return item.bit_length() <= int_bits
    if kind is float:
        return item - item == 0.0  # NaN and +-Infinity give NaN
    return item is None or kind is bool  # subclasses and other types: the close look decides


def _container_ok(item: Any, depth: int, max_depth: int, int_bits: int, budget: list[int]) -> bool:
    """The quick walk: ``True`` when ``item`` is certainly JSON-safe, ``False`` for "look closely".

    It builds no paths, recurses at most ``max_depth`` levels (so a cycle, infinitely deep, ends it too) and reaches
    at most ``budget[0]`` members in all.
    """
    if depth >= max_depth:
        return False
    budget[0] -= len(item)
    if budget[0] < 0:
        return False
    kind = type(item)
    if kind is dict:
        children = item.values()
        for key in item:
            if type(key) is not str or "\x00" in key or not (key.isascii() or _bad_text(key) is None):
                return False
    elif kind is list or kind is tuple:
        children = item
    else:
        return False
    for child in children:
        child_kind = type(child)
        if child_kind is dict or child_kind is list or child_kind is tuple:
            if not _container_ok(child, depth + 1, max_depth, int_bits, budget):
                return False
        elif not _scalar_ok(child, int_bits):
            return False
    return True


def _locate(value: Any, path: str, max_depth: int) -> None:
    """The close look: raise the ``ValidationError`` that says what is wrong and where (no-op when nothing is)."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    open_ids: set[int] = set()  # the containers on the path from the root to the current item
    members = 0
    while stack:
        item, where, depth = stack.pop()
        if item is _EXIT:
            open_ids.discard(depth)  # for an exit marker, the third member is the container's id
            continue
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if not _int_fits(item):
                raise ValidationError(
                    "integer too large to write as JSON", reason="invalid_json", details={"path": where}
                )
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValidationError("NaN and Infinity are not JSON", reason="invalid_json", details={"path": where})
            continue
        if isinstance(item, str):
            problem = _bad_text(item)
            if problem is not None:
                raise ValidationError(problem, reason="invalid_json", details={"path": where})
            continue
        if not isinstance(item, dict | list | tuple):
            raise ValidationError(
                "value is not JSON-safe", reason="invalid_json", details={"path": where, "type": type(item).__name__}
            )
        if id(item) in open_ids:
            raise ValidationError(
                "value contains itself (a reference cycle is not JSON)",
                reason="invalid_json",
                details={"path": where, "cycle": True},
            )
        if depth >= max_depth:
            raise ValidationError(
                "JSON value nested too deeply",
                reason="limit_exceeded",
                details={"path": where, "limit": "max_json_depth", "max": max_depth},
            )
        members += len(item)
        if members > MAX_JSON_NODES:
            raise ValidationError(
                "JSON value has too many members",
                reason="limit_exceeded",
                details={"path": where, "limit": "max_json_nodes", "max": MAX_JSON_NODES},
            )
        open_ids.add(id(item))
        stack.append((_EXIT, where, id(item)))
        if isinstance(item, dict):
            for i, (k, v) in enumerate(item.items()):
                member = f"{where}.<key#{i}>"
                if not isinstance(k, str):
                    raise ValidationError(
                        "object keys must be strings",
                        reason="invalid_json",
                        details={"path": member, "key_type": type(k).__name__},
                    )
                problem = _bad_text(k)
                if problem is not None:
                    raise ValidationError(f"object key: {problem}", reason="invalid_json", details={"path": member})
                stack.append((v, member, depth + 1))
        else:
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item))


def check_json_safe(value: Any, path: str = "$", *, max_depth: int = MAX_ENVELOPE_DEPTH) -> None:
    """Raise ``ValidationError`` unless ``value`` is JSON-safe.

    JSON-safe means: dicts with str keys, lists and tuples, nested at most ``max_depth`` containers deep (the
    outermost is the first), without reference cycles and with at most :data:`MAX_JSON_NODES` members in all
    (shared sub-values count each time they are reached); finite numbers, ints the interpreter can write as text,
    and no string (value or key) containing a NUL character or a lone surrogate (U+D800-U+DFFF, which UTF-8 cannot
    encode). Nothing recurses deeper than ``max_depth``, so a 10k-deep or self-containing value fails fast.

    ``details["path"]`` locates the offending item structurally: list items by index, object members by their
    position as ``<key#N>`` (the N-th key of that object, from 0). Key names are never reported, since they are
    part of the (possibly secret) value.

    Raises:
        ValidationError: reason ``invalid_json`` (a non-JSON type, NaN/Infinity, NUL, a lone surrogate, a non-str
            key, an int too large to write; a reference cycle, with ``details["cycle"]``) or ``limit_exceeded``
            (deeper than ``max_depth``, ``details["limit"]`` is ``"max_json_depth"``; more members than
            :data:`MAX_JSON_NODES`, ``"max_json_nodes"``).
    """
    kind = type(value)
    container = kind is dict or kind is list or kind is tuple
    if (
        container
        and max_depth <= _MAX_QUICK_DEPTH
        and _container_ok(value, 0, max_depth, _safe_int_bits(), [MAX_JSON_NODES])
    ):
        return
    if kind is str and "\x00" not in value and (value.isascii() or _bad_text(value) is None):
        return
    _locate(value, path, max_depth)  # a scalar at the top, or something to look at closely


def canonical_dumps(value: Any, *, max_depth: int = MAX_ENVELOPE_DEPTH) -> str:
    """Serialize ``value`` as canonical JSON (sorted keys, ``(",", ":")`` separators, UTF-8 text).

    Raises:
        ValidationError: as :func:`check_json_safe` (reason ``invalid_json`` for NaN/Infinity, NUL characters,
            lone surrogates, non-str keys, integers too large to write, non-JSON types, reference cycles;
            ``limit_exceeded`` for nesting deeper than ``max_depth``).
    """
    check_json_safe(value, max_depth=max_depth)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError:
        # Only reachable with a max_depth near the interpreter's recursion limit: the encoder recurses.
        raise ValidationError(
            "JSON value nested too deeply",
            reason="limit_exceeded",
            details={"limit": "max_json_depth", "max": max_depth},
        ) from None


def _reject_constant(name: str) -> Any:
    raise ValidationError("NaN and Infinity are not JSON", reason="invalid_json", details={"constant": name})


def canonical_loads(text: str | bytes) -> Any:
    """Parse JSON strictly (NaN/Infinity, NUL characters and lone surrogates such as ``"\\ud800"`` rejected,
    nesting bounded by :data:`MAX_ENVELOPE_DEPTH`).

    Raises:
        ValidationError: reason ``invalid_json``, or ``limit_exceeded`` for nesting too deep.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValidationError:
        raise
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValidationError("malformed JSON", reason="invalid_json", details={"error": type(exc).__name__}) from None
    check_json_safe(value)
    return value
