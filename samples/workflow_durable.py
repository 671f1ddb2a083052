"""The reference's durable workflow invocation in Python: a graph approval recorded in a SQLite invocation ledger
pauses, the whole actor system stops, and a new system — with the workflow reconstructed from application code —
resumes the invocation by its stable id.

Run: ``.venv/bin/python samples/workflow_durable.py``
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import adk_actors as adk
from adk_actors.errors import WorkflowError
from adk_actors.testing import reserved_port
from adk_actors.workflows import (
    CompiledWorkflow,
    Completed,
    Ok,
    Pause,
    Paused,
    SqlInvocationLedger,
    compile_workflow,
    delete_workflow_invocation,
    resume_workflow_invocation,
    start_workflow_invocation,
    wait_workflow,
    workflow_invocation_status,
)

INVOCATION_ID = "readme-approval-42"


def approval_workflow() -> CompiledWorkflow:
    """The workflow is application code: every system that runs the invocation compiles the same id, version and
    kind."""
    def route(state: dict[str, Any], context: dict[str, Any]) -> str:
        assert context["input"]["approved"] is True
        return "accepted"

    return compile_workflow({
        "version": 1, "id": "readme-graph-approval-v1", "kind": "graph",
        "entry": "approval", "max_steps": 3,
        "nodes": [
            {"id": "approval",
             "run": lambda state: Pause("human_approval", "Approve this action", {"approval_requested": True})},
            {"id": "accepted", "run": lambda state: Ok({"accepted": True})},
        ],
        "edges": {"approval": {"route": route}, "accepted": "end_node"},
    })


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    ledger = SqlInvocationLedger(f"sqlite:///{os.path.join(data, 'workflows.db')}")

    # The first system starts the invocation; it pauses for approval and the system stops.
    with adk.open_actor_system(adk.load_settings(admin_port=reserved_port(), data_dir=data)):
        invocation_id, ref = start_workflow_invocation(
            approval_workflow(), {}, ledger=ledger, invocation_id=INVOCATION_ID, lease_ms=30_000,
            timeout_ms=120_000)
        paused = wait_workflow(ref, 30)
        assert isinstance(paused, Paused), paused
        print(f"first system: {type(paused).__name__} details={paused.details}")
        status = workflow_invocation_status(invocation_id, ledger=ledger)
        print(f"ledger: phase={status['phase']} owned={status['owned']} checkpoint_seq={status['checkpoint_seq']}")

    # A new system (think: after a restart) reconstructs the workflow and resumes the invocation by its id.
    with adk.open_actor_system(adk.load_settings(admin_port=reserved_port(), data_dir=data)):
        resumed = resume_workflow_invocation(INVOCATION_ID, approval_workflow(), ledger=ledger,
                                             resume_input={"approved": True}, lease_ms=30_000,
                                             timeout_ms=120_000)
        completed = wait_workflow(resumed, 30)
        assert isinstance(completed, Completed), completed
        print(f"second system: {type(completed).__name__} state={completed.state}")
        status = workflow_invocation_status(INVOCATION_ID, ledger=ledger)
        print(f"ledger: phase={status['phase']} owned={status['owned']} result={status['result']}")

    print(f"deleted: {delete_workflow_invocation(INVOCATION_ID, ledger=ledger)}")
    try:
        workflow_invocation_status(INVOCATION_ID, ledger=ledger)
    except WorkflowError as err:
        print(f"after delete: {err.reason}")
    ledger.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
