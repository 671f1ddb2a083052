"""Telemetry as actor messages: emit batches from actors, attach from any process.

Event names used by agents: ``agent.prompt.start`` / ``agent.prompt.stop`` (``duration_ms``) /
``agent.prompt.exception`` (``reason``), ``agent.model.start`` / ``agent.model.stop`` (``duration_ms``,
``outcome``), ``agent.tool.start`` / ``agent.tool.stop`` (``tool``, ``call_id``, ``duration_ms``, ``outcome``).
Metadata is structural only: agent, kind, invocation id, model, tool, call id, reason.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from adk_actors.errors import AskTimeout
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.telemetry.hub import TELEMETRY_NAME
from adk_actors.telemetry.messages import Attach, Detach, Emit, TelemetryDelivery, TelemetryEvent

__all__ = ["TELEMETRY_NAME", "Emit", "TelemetryDelivery", "TelemetryEvent", "TelemetrySubscription", "attach", "event"]


def event(name: str, measurements: dict[str, Any] | None = None, **metadata: Any) -> TelemetryEvent:
    """A telemetry event stamped now (metadata values must be structural: names, ids, reasons)."""
    return TelemetryEvent(name=name, measurements=dict(measurements or {}), metadata=metadata, timestamp=time.time())


class TelemetrySubscription:
    """Events matching the attached prefixes, received on a private endpoint of this process."""

    def __init__(self, handle: ActorSystemHandle, prefixes: tuple[str, ...], timeout: float | None) -> None:
        self.handle = handle
        self.handler_id = uuid.uuid4().hex
        self.endpoint = handle.open_endpoint()
        self._buffer: list[TelemetryEvent] = []
        try:
            address = handle.resolve(TELEMETRY_NAME)
            deadline = time.monotonic() + (handle.settings.ask_timeout_s if timeout is None else timeout)
            handle.ask_address(
                address, Attach(handler_id=self.handler_id, prefixes=prefixes), deadline, endpoint=self.endpoint.context
            )
        except BaseException:
            self.endpoint.close()
            raise

    def next(self, timeout: float) -> TelemetryEvent:
        """The next matching event.

        Raises:
            AskTimeout: none arrived within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while not self._buffer:
            message = self.endpoint.listen(max(0.0, deadline - time.monotonic()))
            if isinstance(message, TelemetryDelivery) and message.handler_id == self.handler_id:
                self._buffer.extend(message.events)
            elif message is None and time.monotonic() >= deadline:
                raise AskTimeout("no telemetry event before the timeout")
        return self._buffer.pop(0)

    def until(self, name: str, timeout: float) -> Iterator[TelemetryEvent]:
        """Yield events until (and including) the first one called ``name``."""
        while True:
            item = self.next(timeout)
            yield item
            if item.name == name:
                return

    def close(self) -> None:
        try:
            self.handle.cast(TELEMETRY_NAME, Detach(handler_id=self.handler_id))
        finally:
            self.endpoint.close()

    def __enter__(self) -> TelemetrySubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def attach(
    *prefixes: str, system: ActorSystemHandle | None = None, timeout: float | None = None
) -> TelemetrySubscription:
    """Subscribe this process to telemetry events whose names start with ``prefixes`` (default: all)."""
    handle = system if system is not None else current_system()
    return TelemetrySubscription(handle, tuple(prefixes) or ("",), timeout)
