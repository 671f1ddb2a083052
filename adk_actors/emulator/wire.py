"""Wire-level helpers shared by the emulator: error bodies, base64, durations, timestamps, the fake tokenizer."""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import math
import re
import secrets
import string
from typing import Any

STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

DEFAULT_MESSAGES: dict[int, str] = {
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    502: "Bad gateway.",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
    400: "Request contains an invalid argument.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
}

BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class ApiError(Exception):
    """An error answered as a Google-style JSON error body ``{"error": {code, message, status, details?}}``."""

    def __init__(self, code: int, message: str, status: str | None = None, details: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or STATUS_NAMES.get(code, "UNKNOWN")
        self.details = details

    def body(self) -> dict[str, Any]:
        """Return the JSON-serialisable error body."""
        err: dict[str, Any] = {"code": self.code, "message": self.message, "status": self.status}
        if self.details:
            err["details"] = self.details
        return {"error": err}


def invalid_argument(
    message: str, field: str | None = None, violations: list[dict[str, str]] | None = None
) -> ApiError:
    """400 INVALID_ARGUMENT, optionally with a ``google.rpc.BadRequest`` detail."""
    if violations is None and field is not None:
        violations = [{"field": field, "description": message}]
    details = [{"@type": BAD_REQUEST_TYPE, "fieldViolations": violations}] if violations else None
    return ApiError(400, message, "INVALID_ARGUMENT", details)


def api_key_invalid() -> ApiError:
    """400 API_KEY_INVALID as the real service answers a wrong key."""
    return ApiError(
        400,
        "API key not valid. Please pass a valid API key.",
        "INVALID_ARGUMENT",
        [
            {
                "@type": ERROR_INFO_TYPE,
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                "locale": "en-US",
                "message": "API key not valid. Please pass a valid API key.",
            },
        ],
    )


def api_key_missing() -> ApiError:
    """403 PERMISSION_DENIED for callers without any API key."""
    return ApiError(
        403,
        "Method doesn't allow unregistered callers (callers without established identity). "
        "Please use API Key or other form of API consumer identity to call this API.",
        "PERMISSION_DENIED",
    )


def quota_error(model: str, retry_delay: str = "1.5s", per_day: bool = False) -> ApiError:
    """429 RESOURCE_EXHAUSTED with QuotaFailure + Help + RetryInfo, like the real free-tier quota error."""
    seconds = parse_duration(retry_delay)
    pretty = f"{seconds:.1f}s" if seconds != int(seconds) else f"{int(seconds)}s"
    quota_id = (
        "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
        if per_day
        else "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    )
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    limit = "250" if per_day else "10"
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more information on this "
        "error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: "
        f"https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: {metric}, limit: {limit}, model: {model}"
        f"\nPlease retry in {pretty}."
    )
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": metric,
                    "quotaId": quota_id,
                    "quotaDimensions": {"location": "global", "model": model},
                    "quotaValue": limit,
                }
            ],
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [
                {
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                }
            ],
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format_duration(seconds)},
    ]
    return ApiError(429, message, "RESOURCE_EXHAUSTED", details)


# ---------------------------------------------------------------------------------------------------------------- json


def dumps_pretty(obj: Any) -> bytes:
    """Pretty-printed JSON (2-space indent) as the real service sends for non-streaming replies."""
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def dumps_line(obj: Any) -> str:
    """Single-line JSON for SSE payloads."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def canonical_json(obj: Any) -> str:
    """Key-sorted compact JSON used for matching in replay mode."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# -------------------------------------------------------------------------------------------------------------- base64

_B64_RE = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")


def b64decode_any(value: str) -> bytes:
    """Decode standard or URL-safe base64, with or without padding. Raises ``ValueError`` when invalid."""
    if not isinstance(value, str) or not _B64_RE.match(value):
        raise ValueError("invalid base64")
    s = value.rstrip("=").replace("-", "+").replace("_", "/")
    if len(s) % 4 == 1:
        raise ValueError("invalid base64 length")
    s += "=" * (-len(s) % 4)
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(str(exc)) from exc


def b64encode_std(data: bytes) -> str:
    """Standard-alphabet padded base64, as the server sends."""
    return base64.b64encode(data).decode("ascii")


# ------------------------------------------------------------------------------------------------- durations and times

_DURATION_RE = re.compile(r"^(-?\d+)(?:\.(\d{1,9}))?s$")


def parse_duration(value: str) -> float:
    """Parse a protobuf duration string like ``"3600s"`` or ``"1.5s"``. Raises ``ValueError``."""
    if not isinstance(value, str):
        raise ValueError("duration must be a string")
    m = _DURATION_RE.match(value.strip())
    if not m:
        raise ValueError(f"bad duration {value!r}")
    whole = int(m.group(1))
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return whole + frac if whole >= 0 else whole - frac


def format_duration(seconds: float) -> str:
    """Format seconds as a protobuf duration string (``"2s"``, ``"1.500s"`` style trimmed to ``"1.5s"``)."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.9f}".rstrip("0") + "s"


def parse_timestamp(value: str) -> _dt.datetime:
    """Parse an RFC 3339 timestamp (``Z`` or offset, up to nanoseconds). Raises ``ValueError``."""
    if not isinstance(value, str):
        raise ValueError("timestamp must be a string")
    m = re.match(r"^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$", value.strip())
    if not m:
        raise ValueError(f"bad timestamp {value!r}")
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    tz = "+00:00" if m.group(3) in ("Z", "z") else m.group(3)
    return _dt.datetime.fromisoformat(f"{m.group(1).replace('t', 'T')}.{frac}{tz}").astimezone(_dt.UTC)


def format_timestamp(ts: _dt.datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``."""
    return ts.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utcnow() -> _dt.datetime:
    """Current UTC time (aware)."""
    return _dt.datetime.now(_dt.UTC)


# ---------------------------------------------------------------------------------------------------------- ids, tokens

_ID_ALPHABET = string.ascii_letters + string.digits
_LOWER_ALNUM = string.ascii_lowercase + string.digits


def response_id() -> str:
    """A responseId-looking random string (23 chars, URL-safe)."""
    return "".join(secrets.choice(_ID_ALPHABET + "-_") for _ in range(23))


def call_id() -> str:
    """A functionCall id (8 lowercase alnum chars, like Gemini 3)."""
    return "".join(secrets.choice(_LOWER_ALNUM) for _ in range(8))


def cache_id() -> str:
    """A cachedContents id (lowercase letters + digits)."""
    return "".join(secrets.choice(_LOWER_ALNUM) for _ in range(40))


def new_signature() -> bytes:
    """An opaque thought signature. Starts with 0xFB 0xFF 0xBF so its standard and URL-safe encodings differ."""
    return b"\xfb\xff\xbf" + secrets.token_bytes(45)


def text_tokens(text: str) -> int:
    """The emulator's stable fake tokenizer: ``ceil(len(text) / 4)`` characters per token."""
    return math.ceil(len(text) / 4) if text else 0


MEDIA_TOKENS = 258


def part_tokens(part: dict[str, Any]) -> int:
    """Tokens of one (normalised, camelCase) part."""
    n = 0
    if "text" in part and isinstance(part["text"], str):
        n += text_tokens(part["text"])
    if "inlineData" in part or "fileData" in part:
        n += MEDIA_TOKENS
    if "functionCall" in part:
        fc = part["functionCall"] or {}
        n += text_tokens(str(fc.get("name", "")) + json.dumps(fc.get("args", {}), sort_keys=True))
    if "functionResponse" in part:
        fr = part["functionResponse"] or {}
        n += text_tokens(str(fr.get("name", "")) + json.dumps(fr.get("response", {}), sort_keys=True))
    for key in ("executableCode", "codeExecutionResult", "toolCall", "toolResponse"):
        if key in part:
            n += text_tokens(json.dumps(part[key], sort_keys=True))
    return n


def contents_tokens(contents: list[dict[str, Any]] | None) -> int:
    """Tokens of a list of normalised contents."""
    return sum(part_tokens(p) for c in contents or [] for p in (c.get("parts") or []))


def tools_tokens(tools: list[dict[str, Any]] | None) -> int:
    """Tokens charged for declared tools: the compact JSON of each declaration."""
    return text_tokens(json.dumps(tools, sort_keys=True)) if tools else 0
