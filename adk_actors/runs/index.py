"""The run index: one tier-1 actor per node (registered ``runs``) that knows every run's host and outcome.

Run actors live inside hosts; a host that dies takes its runs with it. The index holds a pidfd for every host
that has live runs, so when one dies (SIGKILL included) every run it was executing gets exactly one
``Failed(reason="host_lost")``, and callers that were waiting on those runs (``IndexWait``) get it at once.
Finished runs are kept for their ``retention_ms``.

Accepts: tells ``RunStarted`` / ``RunFinished`` / ``OnHostLost`` / ``OnProcessLost`` (from run actors); calls
``IndexLookup``, ``IndexWait``, ``ListRuns`` (the admin shell's view), ``GetStatus``, ``Ping``.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import AdkError, RunNotFound, ValidationError
from adk_actors.runs.logic import Failed
from adk_actors.runs.messages import (
    MAX_LIST_RUNS,
    IndexLookup,
    IndexWait,
    ListRuns,
    OnHostLost,
    OnProcessLost,
    RunFinished,
    RunStarted,
)
from adk_actors.runtime.pidwatch import PidWatch
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["RunIndex", "newest_runs"]


@dataclass(slots=True)
class _Entry:
    run_id: str
    host_id: int
    host_pid: int
    retention_ms: int
    parent_run_id: str
    started_at: float = field(default_factory=time.time)
    outcome: Any = None
    finished_at: float = 0.0
    waiters: list[CallCtx] = field(default_factory=list)
    on_lost: list[tuple[Any, Any]] = field(default_factory=list)
    depends: list[tuple[int, Any, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Purge:
    run_id: str


class RunIndex(GenServer):
    """Where every run lives and how it ended; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: dict[str, _Entry] = {}
        self.hosts = PidWatch()
        self.host_lost = 0

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, RunStarted):
            if message.run_id not in self.entries:
                self.entries[message.run_id] = _Entry(
                    message.run_id, message.host_id, message.host_pid, message.retention_ms, message.parent_run_id
                )
                self._watch(message.host_pid)
        elif isinstance(message, OnHostLost):
            entry = self.entries.get(message.run_id)
            if entry is not None and entry.outcome is None:
                entry.on_lost.append((message.target, message.message))
        elif isinstance(message, OnProcessLost):
            entry = self.entries.get(message.run_id)
            if entry is not None and entry.outcome is None:
                entry.depends.append((message.pid, message.target, message.message))
                self._watch(message.pid)
        elif isinstance(message, RunFinished):
            entry = self.entries.get(message.run_id)
            if entry is not None:
                self._finish(entry, message.outcome)
        else:
            super().handle_info(message, sender)

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, IndexLookup):
            entry = self._entry(request.run_id)
            return {
                "run_id": entry.run_id,
                "host_id": entry.host_id,
                "outcome": entry.outcome,
                "started_at": entry.started_at,
                "finished_at": entry.finished_at or None,
                "parent_run_id": entry.parent_run_id or None,
                "state": _state(entry.outcome),
            }
        if isinstance(request, IndexWait):
            entry = self._entry(request.run_id)
            if entry.outcome is not None:
                return entry.outcome
            entry.waiters.append(ctx)
            return DEFERRED
        if isinstance(request, ListRuns):
            return newest_runs(self.entries.values(), request.limit, time.time())
        return super().handle_call(request, ctx)

    def _entry(self, run_id: str) -> _Entry:
        entry = self.entries.get(run_id)
        if entry is None:
            raise RunNotFound("no such run (or past its retention)", details={"run_id": run_id})
        return entry

    def _finish(self, entry: _Entry, outcome: Any) -> None:
        if entry.outcome is not None:
            return  # exactly one terminal outcome
        entry.outcome, entry.finished_at = outcome, time.time()
        entry.on_lost.clear()
        entry.depends.clear()
        for ctx in entry.waiters:
            self.reply(ctx, outcome)
        entry.waiters.clear()
        self.start_timer(entry.retention_ms / 1000.0, _Purge(entry.run_id))
        self._unwatch_idle()

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Purge):
            self.entries.pop(message.run_id, None)
            return
        super().handle_timer(message)

    # ---- host monitoring ----------------------------------------------------------------------------------
    def _watch(self, pid: int) -> None:
        if not self.hosts.watch(pid):
            self._host_died(pid)

    def _unwatch_idle(self) -> None:
        running = [e for e in self.entries.values() if e.outcome is None]
        self.hosts.keep_only([*(e.host_pid for e in running), *(d[0] for e in running for d in e.depends)])

    def watch_fds(self) -> list[int]:
        return self.hosts.fds()

    def handle_ready(self, fds: list[int]) -> None:
        for pid in self.hosts.exited(fds):
            self._host_died(pid)

    def _host_died(self, pid: int) -> None:
        for entry in [e for e in self.entries.values() if e.outcome is None and e.depends]:
            for dep in [d for d in entry.depends if d[0] == pid]:
                entry.depends.remove(dep)
                self._notify(entry, dep[1], dep[2])
        lost = [e for e in self.entries.values() if e.host_pid == pid and e.outcome is None]
        if lost:
            self.log.warning("host lost with runs in flight", host_pid=pid, runs=len(lost))
        for entry in lost:
            self.host_lost += 1
            for target, message in entry.on_lost:
                self._notify(entry, target, message)
            self._finish(entry, Failed("host_lost", {"host_id": entry.host_id}))

    def _notify(self, entry: _Entry, target: Any, message: Any) -> None:
        try:
            self.send_to(target, message)
        except AdkError as err:  # the target is gone too: nothing left to tell
            self.log.warning("process-loss notice not delivered", run_id=entry.run_id, reason=err.reason)

    def terminate(self, reason: str) -> None:
        self.hosts.close()

    def status(self) -> dict[str, Any]:
        running = sum(1 for e in self.entries.values() if e.outcome is None)
        return {
            "kind": "run_index",
            "runs": len(self.entries),
            "running": running,
            "host_lost": self.host_lost,
            "watched_hosts": len(self.hosts),
        }


def _state(outcome: Any) -> str:
    return "running" if outcome is None else type(outcome).__name__.lower()


def newest_runs(entries: Iterable[_Entry], limit: int, now: float) -> dict[str, Any]:
    """The ``ListRuns`` answer: the ``limit`` newest entries (at most ``MAX_LIST_RUNS``), newest first.

    Raises:
        ValidationError: ``limit`` is not a non-negative int (an admin typo must not crash the index).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("limit must be a non-negative integer", reason="invalid_value", details={"key": "limit"})
    entries = list(entries)
    newest = heapq.nlargest(min(limit, MAX_LIST_RUNS), entries, key=lambda e: e.started_at)
    runs = [
        {
            "run_id": e.run_id,
            "host_id": e.host_id,
            "state": _state(e.outcome),
            "age_s": round(max(0.0, now - e.started_at), 3),
            "parent_run_id": e.parent_run_id or None,
            "reason": getattr(e.outcome, "reason", None),
        }
        for e in newest
    ]
    return {"runs": runs, "total": len(entries), "running": sum(1 for e in entries if e.outcome is None)}
