"""Ambient triggers: register a Runner once, submit deliveries into a bounded queue, and let a supervised actor
own each invocation's retries, deadline and outcome (see ``docs/TRIGGERS.md``)."""

from __future__ import annotations

from adk_actors.triggers.api import (
    EventOutcome,
    Submitted,
    await_event,
    cancel,
    list_triggers,
    register_trigger,
    status,
    submit,
    trigger_status,
    unregister_trigger,
)
from adk_actors.triggers.options import RetryPolicy, SessionPolicy, TriggerOptions

__all__ = [
    "EventOutcome",
    "RetryPolicy",
    "SessionPolicy",
    "Submitted",
    "TriggerOptions",
    "await_event",
    "cancel",
    "list_triggers",
    "register_trigger",
    "status",
    "submit",
    "trigger_status",
    "unregister_trigger",
]
