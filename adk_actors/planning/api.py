"""The planning facade: run a planning loop to its end, or start one and await or cancel it.

A started run belongs to the process that started it: its loop is a thread there, and :class:`PlanningRef` is an
opaque token that other processes cannot use (awaiting or cancelling it elsewhere raises
``PolicyDenied(reason="not_owner")``). When the owner process dies, its loop dies with it; the active callback is
then bounded by the run's deadline (the pool kills a worker at its job's deadline), and an orderly interpreter exit
cancels it at once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import AdkError, AskTimeout, ConfigError, PolicyDenied, RunNotFound
from adk_actors.planning.jobs import JobScope
from adk_actors.planning.loop import PlanningLoop
from adk_actors.planning.spec import PlanningSpec, planning_spec
from adk_actors.runtime.server import JOB_REPLY_GRACE_S
from adk_actors.runtime.system import ActorSystemHandle, current_system

__all__ = [
    "DEFAULT_MAX_REPLANS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TIMEOUT_MS",
    "PlanningRef",
    "await_planning",
    "cancel_planning",
    "run_planning",
    "start_planning",
]

DEFAULT_MAX_STEPS = 16
DEFAULT_MAX_REPLANS = 2
DEFAULT_TIMEOUT_MS = 60_000
_REASON_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_FINISH_SLACK_S = JOB_REPLY_GRACE_S + 1.0
"""How long past its deadline a run may take to report (the pool's reply grace plus a margin)."""


class _Run:
    """The owner-side state of a started run: its job scope, thread and outcome."""

    def __init__(self, spec: PlanningSpec, handle: ActorSystemHandle) -> None:
        self.spec = spec
        self.scope = JobScope(handle)
        self.done = threading.Event()
        self.outcome: dict[str, Any] | None = None
        self.thread: threading.Thread | None = None

    def run(self) -> dict[str, Any]:
        try:
            self.outcome = PlanningLoop(self.spec, self.scope.run, lambda: self.scope.cancel_reason).run()
        except Exception as exc:
            # Only a defect of the runtime itself gets here (the loop turns callback failures into outcomes).
            self.outcome = {"status": "failed", "reason": "runtime_failure", "detail": type(exc).__name__,
                            "steps_executed": 0, "replans": 0, "plan_version": None}
        finally:
            self.done.set()
        return self.outcome


_runs: weakref.WeakValueDictionary[str, _Run] = weakref.WeakValueDictionary()
_runs_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class PlanningRef:
    """An opaque reference to a started planning run, owned by the process that started it."""

    id: str
    """The run's id (unique per start)."""
    owner_pid: int
    """The pid of the owner process."""
    _run: _Run | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        # Only the token travels: a copy in another process never reaches the run (and is refused there).
        return (_restore, (self.id, self.owner_pid))


def _restore(ref_id: str, owner_pid: int) -> PlanningRef:
    with _runs_lock:
        run = _runs.get(ref_id) if owner_pid == os.getpid() else None
    return PlanningRef(ref_id, owner_pid, run)


def _owned(ref: Any, operation: str) -> _Run:
    if not isinstance(ref, PlanningRef):
        raise ConfigError("not a PlanningRef", reason="invalid_value", details={"key": "ref"})
    if ref.owner_pid != os.getpid():
        raise PolicyDenied("a planning run can only be awaited or cancelled by the process that started it",
                           reason="not_owner", details={"operation": operation, "ref": ref.id})
    with _runs_lock:
        run = ref._run or _runs.get(ref.id)
    if run is None:
        raise RunNotFound("no such planning run in this process", details={"ref": ref.id})
    return run


def run_planning(planner: Any, executor: Any, goal: Any, context: Any = None, *,
                 max_steps: int = DEFAULT_MAX_STEPS, max_replans: int = DEFAULT_MAX_REPLANS,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, deadline: float | None = None,
                 system: ActorSystemHandle | None = None) -> dict[str, Any]:
    """Run a planning loop in this thread and return its outcome value.

    Args:
        planner: Trusted reference ``{"module": "pkg.mod", "target": None, "config": {...}}``; the module defines
            ``plan(goal, context, config, history)`` and optionally ``replan(goal, context, config, history,
            failure)``.
        executor: Trusted reference to a module with ``ACTIONS`` and ``execute(step, state, context, config)``.
        goal: The goal (JSON, at most 64 KiB).
        context: A JSON object every callback receives (at most 64 KiB).
        max_steps: The most executed steps over the whole run (1..1024).
        max_replans: The most replans after failed steps (0..64).
        timeout_ms: The run's one overall timeout; it becomes an absolute deadline at the call.
        deadline: Optionally an absolute monotonic deadline in seconds (the earlier of the two applies).
        system: The actor system whose worker pool runs the callbacks (default: ``current_system()``).

    Returns:
        ``{"status": "completed", "result", "steps_executed", "replans", "plan_version"}``, or ``"failed"`` /
        ``"cancelled"`` with a ``"reason"`` tag (see ``adk_actors.planning.loop``).

    Raises:
        ConfigError: ``invalid_value`` / ``unknown_key`` for invalid arguments (nothing ran).
        SystemNotRunning: no actor system.
    """
    spec = planning_spec(planner, executor, goal, context, max_steps=max_steps, max_replans=max_replans,
                         timeout_ms=timeout_ms, deadline=deadline)
    return _Run(spec, system if system is not None else current_system()).run()


def start_planning(planner: Any, executor: Any, goal: Any, context: Any = None, *,
                   max_steps: int = DEFAULT_MAX_STEPS, max_replans: int = DEFAULT_MAX_REPLANS,
                   timeout_ms: int = DEFAULT_TIMEOUT_MS, deadline: float | None = None,
                   system: ActorSystemHandle | None = None) -> PlanningRef:
    """Start a planning loop on a thread of this process; see :func:`run_planning` for the arguments.

    Returns:
        A :class:`PlanningRef` for :func:`await_planning` and :func:`cancel_planning`, usable only in this
        process.

    Raises:
        ConfigError: invalid arguments (nothing started).
        SystemNotRunning: no actor system.
    """
    spec = planning_spec(planner, executor, goal, context, max_steps=max_steps, max_replans=max_replans,
                         timeout_ms=timeout_ms, deadline=deadline)
    run = _Run(spec, system if system is not None else current_system())
    ref = PlanningRef(uuid.uuid4().hex, os.getpid(), run)
    with _runs_lock:
        _runs[ref.id] = run
    run.thread = threading.Thread(target=run.run, daemon=True, name=f"adk-planning-{ref.id[:8]}")
    run.thread.start()
    return ref


def cancel_planning(ref: PlanningRef, reason: str = "cancelled") -> None:
    """Cancel a started run: no further callback starts and the active one is cancelled (its worker is killed).
    The run's outcome becomes ``{"status": "cancelled", "reason": reason, ...}`` unless it had already ended.
    Idempotent; returns at once.

    Raises:
        PolicyDenied: ``not_owner`` in any process but the one that started the run.
        ConfigError: ``invalid_value`` unless ``reason`` is a tag ``[a-z][a-z0-9_]{0,63}``.
    """
    run = _owned(ref, "cancel")
    if not isinstance(reason, str) or not _REASON_RE.fullmatch(reason):
        raise ConfigError("the cancel reason is a short tag", reason="invalid_value", details={"key": "reason"})
    run.scope.cancel(reason)


def await_planning(ref: PlanningRef, timeout: float | None = None) -> dict[str, Any]:
    """Wait for a started run's outcome value (it may be awaited any number of times).

    Args:
        ref: The run.
        timeout: Seconds to wait; ``None`` waits for the run, which always ends by its own deadline.

    Raises:
        PolicyDenied: ``not_owner`` in any process but the one that started the run.
        AskTimeout: the run did not end within ``timeout`` (it keeps running).
    """
    run = _owned(ref, "await")
    if timeout is None:
        timeout = max(0.0, run.spec.deadline - time.monotonic()) + _FINISH_SLACK_S
    if not run.done.wait(timeout) or run.outcome is None:
        raise AskTimeout("the planning run did not end in time", details={"ref": ref.id})
    return dict(run.outcome)


@atexit.register
def _cancel_all() -> None:
    with _runs_lock:
        runs = list(_runs.values())
    for run in runs:
        if not run.done.is_set():
            with contextlib.suppress(AdkError):
                run.scope.cancel("owner_exit", blocking=True)
