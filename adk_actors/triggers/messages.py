"""Messages of the trigger actor, and the values its facade returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adk_actors.triggers.options import Delivery

__all__ = [
    "TRIGGER_ACTOR",
    "AwaitEvent",
    "CancelEvent",
    "EventOutcome",
    "EventStatus",
    "StopTrigger",
    "SubmitEvent",
    "Submitted",
    "TriggerStatus",
    "trigger_local_id",
]

TRIGGER_ACTOR = "adk_actors.triggers.actor.TriggerActor"


def trigger_local_id(name: str) -> str:
    """The trigger actor's inner-actor id (and registered name): ``trigger:<name>``."""
    return f"trigger:{name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """A delivery accepted (or recognised as a duplicate)."""

    ref: str
    """``<trigger>/<event id>``: stable, for ``await_event``, ``status`` and ``cancel``."""
    duplicate: bool = False
    """True when the idempotency key was already known: no second invocation was started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventOutcome:
    """The terminal outcome of one event."""

    outcome: str
    """``completed``, ``failed``, ``cancelled`` or ``expired``."""
    ref: str
    run_id: str | None = None
    """The run of the last attempt (``runs.status`` knows it while the run is retained)."""
    output: Any = None
    """The Runner's output when ``completed``."""
    attempts: int = 0
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmitEvent:
    """Accept ``delivery`` (already checked by the facade); answered with ``Submitted``."""

    delivery: Delivery


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitEvent:
    """Answered with the event's ``EventOutcome`` once it is terminal."""

    event_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EventStatus:
    """Answered with the event's status dict."""

    event_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelEvent:
    """Cancel a queued or active event; answered with whether it was."""

    event_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerStatus:
    """Answered with the trigger's counters (``trigger_status``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StopTrigger:
    """Refuse new deliveries, cancel every queued and active event, answer once all are terminal (the caller then
    stops the actor with ``StopInner``)."""
