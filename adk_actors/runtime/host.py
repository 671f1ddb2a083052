"""Hosts: tier-1 process actors that run tier-2 (in-process) actors in a simpleSystemBase of their own.

A host owns one inner ``ActorSystem('simpleSystemBase', logDefs=False)`` holding real Thespian actors (our
``GenServer`` subclasses). The host is the only thing that touches that system: it ``tell``s messages into it,
one at a time, from its own outbox (an inner actor's sends are queued, never delivered re-entrantly), and inner
actors never use Thespian's ``send``/``wakeupAfter``/``ask`` — their :class:`InnerPort` routes everything:

* to another inner actor on this host: through the outbox;
* to an inner actor on another host: ``ToInner`` to that host (resolved by registry name ``host-<id>``);
* to a tier-1 address or name: a normal tier-1 send by the host.

Timers live on a host-owned heap with a single tier-1 ``wakeupAfter`` for the earliest due time (an idle host
costs nothing). Blocking calls run on the host's :class:`~adk_actors.runtime.iopool.IOPool`, completing through a
watched self-pipe. Inner actors are supervised with OTP restart types and a per-actor intensity window; a
crashed inner actor is re-created with the same ``local_id``, so its ``LocalRef`` stays valid. Permanent inner
actors are reported to the host's parent (:class:`HostSupervisor`), which re-creates them when it restarts a
killed host. In strict mode every message delivered to an inner actor is pickled and unpickled first.

Host protocol — calls: ``Spawn``, ``SpawnMany``, ``StopInner``, ``GetStatus``, ``Ping``; tells: ``ToInner``.
Emits ``InnerSpecAdded`` / ``InnerSpecRemoved`` to its parent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import os
import pickle
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thespian.actors import ActorExitRequest, ActorSystem

from adk_actors.errors import ActorCrashed, AdkError, ConfigError
from adk_actors.runtime.iopool import IOPool
from adk_actors.runtime.messages import Call, ChildExit, ChildReady, Failure, ToInner, Unregister
from adk_actors.runtime.refs import LocalRef, host_name
from adk_actors.runtime.restart import RestartType, Window, should_restart
from adk_actors.runtime.server import MAX_TIMER_S, CallCtx, GenServer, InnerInit, IoDone, TimerFire
from adk_actors.runtime.supervisor import ChildSpec, Supervisor, SupervisorSpec

__all__ = ["Host", "HostArgs", "HostSupervisor", "HostsSpec", "InnerPort", "InnerSpec", "InnerSpecAdded",
           "InnerSpecRemoved", "Spawn", "SpawnMany", "StopInner", "ToInner"]

HOST_PARENT = "__host__"


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerSpec:
    """How to start one inner actor."""

    local_id: str
    actor: str
    """Importable ``"package.module.Class"`` of a GenServer subclass."""
    args: Any = None
    restart: RestartType = "permanent"
    register_as: str | None = None
    intensity: int = 5
    period: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HostArgs:
    host_id: int
    hosts: int
    io_threads: int = 16
    strict_pickle: bool = False
    inner: tuple[InnerSpec, ...] = ()
    """Permanent inner actors to re-create at start (after the host was restarted)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostsSpec:
    """Args of the HostSupervisor: how many hosts and how they are configured."""

    hosts: int
    io_threads: int = 16
    strict_pickle: bool = False
    intensity: int = 10
    period: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Spawn:
    """Start an inner actor; answered with its ``LocalRef`` once its ``init`` ran."""

    spec: InnerSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnMany:
    """Start many inner actors in one call; answered with their ``LocalRef``s in order."""

    specs: tuple[InnerSpec, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopInner:
    """Stop an inner actor (it is not restarted)."""

    local_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerSpecAdded:
    """Permanent inner actors started on ``host_id`` (one message per spawn call, however many actors)."""

    host_id: int
    specs: tuple[InnerSpec, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerSpecRemoved:
    host_id: int
    local_id: str


@dataclass(frozen=True, slots=True)
class _HostTick:
    due: float


@dataclass(slots=True)
class _Inner:
    spec: InnerSpec
    address: Any = None
    actor: GenServer | None = None
    window: Window = field(default_factory=lambda: Window(5, 5.0))
    restarts: int = 0
    state: str = "starting"
    exit_reason: str | None = None


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


class InnerPort:
    """The outbound effects of one inner actor, routed by its host (the tier-2 contract)."""

    __slots__ = ("host", "local_id", "ref")

    def __init__(self, host: Host, local_id: str) -> None:
        self.host = host
        self.local_id = local_id
        self.ref = LocalRef(host.host_id, local_id)

    @property
    def names(self) -> dict[str, Any]:
        return self.host._port.names

    def send(self, target: Any, message: Any) -> None:
        self.host.route(target, message, self.local_id)

    def start_timer(self, delay: float, timer_id: int, message: Any) -> None:
        self.host.add_timer(delay, self.local_id, timer_id, message)

    def cancel_timer(self, timer_id: int) -> None:
        self.host.cancel_inner_timer(self.local_id, timer_id)

    def exit_self(self) -> None:
        self.host.inner_exit(self.local_id)

    def submit_io(self, io_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.host.inner_submit_io(self.local_id, io_id, fn, args)

    def cancel_io(self, io_id: int) -> None:
        self.host.inner_cancel_io(self.local_id, io_id)


class Host(GenServer):
    """A tier-1 host of tier-2 actors; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.host_id = -1
        self.args: HostArgs | None = None
        self.inner: Any = None
        self.actors: dict[str, _Inner] = {}
        self.outbox: deque[tuple[str | None, Any]] = deque()
        self.draining = False
        self.timer_heap: list[tuple[float, int, str, int, Any]] = []
        self.cancelled_timers: set[tuple[str, int]] = set()
        self.ticks: list[float] = []
        self.seq = itertools.count()
        self.io: IOPool | None = None
        self.io_owner: dict[int, tuple[str, int]] = {}
        self.io_ids = itertools.count(1)
        self.total_restarts = 0
        self.delivered = 0
        self.strict = False

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, HostArgs):
            raise ConfigError("a host needs HostArgs", reason="invalid_host_args")
        self.args = args
        self.host_id = args.host_id
        self.strict = args.strict_pickle
        self.inner = ActorSystem("simpleSystemBase", logDefs=False, transientUnique=True)
        self.io = IOPool(args.io_threads)
        for spec in args.inner:
            self._spawn(spec)
        self._drain()
        return None

    def terminate(self, reason: str) -> None:
        if self.io is not None:
            self.io.close()
        if self.inner is not None:
            with contextlib.suppress(Exception):
                self.inner.shutdown()

    def my_ref(self) -> Any:
        return self.myAddress

    def watch_fds(self) -> list[int]:
        # Only while blocking calls are in flight: a watched fd costs Thespian's loop work on every message.
        return [self.io.read_fd] if self.io is not None and self.io_owner else []

    # ---- routing ---------------------------------------------------------------------------------------------
    def route(self, target: Any, message: Any, from_local: str | None) -> None:
        """Deliver ``message`` from an inner actor (or the host itself) to ``target``."""
        if isinstance(target, LocalRef):
            if target.host_id == self.host_id:
                if self.strict and not isinstance(message, InnerInit):
                    message = _roundtrip(message)
                self.outbox.append((target.local_id, message))
                self._drain()
            else:
                self._port.send(host_name(target.host_id), ToInner(local_id=target.local_id, message=message))
        elif target == HOST_PARENT:
            self.outbox.append((None, (from_local, message)))
            self._drain()
        else:
            self._port.send(target, message)

    def _drain(self) -> None:
        if self.draining:
            return
        self.draining = True
        try:
            while self.outbox:
                local_id, message = self.outbox.popleft()
                if local_id is None:
                    self._from_inner(*message)
                else:
                    self._tell(local_id, message)
        finally:
            self.draining = False

    def _tell(self, local_id: str, message: Any) -> None:
        entry = self.actors.get(local_id)
        if entry is None or entry.address is None:
            if isinstance(message, Call):
                self._port.send(message.reply_to, Failure(
                    call_id=message.call_id,
                    error=ActorCrashed("no such inner actor", reason="noproc",
                                       details={"actor": str(LocalRef(self.host_id, local_id))})))
            return
        self.delivered += 1
        self.inner.tell(entry.address, message)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, ToInner):
            inner_message = message.message
            if isinstance(inner_message, Call) and inner_message.reply_to is None:
                inner_message = dataclasses.replace(inner_message, reply_to=sender)
            if self.strict:
                inner_message = _roundtrip(inner_message)
            self.outbox.append((message.local_id, inner_message))
            self._drain()
        else:
            super().handle_info(message, sender)

    # ---- inner supervision -------------------------------------------------------------------------------------
    def _spawn(self, spec: InnerSpec) -> LocalRef:
        if spec.local_id in self.actors:
            raise AdkError("an inner actor with that id exists", reason="already_started",
                           details={"local_id": spec.local_id})
        entry = _Inner(spec=spec, window=Window(spec.intensity, spec.period))
        self.actors[spec.local_id] = entry
        self._create(entry)
        return LocalRef(self.host_id, spec.local_id)

    def _report_permanent(self, specs: list[InnerSpec]) -> None:
        """Tell the HostSupervisor in one message: Thespian sends to one target strictly one at a time, so a
        message per actor made 1,000 spawns cost ~9 s."""
        permanent = tuple(spec for spec in specs if spec.restart == "permanent")
        if permanent and self._parent is not None:
            self._port.send(self._parent, InnerSpecAdded(host_id=self.host_id, specs=permanent))

    def _create(self, entry: _Inner) -> None:
        cls = _import(entry.spec.actor)
        entry.address = self.inner.createActor(cls)
        entry.state, entry.exit_reason = "starting", None
        init = InnerInit(port=InnerPort(self, entry.spec.local_id), local_id=entry.spec.local_id,
                         args=entry.spec.args, registry=self._registry, register_as=entry.spec.register_as,
                         system_port=self._system_port, parent=HOST_PARENT)
        self.outbox.append((entry.spec.local_id, init))

    def _from_inner(self, local_id: str, message: Any) -> None:
        entry = self.actors.get(local_id)
        if entry is None:
            return
        if isinstance(message, ChildReady):
            entry.state = "running"
        elif isinstance(message, ChildExit):
            entry.exit_reason = message.reason
        elif isinstance(message, _Exited):
            self._after_exit(local_id)

    def inner_exit(self, local_id: str) -> None:
        """An inner actor asked to exit (stop or crash): decide after this delivery and after its ChildExit."""
        self.outbox.append((None, (local_id, _Exited())))
        self._drain()

    def _after_exit(self, local_id: str) -> None:
        entry = self.actors.get(local_id)
        if entry is None or entry.address is None:
            return
        address, entry.address = entry.address, None
        with contextlib.suppress(Exception):
            self.inner.tell(address, ActorExitRequest())
        reason = entry.exit_reason or "normal"
        if entry.state == "stopping" or not should_restart(entry.spec.restart, reason):
            self._forget(local_id)
            return
        entry.window, exceeded = entry.window.record(time.monotonic())
        if exceeded:
            self.log.warning("inner actor exceeded its restart intensity; removed", local_id=local_id)
            self._forget(local_id)
            return
        entry.restarts += 1
        self.total_restarts += 1
        self._create(entry)

    def _forget(self, local_id: str) -> None:
        entry = self.actors.pop(local_id, None)
        if entry is not None and entry.spec.register_as and self._registry is not None:
            self._port.send(self._registry, Unregister(name=entry.spec.register_as,
                                                       address=LocalRef(self.host_id, local_id)))
        if entry is not None and entry.spec.restart == "permanent" and self._parent is not None:
            self._port.send(self._parent, InnerSpecRemoved(host_id=self.host_id, local_id=local_id))

    # ---- calls -------------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Spawn):
            ref = self._spawn(request.spec)
            self._report_permanent([request.spec])
            self._drain()
            return ref
        if isinstance(request, SpawnMany):
            refs = [self._spawn(spec) for spec in request.specs]
            self._report_permanent(list(request.specs))
            self._drain()
            return refs
        if isinstance(request, StopInner):
            entry = self.actors.get(request.local_id)
            if entry is None:
                raise AdkError("no such inner actor", reason="not_found", details={"local_id": request.local_id})
            entry.state = "stopping"
            self._after_exit(request.local_id)
            return "ok"
        return super().handle_call(request, ctx)

    # ---- timers ------------------------------------------------------------------------------------------------
    def add_timer(self, delay: float, local_id: str, timer_id: int, message: Any) -> None:
        due = time.monotonic() + min(max(0.0, delay), MAX_TIMER_S)
        heapq.heappush(self.timer_heap, (due, next(self.seq), local_id, timer_id, message))
        self._arm()

    def cancel_inner_timer(self, local_id: str, timer_id: int) -> None:
        self.cancelled_timers.add((local_id, timer_id))
        if len(self.cancelled_timers) > 1024 and len(self.cancelled_timers) * 2 > len(self.timer_heap):
            self.timer_heap = [t for t in self.timer_heap if (t[2], t[3]) not in self.cancelled_timers]
            heapq.heapify(self.timer_heap)
            self.cancelled_timers.clear()

    def _arm(self) -> None:
        if not self.timer_heap:
            return
        due = self.timer_heap[0][0]
        if self.ticks and min(self.ticks) <= due + 0.0005:
            return
        self.ticks.append(due)
        self.wakeupAfter(max(0.0, due - time.monotonic()), payload=_HostTick(due))

    def handle_wakeup(self, payload: Any) -> None:
        if not isinstance(payload, _HostTick):
            super().handle_wakeup(payload)
            return
        with contextlib.suppress(ValueError):
            self.ticks.remove(payload.due)
        now = time.monotonic()
        while self.timer_heap and self.timer_heap[0][0] <= now + 0.0005:
            _due, _seq, local_id, timer_id, message = heapq.heappop(self.timer_heap)
            if (local_id, timer_id) in self.cancelled_timers:
                self.cancelled_timers.discard((local_id, timer_id))
                continue
            self.outbox.append((local_id, TimerFire(timer_id, message)))
        self._drain()
        self._arm()

    # ---- blocking I/O --------------------------------------------------------------------------------------------
    def inner_submit_io(self, local_id: str, io_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        assert self.io is not None
        pool_id = next(self.io_ids)
        self.io_owner[pool_id] = (local_id, io_id)
        self.io.submit(pool_id, fn, *args)

    def inner_cancel_io(self, local_id: str, io_id: int) -> None:
        assert self.io is not None
        for pool_id, owner in list(self.io_owner.items()):
            if owner == (local_id, io_id):
                self.io.cancel(pool_id)

    def handle_ready(self, fds: list[int]) -> None:
        if self.io is None or self.io.read_fd not in fds:
            return
        for result in self.io.drain():
            owner = (self.io_owner.get(result.io_id) if result.progress
                     else self.io_owner.pop(result.io_id, None))
            if owner is not None:
                self.outbox.append((owner[0], IoDone(owner[1], result.value, result.error, result.progress)))
        self._drain()

    # ---- introspection -----------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        inner = [{"local_id": lid, "actor": e.spec.actor.rpartition(".")[2], "state": e.state,
                  "restarts": e.restarts, "restart": e.spec.restart, "register_as": e.spec.register_as}
                 for lid, e in itertools.islice(self.actors.items(), 200)]
        return {"kind": "host", "host_id": self.host_id, "inner_actors": len(self.actors), "inner": inner,
                "restarts": self.total_restarts, "timers": len(self.timer_heap) - len(self.cancelled_timers),
                "outbox": len(self.outbox), "delivered": self.delivered,
                "io": self.io.stats() if self.io is not None else {}, "rss_kb": _rss_kb()}


@dataclass(frozen=True, slots=True)
class _Exited:
    pass


def _roundtrip(message: Any) -> Any:
    try:
        return pickle.loads(pickle.dumps(message))
    except Exception as exc:
        raise AdkError("message does not pickle (strict mode)", reason="unpicklable_message",
                       details={"message_type": type(message).__name__, "error": type(exc).__name__}) from None


def _rss_kb() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return 0


class HostSupervisor(Supervisor):
    """Supervises the hosts (one_for_one) and remembers each host's permanent inner actors, so a restarted host
    re-creates them with the same ids and names."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hosts_spec = HostsSpec(hosts=1)
        self.inner_specs: dict[int, dict[str, InnerSpec]] = {}

    def init(self, args: Any) -> Any:
        spec = args if isinstance(args, HostsSpec) else HostsSpec(hosts=1)
        self.hosts_spec = spec
        children = tuple(ChildSpec(id=host_name(i), actor="adk_actors.runtime.host.Host", register_as=host_name(i),
                                   args=HostArgs(host_id=i, hosts=spec.hosts, io_threads=spec.io_threads,
                                                 strict_pickle=spec.strict_pickle), shutdown=5.0)
                         for i in range(spec.hosts))
        return super().init(SupervisorSpec(strategy="one_for_one", intensity=spec.intensity, period=spec.period,
                                           children=children))

    def _create(self, child: Any) -> None:
        args = child.spec.args
        if isinstance(args, HostArgs):
            specs = tuple(self.inner_specs.get(args.host_id, {}).values())
            child.spec = dataclasses.replace(child.spec, args=dataclasses.replace(args, inner=specs))
        super()._create(child)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, InnerSpecAdded):
            specs = self.inner_specs.setdefault(message.host_id, {})
            for spec in message.specs:
                specs[spec.local_id] = spec
        elif isinstance(message, InnerSpecRemoved):
            self.inner_specs.get(message.host_id, {}).pop(message.local_id, None)
        else:
            super().handle_info(message, sender)

    def status(self) -> dict[str, Any]:
        status = super().status()
        status["kind"] = "host_supervisor"
        status["permanent_inner"] = {host_name(h): len(s) for h, s in sorted(self.inner_specs.items())}
        return status

