"""Contracts: every message class in adk_actors pickles round-trip; the import-layer check catches violations."""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import pkgutil
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

import adk_actors
from adk_actors.devtools.layers import check

PACKAGE = Path(adk_actors.__file__).resolve().parent


def _message_classes() -> list[type]:
    """Every frozen dataclass defined anywhere in the package (discovered, not listed): whatever crosses a process
    boundary is one, wherever it is defined."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="adk_actors."):
        name = info.name
        if name.endswith(("__main__", ".boot", ".reaper")):
            continue
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == name
                and obj.__dataclass_params__.frozen
            ):  # type: ignore[attr-defined]
                found[f"{name}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def _sample(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp in (str, "str"):
        return "pkg.module.Name"  # also a valid importable-path shape for specs that check it
    if tp in (int, "int"):
        return 3
    if tp in (float, "float"):
        return 1.5
    if tp in (bool, "bool"):
        return True
    if origin in (tuple,):
        return ()
    if origin in (list,):
        return []
    if origin in (dict,):
        return {"k": 1}
    return {"any": [1, "two"]}


def _examples() -> dict[str, Any]:
    """Values whose fields the sampler cannot invent (validated in ``__post_init__``, or derived from each other)."""
    from adk_actors.agents.agent import Agent
    from adk_actors.artifacts import ArtifactScope
    from adk_actors.artifacts.access import ArtifactAccess
    from adk_actors.auth.credentials import CredentialRef
    from adk_actors.auth.flow import AuthCodeProvider, AuthorizationFlows
    from adk_actors.auth.tokens import OAuthClient
    from adk_actors.content.parts import FileDataPart, InlineDataPart
    from adk_actors.devtools.oauth_issuer import IssuerClient
    from adk_actors.evaluation.runner import AgentTarget
    from adk_actors.live.media import audio_pcm, video_frame
    from adk_actors.observability.trace import TraceContext
    from adk_actors.openapi.broker import ClientCredentials, UserAuthorization
    from adk_actors.plugins.descriptors import compile_plugins
    from adk_actors.schema import compile_schema

    pipeline = compile_plugins(
        [
            {
                "id": "meta",
                "plugin": "adk_actors.plugins.builtins:MetadataLogger",
                "mode": "observe",
                "failure_policy": "open",
            }
        ]
    )

    oauth = OAuthClient(
        token_url="https://idp.example/token",
        client_id="crm",
        client_secret=CredentialRef("crm", "", "crm-secret"),
        scopes=("orders.read",),
    )
    return {
        "AudioChunk": audio_pcm(b"\0\1" * 160),
        "VideoFrame": video_frame("png", b"\x89PNG\r\n\x1a\n" + b"\0" * 16),
        "ArtifactScope": ArtifactScope.session("app", "u1", "s1"),
        "ArtifactAccess": ArtifactAccess("service", "app", "u1", "s1"),
        "IssuerClient": IssuerClient(client_id="crm", client_secret="s" * 24, redirect_uris=("https://a.example/cb",)),
        "ClientCredentials": ClientCredentials(oauth),
        "UserAuthorization": UserAuthorization(AuthorizationFlows("flows"), "calendar"),
        "Agent": Agent(name="Sampled", instruction="Answer briefly."),
        "AgentTarget": AgentTarget("Evaluated", {"model": "gemini-x"}, (), {"max_llm_calls": 3}),
        "FileDataPart": FileDataPart(mime_type="image/png", uri="gs://bucket/picture.png"),
        "InlineDataPart": InlineDataPart(mime_type="image/png", data="aGVsbG8="),
        "CompiledSchema": compile_schema({"type": "object", "properties": {"n": {"type": "integer"}}}),
        "TraceContext": TraceContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"),
        "PluginDescriptor": pipeline.plugins[0],
        "PluginPipeline": pipeline,
        "OAuthClient": oauth,
        "AuthCodeProvider": AuthCodeProvider(
            name="calendar",
            authorization_url="https://idp.example/authorize",
            token_url="https://idp.example/token",
            client_id="crm",
            redirect_uri="https://crm.example/callback",
            allowed_scopes=("openid", "calendar.read"),
        ),
    }


def _instance(cls: type) -> Any:
    example = _examples().get(cls.__name__)
    if example is not None and type(example) is cls:
        return example
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            kwargs[field.name] = _sample(hints.get(field.name, Any))
    try:
        return cls(**kwargs)
    except Exception:
        return None


CLASSES = _message_classes()


def test_discovery_finds_the_runtime_messages() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"Call", "Reply", "Failure", "SupInit", "ChildExit", "Route", "Forward", "ChildSpec"} <= names
    # ... and the ones defined outside a messages module: the agent turn's, the host's, values that travel.
    assert {"RunnerTurn", "CancelTurn", "Spawn", "InnerSpec", "RunJob", "Event", "InlineDataPart", "Agent"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_message_class_round_trips_through_pickle(cls: type) -> None:
    instance = _instance(cls)
    assert instance is not None, f"the sampler cannot build {cls.__name__}; teach _sample its field types"
    assert pickle.loads(pickle.dumps(instance)) == instance


def test_layer_check_passes_on_the_tree() -> None:
    assert check(PACKAGE) == []


_PLANTED = [
    ("content/_planted_a.py", "import thespian\n", "imports thespian outside"),
    ("content/_planted_b.py", "from adk_actors.agents import api\n", "layer 3) from layer 2"),
    ("runtime/_planted.py", "import adk_actors.sessions\n", "layer 3) from layer 1"),
    ("sessions/_planted.py", "from adk_actors.runs import x\n", "layer 4) from layer 3"),
]


def test_layer_check_fails_on_each_planted_bad_import(tmp_path: Path) -> None:
    """One copy of the tree holds every planted import (a copy and a check of the whole tree cost seconds each);
    each problem must be reported against its own file."""
    copy = tmp_path / "adk_actors"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for where, line, _ in _PLANTED:
        (copy / where).parent.mkdir(parents=True, exist_ok=True)
        (copy / where).write_text(line)
    problems = check(copy)
    for where, _, expect in _PLANTED:
        assert any(p.startswith(f"{where}:") and expect in p for p in problems), (where, problems)
    assert {p.split(":", 1)[0] for p in problems} == {where for where, _, _ in _PLANTED}, problems
    result = subprocess.run(
        [sys.executable, "-m", "adk_actors.devtools.layers", str(copy)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and "FAILED" in result.stdout
