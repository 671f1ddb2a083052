"""The node's ``gemini_base_url`` reaches the provider inside hosts, whatever its source.

Precedence: the agent's ``base_url`` > the node setting (adk.toml, ``ADK_GEMINI_BASE_URL``, ``start(...)``) >
``GEMINI_BASE_URL`` > the public endpoint. Each source gets its own system; where a request went is read from the
request logs of emulators listening on different ports, so nothing is ever sent beyond 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adk_actors.agents import prompt, spawn_agent
from adk_actors.emulator import Emulator
from adk_actors.node import start
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.settings import Settings, load_settings
from adk_actors.testing import reserved_port


@pytest.fixture
def emus() -> Iterator[dict[str, Emulator]]:
    with Emulator() as node, Emulator() as env, Emulator() as agent:
        yield {"node": node, "env": env, "agent": agent}


def _asked(emus: dict[str, Emulator]) -> list[str]:
    return sorted(name for name, emu in emus.items() if any("generateContent" in r["path"] for r in emu.requests))


def _base(tmp: Path) -> dict[str, object]:
    return {"admin_port": reserved_port(), "data_dir": str(tmp / "data"), "hosts": 1, "workers": 1}


def _file_source(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    config = tmp / "adk.toml"
    config.write_text(f'[gemini]\ngemini_base_url = "{url}"\n')
    return load_settings(config, use_env=False, **_base(tmp))


def _env_source(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    empty = tmp / "empty.toml"
    empty.write_text("")
    monkeypatch.setenv("ADK_GEMINI_BASE_URL", url)
    return load_settings(empty, **_base(tmp))


def _start_source(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return Settings.from_dict(_base(tmp)).replace(gemini_base_url=url)


Source = Callable[[Path, str, pytest.MonkeyPatch], Settings]


def _run(settings: Settings, emus: dict[str, Emulator], **start_kwargs: str) -> None:
    handle: ActorSystemHandle = start(settings, **start_kwargs)
    try:
        plain = spawn_agent("BaseUrlPlain", {"api_key": "test-key"}, system=handle)
        own = spawn_agent("BaseUrlOwn", {"api_key": "test-key", "base_url": emus["agent"].base_url}, system=handle)
        assert prompt(plain, "where", system=handle) == "You said: where"
        assert prompt(own, "mine", system=handle) == "You said: mine"
    finally:
        handle.stop()


@pytest.mark.parametrize("source", [_file_source, _env_source, _start_source], ids=["adk_toml", "env", "settings"])
def test_the_node_setting_beats_gemini_base_url_and_the_agent_config_beats_both(
    source: Source, emus: dict[str, Emulator], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", emus["env"].base_url)  # inherited by the node's processes
    settings = source(tmp_path, emus["node"].base_url, monkeypatch)
    assert settings.gemini_base_url == emus["node"].base_url
    _run(settings, emus)
    assert _asked(emus) == ["agent", "node"]
    assert [r["body"]["contents"][-1]["parts"][0]["text"] for r in emus["node"].requests] == ["where"]


def test_start_keyword_sets_the_node_base_url(emus: dict[str, Emulator], tmp_path: Path) -> None:
    _run(Settings.from_dict(_base(tmp_path)), emus, gemini_base_url=emus["node"].base_url)
    assert _asked(emus) == ["agent", "node"]


def test_without_a_node_setting_gemini_base_url_is_used(
    emus: dict[str, Emulator], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", emus["env"].base_url)
    settings = Settings.from_dict(_base(tmp_path))
    assert settings.gemini_base_url == ""
    _run(settings, emus)
    assert _asked(emus) == ["agent", "env"]
