"""The reference's "Event Runner": a Runner with budgets, text streaming, admission, runtime and context policy.

``run`` returns the answer; ``stream`` yields every stored event — the user event, the streamed partials (delta
batches, rendered provisionally) and exactly one final event whose text replaces the provisional view.

Run: ``.venv/bin/python samples/runner_events.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"user_text_equals": "Hello"}, "respond": {"text": "Hello! Ask me about OTP."}},
    {"when": {"user_text_contains": "supervisors"},
     "respond": {"text": "Supervisors restart failed children according to their strategy.", "chunks": 5}},
]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "instructions": "Be concise.", "base_url": emu.base_url,
                  "api_key": "test-key"}
        agent = adk.spawn_agent("RunnerAgent", config)
        runner = adk.Runner(
            agent, "readme_app", adk.session_service(settings),
            run_timeout=120000, max_llm_calls=32, max_tool_rounds=16,
            streaming_mode="text", max_stream_output_bytes=16 * 1024 * 1024,
            admission_control={"overflow": "queue", "queue_timeout": 5000},
            runtime_policy={"id": "readme-runner-policy", "agents": {"allow": ["RunnerAgent"]},
                            "tools": {"allow": []}, "max_argument_bytes": 32768, "max_content_bytes": 262144},
            context_policy={"max_bytes": 32768, "max_tokens": 8192, "max_request_bytes": 65536,
                            "max_request_tokens": 16384, "overflow": "truncate"})
        print(f"run: {runner.run('user-1', 'session-1', 'Hello')}")

        provisional: list[str] = []
        finals: list[str] = []
        for event in runner.stream("user-1", "session-1", "Explain supervisors."):
            print(f"event: author={event.author} partial={event.partial} final={event.is_final}")
            if event.partial:
                provisional.append(event.text() or "")   # a UI renders these provisionally...
            elif event.is_final:
                finals.append(event.text() or "")       # ...and replaces them with the final snapshot
        print(f"provisional: {''.join(provisional)}")
        print(f"final ({len(finals)} event): {finals[0]}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
