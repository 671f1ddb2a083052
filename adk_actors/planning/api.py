"""The planning facade: run a planning loop to its end, or start one and await or cancel it.

A planning run is a stable run (``adk_actors.runs``) whose body is :class:`~adk_actors.planning.body.PlanningBody`:
it lives in a run actor on a host of the actor system, not in the caller, so it goes on when the caller stops
waiting or exits. :class:`PlanningRef` names the run by its id; any client of the same node may await or cancel
it (``await_planning`` / ``cancel_planning``, or ``runs.wait`` / ``runs.cancel`` with ``ref.run_id``) until the
run's retention ends.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from adk_actors import runs
from adk_actors.errors import AskTimeout, ConfigError
from adk_actors.planning.body import PlanningBody
from adk_actors.planning.spec import planning_spec
from adk_actors.runtime.server import JOB_REPLY_GRACE_S
from adk_actors.runtime.system import ActorSystemHandle, current_system

__all__ = [
    "DEFAULT_MAX_REPLANS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_RETENTION_MS",
    "DEFAULT_TIMEOUT_MS",
    "PlanningRef",
    "await_planning",
    "cancel_planning",
    "outcome_value",
    "run_planning",
    "start_planning",
]

DEFAULT_MAX_STEPS = 16
DEFAULT_MAX_REPLANS = 2
DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_RETENTION_MS = 60_000
_REASON_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_FINISH_SLACK_S = JOB_REPLY_GRACE_S + 1.0
"""How long past its deadline a run may take to report (the pool's reply grace plus a margin)."""


@dataclass(frozen=True, slots=True)
class PlanningRef:
    """A started planning run: its stable-run id and its absolute monotonic deadline (this machine's clock)."""

    run_id: str
    """The run's id (``adk_actors.runs`` accepts it too)."""
    deadline: float | None = None
    """When the run ends at the latest; ``None`` when unknown (a ref rebuilt from a bare id)."""


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _ref(ref: Any) -> PlanningRef:
    if isinstance(ref, PlanningRef):
        return ref
    if isinstance(ref, str) and ref:
        return PlanningRef(ref)
    raise ConfigError("not a PlanningRef or run id", reason="invalid_value", details={"key": "ref"})


def outcome_value(outcome: runs.Outcome) -> dict[str, Any]:
    """The planning outcome value a run's terminal outcome carries.

    A run that reached an outcome completes with it; a run that ended without one (its host died, it crashed, the
    node shut down) is reported as ``failed`` / ``cancelled`` with the run's reason and unknown (``None``)
    counters.
    """
    if isinstance(outcome, runs.Completed) and isinstance(outcome.output, dict):
        return dict(outcome.output)
    unknown: dict[str, Any] = {"steps_executed": None, "replans": None, "plan_version": None}
    if isinstance(outcome, runs.Cancelled):
        return {"status": "cancelled", "reason": outcome.reason, **unknown}
    reason = outcome.reason if isinstance(outcome, runs.Failed) else "runtime_failure"
    return {"status": "failed", "reason": reason, **unknown}


def start_planning(
    planner: Any,
    executor: Any,
    goal: Any,
    context: Any = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_replans: int = DEFAULT_MAX_REPLANS,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    deadline: float | None = None,
    retention_ms: int = DEFAULT_RETENTION_MS,
    system: ActorSystemHandle | None = None,
) -> PlanningRef:
    """Start a planning run as a stable run and return at once.

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
        retention_ms: How long the finished run's outcome stays readable.
        system: The actor system that runs it (default: ``current_system()``).

    Returns:
        A :class:`PlanningRef`; it pickles, and any client of the node may await or cancel the run.

    Raises:
        ConfigError: ``invalid_value`` / ``unknown_key`` for invalid arguments (nothing started).
        RunError: ``invalid_run_options`` for a bad ``retention_ms``.
        SystemNotRunning: no actor system.
    """
    spec = planning_spec(
        planner,
        executor,
        goal,
        context,
        max_steps=max_steps,
        max_replans=max_replans,
        timeout_ms=timeout_ms,
        deadline=deadline,
    )
    run_id = runs.start(PlanningBody(spec), retention_ms=retention_ms, system=_system(system))
    return PlanningRef(run_id, spec.deadline)


def run_planning(
    planner: Any,
    executor: Any,
    goal: Any,
    context: Any = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_replans: int = DEFAULT_MAX_REPLANS,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    deadline: float | None = None,
    retention_ms: int = DEFAULT_RETENTION_MS,
    system: ActorSystemHandle | None = None,
) -> dict[str, Any]:
    """Start a planning run (see :func:`start_planning`) and wait for its outcome value.

    Returns:
        ``{"status": "completed", "result", "steps_executed", "replans", "plan_version"}``, or ``"failed"`` /
        ``"cancelled"`` with a ``"reason"`` tag (see ``adk_actors.planning.loop``).

    Raises:
        ConfigError: invalid arguments (nothing ran).
        SystemNotRunning: no actor system.
    """
    handle = _system(system)
    ref = start_planning(
        planner,
        executor,
        goal,
        context,
        max_steps=max_steps,
        max_replans=max_replans,
        timeout_ms=timeout_ms,
        deadline=deadline,
        retention_ms=retention_ms,
        system=handle,
    )
    return await_planning(ref, system=handle)


def cancel_planning(
    ref: PlanningRef | str, reason: str = "cancelled", *, system: ActorSystemHandle | None = None
) -> dict[str, Any]:
    """Cancel a run: the active callback's worker is killed and no further callback starts. Idempotent.

    Returns:
        The run's outcome value: ``{"status": "cancelled", "reason": reason, ...}`` unless it had already ended.

    Raises:
        ConfigError: ``invalid_value`` unless ``reason`` is a tag ``[a-z][a-z0-9_]{0,63}``.
        RunNotFound: no such run, or it is past its retention.
    """
    target = _ref(ref)
    if not isinstance(reason, str) or not _REASON_RE.fullmatch(reason):
        raise ConfigError("the cancel reason is a short tag", reason="invalid_value", details={"key": "reason"})
    return outcome_value(runs.cancel(target.run_id, reason, system=_system(system)))


def await_planning(
    ref: PlanningRef | str, timeout: float | None = None, *, system: ActorSystemHandle | None = None
) -> dict[str, Any]:
    """Wait for a run's outcome value (it may be awaited any number of times, from any client, within retention).

    Args:
        ref: The run (a :class:`PlanningRef`, or its run id).
        timeout: Seconds to wait; ``None`` waits until the run's deadline (plus a reply grace), which always
            ends it — or the node's ask timeout for a bare run id.

    Raises:
        AskTimeout: the run did not end within ``timeout`` (it keeps running).
        RunNotFound: no such run, or it is past its retention.
    """
    target = _ref(ref)
    if timeout is None and target.deadline is not None:
        timeout = max(0.0, target.deadline - time.monotonic()) + _FINISH_SLACK_S
    try:
        return outcome_value(runs.wait(target.run_id, timeout, system=_system(system)))
    except AskTimeout as err:
        raise AskTimeout("the planning run did not end in time", details={"run_id": target.run_id}) from err
