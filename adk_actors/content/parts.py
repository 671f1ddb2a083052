"""Content parts: text, inline data, file references, function calls and function responses.

Every part validates in ``__post_init__`` against the default limits (which are also the ceilings), so a part
that exists is well formed; :meth:`Content.check` applies an application's lowered limits on top.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from adk_actors.content.json_values import copy_json, utf8_size
from adk_actors.content.limits import DEFAULT_LIMITS, ContentLimits
from adk_actors.errors import ContentError

__all__ = [
    "FileDataPart",
    "FunctionCallPart",
    "FunctionResponsePart",
    "InlineDataPart",
    "Part",
    "TextPart",
    "canonical_base64",
    "check_function_name",
    "check_mime_type",
    "check_uri",
    "file_data",
    "function_call",
    "function_response",
    "inline_data",
    "part_from_dict",
    "text",
]

_MIME_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
_B64_RE = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_URLSAFE = str.maketrans("-_", "+/")
_HTTPS_AUTHORITY_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?")
_GS_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
MAX_CALL_ID_CHARS = 256


def _type_error(field: str, expected: str, value: Any) -> ContentError:
    return ContentError(
        "content field has the wrong type",
        reason="invalid_part",
        details={"field": field, "expected": expected, "type": type(value).__name__},
    )


def _limit_error(field: str, limit: str, maximum: int, size: int) -> ContentError:
    return ContentError(
        "content limit exceeded",
        reason="limit_exceeded",
        details={"field": field, "limit": limit, "max": maximum, "size": size},
    )


def canonical_base64(
    value: Any, *, field: str = "data", max_bytes: int | None = None, limit_name: str = "max_inline_part_bytes"
) -> tuple[str, int]:
    """Decode standard or URL-safe base64 (padded or not) and re-encode it as standard padded base64.

    Returns:
        ``(canonical_text, decoded_size)``.

    Raises:
        ContentError: reason ``invalid_part`` (not a str), ``invalid_base64`` or ``limit_exceeded``.
    """
    if not isinstance(value, str):
        raise _type_error(field, "str", value)
    if not _B64_RE.fullmatch(value):
        raise ContentError("not base64", reason="invalid_base64", details={"field": field})
    body = value.rstrip("=").translate(_URLSAFE)
    padding = len(value) - len(body)
    if len(body) % 4 == 1 or (padding and (len(value) % 4 or padding != -len(body) % 4)):
        raise ContentError("not base64", reason="invalid_base64", details={"field": field})
    estimated = len(body) * 3 // 4
    if max_bytes is not None and estimated > max_bytes:
        # Reject before decoding so an oversized payload costs no allocation.
        raise _limit_error(field, limit_name, max_bytes, estimated)
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except ValueError:
        raise ContentError("not base64", reason="invalid_base64", details={"field": field}) from None
    return base64.b64encode(raw).decode("ascii"), len(raw)


def check_mime_type(value: Any, *, field: str = "mime_type") -> str:
    """Return ``value`` if it is a lowercase ``type/subtype`` MIME type without parameters.

    Raises:
        ContentError: reason ``invalid_part`` (not a str) or ``invalid_mime_type``.
    """
    if not isinstance(value, str):
        raise _type_error(field, "str", value)
    if not _MIME_RE.fullmatch(value):
        raise ContentError(
            "MIME types are lowercase type/subtype without parameters",
            reason="invalid_mime_type",
            details={"field": field},
        )
    return value


def check_function_name(value: Any, *, field: str = "name") -> str:
    """Return ``value`` if it is a valid function name (letter or ``_`` first, then ``[A-Za-z0-9_.:-]``, ≤128).

    Raises:
        ContentError: reason ``invalid_part`` (not a str) or ``invalid_function_name``.
    """
    if not isinstance(value, str):
        raise _type_error(field, "str", value)
    if not _NAME_RE.fullmatch(value):
        raise ContentError("invalid function name", reason="invalid_function_name", details={"field": field})
    return value


def _check_call_id(value: Any, field: str = "id") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _type_error(field, "str", value)
    if not value or len(value) > MAX_CALL_ID_CHARS or not value.isprintable():
        raise ContentError(
            "invalid function call id",
            reason="invalid_call_id",
            details={"field": field, "max_chars": MAX_CALL_ID_CHARS},
        )
    return value


def _uri_error(rule: str) -> ContentError:
    return ContentError("file URI not permitted", reason="invalid_uri", details={"field": "uri", "rule": rule})


def check_uri(value: Any, *, max_bytes: int = DEFAULT_LIMITS.max_uri_bytes) -> str:
    """Return ``value`` if it is a permitted absolute ``https://`` or ``gs://`` URI.

    Relative URIs, ``file://``, ``http://``, ``data:`` and other schemes, user info (credentials), fragments,
    whitespace, control and non-ASCII characters are rejected. Schemes are matched in lowercase only.

    Raises:
        ContentError: reason ``invalid_part``, ``limit_exceeded`` or ``invalid_uri`` (``details["rule"]`` says
            which rule failed).
    """
    if not isinstance(value, str):
        raise _type_error("uri", "str", value)
    size = utf8_size(value, error=ContentError, field="uri")
    if size > max_bytes:
        raise _limit_error("uri", "max_uri_bytes", max_bytes, size)
    if not value.isascii() or any(c <= " " or c == "\x7f" or c == "\\" for c in value):
        raise _uri_error("characters")
    if value.startswith("https://"):
        rest, authority_re = value[len("https://") :], _HTTPS_AUTHORITY_RE
    elif value.startswith("gs://"):
        rest, authority_re = value[len("gs://") :], _GS_BUCKET_RE
    else:
        raise _uri_error("scheme")
    if "#" in value:
        raise _uri_error("fragment")
    authority = re.split(r"[/?]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise _uri_error("credentials")
    if not authority_re.fullmatch(authority):
        raise _uri_error("authority")
    return value


def _check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise _type_error(field, "bool", value)
    return value


def _signature(value: Any, limits: ContentLimits) -> str | None:
    if value is None:
        return None
    # Signatures are opaque provider tokens; the text-part limit keeps them bounded.
    return canonical_base64(
        value, field="thought_signature", max_bytes=limits.max_text_part_bytes, limit_name="max_text_part_bytes"
    )[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """A text part; ``thought=True`` marks model reasoning that is never shown as the answer."""

    type: ClassVar[str] = "text"
    text: str
    """UTF-8 text (at most ``max_text_part_bytes``)."""
    thought: bool = False
    """Whether this is a thought summary rather than visible output."""
    thought_signature: str | None = None
    """Opaque provider signature, canonical standard base64."""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise _type_error("text", "str", self.text)
        _check_bool(self.thought, "thought")
        object.__setattr__(self, "thought_signature", _signature(self.thought_signature, DEFAULT_LIMITS))
        self.check(DEFAULT_LIMITS)

    def check(self, limits: ContentLimits) -> None:
        """Validate against ``limits``.

        Raises:
            ContentError: reason ``limit_exceeded`` or ``invalid_utf8``.
        """
        size = utf8_size(self.text, error=ContentError, field="text")
        if size > limits.max_text_part_bytes:
            raise _limit_error("text", "max_text_part_bytes", limits.max_text_part_bytes, size)
        if self.thought_signature is not None:
            _signature(self.thought_signature, limits)

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{"type": "text", "text": ...}`` (``thought``/``thought_signature`` only when set)."""
        out: dict[str, Any] = {"type": "text", "text": self.text}
        if self.thought:
            out["thought"] = True
        if self.thought_signature is not None:
            out["thought_signature"] = self.thought_signature
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineDataPart:
    """Inline bytes with their MIME type, held as canonical standard padded base64."""

    type: ClassVar[str] = "inline_data"
    mime_type: str
    """Lowercase ``type/subtype``."""
    data: str
    """Canonical standard padded base64 (standard or URL-safe, padded or not, is accepted on input)."""

    def __post_init__(self) -> None:
        check_mime_type(self.mime_type)
        if isinstance(self.data, bytes | bytearray | memoryview):
            object.__setattr__(self, "data", base64.b64encode(bytes(self.data)).decode("ascii"))
        canonical, _ = canonical_base64(self.data, max_bytes=DEFAULT_LIMITS.max_inline_part_bytes)
        object.__setattr__(self, "data", canonical)

    @property
    def size(self) -> int:
        """Decoded size in bytes."""
        return len(self.data) // 4 * 3 - self.data.count("=", -2)

    @property
    def raw(self) -> bytes:
        """The decoded bytes."""
        return base64.b64decode(self.data)

    def check(self, limits: ContentLimits) -> None:
        """Validate against ``limits``.

        Raises:
            ContentError: reason ``limit_exceeded``.
        """
        if self.size > limits.max_inline_part_bytes:
            raise _limit_error("data", "max_inline_part_bytes", limits.max_inline_part_bytes, self.size)

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{"type": "inline_data", "mime_type": ..., "data": <base64>}``."""
        return {"type": "inline_data", "mime_type": self.mime_type, "data": self.data}


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDataPart:
    """A reference to a remote file the provider fetches (``https://`` or ``gs://`` only)."""

    type: ClassVar[str] = "file_data"
    mime_type: str
    """Lowercase ``type/subtype``."""
    uri: str
    """An absolute ``https://`` or ``gs://`` URI without credentials or fragment."""

    def __post_init__(self) -> None:
        check_mime_type(self.mime_type)
        check_uri(self.uri)

    def check(self, limits: ContentLimits) -> None:
        """Validate against ``limits``.

        Raises:
            ContentError: reason ``limit_exceeded``.
        """
        size = len(self.uri)
        if size > limits.max_uri_bytes:
            raise _limit_error("uri", "max_uri_bytes", limits.max_uri_bytes, size)

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{"type": "file_data", "mime_type": ..., "uri": ...}``."""
        return {"type": "file_data", "mime_type": self.mime_type, "uri": self.uri}


def _check_payload(value: Any, field: str, limits: ContentLimits) -> tuple[dict[str, Any], int]:
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    if not isinstance(value, dict):
        raise _type_error(field, "dict", value)
    copied, size = copy_json(
        value,
        error=ContentError,
        field=field,
        max_bytes=limits.max_function_payload_bytes,
        limit_name="max_function_payload_bytes",
    )
    return copied, size


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCallPart:
    """A model's request to call a function (tool)."""

    type: ClassVar[str] = "function_call"
    name: str
    """The function name."""
    args: dict[str, Any]
    """JSON-safe arguments (a private copy; at most ``max_function_payload_bytes`` as canonical JSON)."""
    id: str | None = None
    """The provider's call id, echoed in the matching response."""
    thought_signature: str | None = None
    """Opaque provider signature, canonical standard base64."""

    def __post_init__(self) -> None:
        check_function_name(self.name)
        object.__setattr__(self, "args", _check_payload(self.args, "args", DEFAULT_LIMITS)[0])
        _check_call_id(self.id)
        object.__setattr__(self, "thought_signature", _signature(self.thought_signature, DEFAULT_LIMITS))

    def check(self, limits: ContentLimits) -> None:
        """Validate against ``limits``.

        Raises:
            ContentError: reason ``limit_exceeded``.
        """
        _check_payload(self.args, "args", limits)
        if self.thought_signature is not None:
            _signature(self.thought_signature, limits)

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{"type": "function_call", "name": ..., "args": {...}}`` (+ ``id``, signature)."""
        out: dict[str, Any] = {"type": "function_call", "name": self.name, "args": copy_json(self.args)[0]}
        if self.id is not None:
            out["id"] = self.id
        if self.thought_signature is not None:
            out["thought_signature"] = self.thought_signature
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionResponsePart:
    """The result of a function call, returned to the model."""

    type: ClassVar[str] = "function_response"
    name: str
    """The function name."""
    response: dict[str, Any]
    """JSON-safe response object (a private copy; bounded like function-call args)."""
    id: str | None = None
    """The id of the call this answers."""

    def __post_init__(self) -> None:
        check_function_name(self.name)
        object.__setattr__(self, "response", _check_payload(self.response, "response", DEFAULT_LIMITS)[0])
        _check_call_id(self.id)

    def check(self, limits: ContentLimits) -> None:
        """Validate against ``limits``.

        Raises:
            ContentError: reason ``limit_exceeded``.
        """
        _check_payload(self.response, "response", limits)

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{"type": "function_response", "name": ..., "response": {...}}`` (+ ``id``)."""
        out: dict[str, Any] = {"type": "function_response", "name": self.name, "response": copy_json(self.response)[0]}
        if self.id is not None:
            out["id"] = self.id
        return out


Part: TypeAlias = TextPart | InlineDataPart | FileDataPart | FunctionCallPart | FunctionResponsePart
PART_CLASSES: tuple[type, ...] = (TextPart, InlineDataPart, FileDataPart, FunctionCallPart, FunctionResponsePart)

_FIELDS: dict[str, tuple[type, frozenset[str], frozenset[str]]] = {
    # type tag -> (class, required keys, optional keys)
    "text": (TextPart, frozenset({"text"}), frozenset({"thought", "thought_signature"})),
    "inline_data": (InlineDataPart, frozenset({"mime_type", "data"}), frozenset()),
    "file_data": (FileDataPart, frozenset({"mime_type", "uri"}), frozenset()),
    "function_call": (FunctionCallPart, frozenset({"name", "args"}), frozenset({"id", "thought_signature"})),
    "function_response": (FunctionResponsePart, frozenset({"name", "response"}), frozenset({"id"})),
}


def part_from_dict(data: Any, *, limits: ContentLimits | None = None) -> Part:
    """Decode one part from its wire form (unknown keys and unknown types rejected).

    Raises:
        ContentError: reason ``invalid_part``, ``unknown_key``, ``unknown_part_type`` or a field's reason.
    """
    if not isinstance(data, dict):
        raise _type_error("part", "dict", data)
    tag = data.get("type")
    if not isinstance(tag, str) or tag not in _FIELDS:
        raise ContentError("unknown part type", reason="unknown_part_type", details={"field": "type"})
    cls, required, optional = _FIELDS[tag]
    keys = set(data) - {"type"}
    if not required <= keys:
        raise ContentError(
            "part is missing a field",
            reason="invalid_part",
            details={"part_type": tag, "missing": sorted(required - keys)},
        )
    if keys - required - optional:
        raise ContentError(
            "part has an unknown key",
            reason="unknown_key",
            details={"part_type": tag, "count": len(keys - required - optional)},
        )
    if tag == "inline_data" and not isinstance(data["data"], str):
        raise _type_error("data", "str", data["data"])
    part: Part = cls(**{k: v for k, v in data.items() if k != "type"})
    if limits is not None and limits != DEFAULT_LIMITS:
        # Construction already enforced the defaults; only lowered limits need a second pass.
        part.check(limits)
    return part


def text(
    value: str, *, thought: bool = False, thought_signature: str | None = None, limits: ContentLimits | None = None
) -> TextPart:
    """Build a text part.

    Raises:
        ContentError: reason ``invalid_part`` or ``limit_exceeded``.
    """
    part = TextPart(text=value, thought=thought, thought_signature=thought_signature)
    part.check(limits or DEFAULT_LIMITS)
    return part


def inline_data(mime_type: str, data: bytes, *, limits: ContentLimits | None = None) -> InlineDataPart:
    """Build an inline-data part from raw bytes (stored as canonical base64).

    Raises:
        ContentError: reason ``invalid_part``, ``invalid_mime_type`` or ``limit_exceeded``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _type_error("data", "bytes", data)
    active = limits or DEFAULT_LIMITS
    if len(data) > active.max_inline_part_bytes:
        raise _limit_error("data", "max_inline_part_bytes", active.max_inline_part_bytes, len(data))
    return InlineDataPart(mime_type=mime_type, data=base64.b64encode(bytes(data)).decode("ascii"))


def file_data(mime_type: str, uri: str, *, limits: ContentLimits | None = None) -> FileDataPart:
    """Build a file-reference part.

    Raises:
        ContentError: reason ``invalid_part``, ``invalid_mime_type``, ``invalid_uri`` or ``limit_exceeded``.
    """
    part = FileDataPart(mime_type=mime_type, uri=uri)
    part.check(limits or DEFAULT_LIMITS)
    return part


def function_call(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    thought_signature: str | None = None,
    limits: ContentLimits | None = None,
) -> FunctionCallPart:
    """Build a function-call part.

    Raises:
        ContentError: reason ``invalid_part``, ``invalid_function_name``, ``invalid_json`` or ``limit_exceeded``.
    """
    payload: Any = {} if args is None else args
    part = FunctionCallPart(name=name, args=payload, id=id, thought_signature=thought_signature)
    if limits is not None:
        part.check(limits)
    return part


def function_response(
    name: str, response: Mapping[str, Any], *, id: str | None = None, limits: ContentLimits | None = None
) -> FunctionResponsePart:
    """Build a function-response part.

    Raises:
        ContentError: reason ``invalid_part``, ``invalid_function_name``, ``invalid_json`` or ``limit_exceeded``.
    """
    payload: Any = response
    part = FunctionResponsePart(name=name, response=payload, id=id)
    if limits is not None:
        part.check(limits)
    return part
