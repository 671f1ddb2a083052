"""What a stable run's body sees: the :class:`RunBody` protocol and the :class:`RunContext` it works through.

A body (the Runner's turn driver, the planning loop, a test body) runs inside the run actor
(``runs/actor.py``); it emits events, finishes once and does non-blocking work only through its
:class:`RunContext`. Packages that write bodies import this module, never the actor's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from adk_actors.runs.logic import Completed, Failed, Paused
from adk_actors.runtime.server import OnReply

if TYPE_CHECKING:
    from adk_actors.runs.actor import RunActor

__all__ = ["BodyTimer", "RunBody", "RunContext"]


class RunBody(Protocol):
    """What a run does. ``start`` runs once in the run actor and must not block; work goes through ``run``."""

    def start(self, run: RunContext) -> None: ...


@dataclass(frozen=True, slots=True)
class BodyTimer:
    """A body's timer (``RunContext.start_timer``), delivered to the run actor itself."""

    message: Any


class RunContext:
    """The run body's handle on its run: emit events, finish once, and do non-blocking work."""

    def __init__(self, actor: RunActor) -> None:
        self._actor = actor

    @property
    def run_id(self) -> str:
        return self._actor.args.run_id

    @property
    def done(self) -> bool:
        return self._actor.log.done

    @property
    def ref(self) -> Any:
        """This run actor's ref (a sink other actors can send the body's messages to)."""
        return self._actor.my_ref()

    def emit(self, event: Any) -> int:
        """Append an event (delivered to subscribers); returns its sequence number."""
        return self._actor.emit(event)

    def complete(self, output: Any) -> None:
        self._actor.finish(Completed(output))

    def pause(self, event: Any) -> None:
        self._actor.finish(Paused(event))

    def fail(self, reason: str, details: dict[str, Any] | None = None) -> None:
        self._actor.finish(Failed(reason, dict(details or {})))

    def io_call(self, fn: Any, args: tuple[Any, ...], deadline: float, on_done: OnReply) -> int:
        return self._actor.io_call(fn, args, deadline, on_done)

    def cancel_io(self, io_id: int) -> None:
        self._actor.cancel_io(io_id)

    def run_job(
        self, fn: Any, args: tuple[Any, ...], deadline: float, on_done: OnReply, inline: bool = False
    ) -> str | None:
        return self._actor.run_job(fn, args, deadline, on_done, inline=inline)

    def call(self, ref: Any, request: Any, deadline: float, on_reply: OnReply) -> str:
        return self._actor.call(ref, request, deadline, on_reply)

    def send_to(self, ref: Any, message: Any) -> None:
        self._actor.send_to(ref, message)

    def start_timer(self, delay: float, message: Any) -> int:
        """``body.on_timer(run, message)`` is called after ``delay`` seconds."""
        return self._actor.start_timer(delay, BodyTimer(message))
