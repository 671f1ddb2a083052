"""Agent contracts from the reference: input/output JSON schemas, structured output, fresh-history invocation.

(The reference runs this through a Runner with a session and ``output_key``; that part arrives with the Runner.)

Run: ``.venv/bin/python samples/agent_contracts.py``
"""

from __future__ import annotations

import json
import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.errors import SchemaError
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"json_mode": True}, "respond": {"json": {"answer": "Supervisors restart children by strategy."}}},
]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {
            "provider": "gemini", "model": "gemini-3.1-flash-lite", "base_url": emu.base_url, "api_key": "test-key",
            "instructions": "Answer concisely using the requested JSON shape.",
            "input_schema": {"type": "object", "properties": {"topic": {"type": "string", "minLength": 1}},
                             "required": ["topic"], "additionalProperties": False},
            "output_schema": {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}},
                              "required": ["answer"], "additionalProperties": False},
            "history_policy": "exclude",
            "generation_config": {"max_output_tokens": 128, "thinking_config": {"thinking_level": "low"},
                                  "safety_settings": [{"category": "harassment",
                                                       "threshold": "block_medium_and_above"}]},
        }
        agent = adk.spawn_agent("ContractAgent", config)
        response = adk.invoke(agent, json.dumps({"topic": "supervision trees"}),
                              scope={"app_name": "contract_app", "user_id": "user-1",
                                     "session_id": "contract-session"})
        print(json.loads(response)["answer"])
        try:
            adk.invoke(agent, json.dumps({"topic": ""}))
        except SchemaError as err:
            print(f"rejected before the provider: {err.reason}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
