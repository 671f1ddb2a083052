"""Agent contracts from the reference: input/output JSON schemas, a ``{user:name}`` instruction template read from
the session's scoped state, structured output, ``history_policy`` exclude, and ``output_key`` committed through a
Runner in the same final session event as the response.

Run: ``.venv/bin/python samples/agent_contracts.py``
"""

from __future__ import annotations

import json
import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.errors import SchemaError
from adk_actors.sessions import SessionRef
from adk_actors.testing import reserved_port

# The emulator answers in JSON mode only when the rendered instruction names Ada (so the template is checked too).
SCRIPT = {"rules": [
    {"when": {"json_mode": True, "system_text_contains": "Answer Ada concisely"},
     "respond": {"json": {"answer": "Supervisors restart children by strategy."}}},
]}

APP, USER, SESSION = "contract_app", "user-1", "contract-session"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        sessions = adk.session_service()
        sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={"user:name": "Ada"})
        config = {
            "provider": "gemini", "model": "gemini-3.1-flash-lite", "base_url": emu.base_url, "api_key": "test-key",
            "instructions": "Answer {user:name} concisely using the requested JSON shape.",
            "input_schema": {"type": "object", "properties": {"topic": {"type": "string", "minLength": 1}},
                             "required": ["topic"], "additionalProperties": False},
            "output_schema": {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}},
                              "required": ["answer"], "additionalProperties": False},
            "output_key": "user:last_answer",
            "history_policy": "exclude",
            "generation_config": {"max_output_tokens": 128, "thinking_config": {"thinking_level": "low"},
                                  "safety_settings": [{"category": "harassment",
                                                       "threshold": "block_medium_and_above"}]},
        }
        agent = adk.spawn_agent("ContractAgent", config)
        runner = adk.Runner(agent, APP, sessions)
        response = runner.run(USER, SESSION, json.dumps({"topic": "supervision trees"}))
        answer = json.loads(response)["answer"]
        print(answer)
        ref = SessionRef(app_name=APP, user_id=USER, session_id=SESSION)
        stored = sessions.get_session(ref)
        assert stored.state["user:last_answer"] == {"answer": answer}
        print(f"user:last_answer = {json.dumps(stored.state['user:last_answer'])}")
        try:
            runner.run(USER, SESSION, json.dumps({"topic": ""}))
        except SchemaError as err:
            print(f"rejected before the provider: {err.reason}")
        adk.stop_agent(agent)
        sessions.delete_session(ref)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
