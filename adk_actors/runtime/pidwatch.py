"""Watching processes for exit without polling: one pidfd per process, readable when it exits.

An actor returns :meth:`PidWatch.fds` from ``watch_fds()`` and passes the ready fds of ``handle_ready`` to
:meth:`PidWatch.exited`, which returns the pids that died (their fds closed). Used by the admission controller
(permit owners) and the run index (hosts with live runs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

__all__ = ["PidWatch"]


class PidWatch:
    """A set of watched pids (not thread-safe: owned by one actor)."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._fds)

    def watch(self, pid: int) -> bool:
        """Watch ``pid``; False when it is already gone (the caller handles the exit at once)."""
        if pid <= 0 or pid in self._fds:
            return True
        try:
            self._fds[pid] = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            return False
        return True

    def keep_only(self, pids: Iterable[int]) -> None:
        """Stop watching every pid not in ``pids``."""
        keep = set(pids)
        for pid in [p for p in self._fds if p not in keep]:
            with contextlib.suppress(OSError):
                os.close(self._fds.pop(pid))

    def fds(self) -> list[int]:
        return list(self._fds.values())

    def exited(self, ready: Iterable[int]) -> list[int]:
        """The watched pids whose fd is in ``ready`` (they exited); they are no longer watched."""
        ready_set = set(ready)
        gone = [pid for pid, fd in self._fds.items() if fd in ready_set]
        for pid in gone:
            with contextlib.suppress(OSError):
                os.close(self._fds.pop(pid))
        return gone

    def close(self) -> None:
        self.keep_only(())
