"""The ``load_artifacts`` tool: under a Runner (emulator over HTTP, tool in a worker, SQL artifact service) the
model's next request carries the loaded artifacts (text as text parts, binary as inline data) and no later request
does; the session stores only the small function response; unknown names are listed as missing, over-budget
artifacts are refused structurally, and the engine's side bounds whatever a tool hands it."""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actor_tests.runner.conftest import model_contents, read_events, unique
from adk_actors import Runner
from adk_actors.artifacts import ArtifactScope, InMemoryArtifactService, SqlArtifactService, load_artifacts_tool
from adk_actors.artifacts.access import ArtifactAccess
from adk_actors.artifacts.tool import (
    MAX_REQUEST_BYTES,
    MAX_REQUEST_PARTS,
    load,
    take_request_parts,
    with_request_parts,
)
from adk_actors.errors import ConfigError, ToolError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import ToolContext

pytestmark = pytest.mark.timeout(60)

APP = "load_artifacts_tests"
USER = "u1"
NOTES = b"Be terse; mention the code word kestrel-91."
PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")
SCRIPT = {
    "rules": [
        {"when": {"user_text_contains": "load", "has_function_response": False},
         "respond": {"function_calls": [
             {"name": "load_artifacts", "args": {"artifact_names": ["notes.md", "pixel.png", "nope.txt"]}}]}},
        {"when": {"function_response_name": "load_artifacts"},
         "respond": {"function_calls": [{"name": "ping", "args": {}}]}},
        {"when": {"function_response_name": "ping"}, "respond": {"text": "done"}},
    ]
}  # fmt: skip


def ping() -> dict[str, Any]:
    """Answer pong."""
    return {"pong": True}


@pytest.fixture
def artifacts() -> Iterator[SqlArtifactService]:
    tmp = Path(tempfile.mkdtemp(prefix="adk-load-artifacts-"))
    service = SqlArtifactService(f"sqlite:///{tmp / 'artifacts.db'}", max_artifact_bytes=64 * 1024)
    try:
        yield service
    finally:
        service.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def runner_for(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> Callable[..., Runner]:
    emu.set_script(SCRIPT)

    def make(tool: Any = None, **options: Any) -> Runner:
        from adk_actors import FunctionTool

        tools = [tool or load_artifacts_tool(), FunctionTool(ping)]
        return Runner(agent_factory("Loader", tools), APP, svc, system=system, **options)

    return make


def _parts(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for c in model_contents(request) for p in c["parts"]]


def test_the_next_request_carries_the_artifacts_and_no_later_request_nor_the_session_does(
    runner_for: Callable[..., Runner], artifacts: SqlArtifactService, emu: Any, svc: ActorSessionService
) -> None:
    sid = unique("s")
    scope = ArtifactScope.session(APP, USER, sid)
    artifacts.put(scope, "notes.md", b"an older note", mime_type="text/markdown")
    artifacts.put(scope, "notes.md", NOTES, mime_type="text/markdown")
    artifacts.put(scope, "pixel.png", PIXEL, mime_type="image/png")
    assert runner_for(artifact_svc=artifacts).run(USER, sid, "please load my notes") == "done"

    first, loaded, after = emu.requests[-3:]
    encoded = base64.b64encode(PIXEL).decode("ascii")
    # The request answering load_artifacts: its function response, then the artifacts in the same user turn.
    last = model_contents(loaded)[-1]
    assert last["role"] == "user" and "functionResponse" in last["parts"][0]
    response = last["parts"][0]["functionResponse"]["response"]
    assert response["loaded"] == [
        {"name": "notes.md", "version": 2, "mime_type": "text/markdown", "size": len(NOTES)},
        {"name": "pixel.png", "version": 1, "mime_type": "image/png", "size": len(PIXEL)},
    ]
    assert response["missing"] == ["nope.txt"] and response["available"] == ["notes.md", "pixel.png"]
    texts = [p["text"] for p in last["parts"] if "text" in p]
    assert NOTES.decode() in texts and "an older note" not in json.dumps(loaded["body"])
    assert any(t.startswith('Artifact "notes.md" (version 2, text/markdown') for t in texts)
    assert {"inlineData": {"mimeType": "image/png", "data": encoded}} in last["parts"]
    # Neither the request before nor the one after carries them.
    for other in (first, after):
        assert "kestrel-91" not in json.dumps(other["body"]) and encoded not in json.dumps(other["body"])
    assert any("functionResponse" in p and p["functionResponse"]["name"] == "ping" for p in _parts(after))
    # The session holds the small function response only.
    stored = json.dumps([e.to_dict() for e in read_events(svc, APP, USER, sid)])
    assert "kestrel-91" not in stored and encoded not in stored and "inline_data" not in stored
    assert '"missing": ["nope.txt"]' in stored


def test_an_artifact_over_the_budget_is_refused_and_nothing_is_attached(
    runner_for: Callable[..., Runner], artifacts: SqlArtifactService, emu: Any
) -> None:
    sid = unique("s")
    artifacts.put(ArtifactScope.session(APP, USER, sid), "notes.md", NOTES, mime_type="text/markdown")
    runner = runner_for(load_artifacts_tool(max_total_bytes=16), artifact_svc=artifacts)
    assert runner.run(USER, sid, "load") == "done"
    loaded = emu.requests[-2]
    response = model_contents(loaded)[-1]["parts"][0]["functionResponse"]["response"]
    assert response["loaded"] == [] and response["max_total_bytes"] == 16
    assert response["over_budget"] == [
        {"name": "notes.md", "version": 1, "mime_type": "text/markdown", "size": len(NOTES)}
    ]
    assert "kestrel-91" not in json.dumps(loaded["body"])
    assert len(model_contents(loaded)[-1]["parts"]) == 1


def test_without_a_service_the_tool_answers_no_artifact_service(runner_for: Callable[..., Runner], emu: Any) -> None:
    assert runner_for().run(USER, unique("s"), "load") == "done"
    response = model_contents(emu.requests[-2])[-1]["parts"][0]["functionResponse"]["response"]
    assert response["error"]["reason"] == "no_artifact_service"


# ---- the tool's answer, in process ------------------------------------------------------------------------------


def _context(service: Any) -> ToolContext:
    return ToolContext(invocation_id="inv", agent_name="Loader", artifacts=ArtifactAccess(service, APP, USER, "s1"))


def test_a_call_dedupes_names_lists_missing_ones_and_reports_invalid_names_by_index() -> None:
    service = InMemoryArtifactService()
    scope = ArtifactScope.session(APP, USER, "s1")
    service.put(scope, "a.json", b'{"k": 1}', mime_type="application/json")
    service.put(scope, "b.txt", b"\xff\xfe not utf-8", mime_type="text/plain")
    service.put(scope, "empty.txt", b"", mime_type="text/plain")
    context = _context(service)
    answer = load(context, ["a.json", "a.json", "../x", "b.txt", "empty.txt", "gone"], scope="session",
                  max_names=16, max_total_bytes=1024)  # fmt: skip
    assert [r["name"] for r in answer["loaded"]] == ["a.json", "b.txt", "empty.txt"]
    assert answer["missing"] == ["gone"] and answer["failed"] == [{"index": 2, "reason": "invalid_artifact_name"}]
    parts = context.actions.request_parts
    assert [p["type"] for p in parts] == ["text", "text", "text", "inline_data", "text"]
    assert parts[1]["text"] == '{"k": 1}' and parts[3]["mime_type"] == "text/plain"  # not UTF-8: sent as bytes
    assert context.actions.control()["request_parts"] == parts
    assert "request_parts" not in json.dumps(context.actions.to_event_actions().to_dict())


def test_an_empty_list_answers_the_available_names_and_attaches_nothing() -> None:
    service = InMemoryArtifactService()
    for i in range(105):
        service.put(ArtifactScope.session(APP, USER, "s1"), f"n{i:03d}", b".")
    context = _context(service)
    answer = load(context, [], scope="session", max_names=16, max_total_bytes=1024)
    assert answer["loaded"] == [] and len(answer["available"]) == 100 and answer["more_available"] is True
    assert context.actions.request_parts == [] and "request_parts" not in context.actions.control()


def test_the_budget_counts_over_the_call_and_later_artifacts_still_fit() -> None:
    service = InMemoryArtifactService()
    scope = ArtifactScope.session(APP, USER, "s1")
    for name, size in (("a", 60), ("big", 50), ("c", 40)):
        service.put(scope, name, b"x" * size, mime_type="text/plain")
    answer = load(_context(service), ["a", "big", "c"], scope="session", max_names=16, max_total_bytes=100)
    assert [r["name"] for r in answer["loaded"]] == ["a", "c"]
    assert [r["name"] for r in answer["over_budget"]] == ["big"] and answer["max_total_bytes"] == 100


def test_a_user_scoped_tool_reads_the_users_scope_only() -> None:
    service = InMemoryArtifactService()
    service.put(ArtifactScope.user(APP, USER), "profile.txt", b"user level", mime_type="text/plain")
    service.put(ArtifactScope.session(APP, USER, "s1"), "session.txt", b"session level", mime_type="text/plain")
    context = _context(service)
    answer = load(context, ["profile.txt", "session.txt"], scope="user", max_names=16, max_total_bytes=1024)
    assert [r["name"] for r in answer["loaded"]] == ["profile.txt"] and answer["missing"] == ["session.txt"]
    assert answer["available"] == ["profile.txt"] and context.actions.request_parts[1]["text"] == "user level"


def test_too_many_names_and_a_missing_service_fail_the_call_structurally() -> None:
    with pytest.raises(ToolError) as many:
        load(_context(InMemoryArtifactService()), ["a", "b", "c"], scope="session", max_names=2, max_total_bytes=10)
    assert many.value.reason == "too_many_artifact_names" and many.value.details == {"count": 3, "max": 2}
    with pytest.raises(ToolError) as none:
        load(ToolContext(invocation_id="i", agent_name="a"), ["a"], scope="session", max_names=2, max_total_bytes=10)
    assert none.value.reason == "no_artifact_service"


@pytest.mark.parametrize(
    "options",
    [
        {"scope": "tenant"},
        {"max_names": 0},
        {"max_names": 17},
        {"max_total_bytes": True},
        {"max_total_bytes": 1024 * 1024 + 1},
    ],
)
def test_tool_options_out_of_range_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_artifacts_tool(**options)
    assert excinfo.value.reason == "invalid_value"


def test_the_declaration_takes_a_list_of_names() -> None:
    tool = load_artifacts_tool()
    assert tool.name == "load_artifacts" and "empty list" in tool.description
    assert tool.schema()["properties"]["artifact_names"]["type"] == "array"
    assert tool.schema()["required"] == ["artifact_names"]


# ---- the engine's side ------------------------------------------------------------------------------------------


def test_parts_join_the_function_response_turn_or_come_as_their_own_user_turn() -> None:
    parts = [{"type": "text", "text": "T"}]
    answered = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": {"schema_version": 1, "parts": [{"type": "function_response", "name": "f",
                                                                      "response": {}}]}},
    ]  # fmt: skip
    joined = with_request_parts(answered, parts)
    assert joined[-1]["content"]["parts"][-1] == parts[0] and len(joined) == 2
    assert len(answered[-1]["content"]["parts"]) == 1  # the caller's history is not changed
    alone = with_request_parts([{"role": "user", "content": "hi"}], parts)
    assert alone[-1] == {"role": "user", "content": {"schema_version": 1, "parts": parts}}
    assert with_request_parts(answered, []) is answered


def test_the_engine_takes_only_well_formed_text_and_inline_parts_within_its_bounds() -> None:
    good = {"type": "text", "text": "ok"}
    hostile = [good, {"type": "function_call", "name": "x", "args": {}}, {"type": "inline_data", "mime_type": "a/b",
               "data": "%%%"}, "not a dict", {"type": "text", "text": "t", "extra": 1}]  # fmt: skip
    assert take_request_parts([], {"request_parts": hostile}) == [good]
    assert take_request_parts([good], {"escalate": True}) == [good]
    many = take_request_parts([], {"request_parts": [good] * 100})
    assert len(many) == MAX_REQUEST_PARTS and "left out" in many[-1]["text"]
    assert take_request_parts(many, {"request_parts": [good]}) == many  # nothing after the budget note
    big = {"type": "text", "text": "x" * (MAX_REQUEST_BYTES // 4)}
    five = take_request_parts([], {"request_parts": [big] * 5})
    assert five[:4] == [big] * 4 and "left out" in five[4]["text"] and len(five) == 5


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
        max_leaves=30,
    )
)
def test_any_control_output_yields_bounded_valid_parts(control: Any) -> None:
    for offered in (control, {"request_parts": control}, {"request_parts": [control]}):
        out = take_request_parts([], offered)
        assert len(out) <= MAX_REQUEST_PARTS
        assert all(p["type"] in ("text", "inline_data") for p in out)
