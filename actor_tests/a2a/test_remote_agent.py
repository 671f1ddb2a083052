"""A remote A2A agent (the official ``a2a-sdk`` server on 127.0.0.1) as a local agent's model provider: the
provider object on its own (answers, failures, input-required, streaming deltas, cancellation, pickling), a local
agent that answers through it, and that agent delegated to by a coordinator on the Gemini emulator under a Runner,
as a sub-agent and as an ``AgentTool``."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterator

import pytest

from actor_tests.agents.conftest import Spawner, config_for, emu, spawn, unique
from actor_tests.agents.support import DELEGATION_RULES
from actor_tests.runner.conftest import svc
from adk_actors import Runner, prompt
from adk_actors.a2a.client import discover
from adk_actors.a2a.remote import A2aModel
from adk_actors.agents import AgentTool
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError, ProviderError
from adk_actors.models import generate
from adk_actors.runtime.cancel import CancelToken
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService

from .official_server import OfficialA2aServer

__all__ = ["emu", "spawn", "svc"]  # fixtures used by name

pytestmark = pytest.mark.timeout(90)

APP = "a2a_remote_tests"
USER = "u1"


@pytest.fixture
def server() -> Iterator[OfficialA2aServer]:
    with OfficialA2aServer() as running:
        yield running


@pytest.fixture
def model(server: OfficialA2aServer) -> Iterator[A2aModel]:
    made = A2aModel(server.url, allow_http_loopback=True, timeout_s=20)
    yield made
    made.close()


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_generate_answers_with_the_remote_tasks_artifact_text(server: OfficialA2aServer, model: A2aModel) -> None:
    history = [*user("first"), {"role": "model", "content": "earlier"}, *user("hello there")]
    assert model.generate({}, history) == "echo: hello there"
    content = {"schema_version": 1, "parts": [{"type": "text", "text": "as content"}]}
    assert model.generate({}, [{"role": "user", "content": content}]) == "echo: as content"
    assert generate({"provider": model}, user("via models")) == "echo: via models"  # the direct-call path
    assert [s.path for s in server.seen].count("/.well-known/agent-card.json") == 1  # discovered once


def test_a_remote_task_that_fails_or_is_rejected_is_a2a_task_failed(model: A2aModel) -> None:
    for text, state in (("fail", "TASK_STATE_FAILED"), ("reject", "TASK_STATE_REJECTED")):
        with pytest.raises(ProviderError) as caught:
            model.generate({}, user(text))
        assert caught.value.reason == "a2a_task_failed"
        assert caught.value.details == {"state": state, "cause": state}


def test_input_required_returns_the_remote_agents_question(model: A2aModel) -> None:
    assert model.generate({}, user("ask")) == "what is your name?"


def test_stream_passes_the_artifact_text_on_as_deltas(model: A2aModel) -> None:
    deltas: list[str] = []
    assert model.stream({}, user("streamed"), [], deltas.append) == "echo: streamed"
    assert deltas == ["echo: streamed"]
    deltas.clear()
    assert model.stream({}, user("ask"), [], deltas.append) == "what is your name?"
    assert deltas == ["what is your name?"]


def test_a_history_without_user_text_is_refused_before_any_request(server: OfficialA2aServer, model: A2aModel) -> None:
    with pytest.raises(ProviderError) as caught:
        model.generate({}, [{"role": "model", "content": "hi"}])
    assert caught.value.reason == "a2a_no_user_text" and server.seen == []
    with pytest.raises(ConfigError):
        A2aModel("http://example.com", allow_http_loopback=True)


def test_the_cancel_token_aborts_the_remote_request(server: OfficialA2aServer, model: A2aModel) -> None:
    token = CancelToken()
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            model.generate({}, user("slow"), cancel=token)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=ask)
    worker.start()
    assert server.wait_slow_started()
    started = time.monotonic()
    token.cancel("turn_cancelled")
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 5
    assert isinstance(outcome[0], ProviderError) and outcome[0].reason == "cancelled"
    assert model.generate({}, user("again")) == "echo: again"  # the provider stays usable


def test_the_model_pickles_with_its_card_but_not_its_connections(server: OfficialA2aServer, model: A2aModel) -> None:
    model.generate({}, user("warm up"))
    copy = pickle.loads(pickle.dumps(model))
    assert copy.card == model.card and copy._client is None
    assert copy.generate({}, user("copied")) == "echo: copied"
    assert [s.path for s in server.seen].count("/.well-known/agent-card.json") == 1  # the card travelled
    copy.close()
    carded = A2aModel(discover(server.url, allow_http_loopback=True), allow_http_loopback=True)
    assert carded.generate({}, user("from a card")) == "echo: from a card"
    carded.close()


def test_a_local_agent_answers_through_the_remote_agent(
    system: ActorSystemHandle, server: OfficialA2aServer, spawn: Spawner
) -> None:
    name = unique("Remote")
    spawn(name, {"provider": A2aModel(server.url, allow_http_loopback=True), "description": "remote echo"})
    assert prompt(name, "hello remote", timeout=30, system=system) == "echo: hello remote"
    with pytest.raises(ProviderError) as caught:
        prompt(name, "fail", timeout=30, system=system)
    assert caught.value.reason == "a2a_task_failed" and caught.value.details["cause"] == "TASK_STATE_FAILED"


@pytest.mark.parametrize("as_tool", [False, True], ids=["sub_agent", "agent_tool"])
def test_a_runner_agent_delegates_to_the_remote_agent(
    as_tool: bool,
    system: ActorSystemHandle,
    server: OfficialA2aServer,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,
) -> None:
    emu.set_script({"rules": DELEGATION_RULES})
    remote = unique("SearchRemote")
    spawn(
        remote,
        {
            "provider": A2aModel(server.url, allow_http_loopback=True),
            "description": "Researches topics (a remote A2A agent)",
            "output_key": "research",
        },
    )
    coordinator = spawn(
        unique("Coordinator"),
        config_for(emu, instructions="Delegate research tasks.", **({} if as_tool else {"sub_agents": [remote]})),
        [AgentTool(remote)] if as_tool else [],
    )
    sid = unique("s")
    answer = Runner(coordinator, APP, svc, system=system).run(USER, sid, "supervision trees")
    assert answer == "Coordinator summary: echo: supervision trees"
    session = svc.get_session(SessionRef(app_name=APP, user_id=USER, session_id=sid))
    assert session.state["research"] == "echo: supervision trees"
    sent = [s for s in server.rpc_calls if s.path == "/"]
    assert len(sent) == 1  # one remote task for the one delegation
