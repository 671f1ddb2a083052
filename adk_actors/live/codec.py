"""The Gemini Live wire codec: client messages out, server frames in, close frames decoded.

Client messages are dicts with exactly one top-level member, camelCase only, base64 in the standard alphabet, and
only the current ``realtimeInput.audio`` / ``realtimeInput.video`` fields (never the superseded ``mediaChunks``).

Server frames arrive as UTF-8 JSON in binary (the real service) or text frames, in camelCase or the proto
snake_case spelling. :func:`decode_server_frame` checks a frame and turns it into :class:`LiveItem` values in wire
order. A frame may carry several items (``serverContent`` with a model turn and ``turnComplete``, plus
``usageMetadata``): model-turn parts, grounding, transcriptions, ``interrupted``, ``generation_complete``,
``turn_complete``, then ``usage``. An unknown top-level member, or a known member of the wrong shape, is a
``malformed_frame``; unknown fields *inside* a known member are ignored, so a field the service adds later does not
end a session. Voice-activity signals, transcription language codes and ``interactionStatus`` are checked but not
turned into items.
"""

from __future__ import annotations

import base64
import codecs
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adk_actors.content.canonical import canonical_dumps, canonical_loads
from adk_actors.errors import LiveError, ValidationError, json_safe
from adk_actors.live.media import AudioChunk, VideoFrame
from adk_actors.models.gemini.wire import b64_bytes
from adk_actors.secrets import scrub_text

__all__ = [
    "INTERNAL_KINDS",
    "ITEM_KINDS",
    "MAX_FRAME_BYTES",
    "MAX_TEXT_BYTES",
    "LiveItem",
    "activity_end_message",
    "activity_start_message",
    "audio_message",
    "audio_stream_end_message",
    "decode_close",
    "decode_server_frame",
    "text_message",
    "tool_response_message",
    "video_message",
]

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest server frame decoded."""
MAX_TEXT_BYTES = 1024 * 1024
"""Largest realtime text input, in UTF-8 bytes."""
ITEM_KINDS = frozenset(
    {
        "setup_complete",
        "audio",
        "text",
        "thought",
        "output_transcription",
        "input_transcription",
        "tool_call",
        "tool_call_cancellation",
        "interrupted",
        "generation_complete",
        "turn_complete",
        "usage",
        "grounding",
        "go_away",
        "resumption_update",
    }
)
"""Every kind :func:`decode_server_frame` produces."""
INTERNAL_KINDS = frozenset({"setup_complete", "resumption_update"})
"""Kinds the session consumes itself; a resumption handle is never published."""

_MAX_ID = 256
_MAX_CALLS = 1024
_MAX_RESPONSES = 128
_FUNCTION_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
_ENUM_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}$")
_HANDLE_RE = re.compile(r"^[\x21-\x7e]{1,8192}$")
_DURATION_RE = re.compile(r"^(\d{1,12})(?:\.(\d{1,9}))?s$")
_RATE_RE = re.compile(r"^audio/pcm(?:;\s*rate=(\d{4,6}))?$")
_SCHEDULING = {"silent": "SILENT", "when_idle": "WHEN_IDLE", "interrupt": "INTERRUPT"}
_ONEOF = (
    "setupComplete",
    "serverContent",
    "toolCall",
    "toolCallCancellation",
    "goAway",
    "sessionResumptionUpdate",
    "voiceActivity",
    "voiceActivityDetectionSignal",
)
_TOP = (*_ONEOF, "usageMetadata")


def _snake(camel: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", camel).lower()


_TOP_SPELLINGS = {spelling: camel for camel in _TOP for spelling in (camel, _snake(camel))}


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveItem:
    """One decoded piece of a server frame."""

    kind: str
    """One of :data:`ITEM_KINDS`."""
    payload: dict[str, Any] = field(default_factory=dict, hash=False)
    """JSON-safe fields of the item (for ``audio``: ``mime_type``, ``rate``, ``bytes``)."""
    data: bytes | None = field(default=None, repr=False)
    """The PCM samples of an ``audio`` item; ``None`` for every other kind."""


# ---- client messages -------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def text_message(text: str) -> dict[str, Any]:
    """``{"realtimeInput": {"text": ...}}``: typed user input.

    Raises:
        LiveError: reason ``invalid_text`` (not a non-empty string of valid Unicode without NUL, or over 1 MiB).
    """
    ok = isinstance(text, str) and text and "\x00" not in text and len(text) <= MAX_TEXT_BYTES
    try:
        ok = ok and len(text.encode("utf-8")) <= MAX_TEXT_BYTES
    except UnicodeEncodeError:
        ok = False
    if not ok:
        raise LiveError(
            "text input must be a non-empty string of valid Unicode without NUL, at most 1 MiB",
            reason="invalid_text",
            details={"type": type(text).__name__, "max_bytes": MAX_TEXT_BYTES},
        )
    return {"realtimeInput": {"text": text}}


def audio_message(chunk: AudioChunk) -> dict[str, Any]:
    """``{"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=N", "data": b64}}}``.

    Raises:
        LiveError: reason ``invalid_audio`` when ``chunk`` is not an :class:`AudioChunk` (see ``media.audio_pcm``).
    """
    if not isinstance(chunk, AudioChunk):
        raise LiveError("audio input must be an AudioChunk (media.audio_pcm)", reason="invalid_audio")
    return {"realtimeInput": {"audio": {"mimeType": chunk.mime_type, "data": _b64(chunk.data)}}}


def video_message(frame: VideoFrame) -> dict[str, Any]:
    """``{"realtimeInput": {"video": {"mimeType": "image/jpeg"|"image/png", "data": b64}}}``.

    Raises:
        LiveError: reason ``invalid_video_frame`` when ``frame`` is not a :class:`VideoFrame`.
    """
    if not isinstance(frame, VideoFrame):
        raise LiveError("video input must be a VideoFrame (media.video_frame)", reason="invalid_video_frame")
    return {"realtimeInput": {"video": {"mimeType": frame.mime_type, "data": _b64(frame.data)}}}


def activity_start_message() -> dict[str, Any]:
    """``{"realtimeInput": {"activityStart": {}}}`` (manual activity detection only)."""
    return {"realtimeInput": {"activityStart": {}}}


def activity_end_message() -> dict[str, Any]:
    """``{"realtimeInput": {"activityEnd": {}}}`` (manual activity detection only)."""
    return {"realtimeInput": {"activityEnd": {}}}


def audio_stream_end_message() -> dict[str, Any]:
    """``{"realtimeInput": {"audioStreamEnd": true}}``: the microphone stopped (automatic detection only)."""
    return {"realtimeInput": {"audioStreamEnd": True}}


def _bad_response(index: int, problem: str) -> LiveError:
    return LiveError(
        f"tool response {index}: {problem}",
        reason="invalid_tool_response",
        details={"index": index, "problem": problem},
    )


def tool_response_message(responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"toolResponse": {"functionResponses": [...]}}`` from ``{"id", "name", "response", "scheduling"?}`` maps.

    ``response`` is a JSON object (conventionally ``{"result": ...}`` or ``{"error": ...}``); ``scheduling``
    (``silent``, ``when_idle``, ``interrupt``) applies to non-blocking functions.

    Raises:
        LiveError: reason ``invalid_tool_response`` (empty or over 128 responses, a missing or malformed id or
            name, a response that is not a JSON-safe object, an unknown key).
    """
    if isinstance(responses, str | bytes | Mapping) or not isinstance(responses, Sequence):
        raise _bad_response(-1, "expected a list of responses")
    if not 1 <= len(responses) <= _MAX_RESPONSES:
        raise _bad_response(-1, f"expected 1 to {_MAX_RESPONSES} responses")
    out = []
    for i, item in enumerate(responses):
        if not isinstance(item, Mapping):
            raise _bad_response(i, "expected a mapping")
        if any(key not in ("id", "name", "response", "scheduling") for key in item):
            raise _bad_response(i, "unknown key (allowed: id, name, response, scheduling)")
        call_id, name, response = item.get("id"), item.get("name"), item.get("response")
        if not isinstance(call_id, str) or not 0 < len(call_id) <= _MAX_ID or not call_id.isprintable():
            raise _bad_response(i, "id must be the call's non-empty id")
        if not isinstance(name, str) or not _FUNCTION_NAME_RE.match(name):
            raise _bad_response(i, "name must be the called function's name")
        if not isinstance(response, Mapping):
            raise _bad_response(i, "response must be a JSON object")
        try:
            copy = json.loads(canonical_dumps(dict(response)))
        except (ValidationError, TypeError, ValueError, RecursionError):
            raise _bad_response(i, "response must be JSON-safe") from None
        wire: dict[str, Any] = {"id": call_id, "name": name, "response": copy}
        if "scheduling" in item:
            scheduling = item["scheduling"]
            if not isinstance(scheduling, str) or scheduling not in _SCHEDULING:
                raise _bad_response(i, "scheduling must be silent, when_idle or interrupt")
            wire["scheduling"] = _SCHEDULING[scheduling]
        out.append(wire)
    return {"toolResponse": {"functionResponses": out}}


# ---- server frames ---------------------------------------------------------------------------------------------


def _malformed(problem: str, **details: Any) -> LiveError:
    return LiveError(
        f"malformed Live server frame: {problem}", reason="malformed_frame", details={"problem": problem, **details}
    )


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    """A member in either spelling (``None`` when absent or null); both spellings at once is ambiguous."""
    snake = _snake(camel)
    if camel in obj:
        if snake != camel and snake in obj:
            raise _malformed("a field is present in both spellings", field=camel)
        return obj[camel]
    return obj.get(snake)


def _obj(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed("expected an object", field=name)
    return value


def _str(value: Any, name: str, max_len: int = MAX_FRAME_BYTES) -> str:
    if not isinstance(value, str) or len(value) > max_len:
        raise _malformed("expected a bounded string", field=name)
    return value


def _opt_bool(value: Any, name: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _malformed("expected a boolean", field=name)
    return value


def _count(value: Any, name: str) -> int:
    # proto int64 fields arrive as decimal strings in JSON; int32 ones as numbers (integral floats from some encoders)
    if isinstance(value, str) and value.isdigit() and len(value) <= 19:
        return int(value)
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**63:
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise _malformed("expected a non-negative integer", field=name)
    return value


def _check_enum(value: Any, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not _ENUM_RE.match(value)):
        raise _malformed("expected an enum name", field=name)
    return value


def _check_duration(value: Any, name: str) -> int:
    match = _DURATION_RE.match(value) if isinstance(value, str) else None
    if match is None:
        raise _malformed("expected a duration such as '50s'", field=name)
    frac = (match.group(2) or "").ljust(3, "0")[:3]
    return int(match.group(1)) * 1000 + int(frac)


def _parts(turn: dict[str, Any], include_thoughts: bool) -> list[LiveItem]:
    parts = _get(turn, "parts")
    if parts is None:
        return []
    if not isinstance(parts, list):
        raise _malformed("expected a list", field="serverContent.modelTurn.parts")
    role = _get(turn, "role")
    if role is not None:
        _str(role, "serverContent.modelTurn.role", 32)
    items = []
    for part in parts:
        part = _obj(part, "serverContent.modelTurn.parts[]")
        thought = _opt_bool(_get(part, "thought"), "part.thought")
        text, inline = _get(part, "text"), _get(part, "inlineData")
        if text is not None:
            _str(text, "part.text")
            if thought and include_thoughts and text:
                items.append(LiveItem(kind="thought", payload={"text": text}))
            elif not thought and text:
                items.append(LiveItem(kind="text", payload={"text": text}))
        elif inline is not None:
            audio = _audio(_obj(inline, "part.inlineData"))
            if audio.data:
                items.append(audio)
        # Other parts (a bare thought signature, code execution the session never enables) carry nothing to show.
    return items


def _audio(inline: dict[str, Any]) -> LiveItem:
    mime = _str(_get(inline, "mimeType"), "inlineData.mimeType", 128)
    match = _RATE_RE.match(mime.lower())
    if match is None:
        raise _malformed("only audio/pcm inline data is expected from a Live model", field="inlineData.mimeType")
    rate = int(match.group(1) or 24000)
    if not 8000 <= rate <= 48000:
        raise _malformed("audio sample rate out of range", field="inlineData.mimeType")
    try:
        data = b64_bytes(_str(_get(inline, "data") or "", "inlineData.data"))
    except ValueError:
        raise _malformed("audio data is not base64", field="inlineData.data") from None
    if len(data) % 2:
        raise _malformed("odd byte length for 16-bit PCM", field="inlineData.data")
    return LiveItem(kind="audio", payload={"mime_type": mime, "rate": rate, "bytes": len(data)}, data=data)


def _transcription(value: Any, name: str) -> dict[str, Any] | None:
    spec = _obj(value, name)
    text = _get(spec, "text")
    text = "" if text is None else _str(text, f"{name}.text")
    finished = _opt_bool(_get(spec, "finished"), f"{name}.finished")
    language = _get(spec, "languageCode")
    if language is not None and (not isinstance(language, str) or not _LANGUAGE_RE.match(language)):
        raise _malformed("expected a language code", field=f"{name}.languageCode")
    if not text and finished is None:
        return None
    payload: dict[str, Any] = {"text": text}
    if finished is not None:
        payload["finished"] = finished
    return payload


def _server_content(content: dict[str, Any], include_thoughts: bool) -> list[LiveItem]:
    items: list[LiveItem] = []
    turn = _get(content, "modelTurn")
    if turn is not None:
        items.extend(_parts(_obj(turn, "serverContent.modelTurn"), include_thoughts))
    grounding = _get(content, "groundingMetadata")
    if grounding is not None:
        items.append(LiveItem(kind="grounding", payload={"metadata": json_safe(_obj(grounding, "groundingMetadata"))}))
    if _get(content, "urlContextMetadata") is not None:
        _obj(_get(content, "urlContextMetadata"), "urlContextMetadata")
    for camel, kind, interim in (
        ("inputTranscription", "input_transcription", False),
        ("interimInputTranscription", "input_transcription", True),
        ("outputTranscription", "output_transcription", None),
    ):
        value = _get(content, camel)
        payload = None if value is None else _transcription(value, f"serverContent.{camel}")
        if payload is not None:
            if interim is not None:
                payload["interim"] = interim
            items.append(LiveItem(kind=kind, payload=payload))
    if _opt_bool(_get(content, "interrupted"), "serverContent.interrupted"):
        items.append(LiveItem(kind="interrupted"))
    if _opt_bool(_get(content, "generationComplete"), "serverContent.generationComplete"):
        items.append(LiveItem(kind="generation_complete"))
    reason = _check_enum(_get(content, "turnCompleteReason"), "serverContent.turnCompleteReason")
    waiting = _opt_bool(_get(content, "waitingForInput"), "serverContent.waitingForInput")
    _check_enum(_get(content, "interactionStatus"), "serverContent.interactionStatus")
    if _opt_bool(_get(content, "turnComplete"), "serverContent.turnComplete"):
        done: dict[str, Any] = {}
        if reason is not None:
            done["reason"] = reason
        if waiting is not None:
            done["waiting_for_input"] = waiting
        items.append(LiveItem(kind="turn_complete", payload=done))
    return items


def _tool_call(value: Any) -> LiveItem:
    calls = _get(_obj(value, "toolCall"), "functionCalls")
    if not isinstance(calls, list) or not 1 <= len(calls) <= _MAX_CALLS:
        raise _malformed("expected a non-empty list of function calls", field="toolCall.functionCalls")
    out = []
    for call in calls:
        call = _obj(call, "toolCall.functionCalls[]")
        call_id = _str(_get(call, "id"), "functionCall.id", _MAX_ID)
        name = _get(call, "name")
        if not call_id or not isinstance(name, str) or not _FUNCTION_NAME_RE.match(name):
            raise _malformed("a function call needs an id and a valid name", field="toolCall.functionCalls[]")
        args = _get(call, "args")
        out.append({"id": call_id, "name": name, "args": {} if args is None else _obj(args, "functionCall.args")})
    return LiveItem(kind="tool_call", payload={"calls": out})


def _cancellation(value: Any) -> LiveItem:
    ids = _get(_obj(value, "toolCallCancellation"), "ids")
    if not isinstance(ids, list) or not 1 <= len(ids) <= _MAX_CALLS:
        raise _malformed("expected a non-empty list of ids", field="toolCallCancellation.ids")
    return LiveItem(
        kind="tool_call_cancellation", payload={"ids": [_str(i, "toolCallCancellation.ids[]", _MAX_ID) for i in ids]}
    )


def _resumption(value: Any) -> LiveItem:
    spec = _obj(value, "sessionResumptionUpdate")
    handle = _get(spec, "newHandle") or ""
    if handle and (not isinstance(handle, str) or not _HANDLE_RE.match(handle)):
        raise _malformed("malformed resumption handle", field="sessionResumptionUpdate.newHandle")
    resumable = bool(_opt_bool(_get(spec, "resumable"), "sessionResumptionUpdate.resumable"))
    index = _get(spec, "lastConsumedClientMessageIndex")
    if index is not None:
        _count(index, "sessionResumptionUpdate.lastConsumedClientMessageIndex")
    return LiveItem(kind="resumption_update", payload={"resumable": resumable, "handle": handle})


_USAGE_COUNTS = (
    ("promptTokenCount", "prompt_tokens"),
    ("responseTokenCount", "response_tokens"),
    ("totalTokenCount", "total_tokens"),
    ("cachedContentTokenCount", "cached_content_tokens"),
    ("thoughtsTokenCount", "thoughts_tokens"),
    ("toolUsePromptTokenCount", "tool_use_prompt_tokens"),
)
_USAGE_DETAILS = (
    ("promptTokensDetails", "prompt_tokens_details"),
    ("responseTokensDetails", "response_tokens_details"),
    ("cacheTokensDetails", "cache_tokens_details"),
    ("toolUsePromptTokensDetails", "tool_use_prompt_tokens_details"),
)


def _usage(value: Any) -> LiveItem:
    spec = _obj(value, "usageMetadata")
    payload: dict[str, Any] = {}
    for camel, key in _USAGE_COUNTS:
        count = _get(spec, camel)
        if count is not None or key in ("prompt_tokens", "response_tokens", "total_tokens"):
            payload[key] = 0 if count is None else _count(count, f"usageMetadata.{camel}")
    for camel, key in _USAGE_DETAILS:
        details = _get(spec, camel)
        if details is None:
            continue
        if not isinstance(details, list) or len(details) > 16:
            raise _malformed("expected a short list of modality counts", field=f"usageMetadata.{camel}")
        by_modality: dict[str, int] = {}
        for entry in details:
            entry = _obj(entry, f"usageMetadata.{camel}[]")
            modality = _check_enum(_get(entry, "modality"), f"usageMetadata.{camel}[].modality") or "UNSPECIFIED"
            count = _get(entry, "tokenCount")
            name = modality.lower().removeprefix("modality_")
            by_modality[name] = by_modality.get(name, 0) + (0 if count is None else _count(count, "tokenCount"))
        payload[key] = by_modality
    for camel in ("trafficType", "serviceTier"):
        if _get(spec, camel) is not None:
            _str(_get(spec, camel), f"usageMetadata.{camel}", 64)
    return LiveItem(kind="usage", payload=payload)


def _check_voice_activity(member: str, value: Any) -> None:
    spec = _obj(value, member)
    if member == "voiceActivity":
        _check_enum(_get(spec, "voiceActivityType"), "voiceActivity.voiceActivityType")
        offset = _get(spec, "audioOffset")
        if offset is not None:
            _check_duration(offset, "voiceActivity.audioOffset")
    else:
        _check_enum(_get(spec, "vadSignalType"), "voiceActivityDetectionSignal.vadSignalType")


def _load(data: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    if isinstance(data, str):
        if len(data) > MAX_FRAME_BYTES // 4 and len(data.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES:
            raise _malformed("frame too large", max=MAX_FRAME_BYTES)
        text = data
    elif isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        if len(raw) > MAX_FRAME_BYTES:
            raise _malformed("frame too large", max=MAX_FRAME_BYTES)
        try:
            text = raw.decode("utf-8")  # never json.loads(bytes): it would also guess UTF-16 and UTF-32
        except UnicodeDecodeError:
            raise _malformed("frame is not UTF-8") from None
    else:
        raise _malformed("a frame is bytes or str", type=type(data).__name__)
    try:
        frame = canonical_loads(text)
    except ValidationError as exc:
        raise _malformed("frame is not strict JSON", error=exc.reason) from None
    if not isinstance(frame, dict):
        raise _malformed("frame is not a JSON object")
    return frame


def decode_server_frame(
    data: bytes | bytearray | memoryview | str, *, include_thoughts: bool = False
) -> list[LiveItem]:
    """Check one server frame (binary or text) and return its items in wire order.

    Args:
        data: the frame's payload.
        include_thoughts: turn thought-summary text parts into ``thought`` items (they are skipped otherwise).

    Raises:
        LiveError: reason ``malformed_frame`` (not UTF-8 JSON, not an object, larger than 16 MiB, no member or
            more than one message member, an unknown top-level member, a member of the wrong shape).
    """
    frame = _load(data)
    members: dict[str, Any] = {}
    for key, value in frame.items():
        camel = _TOP_SPELLINGS.get(key)
        if camel is None:
            raise _malformed("unknown top-level member", member=key[:64])
        if camel in members:
            raise _malformed("a member is present in both spellings", member=camel)
        if value is not None:
            members[camel] = value
    present = [m for m in _ONEOF if m in members]
    if len(present) > 1:
        raise _malformed("more than one message member", members=present)
    if not present and "usageMetadata" not in members:
        raise _malformed("frame has no member")
    items: list[LiveItem] = []
    member = present[0] if present else None
    value = members.get(member) if member else None
    if member == "setupComplete":
        session_id = _get(_obj(value, member), "sessionId")
        payload = {} if session_id is None else {"session_id": _str(session_id, "setupComplete.sessionId", _MAX_ID)}
        items.append(LiveItem(kind="setup_complete", payload=payload))
    elif member == "serverContent":
        items.extend(_server_content(_obj(value, member), include_thoughts))
    elif member == "toolCall":
        items.append(_tool_call(value))
    elif member == "toolCallCancellation":
        items.append(_cancellation(value))
    elif member == "goAway":
        left = _get(_obj(value, member), "timeLeft")
        items.append(
            LiveItem(
                kind="go_away",
                payload={"time_left_ms": 0 if left is None else _check_duration(left, "goAway.timeLeft")},
            )
        )
    elif member == "sessionResumptionUpdate":
        items.append(_resumption(value))
    elif member is not None:
        _check_voice_activity(member, value)
    if "usageMetadata" in members:
        items.append(_usage(members["usageMetadata"]))
    return items


def decode_close(data: bytes | bytearray | memoryview) -> tuple[int, str]:
    """Decode a WebSocket close frame's payload into ``(code, reason)``.

    An empty payload is ``(1005, "")`` (no status). The service cuts reasons at 123 bytes, sometimes inside a
    multi-byte character: an incomplete trailing character is dropped and invalid bytes are replaced. Registered
    secret values are scrubbed from the reason.

    Raises:
        LiveError: reason ``malformed_frame`` (one byte, over 125 bytes, a code outside 1000..4999 or one that may
            not be sent on the wire).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _malformed("a close payload is bytes", type=type(data).__name__)
    raw = bytes(data)
    if not raw:
        return 1005, ""
    if len(raw) == 1 or len(raw) > 125:
        raise _malformed("close payload must be 2 to 125 bytes", bytes=len(raw))
    code = int.from_bytes(raw[:2], "big")
    if not 1000 <= code <= 4999 or code in (1004, 1005, 1006, 1015):
        raise _malformed("invalid close code", code=code)
    reason = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(raw[2:], final=False)
    return code, scrub_text(reason)
