"""The ``dev_resources`` setting: the node's supervised dev server loads the application's resource provider by
importable name in its own process (``adk serve --resources``); bad names are refused before anything is served."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actor_tests.web.test_edge_process import AUTH, TOKEN, _when_serving
from adk_actors.errors import ConfigError
from adk_actors.memory import MemoryScope, SqlMemoryService
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port
from adk_actors.web.process import _resources


def test_a_node_dev_server_serves_the_provider_named_by_dev_resources(
    make_system: Callable[..., ActorSystemHandle], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "memory.db"
    memory = SqlMemoryService(f"sqlite:///{db}")
    memory.add(MemoryScope("res_app", "user-1"), "OTP supervision restarts failed children")
    memory.close()
    monkeypatch.setenv("ADK_DEV_TOKEN", TOKEN)
    monkeypatch.setenv("ADK_TEST_RESOURCES_DB", str(db))
    port = reserved_port()
    handle = make_system(
        dev_server=True, dev_port=port, dev_resources="actor_tests.web.resources_support:node_provider"
    )
    url = f"http://127.0.0.1:{port}"
    diagnostics = _when_serving(url, handle=handle)
    assert diagnostics["resources"]["resource_provider"] == "provider"
    answer = httpx.post(
        f"{url}/dev/v1/memory/res_app/user-1/search",
        json={"query": "supervision", "limit": 5},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert "OTP supervision restarts failed children" in answer.text


@pytest.mark.parametrize(
    "name",
    [
        "actor_tests.web.resources_support:missing",
        "no_such_module_x:provider",
        "actor_tests.web.resources_support:NOT_A_PROVIDER",
    ],
)
def test_a_name_that_does_not_load_a_provider_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        _resources(name)
    assert info.value.reason == "invalid_dev_resources" and info.value.details["key"] == "dev_resources"


@given(st.text(max_size=80))
def test_the_setting_takes_only_importable_names(value: str) -> None:
    module, sep, attr = value.partition(":")
    importable = bool(sep) and all(p.isidentifier() and p.isascii() for p in [*module.split("."), *attr.split(".")])
    try:
        settings = Settings.from_dict({"dev_resources": value})
    except ConfigError as err:
        assert value and not importable and err.details.get("key") == "dev_resources"
        return
    assert settings.dev_resources == value and (value == "" or importable)
