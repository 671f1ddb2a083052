"""The model provider protocol and the registry of providers by name."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from adk_actors.errors import ConfigError
from adk_actors.models.cancel import CancelToken
from adk_actors.models.results import ModelOutput

__all__ = ["Model", "get_provider", "provider_for", "register_provider", "registered_providers"]


@runtime_checkable
class Model(Protocol):
    """A model provider. ``capabilities()``, ``validate_config()`` and ``stream_content()`` are optional.

    ``history`` entries are ``{"role": "user"|"model"|"system", "content": str | content dict}``; ``tools`` are
    function declaration dicts. ``generate``/``stream`` block the calling thread and should honour ``cancel``.
    """

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any] = (),
        *,
        cancel: CancelToken | None = None,
    ) -> ModelOutput:
        """Answer one turn."""
        ...

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any],
        on_delta: Callable[[str], None],
        *,
        cancel: CancelToken | None = None,
    ) -> ModelOutput:
        """Answer one turn, calling ``on_delta`` with each visible text delta as it arrives."""
        ...


_lock = threading.Lock()
_providers: dict[str, Model] = {}


def register_provider(name: str, provider: Model) -> None:
    """Register ``provider`` under ``name`` (replacing any earlier one).

    Raises:
        ConfigError: reason ``invalid_value`` when ``name`` is empty or ``provider`` lacks ``generate``/``stream``.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(
            "a provider name must be a non-empty string", reason="invalid_value", details={"key": "provider"}
        )
    if not isinstance(provider, Model):
        raise ConfigError(
            f"provider {name!r} must implement generate() and stream()",
            reason="invalid_value",
            details={"key": "provider", "provider": name},
        )
    with _lock:
        _providers[name] = provider


def get_provider(name: str) -> Model:
    """The provider registered under ``name``.

    Raises:
        ConfigError: reason ``unknown_provider``.
    """
    with _lock:
        provider = _providers.get(name)
    if provider is None:
        raise ConfigError(
            f"no model provider named {name!r}", reason="unknown_provider", details={"provider": str(name)[:128]}
        )
    return provider


def registered_providers() -> list[str]:
    """Names of the registered providers, sorted."""
    with _lock:
        return sorted(_providers)


def provider_for(config: Mapping[str, Any]) -> Model:
    """The provider a config names (``config["provider"]``: a registered name or a provider object; default
    ``"gemini"``).

    Raises:
        ConfigError: ``unknown_provider``, or ``invalid_value`` when the config is not a mapping.
    """
    if not isinstance(config, Mapping):
        raise ConfigError("a model config must be a mapping", reason="invalid_value", details={"key": "config"})
    named = config.get("provider", "gemini")
    if isinstance(named, str):
        return get_provider(named)
    if isinstance(named, Model):
        return named
    raise ConfigError(
        "config provider must be a provider name or object", reason="invalid_value", details={"key": "provider"}
    )
