"""The reference's "Admission control and runtime policy": node-wide run limits and a fail-closed policy.

Node limits are settings (``global_limit``, ``default_agent_limit``, ``agent_limits``, ``overflow``, ``max_queue``,
``default_queue_timeout``; see ``docs/CONFIGURATION.md``), given here to ``load_settings``; a Runner opts in
with ``admission_control``. With ``BatchAgent`` limited to one run at a time, a second run is refused at once
(``reject``: ``PolicyDenied("busy")``) or waits in the bounded queue until a permit is released or its deadline
passes (``admission_timeout``).

A ``runtime_policy`` allows nothing it does not name and ``deny`` always wins. A denied tool becomes a failed
function response (the model goes on); a denied agent fails the call. Every denial appends an immutable
``system`` audit event to the session — ids, policy, operation, subject and reason, never arguments or content.

Run: ``.venv/bin/python samples/runner_admission.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors import runs
from adk_actors.emulator import Emulator
from adk_actors.errors import PolicyDenied
from adk_actors.sessions import BaseSessionService, SessionRef
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"user_text_contains": "nightly report"}, "respond": {"text": "The nightly report is ready.",
                                                                   "delay_ms": 1500}},
    {"when": {"user_text_contains": "delete", "has_function_response": False},
     "respond": {"function_calls": [{"name": "delete_deployment", "args": {"name": "legacy-web"}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "The {name} tool returned: {response_text}."}},
    {"when": {}, "respond": {"text": "You said: {user_text}"}},
]}


def delete_deployment(name: str) -> dict:
    """Delete a deployment (the runtime policy below never lets this run).

    Args:
        name: The deployment to delete.
    """
    return {"deleted": name}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data,
                                 global_limit=8, default_agent_limit=4, agent_limits={"BatchAgent": 1},
                                 overflow="reject", max_queue=16, default_queue_timeout=2000)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        sessions = adk.session_service(settings)
        batch = adk.spawn_agent("BatchAgent", config)
        rejecting = adk.Runner(batch, "admission_app", sessions, admission_control={"overflow": "reject"})
        queueing = adk.Runner(batch, "admission_app", sessions,
                              admission_control={"overflow": "queue", "queue_timeout": 5000})
        impatient = adk.Runner(batch, "admission_app", sessions,
                               admission_control={"overflow": "queue", "queue_timeout": 200})

        slow = _start_admitted(rejecting, "report-1")
        try:
            rejecting.run("user-1", "question-1", "A quick question.")
        except PolicyDenied as err:
            print(f"reject while BatchAgent is busy: {err.reason}")
        print(f"queued, then admitted: {queueing.run('user-1', 'question-2', 'A queued question.')}")
        print(f"first run: {runs.wait(slow, 30)}")

        slow = _start_admitted(rejecting, "report-2")
        try:
            impatient.run("user-1", "question-3", "An impatient question.")
        except PolicyDenied as err:
            print(f"queue deadline passed: {err.reason}")
        runs.wait(slow, 30)

        ops = adk.spawn_agent("OpsAgent", config, [FunctionTool(delete_deployment)])
        policy = {"id": "ops-policy", "agents": {"allow": ["OpsAgent"]},
                  "tools": {"allow": "all", "deny": ["delete_deployment"]}}
        guarded = adk.Runner(ops, "admission_app", sessions, runtime_policy=policy)
        print(f"tool denied, model goes on: {guarded.run('user-1', 'ops-1', 'Please delete the legacy deployment.')}")
        _print_audit(sessions, "ops-1")

        locked = adk.Runner(ops, "admission_app", sessions,
                            runtime_policy={"id": "batch-only", "agents": {"allow": ["BatchAgent"]}})
        try:
            locked.run("user-1", "ops-2", "Hello")
        except PolicyDenied as err:
            print(f"agent denied: {err.reason}")
        _print_audit(sessions, "ops-2")
        adk.stop_agent(ops)
        adk.stop_agent(batch)
    return 0


def _start_admitted(runner: adk.Runner, session_id: str) -> str:
    """Start a slow run and return once it holds its permit (its user event is stored only after admission)."""
    run_id = runs.start(runner, "user-1", session_id, "Write the nightly report.")
    for _item in runs.subscribe(run_id, idle_timeout=30):
        break
    return run_id


def _print_audit(sessions: BaseSessionService, session_id: str) -> None:
    session = sessions.get_session(SessionRef(app_name="admission_app", user_id="user-1", session_id=session_id))
    for event in session.events:
        decision = event.actions.runtime_policy_decision
        if event.author == "system" and decision is not None:
            print(f"audit event: policy={decision['policy_id']} operation={decision['operation']} "
                  f"subject={decision['subject']} outcome={decision['outcome']} reason={decision['reason']}")


if __name__ == "__main__":
    raise SystemExit(main())
