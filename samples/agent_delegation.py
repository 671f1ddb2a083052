"""The reference's "Asynchronous delegation": several requests in flight, each answer matched to its future.

Run: ``.venv/bin/python samples/agent_delegation.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"user_text_contains": "OTP"}, "respond": {"text": "OTP is Erlang's toolkit of behaviours."}},
    {"when": {}, "respond": {"text": "You said: {user_text}"}},
]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "model": "gemini-3.1-flash-lite", "base_url": emu.base_url,
                  "api_key": "test-key"}
        agent = adk.spawn_agent("AsyncAgent", config)
        future = adk.delegate(agent, "Summarize OTP in one sentence.")
        others = [adk.delegate(agent, f"note {i}") for i in range(3)]
        try:
            print(future.result(timeout=60))
        except adk.AdkError as err:
            print(f"delegation failed: {err.reason}")
        print([f.result(timeout=60) for f in others])
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
