"""Messages of the telemetry hub."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adk_actors.runtime.messages import Request

__all__ = ["Attach", "Detach", "Emit", "GetMetrics", "TelemetryDelivery", "TelemetryEvent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryEvent:
    """One telemetry event: a dotted ``name`` (``agent.prompt.stop``), numbers and structural metadata."""

    name: str
    measurements: dict[str, Any] = field(default_factory=dict)
    """Numbers only (``duration_ms``, counts)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Structural tags only (agent, tool, call id, reason) — never prompts, content, arguments or secrets."""
    timestamp: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Emit:
    """A batch of events from one emitter, told to the hub (``telemetry``).

    Agent actors queue the events of each finished turn and send the queue 20 ms after its first event, so one
    ``Emit`` may carry several turns' events; events are never sent one message each.
    """

    events: tuple[TelemetryEvent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Attach:
    """Deliver events whose name starts with one of ``prefixes`` to the caller's endpoint."""

    handler_id: str
    prefixes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Detach:
    handler_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryDelivery:
    handler_id: str
    events: tuple[TelemetryEvent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMetrics(Request[dict[str, Any]]):
    """Ask the hub for its metrics snapshot (``MetricsRegistry.snapshot()``, JSON-safe)."""
