"""Helpers for runtime tests: start probe children under the sandbox and wait for process exits."""

from __future__ import annotations

import os
import select
import time
import uuid
from typing import Any

from adk_actors.runtime.messages import StartChild, TerminateChild
from adk_actors.runtime.supervisor import ChildSpec, SupervisorSpec
from adk_actors.runtime.system import ActorSystemHandle

PROBE = "adk_actors.testing.actors.Probe"
SUPERVISOR = "adk_actors.runtime.supervisor.Supervisor"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def start_child(system: ActorSystemHandle, spec: ChildSpec, under: str = "sandbox") -> Any:
    """Start ``spec`` under the supervisor registered as ``under``; returns the child's address."""
    return system.ask(under, StartChild(spec=spec), timeout=15)


def stop_child(system: ActorSystemHandle, child_id: str, under: str = "sandbox") -> None:
    system.ask(under, TerminateChild(child_id=child_id), timeout=15)


def start_supervisor(
    system: ActorSystemHandle, spec: SupervisorSpec, name: str | None = None, restart: str = "permanent"
) -> tuple[str, Any]:
    sid = name or unique("sup")
    address = start_child(
        system,
        ChildSpec(
            id=sid,
            actor=SUPERVISOR,
            args=spec,
            kind="supervisor",
            register_as=sid,
            restart=restart,
            shutdown="infinity",
        ),
    )  # type: ignore[arg-type]
    return sid, address


def wait_exit(pid: int, timeout: float) -> bool:
    """Block on a pidfd until ``pid`` exits; True when it did within ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def child_entry(status: dict[str, Any], child_id: str) -> dict[str, Any]:
    for child in status["children"]:
        if child["id"] == child_id:
            return dict(child)
    raise KeyError(child_id)


def wait_status(system: ActorSystemHandle, target: Any, predicate: Any, timeout: float = 5.0) -> dict[str, Any]:
    """Ask ``target`` for its status until ``predicate(status)`` holds (each ask is a real round trip)."""
    from adk_actors.runtime.messages import GetStatus

    deadline = time.monotonic() + timeout
    while True:
        status = system.ask(target, GetStatus(), timeout=5)
        if predicate(status):
            return dict(status)
        if time.monotonic() > deadline:
            raise AssertionError(f"status condition not met within {timeout}s: {status}")


def mismatched_replies(system: ActorSystemHandle, target: Any, threads: int = 8, per_thread: int = 50) -> list[str]:
    """Ask ``target`` to echo a distinct token ``per_thread`` times from each of ``threads`` threads; the replies
    that came back for another ask (empty when every reply matched its request)."""
    import threading

    from adk_actors.testing.actors import Echo

    errors: list[str] = []

    def worker(t: int) -> None:
        for i in range(per_thread):
            got = system.ask(target, Echo(value=[t, i]), timeout=30)
            if got != [t, i]:
                errors.append(f"{[t, i]} -> {got}")

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return errors


def socket_inodes(pids: list[int]) -> set[int]:
    """Inodes of the sockets the processes ``pids`` hold open (a process that exited meanwhile holds none)."""
    inodes: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # exited meanwhile
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes
