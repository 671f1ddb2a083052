"""Strict Gemini config validation: every failure happens before HTTP."""

from __future__ import annotations

import pytest

from adk_actors import models
from adk_actors.errors import ConfigError, ProviderError
from adk_actors.models.gemini.config import DEFAULT_REQUEST_TIMEOUT_S, parse_config, resolve_api_key, resolve_base_url
from adk_actors.secrets import Secret


def _reason(config: dict) -> tuple[str, dict]:
    with pytest.raises(ConfigError) as info:
        parse_config(config)
    return info.value.reason, info.value.details


def test_defaults_use_flash_lite_and_no_generation_config():
    cfg = parse_config({})
    assert cfg.model == "gemini-3.1-flash-lite"
    assert cfg.generation_config_wire == {} and cfg.safety_settings_wire == ()
    assert cfg.retry.max_attempts == 1 and cfg.request_timeout_s == DEFAULT_REQUEST_TIMEOUT_S == 60.0


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"modle": "x"}, "modle"),
        ({"generation_config": {"temprature": 1}}, "generation_config.temprature"),
        ({"generation_config": {"thinking_config": {"level": "low"}}}, "generation_config.thinking_config.level"),
        ({"thinking_config": {"include_thought": True}}, "thinking_config.include_thought"),
        (
            {"safety_settings": [{"category": "harassment", "threshold": "off", "method": "x"}]},
            "safety_settings[0].method",
        ),
        ({"retry": {"attempts": 2}}, "retry.attempts"),
        ({"tool_config": {"function_calling_config": {"modes": "any"}}}, "tool_config.function_calling_config.modes"),
    ],
)
def test_unknown_keys_fail_with_their_path(config, path):
    assert _reason(config) == ("unknown_key", {"key": path})


def test_agent_keys_are_accepted_and_ignored():
    parse_config(
        {
            "name": "a",
            "description": "d",
            "output_key": "k",
            "input_schema": {},
            "output_schema": {},
            "history_policy": {},
            "sub_agents": [],
            "callbacks": {},
            "callback_config": {},
        }
    )


def test_generation_config_maps_to_camel_case():
    cfg = parse_config(
        {
            "generation_config": {
                "temperature": 0.2,
                "top_p": 0.9,
                "top_k": 40,
                "max_output_tokens": 64,
                "stop_sequences": ["END"],
                "candidate_count": 1,
                "seed": 7,
                "response_mime_type": "application/json",
                "response_json_schema": {"type": "object"},
                "thinking_config": {"thinking_level": "high", "include_thoughts": True},
            }
        }
    )
    assert cfg.generation_config_wire == {
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 40,
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
        "candidateCount": 1,
        "seed": 7,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
        "thinkingConfig": {"thinkingLevel": "HIGH", "includeThoughts": True},
    }
    assert cfg.include_thoughts


def test_top_level_provider_options_are_equivalent_to_generation_config():
    top = parse_config(
        {
            "thinking_config": {"thinking_budget": 128},
            "response_mime_type": "application/json",
            "response_schema": {"type": "object"},
            "safety_settings": [{"category": "harassment", "threshold": "off"}],
        }
    )
    nested = parse_config(
        {
            "generation_config": {
                "thinking_config": {"thinking_budget": 128},
                "response_mime_type": "application/json",
                "response_schema": {"type": "object"},
                "safety_settings": [{"category": "harassment", "threshold": "off"}],
            }
        }
    )
    assert top == nested
    assert top.generation_config_wire["responseSchema"] == {"type": "OBJECT"}


def test_same_option_at_both_levels_conflicts():
    reason, _ = _reason({"thinking_config": {}, "generation_config": {"thinking_config": {}}})
    assert reason == "conflicting_keys"


def test_thinking_level_and_budget_together_are_rejected():
    reason, details = _reason({"thinking_config": {"thinking_level": "low", "thinking_budget": 10}})
    assert reason == "conflicting_keys"
    assert details["keys"] == ["thinking_config.thinking_level", "thinking_config.thinking_budget"]


@pytest.mark.parametrize("level", ["minimal", "low", "medium", "high"])
def test_thinking_levels(level):
    cfg = parse_config({"thinking_config": {"thinking_level": level}})
    assert cfg.generation_config_wire["thinkingConfig"] == {"thinkingLevel": level.upper()}


def test_unknown_thinking_level_is_invalid():
    assert _reason({"thinking_config": {"thinking_level": "extreme"}})[0] == "invalid_value"


def test_schema_without_mime_type_defaults_to_json():
    cfg = parse_config(
        {
            "response_schema": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "type": {"type": "array", "items": {"type": "integer"}}},
            }
        }
    )
    gen = cfg.generation_config_wire
    assert gen["responseMimeType"] == "application/json"
    assert gen["responseSchema"] == {
        "type": "OBJECT",
        "properties": {"a": {"type": "STRING"}, "type": {"type": "ARRAY", "items": {"type": "INTEGER"}}},
        "propertyOrdering": ["a", "type"],
    }


def test_response_schema_and_json_schema_conflict():
    reason, _ = _reason({"generation_config": {"response_schema": {}, "response_json_schema": {}}})
    assert reason == "conflicting_keys"


SAFETY_CATEGORIES = {
    "harassment": "HARM_CATEGORY_HARASSMENT",
    "hate_speech": "HARM_CATEGORY_HATE_SPEECH",
    "sexually_explicit": "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "dangerous_content": "HARM_CATEGORY_DANGEROUS_CONTENT",
}
SAFETY_THRESHOLDS = {
    "off": "OFF",
    "block_none": "BLOCK_NONE",
    "block_only_high": "BLOCK_ONLY_HIGH",
    "block_medium_and_above": "BLOCK_MEDIUM_AND_ABOVE",
    "block_low_and_above": "BLOCK_LOW_AND_ABOVE",
    "unspecified": "HARM_BLOCK_THRESHOLD_UNSPECIFIED",
}


@pytest.mark.parametrize("category", sorted(SAFETY_CATEGORIES))
@pytest.mark.parametrize("threshold", sorted(SAFETY_THRESHOLDS))
def test_safety_enums_encode_to_rest_names(category, threshold):
    cfg = parse_config({"safety_settings": [{"category": category, "threshold": threshold}]})
    assert cfg.safety_settings_wire == (
        {"category": SAFETY_CATEGORIES[category], "threshold": SAFETY_THRESHOLDS[threshold]},
    )


def test_civic_integrity_is_rejected():
    reason, details = _reason({"safety_settings": [{"category": "civic_integrity", "threshold": "off"}]})
    assert reason == "invalid_value" and details["deprecated"] is True


def test_duplicate_safety_category_is_rejected():
    reason, _ = _reason(
        {
            "safety_settings": [
                {"category": "harassment", "threshold": "off"},
                {"category": "harassment", "threshold": "block_none"},
            ]
        }
    )
    assert reason == "duplicate_safety_category"


@pytest.mark.parametrize(
    "setting",
    [
        {"category": "harassment", "threshold": "maybe"},
        {"category": "jailbreak", "threshold": "off"},
        {"category": "harassment"},
    ],
)
def test_bad_safety_settings_are_invalid(setting):
    assert _reason({"safety_settings": [setting]})[0] == "invalid_value"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"generation_config": {"temperature": 3}}, "generation_config.temperature"),
        ({"generation_config": {"temperature": float("nan")}}, "generation_config.temperature"),
        ({"generation_config": {"top_k": True}}, "generation_config.top_k"),
        ({"generation_config": {"top_p": "0.5"}}, "generation_config.top_p"),
        ({"generation_config": {"max_output_tokens": 0}}, "generation_config.max_output_tokens"),
        ({"generation_config": {"stop_sequences": "END"}}, "generation_config.stop_sequences"),
        ({"request_timeout": -1}, "request_timeout"),
        ({"request_timeout": "forever"}, "request_timeout"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"model": "../etc"}, "model"),
        ({"model": "a?key=x"}, "model"),
        ({"builtin_tools": ["code_execution"]}, "builtin_tools[0]"),
        ({"base_url": "http://example.com"}, "base_url"),
        ({"base_url": "ftp://127.0.0.1"}, "base_url"),
        ({"base_url": "https://user:pw@example.com"}, "base_url"),
        ({"api_key": ""}, "api_key"),
    ],
)
def test_invalid_values_name_their_key(config, key):
    reason, details = _reason(config)
    assert reason == "invalid_value" and details["key"] == key


def test_request_timeout_accepts_ms_and_infinity():
    assert parse_config({"request_timeout": 1500}).request_timeout_s == 1.5
    assert parse_config({"request_timeout": "infinity"}).request_timeout_s is None


def test_tool_config_and_builtin_tools():
    cfg = parse_config(
        {
            "builtin_tools": ["google_search", "google_search"],
            "tool_config": {"function_calling_config": {"mode": "any", "allowed_function_names": ["f"]}},
        }
    )
    assert cfg.builtin_tools == ("google_search",)
    assert cfg.tool_config_wire == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}


def test_api_key_is_held_as_secret_and_never_in_repr():
    cfg = parse_config({"api_key": "sk-very-secret-123"})
    assert isinstance(cfg.api_key, Secret)
    assert "sk-very-secret-123" not in repr(cfg) and "sk-very-secret-123" not in str(cfg)


def test_api_key_falls_back_to_env_and_missing_key_is_typed():
    cfg = parse_config({})
    assert resolve_api_key(cfg, {"GEMINI_API_KEY": "from-env-key"}).reveal() == "from-env-key"
    with pytest.raises(ProviderError) as info:
        resolve_api_key(cfg, {})
    assert info.value.reason == "missing_api_key"


def test_base_url_precedence():
    assert resolve_base_url(parse_config({}), {}) == "https://generativelanguage.googleapis.com"
    assert resolve_base_url(parse_config({}), {"GEMINI_BASE_URL": "http://127.0.0.1:9/"}) == "http://127.0.0.1:9"
    cfg = parse_config({"base_url": "http://localhost:8"})
    assert resolve_base_url(cfg, {"GEMINI_BASE_URL": "http://127.0.0.1:9"}) == "http://localhost:8"


def test_validate_config_matches_reference_example_without_a_key(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    models.validate_config(
        {
            "provider": "gemini",
            "model": "gemini-3.1-flash-lite",
            "response_mime_type": "application/json",
            "response_schema": {"type": "object"},
        }
    )
    models.validate_config(
        {
            "provider": "gemini",
            "safety_settings": [
                {"category": "hate_speech", "threshold": "block_low_and_above"},
                {"category": "harassment", "threshold": "block_only_high"},
            ],
        }
    )
    with pytest.raises(ConfigError):
        models.validate_config({"provider": "gemini", "bogus": 1})
