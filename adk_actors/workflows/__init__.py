"""Supervised declarative workflows (``adk_workflow`` in the reference), the durable invocation ledger, and the
legacy graph builder.

::

    from adk_actors.workflows import Output, compile_workflow, run_workflow

    wf = compile_workflow({"version": 1, "id": "count-v1", "kind": "sequential",
                           "steps": [{"id": "one", "run": lambda state: Output("done", {"n": 1})}]})
    run_workflow(wf, {})          # -> Completed(state={"n": 1}, checkpoint={... "output": "done"})

See ``docs/WORKFLOWS.md``.
"""

from adk_actors.workflows.api import (
    WorkflowRef,
    cancel_workflow,
    compile_workflow,
    delete_workflow_invocation,
    resume_workflow,
    resume_workflow_invocation,
    run_workflow,
    start_workflow,
    start_workflow_invocation,
    wait_workflow,
    workflow_checkpoint,
    workflow_invocation_status,
    workflow_status,
)
from adk_actors.workflows.engine import Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.workflows.graph import END, CompiledGraph, Graph, agent_node, function_node, tool_node
from adk_actors.workflows.ledger import SqlInvocationLedger
from adk_actors.workflows.results import ActionFailed, Complete, Ok, Output, Pause, Route, Stop, Transfer
from adk_actors.workflows.spec import CompiledWorkflow

__all__ = [
    "END",
    "ActionFailed",
    "Cancelled",
    "CompiledGraph",
    "CompiledWorkflow",
    "Complete",
    "Completed",
    "Failed",
    "Graph",
    "Ok",
    "Outcome",
    "Output",
    "Pause",
    "Paused",
    "Route",
    "SqlInvocationLedger",
    "Stop",
    "Transfer",
    "WorkflowRef",
    "agent_node",
    "cancel_workflow",
    "compile_workflow",
    "delete_workflow_invocation",
    "function_node",
    "resume_workflow",
    "resume_workflow_invocation",
    "run_workflow",
    "start_workflow",
    "start_workflow_invocation",
    "tool_node",
    "wait_workflow",
    "workflow_checkpoint",
    "workflow_invocation_status",
    "workflow_status",
]
