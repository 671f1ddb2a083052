"""The public surface of adk_actors.models: exports, registry, pickling, and config fuzzing."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import models
from adk_actors.errors import ConfigError, ProviderError
from adk_actors.models import ModelResponse, ProviderResult, StreamFrame
from adk_actors.models.gemini import GeminiProvider
from adk_actors.models.gemini.config import parse_config


@pytest.mark.parametrize("module", ["adk_actors.models", "adk_actors.models.gemini"])
def test_all_is_sorted_and_resolves(module):
    mod = __import__(module, fromlist=["__all__"])
    assert list(mod.__all__) == sorted(mod.__all__)
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_gemini_is_registered_by_default():
    assert isinstance(models.get_provider("gemini"), GeminiProvider)
    assert "gemini" in models.registered_providers()
    with pytest.raises(ConfigError) as info:
        models.get_provider("nope")
    assert info.value.reason == "unknown_provider"


class EchoProvider:
    """A minimal custom provider: only generate and stream, returning plain values."""

    def generate(self, config, history, tools=(), *, cancel=None):
        return history[-1]["content"].upper()

    def stream(self, config, history, tools, on_delta, *, cancel=None):
        text = history[-1]["content"]
        for word in text.split():
            on_delta(word)
        return ProviderResult(output=text, provider_metadata={"schema_version": 1, "provider": "echo"})


def test_custom_providers_need_only_generate_and_stream():
    models.register_provider("echo-test", EchoProvider())
    cfg = {"provider": "echo-test"}
    assert models.generate(cfg, [{"role": "user", "content": "hi there"}]) == "HI THERE"
    assert models.generate_response(cfg, [{"role": "user", "content": "a"}]).text == "A"
    deltas: list[str] = []
    final = models.stream(cfg, [{"role": "user", "content": "x y"}], [], deltas.append)
    assert deltas == ["x", "y"] and final.text == "x y" and final.provider_metadata["provider"] == "echo"
    assert models.capabilities("echo-test") == {}
    models.validate_config(cfg)  # optional callback absent: nothing to check
    with pytest.raises(ProviderError) as info:
        models.stream_content(cfg, [], [], lambda _f: None)
    assert info.value.reason == "unsupported"
    assert models.generate({"provider": EchoProvider()}, [{"role": "user", "content": "obj"}]) == "OBJ"


class BadResultProvider:
    """A custom provider returning a type the models API does not understand."""

    def generate(self, config, history, tools=(), *, cancel=None):
        return 42

    def stream(self, config, history, tools, on_delta, *, cancel=None):
        return [b"not", b"a", b"result"]


def test_an_unsupported_custom_provider_result_is_a_provider_error():
    cfg = {"provider": BadResultProvider()}
    for call in (
        lambda: models.generate(cfg, [{"role": "user", "content": "x"}]),
        lambda: models.generate_response(cfg, [{"role": "user", "content": "x"}]),
        lambda: models.stream(cfg, [{"role": "user", "content": "x"}], [], lambda _d: None),
    ):
        with pytest.raises(ProviderError) as info:
            call()
        assert info.value.reason == "invalid_provider_result"
        assert info.value.details["type"] in ("int", "list")


def test_registering_a_non_provider_fails():
    with pytest.raises(ConfigError):
        models.register_provider("bad", object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        models.register_provider("", EchoProvider())


def test_results_pickle_round_trip():
    values: list[Any] = [
        ModelResponse(
            content={"schema_version": 1, "parts": [{"type": "text", "text": "x"}]},
            text="x",
            function_calls=({"name": "f", "args": {}, "id": "1", "thought_signature": None},),
            finish_reason="stop",
            usage={"total_token_count": 3},
            provider_metadata={"a": [1]},
            model_version="m",
            response_id="r",
        ),
        ProviderResult(output="x", provider_metadata={"schema_version": 1}),
        StreamFrame(index=0, content={"schema_version": 1, "parts": []}),
    ]
    for value in values:
        assert pickle.loads(pickle.dumps(value)) == value


def test_provider_objects_hold_no_threads_or_clients():
    provider = GeminiProvider()
    assert pickle.loads(pickle.dumps(provider)).capabilities() == provider.capabilities()
    assert not any(isinstance(v, threading.Thread) for v in vars(provider).values())


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_keys = st.sampled_from(
    [
        "model",
        "generation_config",
        "thinking_config",
        "safety_settings",
        "retry",
        "request_timeout",
        "builtin_tools",
        "tool_config",
        "response_schema",
        "base_url",
        "instructions",
        "response_mime_type",
        "bogus",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _json, max_size=4))
def test_config_validation_only_ever_raises_config_error(config):
    try:
        parse_config(config)
    except ConfigError:
        pass
