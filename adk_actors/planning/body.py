"""A planning run as a stable run body: the loop lives in a run actor, not in the caller.

:class:`PlanningBody` plugs into :func:`adk_actors.runs.start` like the Runner's body does: the run actor calls
``start`` once, and every adapter callback the loop asks for (``PlanningLoop.drive``) becomes a ``RunJob`` call to
the worker pool whose reply advances the loop. Nothing blocks the run's host, and the run belongs to no caller:
it goes on when the process that started it stops waiting or exits, and anyone with its id reads its outcome.

The run's terminal outcome is always ``runs.Completed(outcome_value)`` for an outcome the loop reached —
``{"status": "completed" | "failed" | "cancelled", ...}`` as in ``adk_actors.planning.loop`` — so a failed plan
is a value, as it is for ``run_planning``. ``runs.cancel`` (or :func:`~adk_actors.planning.cancel_planning`)
kills the active callback's worker and completes the run with the ``cancelled`` value. A run that is lost (its
host died) ends ``runs.Failed("host_lost")`` like any other run. Each finished step is emitted as an event
``{"type": "planning_step", "step", "action", "status", "steps_executed", "replans", "plan_version"}``.
"""

from __future__ import annotations

from typing import Any

from adk_actors.errors import AdkError
from adk_actors.planning.loop import EXECUTE_FN, Drive, PlanningLoop
from adk_actors.planning.spec import PlanningSpec
from adk_actors.runs.body import RunContext
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import JOB_REPLY_GRACE_S
from adk_actors.runtime.workers import CancelJob, RunJob

__all__ = ["JOB_CLASS", "PlanningBody"]

JOB_CLASS = "planning"
"""The worker-pool job class of planning callbacks (its ``RLIMIT_AS`` is the pool's, see ``PoolSpec``)."""


class PlanningBody:
    """The body of one planning run (picklable until it starts: the spec travels, the live loop does not)."""

    def __init__(self, spec: PlanningSpec) -> None:
        self.spec = spec
        self._loop: PlanningLoop | None = None
        self._drive: Drive | None = None
        self._job: str | None = None
        self._step: Any = None
        self._cancel: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]

    # ---- the run actor's hooks ----------------------------------------------------------------------------------
    def start(self, run: RunContext) -> None:
        self._loop = PlanningLoop(self.spec, None, lambda: self._cancel)
        self._drive = self._loop.drive()
        self._advance(run, lambda gen: next(gen))

    def cancel(self, run: RunContext, reason: str) -> None:
        """``runs.cancel``: stop at once (the active worker is killed) and complete with the cancelled value."""
        if self._cancel is not None or self._loop is None:
            return
        self._cancel = reason
        if self._job is not None:
            run.send_to("workers", CancelJob(call_id=self._job))
            self._job = None
        run.complete(self._loop.outcome("cancelled", reason=reason))

    # ---- driving the loop ---------------------------------------------------------------------------------------
    def _advance(self, run: RunContext, resume: Any) -> None:
        """Resume the loop with ``resume(generator)``, report a step it finished, then launch the callback it asks
        for next or finish the run with its outcome value."""
        loop, drive = self._loop, self._drive
        assert loop is not None and drive is not None
        before, step = loop.steps_executed, self._step
        try:
            fn, args = resume(drive)
        except StopIteration as stop:
            self._progress(run, loop, step, before)
            run.complete(stop.value)
            return
        self._progress(run, loop, step, before)
        self._step = args[1] if fn == EXECUTE_FN else None
        job = RunJob(fn=CallableRef.by_name(fn), args=args, deadline=self.spec.deadline, job_class=JOB_CLASS)
        # The pool answers job_timeout at the deadline; the grace lets that answer win over a bare AskTimeout.
        self._job = run.call(
            "workers",
            job,
            self.spec.deadline + JOB_REPLY_GRACE_S,
            lambda value, error: self._answered(run, value, error),
        )

    def _answered(self, run: RunContext, value: Any, error: AdkError | None) -> None:
        if run.done or self._cancel is not None:
            return  # a cancelled run's killed job answers too; its outcome is already recorded
        self._job = None
        if error is not None:
            self._advance(run, lambda gen: gen.throw(error))
        else:
            self._advance(run, lambda gen: gen.send(value))

    @staticmethod
    def _progress(run: RunContext, loop: PlanningLoop, step: Any, before: int) -> None:
        if not isinstance(step, dict) or loop.steps_executed == before or not loop.history:
            return
        run.emit(
            {
                "type": "planning_step",
                "step": step.get("id"),
                "action": step.get("action"),
                "status": loop.history[-1].get("status"),
                "steps_executed": loop.steps_executed,
                "replans": loop.replans,
                "plan_version": loop.history[-1].get("plan_version"),
            }
        )
