"""Strict validation of a Gemini provider config into a frozen :class:`GeminiConfig`.

Every check here runs before any HTTP: unknown keys (top level and nested) fail with
``ConfigError(reason="unknown_key", details={"key": path})``, bad values with ``reason="invalid_value"``, and
mutually exclusive settings with ``reason="conflicting_keys"``. The API key is resolved separately
(:func:`resolve_api_key`) so that ``validate_config`` works without one.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from adk_actors.errors import ConfigError, ProviderError
from adk_actors.secrets import Secret

__all__ = [
    "AGENT_KEYS",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "GENERATION_KEYS",
    "NODE_BASE_URL_ENV",
    "PROVIDER_KEYS",
    "GeminiConfig",
    "RetryPolicy",
    "check_base_url",
    "parse_config",
    "resolve_api_key",
    "resolve_base_url",
]

DEFAULT_MODEL = "gemini-3.1-flash-lite"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_REQUEST_TIMEOUT_S = 60.0
"""Without ``request_timeout`` a call is still bounded: a silent or dripping server must not hold an I/O thread
forever (the agent's ``agent_call_timeout`` has the same default)."""

PROVIDER_KEYS = frozenset(
    {
        "provider",
        "model",
        "api_key",
        "base_url",
        "request_timeout",
        "retry",
        "instructions",
        "global_instruction",
        "builtin_tools",
        "tool_config",
        "generation_config",
        # Direct provider calls put these at top level; agents put them inside generation_config.
        "thinking_config",
        "safety_settings",
        "response_mime_type",
        "response_schema",
        # A cachedContents resource holding the request's stable prefix (see docs/CONTEXT.md).
        "cached_content",
    }
)
AGENT_KEYS = frozenset(
    {
        "input_schema",
        "output_schema",
        "output_key",
        "history_policy",
        "sub_agents",
        "callbacks",
        "callback_config",
        "name",
        "description",
    }
)
"""Keys that belong to agents: accepted (the agent config is shared with the provider) and ignored here."""
GENERATION_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_output_tokens",
        "stop_sequences",
        "response_mime_type",
        "response_schema",
        "response_json_schema",
        "thinking_config",
        "safety_settings",
        "candidate_count",
        "seed",
    }
)
_TOP_LEVEL_GENERATION = ("thinking_config", "safety_settings", "response_mime_type", "response_schema")
_THINKING_KEYS = frozenset({"thinking_level", "thinking_budget", "include_thoughts"})
_THINKING_LEVELS = ("minimal", "low", "medium", "high")
_SAFETY_CATEGORIES = {
    "harassment": "HARM_CATEGORY_HARASSMENT",
    "hate_speech": "HARM_CATEGORY_HATE_SPEECH",
    "sexually_explicit": "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "dangerous_content": "HARM_CATEGORY_DANGEROUS_CONTENT",
}
_SAFETY_THRESHOLDS = {
    "off": "OFF",
    "block_none": "BLOCK_NONE",
    "block_only_high": "BLOCK_ONLY_HIGH",
    "block_medium_and_above": "BLOCK_MEDIUM_AND_ABOVE",
    "block_low_and_above": "BLOCK_LOW_AND_ABOVE",
    "unspecified": "HARM_BLOCK_THRESHOLD_UNSPECIFIED",
}
_CALLING_MODES = ("auto", "any", "none", "validated")
_BUILTIN_TOOLS = ("google_search",)
_CACHED_CONTENT_RE = re.compile(r"^cachedContents/[A-Za-z0-9_-]{1,128}$")
_MODEL_RE = re.compile(r"^(?:(?:models|tunedModels)/)?[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MAX_RETRY_ATTEMPTS = 10
_MAX_TIMEOUT_MS = 365 * 86400 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Bounded retry of retryable HTTP failures (429 honouring ``retryDelay``, 408/500/502/503/504)."""

    max_attempts: int = 1
    """Total attempts including the first; 1 means no retry (the default)."""
    max_delay_s: float = 10.0
    """Longest wait between attempts; a server ``retryDelay`` above it is surfaced instead of waited for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GeminiConfig:
    """A validated Gemini provider config; the ``*_wire`` fields are ready-made camelCase request members."""

    model: str = DEFAULT_MODEL
    """Bare model id or ``tunedModels/...`` resource name."""
    api_key: Secret | None = None
    """The config's key; ``None`` falls back to ``GEMINI_API_KEY`` at call time."""
    base_url: str | None = None
    """Service root without the version; ``None`` falls back to ``GEMINI_BASE_URL``, then the public endpoint."""
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S
    """Bound of the whole call (connect, every read, the total), streaming or not; ``None``: no limit."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retry policy for retryable failures."""
    system_instruction: tuple[str, ...] = ()
    """``global_instruction`` then ``instructions``, one text part each."""
    builtin_tools: tuple[str, ...] = ()
    """Built-in provider tools (``"google_search"``)."""
    tool_config_wire: dict[str, Any] | None = None
    """``toolConfig`` body member."""
    generation_config_wire: dict[str, Any] = field(default_factory=dict)
    """``generationConfig`` body member (possibly empty)."""
    safety_settings_wire: tuple[dict[str, str], ...] = ()
    """``safetySettings`` body member."""
    cached_content: str | None = None
    """``cachedContents/{id}`` holding the system instruction, tools and tool config: the request then carries
    ``cachedContent`` and omits those three members (the service refuses them alongside a cache)."""

    @property
    def include_thoughts(self) -> bool:
        """Whether thought summaries were requested."""
        return bool(self.generation_config_wire.get("thinkingConfig", {}).get("includeThoughts"))


def _fail_unknown(path: str) -> ConfigError:
    return ConfigError(f"unknown config key {path!r}", reason="unknown_key", details={"key": path})


def _invalid(path: str, expected: str) -> ConfigError:
    return ConfigError(
        f"invalid value for {path!r}: expected {expected}",
        reason="invalid_value",
        details={"key": path, "expected": expected},
    )


def _check_keys(value: Any, allowed: frozenset[str], path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _invalid(path or "config", "a mapping")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            raise _fail_unknown(f"{path}.{key}" if path else str(key))
    return value


def _is_number(value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past float range (10**5000) is no usable number of anything
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any, path: str, lo: float, hi: float) -> float | int:
    if not _is_number(value) or not lo <= value <= hi:
        raise _invalid(path, f"a number in [{lo}, {hi}]")
    return value


def _integer(value: Any, path: str, lo: int, hi: int | None = None) -> int:
    if not _is_int(value) or value < lo or (hi is not None and value > hi):
        raise _invalid(path, f"an integer >= {lo}" + (f" and <= {hi}" if hi is not None else ""))
    return value


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _invalid(path, "a string")
    return value


def _enum(value: Any, path: str, allowed: tuple[str, ...] | Mapping[str, str]) -> str:
    options = tuple(allowed)
    if not isinstance(value, str) or value.lower() not in options:
        raise _invalid(path, "one of " + ", ".join(options))
    return value.lower()


def _schema_types_upper(schema: Any) -> Any:
    """Project a schema written with JSON-Schema type names onto Gemini's ``Schema``.

    ``type`` values become UPPERCASE and objects with several properties get ``propertyOrdering`` in declaration
    order.
    """
    if isinstance(schema, list):
        return [_schema_types_upper(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.upper()
        elif key in ("properties", "$defs", "defs") and isinstance(value, Mapping):
            out[key] = {name: _schema_types_upper(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "any_of", "additionalProperties"):
            out[key] = _schema_types_upper(value)
        else:
            out[key] = value
    properties = out.get("properties")
    if (
        out.get("type") == "OBJECT"
        and isinstance(properties, Mapping)
        and len(properties) > 1
        and "propertyOrdering" not in out
    ):
        # Keep the declared property order in the model's JSON output (what the official SDK does too).
        out["propertyOrdering"] = list(properties)
    return out


def _thinking(value: Any, path: str) -> dict[str, Any]:
    spec = _check_keys(value, _THINKING_KEYS, path)
    if "thinking_level" in spec and "thinking_budget" in spec:
        raise ConfigError(
            "thinking_level and thinking_budget are mutually exclusive",
            reason="conflicting_keys",
            details={"keys": [f"{path}.thinking_level", f"{path}.thinking_budget"]},
        )
    wire: dict[str, Any] = {}
    if "thinking_level" in spec:
        wire["thinkingLevel"] = _enum(spec["thinking_level"], f"{path}.thinking_level", _THINKING_LEVELS).upper()
    if "thinking_budget" in spec:
        wire["thinkingBudget"] = _integer(spec["thinking_budget"], f"{path}.thinking_budget", -1)
    if "include_thoughts" in spec:
        if not isinstance(spec["include_thoughts"], bool):
            raise _invalid(f"{path}.include_thoughts", "a boolean")
        wire["includeThoughts"] = spec["include_thoughts"]
    return wire


def _safety(value: Any, path: str) -> tuple[dict[str, str], ...]:
    if not isinstance(value, list | tuple):
        raise _invalid(path, "a list of {category, threshold}")
    seen: set[str] = set()
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        spec = _check_keys(item, frozenset({"category", "threshold"}), where)
        if "category" not in spec or "threshold" not in spec:
            raise _invalid(where, "both category and threshold")
        category = spec["category"]
        if isinstance(category, str) and category.lower() == "civic_integrity":
            raise ConfigError(
                "the civic_integrity safety category is deprecated and not supported",
                reason="invalid_value",
                details={"key": f"{where}.category", "value": "civic_integrity", "deprecated": True},
            )
        category = _enum(category, f"{where}.category", _SAFETY_CATEGORIES)
        threshold = _enum(spec["threshold"], f"{where}.threshold", _SAFETY_THRESHOLDS)
        if category in seen:
            raise ConfigError(
                f"safety category {category!r} is set twice",
                reason="duplicate_safety_category",
                details={"key": f"{where}.category", "value": category},
            )
        seen.add(category)
        out.append({"category": _SAFETY_CATEGORIES[category], "threshold": _SAFETY_THRESHOLDS[threshold]})
    return tuple(out)


def _generation(
    spec: Mapping[str, Any], origin: Mapping[str, str]
) -> tuple[dict[str, Any], tuple[dict[str, str], ...]]:
    """Map generation keys (already key-checked) to ``generationConfig`` and ``safetySettings``.

    ``origin`` maps each key to the dotted path it came from (top level or ``generation_config.<key>``).
    """

    def p(key: str) -> str:
        return origin.get(key, key)

    wire: dict[str, Any] = {}
    if "temperature" in spec:
        wire["temperature"] = _number(spec["temperature"], p("temperature"), 0.0, 2.0)
    if "top_p" in spec:
        wire["topP"] = _number(spec["top_p"], p("top_p"), 0.0, 1.0)
    if "top_k" in spec:
        wire["topK"] = _integer(spec["top_k"], p("top_k"), 1)
    if "candidate_count" in spec:
        wire["candidateCount"] = _integer(spec["candidate_count"], p("candidate_count"), 1, 8)
    if "max_output_tokens" in spec:
        wire["maxOutputTokens"] = _integer(spec["max_output_tokens"], p("max_output_tokens"), 1)
    if "stop_sequences" in spec:
        stops = spec["stop_sequences"]
        if not isinstance(stops, list | tuple) or not all(isinstance(s, str) and s for s in stops):
            raise _invalid(p("stop_sequences"), "a list of non-empty strings")
        wire["stopSequences"] = list(stops)
    if "seed" in spec:
        wire["seed"] = _integer(spec["seed"], p("seed"), -(2**31), 2**31 - 1)
    if "response_schema" in spec and "response_json_schema" in spec:
        raise ConfigError(
            "response_schema and response_json_schema are mutually exclusive",
            reason="conflicting_keys",
            details={"keys": [p("response_schema"), p("response_json_schema")]},
        )
    if "response_mime_type" in spec:
        mime = _text(spec["response_mime_type"], p("response_mime_type"))
        if not re.fullmatch(r"[a-z0-9.+-]+/[a-z0-9.+-]+", mime):
            raise _invalid(p("response_mime_type"), "a lowercase type/subtype MIME type")
        wire["responseMimeType"] = mime
    for key, wire_key in (("response_schema", "responseSchema"), ("response_json_schema", "responseJsonSchema")):
        if key in spec:
            schema = spec[key]
            if not isinstance(schema, Mapping):
                raise _invalid(p(key), "a JSON object schema")
            wire[wire_key] = _schema_types_upper(schema) if key == "response_schema" else dict(schema)
            # Gemini needs a compatible MIME type for a schema; JSON unless the caller chose (e.g. text/x.enum).
            wire.setdefault("responseMimeType", "application/json")
    if "thinking_config" in spec:
        thinking = _thinking(spec["thinking_config"], p("thinking_config"))
        if thinking:
            wire["thinkingConfig"] = thinking
    safety = _safety(spec["safety_settings"], p("safety_settings")) if "safety_settings" in spec else ()
    return wire, safety


def _tool_config(value: Any) -> dict[str, Any]:
    spec = _check_keys(value, frozenset({"function_calling_config"}), "tool_config")
    wire: dict[str, Any] = {}
    if "function_calling_config" in spec:
        path = "tool_config.function_calling_config"
        fcc = _check_keys(spec["function_calling_config"], frozenset({"mode", "allowed_function_names"}), path)
        out: dict[str, Any] = {}
        if "mode" in fcc:
            out["mode"] = _enum(fcc["mode"], f"{path}.mode", _CALLING_MODES).upper()
        if "allowed_function_names" in fcc:
            names = fcc["allowed_function_names"]
            if not isinstance(names, list | tuple) or not all(isinstance(n, str) and n for n in names):
                raise _invalid(f"{path}.allowed_function_names", "a list of function names")
            out["allowedFunctionNames"] = list(names)
        wire["functionCallingConfig"] = out
    return wire


def _retry(value: Any) -> RetryPolicy:
    spec = _check_keys(value, frozenset({"max_attempts", "max_delay_ms"}), "retry")
    attempts = _integer(spec.get("max_attempts", 1), "retry.max_attempts", 1, _MAX_RETRY_ATTEMPTS)
    delay_ms = spec.get("max_delay_ms", 10_000)
    if not _is_number(delay_ms) or delay_ms < 0:
        raise _invalid("retry.max_delay_ms", "a non-negative number of milliseconds")
    return RetryPolicy(max_attempts=attempts, max_delay_s=delay_ms / 1000)


def _timeout(value: Any) -> float | None:
    if value == "infinity":
        return None
    if not _is_number(value) or not 0 <= value <= _MAX_TIMEOUT_MS:
        raise _invalid("request_timeout", "a number of milliseconds from 0 to a year, or 'infinity'")
    return max(value / 1000, 0.001)


def check_base_url(url: Any, path: str = "base_url") -> str:
    """Validate a service root: https anywhere, plain http only on loopback (the key must not cross a network).

    Raises:
        ConfigError: reason ``invalid_value``.
    """
    if not isinstance(url, str):
        raise _invalid(path, "an http(s) URL")
    parts = urlsplit(url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.query
        or parts.fragment
    ):
        raise _invalid(path, "an http(s) URL without credentials, query or fragment")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
        raise _invalid(path, "https (plain http is only allowed on loopback)")
    return url.rstrip("/")


def _instruction(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    raise _invalid(path, "a string")


def parse_config(config: Mapping[str, Any]) -> GeminiConfig:
    """Validate ``config`` strictly and build a :class:`GeminiConfig`.

    Raises:
        ConfigError: ``unknown_key`` (details ``key`` is the dotted path), ``invalid_value``, ``conflicting_keys``,
            ``duplicate_safety_category``.
    """
    spec = _check_keys(config, PROVIDER_KEYS | AGENT_KEYS, "")
    model = spec.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not _MODEL_RE.match(model) or ".." in model:
        raise _invalid("model", "a Gemini model id such as 'gemini-3.1-flash-lite'")
    api_key = spec.get("api_key")
    if api_key is not None and not isinstance(api_key, Secret):
        if not isinstance(api_key, str) or not api_key:
            raise ConfigError(
                "api_key must be a non-empty string",
                reason="invalid_value",
                details={"key": "api_key", "expected": "a non-empty string"},
            )
        api_key = Secret(api_key)
    base_url = check_base_url(spec["base_url"]) if spec.get("base_url") is not None else None

    generation = spec.get("generation_config", {})
    _check_keys(generation, GENERATION_KEYS, "generation_config")
    merged: dict[str, Any] = dict(generation)
    origin = {key: f"generation_config.{key}" for key in generation}
    for key in _TOP_LEVEL_GENERATION:
        if key in spec:
            if key in generation:
                raise ConfigError(
                    f"{key} is set both at top level and in generation_config",
                    reason="conflicting_keys",
                    details={"keys": [key, f"generation_config.{key}"]},
                )
            merged[key] = spec[key]
    gen_wire, safety = _generation(merged, origin)

    builtin = spec.get("builtin_tools", ())
    if not isinstance(builtin, list | tuple):
        raise _invalid("builtin_tools", "a list of built-in tool names")
    builtin_tools: list[str] = []
    for i, name in enumerate(builtin):
        tool = _enum(name, f"builtin_tools[{i}]", _BUILTIN_TOOLS)
        if tool not in builtin_tools:
            builtin_tools.append(tool)

    return GeminiConfig(
        model=model.removeprefix("models/"),
        api_key=api_key,
        base_url=base_url,
        request_timeout_s=(
            _timeout(spec["request_timeout"]) if "request_timeout" in spec else DEFAULT_REQUEST_TIMEOUT_S
        ),
        retry=_retry(spec["retry"]) if "retry" in spec else RetryPolicy(),
        system_instruction=(
            _instruction(spec.get("global_instruction"), "global_instruction")
            + _instruction(spec.get("instructions"), "instructions")
        ),
        builtin_tools=tuple(builtin_tools),
        tool_config_wire=_tool_config(spec["tool_config"]) if "tool_config" in spec else None,
        generation_config_wire=gen_wire,
        safety_settings_wire=safety,
        cached_content=_cached_content(spec.get("cached_content")),
    )


def _cached_content(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _CACHED_CONTENT_RE.match(value):
        raise _invalid("cached_content", "a cachedContents/{id} resource name")
    return value


def resolve_api_key(cfg: GeminiConfig, environ: Mapping[str, str] | None = None) -> Secret:
    """The config's key, else ``GEMINI_API_KEY``.

    Raises:
        ProviderError: reason ``missing_api_key``.
    """
    if cfg.api_key is not None:
        return cfg.api_key
    value = (os.environ if environ is None else environ).get("GEMINI_API_KEY", "")
    if not value:
        raise ProviderError("no Gemini API key: set GEMINI_API_KEY or config api_key", reason="missing_api_key")
    return Secret(value)


NODE_BASE_URL_ENV = "ADK_GEMINI_BASE_URL"
"""The node's ``gemini_base_url`` setting as every process of a node sees it: ``start()`` exports the resolved
setting (from adk.toml, ``ADK_GEMINI_BASE_URL``/``GEMINI_BASE_URL`` or a keyword) into the node's environment."""


def resolve_base_url(cfg: GeminiConfig, environ: Mapping[str, str] | None = None) -> str:
    """Where a call goes: the config's ``base_url``, else the node's ``gemini_base_url`` setting
    (``ADK_GEMINI_BASE_URL``), else ``GEMINI_BASE_URL``, else the public endpoint.

    Raises:
        ConfigError: reason ``invalid_value`` for a malformed setting or variable (``details["key"]`` names it).
    """
    if cfg.base_url is not None:
        return cfg.base_url
    env = os.environ if environ is None else environ
    node = env.get(NODE_BASE_URL_ENV, "")
    if node:
        return check_base_url(node, "gemini_base_url")
    plain = env.get("GEMINI_BASE_URL", "")
    return check_base_url(plain, "GEMINI_BASE_URL") if plain else DEFAULT_BASE_URL
