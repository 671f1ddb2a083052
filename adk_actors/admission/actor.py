"""The admission controller: one tier-1 actor per node (registered ``admission``), a child of the root.

Accepts: calls ``Acquire`` (answered with a ``Permit`` when granted; ``PolicyDenied(reason="busy")`` when
rejected, ``PolicyDenied(reason="admission_timeout")`` when the queue deadline passes), ``GetStatus``, ``Ping``;
tells ``Release``. Owners are monitored: the controller holds a pidfd for every owner process and watches it, so
when a run's host dies (SIGKILL included) its permits are released and waiting requests granted — no polling.
Decisions are the pure logic of ``admission/logic.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from adk_actors.admission.logic import AdmissionConfig, AdmissionState, Grant, Reject, Waiting
from adk_actors.admission.messages import Acquire, Release
from adk_actors.errors import PolicyDenied
from adk_actors.runtime.pidwatch import PidWatch
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["ADMISSION_NAME", "AdmissionControl"]

ADMISSION_NAME = "admission"


@dataclass(frozen=True, slots=True)
class _Expire:
    pass


class AdmissionControl(GenServer):
    """Global and per-agent concurrency limits for runs; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = AdmissionState(AdmissionConfig())
        self.waiters: dict[str, CallCtx] = {}
        self.owners = PidWatch()

    def init(self, args: Any) -> Any:
        if isinstance(args, AdmissionConfig):
            self.state = AdmissionState(args)
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Acquire):
            now = time.monotonic()
            overflow = request.overflow or None
            if overflow not in (None, "reject", "queue"):
                raise PolicyDenied("overflow must be 'reject' or 'queue'", reason="invalid_admission_options")
            timeout = request.queue_timeout_ms if request.queue_timeout_ms >= 0 else None
            decision = self.state.acquire(
                ctx.call_id,
                request.agent,
                request.owner_pid,
                now,
                overflow=overflow,  # type: ignore[arg-type]  # checked to be one of the literals above
                queue_timeout_ms=timeout,
                caller_deadline=ctx.deadline,
            )
            if isinstance(decision, Grant):
                self._watch(request.owner_pid)
                return decision.permit
            if isinstance(decision, Reject):
                raise PolicyDenied("admission limits reached", reason=decision.reason, details={"agent": request.agent})
            assert isinstance(decision, Waiting)
            self.waiters[ctx.call_id] = ctx
            self._watch(request.owner_pid)
            self._arm()
            return DEFERRED
        return super().handle_call(request, ctx)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, Release):
            self._grant(self.state.release(message.permit_id))
        else:
            super().handle_info(message, sender)

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Expire):
            for reject in self.state.expire(time.monotonic()):
                ctx = self.waiters.pop(reject.request_id, None)
                if ctx is not None:
                    self.fail(ctx, PolicyDenied("admission queue deadline passed", reason=reject.reason))
            self._arm()
            return
        super().handle_timer(message)

    def _arm(self) -> None:
        deadline = self.state.next_deadline()
        if deadline is not None:
            self.start_timer(max(0.0, deadline - time.monotonic()), _Expire())

    def _grant(self, grants: list[Grant]) -> None:
        for grant in grants:
            ctx = self.waiters.pop(grant.request_id, None)
            if ctx is None or time.monotonic() > ctx.deadline:
                self._grant(self.state.release(grant.permit.permit_id))  # the caller is gone
                continue
            self.reply(ctx, grant.permit)
        self._unwatch_idle()

    # ---- owner monitoring -----------------------------------------------------------------------------------
    def _watch(self, pid: int) -> None:
        if not self.owners.watch(pid):
            self._owner_exited(pid)

    def _unwatch_idle(self) -> None:
        self.owners.keep_only(self.state.owners())

    def watch_fds(self) -> list[int]:
        return self.owners.fds()

    def handle_ready(self, fds: list[int]) -> None:
        for pid in self.owners.exited(fds):
            self._owner_exited(pid)

    def _owner_exited(self, pid: int) -> None:
        released, dropped, grants = self.state.owner_exited(pid)
        if released or dropped:
            self.log.warning(
                "admission owner exited; permits released", owner_pid=pid, released=len(released), dropped=len(dropped)
            )
        for request_id in dropped:
            self.waiters.pop(request_id, None)
        self._grant(grants)

    def terminate(self, reason: str) -> None:
        self.owners.close()

    def status(self) -> dict[str, Any]:
        return {"kind": "admission", **self.state.snapshot(), "watched_owners": len(self.owners)}
