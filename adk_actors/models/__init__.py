"""Model providers: the ``Model`` protocol, the provider registry, direct calls, and the Gemini provider.

::

    from adk_actors import models
    models.generate({"model": "gemini-3.1-flash-lite"}, [{"role": "user", "content": "hi"}])   # -> "Hello!"
    models.stream(config, history, [], print)                                               # -> ModelResponse

``"gemini"`` is registered by default; ``register_provider(name, provider)`` adds others.
"""

from __future__ import annotations

from adk_actors.models.api import (
    capabilities,
    generate,
    generate_response,
    stream,
    stream_content,
    validate_config,
)
from adk_actors.models.cancel import CancelToken
from adk_actors.models.gemini import GeminiProvider
from adk_actors.models.registry import Model, get_provider, provider_for, register_provider, registered_providers
from adk_actors.models.results import (
    ModelOutput,
    ModelResponse,
    ProviderResult,
    StreamFrame,
    as_response,
    plain_output,
)

__all__ = [
    "CancelToken",
    "GeminiProvider",
    "Model",
    "ModelOutput",
    "ModelResponse",
    "ProviderResult",
    "StreamFrame",
    "as_response",
    "capabilities",
    "generate",
    "generate_response",
    "get_provider",
    "plain_output",
    "provider_for",
    "register_provider",
    "registered_providers",
    "stream",
    "stream_content",
    "validate_config",
]

register_provider("gemini", GeminiProvider())
