"""The reference's "Generic long-running operations": a tool suspends the invocation without a blocked worker.

``start_export`` returns ``long_running("export-42", ...)``; the Runner pauses with a ``long_running`` pause. The
application records progress with ``update_long_running`` while the pause is open, then finishes the call with
one terminal ``resume`` response, and the model answers from it.

Run: ``.venv/bin/python samples/runner_long_running.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.errors import RunError
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"user_text_contains": "export", "has_function_response": False},
     "respond": {"function_calls": [{"name": "start_export", "args": {"dataset": "invoices"}}]}},
    {"when": {"has_function_response": True},
     "respond": {"text": "The export of {args.dataset} is {response.status}: {response.result.artifact_id}."}},
]}


def start_export(dataset: str) -> dict:
    """Start exporting a dataset; the export finishes outside this process.

    Args:
        dataset: The dataset to export.
    """
    return adk.long_running("export-42", "The external export is running.")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        agent = adk.spawn_agent("ExportAgent", config, [FunctionTool(start_export)])
        runner = adk.Runner(agent, "readme_app", adk.session_service(settings))

        paused = runner.run("user-1", "export-session", "Please export the invoices.")
        pause = paused.event.actions.pause
        print(f"paused: reason={pause.reason} operation_id={pause.details['operation_id']} "
              f"message={pause.details['message']}")
        invocation_id = paused.event.invocation_id

        progress = runner.update_long_running("user-1", "export-session", invocation_id, "export-42",
                                              {"operation_id": "export-42", "status": "running", "progress": 50})
        assert progress.content is not None
        response = progress.content.to_dict()["parts"][0]["response"]
        print(f"progress event: partial={progress.partial} progress={response['progress']}")

        answer = runner.resume("user-1", "export-session", invocation_id,
                               {"operation_id": "export-42", "status": "completed",
                                "result": {"artifact_id": "export.zip"}})
        print(f"final answer: {answer}")
        try:
            runner.update_long_running("user-1", "export-session", invocation_id, "export-42",
                                       {"operation_id": "export-42", "status": "running", "progress": 90})
        except RunError as err:
            print(f"late progress update: {err.reason}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
