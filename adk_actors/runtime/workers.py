"""The worker-process pool for user code (tools, callbacks, workflow actions, ...): our own, not troupes.

``WorkerPool`` (tier 1, registered as ``workers``) keeps ``workers`` pre-forked ``Worker`` processes. A job
(:class:`RunJob`) carries a :class:`~adk_actors.runtime.callables.CallableRef` and an absolute deadline. Jobs
queue FIFO (bounded) until a worker is idle. A deadline miss or a cancel kills the worker (Python threads cannot
be killed, processes can) and the pool starts a replacement; a worker that dies under a job fails that job with
``worker_lost`` — a job is never retried behind the caller's back. A function that raises is answered with
``function_failed`` naming the exception type only; its message and stack trace go to the node log, scrubbed.
Results are normalized to JSON-safe values in the worker. An optional ``RLIMIT_AS`` per job class bounds a job's
address space. When the pool process itself dies, its workers die with it (``PR_SET_PDEATHSIG`` = SIGKILL) and the
callers' processes answer the jobs it held with ``worker_lost`` (:mod:`adk_actors.runtime.jobwatch`).

Pool protocol — calls: ``RunJob`` (answered with the function's JSON-safe result), ``GetStatus``, ``Ping``;
tells: ``CancelJob``. Worker protocol (internal): ``_Exec`` in, ``_JobDone`` out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import os
import resource
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import AdkError, WorkerError
from adk_actors.logs import crash_fields
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.messages import SupInit
from adk_actors.runtime.procs import pid_alive
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer, set_pdeathsig

__all__ = ["CancelJob", "PoolSpec", "RunJob", "Worker", "WorkerPool", "normalize_result"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunJob:
    """Run ``fn(*args, **kwargs)`` in a worker before ``deadline`` (absolute monotonic seconds)."""

    fn: CallableRef
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    deadline: float = 0.0
    job_class: str = "default"
    max_memory_mb: int | None = None
    """This job's own address-space bound (``RLIMIT_AS``), tighter than its class's; ``None``: the class's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelJob:
    """Cancel the job started by the ``RunJob`` call with this ``call_id`` (kills its worker if running)."""

    call_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSpec:
    workers: int = 2
    rlimit_as_mb: dict[str, int] = field(default_factory=dict)
    """Address-space limit in MiB per job class (``"default"`` applies to classes not listed); 0 = none."""
    max_queue: int = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class _Exec:
    job_id: str
    fn: CallableRef
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rlimit_as: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _JobDone:
    job_id: str
    worker_id: str
    value: Any = None
    error: AdkError | None = None


@dataclass(frozen=True, slots=True)
class _JobDeadline:
    job_id: str


@dataclass(frozen=True, slots=True)
class _RecheckKilled:
    attempt: int


_RECHECK_DELAYS = (0.05, 0.2, 0.5, 1.0, 2.0)


def normalize_result(value: Any, _depth: int = 0) -> Any:
    """Strictly project a function result onto JSON-safe data (dataclasses become dicts, tuples lists).

    Raises:
        WorkerError: ``unserializable_result`` naming the offending type (never the value).
    """
    if _depth > 64:
        raise WorkerError("result nests too deeply", reason="unserializable_result", details={"depth": _depth})
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise WorkerError("NaN/Infinity are not JSON", reason="unserializable_result", details={"type": "float"})
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise WorkerError(
                    "result object keys must be strings",
                    reason="unserializable_result",
                    details={"type": type(key).__name__},
                )
            out[key] = normalize_result(item, _depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [normalize_result(item, _depth + 1) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return normalize_result(dataclasses.asdict(value), _depth + 1)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return normalize_result(to_dict(), _depth + 1)
    raise WorkerError("result is not JSON-safe", reason="unserializable_result", details={"type": type(value).__name__})


class Worker(GenServer):
    """One worker process: runs one job at a time, synchronously (blocking here only blocks this worker)."""

    def init(self, args: Any) -> Any:
        # A worker blocked in user code never gets to act on a SIGTERM (Thespian's handler only flags an exit):
        # when its pool dies, the kernel kills it outright, so a job reported lost stops running.
        set_pdeathsig(signal.SIGKILL)
        return None

    def handle_info(self, message: Any, sender: Any) -> None:
        if not isinstance(message, _Exec):
            super().handle_info(message, sender)
            return
        value, error = None, None
        previous = resource.getrlimit(resource.RLIMIT_AS)
        try:
            if message.rlimit_as:
                resource.setrlimit(resource.RLIMIT_AS, (message.rlimit_as, previous[1]))
            result = message.fn.resolve()(*message.args, **message.kwargs)
            if inspect.isawaitable(result):
                result = asyncio.run(_await(result))
            value = normalize_result(result)
        except AdkError as err:
            error = err
        except MemoryError:
            error = WorkerError(
                "the job exceeded its memory limit", reason="memory_limit", details={"callable": message.fn.label}
            )
        except Exception as exc:
            # The node log gets the crash report; the caller gets the exception type only.
            self.log.error("job function raised", worker=self._child_id, callable=message.fn.label, **crash_fields(exc))
            error = AdkError(
                f"the function raised {type(exc).__name__}",
                reason="function_failed",
                details={"callable": message.fn.label, "exception_type": type(exc).__name__},
            )
        finally:
            if message.rlimit_as:
                resource.setrlimit(resource.RLIMIT_AS, previous)
        self._port.send(
            self._parent, _JobDone(job_id=message.job_id, worker_id=self._child_id, value=value, error=error)
        )


async def _await(awaitable: Any) -> Any:
    return await awaitable


@dataclass(slots=True)
class _W:
    worker_id: str
    address: Any
    """The address ``createActor`` returned (what Thespian's ``ChildActorExited`` names)."""
    pid: int = 0
    ready_address: Any = None
    """The address the worker reported itself with when ready (its own TCP address: jobs go there, on its lane)."""
    state: str = "starting"  # starting | idle | busy | killed
    job_id: str | None = None


@dataclass(slots=True)
class _Job:
    job_id: str
    ctx: CallCtx
    request: RunJob
    worker_id: str | None = None
    timer: int | None = None


class WorkerPool(GenServer):
    """Pre-forked, supervised worker processes with per-job deadlines; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = PoolSpec()
        self.workers: dict[str, _W] = {}
        self.queue: deque[_Job] = deque()
        self.running: dict[str, _Job] = {}
        self.serial = 0
        self.completed = 0
        self.replaced = 0
        self.killed = 0
        self.lost = 0

    def init(self, args: Any) -> Any:
        self.spec = args if isinstance(args, PoolSpec) else PoolSpec()
        for _ in range(self.spec.workers):
            self._start_worker()
        return None

    def _start_worker(self) -> None:
        self.serial += 1
        worker_id = f"worker-{self.serial}"
        address = self.createActor(Worker)
        self.workers[worker_id] = _W(worker_id, address)
        self.send(
            address,
            SupInit(parent=self.myAddress, child_id=worker_id, registry=self._registry, system_port=self._system_port),
        )

    # ---- jobs ------------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, RunJob):
            if len(self.queue) >= self.spec.max_queue:
                raise WorkerError(
                    "the worker queue is full", reason="queue_full", details={"max_queue": self.spec.max_queue}
                )
            job = _Job(ctx.call_id, ctx, request)
            job.timer = self.start_timer(max(0.0, self._deadline(job) - time.monotonic()), _JobDeadline(job.job_id))
            self.queue.append(job)
            self._dispatch_jobs()
            return DEFERRED
        return super().handle_call(request, ctx)

    def _dispatch_jobs(self) -> None:
        idle = [w for w in self.workers.values() if w.state == "idle"]
        while idle and self.queue:
            job = self.queue.popleft()
            worker = idle.pop(0)
            worker.state, worker.job_id, job.worker_id = "busy", job.job_id, worker.worker_id
            self.running[job.job_id] = job
            self._port.send(
                worker.ready_address or worker.address,
                _Exec(
                    job_id=job.job_id,
                    fn=job.request.fn,
                    args=job.request.args,
                    kwargs=job.request.kwargs,
                    rlimit_as=self._rlimit(job.request),
                ),
            )

    @staticmethod
    def _deadline(job: _Job) -> float:
        return min(job.request.deadline, job.ctx.deadline)

    def _rlimit(self, request: RunJob) -> int:
        limits = self.spec.rlimit_as_mb
        mb = limits.get(request.job_class, limits.get("default", 0))
        if request.max_memory_mb is not None:
            mb = min(mb, request.max_memory_mb) if mb else request.max_memory_mb
        return mb * 1024 * 1024 if mb else 0

    def _finish(self, job: _Job, value: Any, error: AdkError | None) -> None:
        if job.timer is not None:
            self.cancel_timer(job.timer)
        if error is None:
            self.completed += 1
            self.reply(job.ctx, value)
        else:
            self.fail(job.ctx, error)

    def handle_info(self, message: Any, sender: Any) -> None:
        from adk_actors.runtime.messages import ChildReady

        if isinstance(message, _JobDone):
            job = self.running.pop(message.job_id, None)
            worker = self.workers.get(message.worker_id)
            if worker is not None and worker.state == "busy":
                worker.state, worker.job_id = "idle", None
            if job is not None:
                self._finish(job, message.value, message.error)
            self._dispatch_jobs()
        elif isinstance(message, ChildReady):
            worker = self.workers.get(message.child_id)
            if worker is not None and worker.state == "starting":
                worker.state, worker.pid, worker.ready_address = "idle", message.pid, message.address
                self._dispatch_jobs()
        elif isinstance(message, CancelJob):
            self._cancel(message.call_id)
        else:
            super().handle_info(message, sender)

    def _cancel(self, job_id: str, timeout: bool = False) -> None:
        error = (
            WorkerError("the job missed its deadline", reason="job_timeout")
            if timeout
            else WorkerError("the job was cancelled", reason="cancelled")
        )
        for job in list(self.queue):
            if job.job_id == job_id:
                self.queue.remove(job)
                self._finish(job, None, error)
                return
        running = self.running.pop(job_id, None)
        if running is None:
            return
        job = running
        worker = self.workers.get(job.worker_id or "")
        if worker is not None:
            worker.state = "killed"
            self.killed += 1
            if worker.pid:
                try:
                    os.kill(worker.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.start_timer(_RECHECK_DELAYS[0], _RecheckKilled(0))
        self._finish(job, None, error)

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _RecheckKilled):
            self._reap_dead()
            if any(w.state == "killed" for w in self.workers.values()):
                self.recheck_children()
                if message.attempt + 1 < len(_RECHECK_DELAYS):
                    self.start_timer(_RECHECK_DELAYS[message.attempt + 1], _RecheckKilled(message.attempt + 1))
            return
        if isinstance(message, _JobDeadline):
            # Expire every job that is due now in one pass, before replacing any killed worker (a fork each),
            # so a burst of timeouts is answered promptly.
            now = time.monotonic() + 0.005
            due = [j.job_id for j in [*self.queue, *self.running.values()] if self._deadline(j) <= now]
            for job_id in {message.job_id, *due}:
                self._cancel(job_id, timeout=True)
            return
        super().handle_timer(message)

    def handle_child_exited(self, address: Any) -> None:
        for worker_id, worker in list(self.workers.items()):
            if worker.address == address:
                self._worker_gone(worker_id)
                break
        # Thespian may report a child under an address that does not compare equal to the one createActor
        # returned; the process table is the ground truth.
        self._reap_dead()

    def _reap_dead(self) -> None:
        for worker_id, worker in list(self.workers.items()):
            if worker.pid and not pid_alive(worker.pid):
                self._worker_gone(worker_id)

    def _worker_gone(self, worker_id: str) -> None:
        worker = self.workers.pop(worker_id)
        if worker.job_id is not None and worker.state == "busy" and worker.job_id in self.running:
            job = self.running.pop(worker.job_id)
            if job is not None:
                self.lost += 1
                self._finish(
                    job,
                    None,
                    WorkerError(
                        "the worker process died under the job",
                        reason="worker_lost",
                        details={"callable": job.request.fn.label},
                    ),
                )
        self.replaced += 1
        self._start_worker()

    def status(self) -> dict[str, Any]:
        return {
            "kind": "worker_pool",
            "workers": [{"id": w.worker_id, "pid": w.pid, "state": w.state} for w in self.workers.values()],
            "queued": len(self.queue),
            "running": len(self.running),
            "completed": self.completed,
            "replaced": self.replaced,
            "killed": self.killed,
            "lost": self.lost,
        }
