"""Argument validators shared by every public boundary (sessions, agents, runs, workflows, the Runner).

A facade call checks its arguments here, in the caller's process, before anything is sent: a value an actor
cannot decode or handle must never reach it, and a bad argument must fail at once with an ``AdkError`` that
names the argument (never its value, which may be a secret) instead of a raw ``TypeError`` or a full ask
deadline. Each check takes the ``AdkError`` class to raise, so a facade keeps the error class it documents.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ValidationError

__all__ = [
    "MAX_ARG_JSON_BYTES",
    "MAX_ID_LENGTH",
    "MAX_TEXT_BYTES",
    "MAX_TIMEOUT_S",
    "check_id",
    "check_int",
    "check_json",
    "check_json_object",
    "check_optional_id",
    "check_text",
    "check_timeout",
]

MAX_ID_LENGTH = 256
"""Longest id or name accepted at a boundary (run ids, invocation ids, user and session ids)."""
MAX_TEXT_BYTES = 8 * 1024 * 1024
"""Largest free text (a prompt, a cancel reason) accepted at a boundary, in UTF-8 bytes."""
MAX_ARG_JSON_BYTES = 16 * 1024 * 1024
"""Largest JSON argument (state, input content, a resume response) accepted at a boundary, canonical UTF-8."""
MAX_TIMEOUT_S = 365 * 24 * 3600.0
"""Longest per-call timeout in seconds (a year: beyond it a deadline is a mistake, not a wish)."""

ErrorClass = type[AdkError]


def _fail(
    error: ErrorClass, message: str, key: str, value: Any, reason: str = "invalid_value", **extra: Any
) -> AdkError:
    return error(message, reason=reason, details={"key": key, "type": type(value).__name__, **extra})


def check_text(
    value: Any,
    key: str,
    *,
    error: ErrorClass = ValidationError,
    max_bytes: int = MAX_TEXT_BYTES,
    allow_empty: bool = True,
) -> str:
    """``value`` if it is a ``str`` of valid Unicode without NUL, at most ``max_bytes`` UTF-8 bytes.

    Raises:
        AdkError: (of class ``error``) reason ``invalid_value``, ``invalid_utf8`` or ``limit_exceeded``.
    """
    if not isinstance(value, str):
        raise _fail(error, f"{key} must be a string", key, value)
    if not value and not allow_empty:
        raise _fail(error, f"{key} must not be empty", key, value)
    if len(value) > max_bytes:  # every character is at least one byte: no need to encode a huge string
        raise _fail(error, f"{key} is too long", key, value, "limit_exceeded", max=max_bytes)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _fail(error, f"{key} is not valid Unicode", key, value, "invalid_utf8") from None
    if size > max_bytes:
        raise _fail(error, f"{key} is too long", key, value, "limit_exceeded", max=max_bytes)
    if "\x00" in value:
        raise _fail(error, f"{key} must not contain NUL characters", key, value)
    return value


def check_id(value: Any, key: str, *, error: ErrorClass = ValidationError, max_length: int = MAX_ID_LENGTH) -> str:
    """``value`` if it is a non-empty ``str`` id without control characters, at most ``max_length`` characters.

    Raises:
        AdkError: (of class ``error``) reason ``invalid_value``, ``invalid_utf8`` or ``limit_exceeded``.
    """
    text = check_text(value, key, error=error, max_bytes=4 * max_length, allow_empty=False)
    if len(text) > max_length:
        raise _fail(error, f"{key} is too long", key, value, "limit_exceeded", max=max_length)
    if any(ch < " " or ch == "\x7f" for ch in text):
        raise _fail(error, f"{key} must not contain control characters", key, value)
    return text


def check_optional_id(value: Any, key: str, *, error: ErrorClass = ValidationError) -> str | None:
    """``None``, or ``value`` checked by :func:`check_id`."""
    return None if value is None else check_id(value, key, error=error)


def check_int(
    value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None, error: ErrorClass = ValidationError
) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) within ``[minimum, maximum]``.

    Raises:
        AdkError: (of class ``error``) reason ``invalid_value``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(error, f"{key} must be an integer", key, value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _fail(error, f"{key} is out of range", key, value, min=minimum, max=maximum)
    return value


def check_timeout(value: Any, key: str = "timeout", *, error: ErrorClass = ValidationError) -> float | None:
    """``None`` (the default deadline) or a finite number of seconds in ``[0, MAX_TIMEOUT_S]``.

    Raises:
        AdkError: (of class ``error``) reason ``invalid_value``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(error, f"{key} must be a number of seconds", key, value)
    seconds = float(value) if isinstance(value, float) or abs(value) < 2**53 else math.inf
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_TIMEOUT_S:
        raise _fail(error, f"{key} must be between 0 and {MAX_TIMEOUT_S:.0f} seconds", key, value)
    return seconds


def check_json(
    value: Any,
    key: str,
    *,
    error: ErrorClass = ValidationError,
    max_bytes: int = MAX_ARG_JSON_BYTES,
    reason: str | None = None,
) -> Any:
    """A private JSON copy of ``value`` (depth-bounded before anything recurses, so cycles and 10k-deep lists
    fail fast).

    Raises:
        AdkError: (of class ``error``) reason ``invalid_json``, ``invalid_utf8`` or ``limit_exceeded``; with
            ``reason``, that reason instead and the specific one as ``details["rule"]``.
    """
    try:
        return copy_json(value, field=key, max_bytes=max_bytes)[0]
    except ValidationError as exc:
        if reason is None and (error is ValidationError or isinstance(exc, error)):
            raise
        details = {"key": key, **exc.details, **({"rule": exc.reason} if reason else {})}
        raise error(exc.message, reason=reason or exc.reason, details=details) from None


def check_json_object(
    value: Any, key: str, *, error: ErrorClass = ValidationError, max_bytes: int = MAX_ARG_JSON_BYTES
) -> dict[str, Any]:
    """A private JSON copy of a mapping with non-empty ``str`` keys (a state, a snapshot, an expectation).

    Raises:
        AdkError: (of class ``error``) reason ``invalid_value`` for a non-mapping, or as :func:`check_json`.
    """
    if not isinstance(value, Mapping):
        raise _fail(error, f"{key} must be a mapping", key, value)
    try:
        items = dict(value)
    except Exception:  # a hostile Mapping whose iteration raises is still just a bad argument
        raise _fail(error, f"{key} must be a mapping", key, value) from None
    for item_key in items:
        if not isinstance(item_key, str) or not item_key:
            raise _fail(error, f"{key} keys must be non-empty strings", key, value, key_type=type(item_key).__name__)
    copied = check_json(items, key, error=error, max_bytes=max_bytes)
    assert isinstance(copied, dict)
    return copied
