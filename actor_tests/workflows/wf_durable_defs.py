"""Workflows of the durable-invocation tests, rebuilt by importable builders (as an application would after a
restart), a clock shared through a file, and an entry point that resumes an invocation from a new process::

    python -m actor_tests.workflows.wf_durable_defs resume PORT HOSTS LEDGER_URL INVOCATION_ID

Every action is a module-level function, so a compiled workflow pickles by name and a fresh process rebuilds the
same fingerprint. Actions find their signal FIFOs and counters under ``state["lab"]`` (a test's temp dir), which
the durable input carries across restarts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from actor_tests.workflows.wf_signals import hold, post
from adk_actors.testing import CrossProcessCounter
from adk_actors.workflows import ActionFailed, CompiledWorkflow, Ok, Output, Pause, compile_workflow

CHANNEL = "signals.fifo"
"""The FIFO (under the lab dir) actions post to."""
EFFECT_GATE = "effect.gate"
"""The gate (under the lab dir) the first call of ``effect`` waits at."""


def counter(lab: str | Path, name: str) -> CrossProcessCounter:
    """The call counter of step ``name`` under ``lab``."""
    return CrossProcessCounter(Path(lab) / f"{name}.count")


# ---- the README's approval graph -------------------------------------------------------------------------------


def ask_approval(state: dict[str, Any]) -> Any:
    return Pause("human_approval", "Approve this action", {"approval_requested": True})


def route_approval(state: dict[str, Any], context: dict[str, Any]) -> str:
    return "accepted" if context["input"]["approved"] is True else "end_node"


def accept(state: dict[str, Any]) -> Any:
    return Ok({"accepted": True})


def build_approval() -> CompiledWorkflow:
    """``readme-graph-approval-v1``: pause for approval, then accept."""
    return compile_workflow(
        {
            "version": 1,
            "id": "readme-graph-approval-v1",
            "kind": "graph",
            "entry": "approval",
            "max_steps": 3,
            "nodes": [{"id": "approval", "run": ask_approval}, {"id": "accepted", "run": accept}],
            "edges": {"approval": {"route": route_approval}, "accepted": "end_node"},
        }
    )


# ---- prepare -> effect -> finish ---------------------------------------------------------------------------------


def prepare(state: dict[str, Any]) -> Any:
    counter(state["lab"], "prepare").incr()
    return Output("prepared", {"prepared": True})


def effect(state: dict[str, Any], context: dict[str, Any]) -> Any:
    """The side effect: its first call waits at the gate (the coordinator dies or loses its lease meanwhile)."""
    lab = state["lab"]
    call = counter(lab, "effect").incr()
    channel = str(Path(lab) / CHANNEL)
    if call == 1:
        hold(str(Path(lab) / EFFECT_GATE), channel, step="effect", call=call, step_id=context["step_id"])
    else:
        post(channel, event="ran", step="effect", call=call, step_id=context["step_id"])
    return Output(f"effect-{call}", {"effect_calls": call})


def finish(state: dict[str, Any]) -> Any:
    counter(state["lab"], "finish").incr()
    return Output("finished", {"finished": True})


def build_guarded() -> CompiledWorkflow:
    """``durable-guarded-v1``: ``prepare`` -> ``effect`` -> ``finish``; input ``{"lab": dir}``."""
    return compile_workflow(
        {
            "version": 1,
            "id": "durable-guarded-v1",
            "kind": "sequential",
            "input_schema": {"type": "object", "required": ["lab"]},
            "steps": [
                {"id": "prepare", "run": prepare},
                {"id": "effect", "run": effect},
                {"id": "finish", "run": finish},
            ],
        }
    )


# ---- instant branches: the outcome is reached while the previous checkpoint write may be in flight ----------


def left(state: dict[str, Any]) -> Any:
    return Output("left-output", {"left": 1})


def right(state: dict[str, Any]) -> Any:
    return Output("right-output", {"right": 2})


def refuse(state: dict[str, Any]) -> Any:
    return ActionFailed("branch_refused", {"branch": "refuse"})


def ask(state: dict[str, Any]) -> Any:
    return Pause("human_approval", "Approve?", {"asked": True})


def join_outputs(state: dict[str, Any], context: dict[str, Any]) -> Any:
    return Output(context["input"], {"joined": True})


def build_instant_parallel() -> CompiledWorkflow:
    """``durable-parallel-v1``: two instant branches."""
    return compile_workflow(
        {
            "version": 1,
            "id": "durable-parallel-v1",
            "kind": "parallel",
            "max_concurrency": 2,
            "branches": [{"id": "left", "run": left}, {"id": "right", "run": right}],
        }
    )


def build_instant_fork(second: str) -> CompiledWorkflow:
    """``durable-fork-<second>-v1``: a graph fork of ``left`` and ``second`` (``right``, ``refuse`` or ``ask``)
    joined by ``join``."""
    runs = {"right": right, "refuse": refuse, "ask": ask}
    return compile_workflow(
        {
            "version": 1,
            "id": f"durable-fork-{second}-v1",
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["left", second], "join": "join", "max_concurrency": 2},
                {"id": "left", "run": left},
                {"id": second, "run": runs[second]},
                {"id": "join", "type": "join", "run": join_outputs},
            ],
            "edges": {"join": "end_node"},
        }
    )


# ---- steps that signal the test: under state["lab"], named by their node ---------------------------------------


def gated_step(state: dict[str, Any], context: dict[str, Any]) -> Any:
    """Count the call, wait at the gate ``<node>.gate`` (posting ``waiting``), then output the node's name."""
    lab, node = state["lab"], context["node"]
    call = counter(lab, node).incr()
    if not hold(
        str(Path(lab) / f"{node}.gate"), str(Path(lab) / CHANNEL), step=node, call=call, attempt=context["attempt"]
    ):
        return ActionFailed("gate_not_opened")
    return Output(node, {node: True})


def counted_step(state: dict[str, Any], context: dict[str, Any]) -> Any:
    """Count the call and output the node's name at once."""
    counter(state["lab"], context["node"]).incr()
    return Output(context["node"], {context["node"]: True})


def build_gated(workflow_id: str, *steps: str) -> CompiledWorkflow:
    """A sequential workflow whose steps are ``gated_step`` (the first) and ``counted_step`` (the rest)."""
    return compile_workflow(
        {
            "version": 1,
            "id": workflow_id,
            "kind": "sequential",
            "input_schema": {"type": "object", "required": ["lab"]},
            "steps": [{"id": step, "run": gated_step if i == 0 else counted_step} for i, step in enumerate(steps)],
        }
    )


# ---- a ledger clock every process reads ------------------------------------------------------------------------


class FileClock:
    """An injected ledger clock (epoch ms) kept in a file, so the test moves it for every process at once."""

    def __init__(self, path: str | Path, now: int = 1_700_000_000_000) -> None:
        self.path = str(path)
        if not os.path.exists(self.path):
            self.set(now)

    def __call__(self) -> int:
        return int(Path(self.path).read_text())

    def set(self, now: int) -> None:
        tmp = f"{self.path}.tmp"
        Path(tmp).write_text(str(now))
        os.replace(tmp, self.path)  # readers never see a half-written number


# ---- resume from a new process -----------------------------------------------------------------------------------


def _resume(port: int, hosts: int, url: str, invocation_id: str) -> dict[str, Any]:
    from adk_actors.runtime.system import attach
    from adk_actors.settings import Settings
    from adk_actors.workflows import SqlInvocationLedger, resume_workflow_invocation, wait_workflow

    handle = attach(port, Settings(hosts=hosts), make_default=False)
    ledger = SqlInvocationLedger(url)
    try:
        ref = resume_workflow_invocation(
            invocation_id, build_approval(), ledger=ledger, resume_input={"approved": True}, system=handle
        )
        outcome = wait_workflow(ref, 30, system=handle)
        return {
            "pid": os.getpid(),
            "ref": ref.ref_id,
            "outcome": type(outcome).__name__,
            "state": getattr(outcome, "state", None),
        }
    finally:
        ledger.close()
        handle.detach()


if __name__ == "__main__":
    command, port, hosts, url, invocation_id = sys.argv[1:]
    assert command == "resume", command
    print(json.dumps(_resume(int(port), int(hosts), url, invocation_id)), flush=True)
