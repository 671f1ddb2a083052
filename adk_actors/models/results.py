"""What a model provider returns: :class:`ModelResponse`, :class:`ProviderResult`, :class:`StreamFrame`.

A provider may return any :data:`ModelOutput`; :func:`as_response` turns one into a :class:`ModelResponse` and
:func:`plain_output` projects a response onto the reference's direct-call result (plain ``str`` for plain text, the
content dict for thoughts, media or calls, :class:`ProviderResult` when grounded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from adk_actors.errors import ProviderError

__all__ = ["ModelOutput", "ModelResponse", "ProviderResult", "StreamFrame", "as_response", "plain_output"]


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
    return tuple({"name": p.get("name"), "args": p.get("args", {}), "id": p.get("id"),
                  "thought_signature": p.get("thought_signature")}
                 for p in content.get("parts", ()) if p.get("type") == "function_call")


def _visible_text(content: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in content.get("parts", ())
                   if p.get("type") == "text" and not p.get("thought"))


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
        raise ProviderError("a provider returned a value that is not str, dict, ProviderResult or ModelResponse",
                            reason="invalid_provider_result", details={"type": type(output).__name__})
    content = _content_of(output)
    return ModelResponse(content=content, text=_visible_text(content), function_calls=_calls_of(content),
                         provider_metadata=metadata)


def plain_output(response: ModelResponse) -> str | dict[str, Any] | ProviderResult:
    """The reference's direct-call result for ``response``.

    Plain visible text without grounding is returned as ``str``; a candidate with thought summaries, media or
    function calls as its content dict; a grounded candidate as :class:`ProviderResult` wrapping either.
    """
    output: str | dict[str, Any] = response.text if response.is_plain_text else response.content
    if response.provider_metadata is not None:
        return ProviderResult(output=output, provider_metadata=response.provider_metadata)
    return output
