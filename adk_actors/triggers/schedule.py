"""The bundled schedule source: one fixed-delay timer that submits a delivery template through the bounded path.

Firing ``n`` (from 1) submits the template with idempotency key ``f"{schedule_id}:{n}"``. A refused firing (the
queue is full, the trigger is stopping) is not counted: the next tick submits the same key again, so a brief
overload delays a firing instead of losing it. A key the trigger answers as a *duplicate* was fired by an earlier
incarnation of this schedule (a source restarted with its host starts counting at 1 again, while the trigger — durable
or on another host — still retains those keys): the tick moves past it to the next key at once, so a restart costs
no firing (at most :data:`MAX_SKIP` keys per tick). Fixed delay, not a cron parser: the next tick is armed
``interval_ms`` after the previous submit returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import ConfigError, TriggerError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers.options import check_delivery
from adk_actors.triggers.source import SourceHandle, TriggerSource, check_interval, start_source

__all__ = ["SCHEDULE_SOURCE", "ScheduleHandle", "ScheduleSource", "start_schedule"]

SCHEDULE_SOURCE = "adk_actors.triggers.schedule.ScheduleSource"
MAX_SKIP = 10_000
"""Duplicate keys one tick moves past at most (a restarted schedule catching up with its retained firings)."""


class ScheduleSource(TriggerSource):
    """A fixed-delay schedule (config: ``schedule_id``, ``template``); see the module docstring."""

    source_type = "schedule"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fired = 0
        self.last_ref: str | None = None
        self.refused = 0
        self.skipped = 0

    def poll(self) -> None:
        for _ in range(MAX_SKIP + 1):
            n = self.fired + 1
            delivery = {**self.config["template"], "idempotency_key": f"{self.config['schedule_id']}:{n}"}
            try:
                submitted = self.submit(delivery)
            except TriggerError as err:
                self.refused += 1
                self.last_error = err.reason
                return
            self.fired = n
            if not submitted.duplicate:
                self.last_ref = submitted.ref
                return
            self.skipped += 1  # fired by an earlier incarnation: this tick fires the next key instead

    def source_status(self) -> dict[str, Any]:
        return {
            "schedule_id": self.config.get("schedule_id"),
            "fired": self.fired,
            "last_ref": self.last_ref,
            "refused": self.refused,
            "skipped_duplicates": self.skipped,
        }


@dataclass(frozen=True, slots=True)
class ScheduleHandle(SourceHandle):
    """A started schedule: ``status()`` -> ``{"type": "schedule", "interval_ms", "fired", "last_ref",
    "schedule_id", "trigger", ...}``, ``stop()``."""


def start_schedule(
    trigger: str,
    schedule_id: str,
    interval_ms: int,
    delivery_template: Mapping[str, Any],
    *,
    initial_delay_ms: int | None = None,
    system: ActorSystemHandle | None = None,
) -> ScheduleHandle:
    """Start a fixed-delay schedule that submits ``delivery_template`` to ``trigger`` every ``interval_ms``
    (first after ``initial_delay_ms``, default ``interval_ms``).

    Raises:
        ConfigError: ``invalid_value`` (``schedule_id``, ``interval_ms``, ``initial_delay_ms``).
        TriggerError: ``invalid_delivery`` (the template, checked now with a placeholder key).
    """
    if not isinstance(schedule_id, str) or not 0 < len(schedule_id) <= 200 or any(c < " " for c in schedule_id):
        raise ConfigError("schedule_id must be a short name", reason="invalid_value", details={"key": "schedule_id"})
    check_interval(interval_ms, "interval_ms")
    if not isinstance(delivery_template, Mapping) or "idempotency_key" in delivery_template:
        raise TriggerError(
            "the template is a delivery without idempotency_key",
            reason="invalid_delivery",
            details={"key": "delivery_template", "rule": "not_a_template"},
        )
    check_delivery({**delivery_template, "idempotency_key": f"{schedule_id}:0"})
    started = start_source(
        SCHEDULE_SOURCE,
        trigger,
        {"schedule_id": schedule_id, "template": dict(delivery_template)},
        interval_ms=interval_ms,
        initial_delay_ms=initial_delay_ms,
        source_id=f"schedule:{trigger}:{schedule_id}",
        system=system,
    )
    return ScheduleHandle(started.source_id, started.hosts, started.system)
