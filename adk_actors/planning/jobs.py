"""Planning callbacks as cancellable worker-pool jobs.

:meth:`ActorSystemHandle.run_job <adk_actors.runtime.system.ActorSystemHandle.run_job>` does not expose the call
id the pool knows a job by, so it cannot be cancelled. :class:`JobScope` sends the same ``RunJob`` ask (same
deadline, same reply grace) but learns the call id through ``ask_address``'s ``wrap`` hook; :meth:`JobScope.cancel`
then tells the pool ``CancelJob(call_id)``, which kills the busy worker and answers the ask with
``WorkerError(reason="cancelled")``. The job's deadline remains the hard bound if the cancel is lost.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

from adk_actors.errors import AdkError, WorkerError
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import JOB_REPLY_GRACE_S
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.runtime.workers import CancelJob, RunJob

__all__ = ["JOB_CLASS", "JobScope"]

JOB_CLASS = "planning"
"""The worker-pool job class of planning callbacks (its ``RLIMIT_AS`` is the pool's, see ``PoolSpec``)."""

_RESEND_DELAYS = (0.05, 0.25, 1.0)
"""A ``CancelJob`` routed through the router may overtake its ``RunJob``; resend while the job is still ours."""


class JobScope:
    """Runs one worker job at a time for one planning run and can cancel the active one from any thread."""

    def __init__(self, handle: ActorSystemHandle) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._call_id: str | None = None
        self._reason: str | None = None

    @property
    def cancel_reason(self) -> str | None:
        """Why the scope was cancelled, or ``None``."""
        with self._lock:
            return self._reason

    def run(self, fn: str, args: tuple[Any, ...], deadline: float) -> Any:
        """Run ``fn(*args)`` (an importable name) in the worker pool before ``deadline``.

        Raises:
            WorkerError: ``cancelled`` (also when the scope was cancelled before the call), ``job_timeout``, ...
            AdkError: what the function raised (``function_failed`` for non-``AdkError`` exceptions).
        """
        if self.cancel_reason is not None:
            raise WorkerError("the planning run was cancelled", reason="cancelled")
        job = RunJob(fn=CallableRef.by_name(fn), args=args, deadline=deadline, job_class=JOB_CLASS)
        entry = self._handle.resolve_entry("workers", deadline)
        monitor = entry.pid if entry.hostname == socket.gethostname() else 0
        try:
            return self._handle.ask_address(entry.address, job, deadline + JOB_REPLY_GRACE_S,
                                            monitor_pid=monitor, wrap=self._attach)
        finally:
            with self._lock:
                self._call_id = None

    def _attach(self, call: Any) -> Any:
        with self._lock:
            self._call_id = call.call_id
            cancelled = self._reason is not None
        if cancelled:
            self._start_cancel(call.call_id)
        return call

    def cancel(self, reason: str, *, blocking: bool = False) -> None:
        """Cancel the scope: no new job starts, and the active job (if any) is cancelled. Idempotent.

        The pool is told from a helper thread (resent while the job is still running); with ``blocking`` the
        first tell happens on the calling thread (at interpreter exit, when new threads may never run).
        """
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            call_id = self._call_id
        if call_id is None:
            return
        if blocking:
            with contextlib.suppress(AdkError):
                self._handle.cast("workers", CancelJob(call_id=call_id))
        self._start_cancel(call_id)

    def _start_cancel(self, call_id: str) -> None:
        threading.Thread(target=self._send_cancel, args=(call_id,), daemon=True,
                         name="adk-planning-cancel").start()

    def _send_cancel(self, call_id: str) -> None:
        for delay in (0.0, *_RESEND_DELAYS):
            time.sleep(delay)
            with self._lock:
                if self._call_id != call_id:
                    return
            with contextlib.suppress(AdkError):
                self._handle.cast("workers", CancelJob(call_id=call_id))
