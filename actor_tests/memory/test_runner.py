"""Memory under a Runner: the ``load_memory`` tool searches the user's exact scope from a worker and answers with
public views only; ``memory_retrieval`` preloads the best entries as delimited, untrusted reference data into the
invocation's model requests, never into the session; a failing preload fails the turn or is skipped as configured;
without a service the tool gets ``no_memory_service``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.runner.conftest import read_events, unique
from adk_actors import Runner
from adk_actors.errors import AdkError, ConfigError
from adk_actors.memory import InMemoryMemoryService, MemoryProvenance, MemoryScope, SqlMemoryService
from adk_actors.memory.access import PRELOAD_HEADER, load_memory_tool
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService

pytestmark = pytest.mark.timeout(60)

APP = "memory_runner_tests"
USER = "u1"
SCRIPT = {
    "rules": [
        {"when": {"user_text_contains": "recall", "has_function_response": False},
         "respond": {"function_calls": [{"name": "load_memory", "args": {"query": "supervision restart"}}]}},
        {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}},
        {"when": {}, "respond": {"text": "plain answer"}},
    ]
}  # fmt: skip


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[SqlMemoryService]:
    service = SqlMemoryService(f"sqlite:///{tmp_path / 'memory.db'}")
    scope = MemoryScope(app=APP, user=USER)
    service.add(scope, "OTP supervision trees restart failed children", metadata={"topic": "otp"},
                provenance=MemoryProvenance(session_id="old-session", author="user"))  # fmt: skip
    service.add(scope, "The cafeteria opens at nine", metadata={"topic": "office"})
    service.add(MemoryScope(app=APP, user="someone-else"), "supervision restart secrets of another user")
    yield service
    service.close()


@pytest.fixture
def runner_for(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str]
) -> Callable[..., Runner]:
    emu.set_script(SCRIPT)

    def make(**options: Any) -> Runner:
        return Runner(agent_factory("Rememberer", [load_memory_tool()]), APP, svc, system=system, **options)

    return make


def test_the_load_memory_tool_searches_the_users_exact_scope_and_answers_public_views(
    runner_for: Callable[..., Runner], memory: SqlMemoryService, emu: Any
) -> None:
    answer = runner_for(memory_svc=memory).run(USER, unique("s"), "please recall")
    assert "OTP supervision trees restart failed children" in answer
    assert "another user" not in answer
    [request] = [r for r in emu.requests if "functionResponse" in json.dumps(r["body"])][-1:]
    response = json.dumps(request["body"])
    for private in ("old-session", "topic", "provenance", "metadata"):
        assert private not in response


def test_preload_adds_reference_data_to_the_request_but_not_to_the_session(
    runner_for: Callable[..., Runner], memory: SqlMemoryService, emu: Any, svc: ActorSessionService
) -> None:
    runner = runner_for(memory_svc=memory, memory_retrieval={"limit": 2, "filter": {"topic": "otp"}})
    sid = unique("s")
    assert runner.run(USER, sid, "what does supervision restart?") == "plain answer"
    contents = emu.requests[-1]["body"]["contents"]
    texts = [p.get("text", "") for c in contents for p in c["parts"]]
    block = next(t for t in texts if t.startswith(PRELOAD_HEADER))
    assert "OTP supervision trees restart failed children" in block and "cafeteria" not in block
    assert texts.index(block) == len(texts) - 2 and texts[-1] == "what does supervision restart?"
    stored = json.dumps([e.to_dict() for e in read_events(svc, APP, USER, sid)])
    assert PRELOAD_HEADER not in stored and "OTP supervision" not in stored


def test_a_failing_preload_fails_the_turn_or_is_skipped(
    runner_for: Callable[..., Runner], tmp_path: Path, emu: Any
) -> None:
    (tmp_path / "not-a-db").mkdir()
    broken = SqlMemoryService(f"sqlite:///{tmp_path / 'not-a-db'}")  # a directory: the store cannot open
    with pytest.raises(AdkError) as failed:
        runner_for(memory_svc=broken, memory_retrieval={}).run(USER, unique("s"), "anything")
    assert failed.value.reason == "memory_retrieval_failed"
    skipped = runner_for(memory_svc=broken, memory_retrieval={"on_error": "skip"})
    assert skipped.run(USER, unique("s"), "anything") == "plain answer"
    assert PRELOAD_HEADER not in json.dumps(emu.requests[-1]["body"])


def test_options_are_checked_and_without_a_service_the_tool_fails_closed(runner_for: Callable[..., Runner]) -> None:
    with pytest.raises(ConfigError) as unshareable:
        runner_for(memory_svc=InMemoryMemoryService())
    assert unshareable.value.reason == "service_not_shareable"
    with pytest.raises(ConfigError) as alone:
        runner_for(memory_retrieval={"limit": 3})
    assert alone.value.reason == "invalid_value"
    answer = runner_for().run(USER, unique("s"), "please recall")
    assert answer == "Tool said: reason: no_memory_service, type: ToolError"


def test_on_success_ingestion_adds_the_input_and_answer_idempotently_without_waiting(
    runner_for: Callable[..., Runner], tmp_path: Path
) -> None:
    import time

    from adk_actors.memory.access import MemoryAccess, ingest_events

    service = SqlMemoryService(f"sqlite:///{tmp_path / 'ingest.db'}")
    scope = MemoryScope(app=APP, user=USER)
    runner = runner_for(memory_svc=service, memory_ingestion="on_success")
    sid = unique("s")
    assert runner.run(USER, sid, "what is new today?") == "plain answer"
    deadline = time.monotonic() + 20
    while service.count(scope) < 2:  # the job runs after the answer was returned: wait for its effect
        assert time.monotonic() < deadline, "the invocation was ingested"
    hits = service.search(scope, "new today plain answer", limit=10)
    by_author = {h.entry.provenance.author: h.entry for h in hits if h.entry.provenance is not None}
    assert by_author.pop("user").content == "what is new today?"
    [(agent, answer)] = by_author.items()
    assert agent.startswith("Rememberer") and answer.content == "plain answer"
    assert {h.entry.provenance.session_id for h in hits if h.entry.provenance} == {sid}
    # The same batch again (a retried job) adds nothing: idempotency by session and event id.
    items = [
        {"event_id": e.provenance.event_id, "author": e.provenance.author, "text": e.content}
        for e in (h.entry for h in hits)
        if e.provenance is not None and e.provenance.event_id
    ]
    ingest_events(MemoryAccess(service, APP, USER), sid, items)
    assert service.count(scope) == 2
    with pytest.raises(ConfigError) as durable:
        runner_for(memory_svc=service, memory_ingestion={"mode": "durable"})  # no outbox
    assert durable.value.reason == "durable_ingestion_unavailable"
    service.close()


def test_a_sharded_in_memory_service_serves_the_tool_and_the_preload_across_processes(
    runner_for: Callable[..., Runner], system: ActorSystemHandle, emu: Any
) -> None:
    """An in-memory store is not shareable as an object, but behind its shard actors it is: the worker's tool and
    preload jobs reach the user's shard through the picklable client."""
    from actor_tests.memory.shard_support import in_memory_for
    from adk_actors.memory import ShardedMemoryService

    sharded = ShardedMemoryService.start(in_memory_for, system=system, max_active_scopes=4)
    try:
        sharded.add(MemoryScope(app=APP, user=USER), "OTP supervision trees restart failed children")
        sharded.add(MemoryScope(app=APP, user="someone-else"), "supervision restart secrets of another user")
        runner = runner_for(memory_svc=sharded, memory_retrieval={"limit": 2})
        answer = runner.run(USER, unique("s"), "please recall: supervision restart?")
        assert "OTP supervision trees restart failed children" in answer and "another user" not in answer
        [first] = [r for r in emu.requests if "please recall: supervision" in json.dumps(r["body"])][:1]
        preload = json.dumps(first["body"]["contents"])
        assert PRELOAD_HEADER[:20] in preload and "OTP supervision trees" in preload and "another user" not in preload
    finally:
        sharded.stop()
