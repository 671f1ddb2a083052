"""The reference's "Concurrent multi-agent workflows": sequential, parallel and the writer/reviewer loop.

Run: ``.venv/bin/python samples/agent_workflows.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"system_text_contains": "French"}, "respond": {"text": "[fr] {user_text}"}},
    {"when": {"system_text_contains": "Summarize"}, "respond": {"text": "In short: {user_text}"}},
    {"when": {"system_text_contains": "Write", "user_text_contains": "Revise"},
     "respond": {"text": "Processes spawn light, / supervisors mend the night."}},
    {"when": {"system_text_contains": "Write"}, "respond": {"text": "Erlang processes are small."}},
    {"when": {"system_text_contains": "APPROVED", "user_text_contains": "night"}, "respond": {"text": "APPROVED"}},
    {"when": {"system_text_contains": "APPROVED"}, "respond": {"text": "It does not rhyme yet."}},
]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        base = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        translator = adk.spawn_agent("Translator", {**base, "instructions": "Translate the input to French."})
        summarizer = adk.spawn_agent("Summarizer", {**base, "instructions": "Summarize the input in one sentence."})
        pipeline = adk.sequential([translator, summarizer], "Erlang processes are lightweight.")
        results = adk.parallel([translator, summarizer], "Explain OTP.", 60)
        print(f"pipeline={pipeline} parallel={[(agent.name, output) for agent, output in results]}")
        adk.stop_agent(translator)
        adk.stop_agent(summarizer)

        writer = adk.spawn_agent("Writer", {**base, "instructions": "Write and revise the requested draft."})
        reviewer = adk.spawn_agent("Reviewer", {
            **base, "instructions": "Reply exactly APPROVED when the draft is ready; otherwise critique it."})
        print(adk.loop(writer, reviewer, "Write a short poem about Erlang.", 3))
        adk.stop_agent(writer)
        adk.stop_agent(reviewer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
