"""Stable runs (``adk_run`` in the reference): ``start``, ``status``, ``wait``, ``subscribe``, ``cancel``,
``resume`` and the outcomes ``Completed`` / ``Paused`` / ``Cancelled`` / ``Failed``.

A run is a tier-2 actor not owned by the process that started it; ``runs.start(runner, user_id, session_id,
input)`` runs one Runner invocation, ``runs.start(body)`` any run body. See ``docs/RUNNER.md``.
"""

from adk_actors.runs.api import RunItem, cancel, resume, start, status, subscribe, wait
from adk_actors.runs.logic import (
    Cancelled,
    Completed,
    CreditSubscription,
    Delivery,
    Failed,
    Outcome,
    Paused,
    PushSubscription,
    ReplayGap,
    RunLog,
)

__all__ = [
    "Cancelled",
    "Completed",
    "CreditSubscription",
    "Delivery",
    "Failed",
    "Outcome",
    "Paused",
    "PushSubscription",
    "ReplayGap",
    "RunItem",
    "RunLog",
    "cancel",
    "resume",
    "start",
    "status",
    "subscribe",
    "wait",
]
