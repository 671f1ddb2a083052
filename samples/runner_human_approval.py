"""The reference's second "Human approval pause/resume" example: the model asks for a human's approval itself.

Long-running work is a separate pause type from a tool's confirmation gate. Here the agent is told to call
``request_human_approval`` before any destructive action; that tool suspends the invocation as long-running work
(no worker stays blocked). The operator's answer resumes it: the approved map becomes the tool's function
response, recorded under the original invocation and call, and the model continues from it. In adk_actors a
long-running resume names the operation and a terminal status (``docs/RUNNER.md``), so the approved map carries
``operation_id`` and ``status`` next to ``approved`` and ``approver``.

Run: ``.venv/bin/python samples/runner_human_approval.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors import runs
from adk_actors.content.parts import FunctionResponsePart
from adk_actors.emulator import Emulator
from adk_actors.errors import RunError
from adk_actors.sessions import SessionRef
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"system_text_contains": "request_human_approval", "has_function_response": False,
              "user_text_contains": "delete"},
     "respond": {"function_calls": [{"name": "request_human_approval",
                                     "args": {"action": "delete_deployment", "target": "obsolete"}}]}},
    {"when": {"function_response_name": "request_human_approval"},
     "respond": {"text": "Approved by {response.approver}: deleting the {args.target} deployment."}},
]}


def request_human_approval(action: str, target: str) -> dict:
    """Ask a human operator to approve a destructive action before it is taken.

    Args:
        action: What is about to be done.
        target: What it is done to.
    """
    return adk.long_running(f"approval:{action}:{target}", f"Waiting for an operator to approve {action}.")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "instructions": "Before any destructive action, call request_human_approval.",
                  "base_url": emu.base_url, "api_key": "test-key"}
        agent = adk.spawn_agent("ApprovalAgent", config, [FunctionTool(request_human_approval)])
        service = adk.session_service(settings)
        runner = adk.Runner(agent, "readme_app", service)

        result = runner.run("user-1", "approval-session", "Delete the obsolete deployment.")
        if not isinstance(result, runs.Paused):
            print(f"model completed without pausing: {result}")
            return 1
        pause = result.event.actions.pause
        assert pause is not None
        print(f"approval requested: reason={pause.reason} function={pause.details['function_name']} "
              f"operation_id={pause.details['operation_id']}")

        approved = {"operation_id": pause.details["operation_id"], "status": "completed",
                    "approved": True, "approver": "operator@example.com"}
        answer = runner.resume("user-1", "approval-session", pause.continuation_id, approved)
        session = service.get_session(SessionRef(app_name="readme_app", user_id="user-1",
                                                 session_id="approval-session"))
        for event in session.events:  # the invocation from its user event to its final answer
            parts = [] if event.content is None else [p.type for p in event.content.parts]
            print(f"event: author={event.author} parts={','.join(parts) or '-'} final={event.is_final}")
        response = next(p.response for e in session.events if e.content is not None for p in e.content.parts
                        if isinstance(p, FunctionResponsePart))
        print(f"recorded response: approved={response['approved']} approver={response['approver']}")
        print(f"final answer: {answer}")
        try:
            runner.resume("user-1", "approval-session", pause.continuation_id, approved)
        except RunError as err:
            print(f"second resume: {err.reason}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
