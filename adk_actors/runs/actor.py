"""The run actor (tier 2, one per stable run).

A run is started by :func:`adk_actors.runs.start` on the host chosen by ``blake2b(run_id)``; it is not owned by
the caller, so the caller may disconnect or die while the run goes on. The actor owns the run's
:class:`~adk_actors.runs.logic.RunLog` and subscriptions; the *body* (a picklable object: the Runner's turn
driver, or a test body) does the work through a :class:`~adk_actors.runs.body.RunContext` and never blocks.
``RunBody``, ``RunContext`` (``runs/body.py``) and ``INDEX_NAME`` (``runs/messages.py``) are re-exported here for
older imports; other packages import them from their own modules, never this one.

Accepts: calls ``RunStatus``, ``WaitRun`` (deferred until terminal), ``SubscribeRun``, ``CancelRun``,
``ResumeRun`` (a paused run hands out the body of its resumed successor, once); tells ``AckRun``,
``UnsubscribeRun``; any other message goes to the body's ``on_message(run, message)`` (the Runner's events).
Emits: ``RunMessage`` to subscribers, ``RunStarted`` / ``RunFinished`` to the run index (``runs``). After the
terminal outcome the actor stays for ``retention_ms`` (status, wait and late subscribers), then exits.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError, RunError
from adk_actors.runs.body import BodyTimer, RunBody, RunContext
from adk_actors.runs.logic import (
    Cancelled,
    CreditSubscription,
    Delivery,
    Failed,
    Outcome,
    Paused,
    PushSubscription,
    RunLog,
)
from adk_actors.runs.messages import (
    INDEX_NAME,
    AckRun,
    CancelRun,
    ResumeRun,
    RunFinished,
    RunMessage,
    RunOptions,
    RunStarted,
    RunStatus,
    SubscribeRun,
    UnsubscribeRun,
    WaitRun,
)
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["INDEX_NAME", "RunActor", "RunArgs", "RunBody", "RunContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunArgs:
    run_id: str
    body: Any
    options: RunOptions
    parent_run_id: str = ""


@dataclass(frozen=True, slots=True)
class _Retire:
    pass


class RunActor(GenServer):
    """One stable run; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args = RunArgs(run_id="", body=None, options=RunOptions())
        self.log = RunLog()
        self.subs: dict[str, PushSubscription | CreditSubscription] = {}
        self.waiters: list[CallCtx] = []
        self.context = RunContext(self)
        self.created_at = time.time()
        self.finished_at = 0.0
        self.resumed_to = ""

    def init(self, args: Any) -> Any:
        if not isinstance(args, RunArgs):
            raise RunError("a run needs RunArgs", reason="invalid_run")
        self.args = args
        self.log = RunLog(args.options.max_buffered_events)
        host_id = self.my_ref().host_id if hasattr(self.my_ref(), "host_id") else -1
        self.send_to(
            INDEX_NAME,
            RunStarted(
                run_id=args.run_id,
                host_id=host_id,
                host_pid=os.getpid(),
                retention_ms=args.options.retention_ms,
                parent_run_id=args.parent_run_id,
            ),
        )
        self.start_timer(0.0, _Start())
        return None

    # ---- the body's side ----------------------------------------------------------------------------------
    def emit(self, event: Any) -> int:
        seq = self.log.append(event)
        self._deliver()
        return seq

    def finish(self, outcome: Outcome) -> None:
        if self.log.finish(outcome) is None:
            return  # exactly one terminal outcome: the first wins
        self.finished_at = time.time()
        self.send_to(INDEX_NAME, RunFinished(run_id=self.args.run_id, outcome=outcome))
        for ctx in self.waiters:
            self.reply(ctx, outcome)
        self.waiters.clear()
        self._deliver()
        self.start_timer(self.args.options.retention_ms / 1000.0, _Retire())

    def _body(self, method: str, *args: Any) -> None:
        hook = getattr(self.args.body, method, None)
        if hook is None:
            return
        try:
            hook(self.context, *args)
        except AdkError as err:
            self.finish(Failed(err.reason, {"type": type(err).__name__}))
        except Exception as exc:
            self.finish(Failed("run_body_failed", {"exception_type": type(exc).__name__}))

    # ---- messages -------------------------------------------------------------------------------------------
    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Start):
            self._body("start")
        elif isinstance(message, BodyTimer):
            if not self.log.done:
                self._body("on_timer", message.message)
        elif isinstance(message, _Retire):
            self.stop("normal")
        else:
            super().handle_timer(message)

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, RunStatus):
            return self._status()
        if isinstance(request, WaitRun):
            if self.log.outcome is not None:
                return self.log.outcome
            self.waiters.append(ctx)
            return DEFERRED
        if isinstance(request, SubscribeRun):
            subscriber = request.subscriber if request.subscriber is not None else ctx.reply_to
            after = self.log.start_point(request.after_seq)
            sub = CreditSubscription(subscriber, after) if request.credit else PushSubscription(subscriber, after)
            self.subs[request.subscription_id] = sub
            self.reply(ctx, {"subscription_id": request.subscription_id, "last_seq": self.log.last_seq})
            self._deliver()
            return DEFERRED
        if isinstance(request, ResumeRun):
            return self._claim_resume(request)
        if isinstance(request, CancelRun):
            if not self.log.done:
                self._body("cancel", request.reason)
                self.finish(Cancelled(request.reason))
            return self.log.outcome
        return super().handle_call(request, ctx)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, AckRun):
            sub = self.subs.get(message.subscription_id)
            if isinstance(sub, CreditSubscription) and sub.ack(message.seq):
                if sub.done(self.log):
                    self.subs.pop(message.subscription_id, None)
                self._deliver()
        elif isinstance(message, UnsubscribeRun):
            self.subs.pop(message.subscription_id, None)
        elif hasattr(self.args.body, "on_message"):
            self._body("on_message", message)
        else:
            super().handle_info(message, sender)

    def _claim_resume(self, request: ResumeRun) -> Any:
        outcome = self.log.outcome
        if not isinstance(outcome, Paused):
            raise RunError(
                "only a paused run can be resumed",
                reason="not_paused",
                details={
                    "run_id": self.args.run_id,
                    "state": "running" if outcome is None else type(outcome).__name__.lower(),
                },
            )
        if self.resumed_to:
            raise RunError(
                "the run was already resumed",
                reason="already_resumed",
                details={"run_id": self.args.run_id, "resumed_to": self.resumed_to},
            )
        resumed = getattr(self.args.body, "resumed", None)
        if resumed is None:
            raise RunError(
                "this run's body cannot be resumed", reason="not_resumable", details={"run_id": self.args.run_id}
            )
        body = resumed(outcome.event, request.response)  # validation errors leave the run resumable
        self.resumed_to = request.new_run_id
        return body

    def _deliver(self) -> None:
        for sub_id, sub in list(self.subs.items()):
            deliveries: list[Delivery] = sub.pending(self.log)
            for d in deliveries:
                self.send_to(
                    sub.subscriber,
                    RunMessage(
                        run_id=self.args.run_id, subscription_id=sub_id, seq=d.seq, item=d.item, terminal=d.terminal
                    ),
                )
            if isinstance(sub, PushSubscription) and self.log.done and sub.after_seq >= self.log.terminal_seq:
                self.subs.pop(sub_id, None)

    def _status(self) -> dict[str, Any]:
        outcome = self.log.outcome
        state = "running" if outcome is None else type(outcome).__name__.lower()
        return {
            "run_id": self.args.run_id,
            "state": state,
            "last_seq": self.log.last_seq,
            "dropped_events": self.log.dropped,
            "subscribers": len(self.subs),
            "created_at": self.created_at,
            "finished_at": self.finished_at or None,
            "parent_run_id": self.args.parent_run_id or None,
            "resumed_to": self.resumed_to or None,
            "outcome": outcome,
        }

    def terminate(self, reason: str) -> None:
        if not self.log.done:  # the actor itself crashed, or was stopped from outside: record exactly one outcome
            outcome: Outcome = Failed("run_crashed") if reason == "crash" else Cancelled("shutdown")
            self.log.finish(outcome)
            self._body("cancel", "shutdown")
            self.send_to(INDEX_NAME, RunFinished(run_id=self.args.run_id, outcome=outcome))
            for ctx in self.waiters:
                self.reply(ctx, outcome)
            self._deliver()

    def status(self) -> dict[str, Any]:
        return {"kind": "run", **{k: v for k, v in self._status().items() if k != "outcome"}}


@dataclass(frozen=True, slots=True)
class _Start:
    pass
