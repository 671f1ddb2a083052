"""Process-table helpers shared by the runtime (liveness that treats zombies as dead, process groups)."""

from __future__ import annotations

import os
import select
import threading
from collections import OrderedDict

__all__ = ["group_pids", "pid_alive", "pid_alive_fast"]

_PIDFDS_MAX = 512
_pidfds: OrderedDict[int, int] = OrderedDict()
_pidfds_lock = threading.Lock()


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


def pid_alive_fast(pid: int) -> bool:
    """:func:`pid_alive` for hot paths (every send by name checks its target): a pidfd kept per pid and polled,
    one syscall instead of opening ``/proc``. A pidfd becomes readable when its process exits, zombie included,
    and never names a later process that reuses the pid."""
    with _pidfds_lock:
        fd = _pidfds.get(pid)
        if fd is not None:
            _pidfds.move_to_end(pid)
    if fd is None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return False
        with _pidfds_lock:
            if pid in _pidfds:  # another thread opened one meanwhile
                os.close(fd)
                fd = _pidfds[pid]
            else:
                _pidfds[pid] = fd
                while len(_pidfds) > _PIDFDS_MAX:
                    os.close(_pidfds.popitem(last=False)[1])
    poller = select.poll()
    try:
        poller.register(fd, select.POLLIN)
        ready = poller.poll(0)
    except (OSError, ValueError):  # closed by an eviction in another thread: ask the slow way
        return pid_alive(pid)
    if ready:
        with _pidfds_lock:
            if _pidfds.get(pid) == fd:
                del _pidfds[pid]
                os.close(fd)
        return False
    return True


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            state = _state(int(entry))
            if state is not None and state[1] == pgid and state[0] not in (b"Z", b"X"):
                found.append(int(entry))
    return found
