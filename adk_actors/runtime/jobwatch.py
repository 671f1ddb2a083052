"""Calls to the worker pool, watched for the pool's death (OTP's monitor during a ``gen_server:call``).

A tier-1 process (a plain actor, or a host on behalf of its inner actors) sends every call to the pool through its
port, which records it here with the pid of the pool process it went to. While any such call is pending, the
pool's pidfd is among the fds the process watches; when it becomes readable the pool is gone, and every call it
held is answered at once with ``WorkerError(reason="worker_lost")`` instead of waiting for its deadline. A call
sent through the registry (the pool's pid not yet cached) is assigned the pid the registry's ``Resolved`` names.

Not thread-safe: owned by one actor's thread.
"""

from __future__ import annotations

import time
from typing import Any

from adk_actors.runtime.pidwatch import PidWatch

__all__ = ["POOL_NAME", "JobWatch", "Lost"]

POOL_NAME = "workers"
"""The registered name of the worker pool: calls sent to this name are watched."""

Lost = tuple[str, Any]
"""``(call_id, reply_to)`` of a call whose pool died."""

_PRUNE_EVERY_S = 1.0


class JobWatch:
    """Pending pool calls of one process, by call id, with the pool pid each one went to (0: not known yet)."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[Any, int, float]] = {}
        self.pids = PidWatch()
        self.lost = 0
        self._prune_at = 0.0

    def track(self, call_id: str, reply_to: Any, deadline: float, pid: int) -> bool:
        """Record a call sent to pool process ``pid``; False when that process is already gone."""
        now = time.monotonic()
        if now >= self._prune_at:
            self._prune(now)
        self.pending[call_id] = (reply_to, pid, deadline)
        return not pid or self.pids.watch(pid)

    def settle(self, call_id: str) -> None:
        """The call was answered (or given up): stop watching it."""
        self.pending.pop(call_id, None)

    def resolved(self, pid: int) -> list[Lost]:
        """The registry named the pool's pid: the calls sent without one went there. Returns them as lost when
        that process has already exited."""
        waiting = [cid for cid, (_to, p, _d) in self.pending.items() if p == 0]
        for call_id in waiting:
            reply_to, _pid, deadline = self.pending[call_id]
            self.pending[call_id] = (reply_to, pid, deadline)
        if waiting and not self.pids.watch(pid):
            return self._take({pid})
        return []

    def fds(self) -> list[int]:
        """The pidfds to watch: none while no call is pending (a watched fd costs Thespian's loop work)."""
        return self.pids.fds() if self.pending else []

    def take_ready(self, ready: list[int]) -> tuple[list[int], list[Lost]]:
        """Split the ready fds: those that are not ours, and the calls whose pool exited."""
        ours = set(self.pids.fds())
        if not ours.intersection(ready):
            return ready, []
        gone = set(self.pids.exited(ready))
        return [fd for fd in ready if fd not in ours], self._take(gone)

    def _take(self, pids: set[int]) -> list[Lost]:
        lost = [(cid, to) for cid, (to, pid, _d) in self.pending.items() if pid in pids]
        for call_id, _to in lost:
            del self.pending[call_id]
        self.lost += len(lost)
        return lost

    def _prune(self, now: float) -> None:
        """Forget calls past their deadline (their caller has given up) and stop watching idle pool pids."""
        self._prune_at = now + _PRUNE_EVERY_S
        for call_id in [cid for cid, (_to, _p, deadline) in self.pending.items() if deadline < now]:
            del self.pending[call_id]
        self.pids.keep_only({pid for _to, pid, _d in self.pending.values()})

    def close(self) -> None:
        self.pending.clear()
        self.pids.close()
