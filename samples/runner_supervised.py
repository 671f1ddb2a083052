"""The reference's supervised run API: ``runs.start`` / ``subscribe`` / ``status``, and resuming a paused run.

A run is not owned by the process that starts it: any process attached to the system can subscribe to it, wait
for it or resume it by id. A paused run stays immutable; ``runs.resume`` continues it in a new run, linked both
ways (``resumed_to`` / ``parent_run_id``).

Run: ``.venv/bin/python samples/runner_supervised.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors import runs
from adk_actors.emulator import Emulator
from adk_actors.errors import RunError
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"user_text_contains": "rotate", "has_function_response": False},
     "respond": {"function_calls": [{"name": "rotate_logs", "args": {"service": "billing"}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "Rotated the logs of {response.service}."}},
    {"when": {"user_text_contains": "supervisors"},
     "respond": {"text": "A supervisor restarts its children when they fail."}},
]}


def rotate_logs(service: str) -> dict:
    """Rotate the logs of a service (an operator approves it first).

    Args:
        service: The service name.
    """
    return {"service": service, "rotated": True}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "instructions": "Be concise.", "base_url": emu.base_url,
                  "api_key": "test-key"}
        agent = adk.spawn_agent("RunnerAgent", config, [FunctionTool(rotate_logs, requires_confirmation=True)])
        runner = adk.Runner(agent, "readme_app", adk.session_service(settings), streaming_mode="text")

        run_id = runs.start(runner, "user-1", "session-supervised", "Explain supervisors.",
                            retention_ms=60000, max_buffered_events=256)
        for item in runs.subscribe(run_id, idle_timeout=30):
            if item.terminal:
                print(f"terminal: {item.item}")
            else:
                event = item.item
                print(f"seq={item.seq} author={event.author} partial={event.partial} final={event.is_final}")
        print(f"status: {runs.status(run_id)['state']}")

        paused_run = runs.start(runner, "user-1", "session-ops", "Please rotate the billing logs.")
        outcome = runs.wait(paused_run, 30)
        assert isinstance(outcome, runs.Paused) and outcome.event.actions.pause is not None
        print(f"paused: reason={outcome.event.actions.pause.reason} state={runs.status(paused_run)['state']}")
        resumed_run = runs.resume(paused_run, {"confirmed": True}, retention_ms=60000, max_buffered_events=256)
        print(f"resumed: {runs.wait(resumed_run, 30)}")
        print(f"resumed_to matches: {runs.status(paused_run)['resumed_to'] == resumed_run}, "
              f"parent_run_id matches: {runs.status(resumed_run)['parent_run_id'] == paused_run}")
        try:
            runs.resume(paused_run, {"confirmed": True})
        except RunError as err:
            print(f"second resume: {err.reason}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
