"""The telemetry hub: one tier-1 actor per node (registered ``telemetry``) fanning events out to subscribers.

Handlers in *your* process do not exist inside actor processes, so telemetry travels as messages: emitters send
batches of :class:`TelemetryEvent` (``Emit``), and every attached subscriber — an endpoint in any process —
receives the matching ones (``TelemetryDelivery``). Deliveries are fire-and-forget actor sends, so a slow
subscriber never blocks an emitter; ``Detach`` (sent when a subscription closes) removes a handler.

The hub also keeps the node's bounded metrics: every emitted event feeds a
:class:`~adk_actors.observability.metrics.MetricsRegistry` (the mapping is
:func:`~adk_actors.observability.metrics.record_event`), and ``GetMetrics`` answers with its snapshot. An event
that fails to map is counted (``metric_errors``) and the rest of the batch still fans out.

Accepts: calls ``Attach``, ``GetMetrics``, ``GetStatus``, ``Ping``; tells ``Emit``, ``Detach``.
"""

from __future__ import annotations

from typing import Any

from adk_actors.errors import AdkError
from adk_actors.observability.metrics import MetricsRegistry, record_event
from adk_actors.runtime.server import CallCtx, GenServer
from adk_actors.telemetry.messages import Attach, Detach, Emit, GetMetrics, TelemetryDelivery

__all__ = ["TELEMETRY_NAME", "TelemetryHub"]

TELEMETRY_NAME = "telemetry"
MAX_HANDLERS = 1024


class TelemetryHub(GenServer):
    """Fan-out of telemetry events; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handlers: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self.emitted = 0
        self.delivered = 0
        self.metrics = MetricsRegistry()
        self.metric_errors = 0

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Attach):
            if len(self.handlers) >= MAX_HANDLERS and request.handler_id not in self.handlers:
                raise AdkError("too many telemetry handlers", reason="too_many_handlers", details={"max": MAX_HANDLERS})
            self.handlers[request.handler_id] = (ctx.reply_to, tuple(request.prefixes))
            return request.handler_id
        if isinstance(request, GetMetrics):
            return self.metrics.snapshot()
        return super().handle_call(request, ctx)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, Emit):
            self.emitted += len(message.events)
            for event in message.events:
                try:
                    record_event(self.metrics, event.name, event.measurements, event.metadata)
                except Exception:  # a malformed event must not cost the batch its delivery
                    self.metric_errors += 1
            for handler_id, (target, prefixes) in list(self.handlers.items()):
                matching = tuple(e for e in message.events if e.name.startswith(prefixes))
                if matching:
                    self.delivered += len(matching)
                    self.send_to(target, TelemetryDelivery(handler_id=handler_id, events=matching))
        elif isinstance(message, Detach):
            self.handlers.pop(message.handler_id, None)
        else:
            super().handle_info(message, sender)

    def status(self) -> dict[str, Any]:
        return {
            "kind": "telemetry",
            "handlers": len(self.handlers),
            "emitted": self.emitted,
            "delivered": self.delivered,
            "metric_instruments": len(self.metrics.instruments),
            "metric_overflowed": self.metrics.overflowed,
            "metric_errors": self.metric_errors,
        }
