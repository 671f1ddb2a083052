"""Export configuration: the otel_* settings and their validation, configure()'s checks, the node environment."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from adk_actors.errors import ConfigError
from adk_actors.observability import bus, setup, spans
from adk_actors.settings import Settings, check_otel_endpoint, load_settings


def test_defaults_turn_export_off() -> None:
    s = Settings()
    assert (s.otel_endpoint, s.otel_service_name, s.otel_sample_ratio, s.otel_max_queue) == (
        "",
        "adk_actors",
        1.0,
        2048,
    )
    assert s.otel_resource_attributes == {}
    assert setup.node_environment(s) == {setup.NODE_ENV: ""}
    assert Settings(otel_endpoint=None).otel_endpoint == ""  # type: ignore[arg-type]  # None also means off


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:4318",
        "http://localhost:4318/v1/traces",
        "http://[::1]:4318",
        "http://127.9.9.9:4318",
        "https://collector.example.com",
        "https://10.0.0.5:4318/otlp",
    ],
)
def test_http_to_loopback_and_https_anywhere_are_accepted(url: str) -> None:
    assert check_otel_endpoint(url) == url
    assert Settings(otel_endpoint=url).otel_endpoint == url


@pytest.mark.parametrize(
    "url",
    [
        "http://collector.example.com:4318",  # plain http to a remote host
        "http://10.0.0.5:4318",
        "ftp://127.0.0.1/x",
        "127.0.0.1:4318",
        "https://user:secret@collector.example.com",  # credentials in the URL
        "https://collector.example.com/?token=x",
        "https://collector.example.com/#frag",
        "http://127.0.0.1:99999",
        "https://",
        " https://collector.example.com",
        "https://" + "a" * 3000,
    ],
)
def test_unsafe_or_malformed_endpoints_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings(otel_endpoint=url)
    assert info.value.reason == "invalid_value" and info.value.details["key"] == "otel_endpoint"
    assert "secret" not in str(info.value)
    with pytest.raises(ConfigError):
        setup.configure(endpoint=url)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("otel_sample_ratio", 1.5),
        ("otel_sample_ratio", -0.1),
        ("otel_sample_ratio", True),
        ("otel_max_queue", 0),
        ("otel_max_queue", 10**6),
        ("otel_service_name", ""),
        ("otel_resource_attributes", {"service.name": "x"}),
        ("otel_resource_attributes", {"k": ["list"]}),
        ("otel_resource_attributes", {f"k{i}": "v" for i in range(65)}),
    ],
)
def test_out_of_range_observability_settings_are_config_errors(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        Settings(**{key: value})  # type: ignore[arg-type]
    assert info.value.details["key"] == key


def test_settings_come_from_the_observability_table_and_the_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "adk.toml"
    cfg.write_text(
        '[observability]\notel_endpoint = "http://127.0.0.1:4318"\notel_resource_attributes = { team = "a" }\n'
    )
    s = load_settings(
        cfg,
        env={
            "ADK_OTEL_SAMPLE_RATIO": "0.25",
            "ADK_OTEL_MAX_QUEUE": "64",
            "ADK_OTEL_RESOURCE_ATTRIBUTES": '{"team": "b", "replicas": 3}',
        },
    )
    assert s.otel_endpoint == "http://127.0.0.1:4318" and s.otel_sample_ratio == 0.25 and s.otel_max_queue == 64
    assert s.otel_resource_attributes == {"team": "b", "replicas": 3}
    assert Settings.from_dict(s.to_dict()) == s
    env = json.loads(setup.node_environment(s)[setup.NODE_ENV])
    assert env == {
        "endpoint": "http://127.0.0.1:4318",
        "service_name": "adk_actors",
        "resource_attributes": {"team": "b", "replicas": 3},
        "sample_ratio": 0.25,
        "max_queue": 64,
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_queue": 0},
        {"batch_size": 0},
        {"export_timeout_ms": True},
        {"sample_ratio": 2},
        {"sample_ratio": float("nan")},
        {"service_name": " "},
        {"resource_attributes": {"k": object()}},
    ],
)
def test_configure_checks_its_bounds(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        setup.configure(endpoint="http://127.0.0.1:4318", **kwargs)
    assert setup.configured() is False


def test_a_broken_inherited_configuration_turns_export_off_without_failing_the_emitter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(setup.NODE_ENV, "{not json")
    with pytest.raises(ConfigError):
        setup.configure_from_environment()
    monkeypatch.setattr(spans, "_environment_read", False)  # as in a fresh process
    spans.export_spans([spans.span_start("x", None).end()])
    assert spans.stats()["configured"] is False and spans._environment_read is True
    monkeypatch.setenv(setup.NODE_ENV, json.dumps({"endpoint": "http://127.0.0.1:4318", "bogus": 1}))
    with pytest.raises(ConfigError):
        setup.configure_from_environment()


@pytest.mark.parametrize(
    "value",
    [["exporters"], {"exporters": [{"id": "a", "exporter": object()}]}, {1: 2}, {"batch_size": float("nan")}, "{"],
)
def test_a_bus_setting_that_is_not_a_json_object_of_arguments_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        Settings(observability_bus=value)  # type: ignore[arg-type]
    assert info.value.details["key"] == "observability_bus"


def test_the_bus_setting_comes_from_the_environment_and_a_node_refuses_a_bus_it_cannot_build(
    make_system: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = {"id": "j", "exporter": "actor_tests.observability.exporter_support:JournalExporter"}
    s = load_settings(None, env={"ADK_OBSERVABILITY_BUS": json.dumps({"exporters": [exporter], "batch_size": 4})})
    assert s.observability_bus == {"exporters": [exporter], "batch_size": 4}
    assert Settings.from_dict(s.to_dict()) == s
    monkeypatch.setenv(bus.BUS_ENV, "")  # a node's preflight writes the variable; restore it after the test
    with pytest.raises(ConfigError) as info:
        make_system(observability_bus={"exporters": [exporter], "batch_size": 0})
    assert (info.value.reason, info.value.details["key"]) == ("invalid_value", "batch_size")
    with pytest.raises(ConfigError) as info:
        make_system(observability_bus={"exporters": [{**exporter, "exporter": "no.such.module:Thing"}]})
    assert info.value.reason == "plugin_not_importable"
