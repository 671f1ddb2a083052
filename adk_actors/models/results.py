"""What a model provider returns: :class:`ModelResponse`, :class:`ProviderResult`, :class:`StreamFrame`.

A provider may return any :data:`ModelOutput`; :func:`as_response` turns one into a :class:`ModelResponse` and
:func:`plain_output` projects a response onto the reference's direct-call result (plain ``str`` for plain text, the
content dict for thoughts, media or calls, :class:`ProviderResult` when grounded).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from adk_actors.content import check_json_safe, copy_json
from adk_actors.content import validate as validate_content
from adk_actors.errors import ContentError, ProviderError, ValidationError

__all__ = [
    "ModelOutput",
    "ModelResponse",
    "ProviderResult",
    "StreamFrame",
    "as_response",
    "check_content",
    "check_response",
    "checked_frame",
    "plain_output",
]

MAX_USAGE_BYTES = 64 * 1024
"""Bound of a response's usage metadata (canonical JSON); real usage maps are a few hundred bytes."""
_MAX_LABEL_CHARS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderResult:
    """A model output that carries provider metadata (the reference's ``{provider_result, Envelope}``)."""

    output: str | dict[str, Any]
    """The answer: plain text, or a content dict when the candidate had thoughts, media or function calls."""
    provider_metadata: dict[str, Any]
    """The JSON-safe envelope ``{"schema_version": 1, "provider", "type", "metadata"}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One assembled model answer (one candidate)."""

    content: dict[str, Any]
    """Content dict ``{"schema_version": 1, "parts": [...]}``: every part in order, thoughts and signatures kept."""
    text: str = ""
    """Visible text: the text parts that are not thought summaries, concatenated."""
    function_calls: tuple[dict[str, Any], ...] = ()
    """``{"name", "args", "id", "thought_signature"}`` per call, in order (``id``/signature ``None`` when absent)."""
    finish_reason: str | None = None
    """Lowercase finish reason (``"stop"``, ``"max_tokens"``, ``"safety"``...), ``None`` when not reported."""
    usage: dict[str, Any] = field(default_factory=dict)
    """Usage metadata with snake_case keys (``prompt_token_count``, ``total_token_count``...)."""
    provider_metadata: dict[str, Any] | None = None
    """Grounding envelope when the candidate carried grounding metadata, else ``None``."""
    model_version: str | None = None
    """The model version the provider reported."""
    response_id: str | None = None
    """The provider's response id."""

    @property
    def has_thoughts(self) -> bool:
        """Whether the content holds thought-summary parts."""
        return any(p.get("thought") for p in self.content.get("parts", ()))

    @property
    def is_plain_text(self) -> bool:
        """Whether every part is visible text (a thought signature on a text part does not count as structure)."""
        return all(p.get("type") == "text" and not p.get("thought") for p in self.content.get("parts", ()))


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamFrame:
    """One decoded frame of a content stream (one SSE event of a Gemini stream)."""

    index: int
    """0-based position of the frame in the stream."""
    content: dict[str, Any]
    """The parts this frame added (possibly none), as a content dict."""
    text: str = ""
    """Visible text this frame added (thoughts excluded)."""
    function_calls: tuple[dict[str, Any], ...] = ()
    """Function calls this frame carried (Gemini never splits a call over frames)."""
    finish_reason: str | None = None
    """Set on the frame that finished the candidate."""
    usage: dict[str, Any] = field(default_factory=dict)
    """Usage metadata reported with this frame (snake_case keys), possibly empty."""
    provider_metadata: dict[str, Any] | None = None
    """Grounding envelope accumulated over this and every earlier frame, ``None`` until any arrived."""


ModelOutput: TypeAlias = "str | dict[str, Any] | ProviderResult | ModelResponse"
"""Anything a provider's ``generate``/``stream`` may return."""


def _content_of(value: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, str):
        return {"schema_version": 1, "parts": [{"type": "text", "text": value}] if value else []}
    return value


def _calls_of(content: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "name": p.get("name"),
            "args": p.get("args", {}),
            "id": p.get("id"),
            "thought_signature": p.get("thought_signature"),
        }
        for p in content.get("parts", ())
        if p.get("type") == "function_call"
    )


def _visible_text(content: dict[str, Any]) -> str:
    return "".join(
        p.get("text", "") for p in content.get("parts", ()) if p.get("type") == "text" and not p.get("thought")
    )


def as_response(output: ModelOutput) -> ModelResponse:
    """Normalise any provider output to a :class:`ModelResponse`.

    Raises:
        ProviderError: reason ``invalid_provider_result`` when ``output`` is none of the :data:`ModelOutput` forms
            (``details["type"]`` names the type returned).
    """
    if isinstance(output, ModelResponse):
        return output
    metadata: dict[str, Any] | None = None
    if isinstance(output, ProviderResult):
        metadata, output = output.provider_metadata, output.output
    if not isinstance(output, str | dict):
        raise ProviderError(
            "a provider returned a value that is not str, dict, ProviderResult or ModelResponse",
            reason="invalid_provider_result",
            details={"type": type(output).__name__},
        )
    content = _content_of(output)
    return ModelResponse(
        content=content, text=_visible_text(content), function_calls=_calls_of(content), provider_metadata=metadata
    )


def _invalid_output(where: str, err: ValidationError) -> ProviderError:
    """Model output is untrusted input: what it broke, structurally (the content model's reason and limits, never
    the rejected value), as the turn's error."""
    safe = {k: v for k, v in err.details.items() if k in ("field", "limit", "max", "size", "part", "path")}
    return ProviderError(
        "the model returned output the content model rejects",
        reason="invalid_model_output",
        details={**safe, "where": where, "cause": err.reason},
    )


def check_content(content: Any, where: str = "content") -> dict[str, Any]:
    """The content dict of a model answer (or one stream frame) as the content model holds it.

    Raises:
        ProviderError: reason ``invalid_model_output`` (``details["cause"]`` is the content model's reason, e.g.
            ``limit_exceeded`` or ``invalid_json``; ``details["where"]`` says which member).
    """
    try:
        valid = validate_content(content).to_dict()
        # The content model allows NUL in text, but no session, event or request body can carry it: an answer
        # that could never be stored or sent back is refused here rather than poisoning the conversation.
        check_json_safe(valid)
        return valid
    except ValidationError as err:
        raise _invalid_output(where, err) from None
    except RecursionError:
        raise ProviderError(
            "the model returned output nested too deeply",
            reason="invalid_model_output",
            details={"where": where, "cause": "limit_exceeded"},
        ) from None


def _label(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_LABEL_CHARS:
        raise ProviderError(
            "the model returned a malformed response field",
            reason="invalid_model_output",
            details={"where": where, "cause": "invalid_value"},
        )
    try:
        check_json_safe(value)
    except ValidationError as err:
        raise _invalid_output(where, err) from None
    return value


def _json_member(value: Any, where: str, max_bytes: int | None) -> dict[str, Any]:
    try:
        copied, _size = copy_json(
            value, error=ContentError, field=where, max_bytes=max_bytes, limit_name=f"max_{where}_bytes"
        )
    except ContentError as err:
        raise _invalid_output(where, err) from None
    if not isinstance(copied, dict):
        raise ProviderError(
            "the model returned a malformed response field",
            reason="invalid_model_output",
            details={"where": where, "cause": "invalid_value"},
        )
    return copied


def check_response(response: ModelResponse) -> ModelResponse:
    """``response`` with its content validated by the content model and ``text``/``function_calls`` derived from
    that content, so nothing downstream (history, events, sessions, tool dispatch) meets a value it cannot hold.

    Raises:
        ProviderError: reason ``invalid_model_output`` (see :func:`check_content`).
    """
    content = check_content(response.content)
    usage = _json_member(response.usage, "usage", MAX_USAGE_BYTES)
    metadata = (
        None
        if response.provider_metadata is None
        else _json_member(response.provider_metadata, "provider_metadata", None)
    )
    return dataclasses.replace(
        response,
        content=content,
        text=_visible_text(content),
        function_calls=_calls_of(content),
        usage=usage,
        provider_metadata=metadata,
        finish_reason=_label(response.finish_reason, "finish_reason"),
        model_version=_label(response.model_version, "model_version"),
        response_id=_label(response.response_id, "response_id"),
    )


def checked_frame(frame: StreamFrame) -> StreamFrame:
    """``frame`` with its content validated like :func:`check_response` (callbacks see only valid content).

    Raises:
        ProviderError: reason ``invalid_model_output``.
    """
    content = check_content(frame.content, "frame")
    return dataclasses.replace(frame, content=content, text=_visible_text(content), function_calls=_calls_of(content))


def plain_output(response: ModelResponse) -> str | dict[str, Any] | ProviderResult:
    """The reference's direct-call result for ``response``.

    Plain visible text without grounding is returned as ``str``; a candidate with thought summaries, media or
    function calls as its content dict; a grounded candidate as :class:`ProviderResult` wrapping either.
    """
    output: str | dict[str, Any] = response.text if response.is_plain_text else response.content
    if response.provider_metadata is not None:
        return ProviderResult(output=output, provider_metadata=response.provider_metadata)
    return output
