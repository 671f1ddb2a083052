"""Detached reaper: ``python -m adk_actors.runtime.reaper PGID`` ends every process of an actor system.

Started by the root (in its own session, so it is not in the group it kills) when the owner of an owned
system dies: SIGTERM to the group, a short grace period, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from adk_actors.runtime.procs import group_pids


def _group_alive(pgid: int) -> bool:
    return bool(group_pids(pgid))


def reap(pgid: int, timeout: float = 5.0) -> None:
    """Freeze the whole group (SIGSTOP: no supervisor can restart anything), then SIGKILL it until it is empty."""
    deadline = time.monotonic() + timeout
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
    while _group_alive(pgid) and time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.02)


if __name__ == "__main__":
    reap(int(sys.argv[1]))
