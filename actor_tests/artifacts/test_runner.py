"""Artifacts under a Runner: a tool saves and loads artifact versions through its context (``artifact_svc``), in a
worker process; the round's tool event records metadata-only context effects and never the bytes; an unshareable
service is refused when the Runner is built; without a service, the tool gets ``no_artifact_service``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actor_tests.runner.conftest import read_events, unique
from adk_actors import FunctionTool, Runner
from adk_actors.artifacts import ArtifactScope, FileArtifactService, InMemoryArtifactService
from adk_actors.errors import AdkError, ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import ToolContext

pytestmark = pytest.mark.timeout(60)

APP = "artifact_tests"
USER = "u1"
SECRET_BYTES = b"quarterly numbers 7c91"
SCRIPT = {
    "rules": [
        {"when": {"user_text_contains": "save", "has_function_response": False},
         "respond": {"function_calls": [{"name": "save_report", "args": {"title": "q3"}}]}},
        {"when": {"user_text_contains": "read", "has_function_response": False},
         "respond": {"function_calls": [{"name": "read_report", "args": {}}]}},
        {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}},
    ]
}  # fmt: skip


def save_report(title: str, tool_context: ToolContext) -> dict[str, Any]:
    """Save the report as an artifact."""
    saved = tool_context.save_artifact("reports/q.txt", SECRET_BYTES + title.encode(), mime_type="text/plain")
    return {"version": saved["version"], "size": saved["size"]}


def read_report(tool_context: ToolContext) -> dict[str, Any]:
    """Read the latest report."""
    artifact = tool_context.load_artifact("reports/q.txt")
    names, _ = tool_context.list_artifacts()
    return {"length": len(artifact.data), "version": artifact.version, "names": names}


@pytest.fixture
def runner_for(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> Callable[..., Runner]:
    emu.set_script(SCRIPT)

    def make(**options: Any) -> Runner:
        tools = [FunctionTool(save_report), FunctionTool(read_report)]
        return Runner(agent_factory("Reporter", tools), APP, svc, system=system, **options)

    return make


def test_a_tool_saves_and_loads_versions_and_the_event_records_only_metadata(
    runner_for: Callable[..., Runner], svc: ActorSessionService, tmp_path: Path
) -> None:
    service = FileArtifactService(tmp_path / "artifacts", max_artifact_bytes=1024 * 1024)
    runner = runner_for(artifact_svc=service)
    sid = unique("s")
    assert runner.run(USER, sid, "save it") == "Tool said: size: 24, version: 1"
    assert runner.run(USER, sid, "save it again") == "Tool said: size: 24, version: 2"
    assert runner.run(USER, sid, "read it") == "Tool said: length: 24, names: reports/q.txt, version: 2"
    stored = service.get(ArtifactScope.session(APP, USER, sid), "reports/q.txt", 1)
    assert stored.data == SECRET_BYTES + b"q3" and stored.mime_type == "text/plain"
    events = read_events(svc, APP, USER, sid)
    effects = [e for event in events for e in event.actions.context_effects]
    assert [(e["type"], e["name"], e["version"], e["scope"]) for e in effects] == [
        ("artifact_saved", "reports/q.txt", 1, "session"),
        ("artifact_saved", "reports/q.txt", 2, "session"),
    ]
    assert effects[0]["digest"] == stored.digest
    assert SECRET_BYTES.decode() not in json.dumps([e.to_dict() for e in events])


def test_without_a_service_the_tool_gets_no_artifact_service(runner_for: Callable[..., Runner]) -> None:
    answer = runner_for().run(USER, unique("s"), "save it")
    assert answer == "Tool said: reason: no_artifact_service, type: ToolError"


def test_a_service_that_cannot_reach_the_workers_is_refused_when_the_runner_is_built(
    runner_for: Callable[..., Runner],
) -> None:
    with pytest.raises(ConfigError) as refused:
        runner_for(artifact_svc=InMemoryArtifactService())
    assert refused.value.reason == "service_not_shareable"
    with pytest.raises(ConfigError) as wrong:
        runner_for(artifact_svc=object())
    assert wrong.value.reason == "invalid_value"


def test_artifact_placeholders_fill_instructions_from_the_sessions_latest_text_artifact(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, spawn: Any, tmp_path: Path
) -> None:
    from actor_tests.agents.conftest import config_for

    service = FileArtifactService(tmp_path / "artifacts", max_artifact_bytes=1024 * 1024)
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "ok"}}]})
    name = unique("Briefed")
    spawn(name, config_for(emu, instructions="Follow the brief: {artifact.brief.md}"), [])
    runner = Runner(name, APP, svc, system=system, artifact_svc=service)
    sid = unique("s")
    scope = ArtifactScope.session(APP, USER, sid)
    with pytest.raises(AdkError) as missing:
        runner.run(USER, sid, "go")
    assert missing.value.reason == "missing_artifact"
    service.put(scope, "brief.md", b"old brief", mime_type="text/markdown")
    service.put(scope, "brief.md", b"be terse", mime_type="text/markdown")
    assert runner.run(USER, sid, "go") == "ok"
    system_text = json.dumps(emu.requests[-1]["body"]["systemInstruction"])
    assert "Follow the brief: be terse" in system_text and "old brief" not in system_text
    service.put(scope, "brief.md", b"\x89PNG", mime_type="image/png")
    with pytest.raises(AdkError) as binary:
        runner.run(USER, sid, "go")
    assert binary.value.reason == "artifact_not_text"
    with pytest.raises(AdkError) as none:
        Runner(name, APP, svc, system=system).run(USER, unique("s"), "go")
    assert none.value.reason == "no_artifact_service"
