"""Detached reaper: ``python -m adk_actors.runtime.reaper PGID`` ends every process of an actor system.

Started by the root (in its own session, so it is not in the group it kills) when the owner of an owned
system dies: SIGTERM to the group, a short grace period, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def reap(pgid: int, grace: float = 1.5) -> None:
    """SIGTERM the group, wait up to ``grace`` seconds, then SIGKILL whatever is left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    reap(int(sys.argv[1]))
