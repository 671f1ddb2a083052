"""Gemini ``GenerateContentResponse`` → :class:`ModelResponse`, grounding envelopes, and stream assembly."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from adk_actors.errors import ProviderError
from adk_actors.models.gemini.wire import CONTENT_SCHEMA_VERSION, part_from_wire
from adk_actors.models.results import ModelResponse, StreamFrame

__all__ = [
    "MAX_PROVIDER_METADATA_BYTES",
    "StreamAssembler",
    "grounding_envelope",
    "merge_grounding",
    "parse_response",
    "snake_keys",
]

MAX_PROVIDER_METADATA_BYTES = 256 * 1024
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_keys(value: Any) -> Any:
    """Recursively rename camelCase keys to snake_case (``promptTokenCount`` → ``prompt_token_count``)."""
    if isinstance(value, Mapping):
        return {_CAMEL_RE.sub(r"_\1", k).lower() if isinstance(k, str) else k: snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    if camel in obj:
        return obj[camel]
    return obj.get(_CAMEL_RE.sub(r"_\1", camel).lower())


def _check_metadata(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        raise ProviderError("groundingMetadata is not a JSON object", reason="invalid_provider_metadata")
    try:
        encoded = json.dumps(metadata, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        raise ProviderError("groundingMetadata is not strict JSON", reason="invalid_provider_metadata") from None
    size = len(encoded.encode("utf-8"))
    if size > MAX_PROVIDER_METADATA_BYTES:
        raise ProviderError(
            "groundingMetadata exceeds 256 KiB",
            reason="provider_metadata_too_large",
            details={"bytes": size, "limit": MAX_PROVIDER_METADATA_BYTES},
        )
    return dict(metadata)


def grounding_envelope(metadata: Any) -> dict[str, Any]:
    """The reference's provider-metadata envelope for one candidate's ``groundingMetadata``.

    Raises:
        ProviderError: ``invalid_provider_metadata`` (not a strict JSON object) or ``provider_metadata_too_large``.
    """
    return {
        "schema_version": 1,
        "provider": "gemini",
        "type": "google_search_grounding",
        "metadata": _check_metadata(metadata),
    }


def merge_grounding(acc: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """Accumulate a streamed frame's grounding metadata: list fields append in arrival order, others replace.

    Raises:
        ProviderError: as :func:`grounding_envelope`.
    """
    merged = dict(acc or {})
    for key, value in _check_metadata(new).items():
        previous = merged.get(key)
        merged[key] = [*previous, *value] if isinstance(previous, list) and isinstance(value, list) else value
    return _check_metadata(merged)


def _first_candidate(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    candidates = obj.get("candidates")
    if candidates is None:
        return None
    if not isinstance(candidates, list) or not all(isinstance(c, Mapping) for c in candidates):
        raise ProviderError("candidates is not a list of objects", reason="malformed_response")
    for cand in candidates:
        if cand.get("index", 0) == 0:
            return cand
    return None


def _parts(cand: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = cand.get("content") or {}
    if not isinstance(content, Mapping):
        raise ProviderError("candidate content is not an object", reason="malformed_response")
    parts = content.get("parts") or []
    if not isinstance(parts, list):
        raise ProviderError("candidate parts is not a list", reason="malformed_response")
    return [part_from_wire(p) for p in parts]


def _finish(cand: Mapping[str, Any]) -> str | None:
    reason = _get(cand, "finishReason")
    return reason.lower() if isinstance(reason, str) and reason else None


def _blocked(obj: Mapping[str, Any]) -> ProviderError:
    feedback = _get(obj, "promptFeedback")
    block = _get(feedback, "blockReason") if isinstance(feedback, Mapping) else None
    if isinstance(block, str):
        return ProviderError(
            "Gemini blocked the prompt", reason="prompt_blocked", details={"block_reason": block.lower()}
        )
    return ProviderError("Gemini returned no candidate", reason="empty_response")


def _calls(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"name": p["name"], "args": p["args"], "id": p.get("id"), "thought_signature": p.get("thought_signature")}
        for p in parts
        if p["type"] == "function_call"
    )


def _visible(parts: list[dict[str, Any]]) -> str:
    return "".join(p["text"] for p in parts if p["type"] == "text" and not p.get("thought"))


def _usage(obj: Mapping[str, Any]) -> dict[str, Any]:
    usage = _get(obj, "usageMetadata")
    return snake_keys(usage) if isinstance(usage, Mapping) else {}


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_response(obj: Any) -> ModelResponse:
    """Parse one complete (non-streamed) ``GenerateContentResponse``.

    Raises:
        ProviderError: ``prompt_blocked``, ``empty_response``, ``malformed_response``, part and metadata errors.
    """
    if not isinstance(obj, Mapping):
        raise ProviderError("the response is not a JSON object", reason="malformed_response")
    cand = _first_candidate(obj)
    if cand is None:
        raise _blocked(obj)
    parts = _parts(cand)
    grounding = _get(cand, "groundingMetadata")
    return ModelResponse(
        content={"schema_version": CONTENT_SCHEMA_VERSION, "parts": parts},
        text=_visible(parts),
        function_calls=_calls(parts),
        finish_reason=_finish(cand),
        usage=_usage(obj),
        provider_metadata=grounding_envelope(grounding) if grounding is not None else None,
        model_version=_str_or_none(_get(obj, "modelVersion")),
        response_id=_str_or_none(_get(obj, "responseId")),
    )


def _mergeable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (
        a["type"] == b["type"] == "text"
        and bool(a.get("thought")) == bool(b.get("thought"))
        and "thought_signature" not in a
        and "thought_signature" not in b
    )


def merge_text_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join adjacent text parts with the same thought flag when neither carries a signature."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if out and _mergeable(out[-1], part):
            out[-1] = {**out[-1], "text": out[-1]["text"] + part["text"]}
        else:
            out.append(dict(part))
    return out


class StreamAssembler:
    """Folds decoded SSE frames into per-frame :class:`StreamFrame` values and one final :class:`ModelResponse`."""

    def __init__(self) -> None:
        self.frames = 0
        self._parts: list[dict[str, Any]] = []
        self._grounding: dict[str, Any] | None = None
        self._usage: dict[str, Any] = {}
        self._finish: str | None = None
        self._model_version: str | None = None
        self._response_id: str | None = None

    @property
    def finished(self) -> bool:
        """Whether a frame carried a finish reason."""
        return self._finish is not None

    def feed(self, obj: Any) -> StreamFrame:
        """Fold one decoded frame in and describe what it added.

        Raises:
            ProviderError: ``prompt_blocked``, ``malformed_response``, part and metadata errors.
        """
        if not isinstance(obj, Mapping):
            raise ProviderError("an SSE frame is not a JSON object", reason="malformed_response")
        cand = _first_candidate(obj)
        if cand is None and isinstance(_get(obj, "promptFeedback"), Mapping):
            raise _blocked(obj)
        parts = _parts(cand) if cand is not None else []
        finish = _finish(cand) if cand is not None else None
        grounding = _get(cand, "groundingMetadata") if cand is not None else None
        if grounding is not None:
            self._grounding = merge_grounding(self._grounding, grounding)
        usage = _usage(obj)
        if usage:
            self._usage = usage
        self._parts.extend(parts)
        self._finish = finish or self._finish
        self._model_version = _str_or_none(_get(obj, "modelVersion")) or self._model_version
        self._response_id = _str_or_none(_get(obj, "responseId")) or self._response_id
        frame = StreamFrame(
            index=self.frames,
            content={"schema_version": CONTENT_SCHEMA_VERSION, "parts": parts},
            text=_visible(parts),
            function_calls=_calls(parts),
            finish_reason=finish,
            usage=usage,
            provider_metadata=self._envelope(),
        )
        self.frames += 1
        return frame

    def _envelope(self) -> dict[str, Any] | None:
        if self._grounding is None:
            return None
        return {
            "schema_version": 1,
            "provider": "gemini",
            "type": "google_search_grounding",
            "metadata": self._grounding,
        }

    def result(self) -> ModelResponse:
        """The assembled answer: parts in arrival order (adjacent plain text joined), combined grounding."""
        parts = merge_text_parts(self._parts)
        return ModelResponse(
            content={"schema_version": CONTENT_SCHEMA_VERSION, "parts": parts},
            text=_visible(parts),
            function_calls=_calls(parts),
            finish_reason=self._finish,
            usage=self._usage,
            provider_metadata=self._envelope(),
            model_version=self._model_version,
            response_id=self._response_id,
        )
