"""The trigger actor (tier 2, one per registered trigger, ``permanent`` in its host, registered ``trigger:<name>``).

It owns everything about its trigger's events: a bounded FIFO queue, the dedupe table (idempotency key -> event,
kept ``retention_ms`` / ``max_retained`` after the event is terminal), and its in-flight invocations, at most
``max_concurrency`` at once (an event waiting out a retry backoff keeps its slot). Each attempt is a stable run
(a Runner body, run id ``<event id>-<attempt>``) that the actor starts with an asynchronous ``Spawn`` and follows
with an asynchronous ``WaitRun`` call, so a handler never blocks. Every event has one absolute deadline (accept
time + ``min(event_timeout_ms, timeout_ms)``) that queue wait, backoff and execution all consume; each attempt is
cancelled at ``min(attempt_timeout_ms, remaining)``.

Memory mode keeps all this in the actor: if its host dies, the events die with it, and the restarted actor (a new
*incarnation*) answers ``await_event`` for an older event with ``failed`` / ``trigger_restarted``. Durable mode
(a :class:`~adk_actors.triggers.store.TriggerStore`) writes each accepted event and its outcome, so a restarted
actor re-runs what was pending; the deterministic run id of an attempt makes a second start of the same attempt
refused, and the actor follows the live run instead. Every store call runs on the host's I/O threads, one at
a time in order (a FIFO *store lane*), and its answer comes back as a message: a durable submit's reply waits for
its row (a second submit of the same key meanwhile gets the same ref), an attempt's run starts after its attempt
number is written, and awaiters get an outcome only once it is stored. Memory mode makes no store hops at all.

Accepts: calls ``SubmitEvent``, ``AwaitEvent`` (deferred until terminal), ``EventStatus``, ``CancelEvent``,
``TriggerStatus``, ``StopTrigger`` (deferred until every event is terminal), ``GetStatus``, ``Ping``.
Emits: ``Spawn`` calls to hosts, ``WaitRun`` / ``CancelRun`` calls to run actors, ``IndexWait`` to the run index
(``runs``) when a run's host is gone.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import AdkError, StorageError, TriggerError
from adk_actors.runner.core import RunnerBody
from adk_actors.runs import api as runs_api
from adk_actors.runs.logic import Cancelled, Completed, Failed, Paused
from adk_actors.runs.messages import INDEX_NAME, CancelRun, IndexWait, RunOptions, WaitRun
from adk_actors.runtime.host import InnerSpec, Spawn
from adk_actors.runtime.refs import LocalRef, host_name, place
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.triggers.messages import (
    AwaitEvent,
    CancelEvent,
    EventOutcome,
    EventStatus,
    StopTrigger,
    SubmitEvent,
    Submitted,
    TriggerStatus,
)
from adk_actors.triggers.options import (
    Delivery,
    TriggerOptions,
    admit_delivery,
    backoff_ms,
    event_timeout_ms,
    retryable,
    session_for,
)

__all__ = ["TriggerActor", "TriggerArgs"]

RUN_ACTOR = "adk_actors.runs.actor.RunActor"
RECENT = 20
_GRACE_S = 5.0
"""How long past an attempt's deadline the actor waits for the run's answer to its cancel."""
_RUN_RETENTION_MS = 60000
_DURABLE_RUN_RETENTION_MS = 600000
"""Durable mode keeps an attempt's run longer, so a trigger restarted within it follows the run's outcome."""
_STORE_IO_S = 120.0
"""The deadline of one store call on the I/O threads (a store that stalls longer fails the call)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerArgs:
    name: str
    runner: Any
    options: TriggerOptions
    hosts: int
    store: Any = None
    """Durable mode: a SQLAlchemy URL (the actor opens its own ``TriggerStore``), or a picklable ``TriggerStore``."""


@dataclass(slots=True)
class _Event:
    id: str
    delivery: Delivery
    accepted: float
    """Monotonic accept time (for ``duration_ms``)."""
    deadline: float
    """The absolute monotonic deadline of the whole event."""
    session: tuple[str, str]
    state: str = "queued"
    attempts: int = 0
    run_id: str | None = None
    run_ref: LocalRef | None = None
    attempt_deadline: float = 0.0
    timers: list[int] = field(default_factory=list)
    cancelling: str = ""
    """Why the active run is being cancelled: ``cancelled``, ``expired``, ``attempt_timeout`` (or ``""``)."""
    last_reason: str | None = None
    adopt: bool = False
    """Durable reload: the first attempt's run may still be live (started before the restart); follow it."""


@dataclass(frozen=True, slots=True)
class _Deadline:
    event_id: str


@dataclass(frozen=True, slots=True)
class _AttemptDeadline:
    event_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class _Retry:
    event_id: str


@dataclass(frozen=True, slots=True)
class _Purge:
    event_id: str


class TriggerActor(GenServer):
    """One registered trigger; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = ""
        self.runner: Any = None
        self.options = TriggerOptions()
        self.hosts = 1
        self.store: Any = None
        self.incarnation = uuid.uuid4().hex[:8]
        self.seq = itertools.count(1)
        self.queue: deque[str] = deque()
        self.events: dict[str, _Event] = {}
        self.active: set[str] = set()
        self.by_key: dict[str, str] = {}
        self.retained: OrderedDict[str, tuple[str, EventOutcome]] = OrderedDict()
        self.waiters: dict[str, list[CallCtx]] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self.counts = dict.fromkeys(
            ("accepted", "duplicates", "rejected", "completed", "failed", "cancelled", "expired"), 0
        )
        self.stopping: list[CallCtx] = []
        self.is_stopping = False
        self.rng = random.Random()
        # Durable mode only: the store lane and what waits on it.
        self.lane: deque[tuple[Callable[..., Any], tuple[Any, ...], Callable[[Any, AdkError | None], None]]] = deque()
        self.lane_busy = False
        self.loading = False
        self.held: list[tuple[Any, CallCtx]] = []
        """Calls that arrived while the pending events reload; handled once it landed."""
        self.accepting: dict[str, list[CallCtx]] = {}
        """Idempotency key -> the submits waiting for its row (the first is the one that started the accept)."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, TriggerArgs):
            raise TriggerError("a trigger needs TriggerArgs", reason="invalid_trigger_args")
        self.name, self.runner, self.options, self.hosts = args.name, args.runner, args.options, args.hosts
        if args.store is not None:
            from adk_actors.triggers.store import TriggerStore

            # Opening (engine, schema check) stays here so a bad store fails the registration itself.
            self.store = (TriggerStore(args.store) if isinstance(args.store, str) else args.store).open()
            self.loading = True
            self._store_job(_load, (self.store, self.name, self.options.retention_ms), self._loaded)
        return None

    # ---- calls ----------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if self.loading and isinstance(
            request, SubmitEvent | AwaitEvent | EventStatus | CancelEvent | TriggerStatus | StopTrigger
        ):
            self.held.append((request, ctx))
            return DEFERRED
        if isinstance(request, SubmitEvent):
            return self._submit(request.delivery, ctx)
        if isinstance(request, AwaitEvent | EventStatus | CancelEvent) and self._stored_only(request.event_id):
            self._store_job(
                self.store.outcome,
                (self.name, request.event_id, self._ref(request.event_id)),
                lambda stored, error: self._looked_up(request, ctx, stored, error),
            )
            return DEFERRED
        if isinstance(request, AwaitEvent):
            done = self._terminal(request.event_id)
            if done is not None:
                return done
            self.waiters.setdefault(request.event_id, []).append(ctx)
            return DEFERRED
        if isinstance(request, EventStatus):
            return self._event_status(request.event_id)
        if isinstance(request, CancelEvent):
            return self._cancel(request.event_id, "cancelled")
        if isinstance(request, TriggerStatus):
            return self._trigger_status()
        if isinstance(request, StopTrigger):
            self.is_stopping = True
            self.stopping.append(ctx)
            for event_id in list(self.events):
                self._cancel(event_id, "cancelled")
            self._maybe_stopped()
            return DEFERRED
        return super().handle_call(request, ctx)

    def _ref(self, event_id: str) -> str:
        return f"{self.name}/{event_id}"

    def _submit(self, delivery: Delivery, ctx: CallCtx) -> Any:
        delivery = admit_delivery(delivery, self.options)
        key = delivery.idempotency_key
        known = self.by_key.get(key)
        if known is not None:
            self.counts["duplicates"] += 1
            return Submitted(ref=self._ref(known), duplicate=True)
        waiting = self.accepting.get(key)
        if waiting is not None:  # this key's row is being written: answer with the same ref when it is
            waiting.append(ctx)
            return DEFERRED
        refusal = self._refusal()
        if refusal is not None and self.store is None:
            self.counts["rejected"] += 1
            raise refusal
        event_id = f"{self.incarnation}-{next(self.seq):x}"
        budget_ms = event_timeout_ms(self.options, delivery)
        if self.store is not None:
            # Written before the answer: an accepted delivery survives the host; a concurrent duplicate from
            # another node finds the stored key and gets that event's ref. A refused delivery is still looked up,
            # so a redelivered key is a duplicate even when the queue is full.
            self.accepting[key] = [ctx]
            self._store_job(
                _find_or_accept,
                (self.store, self.name, event_id, delivery, budget_ms, refusal is None),
                lambda existing, error: self._accepted(key, event_id, delivery, budget_ms, refusal, existing, error),
            )
            return DEFERRED
        self._enqueue(event_id, delivery, budget_ms / 1000.0)
        self.counts["accepted"] += 1
        self._pump()
        return Submitted(ref=self._ref(event_id), duplicate=False)

    def _refusal(self) -> TriggerError | None:
        if self.is_stopping:
            return TriggerError("the trigger is stopping", reason="trigger_stopping", details={"trigger": self.name})
        # A durable accept in flight holds a place: the queue never exceeds max_queue.
        if len(self.queue) + len(self.accepting) >= self.options.max_queue:
            return TriggerError(
                "the trigger's queue is full",
                reason="trigger_queue_full",
                details={"trigger": self.name, "max_queue": self.options.max_queue},
            )
        return None

    def _accepted(
        self,
        key: str,
        event_id: str,
        delivery: Delivery,
        budget_ms: int,
        refusal: TriggerError | None,
        existing: str | None,
        error: AdkError | None,
    ) -> None:
        callers = self.accepting.pop(key, [])
        if error is not None:
            failure = self._store_error(error)
            for ctx in callers:
                self.fail(ctx, failure)
            return
        if existing is not None:
            self.counts["duplicates"] += len(callers)
            for ctx in callers:
                self.reply(ctx, Submitted(ref=self._ref(existing), duplicate=True))
            return
        if refusal is not None:  # looked up only: the key is new and the delivery is refused
            self.counts["rejected"] += len(callers)
            for ctx in callers:
                self.fail(ctx, refusal)
            return
        self._enqueue(event_id, delivery, budget_ms / 1000.0)
        self.counts["accepted"] += 1
        self.counts["duplicates"] += len(callers) - 1
        for i, ctx in enumerate(callers):
            self.reply(ctx, Submitted(ref=self._ref(event_id), duplicate=i > 0))
        if self.is_stopping:  # accepted while a stop began: it is cancelled like the others
            self._cancel(event_id, "cancelled")
        self._pump()

    def _store_error(self, error: AdkError) -> AdkError:
        if isinstance(error, StorageError | TriggerError):
            return error
        return TriggerError(
            "the trigger store did not answer",
            reason="store_failed",
            details={"trigger": self.name, "cause": error.reason, "type": type(error).__name__},
        )

    def _enqueue(self, event_id: str, delivery: Delivery, budget_s: float, attempts: int = 0) -> _Event:
        now = time.monotonic()
        event = _Event(
            id=event_id,
            delivery=delivery,
            accepted=now,
            deadline=now + max(0.0, budget_s),
            session=session_for(self.options.session_policy, delivery),
            attempts=attempts,
            adopt=attempts > 0,
        )
        self.events[event_id] = event
        self.by_key[delivery.idempotency_key] = event_id
        self.queue.append(event_id)
        event.timers.append(self.start_timer(max(0.0, budget_s), _Deadline(event_id)))
        return event

    # ---- running events -------------------------------------------------------------------------------------
    def _pump(self) -> None:
        while self.queue and len(self.active) < self.options.max_concurrency:
            event = self.events[self.queue.popleft()]
            self.active.add(event.id)
            self._attempt(event)

    def _attempt(self, event: _Event) -> None:
        remaining = event.deadline - time.monotonic()
        if remaining <= 0:
            self._finish(event, "expired", reason="deadline")
            return
        mark = not event.adopt and self.store is not None
        if not event.adopt:
            event.attempts += 1
        attempt = event.attempts
        event.adopt = False
        event.state = "running"
        event.cancelling = ""
        run_id = f"trg{event.id}-{attempt}"
        event.run_id, event.run_ref = run_id, None
        attempt_s = min(self.options.retry.attempt_timeout_ms / 1000.0, remaining)
        event.attempt_deadline = time.monotonic() + attempt_s
        runner = copy.copy(self.runner)
        runner.options = dataclasses.replace(runner.options, run_timeout_ms=max(1, int(attempt_s * 1000)))
        user_id, session_id = event.session
        body = RunnerBody(
            runner=runner,
            user_id=user_id,
            session_id=session_id,
            input=event.delivery.payload,
            hosts=self.hosts,
        )
        spec = InnerSpec(
            local_id=run_id,
            actor=RUN_ACTOR,
            args=runs_api.RunArgs(run_id=run_id, body=body, options=RunOptions(retention_ms=self._run_retention_ms())),
            restart="temporary",
        )
        event.timers.append(self.start_timer(attempt_s, _AttemptDeadline(event.id, attempt)))
        if mark:  # the attempt number is written before its run starts (a restart then follows that run)
            self._store_job(
                self.store.mark_attempt,
                (self.name, event.id, attempt),
                lambda _value, error: self._marked(event.id, attempt, spec, error),
            )
            return
        self._spawn(event, attempt, spec)

    def _marked(self, event_id: str, attempt: int, spec: InnerSpec, error: AdkError | None) -> None:
        if error is not None:
            raise error  # let it crash: the restarted incarnation reloads the event from the store
        event = self._current(event_id, attempt)
        if event is not None:
            self._spawn(event, attempt, spec)

    def _spawn(self, event: _Event, attempt: int, spec: InnerSpec) -> None:
        assert event.run_id is not None
        run_id = event.run_id
        self.call(
            host_name(place(run_id, self.hosts)),
            Spawn(spec=spec),
            event.attempt_deadline + _GRACE_S,
            lambda ref, error: self._spawned(event.id, attempt, ref, error),
        )

    def _run_retention_ms(self) -> int:
        return _DURABLE_RUN_RETENTION_MS if self.store is not None else _RUN_RETENTION_MS

    def _current(self, event_id: str, attempt: int) -> _Event | None:
        event = self.events.get(event_id)
        if event is None or event.attempts != attempt or event.state != "running":
            return None
        return event

    def _spawned(self, event_id: str, attempt: int, ref: Any, error: AdkError | None) -> None:
        event = self._current(event_id, attempt)
        if event is None:
            return
        assert event.run_id is not None
        if error is not None and error.reason != "already_started":
            self._attempt_failed(event, error.reason, {"type": type(error).__name__})
            return
        # already_started: this attempt's run exists (a durable reload of a run that outlived the restart).
        event.run_ref = LocalRef(place(event.run_id, self.hosts), event.run_id)
        if event.cancelling:
            self._cancel_run(event)
        self.call(
            event.run_ref,
            WaitRun(),
            event.attempt_deadline + 2 * _GRACE_S,
            lambda outcome, err: self._run_ended(event_id, attempt, outcome, err),
        )

    def _run_ended(self, event_id: str, attempt: int, outcome: Any, error: AdkError | None) -> None:
        event = self._current(event_id, attempt)
        if event is None:
            return
        if error is not None:  # the run's host is gone (or the run retired): the index has its outcome
            assert event.run_id is not None
            self.call(
                INDEX_NAME,
                IndexWait(run_id=event.run_id),
                time.monotonic() + _GRACE_S,
                lambda found, err: self._indexed(event_id, attempt, found, err),
            )
            return
        self._settle(event, outcome)

    def _indexed(self, event_id: str, attempt: int, outcome: Any, error: AdkError | None) -> None:
        event = self._current(event_id, attempt)
        if event is None:
            return
        if error is not None:
            self._settle(event, Failed("run_lost", {"type": type(error).__name__}))
            return
        self._settle(event, outcome)

    def _settle(self, event: _Event, outcome: Any) -> None:
        if event.cancelling == "cancelled":
            self._finish(event, "cancelled", reason="cancelled")
        elif isinstance(outcome, Completed):
            self._finish(event, "completed", output=outcome.output)
        elif event.cancelling == "expired":
            self._finish(event, "expired", reason="deadline")
        elif event.cancelling == "attempt_timeout":
            self._attempt_failed(event, "attempt_timeout", {})
        elif isinstance(outcome, Cancelled):
            self._finish(event, "cancelled", reason=outcome.reason)
        elif isinstance(outcome, Paused):
            self._finish(event, "failed", reason="paused")
        elif isinstance(outcome, Failed):
            self._attempt_failed(event, outcome.reason, dict(outcome.details))
        else:
            self._finish(event, "failed", reason="unknown_outcome")

    def _attempt_failed(self, event: _Event, reason: str, details: dict[str, Any]) -> None:
        event.last_reason = reason
        if not retryable(reason, details) or event.attempts >= self.options.retry.max_attempts:
            self._finish(event, "failed", reason=reason)
            return
        delay = backoff_ms(self.options.retry, event.attempts, self.rng) / 1000.0
        if time.monotonic() + delay >= event.deadline:
            self._finish(event, "expired", reason="deadline")
            return
        event.state, event.run_ref = "retrying", None
        event.timers.append(self.start_timer(delay, _Retry(event.id)))

    def _cancel_run(self, event: _Event) -> None:
        if event.run_ref is None:
            return  # the spawn's answer will send the cancel
        self.call(event.run_ref, CancelRun(reason=event.cancelling), event.attempt_deadline + 2 * _GRACE_S, _ignore)

    def _cancel(self, event_id: str, why: str) -> bool:
        event = self.events.get(event_id)
        if event is None:
            if self._terminal(event_id) is None and not self._known_elsewhere(event_id):
                raise TriggerError("no such event", reason="unknown_event", details={"trigger": self.name})
            return False
        if event.state == "queued":
            self.queue.remove(event_id)
            self._finish(event, why, reason="deadline" if why == "expired" else "cancelled")
        elif event.state == "retrying":
            self._finish(event, why, reason="deadline" if why == "expired" else "cancelled")
        elif not event.cancelling or event.cancelling == "attempt_timeout":
            event.cancelling = why
            self._cancel_run(event)
        return True

    def _known_elsewhere(self, event_id: str) -> bool:
        """Memory mode: an id of an earlier incarnation (its events died with the host)."""
        return self.store is None and not event_id.startswith(self.incarnation + "-")

    # ---- timers ---------------------------------------------------------------------------------------------
    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Deadline):
            event = self.events.get(message.event_id)
            if event is not None:
                if event.state == "running":
                    if event.cancelling != "cancelled":
                        event.cancelling = "expired"
                        self._cancel_run(event)
                else:
                    self._cancel(event.id, "expired")
        elif isinstance(message, _AttemptDeadline):
            event = self._current(message.event_id, message.attempt)
            if event is not None and not event.cancelling:
                event.cancelling = "attempt_timeout"
                self._cancel_run(event)
        elif isinstance(message, _Retry):
            event = self.events.get(message.event_id)
            if event is not None and event.state == "retrying":
                self._attempt(event)
        elif isinstance(message, _Purge):
            self._forget(message.event_id)
        else:
            super().handle_timer(message)

    # ---- terminal -------------------------------------------------------------------------------------------
    def _finish(self, event: _Event, outcome: str, *, output: Any = None, reason: str | None = None) -> None:
        self.events.pop(event.id, None)
        self.active.discard(event.id)
        for timer in event.timers:
            self.cancel_timer(timer)
        event.state = "terminal"
        result = EventOutcome(
            outcome=outcome,
            ref=self._ref(event.id),
            run_id=event.run_id if event.attempts else None,
            output=output,
            attempts=event.attempts,
            reason=reason,
        )
        self.counts[outcome] += 1
        self.recent.appendleft(
            {
                "ref": result.ref,
                "outcome": outcome,
                "attempts": event.attempts,
                "duration_ms": int((time.monotonic() - event.accepted) * 1000),
                "reason": reason,
            }
        )
        if self.store is None:
            self._publish(event, result)
        else:  # awaiters get the outcome once it is stored (one outcome per row: a second finish is a no-op)
            self._store_job(
                self.store.finish,
                (self.name, event.id, result),
                lambda _done, error: self._stored(event, result, error),
            )
        self._pump()
        self._maybe_stopped()

    def _stored(self, event: _Event, result: EventOutcome, error: AdkError | None) -> None:
        if error is not None:
            raise error  # let it crash: the restarted incarnation reloads the event, still pending, from the store
        self._publish(event, result)

    def _publish(self, event: _Event, result: EventOutcome) -> None:
        key = event.delivery.idempotency_key
        if self.options.max_retained > 0 and self.options.retention_ms > 0:
            self.retained[event.id] = (key, result)
            while len(self.retained) > self.options.max_retained:
                old_id, _ = next(iter(self.retained.items()))
                self._forget(old_id)
            self.start_timer(self.options.retention_ms / 1000.0, _Purge(event.id))
        else:
            self._forget(event.id)
            self.by_key.pop(key, None)
        for ctx in self.waiters.pop(event.id, []):
            self.reply(ctx, result)

    def _forget(self, event_id: str) -> None:
        entry = self.retained.pop(event_id, None)
        if entry is not None and self.by_key.get(entry[0]) == event_id:
            del self.by_key[entry[0]]
        if self.store is not None:
            self._store_job(self.store.forget, (self.name, event_id), _crash_on_error)

    def _terminal(self, event_id: str) -> EventOutcome | None:
        entry = self.retained.get(event_id)
        if entry is not None:
            return entry[1]
        if event_id in self.events:
            return None
        if self._known_elsewhere(event_id):
            return EventOutcome(outcome="failed", ref=self._ref(event_id), reason="trigger_restarted")
        raise TriggerError(
            "no such event (or past its retention)", reason="unknown_event", details={"trigger": self.name}
        )

    def _stored_only(self, event_id: str) -> bool:
        """Durable mode: the event is in neither table here, so only the store can answer for it."""
        return self.store is not None and event_id not in self.events and event_id not in self.retained

    def _looked_up(self, request: Any, ctx: CallCtx, stored: EventOutcome | None, error: AdkError | None) -> None:
        if error is not None:
            self.fail(ctx, self._store_error(error))
            return
        if stored is None and self._stored_only(request.event_id):
            self.fail(
                ctx,
                TriggerError(
                    "no such event (or past its retention)", reason="unknown_event", details={"trigger": self.name}
                ),
            )
            return
        try:
            if stored is None:  # it became known meanwhile (retained or live): answer from memory
                value = self.handle_call(request, ctx)
            elif isinstance(request, AwaitEvent):
                value = stored
            elif isinstance(request, EventStatus):
                value = _terminal_status(self.name, stored)
            else:
                value = False
        except AdkError as err:
            self.fail(ctx, err)
            return
        if value is not DEFERRED:
            self.reply(ctx, value)

    def _maybe_stopped(self) -> None:
        if self.is_stopping and not self.events and self.stopping and not self.accepting and not self._lane_pending():
            for ctx in self.stopping:
                self.reply(ctx, True)
            self.stopping.clear()  # the facade stops the actor now (StopInner: a permanent actor is not restarted)

    # ---- status ---------------------------------------------------------------------------------------------
    def _event_status(self, event_id: str) -> dict[str, Any]:
        event = self.events.get(event_id)
        if event is None:
            done = self._terminal(event_id)
            assert done is not None
            return _terminal_status(self.name, done)
        return {
            "ref": self._ref(event_id),
            "trigger": self.name,
            "state": event.state,
            "attempts": event.attempts,
            "outcome": None,
            "run_id": event.run_id,
            "reason": event.last_reason,
            "deadline_in_ms": max(0, int((event.deadline - time.monotonic()) * 1000)),
        }

    def _trigger_status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": "durable" if self.store is not None else "memory",
            "queue_depth": len(self.queue),
            "active": len(self.active),
            "max_queue": self.options.max_queue,
            "max_concurrency": self.options.max_concurrency,
            **self.counts,
            "recent": list(self.recent),
        }

    def status(self) -> dict[str, Any]:
        return {
            "kind": "trigger",
            "trigger": self.name,
            "queue_depth": len(self.queue),
            "active": len(self.active),
            "waiters": sum(len(w) for w in self.waiters.values()),
        }

    # ---- durable mode: the store lane ------------------------------------------------------------------------
    def _store_job(
        self, fn: Callable[..., Any], args: tuple[Any, ...], on_done: Callable[[Any, AdkError | None], None]
    ) -> None:
        """Queue one blocking store call; calls run one at a time, in order, on the I/O threads."""
        self.lane.append((fn, args, on_done))
        self._next_store_job()

    def _next_store_job(self) -> None:
        if self.lane_busy or not self.lane:
            return
        fn, args, on_done = self.lane.popleft()
        self.lane_busy = True
        self.io_call(
            _blocking, (fn, *args), time.monotonic() + _STORE_IO_S, lambda v, e: self._store_done(on_done, v, e)
        )

    def _store_done(self, on_done: Callable[[Any, AdkError | None], None], value: Any, error: AdkError | None) -> None:
        self.lane_busy = False
        self._next_store_job()
        on_done(value, error)
        self._maybe_stopped()

    def _lane_pending(self) -> bool:
        return self.lane_busy or bool(self.lane)

    def _loaded(self, pending: Any, error: AdkError | None) -> None:
        if error is not None:
            raise error  # let it crash (the supervisor decides about the restart)
        for event in pending:
            self._enqueue(event.event_id, event.delivery, event.remaining_ms / 1000.0, event.attempts)
        self.loading = False
        self._pump()
        held, self.held = self.held, []
        for request, ctx in held:
            try:
                value = self.handle_call(request, ctx)
            except AdkError as err:
                self.fail(ctx, err)
                continue
            if value is not DEFERRED:
                self.reply(ctx, value)

    def terminate(self, reason: str) -> None:
        if self.store is not None:
            self.store.close()  # disposes of the engine's connections: no query


def _terminal_status(trigger: str, done: EventOutcome) -> dict[str, Any]:
    return {
        "ref": done.ref,
        "trigger": trigger,
        "state": "terminal",
        "attempts": done.attempts,
        "outcome": done.outcome,
        "run_id": done.run_id,
        "reason": done.reason,
        "deadline_in_ms": None,
    }


def _blocking(_token: Any, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def _load(store: Any, trigger: str, retention_ms: int) -> Any:
    store.purge(trigger, retention_ms)
    return store.pending(trigger)


def _find_or_accept(
    store: Any, trigger: str, event_id: str, delivery: Delivery, budget_ms: int, accept: bool
) -> str | None:
    """The event id already holding the delivery's key, else (``accept``) record the event and return ``None``."""
    known: str | None = store.find_key(trigger, delivery.idempotency_key)
    if known is not None or not accept:
        return known
    existing: str | None = store.accept(trigger, event_id, delivery, budget_ms)
    return existing


def _crash_on_error(_value: Any, error: AdkError | None) -> None:
    if error is not None:
        raise error  # let it crash: the restarted incarnation reloads from the store


def _ignore(_value: Any, _error: AdkError | None) -> None:
    pass
