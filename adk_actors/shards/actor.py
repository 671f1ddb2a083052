"""The service actor (one service owned by one actor) and the shard router (one service actor per exact scope).

``ServiceActor`` hosts one service object built in its own process from :class:`~.messages.ServiceArgs` and applies
``ServiceOp`` calls to it, one at a time. As a *shard* (``args.router`` set) it also checks on a timer that the
router that started it is alive and still owns it, and stops itself otherwise: a shard never outlives its router by
more than one heartbeat.

``ShardRouter`` owns the table of shards: one tier-2 ``ServiceActor`` per exact scope key, started on first use on
the host chosen by ``blake2b(shard id) mod hosts`` and supervised there (``RouterArgs.shard_restart``). It applies the
calls of one scope in arrival order (one call in flight per shard, the rest queued), bounds the active scopes (an
idle shard is stopped, least recently used first, to admit a new scope; when all are busy a cold route waits in a
bounded queue or is refused with ``StorageError(reason="<kind>_shard_capacity_reached")``) and stops shards left
idle for ``idle_timeout_s``. A call that finds its shard gone (``noproc``: it stopped itself, or its host was
restarted) is retried once on a new shard; a call whose shard crashed is not (it may have been applied).

Accepts — ``ServiceActor``: calls ``ServiceOp``, ``CheckService``, ``GetStatus``, ``Ping``. ``ShardRouter``: calls
``RoutedOp``, ``ShardCheck``, ``StopShards``, ``GetStatus``, ``Ping``. Emits: ``Spawn`` / ``StopInner`` calls to hosts,
``ServiceOp`` calls to shards, ``ShardCheck`` calls from shards to their router.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import ActorCrashed, AdkError, ConfigError, StorageError, ValidationError
from adk_actors.runtime.host import InnerSpec, Spawn, StopInner
from adk_actors.runtime.refs import LocalRef, host_name, place
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.shards.logic import ShardLoad, admit, idle_expired
from adk_actors.shards.messages import (
    CheckService,
    RoutedOp,
    RouterArgs,
    ServiceArgs,
    ServiceOp,
    ShardCheck,
    StopShards,
)

__all__ = ["SERVICE_ACTOR", "ServiceActor", "ShardRouter"]

SERVICE_ACTOR = "adk_actors.shards.actor.ServiceActor"
MAX_STATUS_SHARDS = 100


@dataclass(frozen=True, slots=True)
class _Heartbeat:
    pass


@dataclass(frozen=True, slots=True)
class _Sweep:
    pass


class ServiceActor(GenServer):
    """Owns one service object; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args = ServiceArgs(build=None)  # type: ignore[arg-type]  # replaced in init
        self.service: Any = None
        self.unavailable: AdkError | None = None
        self.ops = 0

    def init(self, args: Any) -> Any:
        if not isinstance(args, ServiceArgs):
            raise ConfigError("a service actor needs ServiceArgs", reason="invalid_service_args")
        self.args = args
        try:
            build = args.build.resolve()
            self.service = build(*args.build_args, *(args.key or ()))
        except AdkError as err:
            # Kept and answered to every call: a store that cannot open must not become a restart loop.
            self.unavailable = err
        except Exception as exc:
            self.unavailable = StorageError(
                "the service could not be built",
                reason="service_unavailable",
                details={"kind": args.kind, "error": type(exc).__name__},
            )
        if args.router is not None and args.heartbeat_s > 0:
            self.start_timer(args.heartbeat_s, _Heartbeat())
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, ServiceOp):
            return self._apply(request)
        if isinstance(request, CheckService):
            if self.unavailable is not None:
                raise self.unavailable
            return True
        return super().handle_call(request, ctx)

    def _apply(self, op: ServiceOp) -> Any:
        if not isinstance(op.method, str) or op.method not in self.args.methods:
            raise ConfigError(
                f"not a {self.args.kind} service method",
                reason="unknown_method",
                details={"method": str(op.method)[:64]},
            )
        if self.unavailable is not None:
            raise self.unavailable
        self.ops += 1
        attr = getattr(self.service, op.method)
        if not callable(attr):  # a property of the contract (a bound, a name)
            return attr
        try:
            inspect.signature(attr).bind(*op.args, **op.kwargs)
        except TypeError:
            raise ValidationError(
                "malformed service request", reason="invalid_arguments", details={"method": op.method}
            ) from None
        # The service's AdkError fails this call only; anything else is a crash, and the supervisor decides.
        return attr(*op.args, **op.kwargs)

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Heartbeat):
            check = ShardCheck(local_id=self._child_id, nonce=self.args.router_nonce)
            deadline = time.monotonic() + max(self.args.heartbeat_s, 1.0)
            self.call(self.args.router, check, deadline, self._checked)
            return
        super().handle_timer(message)

    def _checked(self, owned: Any, error: AdkError | None) -> None:
        if error is not None or owned is not True:
            self.log.info(
                "shard abandoned by its router; stopping",
                shard=self._child_id,
                why=error.reason if error is not None else "not_owned",
            )
            self.stop("normal")
            return
        self.start_timer(self.args.heartbeat_s, _Heartbeat())

    def terminate(self, reason: str) -> None:
        close = getattr(self.service, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()

    def status(self) -> dict[str, Any]:
        return {
            "kind": f"{self.args.kind}_shard" if self.args.router is not None else f"{self.args.kind}_service",
            "operations": self.ops,
            "available": self.unavailable is None,
        }


@dataclass(slots=True)
class _Shard:
    key: tuple[str, ...]
    local_id: str
    ref: LocalRef | None = None
    state: str = "starting"  # starting | ready
    in_flight: bool = False
    queue: deque[tuple[ServiceOp, CallCtx, int]] = field(default_factory=deque)
    """Calls waiting behind the one in flight: (op, ctx, retries so far)."""
    last_used: float = field(default_factory=time.monotonic)

    def load(self) -> ShardLoad:
        busy = self.state != "ready" or self.in_flight or bool(self.queue)
        return ShardLoad(key=self.key, busy=busy, last_used=self.last_used)


class ShardRouter(GenServer):
    """Routes each scope's calls to that scope's shard; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args: RouterArgs | None = None
        self.nonce = ""
        self.seq = itertools.count(1)
        self.shards: dict[tuple[str, ...], _Shard] = {}
        self.by_local: dict[str, tuple[str, ...]] = {}
        self.cold: deque[tuple[tuple[str, ...], ServiceOp, CallCtx]] = deque()
        self.counts = {"started": 0, "evicted": 0, "idle_stopped": 0, "refused": 0, "rerouted": 0}

    # ---- lifecycle ---------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, RouterArgs):
            raise ConfigError("a shard router needs RouterArgs", reason="invalid_router_args")
        self.args = args
        # A new incarnation does not own the shards of an earlier one: they see it at their next heartbeat.
        self.nonce = uuid.uuid4().hex[:16]
        if args.idle_timeout_s is not None:
            self.start_timer(self._sweep_period(), _Sweep())
        return None

    def _sweep_period(self) -> float:
        assert self.args is not None and self.args.idle_timeout_s is not None
        return max(self.args.idle_timeout_s / 2, 0.05)

    @property
    def kind(self) -> str:
        return self.args.service.kind if self.args is not None else "service"

    # ---- calls ---------------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, RoutedOp):
            self._route(_check_key(request.key), request.op, ctx)
            return DEFERRED
        if isinstance(request, ShardCheck):
            return request.nonce == self.nonce and request.local_id in self.by_local
        if isinstance(request, StopShards):
            return self._stop_all(ctx)
        return super().handle_call(request, ctx)

    def _route(self, key: tuple[str, ...], op: ServiceOp, ctx: CallCtx) -> None:
        args = self.args
        assert args is not None
        decision = admit(
            key,
            {k: s.load() for k, s in self.shards.items()},
            max_active=args.max_active_scopes,
            cold_waiting=len(self.cold),
            cold_queue=args.cold_queue,
        )
        if decision.action == "refuse":
            self.counts["refused"] += 1
            raise StorageError(
                f"every {self.kind} shard is busy and no more scopes may be active",
                reason=f"{self.kind}_shard_capacity_reached",
                details={"max_active_scopes": args.max_active_scopes, "cold_queue": args.cold_queue},
            )
        if decision.action == "queue":
            self.cold.append((key, op, ctx))
            return
        if decision.action == "evict_then_start":
            assert isinstance(decision.victim, tuple)
            self._stop_shard(decision.victim, "evicted")
        shard = self.shards.get(key) if decision.action == "warm" else self._start(key)
        assert shard is not None
        self._enqueue(shard, op, ctx, 0)

    def _enqueue(self, shard: _Shard, op: ServiceOp, ctx: CallCtx, tries: int) -> None:
        assert self.args is not None
        if len(shard.queue) >= self.args.max_queue_per_scope:
            raise StorageError(
                f"too many calls wait for this {self.kind} scope",
                reason=f"{self.kind}_shard_queue_full",
                details={"max_queue_per_scope": self.args.max_queue_per_scope},
            )
        shard.queue.append((op, ctx, tries))
        self._pump(shard)

    def _start(self, key: tuple[str, ...]) -> _Shard:
        args = self.args
        assert args is not None
        local_id = f"{self.kind}-shard-{self.nonce}-{next(self.seq)}"
        shard = _Shard(key=key, local_id=local_id)
        self.shards[key] = shard
        self.by_local[local_id] = key
        self.counts["started"] += 1
        spec = InnerSpec(
            local_id=local_id,
            actor=SERVICE_ACTOR,
            args=dataclasses.replace(
                args.service, key=key, router=self.my_ref(), router_nonce=self.nonce, heartbeat_s=args.heartbeat_s
            ),
            restart=args.shard_restart,  # type: ignore[arg-type]  # checked by the client
        )
        host = host_name(place(local_id, args.hosts))
        deadline = time.monotonic() + args.spawn_timeout_s
        self.call(host, Spawn(spec=spec), deadline, lambda ref, error: self._started(local_id, ref, error))
        return shard

    def _started(self, local_id: str, ref: Any, error: AdkError | None) -> None:
        shard = self._shard_of(local_id)
        if shard is None:  # stopped while starting
            if isinstance(ref, LocalRef):
                self._stop_ref(ref)
            return
        if error is not None or not isinstance(ref, LocalRef):
            self._forget(shard)
            failure = StorageError(
                f"the {self.kind} shard could not be started",
                reason=f"{self.kind}_shard_start_failed",
                details={"error_reason": error.reason if error is not None else "no_ref"},
            )
            for _op, ctx, _tries in shard.queue:
                self.fail(ctx, failure)
            self._admit_cold()
            return
        shard.ref, shard.state = ref, "ready"
        self._pump(shard)

    def _pump(self, shard: _Shard) -> None:
        while shard.state == "ready" and not shard.in_flight and shard.queue:
            op, ctx, tries = shard.queue.popleft()
            if time.monotonic() > ctx.deadline:
                continue  # the asker gave up: never apply a call nobody waits for
            shard.in_flight = True
            self.call(shard.ref, op, ctx.deadline, self._on_done(shard.local_id, op, ctx, tries))

    def _on_done(self, local_id: str, op: ServiceOp, ctx: CallCtx, tries: int) -> Any:
        return lambda value, error: self._done(local_id, op, ctx, tries, value, error)

    def _done(self, local_id: str, op: ServiceOp, ctx: CallCtx, tries: int, value: Any, error: AdkError | None) -> None:
        shard = self._shard_of(local_id)
        if (
            shard is not None
            and isinstance(error, ActorCrashed)
            and error.reason == "noproc"
            and tries == 0
            and time.monotonic() <= ctx.deadline
        ):
            # The shard was gone before the call reached it (it stopped itself, or its host was restarted): the
            # call was not applied, so it may go to a new shard, ahead of the calls that queued behind it.
            self.counts["rerouted"] += 1
            waiting = list(shard.queue)
            self._forget(shard)
            fresh = self._start(shard.key)
            fresh.queue.extend([(op, ctx, 1), *waiting])
            return
        if error is not None:
            self.fail(ctx, error)
        else:
            self.reply(ctx, value)
        if shard is not None:
            shard.in_flight = False
            shard.last_used = time.monotonic()
            self._pump(shard)
        self._admit_cold()

    def _admit_cold(self) -> None:
        """Start waiting cold routes, in arrival order, while there is room (or an idle shard to stop)."""
        assert self.args is not None
        while self.cold:
            key, op, ctx = self.cold[0]
            if time.monotonic() > ctx.deadline:
                self.cold.popleft()
                continue
            shard = self.shards.get(key)
            if shard is None:
                decision = admit(
                    key,
                    {k: s.load() for k, s in self.shards.items()},
                    max_active=self.args.max_active_scopes,
                    cold_waiting=0,
                    cold_queue=0,
                )
                if decision.action == "refuse":
                    return
                if decision.action == "evict_then_start":
                    assert isinstance(decision.victim, tuple)
                    self._stop_shard(decision.victim, "evicted")
                shard = self._start(key)
            self.cold.popleft()
            try:
                self._enqueue(shard, op, ctx, 0)
            except AdkError as err:
                self.fail(ctx, err)

    # ---- stopping shards -----------------------------------------------------------------------------------------
    def _shard_of(self, local_id: str) -> _Shard | None:
        key = self.by_local.get(local_id)
        shard = self.shards.get(key) if key is not None else None
        return shard if shard is not None and shard.local_id == local_id else None

    def _forget(self, shard: _Shard) -> None:
        if self.shards.get(shard.key) is shard:
            del self.shards[shard.key]
        self.by_local.pop(shard.local_id, None)

    def _stop_shard(self, key: tuple[str, ...], why: str) -> None:
        shard = self.shards.get(key)
        if shard is None:
            return
        self._forget(shard)
        self.counts[why] += 1
        if shard.ref is not None:
            self._stop_ref(shard.ref)

    def _stop_ref(self, ref: LocalRef, done: Any = None) -> None:
        assert self.args is not None
        deadline = time.monotonic() + self.args.spawn_timeout_s
        self.call(host_name(ref.host_id), StopInner(local_id=ref.local_id), deadline, done or _ignore)

    def _stop_all(self, ctx: CallCtx) -> Any:
        """Stop every shard; answered once each host confirmed (or failed) its stop. Waiting calls fail."""
        stopped = StorageError(f"the sharded {self.kind} service was stopped", reason="service_stopped")
        for _key, _op, waiting in self.cold:
            self.fail(waiting, stopped)
        self.cold.clear()
        refs = []
        for shard in list(self.shards.values()):
            self._forget(shard)
            for _op, queued, _tries in shard.queue:
                self.fail(queued, stopped)
            if shard.ref is not None:
                refs.append(shard.ref)
        count = len(refs)
        if not refs:
            return 0
        remaining = [count]

        def one_done(_value: Any, _error: AdkError | None) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                self.reply(ctx, count)

        for ref in refs:
            self._stop_ref(ref, one_done)
        return DEFERRED

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Sweep):
            assert self.args is not None
            now = time.monotonic()
            for key in idle_expired([s.load() for s in self.shards.values()], now, self.args.idle_timeout_s):
                assert isinstance(key, tuple)
                self._stop_shard(key, "idle_stopped")
            self._admit_cold()
            self.start_timer(self._sweep_period(), _Sweep())
            return
        super().handle_timer(message)

    def status(self) -> dict[str, Any]:
        args = self.args
        shards = [
            {"local_id": s.local_id, "state": s.state, "in_flight": s.in_flight, "queued": len(s.queue)}
            for s in itertools.islice(self.shards.values(), MAX_STATUS_SHARDS)
        ]
        return {
            "kind": "shard_router",
            "service": self.kind,
            "active_scopes": len(self.shards),
            "max_active_scopes": args.max_active_scopes if args is not None else 0,
            "cold_waiting": len(self.cold),
            **self.counts,
            "shards": shards,
        }


def _ignore(_value: Any, _error: AdkError | None) -> None:
    """Stopping a shard that is already gone is not an error."""


def _check_key(key: Any) -> tuple[str, ...]:
    if (
        not isinstance(key, tuple)
        or not 1 <= len(key) <= 4
        or not all(isinstance(part, str) and 0 < len(part) <= 256 for part in key)
    ):
        raise ValidationError("a shard key is a tuple of 1 to 4 names", reason="invalid_shard_key")
    return key
