"""Stable runs (``adk_run`` in the reference): outcomes, the bounded replay log and subscriptions.

The run actor, the runs facade (start/status/wait/subscribe/cancel/resume) and the Runner that drives agent turns
arrive with the Runner issue; this package holds their tested pure core.
"""

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

__all__ = ["Cancelled", "Completed", "CreditSubscription", "Delivery", "Failed", "Outcome", "Paused",
           "PushSubscription", "ReplayGap", "RunLog"]
