"""Direct provider calls: the reference's ``adk_llm`` functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adk_actors.errors import ProviderError
from adk_actors.models.cancel import CancelToken
from adk_actors.models.registry import provider_for
from adk_actors.models.results import (
    ModelResponse,
    ProviderResult,
    StreamFrame,
    as_response,
    check_response,
    plain_output,
)

__all__ = ["capabilities", "generate", "generate_response", "stream", "stream_content", "validate_config"]


def capabilities(provider: str | Mapping[str, Any] = "gemini") -> dict[str, Any]:
    """What a provider implements (``{}`` when it does not say).

    Raises:
        ConfigError: reason ``unknown_provider``.
    """
    config = {"provider": provider} if isinstance(provider, str) else provider
    model = provider_for(config)
    report = getattr(model, "capabilities", None)
    return dict(report()) if callable(report) else {}


def validate_config(config: Mapping[str, Any]) -> None:
    """Validate ``config`` with its provider's ``validate_config`` (no HTTP, no API key needed).

    Raises:
        ConfigError: the provider's validation failure, or ``unknown_provider``.
    """
    model = provider_for(config)
    check = getattr(model, "validate_config", None)
    if callable(check):
        check(config)


def generate_response(
    config: Mapping[str, Any], history: Sequence[Any], tools: Sequence[Any] = (), *, cancel: CancelToken | None = None
) -> ModelResponse:
    """One model turn as a :class:`ModelResponse` whose content the content model accepts.

    Raises:
        ConfigError, ContentError, ProviderError: from validation and the provider (see the provider's docs);
            ``ProviderError(reason="invalid_model_output")`` when the answer breaks the content model's rules.
    """
    return check_response(as_response(provider_for(config).generate(config, history, tools, cancel=cancel)))


def generate(
    config: Mapping[str, Any], history: Sequence[Any], tools: Sequence[Any] = (), *, cancel: CancelToken | None = None
) -> str | dict[str, Any] | ProviderResult:
    """One model turn, shaped like the reference's ``adk_llm:generate/3``.

    Returns:
        ``str`` for plain visible text; the content dict when the answer holds thought summaries, media or
        function calls; :class:`ProviderResult` wrapping either when the candidate carried grounding metadata.

    Raises:
        ConfigError, ContentError, ProviderError: as :func:`generate_response`.
    """
    return plain_output(generate_response(config, history, tools, cancel=cancel))


def stream(
    config: Mapping[str, Any],
    history: Sequence[Any],
    tools: Sequence[Any],
    on_delta: Callable[[str], None],
    *,
    cancel: CancelToken | None = None,
) -> ModelResponse:
    """Stream one turn: ``on_delta`` per visible text delta; returns the assembled :class:`ModelResponse`.

    Raises:
        ProviderError: ``unsupported_text_stream_part`` when the answer holds media; otherwise as the provider.
    """
    return check_response(as_response(provider_for(config).stream(config, history, tools, on_delta, cancel=cancel)))


def stream_content(
    config: Mapping[str, Any],
    history: Sequence[Any],
    tools: Sequence[Any],
    on_frame: Callable[[StreamFrame], None],
    *,
    cancel: CancelToken | None = None,
) -> ModelResponse:
    """Stream one turn as structured frames: ``on_frame`` once per decoded provider frame.

    Raises:
        ProviderError: reason ``unsupported`` when the provider has no content stream; otherwise as the provider.
    """
    model = provider_for(config)
    method = getattr(model, "stream_content", None)
    if not callable(method):
        raise ProviderError(
            "this provider has no content stream", reason="unsupported", details={"operation": "stream_content"}
        )
    return check_response(as_response(method(config, history, tools, on_frame, cancel=cancel)))
