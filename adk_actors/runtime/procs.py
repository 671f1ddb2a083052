"""Process-table helpers shared by the runtime (liveness that treats zombies as dead, process groups)."""

from __future__ import annotations

import os

__all__ = ["group_pids", "pid_alive"]


def _state(pid: int) -> tuple[bytes, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped by its supervisor) counts as dead."""
    state = _state(pid)
    return state is not None and state[0] not in (b"Z", b"X")


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            state = _state(int(entry))
            if state is not None and state[1] == pgid and state[0] not in (b"Z", b"X"):
                found.append(int(entry))
    return found
