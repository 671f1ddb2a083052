"""The router: fire-and-forget delivery on behalf of external callers.

A TCP ``tell`` from outside the system blocks while its target is busy; a ``tell`` to the router does not,
because the router only ever re-sends (actor-side sends are asynchronous).

Accepts: ``Route(target, message)`` (tell), calls ``GetStatus`` / ``Ping``. Emits: ``message`` to ``target``
(an address, or a registered name forwarded through the registry).
"""

from __future__ import annotations

from typing import Any

from adk_actors.runtime.messages import Route
from adk_actors.runtime.server import GenServer

__all__ = ["Router"]


class Router(GenServer):
    """Always-responsive relay for fire-and-forget tells."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.routed = 0

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, Route):
            self.routed += 1
            self.send_to(message.target, message.message)
        else:
            super().handle_info(message, sender)

    def status(self) -> dict[str, Any]:
        return {"kind": "router", "routed": self.routed}
