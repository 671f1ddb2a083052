"""The Gemini Developer API provider (REST + SSE over urllib3 connection pools), registered as ``"gemini"``."""

from __future__ import annotations

from adk_actors.models.gemini.config import DEFAULT_BASE_URL, DEFAULT_MODEL, GeminiConfig, parse_config
from adk_actors.models.gemini.provider import CAPABILITIES, GeminiProvider
from adk_actors.models.gemini.transport import close_sessions
from adk_actors.models.gemini.wire import build_request

__all__ = [
    "CAPABILITIES",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "GeminiConfig",
    "GeminiProvider",
    "build_request",
    "close_sessions",
    "parse_config",
]
