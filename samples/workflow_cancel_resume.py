"""The reference's cancel/resume example in Python: a step blocks in its worker until the sample releases it; the
sample reads the running workflow's status and checkpoint, cancels it (the worker is killed), and resumes the
checkpoint in a new coordinator — where a second worker runs the step again and is released.

The worker and the sample talk over two FIFOs in a temporary directory: ``waiting`` (the worker announces its pid)
and ``release`` (the sample lets it finish). Nothing sleeps to wait for a condition; every wait has a timeout.

Run: ``.venv/bin/python samples/workflow_cancel_resume.py``
"""

from __future__ import annotations

import os
import select
import tempfile
from typing import Any

import adk_actors as adk
from adk_actors.testing import CrossProcessCounter, reserved_port
from adk_actors.workflows import (
    Cancelled,
    Completed,
    Ok,
    cancel_workflow,
    compile_workflow,
    resume_workflow,
    start_workflow,
    wait_workflow,
    workflow_checkpoint,
    workflow_status,
)

WAIT_S = 10.0
"""Bound on every wait of the sample (a failure then shows as an error, never as a hang)."""


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    waiting, release = os.path.join(data, "waiting"), os.path.join(data, "release")
    os.mkfifo(waiting)
    os.mkfifo(release)
    prepared = CrossProcessCounter(os.path.join(data, "prepared"))

    def prepare(state: dict[str, Any]) -> Ok:
        prepared.incr()
        return Ok({"prepared": True})

    def wait_for_release(state: dict[str, Any], context: dict[str, Any]) -> Ok:
        # Open the release FIFO before announcing, so the sample's write always finds a reader.
        fd = os.open(release, os.O_RDONLY | os.O_NONBLOCK)
        with open(waiting, "w") as announce:
            announce.write(f"{os.getpid()} {context['step_id']}\n")
        select.select([fd], [], [])                      # the step's timeout bounds this wait
        assert os.read(fd, 64) == b"continue"
        return Ok({"released": True})

    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with adk.open_actor_system(settings):
        spec = {
            "version": 1,
            "id": "readme-resume-v1",
            "kind": "sequential",
            "max_steps": 3,
            "steps": [
                {"id": "prepare", "run": prepare},
                {"id": "wait", "run": wait_for_release, "timeout": 10_000},
            ],
        }
        workflow = compile_workflow(spec)
        ref = start_workflow(workflow, {})
        first_worker, first_step_id = next_worker(waiting)

        status = workflow_status(ref)
        print(f"status: state={status['state']} in_flight={status['in_flight']}")
        checkpoint = workflow_checkpoint(ref)
        print(f"checkpoint: seq={checkpoint['seq']} state={checkpoint['state']} "
              f"committed={list(checkpoint['visits'])} steps_left={checkpoint['budgets']['steps']}")

        cancel_workflow(ref, "revise_later")
        cancelled = wait_workflow(ref, WAIT_S)
        assert isinstance(cancelled, Cancelled), cancelled
        print(f"cancelled: reason={cancelled.reason} same_checkpoint={cancelled.checkpoint == checkpoint}")
        print(f"first worker killed: {exited(first_worker)}")

        resumed = resume_workflow(workflow, cancelled.checkpoint)
        second_worker, second_step_id = next_worker(waiting)
        print(f"second worker is a new process: {second_worker != first_worker}")
        print(f"same idempotency key: {first_step_id} == {second_step_id}")
        fd = os.open(release, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"continue")
        os.close(fd)
        completed = wait_workflow(resumed, WAIT_S)
        assert isinstance(completed, Completed), completed
        print(f"resumed: {type(completed).__name__} state={completed.state} "
              f"steps_used={completed.checkpoint['used']['steps']}")
        print(f"prepare ran {prepared.value} time(s)")
    return 0


def next_worker(waiting: str) -> tuple[int, str]:
    """Wait (bounded) for a worker to announce itself on the ``waiting`` FIFO; return its pid and step id."""
    fd = os.open(waiting, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = b""
        while not data.endswith(b"\n"):
            readable, _, _ = select.select([fd], [], [], WAIT_S)
            if not readable:
                raise TimeoutError("no worker reached the wait step")
            chunk = os.read(fd, 64)
            if not chunk:
                raise EOFError("the worker closed the FIFO without announcing itself")
            data += chunk
        pid, step_id = data.decode().split()
        return int(pid), step_id
    finally:
        os.close(fd)


def exited(pid: int) -> bool:
    """Wait (bounded) for a process to exit, like the reference's monitor ``'DOWN'``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], WAIT_S)
        return bool(readable)
    finally:
        os.close(fd)


if __name__ == "__main__":
    raise SystemExit(main())
