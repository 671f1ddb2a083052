"""Developer operations over registered triggers: the list, one trigger's status, one event's status.

``GET /dev/v1/triggers``, ``GET /dev/v1/triggers/{name}`` (:mod:`adk_actors.web.dev`), the console's Triggers tab
and ``adk trigger list|status`` (:mod:`adk_actors.cli.trigger_cmd`) all call :class:`TriggerOps`, so they answer the
same input with the same reason. A trigger's status is published by key (:data:`TRIGGER_KEYS`, :data:`RECENT_KEYS`,
:data:`EVENT_KEYS`): a key the trigger actor adds later is not shown before it is reviewed here, and no payload,
metadata, output or session id of an event ever is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adk_actors.content.validation import check_id
from adk_actors.errors import json_safe
from adk_actors.runtime.system import ActorSystemHandle

__all__ = ["EVENT_KEYS", "MAX_RECENT", "MAX_TRIGGERS", "RECENT_KEYS", "TRIGGER_KEYS", "TriggerOps"]

MAX_TRIGGERS = 256
"""Most triggers the list shows (sorted by name)."""
MAX_RECENT = 20
"""Most recent outcomes shown per trigger (newest first)."""
TRIGGER_KEYS = (
    "name",
    "mode",
    "queue_depth",
    "active",
    "max_queue",
    "max_concurrency",
    "accepted",
    "duplicates",
    "rejected",
    "completed",
    "failed",
    "cancelled",
    "expired",
)
"""What a trigger's status shows (besides ``recent``)."""
RECENT_KEYS = ("ref", "outcome", "attempts", "duration_ms", "reason")
"""What each recent outcome shows."""
EVENT_KEYS = ("ref", "trigger", "state", "attempts", "outcome", "run_id", "reason", "deadline_in_ms")
"""What one event's status shows."""
_MAX_REF = 512


def _pick(found: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: json_safe(found.get(k)) for k in keys}


def trigger_json(found: Mapping[str, Any]) -> dict[str, Any]:
    """A trigger status (:func:`adk_actors.triggers.trigger_status`) with the published keys only."""
    shown = _pick(found, TRIGGER_KEYS)
    recent = found.get("recent") or []
    shown["recent"] = [_pick(item, RECENT_KEYS) for item in list(recent)[:MAX_RECENT] if isinstance(item, Mapping)]
    return shown


class TriggerOps:
    """The trigger operations of one node.

    Args:
        system: the node (an attached or owned ``ActorSystemHandle``).
    """

    def __init__(self, system: ActorSystemHandle) -> None:
        self.system = system

    def list_triggers(self) -> dict[str, Any]:
        """``{"triggers": [status ...]}``: every registered trigger (at most :data:`MAX_TRIGGERS`, by name) with its
        queue depth, counters and recent outcomes."""
        from adk_actors.triggers import list_triggers

        found = sorted(list_triggers(system=self.system), key=lambda t: str(t.get("name", "")))
        return {"triggers": [trigger_json(t) for t in found[:MAX_TRIGGERS]]}

    def trigger(self, name: Any) -> dict[str, Any]:
        """One trigger's status.

        Raises:
            ValidationError: ``name`` is not an id (``invalid_value``).
            TriggerError: ``unknown_trigger``.
        """
        from adk_actors.triggers import trigger_status

        return trigger_json(trigger_status(check_id(name, "name"), system=self.system))

    def event(self, ref: Any) -> dict[str, Any]:
        """One event's status by its reference (``<trigger>/<event id>``).

        Raises:
            ValidationError: ``ref`` is not a reference (``invalid_value``).
            TriggerError: ``unknown_trigger`` (or the trigger's reason for an unknown event).
        """
        from adk_actors.triggers import status

        return _pick(status(check_id(ref, "ref", max_length=_MAX_REF), system=self.system), EVENT_KEYS)
