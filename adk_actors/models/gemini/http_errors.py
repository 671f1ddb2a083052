"""Gemini error bodies → typed :mod:`adk_actors.errors` exceptions (never carrying the API key)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from adk_actors.errors import ProviderHttpError, RateLimited
from adk_actors.secrets import scrub_text

__all__ = ["RETRYABLE_STATUSES", "error_from_body", "error_from_payload", "parse_duration"]

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_REASONS = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    408: "request_timeout",
    409: "aborted",
    429: "rate_limited",
    500: "internal",
    502: "bad_gateway",
    503: "unavailable",
    504: "deadline_exceeded",
}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d{1,9})?)s\s*$")
_MESSAGE_DELAY_RE = re.compile(r"retry in (\d+(?:\.\d+)?)\s*s", re.IGNORECASE)
_MAX_MESSAGE = 1024


def parse_duration(value: Any) -> float | None:
    """A protobuf JSON duration (``"26s"``, ``"57.238747106s"``) in seconds, ``None`` when malformed."""
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match:
            return float(match.group(1))
    return None


def _unwrap(payload: Any) -> Mapping[str, Any] | None:
    # Some Google front ends wrap the body in a one-element array.
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    if isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping):
        return payload["error"]
    return None


def error_from_payload(
    status: int, payload: Any, secrets: tuple[str, ...] = (), *, midstream: bool = False
) -> ProviderHttpError:
    """The typed error for an HTTP ``status`` and a parsed Gemini error body (or in-stream error event).

    ``details`` holds ``status``, ``google_status``, ``message`` (secrets scrubbed, bounded), and when present
    ``retry_delay_s`` (``RetryInfo.retryDelay``), ``error_reason`` (``ErrorInfo.reason``), ``quota_ids`` and
    ``field_violations``.
    """
    err = _unwrap(payload) or {}
    code = err.get("code")
    if midstream and isinstance(code, int) and not isinstance(code, bool):
        status = code
    details: dict[str, Any] = {"status": status}
    if isinstance(err.get("status"), str):
        details["google_status"] = err["status"]
    message = err.get("message")
    if isinstance(message, str):
        details["message"] = scrub_text(message, secrets)[:_MAX_MESSAGE]
    for item in err.get("details") or ():
        if not isinstance(item, Mapping):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("google.rpc.RetryInfo"):
            delay = parse_duration(item.get("retryDelay", item.get("retry_delay")))
            if delay is not None:
                details["retry_delay_s"] = delay
        elif kind.endswith("google.rpc.ErrorInfo") and isinstance(item.get("reason"), str):
            details["error_reason"] = item["reason"]
        elif kind.endswith("google.rpc.QuotaFailure"):
            ids = [v.get("quotaId") for v in item.get("violations") or () if isinstance(v, Mapping)]
            details["quota_ids"] = [i for i in ids if isinstance(i, str)][:16]
        elif kind.endswith("google.rpc.BadRequest"):
            fields = [v.get("field") for v in item.get("fieldViolations") or () if isinstance(v, Mapping)]
            details["field_violations"] = [f for f in fields if isinstance(f, str)][:16]
    if "retry_delay_s" not in details and status == 429 and isinstance(message, str):
        match = _MESSAGE_DELAY_RE.search(message)
        if match:
            details["retry_delay_s"] = float(match.group(1))
    if midstream:
        details["midstream"] = True
    reason = _REASONS.get(status, "http_error")
    if details.get("error_reason") == "API_KEY_INVALID":
        reason = "invalid_api_key"
    cls = RateLimited if status == 429 else ProviderHttpError
    text = details.get("message") or f"Gemini answered HTTP {status}"
    return cls(f"HTTP {status}: {text}", reason=reason, details=details)


def error_from_body(status: int, body: bytes, secrets: tuple[str, ...] = ()) -> ProviderHttpError:
    """Like :func:`error_from_payload` for a raw response body that may not be JSON at all."""
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        payload = None
    return error_from_payload(status, payload, secrets)
