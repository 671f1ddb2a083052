"""Checked Gemini Live session config (:func:`live_config`) and the ``setup`` message built from it.

Every key is known or refused: an unknown key fails with ``ConfigError(reason="unknown_key")``, a known Live or
Gemini option that this kit deliberately does not support (proactive or affective audio, structured output, REST
context caching, code execution, the superseded ``mediaChunks`` input) with ``reason="unsupported_live_option"``,
a REST model with ``reason="live_model_required"`` and anything out of range with ``reason="invalid_value"``;
``details["key"]`` is always the dotted path of the offending key. Nothing is silently ignored.

The production endpoint is fixed. A custom endpoint exists for a local emulator only: its host must be loopback,
plain ``ws://`` needs ``allow_insecure_loopback``, and TLS verification can never be turned off.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import ConfigError, LiveError, ValidationError
from adk_actors.secrets import Secret

__all__ = [
    "API_KEY_ENV_VARS",
    "DEFAULT_LIVE_MODEL",
    "LIVE_MODELS",
    "LIVE_PATH",
    "PRODUCTION_URL",
    "Compression",
    "LiveConfig",
    "LiveEndpoint",
    "LiveFunction",
    "LiveProviderConfig",
    "Thinking",
    "ToolExecution",
    "Vad",
    "connection_params",
    "live_config",
    "resolve_api_key",
    "setup_message",
]

LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
"""Path of the v1beta Live method; a custom endpoint URL must end with it."""
PRODUCTION_URL = "wss://generativelanguage.googleapis.com" + LIVE_PATH
"""The one production endpoint (the key travels in the ``x-goog-api-key`` handshake header, never the URL)."""
DEFAULT_LIVE_MODEL = "gemini-3.1-flash-live-preview"
LIVE_MODELS = frozenset({DEFAULT_LIVE_MODEL, "gemini-live-2.5-flash-preview"})
"""Known Live model ids; any other id containing ``-live`` or ``native-audio`` is taken as a Live model too."""
API_KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
"""Where :func:`resolve_api_key` looks, in order, when the config has no key."""

_LIMITS: dict[str, tuple[int, int, int]] = {
    # key: (minimum, maximum, default)
    "max_ingress_messages": (1, 4096, 64),
    "max_ingress_bytes": (1024, 64 * 1024 * 1024, 4 * 1024 * 1024),
    "max_subscribers": (1, 4096, 64),
    "max_subscriber_messages": (1, 65536, 128),
    "max_subscriber_bytes": (64 * 1024, 256 * 1024 * 1024, 8 * 1024 * 1024),
    "connect_timeout_ms": (1, 120_000, 10_000),
    "resume_deadline_ms": (1, 300_000, 15_000),
    "max_duration_ms": (1, 24 * 3600 * 1000, 2 * 3600 * 1000),
}
_TOP_KEYS = frozenset({"provider", "provider_config", "api_key", "endpoint", "tool_execution", *_LIMITS})
_PROVIDER_KEYS = frozenset(
    {
        "model",
        "response_modalities",
        "output_audio_transcription",
        "input_audio_transcription",
        "voice",
        "language_code",
        "system_instruction",
        "thinking",
        "media_resolution",
        "context_window_compression",
        "session_resumption",
        "automatic_activity_detection",
        "vad",
        "activity_handling",
        "temperature",
        "top_p",
        "top_k",
        "max_output_tokens",
        "seed",
        "tools",
    }
)
_UNSUPPORTED = frozenset(
    {
        "proactive_audio",
        "proactivity",
        "affective_dialog",
        "enable_affective_dialog",
        "response_mime_type",
        "response_schema",
        "response_json_schema",
        "structured_output",
        "output_schema",
        "cached_content",
        "code_execution",
        "media_chunks",
    }
)
_TLS_OFF = re.compile(r"verify|insecure|check_hostname|cert_reqs|ssl_context|no_tls")
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FUNCTION_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
_VOICE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}$")
_HANDLE_RE = re.compile(r"^[\x21-\x7e]{1,8192}$")
_MAX_SYSTEM_INSTRUCTION = 64 * 1024
_MAX_DESCRIPTION = 8 * 1024
_MAX_SCHEMA_BYTES = 256 * 1024
_MAX_TOOLS = 128
_MAX_TOKENS = 2**31 - 1


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _invalid(path: str, expected: str) -> ConfigError:
    return ConfigError(
        f"invalid value for {path!r}: expected {expected}",
        reason="invalid_value",
        details={"key": path, "expected": expected},
    )


def _keys(value: Any, allowed: frozenset[str], path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _invalid(path, "a mapping")
    for key in value:
        where = f"{path}.{key}" if path != "config" else str(key)
        if isinstance(key, str) and _snake(key) in _UNSUPPORTED:
            raise ConfigError(
                f"{where!r} is not supported by Live sessions",
                reason="unsupported_live_option",
                details={"key": where},
            )
        if not isinstance(key, str) or key not in allowed:
            raise ConfigError(f"unknown config key {where!r}", reason="unknown_key", details={"key": where})
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(path, "a boolean")
    return value


def _int(value: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _invalid(path, f"an integer in [{lo}, {hi}]")
    return value


def _number(value: Any, path: str, lo: float, hi: float) -> float:
    # NaN fails both comparisons and infinities the range, so no separate finiteness check is needed.
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise _invalid(path, f"a number in [{lo}, {hi}]")
    return float(value)


def _choice(value: Any, path: str, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in options:
        raise _invalid(path, "one of " + ", ".join(options))
    return value.lower()


def _pattern(value: Any, path: str, pattern: re.Pattern[str], expected: str) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise _invalid(path, expected)
    return value


def _text(value: Any, path: str, max_bytes: int) -> str:
    if not isinstance(value, str) or "\x00" in value or len(value) > max_bytes:
        raise _invalid(path, f"a string of at most {max_bytes} UTF-8 bytes without NUL")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid(path, "valid Unicode text") from None
    if size > max_bytes:
        raise _invalid(path, f"a string of at most {max_bytes} UTF-8 bytes without NUL")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveEndpoint:
    """A custom (emulator) endpoint: always a loopback host."""

    url: str
    """``ws://`` or ``wss://`` URL whose path ends with :data:`LIVE_PATH`."""
    allow_insecure_loopback: bool = False
    """Must be true for a ``ws://`` URL."""
    cafile: str | None = None
    """PEM bundle that verifies a ``wss://`` emulator's own CA (verification itself stays on)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveFunction:
    """One function declaration offered to the model."""

    name: str
    """Unique function name, ``[A-Za-z_][A-Za-z0-9_.:-]*``, at most 128 characters."""
    description: str | None = None
    """What the function does, for the model."""
    parameters: dict[str, Any] | None = field(default=None, hash=False)
    """JSON Schema object of the arguments (sent as ``parametersJsonSchema``)."""
    behavior: str | None = None
    """``"blocking"`` (the model waits for the result) or ``"non_blocking"``; ``None`` leaves the service default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Thinking:
    """Thinking configuration: a token budget or a level, not both."""

    budget: int | None = None
    """Thinking token budget (-1: dynamic, 0: off)."""
    level: str | None = None
    """``minimal``, ``low``, ``medium`` or ``high``."""
    include_thoughts: bool | None = None
    """Whether thought summaries are sent (decoded as ``thought`` items)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Compression:
    """Context-window compression by sliding window (both bounds optional: the service picks defaults)."""

    trigger_tokens: int | None = None
    """Context size that triggers compression."""
    target_tokens: int | None = None
    """Size the window is cut down to; below ``trigger_tokens``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Vad:
    """Tuning of the service's automatic voice activity detection."""

    start_sensitivity: str | None = None
    """``low`` or ``high``."""
    end_sensitivity: str | None = None
    """``low`` or ``high``."""
    prefix_padding_ms: int | None = None
    """Speech needed before a start of speech is committed."""
    silence_duration_ms: int | None = None
    """Silence needed before an end of speech is committed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveProviderConfig:
    """The Gemini side of a Live session, as sent in ``setup``."""

    model: str
    """Bare Live model id (no ``models/`` prefix)."""
    response_modality: str = "audio"
    """``audio`` or ``text``: exactly one per session."""
    output_audio_transcription: bool = False
    """Transcribe the model's audio (``output_transcription`` items)."""
    input_audio_transcription: bool = False
    """Transcribe the user's audio (``input_transcription`` items)."""
    voice: str | None = None
    """Prebuilt voice name (``Kore``, ``Puck``...)."""
    language_code: str | None = None
    """BCP-47 speech language (``en-US``)."""
    system_instruction: str | None = None
    """System instruction text, at most 64 KiB."""
    thinking: Thinking | None = None
    """Thinking configuration."""
    media_resolution: str | None = None
    """``low``, ``medium`` or ``high``."""
    context_window_compression: Compression | None = None
    """Sliding-window compression (lifts the session length limits); ``None``: off."""
    session_resumption: bool = False
    """Ask for resumption handles so a dropped connection can resume."""
    automatic_activity_detection: bool = True
    """Server-side VAD; when false the client brackets speech with activity start/end."""
    vad: Vad | None = None
    """VAD tuning (only with automatic activity detection)."""
    activity_handling: str | None = None
    """``interrupts`` (barge-in interrupts the model) or ``no_interruption``."""
    temperature: float | None = None
    """Sampling temperature, 0..2."""
    top_p: float | None = None
    """Nucleus sampling, 0..1."""
    top_k: int | None = None
    """Top-k sampling, 1..100000."""
    max_output_tokens: int | None = None
    """Output token bound per turn."""
    seed: int | None = None
    """Sampling seed (int32)."""
    functions: tuple[LiveFunction, ...] = ()
    """Declared functions, in declaration order."""
    google_search: bool = False
    """Whether the ``google_search`` provider tool is declared."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """Opt-in automatic execution of declared functions by the session."""

    enabled: bool = False
    """Execute calls automatically; false leaves every ``tool_call`` to the application."""
    allowed_tools: tuple[str, ...] = ()
    """Exact names that may run; each is a declared function."""
    policy: str = "sequential"
    """``sequential`` or ``concurrent``."""
    max_concurrency: int = 1
    """Calls running at once (``concurrent`` only, 1..16)."""
    tools: tuple[Any, ...] = field(default=(), hash=False)
    """Tool objects or importable names, as given; the session resolves them."""
    timeout_ms: int = 30_000
    """Bound of one call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveConfig:
    """A checked Live session config. ``api_key`` never appears in :meth:`describe`, ``repr`` or errors."""

    provider: str = "gemini"
    """The Live provider; only ``gemini``."""
    provider_config: LiveProviderConfig
    """What the ``setup`` message carries."""
    api_key: Secret | None = None
    """The key; ``None`` falls back to the environment at connect time (:func:`resolve_api_key`)."""
    endpoint: LiveEndpoint | None = None
    """A loopback emulator; ``None`` is :data:`PRODUCTION_URL`."""
    max_ingress_messages: int = 64
    """Client inputs queued towards the provider."""
    max_ingress_bytes: int = 4 * 1024 * 1024
    """Bytes of client inputs queued towards the provider."""
    max_subscribers: int = 64
    """Concurrent event subscribers."""
    max_subscriber_messages: int = 128
    """Unacknowledged events per subscriber."""
    max_subscriber_bytes: int = 8 * 1024 * 1024
    """Unacknowledged event bytes per subscriber."""
    connect_timeout_ms: int = 10_000
    """Bound of the WebSocket connect plus ``setupComplete``."""
    resume_deadline_ms: int = 15_000
    """Bound of one resumption after a drop or ``goAway``."""
    max_duration_ms: int = 2 * 3600 * 1000
    """Session lifetime bound."""
    tool_execution: ToolExecution | None = None
    """Automatic tool execution; ``None``: off."""

    @property
    def model(self) -> str:
        """The Live model id (``provider_config.model``)."""
        return self.provider_config.model

    @property
    def session_resumption(self) -> bool:
        """Whether the session asks for resumption handles."""
        return self.provider_config.session_resumption

    @property
    def include_thoughts(self) -> bool:
        """Whether thought summaries were asked for (pass to ``codec.decode_server_frame``)."""
        thinking = self.provider_config.thinking
        return bool(thinking is not None and thinking.include_thoughts)

    @property
    def url(self) -> str:
        """The WebSocket URL to dial."""
        return self.endpoint.url if self.endpoint is not None else PRODUCTION_URL

    def describe(self) -> dict[str, Any]:
        """A JSON-safe summary for status and logs: no key (only whether one is configured), no tool objects."""
        out: dict[str, Any] = {"provider": self.provider, "url": self.url, "api_key_configured": bool(self.api_key)}
        out["provider_config"] = _plain(dataclasses.asdict(self.provider_config))
        if self.endpoint is not None:
            out["endpoint"] = _plain(dataclasses.asdict(self.endpoint))
        for key in _LIMITS:
            out[key] = getattr(self, key)
        if self.tool_execution is not None:
            te = self.tool_execution
            out["tool_execution"] = {
                "enabled": te.enabled,
                "allowed_tools": list(te.allowed_tools),
                "policy": te.policy,
                "max_concurrency": te.max_concurrency,
                "tools": [t if isinstance(t, str) else type(t).__name__ for t in te.tools],
                "timeout_ms": te.timeout_ms,
            }
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _endpoint(value: Any) -> LiveEndpoint:
    if isinstance(value, Mapping):
        for key in value:
            if isinstance(key, str) and key != "allow_insecure_loopback" and _TLS_OFF.search(_snake(key)):
                raise ConfigError(
                    "TLS verification cannot be turned off for a Live endpoint",
                    reason="unsupported_live_option",
                    details={"key": f"endpoint.{key}"},
                )
    spec = _keys(value, frozenset({"url", "allow_insecure_loopback", "cafile"}), "endpoint")
    insecure = _bool(spec.get("allow_insecure_loopback", False), "endpoint.allow_insecure_loopback")
    url = spec.get("url")
    expected = f"a ws:// or wss:// loopback URL ending with {LIVE_PATH}, without credentials, query or fragment"
    if not isinstance(url, str) or len(url) > 2048:
        raise _invalid("endpoint.url", expected)
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port
    except ValueError:
        raise _invalid("endpoint.url", expected) from None
    if (
        parts.scheme not in ("ws", "wss")
        or host not in _LOOPBACK_HOSTS
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or not parts.path.endswith(LIVE_PATH)
    ):
        raise _invalid("endpoint.url", expected)
    if parts.scheme == "ws" and not insecure:
        raise _invalid("endpoint.allow_insecure_loopback", "true for a plain ws:// URL")
    cafile = spec.get("cafile")
    if cafile is not None:
        if parts.scheme != "wss":
            raise _invalid("endpoint.cafile", "only with a wss:// URL")
        if not isinstance(cafile, str) or not cafile or len(cafile) > 4096 or "\x00" in cafile:
            raise _invalid("endpoint.cafile", "a path to a PEM CA bundle")
    return LiveEndpoint(url=url, allow_insecure_loopback=insecure, cafile=cafile)


def _model(spec: Mapping[str, Any]) -> str:
    if "model" not in spec:
        raise ConfigError(
            "provider_config.model is required: a Live model id such as " + DEFAULT_LIVE_MODEL,
            reason="live_model_required",
            details={"key": "provider_config.model"},
        )
    model = spec["model"]
    if isinstance(model, str):
        model = model.removeprefix("models/")
    if not isinstance(model, str) or not _MODEL_RE.match(model) or ".." in model:
        raise _invalid("provider_config.model", "a Gemini model id")
    if model not in LIVE_MODELS and "-live" not in model and "native-audio" not in model:
        raise ConfigError(
            f"{model!r} is not a Live model (use e.g. {DEFAULT_LIVE_MODEL})",
            reason="live_model_required",
            details={"key": "provider_config.model", "model": model},
        )
    return model


def _thinking(value: Any, path: str) -> Thinking:
    spec = _keys(value, frozenset({"budget", "level", "include_thoughts"}), path)
    if "budget" in spec and "level" in spec:
        raise _invalid(path, "either budget or level, not both")
    return Thinking(
        budget=_int(spec["budget"], f"{path}.budget", -1, 65536) if "budget" in spec else None,
        level=_choice(spec["level"], f"{path}.level", ("minimal", "low", "medium", "high"))
        if "level" in spec
        else None,
        include_thoughts=_bool(spec["include_thoughts"], f"{path}.include_thoughts")
        if "include_thoughts" in spec
        else None,
    )


def _compression(value: Any, path: str) -> Compression | None:
    if isinstance(value, bool):
        return Compression() if value else None
    spec = _keys(value, frozenset({"trigger_tokens", "target_tokens"}), path)
    trigger = (
        _int(spec["trigger_tokens"], f"{path}.trigger_tokens", 1, _MAX_TOKENS) if "trigger_tokens" in spec else None
    )
    target = _int(spec["target_tokens"], f"{path}.target_tokens", 1, _MAX_TOKENS) if "target_tokens" in spec else None
    if trigger is not None and target is not None and target >= trigger:
        raise _invalid(f"{path}.target_tokens", "fewer tokens than trigger_tokens")
    return Compression(trigger_tokens=trigger, target_tokens=target)


def _vad(value: Any, path: str) -> Vad:
    spec = _keys(
        value, frozenset({"start_sensitivity", "end_sensitivity", "prefix_padding_ms", "silence_duration_ms"}), path
    )
    levels = ("low", "high")
    return Vad(
        start_sensitivity=_choice(spec["start_sensitivity"], f"{path}.start_sensitivity", levels)
        if "start_sensitivity" in spec
        else None,
        end_sensitivity=_choice(spec["end_sensitivity"], f"{path}.end_sensitivity", levels)
        if "end_sensitivity" in spec
        else None,
        prefix_padding_ms=_int(spec["prefix_padding_ms"], f"{path}.prefix_padding_ms", 0, 10_000)
        if "prefix_padding_ms" in spec
        else None,
        silence_duration_ms=_int(spec["silence_duration_ms"], f"{path}.silence_duration_ms", 0, 10_000)
        if "silence_duration_ms" in spec
        else None,
    )


def _schema(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _invalid(path, "a JSON Schema object")
    try:
        text = canonical_dumps(dict(value))
    except (ValidationError, TypeError, ValueError, RecursionError):
        raise _invalid(path, "a JSON-safe JSON Schema object") from None
    if len(text.encode("utf-8")) > _MAX_SCHEMA_BYTES:
        raise _invalid(path, f"a schema of at most {_MAX_SCHEMA_BYTES} bytes of JSON")
    if value.get("type", "object") != "object":
        raise _invalid(f"{path}.type", "'object'")
    copy: dict[str, Any] = json.loads(text)  # a deep copy: the config shares nothing with the caller
    return copy


def _tools(value: Any, path: str) -> tuple[tuple[LiveFunction, ...], bool]:
    if not isinstance(value, list | tuple) or len(value) > _MAX_TOOLS:
        raise _invalid(path, f"a list of at most {_MAX_TOOLS} tool declarations")
    functions: list[LiveFunction] = []
    search = False
    for i, tool in enumerate(value):
        where = f"{path}[{i}]"
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind == "code_execution":
            raise ConfigError(
                "code execution is not supported by Live sessions",
                reason="unsupported_live_option",
                details={"key": f"{where}.type"},
            )
        if kind == "google_search":
            _keys(tool, frozenset({"type"}), where)
            if search:
                raise _invalid(where, "google_search declared once")
            search = True
            continue
        if kind != "function":
            raise _invalid(f"{where}.type", "'function' or 'google_search'")
        spec = _keys(tool, frozenset({"type", "name", "description", "parameters", "behavior"}), where)
        name = _pattern(spec.get("name"), f"{where}.name", _FUNCTION_NAME_RE, "[A-Za-z_][A-Za-z0-9_.:-]*, <= 128 chars")
        if any(f.name == name for f in functions):
            raise _invalid(f"{where}.name", "a name not declared before")
        functions.append(
            LiveFunction(
                name=name,
                description=_text(spec["description"], f"{where}.description", _MAX_DESCRIPTION)
                if "description" in spec
                else None,
                parameters=_schema(spec["parameters"], f"{where}.parameters") if "parameters" in spec else None,
                behavior=_choice(spec["behavior"], f"{where}.behavior", ("blocking", "non_blocking"))
                if "behavior" in spec
                else None,
            )
        )
    return tuple(functions), search


def _provider_config(value: Any) -> LiveProviderConfig:
    p = "provider_config"
    spec = _keys(value, _PROVIDER_KEYS, p)
    model = _model(spec)
    modalities = spec.get("response_modalities", ["audio"])
    if not isinstance(modalities, list | tuple) or len(modalities) != 1:
        raise _invalid(f"{p}.response_modalities", "exactly one of ['audio'] or ['text']")
    modality = _choice(modalities[0], f"{p}.response_modalities[0]", ("audio", "text"))
    out_tx = _bool(spec.get("output_audio_transcription", False), f"{p}.output_audio_transcription")
    if out_tx and modality == "text":
        raise _invalid(f"{p}.output_audio_transcription", "false with the text modality (there is no audio)")
    aad = _bool(spec.get("automatic_activity_detection", True), f"{p}.automatic_activity_detection")
    vad = _vad(spec["vad"], f"{p}.vad") if "vad" in spec else None
    if vad is not None and not aad:
        raise _invalid(f"{p}.vad", "absent when automatic_activity_detection is false")
    functions, search = _tools(spec["tools"], f"{p}.tools") if "tools" in spec else ((), False)

    def opt(key: str, check: Any, *args: Any) -> Any:
        return check(spec[key], f"{p}.{key}", *args) if key in spec else None

    return LiveProviderConfig(
        model=model,
        response_modality=modality,
        output_audio_transcription=out_tx,
        input_audio_transcription=_bool(spec.get("input_audio_transcription", False), f"{p}.input_audio_transcription"),
        voice=opt("voice", _pattern, _VOICE_RE, "a prebuilt voice name such as 'Kore'"),
        language_code=opt("language_code", _pattern, _LANGUAGE_RE, "a BCP-47 language code such as 'en-US'"),
        system_instruction=opt("system_instruction", _text, _MAX_SYSTEM_INSTRUCTION),
        thinking=opt("thinking", _thinking),
        media_resolution=opt("media_resolution", _choice, ("low", "medium", "high")),
        context_window_compression=opt("context_window_compression", _compression),
        session_resumption=_bool(spec.get("session_resumption", False), f"{p}.session_resumption"),
        automatic_activity_detection=aad,
        vad=vad,
        activity_handling=opt("activity_handling", _choice, ("interrupts", "no_interruption")),
        temperature=opt("temperature", _number, 0.0, 2.0),
        top_p=opt("top_p", _number, 0.0, 1.0),
        top_k=opt("top_k", _int, 1, 100_000),
        max_output_tokens=opt("max_output_tokens", _int, 1, 1_048_576),
        seed=opt("seed", _int, -(2**31), 2**31 - 1),
        functions=functions,
        google_search=search,
    )


def _tool_execution(value: Any, functions: tuple[LiveFunction, ...]) -> ToolExecution:
    p = "tool_execution"
    spec = _keys(value, frozenset({"enabled", "allowed_tools", "policy", "max_concurrency", "tools", "timeout_ms"}), p)
    enabled = _bool(spec.get("enabled", False), f"{p}.enabled")
    allowed = spec.get("allowed_tools", [])
    if not isinstance(allowed, list | tuple) or len(allowed) > _MAX_TOOLS:
        raise _invalid(f"{p}.allowed_tools", "a list of declared function names")
    declared = {f.name for f in functions}
    for i, name in enumerate(allowed):
        if not isinstance(name, str) or name not in declared:
            raise _invalid(f"{p}.allowed_tools[{i}]", "the exact name of a function in provider_config.tools")
        if name in allowed[:i]:
            raise _invalid(f"{p}.allowed_tools[{i}]", "a name listed once")
    if enabled and not allowed:
        raise _invalid(f"{p}.allowed_tools", "a non-empty list when enabled")
    policy = _choice(spec.get("policy", "sequential"), f"{p}.policy", ("sequential", "concurrent"))
    if "max_concurrency" in spec and policy != "concurrent":
        raise _invalid(f"{p}.max_concurrency", "absent unless policy is 'concurrent'")
    concurrency = _int(spec.get("max_concurrency", 4 if policy == "concurrent" else 1), f"{p}.max_concurrency", 1, 16)
    tools = spec.get("tools", [])
    if not isinstance(tools, list | tuple) or len(tools) > _MAX_TOOLS:
        raise _invalid(f"{p}.tools", f"a list of at most {_MAX_TOOLS} tools or importable names")
    return ToolExecution(
        enabled=enabled,
        allowed_tools=tuple(allowed),
        policy=policy,
        max_concurrency=concurrency,
        tools=tuple(tools),
        timeout_ms=_int(spec.get("timeout_ms", 30_000), f"{p}.timeout_ms", 1, 600_000),
    )


def live_config(mapping: Mapping[str, Any]) -> LiveConfig:
    """Check a Live session config and build a :class:`LiveConfig`.

    Raises:
        ConfigError: ``unknown_key``, ``invalid_value``, ``unsupported_live_option`` or ``live_model_required``;
            ``details["key"]`` is the dotted path of the offending key.
    """
    spec = _keys(mapping, _TOP_KEYS, "config")
    provider = spec.get("provider", "gemini")
    if provider != "gemini":
        raise _invalid("provider", "'gemini'")
    api_key = spec.get("api_key")
    if api_key is not None and not isinstance(api_key, Secret):
        if not isinstance(api_key, str) or not api_key or "\x00" in api_key:
            raise _invalid("api_key", "a non-empty string or Secret")
        api_key = Secret(api_key)
    pc = _provider_config(spec.get("provider_config", {}))
    limits = {key: _int(spec.get(key, default), key, lo, hi) for key, (lo, hi, default) in _LIMITS.items()}
    return LiveConfig(
        provider="gemini",
        provider_config=pc,
        api_key=api_key,
        endpoint=_endpoint(spec["endpoint"]) if spec.get("endpoint") is not None else None,
        tool_execution=_tool_execution(spec["tool_execution"], pc.functions) if "tool_execution" in spec else None,
        **limits,
    )


def resolve_api_key(cfg: LiveConfig, environ: Mapping[str, str] | None = None) -> Secret:
    """The config's key, else ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY`` (read at connect time).

    Raises:
        ConfigError: reason ``missing_api_key``.
    """
    if cfg.api_key is not None:
        return cfg.api_key
    env = os.environ if environ is None else environ
    for name in API_KEY_ENV_VARS:
        value = env.get(name, "")
        if value:
            return Secret(value)
    raise ConfigError(
        "no Gemini API key: set GEMINI_API_KEY or the Live config's api_key",
        reason="missing_api_key",
        details={"key": "api_key"},
    )


def connection_params(
    cfg: LiveConfig, environ: Mapping[str, str] | None = None
) -> tuple[str, dict[str, str], str | None]:
    """What the transport dials: ``(url, handshake headers, cafile)``; the key goes in ``x-goog-api-key``.

    The headers hold the revealed key: hand them to the socket only, never to a log, event or error.

    Raises:
        ConfigError: reason ``missing_api_key``.
    """
    key = resolve_api_key(cfg, environ)
    cafile = cfg.endpoint.cafile if cfg.endpoint is not None else None
    return cfg.url, {"x-goog-api-key": key.reveal()}, cafile


def _generation_config(pc: LiveProviderConfig) -> dict[str, Any]:
    gen: dict[str, Any] = {"responseModalities": [pc.response_modality.upper()]}
    speech: dict[str, Any] = {}
    if pc.voice is not None:
        speech["voiceConfig"] = {"prebuiltVoiceConfig": {"voiceName": pc.voice}}
    if pc.language_code is not None:
        speech["languageCode"] = pc.language_code
    if speech:
        gen["speechConfig"] = speech
    for attr, wire in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("top_k", "topK"),
        ("max_output_tokens", "maxOutputTokens"),
        ("seed", "seed"),
    ):
        if getattr(pc, attr) is not None:
            gen[wire] = getattr(pc, attr)
    if pc.media_resolution is not None:
        gen["mediaResolution"] = "MEDIA_RESOLUTION_" + pc.media_resolution.upper()
    if pc.thinking is not None:
        thinking: dict[str, Any] = {}
        if pc.thinking.budget is not None:
            thinking["thinkingBudget"] = pc.thinking.budget
        if pc.thinking.level is not None:
            thinking["thinkingLevel"] = pc.thinking.level.upper()
        if pc.thinking.include_thoughts is not None:
            thinking["includeThoughts"] = pc.thinking.include_thoughts
        gen["thinkingConfig"] = thinking
    return gen


def _realtime_input_config(pc: LiveProviderConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not pc.automatic_activity_detection:
        out["automaticActivityDetection"] = {"disabled": True}
    elif pc.vad is not None:
        aad: dict[str, Any] = {"disabled": False}
        if pc.vad.start_sensitivity is not None:
            aad["startOfSpeechSensitivity"] = "START_SENSITIVITY_" + pc.vad.start_sensitivity.upper()
        if pc.vad.end_sensitivity is not None:
            aad["endOfSpeechSensitivity"] = "END_SENSITIVITY_" + pc.vad.end_sensitivity.upper()
        if pc.vad.prefix_padding_ms is not None:
            aad["prefixPaddingMs"] = pc.vad.prefix_padding_ms
        if pc.vad.silence_duration_ms is not None:
            aad["silenceDurationMs"] = pc.vad.silence_duration_ms
        out["automaticActivityDetection"] = aad
    if pc.activity_handling is not None:
        out["activityHandling"] = {"interrupts": "START_OF_ACTIVITY_INTERRUPTS", "no_interruption": "NO_INTERRUPTION"}[
            pc.activity_handling
        ]
    return out


def _tools_wire(pc: LiveProviderConfig) -> list[dict[str, Any]]:
    declarations = []
    for fn in pc.functions:
        decl: dict[str, Any] = {"name": fn.name}
        if fn.description is not None:
            decl["description"] = fn.description
        if fn.parameters is not None:
            decl["parametersJsonSchema"] = fn.parameters
        if fn.behavior is not None:
            decl["behavior"] = fn.behavior.upper()
        declarations.append(decl)
    tools: list[dict[str, Any]] = [{"functionDeclarations": declarations}] if declarations else []
    if pc.google_search:
        tools.append({"googleSearch": {}})
    return tools


def setup_message(cfg: LiveConfig, resumption_handle: str | None = None) -> dict[str, Any]:
    """The first client message, ``{"setup": {...}}`` in v1beta camelCase; with a handle it resumes a session.

    Raises:
        LiveError: reason ``resumption_disabled`` (a handle without ``session_resumption``) or
            ``invalid_resumption_handle`` (not 1..8192 printable ASCII characters; the value is never reported).
    """
    pc = cfg.provider_config
    setup: dict[str, Any] = {"model": f"models/{pc.model}", "generationConfig": _generation_config(pc)}
    if pc.system_instruction:
        setup["systemInstruction"] = {"parts": [{"text": pc.system_instruction}]}
    tools = _tools_wire(pc)
    if tools:
        setup["tools"] = tools
    realtime = _realtime_input_config(pc)
    if realtime:
        setup["realtimeInputConfig"] = realtime
    if pc.input_audio_transcription:
        setup["inputAudioTranscription"] = {}
    if pc.output_audio_transcription:
        setup["outputAudioTranscription"] = {}
    if resumption_handle is not None:
        if not pc.session_resumption:
            raise LiveError("a resumption handle needs session_resumption", reason="resumption_disabled")
        if not isinstance(resumption_handle, str) or not _HANDLE_RE.match(resumption_handle):
            raise LiveError("the resumption handle is malformed", reason="invalid_resumption_handle")
        setup["sessionResumption"] = {"handle": resumption_handle}
    elif pc.session_resumption:
        setup["sessionResumption"] = {}
    compression = pc.context_window_compression
    if compression is not None:
        cwc: dict[str, Any] = {"slidingWindow": {}}
        if compression.trigger_tokens is not None:
            cwc["triggerTokens"] = compression.trigger_tokens
        if compression.target_tokens is not None:
            cwc["slidingWindow"]["targetTokens"] = compression.target_tokens
        setup["contextWindowCompression"] = cwc
    return {"setup": setup}
