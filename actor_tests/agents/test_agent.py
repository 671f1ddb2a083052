"""The agent actor against the real emulator: the model/tool loop, history, tool failures, FIFO per session queue."""

from __future__ import annotations

import itertools
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adk_actors import telemetry
from adk_actors.agents import agent_history, delegate, describe_agent, invoke, prompt, spawn_agent, stop_agent
from adk_actors.agents.api import local_id
from adk_actors.agents.spec import MAX_TOOL_ROUNDS
from adk_actors.emulator import Emulator
from adk_actors.errors import (
    ActorCrashed,
    AgentError,
    BudgetExceeded,
    ProviderError,
    ProviderHttpError,
    SchemaError,
)
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name, place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, unique
from .support import PlainProvider, explode, get_weather, read_json_line, record, tool_pid

WEATHER = {"provider": "gemini", "instructions": "You are a concise weather assistant."}


def _contents(request: dict) -> list[dict]:
    return request["body"]["contents"]


def test_prompt_runs_the_tool_loop_and_echoes_signatures_and_call_ids(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Weather"), config_for(emu, **WEATHER), [FunctionTool(get_weather)])
    answer = prompt(agent, "What is the weather in Tokyo?", system=system, timeout=30)
    assert answer == "The weather in Tokyo is city: Tokyo, forecast: sunny."
    first, second = emu.requests[-2:]
    assert first["body"]["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    model_turn = _contents(second)[1]
    call = model_turn["parts"][0]
    assert model_turn["role"] == "model" and call["functionCall"]["name"] == "get_weather"
    assert call.get("thoughtSignature") or call.get("thought_signature")
    response = _contents(second)[2]["parts"][0]["functionResponse"]
    assert response["id"] == call["functionCall"]["id"]
    assert response["response"] == {"city": "Tokyo", "forecast": "sunny"}
    history = agent_history(agent, system=system)
    assert [h["role"] for h in history] == ["user", "model", "user", "model"]


def test_the_compatibility_conversation_keeps_history_across_prompts(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Chat"), config_for(emu))
    assert prompt(agent, "one", system=system) == "You said: one"
    assert prompt(agent, "two", system=system) == "You said: two"
    assert len(_contents(emu.requests[-1])) == 3  # one, answer, two


def test_history_policy_exclude_sends_only_the_current_input(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Forgetful"), config_for(emu, history_policy="exclude"))
    prompt(agent, "one", system=system)
    assert prompt(agent, "two", system=system) == "You said: two"
    assert len(_contents(emu.requests[-1])) == 1


def test_a_tool_that_raises_becomes_a_failed_function_response_and_the_agent_lives_on(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Boom"), config_for(emu), [FunctionTool(explode, name="get_weather")])
    answer = prompt(agent, "What is the weather in Tokyo?", system=system, timeout=30)
    assert "tool_exception" in answer and "RuntimeError" in answer
    sent = json.dumps(emu.requests[-1]["body"])
    assert "secret internal detail" not in sent and "Traceback" not in sent
    assert prompt(agent, "still there?", system=system) == "You said: still there?"


def test_arguments_are_validated_before_the_tool_runs(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, tmp_path: Path
) -> None:
    journal = tmp_path / "calls.log"
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "record", "args": {"city": 5}}]},
                },
                {"when": {}, "respond": {"text": "{response_text}"}},
            ]
        }
    )
    agent = spawn(unique("Strict"), config_for(emu), [FunctionTool(record)])
    answer = prompt(agent, "go", system=system, timeout=30)
    assert "invalid_arguments" in answer
    assert not journal.exists()


def test_an_unknown_function_is_answered_with_tool_not_found(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "nope", "args": {}}]},
                },
                {"when": {}, "respond": {"text": "{response_text}"}},
            ]
        }
    )
    agent = spawn(unique("Lost"), config_for(emu), [FunctionTool(get_weather)])
    assert "tool_not_found" in prompt(agent, "go", system=system, timeout=30)


def test_a_confirmation_gated_tool_fails_closed_without_a_runner(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    static = FunctionTool(get_weather, requires_confirmation=True)
    agent = spawn(unique("Gated"), config_for(emu), [static])
    assert "tool_confirmation_requires_runner" in prompt(agent, "weather in Oslo", system=system, timeout=30)
    dynamic = FunctionTool(get_weather, requires_confirmation=lambda args, ctx: args["city"] == "Oslo")
    agent2 = spawn(unique("Gated"), config_for(emu), [dynamic])
    assert "tool_confirmation_requires_runner" in prompt(agent2, "weather in Oslo", system=system, timeout=30)
    assert "sunny" in prompt(agent2, "weather in Rome", system=system, timeout=30)


def _two_calls(emu: Emulator, journal: Path, names: tuple[str, str]) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {
                        "function_calls": [
                            {"name": names[0], "args": {"city": str(journal)}, "id": "c1"},
                            {"name": names[1], "args": {"city": str(journal)}, "id": "c2"},
                        ]
                    },
                },
                {"when": {}, "respond": {"text": "done {response_text}"}},
            ]
        }
    )


def test_parallel_safe_calls_overlap_and_other_calls_run_one_at_a_time(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, tmp_path: Path
) -> None:
    serial_log, parallel_log = tmp_path / "serial.log", tmp_path / "parallel.log"
    _two_calls(emu, serial_log, ("rec_a", "rec_b"))
    serial = spawn(
        unique("Serial"), config_for(emu), [FunctionTool(record, name="rec_a"), FunctionTool(record, name="rec_b")]
    )
    assert prompt(serial, "go", system=system, timeout=30).startswith("done")
    assert serial_log.read_text().split() == ["start", "c1", "end", "c1", "start", "c2", "end", "c2"]
    _two_calls(emu, parallel_log, ("par_a", "par_b"))
    par = spawn(
        unique("Parallel"),
        config_for(emu),
        [
            FunctionTool(record, name="par_a", parallel_safe=True),
            FunctionTool(record, name="par_b", parallel_safe=True),
        ],
    )
    assert prompt(par, "go", system=system, timeout=30).startswith("done")
    lines = parallel_log.read_text().splitlines()
    assert lines[0].startswith("start") and lines[1].startswith("start")  # both started before either ended
    responses = _contents(emu.requests[-1])[-1]["parts"]
    assert [p["functionResponse"]["id"] for p in responses] == ["c1", "c2"]  # call order kept


def test_a_provider_failure_fails_the_prompt_with_its_reason(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("NoKey"), {"provider": "gemini", "base_url": emu.base_url})
    with pytest.raises(ProviderError) as info:
        prompt(agent, "hi", system=system)
    assert info.value.reason == "missing_api_key"
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 503}}}]})
    agent2 = spawn(unique("Down"), config_for(emu))
    with pytest.raises(ProviderError) as info:
        prompt(agent2, "hi", system=system)
    assert info.value.reason == "unavailable"
    assert agent_history(agent2, system=system) == []  # a failed turn leaves no half turn behind


def test_a_provider_error_body_never_reaches_the_caller_the_error_hook_or_telemetry(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, tmp_path: Path
) -> None:
    marker = "BODY-MARKER-4f1c"
    emu.set_script(
        {"rules": [{"when": {}, "respond": {"fault": {"status": 400, "message": f"Invalid request: {marker}"}}}]}
    )
    fifo = tmp_path / "errors.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        agent = spawn(
            unique("Bodied"),
            config_for(
                emu,
                callbacks=["actor_tests.agents.callbacks_for_tests:ErrorWatch"],
                callback_config={"fifo": str(fifo)},
            ),
        )
        with telemetry.attach("agent.", system=system) as sub:
            with pytest.raises(ProviderHttpError) as info:
                prompt(agent, "hi", system=system, timeout=30)
            events = list(sub.until("agent.prompt.exception", timeout=10))
        hook = read_json_line(reader)
    finally:
        os.close(reader)
    err = info.value
    assert err.reason == "invalid_argument" and err.status == 400
    assert err.details == {"status": 400, "google_status": "INVALID_ARGUMENT"}  # structural tags only
    visible = [
        str(err),
        repr(err),
        json.dumps(err.details),
        json.dumps(err.to_dict()),
        json.dumps(hook),
        json.dumps([{"n": e.name, "m": e.metadata, "x": e.measurements} for e in events]),
    ]
    assert not any(marker in text or "Invalid request" in text for text in visible)
    assert hook["error"]["reason"] == "invalid_argument"
    assert [e.metadata.get("outcome") for e in events if e.name == "agent.model.stop"] == ["invalid_argument"]


def test_structured_output_is_requested_only_from_a_capable_provider(system: ActorSystemHandle, spawn: Spawner) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    plain = spawn(unique("Plain"), {"provider": PlainProvider(), "output_schema": schema})
    capable = spawn(unique("Capable"), {"provider": PlainProvider(structured=True), "output_schema": schema})
    # The provider answers whether the request carried a response schema; both answers are validated.
    assert json.loads(invoke(plain, "q", system=system, timeout=30)) == {"answer": "plain"}
    assert json.loads(invoke(capable, "q", system=system, timeout=30)) == {"answer": "structured"}


def test_a_tool_runs_in_a_worker_process_and_an_inline_tool_in_the_agents_host(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "where", "args": {"city": "x"}}]},
                },
                {"when": {}, "respond": {"text": "{response.pid}"}},
            ]
        }
    )
    pooled = spawn(unique("Pooled"), config_for(emu), [FunctionTool(tool_pid, name="where")])
    inline = spawn(unique("Inline"), config_for(emu), [FunctionTool(tool_pid, name="where", inline=True)])
    hosts = system.settings.hosts
    host_pid = {
        a.name: system.ask(host_name(place(local_id(a.name), hosts)), GetStatus())["pid"] for a in (pooled, inline)
    }
    worker_pids = {w["pid"] for w in system.ask("workers", GetStatus())["workers"]}
    pooled_pid = int(prompt(pooled, "where?", system=system, timeout=30))
    assert pooled_pid in worker_pids and pooled_pid != host_pid[pooled.name]
    assert int(prompt(inline, "where?", system=system, timeout=30)) == host_pid[inline.name]


def test_input_and_output_schemas_are_enforced(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    config = config_for(
        emu,
        instructions="Answer concisely using the requested JSON shape.",
        input_schema={
            "type": "object",
            "properties": {"topic": {"type": "string", "minLength": 1}},
            "required": ["topic"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"answer": {"type": "string", "minLength": 1}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    )
    agent = spawn(unique("Contract"), config)
    answer = invoke(agent, json.dumps({"topic": "supervision trees"}), system=system)
    assert json.loads(answer)["answer"]
    assert emu.requests[-1]["body"]["generationConfig"]["responseMimeType"] == "application/json"
    before = len(emu.requests)
    with pytest.raises(SchemaError) as info:
        invoke(agent, json.dumps({"topic": ""}), system=system)
    assert info.value.reason == "invalid_input" and len(emu.requests) == before  # no provider call
    emu.set_script({"rules": [{"when": {}, "respond": {"text": '{"wrong": 1}'}}]})
    with pytest.raises(SchemaError) as info:
        invoke(agent, json.dumps({"topic": "x"}), system=system)
    assert info.value.reason == "invalid_output"


def test_delegations_in_flight_each_get_their_own_answer(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Async"), config_for(emu))
    futures = [delegate(agent, f"message {i}", system=system) for i in range(12)]
    assert [f.result(timeout=60) for f in futures] == [f"You said: message {i}" for i in range(12)]
    history = agent_history(agent, system=system)
    assert len(history) == 24  # one FIFO: every turn whole, none interleaved
    for user, model in zip(history[::2], history[1::2], strict=True):
        assert model["content"]["parts"][0]["text"] == f"You said: {user['content']}"


def test_invoke_uses_fresh_history(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    agent = spawn(unique("Fresh"), config_for(emu))
    prompt(agent, "remember me", system=system)
    assert (
        invoke(agent, "new", scope={"app_name": "a", "user_id": "u", "session_id": "s"}, system=system)
        == "You said: new"
    )
    assert len(_contents(emu.requests[-1])) == 1
    assert len(agent_history(agent, system=system)) == 2  # invocations do not touch the conversation


def test_one_session_queue_is_fifo_and_different_sessions_overlap(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    delay_s = 0.6
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "ok {user_text}", "delay_ms": int(delay_s * 1000)}}]})
    agent = spawn(unique("Queues"), config_for(emu))

    def run(session: str, i: int) -> str:
        return invoke(
            agent,
            f"{session}-{i}",
            scope={"app_name": "a", "user_id": "u", "session_id": session},
            system=system,
            timeout=60,
        )

    with ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(lambda args: run(*args), [("same", 0), ("same", 1), ("same", 2), ("x", 0), ("y", 0), ("z", 0)])
        )
    assert sorted(results) == sorted(
        f"ok {session}-{i}" for session, i in [("same", 0), ("same", 1), ("same", 2), ("x", 0), ("y", 0), ("z", 0)]
    )
    arrivals = {_contents(r)[0]["parts"][0]["text"]: r["timestamp"] for r in emu.requests}
    same = sorted(arrivals[f"same-{i}"] for i in range(3))
    # A session's next request reaches the provider only after the previous answer (which took delay_s).
    assert all(later - earlier >= delay_s * 0.9 for earlier, later in itertools.pairwise(same))
    others = [arrivals[k] for k in ("x-0", "y-0", "z-0")]
    first_same = same[0]
    # Different sessions did not wait for each other (all started within one answer's delay of each other).
    assert max([*others, first_same]) - min([*others, first_same]) < delay_s


def test_duplicate_names_stop_and_describe(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    name = unique("Dup")
    agent = spawn(name, config_for(emu, description="the dup agent"), [FunctionTool(get_weather)])
    with pytest.raises(AgentError) as info:
        spawn_agent(name, config_for(emu), system=system)
    assert info.value.reason == "already_started"
    assert describe_agent(name, system=system) == {
        "name": name,
        "description": "the dup agent",
        "sub_agents": [],
        "tools": ["get_weather"],
    }
    stop_agent(agent, system=system)
    with pytest.raises(ActorCrashed):
        prompt(agent, "hi", system=system, timeout=5)
    with pytest.raises(AgentError) as info:
        stop_agent(agent, system=system)
    assert info.value.reason == "not_found"


def test_100_agents_prompted_from_8_threads_get_their_own_replies(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agents = [spawn(unique(f"Many{i}"), config_for(emu)) for i in range(100)]
    jobs = [(agent, f"request {i} for {agent.name}") for i, agent in enumerate(agents) for _ in range(2)]
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda job: prompt(job[0], job[1], system=system, timeout=60), jobs))
    assert replies == [f"You said: {text}" for _agent, text in jobs]


def test_a_model_that_never_stops_calling_tools_fails_with_max_tool_rounds(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}}]}
    )
    agent = spawn(unique("Looping"), config_for(emu), [FunctionTool(get_weather, inline=True)])
    with pytest.raises(BudgetExceeded) as info:
        prompt(agent, "go", system=system, timeout=60)
    assert info.value.reason == "max_tool_rounds"
    assert len(emu.requests) == MAX_TOOL_ROUNDS + 1


def test_a_malformed_call_batch_fails_the_turn_closed(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"function_calls": [{"name": "{unset}", "args": {}}]}}]})
    agent = spawn(unique("Malformed"), config_for(emu), [FunctionTool(get_weather)])
    with pytest.raises(ProviderError) as info:  # model output is untrusted: refused before any tool runs
        prompt(agent, "go", system=system, timeout=30)
    assert info.value.reason == "invalid_model_output"
    assert info.value.details["cause"] == "invalid_function_name"
    assert agent_history(agent, system=system) == []


def test_stopping_an_agent_answers_its_running_and_queued_turns(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "late", "delay_ms": 20000}}]})
    agent = spawn(unique("Stopped"), config_for(emu))
    running = delegate(agent, "first", system=system, timeout=60)
    queued = delegate(agent, "second", system=system, timeout=60)
    assert describe_agent(agent, system=system)["name"] == agent.name  # the agent answers while turns wait
    stop_agent(agent, system=system)
    for future in (running, queued):
        error = future.exception(timeout=15)
        assert isinstance(error, ActorCrashed)


def test_a_batch_of_60_calls_that_all_fail_at_once_is_answered_in_call_order(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    calls = [{"name": f"nope_{i}", "args": {}, "id": f"id{i}"} for i in range(60)]
    emu.set_script(
        {
            "rules": [
                {"when": {"has_function_response": False}, "respond": {"function_calls": calls}},
                {"when": {}, "respond": {"text": "answered {name}"}},
            ]
        }
    )
    agent = spawn(unique("Batch"), config_for(emu), [FunctionTool(get_weather)])
    assert prompt(agent, "go", system=system, timeout=30) == "answered nope_0"
    parts = _contents(emu.requests[-1])[-1]["parts"]
    assert [p["functionResponse"]["id"] for p in parts] == [f"id{i}" for i in range(60)]
    assert {p["functionResponse"]["response"]["error"]["reason"] for p in parts} == {"tool_not_found"}


def test_the_api_key_never_appears_in_status_errors_or_history(system: ActorSystemHandle, spawn: Spawner) -> None:
    key = "AIzaSy-agent-SECRET-key-123"
    with Emulator(api_keys=["another-key"]) as restricted:
        agent = spawn(unique("Keyed"), {"provider": "gemini", "base_url": restricted.base_url, "api_key": key})
        with pytest.raises(ProviderError) as info:
            prompt(agent, "hi", system=system)
        assert info.value.reason == "invalid_api_key"
        visible = [
            str(info.value),
            repr(info.value),
            json.dumps(info.value.details),
            json.dumps(system.tree()),
            json.dumps(describe_agent(agent, system=system)),
            json.dumps(agent_history(agent, system=system)),
        ]
        assert not any(key in text for text in visible)
