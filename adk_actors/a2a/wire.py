"""A2A 1.0 wire shapes shared by our server and client (pure: no I/O, no SDK import).

The JSON-RPC binding of A2A 1.0: PascalCase methods, the ``A2A-Version: 1.0`` header, member-discriminated parts
(``text`` | ``raw`` | ``url`` | ``data``, never the 0.3 ``kind``), ``TASK_STATE_*`` and ``ROLE_*`` enum names,
``{"task"}``/``{"message"}``/``{"statusUpdate"}``/``{"artifactUpdate"}`` stream responses, and errors whose
``data`` is a list of ``google.rpc.ErrorInfo`` objects. :func:`check_message` validates an incoming message
with bounds and refuses the 0.3 forms by name, so a peer that still speaks 0.3 gets a clear reason.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Final

from adk_actors.errors import A2aError

__all__ = [
    "ERROR_REASONS",
    "INTERRUPTED",
    "METHODS",
    "PROTOCOL_VERSION",
    "STATES",
    "TERMINAL",
    "VERSION_HEADER",
    "Code",
    "a2a_error",
    "agent_message",
    "check_message",
    "content_of",
    "error_body",
    "new_id",
    "now",
    "status",
    "text_of",
]

PROTOCOL_VERSION: Final = "1.0"
VERSION_HEADER: Final = "A2A-Version"
METHODS: Final = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)
STATES: Final = (
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)
TERMINAL: Final = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})
INTERRUPTED: Final = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
_LEGACY_STATES: Final = frozenset(
    {"submitted", "working", "completed", "failed", "canceled", "rejected", "input-required", "auth-required"}
)


class Code:
    """JSON-RPC error codes of A2A 1.0."""

    PARSE = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL = -32603
    TASK_NOT_FOUND = -32001
    TASK_NOT_CANCELABLE = -32002
    PUSH_NOT_SUPPORTED = -32003
    UNSUPPORTED_OPERATION = -32004
    CONTENT_TYPE_NOT_SUPPORTED = -32005
    INVALID_AGENT_RESPONSE = -32006
    EXTENDED_CARD_NOT_CONFIGURED = -32007
    EXTENSION_REQUIRED = -32008
    VERSION_NOT_SUPPORTED = -32009


ERROR_REASONS: Final = {
    Code.PARSE: "PARSE_ERROR",
    Code.INVALID_REQUEST: "INVALID_REQUEST",
    Code.METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    Code.INVALID_PARAMS: "INVALID_PARAMS",
    Code.INTERNAL: "INTERNAL_ERROR",
    Code.TASK_NOT_FOUND: "TASK_NOT_FOUND",
    Code.TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    Code.PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    Code.UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    Code.CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    Code.INVALID_AGENT_RESPONSE: "INVALID_AGENT_RESPONSE",
    Code.EXTENDED_CARD_NOT_CONFIGURED: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    Code.EXTENSION_REQUIRED: "EXTENSION_SUPPORT_REQUIRED",
    Code.VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}
"""The ``google.rpc.ErrorInfo`` reason of each code (what the official SDK sends)."""

_ID_RE = re.compile(r"[\x21-\x7e]{1,256}")
_MEDIA_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
MAX_PARTS: Final = 256
MAX_ID_CHARS: Final = 256


def a2a_error(code: int, message: str, reason: str, **details: Any) -> A2aError:
    """An :class:`A2aError` carrying the protocol ``code`` (and our ``reason``) for the error body."""
    return A2aError(message, reason=reason, details={"code": code, **details})


def error_body(request_id: Any, error: A2aError) -> dict[str, Any]:
    """The JSON-RPC error response for ``error`` (its ``details["code"]``, else internal)."""
    code = error.details.get("code")
    if not isinstance(code, int) or code not in ERROR_REASONS:
        code = Code.INTERNAL
    metadata = {"reason": error.reason}
    for key in ("field", "limit", "method", "header"):
        value = error.details.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            metadata[key] = str(value)
    return {
        "jsonrpc": "2.0",
        "id": request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None,
        "error": {
            "code": code,
            "message": error.message[:256],
            "data": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": ERROR_REASONS[code],
                    "domain": "a2a-protocol.org",
                    "metadata": metadata,
                }
            ],
        },
    }


def now() -> str:
    """The current time as A2A writes it (ISO-8601 UTC, milliseconds, ``Z``)."""
    stamp = datetime.datetime.now(datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def new_id() -> str:
    return str(uuid.uuid4())


def status(state: str, message: Mapping[str, Any] | None = None, timestamp: str | None = None) -> dict[str, Any]:
    """A ``TaskStatus``."""
    out: dict[str, Any] = {"state": state, "timestamp": timestamp or now()}
    if message is not None:
        out["message"] = dict(message)
    return out


def agent_message(parts: list[dict[str, Any]], *, context_id: str, task_id: str | None = None) -> dict[str, Any]:
    """A ``ROLE_AGENT`` message with a fresh id."""
    message: dict[str, Any] = {"messageId": new_id(), "role": "ROLE_AGENT", "parts": parts, "contextId": context_id}
    if task_id:
        message["taskId"] = task_id
    return message


def _invalid(reason: str, message: str, field: str) -> A2aError:
    return a2a_error(Code.INVALID_PARAMS, message, reason, field=field)


def _check_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise _invalid("invalid_id", f"{field} must be 1-{MAX_ID_CHARS} printable ASCII characters", field)
    return value


def _check_part(part: Any, index: int, budget: list[int]) -> dict[str, Any]:
    field = f"parts[{index}]"
    if not isinstance(part, dict):
        raise _invalid("invalid_part", "a part is an object", field)
    if "kind" in part:
        raise _invalid("pre_1_0_part", "parts have no 'kind' in A2A 1.0 (use text, raw, url or data)", field)
    members = [m for m in ("text", "raw", "url", "data") if m in part]
    if len(members) != 1:
        raise _invalid("invalid_part", "a part has exactly one of text, raw, url, data", field)
    out: dict[str, Any] = {}
    member = members[0]
    value = part[member]
    if member == "text":
        if not isinstance(value, str):
            raise _invalid("invalid_part", "text must be a string", field)
        size = len(value.encode("utf-8", "surrogatepass"))
    elif member == "raw":
        if not isinstance(value, str):
            raise _invalid("invalid_part", "raw must be base64", field)
        try:
            size = len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            raise _invalid("invalid_part", "raw must be base64", field) from None
    elif member == "url":
        if not isinstance(value, str) or not 0 < len(value) <= 2048 or not value.isprintable():
            raise _invalid("invalid_part", "url must be an absolute URL", field)
        size = len(value)
    else:
        try:
            size = len(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError):
            raise _invalid("invalid_part", "data must be a JSON value", field) from None
    out[member] = value
    media = part.get("mediaType")
    if media not in (None, ""):
        if not isinstance(media, str) or not _MEDIA_RE.fullmatch(media.lower()):
            raise _invalid("invalid_part", "mediaType must be type/subtype", field)
        out["mediaType"] = media.lower()
    name = part.get("filename")
    if name not in (None, ""):
        if not isinstance(name, str) or len(name) > 256 or not name.isprintable():
            raise _invalid("invalid_part", "filename must be a short printable string", field)
        out["filename"] = name
    if "metadata" in part and part["metadata"] is not None:
        if not isinstance(part["metadata"], dict):
            raise _invalid("invalid_part", "metadata must be an object", field)
        out["metadata"] = part["metadata"]
    budget[0] -= size
    if budget[0] < 0:
        raise a2a_error(Code.INVALID_PARAMS, "the message is too large", "message_too_large", field=field)
    return out


def check_message(message: Any, *, max_bytes: int, field: str = "message") -> dict[str, Any]:
    """Validate an incoming ``Message`` and return its normalized copy (unknown members dropped).

    Raises:
        A2aError: ``INVALID_PARAMS`` (-32602) with reasons ``invalid_message``, ``invalid_id``, ``invalid_role``,
            ``pre_1_0_role``, ``invalid_part``, ``pre_1_0_part``, ``too_many_parts``, ``message_too_large``.
    """
    if not isinstance(message, dict):
        raise _invalid("invalid_message", "message must be an object", field)
    if "kind" in message:
        raise _invalid("pre_1_0_message", "messages have no 'kind' in A2A 1.0", field)
    out: dict[str, Any] = {"messageId": _check_id(message.get("messageId"), "messageId")}
    role = message.get("role")
    if role in ("user", "agent"):
        raise _invalid("pre_1_0_role", "roles are ROLE_USER or ROLE_AGENT in A2A 1.0", "role")
    if role not in ("ROLE_USER", "ROLE_AGENT"):
        raise _invalid("invalid_role", "role must be ROLE_USER or ROLE_AGENT", "role")
    out["role"] = role
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _invalid("invalid_message", "a message has at least one part", "parts")
    if len(parts) > MAX_PARTS:
        raise a2a_error(Code.INVALID_PARAMS, "too many parts", "too_many_parts", field="parts", limit=MAX_PARTS)
    budget = [max_bytes]
    out["parts"] = [_check_part(p, i, budget) for i, p in enumerate(parts)]
    for key in ("contextId", "taskId"):
        if message.get(key) not in (None, ""):
            out[key] = _check_id(message[key], key)
    if message.get("metadata") is not None:
        if not isinstance(message["metadata"], dict):
            raise _invalid("invalid_message", "metadata must be an object", "metadata")
        out["metadata"] = message["metadata"]
    refs = message.get("referenceTaskIds")
    if refs:
        if not isinstance(refs, list) or len(refs) > 64:
            raise _invalid("invalid_message", "referenceTaskIds must be a short list", "referenceTaskIds")
        out["referenceTaskIds"] = [_check_id(r, "referenceTaskIds") for r in refs]
    return out


def check_state(value: Any, field: str = "status") -> str:
    """A ``TaskState`` name (the 0.3 lowercase names are refused as such).

    Raises:
        A2aError: ``INVALID_PARAMS`` with ``pre_1_0_state`` or ``invalid_state``.
    """
    if value in _LEGACY_STATES:
        raise _invalid("pre_1_0_state", "task states are TASK_STATE_* names in A2A 1.0", field)
    if value not in STATES:
        raise _invalid("invalid_state", "not a task state", field)
    return str(value)


def text_of(parts: list[dict[str, Any]]) -> str:
    """The text parts joined by newlines (data parts as compact JSON)."""
    out = []
    for part in parts:
        if "text" in part:
            out.append(part["text"])
        elif "data" in part:
            out.append(json.dumps(part["data"], separators=(",", ":"), ensure_ascii=False))
    return "\n".join(out)


def content_of(parts: list[dict[str, Any]]) -> str | dict[str, Any]:
    """Our agent input for an A2A message's parts: plain text when it is only text/data, else content."""
    if all("text" in p or "data" in p for p in parts):
        return text_of(parts)
    converted: list[dict[str, Any]] = []
    for part in parts:
        if "raw" in part:
            media = part.get("mediaType") or "application/octet-stream"
            converted.append({"type": "inline_data", "mime_type": media, "data": part["raw"]})
        elif "url" in part:
            media = part.get("mediaType") or "application/octet-stream"
            converted.append({"type": "file_data", "mime_type": media, "uri": part["url"]})
        else:
            converted.append({"type": "text", "text": text_of([part])})
    return {"schema_version": 1, "parts": converted}
