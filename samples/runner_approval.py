"""The reference's "Human approval pause/resume": a release tool whose gate depends on its arguments.

``publish_release`` needs an operator's confirmation for a real production release, but a dry run goes through.
The gated call pauses a supervised run with a ``tool_confirmation`` pause (its ``action_id`` is a digest, never
the raw arguments); ``runs.resume`` with ``{"confirmed": True}`` executes the tool exactly once, and
``{"confirmed": False}`` executes nothing and tells the model the call was rejected.

Run: ``.venv/bin/python samples/runner_approval.py``
"""

from __future__ import annotations

import tempfile
from typing import Any

import adk_actors as adk
from adk_actors import runs
from adk_actors.emulator import Emulator
from adk_actors.errors import ValidationError
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"user_text_contains": "dry run", "has_function_response": False},
     "respond": {"function_calls": [{"name": "publish_release", "args": {"environment": "production",
                                                                          "dry_run": True}}]}},
    {"when": {"user_text_contains": "publish", "has_function_response": False},
     "respond": {"function_calls": [{"name": "publish_release", "args": {"environment": "production",
                                                                          "dry_run": False}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "Release result: {response_text}."}},
]}


def publish_release(environment: str, dry_run: bool) -> dict:
    """Publish the prepared release.

    Args:
        environment: Where to publish ("staging" or "production").
        dry_run: Only check the release, publish nothing.
    """
    return {"environment": environment, "status": "checked" if dry_run else "published"}


def release_gate(args: dict[str, Any], context: Any) -> Any:
    """A real production release needs a human; a dry run or another environment does not."""
    if args["environment"] == "production" and not args["dry_run"]:
        return {"required": True, "hint": "Publish production"}
    return False


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "model": "gemini-3.1-flash-lite", "base_url": emu.base_url,
                  "api_key": "test-key",
                  "instructions": "Call publish_release once for production with dry_run=false. "
                                  "After its result, answer without calling it again."}
        agent = adk.spawn_agent("ReleaseAgent", config,
                                [FunctionTool(publish_release, requires_confirmation=release_gate)])
        runner = adk.Runner(agent, "readme_app", adk.session_service(settings))

        dry = runs.start(runner, "user-1", "dry-run-session", "Do a dry run of the production release.")
        print(f"dry run: {runs.wait(dry, 30)}")

        release = runs.start(runner, "user-1", "release-session", "Publish the prepared production release.")
        outcome = runs.wait(release, 30)
        if isinstance(outcome, runs.Paused):
            pause = outcome.event.actions.pause
            details = pause.details
            print(f"paused: type={details['type']} function={details['function_name']} hint={details['hint']} "
                  f"opaque action id={details['action_id'].startswith('act_')}")
            try:  # only exactly {"confirmed": bool} answers a confirmation; a wrong shape consumes nothing
                runner.resume("user-1", "release-session", pause.continuation_id, {"approved": "yes"})
            except ValidationError as err:
                print(f"invalid response: {err.reason}")
            approved = runs.resume(release, {"confirmed": True})
            print(f"approved: {runs.wait(approved, 30)}")
        else:
            print(f"model completed without using the tool: {outcome}")

        rejected_release = runs.start(runner, "user-1", "rejected-session", "Publish the prepared production release.")
        if isinstance(runs.wait(rejected_release, 30), runs.Paused):
            rejected = runs.resume(rejected_release, {"confirmed": False})
            print(f"rejected: {runs.wait(rejected, 30)}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
