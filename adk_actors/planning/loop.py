"""The planning loop: plan, validate, execute step by step, replan after a failed step, within every budget.

The loop is generic: it never touches the actor system itself. :meth:`PlanningLoop.drive` is a generator that
yields each adapter callback it needs as ``(fn, args)`` and is sent the result (or thrown the callback's
``AdkError``), so a run actor can drive it from message handlers without blocking (``adk_actors.planning.body``);
:meth:`PlanningLoop.run` drives it synchronously through an injected ``call(fn, args, deadline)``. Time comes from
an injected clock, so the loop can be driven by a fake in tests.

Outcome values (every one JSON-safe and bounded; exception text never appears)::

    {"status": "completed", "result": <last step's result>, "steps_executed", "replans", "plan_version"}
    {"status": "failed", "reason": <tag>, "steps_executed", "replans", "plan_version"[, "step"][, "detail"]}
    {"status": "cancelled", "reason": <cancel reason>, "steps_executed", "replans", "plan_version"}

``plan_version`` is the revision of the plan in effect (1 = the planner's first plan, each replan adds 1; ``None``
before a plan was accepted). Failure reasons: ``timeout``, ``max_steps``, ``step_failed`` (a step failed and no
replan is left: ``step`` is its id, ``detail`` the step's reason tag), ``planner_failed`` / ``executor_failed``
(``detail``: the callback's reason tag), ``invalid_plan`` (``detail``: the schema rule), ``unknown_action``
(``step``: its index), ``plan_too_large``, ``result_too_large``, ``state_too_large``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Generator
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, AskTimeout, ValidationError
from adk_actors.planning.plan import validate_plan
from adk_actors.planning.spec import PlanningSpec
from adk_actors.secrets import prune_secrets

__all__ = [
    "EXECUTE_FN",
    "EXECUTOR_ACTIONS_FN",
    "MAX_HISTORY",
    "MAX_RESULT_BYTES",
    "MAX_STATE_BYTES",
    "PLAN_FN",
    "REPLAN_FN",
    "CallFn",
    "CancelFn",
    "Drive",
    "PlanningLoop",
]

PLAN_FN = "adk_actors.planning.adapters:run_plan"
REPLAN_FN = "adk_actors.planning.adapters:run_replan"
EXECUTE_FN = "adk_actors.planning.adapters:run_execute"
EXECUTOR_ACTIONS_FN = "adk_actors.planning.adapters:executor_actions"

MAX_RESULT_BYTES = 256 * 1024
"""Largest step result, as canonical JSON (after secret pruning)."""
MAX_STATE_BYTES = 1024 * 1024
"""Largest sum of the step results kept in the run's state."""
MAX_HISTORY = 32
"""History records handed to the planner (the most recent ones)."""

CallFn = Callable[[str, tuple[Any, ...], float], Any]
"""``call(fn, args, deadline)``: run the adapter function ``fn`` (an importable name) and return its result."""
CancelFn = Callable[[], str | None]
"""Returns the cancel reason once the run is cancelled, else ``None``."""
Request = tuple[str, tuple[Any, ...]]
Drive = Generator[Request, Any, dict[str, Any]]
"""The loop as a generator: yields ``(fn, args)`` callback requests, returns the outcome value."""

_TAG_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _tag(err: AdkError, default: str) -> str:
    return err.reason if _TAG_RE.fullmatch(err.reason) else default


class _Stop(Exception):
    """Ends the run with an outcome value."""

    def __init__(self, outcome: dict[str, Any]) -> None:
        super().__init__(outcome.get("status"))
        self.outcome = outcome


class PlanningLoop:
    """One planning run. :meth:`run` returns its outcome value and never raises for run failures."""

    def __init__(
        self, spec: PlanningSpec, call: CallFn | None, cancelled: CancelFn, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.spec = spec
        self._call = call
        self._cancelled = cancelled
        self._clock = clock
        self.steps_executed = 0
        self.replans = 0
        self.plan_version: int | None = None
        self.history: list[dict[str, Any]] = []
        self.results: dict[str, Any] = {}
        self.last: Any = None
        self._state_bytes = 0

    # ---- outcome values -------------------------------------------------------------------------------------------
    def outcome(self, status: str, **extra: Any) -> dict[str, Any]:
        """An outcome value with the run's counters so far (also how a cancel from outside is reported)."""
        return {
            "status": status,
            "steps_executed": self.steps_executed,
            "replans": self.replans,
            "plan_version": self.plan_version,
            **extra,
        }

    def _fail(self, reason: str, **extra: Any) -> _Stop:
        return _Stop(self.outcome("failed", reason=reason, **extra))

    # ---- the loop -------------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Drive the loop on this thread through ``call``; return the outcome value."""
        if self._call is None:
            raise TypeError("run() needs a call function; drive the generator instead")
        gen = self.drive()
        try:
            fn, args = next(gen)
            while True:
                try:
                    value = self._call(fn, args, self.spec.deadline)
                except AdkError as err:
                    fn, args = gen.throw(err)
                else:
                    fn, args = gen.send(value)
        except StopIteration as stop:
            outcome: dict[str, Any] = stop.value
            return outcome

    def drive(self) -> Drive:
        """Run to completion, failure, cancellation or the deadline; return the outcome value."""
        try:
            actions = yield from self._invoke(EXECUTOR_ACTIONS_FN, (self.spec.executor.module,), "executor_failed")
            planner = self.spec.planner
            raw = yield from self._invoke(
                PLAN_FN, (planner.module, self.spec.goal, self.spec.context, planner.config, []), "planner_failed"
            )
            plan = self._accept(raw, actions)
            while True:
                failure = yield from self._execute(plan)
                if failure is None:
                    return self.outcome("completed", result=self.last)
                if self.replans >= self.spec.max_replans:
                    raise self._fail("step_failed", step=failure["step"], detail=failure["reason"])
                self.replans += 1
                raw = yield from self._invoke(
                    REPLAN_FN,
                    (planner.module, self.spec.goal, self.spec.context, planner.config, self._history(), failure),
                    "planner_failed",
                )
                plan = self._accept(raw, actions)
        except _Stop as stop:
            return stop.outcome

    def _accept(self, raw: Any, actions: Any) -> dict[str, Any]:
        try:
            plan = validate_plan(raw, actions if isinstance(actions, list) else ())
        except ValidationError as exc:
            rule = exc.details.get("rule")
            extra: dict[str, Any] = {"detail": rule} if isinstance(rule, str) else {}
            if isinstance(exc.details.get("step"), int):
                extra["step"] = exc.details["step"]
            raise self._fail(exc.reason, **extra) from None
        self.plan_version = 1 if self.plan_version is None else self.plan_version + 1
        return plan

    def _execute(self, plan: dict[str, Any]) -> Generator[Request, Any, dict[str, Any] | None]:
        """Run every step of ``plan``; return the failure record of the first failed step, or ``None``."""
        steps = plan["steps"]
        if len(steps) > self.spec.max_steps - self.steps_executed:
            # A plan that cannot finish within the step budget is refused before any of its side effects.
            raise self._fail("max_steps", detail="plan_exceeds_budget")
        executor = self.spec.executor
        for step in steps:
            state = {"results": self.results, "last": self.last, "plan_version": self.plan_version}
            try:
                result = yield from self._invoke(
                    EXECUTE_FN, (executor.module, step, state, self.spec.context, executor.config), None
                )
            except AdkError as err:
                self.steps_executed += 1
                failure = {
                    "step": step["id"],
                    "action": step["action"],
                    "reason": _tag(err, "step_failed"),
                    "plan_version": self.plan_version,
                }
                self._record({**failure, "status": "failed"})
                return failure
            self.steps_executed += 1
            self._keep(step, result)
        return None

    def _keep(self, step: dict[str, Any], result: Any) -> None:
        try:
            value, size = copy_json(
                prune_secrets(result), field="result", max_bytes=MAX_RESULT_BYTES, limit_name="max_result_bytes"
            )
        except ValidationError:
            raise self._fail("result_too_large", step=step["id"]) from None
        self._state_bytes += size
        if self._state_bytes > MAX_STATE_BYTES:
            raise self._fail("state_too_large", step=step["id"])
        self.results[step["id"]] = value
        self.last = value
        self._record(
            {
                "step": step["id"],
                "action": step["action"],
                "status": "ok",
                "result": value,
                "plan_version": self.plan_version,
            }
        )

    def _record(self, entry: dict[str, Any]) -> None:
        self.history.append(entry)
        del self.history[:-MAX_HISTORY]

    def _history(self) -> list[dict[str, Any]]:
        return list(self.history)

    # ---- callbacks ------------------------------------------------------------------------------------------------
    def _invoke(self, fn: str, args: tuple[Any, ...], failure_reason: str | None) -> Generator[Request, Any, Any]:
        """Call one adapter callback under the run's deadline. Cancellation and the deadline end the run;
        other errors end it with ``failure_reason`` (and ``detail``) or, when that is ``None``, are raised."""
        self._check()
        try:
            value = yield fn, args
        except AdkError as err:
            self._check()
            if err.reason == "job_timeout" or isinstance(err, AskTimeout):
                raise self._fail("timeout") from None
            if failure_reason is None:
                raise
            raise self._fail(failure_reason, detail=_tag(err, "callback_failed")) from None
        self._check(deadline=False)  # a result that arrived in time counts, even if the deadline passed since
        return value

    def _check(self, *, deadline: bool = True) -> None:
        reason = self._cancelled()
        if reason is not None:
            raise _Stop(self.outcome("cancelled", reason=reason))
        if deadline and self._clock() >= self.spec.deadline:
            raise self._fail("timeout")
