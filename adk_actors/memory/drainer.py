"""The outbox drainer actor: runs :func:`~adk_actors.memory.drain.drain_outbox` passes for one (outbox, memory).

:class:`OutboxDrainer` is a tier-2 actor, one per (outbox, memory service), placed on a host by its id and
restarted by it (``permanent``). It runs passes as worker jobs, at most ``concurrency`` at once; after a pass that
found work it runs again, after an idle one it sleeps until the next row is due (a retry's backoff or a crashed
drainer's lease expiry, read from the outbox) and otherwise until a :class:`~adk_actors.memory.drain.Kick`. It
polls nothing. Start it with :func:`~adk_actors.memory.drain.ensure_drainer`.

Messages accepted: ``Kick`` (call or info: there may be work), ``AwaitIdle`` (call: answered ``True`` once a pass
found no row pending or claimed), ``Ping``/``GetStatus``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from adk_actors.errors import AdkError
from adk_actors.memory.drain import AwaitIdle, DrainerSpec, Kick
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["OutboxDrainer"]

_DRAIN = CallableRef.by_name("adk_actors.memory.drain.drain_outbox")
_RETRY_S: Final = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Due:
    """The timer of the next due row."""


class OutboxDrainer(GenServer):
    """Runs drain passes for one (outbox, memory service); see the module docstring for its messages."""

    def init(self, args: Any) -> Any:
        self.spec: DrainerSpec = args
        self.running = 0
        self.again = False
        self.timer: int | None = None
        self.waiters: list[CallCtx] = []
        self.passes = 0
        self.applied = 0
        self._schedule()
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Kick):
            self._schedule()
            return "ok"
        if isinstance(request, AwaitIdle):
            self.waiters.append(ctx)
            self._schedule()
            return DEFERRED
        return super().handle_call(request, ctx)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, Kick):
            self._schedule()

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Due):
            self.timer = None
            self._schedule()

    def status(self) -> dict[str, Any]:
        return {"running": self.running, "passes": self.passes, "applied": self.applied, "waiters": len(self.waiters)}

    def _schedule(self) -> None:
        if self.running >= self.spec.concurrency:
            self.again = True  # one more pass once a running one ends
            return
        if self.timer is not None:
            self.cancel_timer(self.timer)
            self.timer = None
        self.running += 1
        spec = self.spec
        # A pass must end before its lease does, or its rows go to another drainer halfway.
        deadline = time.monotonic() + spec.lease_ms / 1000.0
        self.run_job(_DRAIN, (spec.outbox, spec.memory, spec.lease_ms, spec.batch), deadline, self._done)

    def _done(self, value: Any, error: AdkError | None) -> None:
        self.running -= 1
        self.passes += 1
        if error is not None:
            self.log.warning("memory outbox drain failed", reason=error.reason)
            if self.timer is None:
                self.timer = self.start_timer(_RETRY_S, _Due())
            return
        self.applied += int(value.get("applied", 0))
        if value.get("claimed") or self.again:
            self.again = False
            self._schedule()
            while value.get("claimed", 0) >= self.spec.batch and self.running < self.spec.concurrency:
                self._schedule()  # a full batch: there is likely more, use the allowed concurrency
            return
        due = value.get("due_ms")
        if due is None:
            if self.running == 0:
                waiters, self.waiters = self.waiters, []
                for ctx in waiters:
                    self.reply(ctx, True)
            return
        if self.running == 0 and self.timer is None:
            self.timer = self.start_timer(max(0.0, float(due) / 1000.0), _Due())
