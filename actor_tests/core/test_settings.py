"""Settings: defaults < file < ADK_* environment < arguments, validated strictly."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import ConfigError
from adk_actors.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_defaults_without_file_or_environment() -> None:
    s = (
        load_settings(env={}, use_env=True, config_file=None)
        if not Path("config/adk.toml").exists()
        else load_settings(REPO / "config" / "adk.toml", env={})
    )
    assert s.admin_port == 19500 and s.bind_ip == "127.0.0.1" and s.owned is True
    assert s.gemini_api_key is None


def test_checked_in_adk_toml_lists_every_setting_with_its_default() -> None:
    data = tomllib.loads((REPO / "config" / "adk.toml").read_text())
    flat = {k: v for table in data.values() for k, v in table.items()}
    defaults = Settings()
    for name in Settings.__dataclass_fields__:
        if name in {"extra", "gemini_api_key", "dev_live_principal"}:
            continue  # secrets come from the environment, never from the checked-in file
        assert name in flat, f"config/adk.toml does not document {name}"
        assert flat[name] == getattr(defaults, name), f"config/adk.toml default of {name} differs"
    assert Settings.from_dict(flat) == defaults


def test_precedence_file_then_environment_then_arguments(tmp_path: Path) -> None:
    cfg = tmp_path / "adk.toml"
    cfg.write_text("[runtime]\nhosts = 3\nworkers = 5\n[system]\nadmin_port = 21000\n")
    s = load_settings(cfg, env={"ADK_WORKERS": "7", "ADK_ADMIN_PORT": "21001"}, admin_port=21002)
    assert (s.hosts, s.workers, s.admin_port) == (3, 7, 21002)


@pytest.mark.parametrize("source", ["file", "env", "arg"])
def test_unknown_keys_are_rejected_from_every_source(tmp_path: Path, source: str) -> None:
    cfg = tmp_path / "adk.toml"
    cfg.write_text("[runtime]\nhostz = 3\n" if source == "file" else "")
    with pytest.raises(ConfigError) as info:
        if source == "file":
            load_settings(cfg, env={})
        elif source == "env":
            load_settings(cfg, env={"ADK_HOSTZ": "3"})
        else:
            load_settings(cfg, env={}, hostz=3)
    assert info.value.reason == "unknown_key"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hosts", 0),
        ("admin_port", 80),
        ("log_format", "xml"),
        ("owned", "maybe"),
        ("ask_timeout_s", -1),
        ("hosts", True),
        ("agent_call_timeout_ms", "forever"),
    ],
)
def test_invalid_values_are_rejected_with_the_key_named(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, **{key: value})
    assert info.value.reason == "invalid_value" and info.value.details["key"] == key


def test_malformed_toml_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "adk.toml"
    cfg.write_text("[runtime\nhosts = ")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={})
    assert info.value.reason == "invalid_toml"


def test_api_key_is_a_secret_and_never_in_reprs_or_public_views() -> None:
    s = load_settings(env={"GEMINI_API_KEY": "AIza-test-key-123456"})
    assert s.gemini_api_key is not None and s.gemini_api_key.reveal() == "AIza-test-key-123456"
    assert "AIza-test-key-123456" not in repr(s)
    assert s.public_dict()["gemini_api_key"] == "set"
    assert "gemini_api_key" not in s.to_dict()


def test_infinity_is_accepted_for_timeouts() -> None:
    assert load_settings(env={"ADK_AGENT_TURN_TIMEOUT_MS": "infinity"}).agent_turn_timeout_ms == "infinity"


@given(st.text(max_size=12))
def test_environment_values_either_validate_or_raise_config_error(raw: str) -> None:
    for name in ("ADK_HOSTS", "ADK_OWNED", "ADK_LOG_FORMAT", "ADK_ASK_TIMEOUT_S", "ADK_AGENT_CALL_TIMEOUT_MS"):
        if "\x00" in raw:
            continue
        try:
            load_settings(env={name: raw}, config_file=REPO / "config" / "adk.toml")
        except ConfigError:
            pass


def test_configuration_doc_lists_every_setting() -> None:
    doc = (REPO / "docs" / "CONFIGURATION.md").read_text()
    missing = [name for name in Settings.__dataclass_fields__ if name != "extra" and f"`{name}`" not in doc]
    assert missing == []


def test_dev_mcp_is_a_normalized_list_of_agent_names_and_refuses_anything_else() -> None:
    assert Settings.from_dict({"dev_mcp": " Weather , Planner,"}).dev_mcp == "Weather,Planner"
    assert Settings.from_dict({}).dev_mcp == ""
    for bad in ("Weather; rm -rf", "9lives", "a" * 65, 42, "x," * 2100):
        with pytest.raises(ConfigError) as caught:
            Settings.from_dict({"dev_mcp": bad})
        assert caught.value.details.get("key") == "dev_mcp"
