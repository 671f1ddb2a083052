"""The reference's graph-native nodes in Python: a fork/join that merges branch deltas in declared order, a
human-approval pause resumed with ``resume_input`` (the paused node is not run again), the other typed nodes —
``branch``, ``tool``, nested ``workflow`` and ``loop`` — in one routed graph, and an ``agent`` node that prompts a
registered agent (against the local Gemini emulator) and decides on its reply.

Run: ``.venv/bin/python samples/workflow_fork_approval.py``
"""

from __future__ import annotations

import tempfile
from typing import Any

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool
from adk_actors.workflows import (
    Completed,
    Ok,
    Output,
    Pause,
    Paused,
    Stop,
    compile_workflow,
    resume_workflow,
    run_workflow,
    wait_workflow,
)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator() as emu, adk.open_actor_system(settings):
        fork_join()
        approval()
        typed_nodes()
        agent_node(emu.base_url)
    return 0


def fork_join() -> None:
    def join(state: dict[str, Any], context: dict[str, Any]) -> Output:
        outputs = context["input"]                       # the branches' outputs, keyed by branch id
        assert outputs == {"left": "left-output", "right": "right-output"}
        return Output(outputs, {"joined": True})

    spec = {
        "version": 1, "id": "readme-fork-join-v1", "kind": "graph",
        "entry": "fork", "max_steps": 6,
        "nodes": [
            {"id": "fork", "type": "fork", "branches": ["left", "right"], "join": "join",
             "merge": "reject_conflicts", "max_concurrency": 2},
            {"id": "left", "run": lambda state: Output("left-output", {"left": 1})},
            {"id": "right", "run": lambda state: Output("right-output", {"right": 2})},
            {"id": "join", "type": "join", "run": join},
        ],
        "edges": {"left": "join", "right": "join", "join": "end_node"},
    }
    outcome = run_workflow(compile_workflow(spec))
    assert isinstance(outcome, Completed), outcome
    print(f"fork/join: state={outcome.state} output={outcome.output}")


def approval() -> None:
    def route(state: dict[str, Any], context: dict[str, Any]) -> str:
        return "accepted" if context["input"]["approved"] else "end_node"   # the resume input

    spec = {
        "version": 1, "id": "readme-graph-approval-v1", "kind": "graph",
        "entry": "approval", "max_steps": 3,
        "nodes": [
            {"id": "approval",
             "run": lambda state: Pause("human_approval", "Approve this action", {"approval_requested": True})},
            {"id": "accepted", "run": lambda state: Ok({"accepted": True})},
        ],
        "edges": {"approval": {"route": route}, "accepted": "end_node"},
    }
    workflow = compile_workflow(spec)
    paused = run_workflow(workflow)
    assert isinstance(paused, Paused), paused
    print(f"approval: {type(paused).__name__} details={paused.details} state={paused.state}")

    ref = resume_workflow(workflow, paused.checkpoint, resume_input={"approved": True})
    approved = wait_workflow(ref, 30)
    assert isinstance(approved, Completed), approved
    print(f"approval: approved -> {type(approved).__name__} state={approved.state} "
          f"steps={approved.checkpoint['used']['steps']}")

    # A checkpoint is a plain value: the same pause can be answered differently.
    rejected = wait_workflow(resume_workflow(workflow, paused.checkpoint, resume_input={"approved": False}), 30)
    assert isinstance(rejected, Completed), rejected
    print(f"approval: rejected -> {type(rejected).__name__} state={rejected.state}")


# A plain ``dict`` return annotation: the worker rebuilds the tool from this function, carried by value, and
# postponed annotations can only name globals its body uses.
def quote(size: int) -> dict:
    """Quote a small order.

    Args:
        size: How many items.
    """
    return {"price": size * 2}


def typed_nodes() -> None:
    review = compile_workflow({
        "version": 1, "id": "readme-review-v1", "kind": "sequential",
        "steps": [{"id": "review", "run": lambda state: Output({"price": state["size"] * 3}, {"reviewed": True})}],
    })

    def settle(state: dict[str, Any], context: dict[str, Any]) -> Output:
        paid = state.get("paid", 0) + 10                 # the input: the quote, then the last output
        return Output(context["input"], {"paid": paid})

    spec = {
        "version": 1, "id": "readme-typed-nodes-v1", "kind": "graph", "entry": "classify",
        "nodes": [
            {"id": "classify", "type": "branch", "targets": ["small", "large"],
             "select": lambda state: "small" if state["size"] < 10 else "large"},
            {"id": "small", "type": "tool",
             "tool": {"tool": FunctionTool(quote), "args": lambda state: {"size": state["size"]}}},
            {"id": "large", "type": "workflow", "workflow": review},
            {"id": "settle", "type": "loop", "body": settle, "max_iterations": 5,
             "done": lambda state, context: state["paid"] >= context["input"]["price"]},
        ],
        "edges": {"small": "settle", "large": "settle", "settle": "end_node"},
    }
    workflow = compile_workflow(spec)
    for size in (3, 12):
        outcome = run_workflow(workflow, {"size": size})
        assert isinstance(outcome, Completed), outcome
        print(f"typed nodes: size={size} path={sorted(outcome.checkpoint['visits'])} "
              f"state={outcome.state} output={outcome.output}")


def agent_node(base_url: str) -> None:
    reviewer = adk.spawn_agent("Reviewer", {"provider": "gemini", "base_url": base_url, "api_key": "test-key"})
    spec = {
        "version": 1, "id": "readme-agent-node-v1", "kind": "graph", "entry": "review",
        "nodes": [
            {"id": "review", "type": "agent", "timeout": 30_000,
             "agent": {"name": "Reviewer",                              # resolved when the node runs
                       "prompt": lambda state: f"Review {state['doc']}",
                       "decision": lambda state, context: Stop(context["output"], {"reviewed": True})}},
        ],
        "edges": {"review": "end_node"},
    }
    outcome = run_workflow(compile_workflow(spec), {"doc": "d-7"})
    assert isinstance(outcome, Completed), outcome
    print(f"agent node: state={outcome.state} output={outcome.output!r}")
    adk.stop_agent(reviewer)


if __name__ == "__main__":
    raise SystemExit(main())
