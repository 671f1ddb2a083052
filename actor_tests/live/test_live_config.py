"""Checked Live config: every key known or refused, a fixed production endpoint, and a setup message the
official SDK builds the same way."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from google import genai
from google.genai import _common, types
from google.genai import _live_converters as sdk_converters
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import ConfigError, LiveError
from adk_actors.live.config import (
    LIVE_PATH,
    PRODUCTION_URL,
    LiveConfig,
    connection_params,
    live_config,
    resolve_api_key,
    setup_message,
)
from adk_actors.secrets import Secret

MODEL = "gemini-3.1-flash-live-preview"
KEY = "live-test-key-8d1f2c"
LOCAL = "127.0.0.1:8765" + LIVE_PATH
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Return weather for one city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def _cfg(**provider: Any) -> dict[str, Any]:
    return {"provider": "gemini", "provider_config": {"model": MODEL, **provider}}


def _fails(config: Any) -> tuple[str, dict[str, Any]]:
    with pytest.raises(ConfigError) as info:
        live_config(config)
    return info.value.reason, info.value.details


def _camel(value: Any) -> Any:
    """Normalise the SDK's camel/snake mix to camelCase keys."""
    if isinstance(value, dict):
        return {_to_camel(k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _to_camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _sdk_setup(model: str, config: types.LiveConnectConfig, handle_free: bool = True) -> dict[str, Any]:
    """The setup message google-genai itself sends for ``config`` (its ``live.connect`` code path, no socket)."""
    client = genai.Client(api_key="sdk-key")
    request = _common.convert_to_dict(
        sdk_converters._LiveConnectParameters_to_mldev(
            api_client=client._api_client,
            from_object=types.LiveConnectParameters(model=model, config=config).model_dump(exclude_none=True),
        )
    )
    del request["config"]
    return _camel(_common.encode_unserializable_types(request))


def _sdk_validates(message: dict[str, Any]) -> Any:
    """LiveClientMessage validation of a setup message.

    ``LiveClientSetup`` (SDK 3.6.1) lacks ``realtimeInputConfig`` although the SDK's own converter sends
    ``setup.realtimeInputConfig`` (see ``_sdk_setup``): that member is validated with its own type.
    """
    message = copy.deepcopy(message)
    realtime = message["setup"].pop("realtimeInputConfig", None)
    if realtime is not None:
        types.RealtimeInputConfig.model_validate(realtime)
    assert len(message) == 1
    return types.LiveClientMessage.model_validate(message)


# ---- defaults and the setup message ----------------------------------------------------------------------------


def test_minimal_config_takes_the_documented_defaults():
    cfg = live_config(_cfg())
    pc = cfg.provider_config
    assert (cfg.provider, cfg.url, cfg.api_key, cfg.endpoint, cfg.tool_execution) == (
        "gemini",
        PRODUCTION_URL,
        None,
        None,
        None,
    )
    assert PRODUCTION_URL == (
        "wss://generativelanguage.googleapis.com/ws/"
        "google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    )
    assert (cfg.max_ingress_messages, cfg.max_ingress_bytes, cfg.max_subscribers) == (64, 4 * 1024 * 1024, 64)
    assert (cfg.max_subscriber_messages, cfg.max_subscriber_bytes) == (128, 8 * 1024 * 1024)
    assert (cfg.connect_timeout_ms, cfg.resume_deadline_ms, cfg.max_duration_ms) == (10_000, 15_000, 7_200_000)
    assert (pc.response_modality, pc.automatic_activity_detection, pc.session_resumption) == ("audio", True, False)
    assert cfg.model == MODEL and cfg.session_resumption is False and cfg.include_thoughts is False
    message = setup_message(cfg)
    assert message == {"setup": {"model": f"models/{MODEL}", "generationConfig": {"responseModalities": ["AUDIO"]}}}
    _sdk_validates(message)


def test_models_prefix_and_other_live_model_ids_are_accepted():
    assert live_config(_cfg(model=f"models/{MODEL}")).model == MODEL
    for model in ("gemini-live-2.5-flash-preview", "gemini-2.5-flash-native-audio-preview-09-2025", "x-live-001"):
        assert live_config(_cfg(model=model)).model == model


FULL_PROVIDER: dict[str, Any] = {
    "model": f"models/{MODEL}",
    "response_modalities": ["audio"],
    "output_audio_transcription": True,
    "input_audio_transcription": True,
    "voice": "Kore",
    "language_code": "en-US",
    "system_instruction": "You are terse.",
    "thinking": {"level": "low", "include_thoughts": True},
    "media_resolution": "low",
    "context_window_compression": {"trigger_tokens": 25600, "target_tokens": 12800},
    "session_resumption": True,
    "automatic_activity_detection": True,
    "vad": {"start_sensitivity": "low", "end_sensitivity": "high", "prefix_padding_ms": 20, "silence_duration_ms": 500},
    "activity_handling": "no_interruption",
    "temperature": 0.7,
    "top_p": 0.95,
    "top_k": 40,
    "max_output_tokens": 1024,
    "seed": 7,
    "tools": [{**WEATHER, "behavior": "non_blocking"}, {"type": "google_search"}],
}


def test_full_setup_message_matches_what_the_official_sdk_sends_for_the_same_options():
    cfg = live_config({"provider": "gemini", "provider_config": FULL_PROVIDER})
    ours = setup_message(cfg, "CjQKMmhhbmRsZQ")
    _sdk_validates(ours)
    sdk_config = types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        speech_config=types.SpeechConfig(
            voice_config=types.VoiceConfig(prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name="Kore")),
            language_code="en-US",
        ),
        system_instruction="You are terse.",
        thinking_config=types.ThinkingConfig(thinking_level=types.ThinkingLevel.LOW, include_thoughts=True),
        media_resolution=types.MediaResolution.MEDIA_RESOLUTION_LOW,
        context_window_compression=types.ContextWindowCompressionConfig(
            trigger_tokens=25600, sliding_window=types.SlidingWindow(target_tokens=12800)
        ),
        session_resumption=types.SessionResumptionConfig(handle="CjQKMmhhbmRsZQ"),
        realtime_input_config=types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(
                disabled=False,
                start_of_speech_sensitivity=types.StartSensitivity.START_SENSITIVITY_LOW,
                end_of_speech_sensitivity=types.EndSensitivity.END_SENSITIVITY_HIGH,
                prefix_padding_ms=20,
                silence_duration_ms=500,
            ),
            activity_handling=types.ActivityHandling.NO_INTERRUPTION,
        ),
        temperature=0.7,
        top_p=0.95,
        top_k=40,
        max_output_tokens=1024,
        seed=7,
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name="get_weather",
                        description="Return weather for one city",
                        parameters_json_schema=WEATHER["parameters"],
                        behavior=types.Behavior.NON_BLOCKING,
                    )
                ]
            ),
            types.Tool(google_search=types.GoogleSearch()),
        ],
    )
    sdk = _sdk_setup(f"models/{MODEL}", sdk_config)
    # Differences that carry no meaning: the SDK sends topK as a float, tags the system instruction with a role,
    # and orders tools its own way; and it camel-cases the user's schema keys when normalised here.
    sdk["setup"]["generationConfig"]["topK"] = int(sdk["setup"]["generationConfig"]["topK"])
    sdk["setup"]["systemInstruction"].pop("role")
    sdk["setup"]["tools"].sort(key=json.dumps)
    ours_normalised = _camel(copy.deepcopy(ours))
    ours_normalised["setup"]["tools"].sort(key=json.dumps)
    assert ours_normalised == sdk
    assert ours["setup"]["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == WEATHER["parameters"]


def test_setup_message_variants_validate_against_the_sdk():
    text_only = live_config(_cfg(response_modalities=["TEXT"], thinking={"budget": 0}))
    assert setup_message(text_only)["setup"]["generationConfig"] == {
        "responseModalities": ["TEXT"],
        "thinkingConfig": {"thinkingBudget": 0},
    }
    manual = live_config(_cfg(automatic_activity_detection=False, activity_handling="interrupts"))
    assert setup_message(manual)["setup"]["realtimeInputConfig"] == {
        "automaticActivityDetection": {"disabled": True},
        "activityHandling": "START_OF_ACTIVITY_INTERRUPTS",
    }
    resumable = live_config(_cfg(session_resumption=True, context_window_compression=True))
    first = setup_message(resumable)["setup"]
    assert first["sessionResumption"] == {} and first["contextWindowCompression"] == {"slidingWindow": {}}
    assert setup_message(resumable, "h-1")["setup"]["sessionResumption"] == {"handle": "h-1"}
    for cfg in (text_only, manual, resumable):
        _sdk_validates(setup_message(cfg))


def test_setup_message_refuses_a_handle_without_resumption_or_a_malformed_one():
    with pytest.raises(LiveError) as info:
        setup_message(live_config(_cfg()), "h-1")
    assert info.value.reason == "resumption_disabled"
    for handle in ("", "has space", "x" * 8193, 5):
        with pytest.raises(LiveError) as info:
            setup_message(live_config(_cfg(session_resumption=True)), handle)  # type: ignore[arg-type]
        assert info.value.reason == "invalid_resumption_handle" and "has space" not in str(info.value.details)


# ---- refused keys ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"provider_config": {"model": MODEL}, "modle": 1}, "modle"),
        (_cfg(temprature=1), "provider_config.temprature"),
        (_cfg(thinking={"budget": 1, "include_thought": True}), "provider_config.thinking.include_thought"),
        (_cfg(vad={"silence_ms": 1}), "provider_config.vad.silence_ms"),
        (_cfg(context_window_compression={"trigger": 1}), "provider_config.context_window_compression.trigger"),
        (_cfg(tools=[{**WEATHER, "strict": True}]), "provider_config.tools[0].strict"),
        (_cfg(tools=[{"type": "google_search", "x": 1}]), "provider_config.tools[0].x"),
        ({**_cfg(), "endpoint": {"url": "wss://" + LOCAL, "proxy": "x"}}, "endpoint.proxy"),
        ({**_cfg(), "tool_execution": {"executor": "m"}}, "tool_execution.executor"),
        ({**_cfg(), "transport": "gun"}, "transport"),
        (dict([*_cfg().items(), (3, "x")]), "3"),
    ],
)
def test_unknown_keys_are_named_by_their_dotted_path(config, key):
    assert _fails(config) == ("unknown_key", {"key": key})


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (_cfg(proactive_audio=True), "provider_config.proactive_audio"),
        (_cfg(proactivity={"proactive_audio": True}), "provider_config.proactivity"),
        (_cfg(affective_dialog=True), "provider_config.affective_dialog"),
        (_cfg(enable_affective_dialog=True), "provider_config.enable_affective_dialog"),
        (_cfg(enableAffectiveDialog=True), "provider_config.enableAffectiveDialog"),
        (_cfg(response_mime_type="application/json"), "provider_config.response_mime_type"),
        (_cfg(response_schema={"type": "object"}), "provider_config.response_schema"),
        (_cfg(structured_output=True), "provider_config.structured_output"),
        (_cfg(cached_content="cachedContents/abc"), "provider_config.cached_content"),
        (_cfg(code_execution=True), "provider_config.code_execution"),
        (_cfg(media_chunks=True), "provider_config.media_chunks"),
        ({**_cfg(), "cached_content": "cachedContents/abc"}, "cached_content"),
        (_cfg(tools=[{"type": "code_execution"}]), "provider_config.tools[0].type"),
        ({**_cfg(), "endpoint": {"url": "wss://" + LOCAL, "verify": False}}, "endpoint.verify"),
        (
            {**_cfg(), "endpoint": {"url": "wss://" + LOCAL, "insecure_skip_verify": True}},
            "endpoint.insecure_skip_verify",
        ),
        ({**_cfg(), "endpoint": {"url": "wss://" + LOCAL, "check_hostname": False}}, "endpoint.check_hostname"),
        ({**_cfg(), "endpoint": {"url": "wss://" + LOCAL, "cert_reqs": "CERT_NONE"}}, "endpoint.cert_reqs"),
    ],
)
def test_unsupported_live_options_are_refused_not_ignored(config, key):
    assert _fails(config) == ("unsupported_live_option", {"key": key})


@pytest.mark.parametrize("model", ["gemini-3.1-flash-lite", "models/gemini-2.5-flash", "gemini-2.5-pro"])
def test_rest_models_are_refused_with_live_model_required(model):
    reason, details = _fails(_cfg(model=model))
    assert reason == "live_model_required" and details["key"] == "provider_config.model"


def test_a_missing_model_is_live_model_required_too():
    assert _fails({"provider": "gemini"}) == ("live_model_required", {"key": "provider_config.model"})
    assert _fails({"provider_config": {}})[0] == "live_model_required"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ("not a mapping", "config"),
        ({**_cfg(), "provider": "openai"}, "provider"),
        ({**_cfg(), "api_key": ""}, "api_key"),
        ({**_cfg(), "api_key": 123}, "api_key"),
        ({"provider_config": "x"}, "provider_config"),
        (_cfg(model="../etc"), "provider_config.model"),
        (_cfg(model=5), "provider_config.model"),
        (_cfg(response_modalities=["audio", "text"]), "provider_config.response_modalities"),
        (_cfg(response_modalities=[]), "provider_config.response_modalities"),
        (_cfg(response_modalities="audio"), "provider_config.response_modalities"),
        (_cfg(response_modalities=["image"]), "provider_config.response_modalities[0]"),
        (
            _cfg(response_modalities=["text"], output_audio_transcription=True),
            "provider_config.output_audio_transcription",
        ),
        (_cfg(input_audio_transcription="yes"), "provider_config.input_audio_transcription"),
        (_cfg(voice="Kore; drop"), "provider_config.voice"),
        (_cfg(voice="K" * 65), "provider_config.voice"),
        (_cfg(language_code="english"), "provider_config.language_code"),
        (_cfg(system_instruction="x" * (64 * 1024 + 1)), "provider_config.system_instruction"),
        (_cfg(system_instruction="é" * (32 * 1024 + 1)), "provider_config.system_instruction"),
        (_cfg(system_instruction="a\x00b"), "provider_config.system_instruction"),
        (_cfg(system_instruction="\ud800"), "provider_config.system_instruction"),
        (_cfg(thinking={"budget": 1, "level": "low"}), "provider_config.thinking"),
        (_cfg(thinking={"level": "extreme"}), "provider_config.thinking.level"),
        (_cfg(thinking={"budget": -2}), "provider_config.thinking.budget"),
        (_cfg(media_resolution="ultra"), "provider_config.media_resolution"),
        (
            _cfg(context_window_compression={"trigger_tokens": 100, "target_tokens": 100}),
            "provider_config.context_window_compression.target_tokens",
        ),
        (
            _cfg(context_window_compression={"trigger_tokens": 0}),
            "provider_config.context_window_compression.trigger_tokens",
        ),
        (_cfg(context_window_compression="on"), "provider_config.context_window_compression"),
        (_cfg(automatic_activity_detection=False, vad={}), "provider_config.vad"),
        (_cfg(vad={"start_sensitivity": "medium"}), "provider_config.vad.start_sensitivity"),
        (_cfg(vad={"silence_duration_ms": 10_001}), "provider_config.vad.silence_duration_ms"),
        (_cfg(activity_handling="ignore"), "provider_config.activity_handling"),
        (_cfg(temperature=2.5), "provider_config.temperature"),
        (_cfg(temperature=float("nan")), "provider_config.temperature"),
        (_cfg(temperature=True), "provider_config.temperature"),
        (_cfg(top_p=-0.1), "provider_config.top_p"),
        (_cfg(top_k=0), "provider_config.top_k"),
        (_cfg(top_k=10**400), "provider_config.top_k"),
        (_cfg(max_output_tokens=1.5), "provider_config.max_output_tokens"),
        (_cfg(seed=2**31), "provider_config.seed"),
        (_cfg(tools={"type": "google_search"}), "provider_config.tools"),
        (_cfg(tools=[{"name": "f"}]), "provider_config.tools[0].type"),
        (_cfg(tools=[{**WEATHER, "name": "1bad"}]), "provider_config.tools[0].name"),
        (_cfg(tools=[{**WEATHER, "name": "f" * 129}]), "provider_config.tools[0].name"),
        (_cfg(tools=[WEATHER, WEATHER]), "provider_config.tools[1].name"),
        (_cfg(tools=[{"type": "google_search"}, {"type": "google_search"}]), "provider_config.tools[1]"),
        (_cfg(tools=[{**WEATHER, "parameters": {"type": "string"}}]), "provider_config.tools[0].parameters.type"),
        (_cfg(tools=[{**WEATHER, "parameters": "schema"}]), "provider_config.tools[0].parameters"),
        (_cfg(tools=[{**WEATHER, "parameters": {"x": float("inf")}}]), "provider_config.tools[0].parameters"),
        (_cfg(tools=[{**WEATHER, "behavior": "async"}]), "provider_config.tools[0].behavior"),
        (_cfg(tools=[{**WEATHER, "description": 3}]), "provider_config.tools[0].description"),
    ],
)
def test_invalid_values_are_named_by_their_dotted_path(config, key):
    reason, details = _fails(config)
    assert (reason, details["key"]) == ("invalid_value", key)


LIMITS = [
    ("max_ingress_messages", 1, 4096),
    ("max_ingress_bytes", 1024, 64 * 1024 * 1024),
    ("max_subscribers", 1, 4096),
    ("max_subscriber_messages", 1, 65536),
    ("max_subscriber_bytes", 64 * 1024, 256 * 1024 * 1024),
    ("connect_timeout_ms", 1, 120_000),
    ("resume_deadline_ms", 1, 300_000),
    ("max_duration_ms", 1, 24 * 3600 * 1000),
]


@pytest.mark.parametrize(("key", "lo", "hi"), LIMITS)
def test_limits_accept_their_bounds_and_refuse_one_past(key, lo, hi):
    assert getattr(live_config({**_cfg(), key: lo}), key) == lo
    assert getattr(live_config({**_cfg(), key: hi}), key) == hi
    for bad in (lo - 1, hi + 1, float(lo), "10", True, None):
        assert _fails({**_cfg(), key: bad}) == (
            "invalid_value",
            {"key": key, "expected": f"an integer in [{lo}, {hi}]"},
        )


# ---- endpoint --------------------------------------------------------------------------------------------------


def test_loopback_endpoints_for_an_emulator():
    plain = live_config({**_cfg(), "endpoint": {"url": "ws://" + LOCAL, "allow_insecure_loopback": True}})
    assert plain.url == "ws://" + LOCAL
    for host in ("localhost:1", "[::1]:2"):
        tls = live_config({**_cfg(), "endpoint": {"url": f"wss://{host}{LIVE_PATH}", "cafile": "/tmp/emulator-ca.pem"}})
        assert tls.url == f"wss://{host}{LIVE_PATH}" and tls.endpoint is not None
        assert tls.endpoint.cafile == "/tmp/emulator-ca.pem"
    assert live_config({**_cfg(), "endpoint": None}).url == PRODUCTION_URL


@pytest.mark.parametrize(
    ("endpoint", "key"),
    [
        ({"url": "ws://" + LOCAL}, "endpoint.allow_insecure_loopback"),
        ({"url": "ws://" + LOCAL, "allow_insecure_loopback": "true"}, "endpoint.allow_insecure_loopback"),
        ({"url": "ws://example.com" + LIVE_PATH, "allow_insecure_loopback": True}, "endpoint.url"),
        ({"url": "wss://example.com" + LIVE_PATH}, "endpoint.url"),
        ({"url": PRODUCTION_URL}, "endpoint.url"),
        ({"url": "wss://127.0.0.2" + LIVE_PATH}, "endpoint.url"),
        ({"url": "wss://127.0.0.1.example.com" + LIVE_PATH}, "endpoint.url"),
        ({"url": "https://" + LOCAL}, "endpoint.url"),
        ({"url": "wss://127.0.0.1:8765/ws/other"}, "endpoint.url"),
        ({"url": "wss://" + LOCAL + "?key=abc"}, "endpoint.url"),
        ({"url": "wss://user:pw@" + LOCAL}, "endpoint.url"),
        ({"url": "wss://" + LOCAL + "#f"}, "endpoint.url"),
        ({"url": "wss://127.0.0.1:99999" + LIVE_PATH}, "endpoint.url"),
        ({"url": 5}, "endpoint.url"),
        ({}, "endpoint.url"),
        ({"url": "ws://" + LOCAL, "allow_insecure_loopback": True, "cafile": "/ca.pem"}, "endpoint.cafile"),
        ({"url": "wss://" + LOCAL, "cafile": ""}, "endpoint.cafile"),
        ("wss://" + LOCAL, "endpoint"),
    ],
)
def test_endpoints_off_loopback_or_without_tls_consent_are_refused(endpoint, key):
    reason, details = _fails({**_cfg(), "endpoint": endpoint})
    assert (reason, details["key"]) == ("invalid_value", key)


# ---- tool execution --------------------------------------------------------------------------------------------


def test_tool_execution_is_checked_against_the_declared_functions():
    tool_object = object()
    cfg = live_config(
        {
            **_cfg(tools=[WEATHER, {"type": "google_search"}]),
            "tool_execution": {
                "enabled": True,
                "allowed_tools": ["get_weather"],
                "policy": "concurrent",
                "max_concurrency": 16,
                "tools": ["myapp.tools:get_weather", tool_object],
                "timeout_ms": 5000,
            },
        }
    )
    te = cfg.tool_execution
    assert te is not None and te.enabled and te.allowed_tools == ("get_weather",)
    assert (te.policy, te.max_concurrency, te.timeout_ms) == ("concurrent", 16, 5000)
    assert te.tools[1] is tool_object  # kept as given: the session resolves tools
    sequential = live_config({**_cfg(tools=[WEATHER]), "tool_execution": {"enabled": False}}).tool_execution
    assert sequential is not None and (sequential.policy, sequential.max_concurrency) == ("sequential", 1)


@pytest.mark.parametrize(
    ("execution", "key"),
    [
        ({"enabled": True}, "tool_execution.allowed_tools"),
        ({"enabled": True, "allowed_tools": []}, "tool_execution.allowed_tools"),
        ({"enabled": True, "allowed_tools": ["get_time"]}, "tool_execution.allowed_tools[0]"),
        ({"enabled": True, "allowed_tools": ["GET_WEATHER"]}, "tool_execution.allowed_tools[0]"),
        ({"enabled": True, "allowed_tools": ["google_search"]}, "tool_execution.allowed_tools[0]"),
        ({"enabled": True, "allowed_tools": ["get_weather", "get_weather"]}, "tool_execution.allowed_tools[1]"),
        ({"enabled": True, "allowed_tools": "get_weather"}, "tool_execution.allowed_tools"),
        ({"enabled": "yes"}, "tool_execution.enabled"),
        ({"policy": "parallel"}, "tool_execution.policy"),
        ({"max_concurrency": 2}, "tool_execution.max_concurrency"),
        ({"policy": "concurrent", "max_concurrency": 17}, "tool_execution.max_concurrency"),
        ({"tools": "myapp.tools"}, "tool_execution.tools"),
        ({"timeout_ms": 0}, "tool_execution.timeout_ms"),
        ("on", "tool_execution"),
    ],
)
def test_tool_execution_refusals(execution, key):
    reason, details = _fails({**_cfg(tools=[WEATHER, {"type": "google_search"}]), "tool_execution": execution})
    assert (reason, details["key"]) == ("invalid_value", key)


# ---- the key ---------------------------------------------------------------------------------------------------


def test_the_api_key_is_a_secret_never_shown():
    cfg = live_config({**_cfg(), "api_key": KEY, "tool_execution": {"tools": [object()]}})
    assert cfg.api_key == Secret(KEY)
    for text in (repr(cfg), str(cfg), json.dumps(cfg.describe())):
        assert KEY not in text
    assert cfg.describe()["api_key_configured"] is True
    assert live_config({**_cfg(), "api_key": Secret(KEY)}).api_key == Secret(KEY)
    with pytest.raises(ConfigError) as info:
        live_config({**_cfg(temperature=9), "api_key": KEY})
    assert KEY not in str(info.value) and KEY not in json.dumps(info.value.details)


def test_describe_is_json_safe_and_complete():
    cfg = live_config({"provider_config": FULL_PROVIDER, "endpoint": {"url": "wss://" + LOCAL}})
    described = json.loads(json.dumps(cfg.describe(), allow_nan=False))
    assert described["url"] == "wss://" + LOCAL and described["api_key_configured"] is False
    assert described["provider_config"]["functions"][0]["name"] == "get_weather"
    assert described["provider_config"]["google_search"] is True
    assert described["max_subscribers"] == 64


def test_config_pickles_as_a_value():
    cfg = live_config({"provider_config": FULL_PROVIDER, "api_key": KEY, "tool_execution": {"tools": ["m:f"]}})
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg and isinstance(again, LiveConfig)
    assert setup_message(again) == setup_message(cfg)


def test_config_shares_no_mutable_schema_with_the_caller():
    tool: dict[str, Any] = copy.deepcopy(WEATHER)
    cfg = live_config(_cfg(tools=[tool]))
    tool["parameters"]["properties"]["zip"] = {"type": "string"}
    schema = cfg.provider_config.functions[0].parameters
    assert schema is not None and "zip" not in schema["properties"]


def test_resolve_api_key_prefers_the_config_then_gemini_then_google_env():
    with_key = live_config({**_cfg(), "api_key": KEY})
    without = live_config(_cfg())
    assert resolve_api_key(with_key, {"GEMINI_API_KEY": "other-key-1"}).reveal() == KEY
    assert resolve_api_key(without, {"GEMINI_API_KEY": "gem-key-1", "GOOGLE_API_KEY": "goo-key-1"}).reveal() == (
        "gem-key-1"
    )
    assert resolve_api_key(without, {"GOOGLE_API_KEY": "goo-key-1"}).reveal() == "goo-key-1"
    with pytest.raises(ConfigError) as info:
        resolve_api_key(without, {"GEMINI_API_KEY": ""})
    assert info.value.reason == "missing_api_key"


def test_connection_params_put_the_key_in_the_handshake_header_not_the_url():
    cfg = live_config({**_cfg(), "api_key": KEY, "endpoint": {"url": "wss://" + LOCAL, "cafile": "/ca.pem"}})
    url, headers, cafile = connection_params(cfg)
    assert (url, headers, cafile) == ("wss://" + LOCAL, {"x-goog-api-key": KEY}, "/ca.pem")
    url, headers, cafile = connection_params(live_config(_cfg()), {"GEMINI_API_KEY": "env-key-123"})
    assert (url, headers, cafile) == (PRODUCTION_URL, {"x-goog-api-key": "env-key-123"}, None)
    assert KEY not in url


# ---- fuzzing ---------------------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
values = st.recursive(
    scalars | st.sampled_from([MODEL, "audio", "text", "low", "high", "concurrent", "get_weather", "ws://" + LOCAL]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "name", "url", "budget", "level", "parameters", "enabled"]), inner)
    ),
    max_leaves=12,
)
provider_keys = st.sampled_from(
    [
        "model",
        "response_modalities",
        "output_audio_transcription",
        "voice",
        "thinking",
        "context_window_compression",
        "vad",
        "automatic_activity_detection",
        "temperature",
        "top_k",
        "tools",
        "proactivity",
        "bogus",
    ]
)
top_keys = st.sampled_from(
    ["provider", "api_key", "endpoint", "tool_execution", "max_ingress_bytes", "max_duration_ms", "junk"]
)


@settings(max_examples=500, deadline=None)
@given(
    top=st.dictionaries(top_keys, values, max_size=3),
    provider=st.dictionaries(provider_keys, values, max_size=4),
    with_model=st.booleans(),
)
def test_live_config_on_random_mappings_returns_a_config_or_raises_config_error_only(top, provider, with_model):
    if with_model:
        provider = {"model": MODEL, **provider}
    for config in (top, {**top, "provider_config": provider}):
        try:
            cfg = live_config(config)
        except ConfigError as exc:
            assert exc.reason in ("unknown_key", "invalid_value", "unsupported_live_option", "live_model_required")
            assert "key" in exc.details
        else:
            _sdk_validates(setup_message(cfg))
            json.dumps(cfg.describe(), allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(config=st.dictionaries(st.text(max_size=6) | st.integers(), values, max_size=4) | values)
def test_live_config_on_arbitrary_values_raises_config_error_only(config):
    try:
        live_config(config)
    except ConfigError:
        pass
