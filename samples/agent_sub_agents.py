"""The reference's "Sub-agents and agent-as-tool": a coordinator delegating to a specialist, and AgentTool.

Run: ``.venv/bin/python samples/agent_sub_agents.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"system_text_contains": "Delegate research", "has_function_response": False},
     "respond": {"function_calls": [{"name": "SearchSpecialist", "args": {"prompt": "{user_text}"}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "Coordinator: {response_text}"}},
    {"when": {"system_text_contains": "Research the requested"},
     "respond": {"text": "Notes on '{user_text}': supervisors restart failed children."}},
]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        base = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        search = adk.spawn_agent("SearchSpecialist", {**base, "instructions": "Research the requested Erlang topic."})
        coordinator = adk.spawn_agent("Coordinator", {
            **base,
            "global_instruction": "You are part of the Erlang documentation team.",
            "instructions": "Delegate research tasks to SearchSpecialist.",
            "sub_agents": {"SearchSpecialist": {"agent": search, "description": "Researches Erlang and OTP topics"}},
        })
        print(adk.prompt(coordinator, "Research supervision trees."))

        schema = adk.AgentTool.schema_for("SearchSpecialist", "Researches Erlang and OTP topics")
        direct = adk.AgentTool(search).execute({"prompt": "Explain rest_for_one."})
        print(f"schema={schema} response={direct}")
        adk.stop_agent(coordinator)
        adk.stop_agent(search)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
