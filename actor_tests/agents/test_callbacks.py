"""Agent callbacks by importable name, run in workers: observe, halt, replace; broken callbacks never crash."""

from __future__ import annotations

import json
import os
import select
from pathlib import Path

import pytest

from adk_actors.agents import agent_history, prompt
from adk_actors.emulator import Emulator
from adk_actors.errors import ProviderError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, unique
from .support import explode, get_weather

MOD = "actor_tests.agents.callbacks_for_tests"


def test_an_audit_callback_sees_model_and_tool_hooks_without_secrets(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, tmp_path: Path
) -> None:
    journal = tmp_path / "audit.jsonl"
    agent = spawn(
        unique("Audited"),
        config_for(emu, callbacks=[f"{MOD}:Audit"], callback_config={"journal": str(journal)}),
        [FunctionTool(get_weather)],
    )
    assert prompt(agent, "What is the weather in Tokyo?", system=system, timeout=30).startswith("The weather")
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [line["hook"] for line in lines] == ["before_model", "after_model", "before_model", "after_model"]
    assert lines[0]["tools"] == 1 and lines[1]["calls"] == 1 and lines[3]["text"].startswith("The weather")
    assert lines[0]["config_keys"] == ["agent", "callback_config", "generation_config", "model", "provider"]
    assert "test-key" not in journal.read_text()


def test_a_before_model_halt_answers_without_the_provider(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Halted"), config_for(emu, callbacks=[f"{MOD}:Halt"]))
    assert prompt(agent, "hi", system=system) == "cached answer"
    assert emu.requests == []


def test_replace_rewrites_tool_arguments_tool_results_and_the_answer(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Rewritten"), config_for(emu, callbacks=[f"{MOD}:Rewrite"]), [FunctionTool(get_weather)])
    answer = prompt(agent, "What is the weather in Tokyo?", system=system, timeout=30)
    # The model asked about Tokyo ({args.city} echoes its call); the tool ran on Paris and its result was replaced.
    assert answer == "THE WEATHER IN TOKYO IS CITY: PARIS, FORECAST: RAINY."


def test_broken_callbacks_are_skipped_and_the_agent_answers(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(
        unique("Robust"), config_for(emu, callbacks=[f"{MOD}:Broken", f"{MOD}:Rewrite"]), [FunctionTool(get_weather)]
    )
    answer = prompt(agent, "What is the weather in Tokyo?", system=system, timeout=30)
    assert answer == "THE WEATHER IN TOKYO IS CITY: PARIS, FORECAST: RAINY."  # the next callback still ran
    assert "private" not in json.dumps(emu.requests[-1]["body"])


def test_an_error_hook_hears_a_failed_turn_as_structural_tags_only(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, tmp_path: Path
) -> None:
    fifo = tmp_path / "errors.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the hook's open() for writing does not block then
    try:
        emu.set_script(
            {"rules": [{"when": {}, "respond": {"fault": {"status": 400, "message": "secret body test-key"}}}]}
        )
        agent = spawn(
            unique("Failing"), config_for(emu, callbacks=[f"{MOD}:ErrorWatch"], callback_config={"fifo": str(fifo)})
        )
        with pytest.raises(ProviderError) as info:
            prompt(agent, "hi", system=system, timeout=30)
        data = b""
        while not data.endswith(b"\n"):
            ready, _, _ = select.select([reader], [], [], 30)
            assert ready, "the error hook never ran"
            data += os.read(reader, 65536)
    finally:
        os.close(reader)
    line = json.loads(data)
    assert line["error"] == {
        "reason": info.value.reason,
        "type": "ProviderHttpError",
        "agent": agent.name,
        "invocation_id": line["error"]["invocation_id"],
        "kind": "prompt",
    }
    assert "test-key" not in data.decode() and "secret body" not in data.decode()


def test_a_before_tool_halt_answers_the_call_without_running_the_tool(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(
        unique("ToolHalted"),
        config_for(emu, callbacks=[f"{MOD}:HaltTool"]),
        [FunctionTool(explode, name="get_weather")],
    )  # the tool itself would fail with tool_exception
    answer = prompt(agent, "What is the weather in Tokyo?", system=system, timeout=30)
    assert answer == "The weather in Tokyo is city: Tokyo, forecast: from the callback."
    response = emu.requests[-1]["body"]["contents"][-1]["parts"][0]["functionResponse"]
    assert response["name"] == "get_weather" and response["response"] == {
        "city": "Tokyo",
        "forecast": "from the callback",
    }


def test_a_before_model_replace_sends_the_replaced_history_to_the_provider(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Replaced"), config_for(emu, callbacks=[f"{MOD}:ReplaceHistory"]))
    assert prompt(agent, "original question", system=system, timeout=30) == "You said: replaced question"
    assert emu.requests[-1]["body"]["contents"] == [{"role": "user", "parts": [{"text": "replaced question"}]}]
    # Only the model request is replaced: the conversation keeps what the user said.
    assert agent_history(agent, system=system)[0]["content"] == "original question"


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_answer_a_callback_makes_is_validated_like_the_models(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, where: str
) -> None:
    agent = spawn(
        unique("HostileCallback"),
        config_for(emu, callbacks=[f"{MOD}:HostileAnswers"], callback_config={"where": where}),
    )
    with pytest.raises(ProviderError) as info:
        prompt(agent, "hello", system=system)
    assert info.value.reason == "invalid_model_output"
    assert agent_history(agent, system=system) == []  # nothing of the refused answer was kept
