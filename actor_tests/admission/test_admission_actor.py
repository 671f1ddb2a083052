"""The admission controller actor: permits over the facade, queue deadlines, owners monitored by pidfd."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import adk_actors
from adk_actors.admission.logic import Permit
from adk_actors.admission.messages import Acquire, Release
from adk_actors.errors import PolicyDenied
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port


@pytest.fixture(scope="module")
def node(tmp_module_dir: Path) -> Iterator[ActorSystemHandle]:
    data = tmp_module_dir
    handle = adk_actors.start(
        Settings(
            admin_port=reserved_port(),
            data_dir=str(data),
            global_limit=3,
            default_agent_limit=2,
            agent_limits={"Batch": 1},
            overflow="reject",
            max_queue=4,
            default_queue_timeout=30000,
        )
    )
    try:
        yield handle
    finally:
        handle.stop()


def _status(node: ActorSystemHandle) -> dict:
    return node.ask("admission", GetStatus())


def _release_all(node: ActorSystemHandle, permits: list[Permit]) -> None:
    for p in permits:
        node.cast("admission", Release(permit_id=p.permit_id))
    deadline = time.monotonic() + 5
    while _status(node)["in_use"]:
        assert time.monotonic() < deadline


def test_limits_from_settings_reject_when_full(node: ActorSystemHandle) -> None:
    me = os.getpid()
    permits = [node.ask("admission", Acquire(agent="A", owner_pid=me)) for _ in range(2)]
    with pytest.raises(PolicyDenied) as info:
        node.ask("admission", Acquire(agent="A", owner_pid=me))
    assert info.value.reason == "busy"
    permits.append(node.ask("admission", Acquire(agent="Batch", owner_pid=me)))
    with pytest.raises(PolicyDenied):
        node.ask("admission", Acquire(agent="Other", owner_pid=me))  # global limit 3
    assert _status(node)["in_use"] == 3
    _release_all(node, permits)


def test_a_queued_request_is_granted_on_release_or_fails_at_its_deadline(node: ActorSystemHandle) -> None:
    me = os.getpid()
    held = [node.ask("admission", Acquire(agent="Q", owner_pid=me)) for _ in range(2)]
    t0 = time.monotonic()
    with pytest.raises(PolicyDenied) as info:
        node.ask("admission", Acquire(agent="Q", owner_pid=me, overflow="queue", queue_timeout_ms=200))
    assert info.value.reason == "admission_timeout" and 0.18 < time.monotonic() - t0 < 2
    got: list[object] = []
    waiter = threading.Thread(
        target=lambda: got.append(
            node.ask("admission", Acquire(agent="Q", owner_pid=me, overflow="queue", queue_timeout_ms=10000))
        )
    )
    waiter.start()
    deadline = time.monotonic() + 5
    while _status(node)["queued"] != 1:
        assert time.monotonic() < deadline
    node.cast("admission", Release(permit_id=held[0].permit_id))
    waiter.join(5)
    assert isinstance(got[0], Permit)
    _release_all(node, [held[1], got[0]])  # type: ignore[list-item]


def test_permits_of_a_sigkilled_owner_are_released_and_exactly_limit_new_ones_admitted(
    node: ActorSystemHandle, tmp_path: Path
) -> None:
    script = (
        f"import os, sys, time\n"
        f"from adk_actors.runtime.system import attach\n"
        f"from adk_actors.settings import Settings\n"
        f"from adk_actors.admission.messages import Acquire\n"
        f"h = attach({node.port}, Settings(), make_default=False)\n"
        f"for _ in range(2): h.ask('admission', Acquire(agent='Crash', owner_pid=os.getpid()))\n"
        f"print('held', flush=True)\n"
        f"time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        assert _status(node)["per_agent"] == {"Crash": 2}
        with pytest.raises(PolicyDenied):
            node.ask("admission", Acquire(agent="Crash", owner_pid=os.getpid()))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 5
        while _status(node)["in_use"]:
            assert time.monotonic() < deadline, "the dead owner's permits were not released"
        assert _status(node)["released_by_owner_exit"] >= 2
        fresh = [node.ask("admission", Acquire(agent="Crash", owner_pid=os.getpid())) for _ in range(2)]
        with pytest.raises(PolicyDenied):
            node.ask("admission", Acquire(agent="Crash", owner_pid=os.getpid()))
        _release_all(node, fresh)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
