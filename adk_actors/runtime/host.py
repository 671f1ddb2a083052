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
crashed inner actor is re-created with the same ``local_id``, so its ``LocalRef`` stays valid. Inner actors can
also be supervised together as a group (:class:`InnerGroupSpec`, an inner supervisor with tier 1's
``one_for_one`` / ``one_for_all`` / ``rest_for_one`` strategies and one intensity window for the group). Past its
window an inner actor or a group escalates to the host. Permanent inner actors and groups are reported to the
host's parent (:class:`HostSupervisor`), which re-creates them when it restarts a killed host. In strict mode every
message delivered to an inner actor is pickled and unpickled first.

Host protocol — calls: ``Spawn``, ``SpawnMany``, ``SpawnGroup``, ``StopInner``, ``GetStatus``, ``Ping``; tells:
``ToInner``,
``RegistryMoved``. Emits ``InnerSpecAdded`` / ``InnerSpecRemoved`` to its parent, the HostSupervisor, which passes
them on to the root (:class:`~adk_actors.runtime.root.Root` keeps them across a HostSupervisor crash).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import math
import os
import pickle
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from thespian.actors import ActorExitRequest, ActorSystem

from adk_actors.errors import ActorCrashed, AdkError, ConfigError
from adk_actors.runtime.iopool import IOPool
from adk_actors.runtime.lane import LaneServer
from adk_actors.runtime.messages import (
    Call,
    ChildExit,
    ChildReady,
    Failure,
    Register,
    RegistryMoved,
    Reply,
    Request,
    Resolved,
    ToInner,
    Unregister,
)
from adk_actors.runtime.refs import LocalRef, host_name
from adk_actors.runtime.restart import RestartType, Window, restart_group, should_restart
from adk_actors.runtime.server import MAX_TIMER_S, CallCtx, GenServer, InnerInit, IoDone, TimerFire
from adk_actors.runtime.supervisor import ChildSpec, Supervisor, SupervisorSpec

__all__ = [
    "GROUP_STRATEGIES",
    "FindInner",
    "GroupStrategy",
    "Host",
    "HostArgs",
    "HostSupervisor",
    "HostsSpec",
    "InnerEntry",
    "InnerEscalated",
    "InnerGroupSpec",
    "InnerPort",
    "InnerSpec",
    "InnerSpecAdded",
    "InnerSpecRemoved",
    "Spawn",
    "SpawnGroup",
    "SpawnMany",
    "StopInner",
    "ToInner",
    "check_group",
]

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
    intensity: int = 1
    """OTP's default window (1 restart per 5 s); past it the actor escalates to its host. Ignored for a group
    member: the group's window applies."""
    period: float = 5.0


GroupStrategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
GROUP_STRATEGIES: tuple[str, ...] = ("one_for_one", "one_for_all", "rest_for_one")
MAX_GROUP_MEMBERS = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerGroupSpec:
    """An inner supervisor: inner actors on one host supervised together (an agent tree, a plugin set).

    A member that exits and must be restarted (its own ``restart`` type decides, as in OTP) restarts the group per
    ``strategy``: ``one_for_one`` only that member, ``one_for_all`` every member, ``rest_for_one`` that member and
    the members started after it (siblings are stopped in reverse start order, then all are started in order;
    a ``temporary`` sibling stopped that way is removed, not restarted). More than ``intensity`` restarts within
    ``period`` seconds escalate: the whole group is removed and the host is told, as for a single inner actor.
    """

    local_id: str
    """The group's id: unique among the host's inner actors and groups; ``StopInner`` with it stops the group."""
    members: tuple[InnerSpec, ...]
    """Started in order; their ``intensity``/``period`` are not used (the group's window is)."""
    strategy: GroupStrategy = "one_for_one"
    intensity: int = 1
    """OTP's default window, as for single inner actors: 1 restart per 5 s."""
    period: float = 5.0
    restart: RestartType = "permanent"
    """``permanent``: re-created with its current members when the host is restarted; otherwise it is not."""


InnerEntry: TypeAlias = InnerSpec | InnerGroupSpec
"""What a host keeps and re-creates: a single inner actor or a group."""


def check_group(spec: Any) -> None:
    """Validate a group spec before anything is started.

    Raises:
        ConfigError: ``invalid_group`` (not a spec, bad id, no or too many members, a member that is not an
            ``InnerSpec``), ``invalid_strategy``, ``invalid_value`` (intensity, period or a restart type) or
            ``duplicate_member`` (two members, or a member and the group, share an id).
    """
    if not isinstance(spec, InnerGroupSpec):
        raise ConfigError(
            "a group needs an InnerGroupSpec", reason="invalid_group", details={"type": type(spec).__name__}
        )
    if not isinstance(spec.local_id, str) or not spec.local_id or len(spec.local_id) > 256:
        raise ConfigError(
            "a group id is a non-empty string of at most 256 characters",
            reason="invalid_group",
            details={"field": "local_id"},
        )
    if not isinstance(spec.strategy, str) or spec.strategy not in GROUP_STRATEGIES:
        raise ConfigError(
            "unknown group strategy", reason="invalid_strategy", details={"allowed": list(GROUP_STRATEGIES)}
        )
    if isinstance(spec.intensity, bool) or not isinstance(spec.intensity, int) or spec.intensity < 0:
        raise ConfigError("intensity must be an integer >= 0", reason="invalid_value", details={"key": "intensity"})
    if (
        isinstance(spec.period, bool)
        or not isinstance(spec.period, int | float)
        or not math.isfinite(spec.period)
        or spec.period <= 0
    ):
        raise ConfigError(
            "period must be a finite number of seconds > 0", reason="invalid_value", details={"key": "period"}
        )
    if spec.restart not in ("permanent", "transient", "temporary"):
        raise ConfigError("unknown restart type", reason="invalid_value", details={"key": "restart"})
    if not isinstance(spec.members, tuple) or not 0 < len(spec.members) <= MAX_GROUP_MEMBERS:
        raise ConfigError(
            f"a group has 1 to {MAX_GROUP_MEMBERS} members", reason="invalid_group", details={"field": "members"}
        )
    seen = {spec.local_id}
    for member in spec.members:
        if not isinstance(member, InnerSpec) or not isinstance(member.local_id, str) or not member.local_id:
            raise ConfigError(
                "a group member is an InnerSpec with a local id",
                reason="invalid_group",
                details={"type": type(member).__name__},
            )
        if member.restart not in ("permanent", "transient", "temporary"):
            raise ConfigError(
                "unknown restart type", reason="invalid_value", details={"key": "restart", "member": member.local_id}
            )
        if member.local_id in seen:
            raise ConfigError(
                "member ids must be distinct (and differ from the group id)",
                reason="duplicate_member",
                details={"local_id": member.local_id},
            )
        seen.add(member.local_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostArgs:
    host_id: int
    hosts: int
    io_threads: int = 16
    strict_pickle: bool = False
    inner: tuple[InnerEntry, ...] = ()
    """Permanent inner actors and groups to re-create at start (after the host was restarted)."""
    intensity: int = 1
    period: float = 5.0
    """The host's own window: escalations from inner actors it tolerates (OTP's default, 1 per 5 s) before it
    exits ``escalated`` and its HostSupervisor restarts it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostsSpec:
    """Args of the HostSupervisor: how many hosts and how they are configured."""

    hosts: int
    io_threads: int = 16
    strict_pickle: bool = False
    intensity: int = 10
    period: float = 5.0
    inner: tuple[tuple[int, tuple[InnerEntry, ...]], ...] = ()
    """Permanent inner actors per host id, kept by the root: a restarted HostSupervisor starts its hosts with
    them, so agents survive the crash of the process that supervises the hosts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Spawn(Request[LocalRef]):
    """Start an inner actor; answered with its ``LocalRef`` once its ``init`` ran."""

    spec: InnerSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnMany(Request[list[LocalRef]]):
    """Start many inner actors in one call; answered with their ``LocalRef``s in order."""

    specs: tuple[InnerSpec, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnGroup(Request[list[LocalRef]]):
    """Start a group of inner actors (see :class:`InnerGroupSpec`); answered with the members' ``LocalRef``s."""

    spec: InnerGroupSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class FindInner(Request[list[str]]):
    """The local ids of this host's running inner actors of one class (its importable ``actor`` path), at most
    ``limit``, sorted (status reports only the first 200 inner actors of any class)."""

    actor: str
    limit: int = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class StopInner(Request[str]):
    """Stop an inner actor or a whole group (not restarted); a stopped group member leaves its group."""

    local_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerSpecAdded:
    """Permanent inner actors or groups started (or a group changed) on ``host_id``; one message per spawn call,
    however many actors. A spec replaces the one kept under the same ``local_id``."""

    host_id: int
    specs: tuple[InnerEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerEscalated:
    """An inner actor or group of ``host_id`` exceeded its restart intensity: removed, reported, counted by the
    host (``actor`` is ``"group:<strategy>"`` for a group)."""

    host_id: int
    local_id: str
    actor: str


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
    window: Window = field(default_factory=lambda: Window(1, 5.0))
    restarts: int = 0
    state: str = "starting"
    exit_reason: str | None = None
    group: str | None = None
    """The group supervising this actor (``None``: the host does, with the actor's own window)."""
    gen: int = 0
    """Incarnation: exit reports of an earlier incarnation (stopped by a group restart) are ignored."""


@dataclass(slots=True)
class _Group:
    spec: InnerGroupSpec
    order: list[str]
    """Current members in start order."""
    window: Window
    restarts: int = 0


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


class InnerPort:
    """The outbound effects of one inner actor, routed by its host: the tier-2 :class:`~.server.Port`."""

    __slots__ = ("gen", "host", "local_id", "ref")

    def __init__(self, host: Host, local_id: str, gen: int = 0) -> None:
        self.host = host
        self.local_id = local_id
        self.gen = gen
        self.ref = LocalRef(host.host_id, local_id)

    @property
    def names(self) -> dict[str, Resolved]:
        return self.host._port.names

    @property
    def lane(self) -> LaneServer | None:
        return None

    def send(self, target: Any, message: Any) -> None:
        self.host.route(target, message, self.local_id, self.gen)

    def start_timer(self, delay: float, timer_id: int, message: Any) -> None:
        self.host.add_timer(delay, self.local_id, timer_id, message, self.gen)

    def cancel_timer(self, timer_id: int) -> None:
        self.host.cancel_inner_timer(self.local_id, timer_id)

    def exit_self(self) -> None:
        self.host.inner_exit(self.local_id, self.gen)

    def submit_io(self, io_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.host.inner_submit_io(self.local_id, io_id, fn, args, self.gen)

    def cancel_io(self, io_id: int) -> None:
        self.host.inner_cancel_io(self.local_id, io_id, self.gen)

    def resolved(self, entry: Resolved) -> None:
        self.host._port.names[entry.name] = entry

    def settle_job(self, call_id: str) -> None:
        """Nothing to settle: the host settles replies to its inner actors as they pass (``handle_info``)."""

    def extra_fds(self) -> list[int]:
        return []

    def take_ready(self, ready: list[int]) -> list[int]:
        return ready


class Host(GenServer):
    """A tier-1 host of tier-2 actors; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.host_id = -1
        self.args: HostArgs | None = None
        self.inner: Any = None
        self.actors: dict[str, _Inner] = {}
        self.groups: dict[str, _Group] = {}
        self.outbox: deque[tuple[str | None, Any]] = deque()
        self.draining = False
        self.timer_heap: list[tuple[float, int, str, int, Any, int]] = []
        """``(due, seq, local_id, timer_id, message, incarnation)``."""
        self.cancelled_timers: set[tuple[str, int]] = set()
        self.ticks: list[float] = []
        self.seq = itertools.count()
        self.io: IOPool | None = None
        self.io_owner: dict[int, tuple[str, int, int]] = {}
        """Pool id → ``(local_id, io_id, incarnation)`` of each blocking call in flight."""
        self.io_ids = itertools.count(1)
        self.total_restarts = 0
        self.escalations = 0
        self.window = Window(1, 5.0)
        self.delivered = 0
        self.strict = False

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, HostArgs):
            raise ConfigError("a host needs HostArgs", reason="invalid_host_args")
        self.args = args
        self.host_id = args.host_id
        self.strict = args.strict_pickle
        self.window = Window(args.intensity, args.period)
        self.inner = ActorSystem("simpleSystemBase", logDefs=False, transientUnique=True)
        self.io = IOPool(args.io_threads)
        for spec in args.inner:
            if isinstance(spec, InnerGroupSpec):
                self._spawn_group(spec)
            else:
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
    def route(self, target: Any, message: Any, from_local: str | None, gen: int = 0) -> None:
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
            self.outbox.append((None, (from_local, gen, message)))
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
                self._port.send(
                    message.reply_to,
                    Failure(
                        call_id=message.call_id,
                        error=ActorCrashed(
                            "no such inner actor",
                            reason="noproc",
                            details={"actor": str(LocalRef(self.host_id, local_id))},
                        ),
                    ),
                )
            return
        self.delivered += 1
        self.inner.tell(entry.address, message)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, ToInner):
            inner_message = message.message
            if isinstance(inner_message, Call) and inner_message.reply_to is None:
                inner_message = dataclasses.replace(inner_message, reply_to=sender)
            elif isinstance(inner_message, Reply | Failure):
                self._port.settle_job(inner_message.call_id)
            if self.strict:
                inner_message = _roundtrip(inner_message)
            self.outbox.append((message.local_id, inner_message))
            self._drain()
        elif isinstance(message, RegistryMoved):
            self._registry_moved(message)
        else:
            super().handle_info(message, sender)

    def deliver_local(self, target: Any, message: Any) -> None:
        if isinstance(target, LocalRef) and target.host_id == self.host_id:
            self.route(target, message, None)
        else:
            super().deliver_local(target, message)

    def _registry_moved(self, message: RegistryMoved) -> None:
        """Re-register our named inner actors with the restarted registry and point them at it."""
        for local_id, entry in self.actors.items():
            if entry.address is None:
                continue
            if entry.spec.register_as:
                self._port.send(
                    message.address,
                    Register.here(
                        entry.spec.register_as, LocalRef(self.host_id, local_id), os.getpid(), entry.spec.actor
                    ),
                )
            self.outbox.append((local_id, message))
        self._drain()

    # ---- inner supervision -------------------------------------------------------------------------------------
    def _spawn(self, spec: InnerSpec) -> LocalRef:
        if spec.local_id in self.actors or spec.local_id in self.groups:
            raise AdkError(
                "an inner actor with that id exists", reason="already_started", details={"local_id": spec.local_id}
            )
        entry = _Inner(spec=spec, window=Window(spec.intensity, spec.period))
        self.actors[spec.local_id] = entry
        self._create(entry)
        return LocalRef(self.host_id, spec.local_id)

    def _spawn_group(self, spec: InnerGroupSpec) -> list[LocalRef]:
        ids = [spec.local_id, *(m.local_id for m in spec.members)]
        taken = next((i for i in ids if i in self.actors or i in self.groups), None)
        if taken is not None:  # nothing of the group starts
            raise AdkError("an inner actor with that id exists", reason="already_started", details={"local_id": taken})
        self.groups[spec.local_id] = _Group(spec=spec, order=ids[1:], window=Window(spec.intensity, spec.period))
        for member in spec.members:
            entry = _Inner(spec=member, group=spec.local_id)
            self.actors[member.local_id] = entry
            self._create(entry)
        return [LocalRef(self.host_id, i) for i in ids[1:]]

    def _report_permanent(self, specs: list[InnerEntry]) -> None:
        """Tell the HostSupervisor in one message: Thespian sends to one target strictly one at a time, so a
        message per actor made 1,000 spawns cost ~9 s."""
        permanent = tuple(spec for spec in specs if spec.restart == "permanent")
        if permanent and self._parent is not None:
            self._port.send(self._parent, InnerSpecAdded(host_id=self.host_id, specs=permanent))

    def _create(self, entry: _Inner) -> None:
        cls = _import(entry.spec.actor)
        entry.address = self.inner.createActor(cls)
        entry.state, entry.exit_reason = "starting", None
        entry.gen += 1
        init = InnerInit(
            port=InnerPort(self, entry.spec.local_id, entry.gen),
            local_id=entry.spec.local_id,
            args=entry.spec.args,
            registry=self._registry,
            register_as=entry.spec.register_as,
            system_port=self._system_port,
            parent=HOST_PARENT,
        )
        self.outbox.append((entry.spec.local_id, init))

    def _from_inner(self, local_id: str, gen: int, message: Any) -> None:
        entry = self.actors.get(local_id)
        if entry is None or (gen and gen != entry.gen):
            return  # gone, or an earlier incarnation's last words
        if isinstance(message, ChildReady):
            entry.state = "running"
        elif isinstance(message, ChildExit):
            entry.exit_reason = message.reason
        elif isinstance(message, _Exited):
            self._after_exit(local_id)

    def inner_exit(self, local_id: str, gen: int = 0) -> None:
        """An inner actor asked to exit (stop or crash): decide after this delivery and after its ChildExit."""
        self.outbox.append((None, (local_id, gen, _Exited())))
        self._drain()

    def _after_exit(self, local_id: str) -> None:
        entry = self.actors.get(local_id)
        if entry is None or entry.address is None:
            return
        address, entry.address = entry.address, None
        with contextlib.suppress(Exception):
            self.inner.tell(address, ActorExitRequest())
        self._cancel_io_of(local_id, entry.gen)
        reason = entry.exit_reason or "normal"
        if entry.group is not None:
            self._member_exited(entry, reason)
            return
        if entry.state == "stopping" or not should_restart(entry.spec.restart, reason):
            self._forget(local_id)
            return
        entry.window, exceeded = entry.window.record(time.monotonic())
        if exceeded:
            self._escalate(entry)
            return
        entry.restarts += 1
        self.total_restarts += 1
        self._create(entry)

    # ---- groups (inner supervisors) ------------------------------------------------------------------------------
    def _member_exited(self, entry: _Inner, reason: str) -> None:
        """A group member exited: drop it, or restart it and its siblings per the group's strategy."""
        local_id = entry.spec.local_id
        group = self.groups.get(entry.group or "")
        if group is None:
            self._forget(local_id)
            return
        if entry.state == "stopping" or not should_restart(entry.spec.restart, reason):
            self._drop_member(group, local_id)
            return
        group.window, exceeded = group.window.record(time.monotonic())
        if exceeded:
            self._escalate_group(group)
            return
        group.restarts += 1
        ids = restart_group(group.spec.strategy, group.order, local_id)
        for sibling in reversed(ids):
            if sibling != local_id:
                self._stop_member(sibling)
        for member_id in ids:
            member = self.actors.get(member_id)
            if member is None:
                continue
            if member_id != local_id and member.spec.restart == "temporary":
                self._drop_member(group, member_id)  # OTP: a temporary child is never restarted
                continue
            member.restarts += 1
            self.total_restarts += 1
            self._create(member)

    def _stop_member(self, local_id: str) -> None:
        """Stop a running member without a restart decision (its group is restarting it, or going away)."""
        member = self.actors.get(local_id)
        if member is None or member.address is None:
            return
        address, member.address = member.address, None
        member.state = "stopped"
        with contextlib.suppress(Exception):
            self.inner.tell(address, ActorExitRequest())
        self._cancel_io_of(local_id, member.gen)

    def _drop_member(self, group: _Group, local_id: str) -> None:
        """A member leaves its group for good; the kept spec follows (a group left empty is removed)."""
        self._forget(local_id)
        if local_id in group.order:
            group.order.remove(local_id)
        if not group.order:
            self._forget_group(group)
            return
        group.spec = dataclasses.replace(
            group.spec, members=tuple(m for m in group.spec.members if m.local_id != local_id)
        )
        self._report_permanent([group.spec])

    def _stop_group(self, group: _Group) -> None:
        for member_id in reversed(group.order):
            self._stop_member(member_id)
            self._forget(member_id)
        self._forget_group(group)

    def _forget_group(self, group: _Group) -> None:
        if (
            self.groups.pop(group.spec.local_id, None) is not None
            and group.spec.restart == "permanent"
            and self._parent is not None
        ):
            self._port.send(self._parent, InnerSpecRemoved(host_id=self.host_id, local_id=group.spec.local_id))

    def _escalate_group(self, group: _Group) -> None:
        """Past its window the group goes as a whole (members stopped in reverse start order) and escalates to the
        host exactly as a single inner actor does."""
        self.log.error(
            "inner group exceeded its restart intensity; escalating to the host",
            group=group.spec.local_id,
            strategy=group.spec.strategy,
            restarts=group.restarts,
        )
        self._stop_group(group)
        self._escalated(group.spec.local_id, f"group:{group.spec.strategy}")

    def _escalate(self, entry: _Inner) -> None:
        """OTP escalation with the host as the supervisor: the actor is removed (not restarted into a crash loop),
        the HostSupervisor is told, and the escalation counts against the host's own window; past that the host
        exits ``escalated`` and its supervisor applies its strategy (a restart that re-creates the other
        permanent inner actors)."""
        local_id = entry.spec.local_id
        self.log.error(
            "inner actor exceeded its restart intensity; escalating to the host",
            local_id=local_id,
            actor=entry.spec.actor,
            restarts=entry.restarts,
        )
        self._forget(local_id)
        self._escalated(local_id, entry.spec.actor)

    def _escalated(self, local_id: str, actor: str) -> None:
        self.escalations += 1
        if self._parent is not None:
            self._port.send(self._parent, InnerEscalated(host_id=self.host_id, local_id=local_id, actor=actor))
        self.window, exceeded = self.window.record(time.monotonic())
        if exceeded:
            self.log.error("host exceeded its escalation intensity; exiting", host_id=self.host_id)
            self._exit("escalated", {"type": "RestartIntensity", "where": host_name(self.host_id)})

    def _forget(self, local_id: str) -> None:
        entry = self.actors.pop(local_id, None)
        if entry is not None and entry.spec.register_as and self._registry is not None:
            self._port.send(
                self._registry, Unregister(name=entry.spec.register_as, address=LocalRef(self.host_id, local_id))
            )
        if entry is not None and entry.group is None and entry.spec.restart == "permanent" and self._parent is not None:
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
        if isinstance(request, SpawnGroup):
            check_group(request.spec)
            group_refs = self._spawn_group(request.spec)
            self._report_permanent([request.spec])
            self._drain()
            return group_refs
        if isinstance(request, FindInner):
            found = sorted(
                lid for lid, e in self.actors.items() if e.spec.actor == request.actor and e.state == "running"
            )
            return found[: max(0, request.limit)]
        if isinstance(request, StopInner):
            group = self.groups.get(request.local_id)
            if group is not None:
                self._stop_group(group)
                return "ok"
            entry = self.actors.get(request.local_id)
            if entry is None:
                raise AdkError("no such inner actor", reason="not_found", details={"local_id": request.local_id})
            entry.state = "stopping"
            self._after_exit(request.local_id)
            return "ok"
        return super().handle_call(request, ctx)

    # ---- timers ------------------------------------------------------------------------------------------------
    def add_timer(self, delay: float, local_id: str, timer_id: int, message: Any, gen: int = 0) -> None:
        due = time.monotonic() + min(max(0.0, delay), MAX_TIMER_S)
        heapq.heappush(self.timer_heap, (due, next(self.seq), local_id, timer_id, message, gen))
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
            _due, _seq, local_id, timer_id, message, gen = heapq.heappop(self.timer_heap)
            if (local_id, timer_id) in self.cancelled_timers:
                self.cancelled_timers.discard((local_id, timer_id))
                continue
            if not self._current(local_id, gen):
                continue  # a timer of an incarnation that has exited: timer ids start again at 1 in the next one
            self.outbox.append((local_id, TimerFire(timer_id, message)))
        self._drain()
        self._arm()

    # ---- blocking I/O --------------------------------------------------------------------------------------------
    def inner_submit_io(
        self, local_id: str, io_id: int, fn: Callable[..., Any], args: tuple[Any, ...], gen: int = 0
    ) -> None:
        assert self.io is not None
        pool_id = next(self.io_ids)
        self.io_owner[pool_id] = (local_id, io_id, gen)
        self.io.submit(pool_id, fn, *args)

    def inner_cancel_io(self, local_id: str, io_id: int, gen: int = 0) -> None:
        assert self.io is not None
        for pool_id, owner in list(self.io_owner.items()):
            if owner == (local_id, io_id, gen):
                self.io.cancel(pool_id)

    def _cancel_io_of(self, local_id: str, gen: int) -> None:
        """An incarnation ended: its blocking calls are cut off (their late results are dropped, see ``_current``)."""
        if self.io is None or not self.io_owner:
            return
        for pool_id, owner in list(self.io_owner.items()):
            if owner[0] == local_id and owner[2] == gen:
                self.io.cancel(pool_id)

    def _current(self, local_id: str, gen: int) -> bool:
        """Whether ``gen`` is the running incarnation of ``local_id`` (an exited one's timers and I/O results must
        not reach its successor, whose timer and I/O ids start again at 1)."""
        entry = self.actors.get(local_id)
        return entry is not None and (not gen or entry.gen == gen)

    def handle_ready(self, fds: list[int]) -> None:
        if self.io is None or self.io.read_fd not in fds:
            return
        for result in self.io.drain():
            owner = self.io_owner.get(result.io_id) if result.progress else self.io_owner.pop(result.io_id, None)
            if owner is not None and self._current(owner[0], owner[2]):
                self.outbox.append((owner[0], IoDone(owner[1], result.value, result.error, result.progress)))
        self._drain()

    # ---- introspection -----------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        inner = [
            {
                "local_id": lid,
                "actor": e.spec.actor.rpartition(".")[2],
                "state": e.state,
                "restarts": e.restarts,
                "restart": e.spec.restart,
                "register_as": e.spec.register_as,
                "group": e.group,
            }
            for lid, e in itertools.islice(self.actors.items(), 200)
        ]
        groups = [
            {
                "local_id": gid,
                "strategy": g.spec.strategy,
                "members": list(g.order),
                "restarts": g.restarts,
                "intensity": g.spec.intensity,
                "period": g.spec.period,
            }
            for gid, g in itertools.islice(self.groups.items(), 200)
        ]
        return {
            "kind": "host",
            "host_id": self.host_id,
            "inner_actors": len(self.actors),
            "inner": inner,
            "groups": groups,
            "restarts": self.total_restarts,
            "escalations": self.escalations,
            "timers": len(self.timer_heap) - len(self.cancelled_timers),
            "outbox": len(self.outbox),
            "delivered": self.delivered,
            "io": self.io.stats() if self.io is not None else {},
            "rss_kb": _rss_kb(),
        }


@dataclass(frozen=True, slots=True)
class _Exited:
    pass


def _roundtrip(message: Any) -> Any:
    try:
        return pickle.loads(pickle.dumps(message))
    except Exception as exc:
        raise AdkError(
            "message does not pickle (strict mode)",
            reason="unpicklable_message",
            details={"message_type": type(message).__name__, "error": type(exc).__name__},
        ) from None


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
        self.inner_specs: dict[int, dict[str, InnerEntry]] = {}
        self.escalated: list[dict[str, Any]] = []

    def init(self, args: Any) -> Any:
        spec = args if isinstance(args, HostsSpec) else HostsSpec(hosts=1)
        self.hosts_spec = spec
        self.inner_specs = {host_id: {s.local_id: s for s in specs} for host_id, specs in spec.inner}
        children = tuple(
            ChildSpec(
                id=host_name(i),
                actor="adk_actors.runtime.host.Host",
                register_as=host_name(i),
                args=HostArgs(
                    host_id=i, hosts=spec.hosts, io_threads=spec.io_threads, strict_pickle=spec.strict_pickle
                ),
                shutdown=5.0,
            )
            for i in range(spec.hosts)
        )
        return super().init(
            SupervisorSpec(strategy="one_for_one", intensity=spec.intensity, period=spec.period, children=children)
        )

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
            self._keep(message)
        elif isinstance(message, InnerSpecRemoved):
            self.inner_specs.get(message.host_id, {}).pop(message.local_id, None)
            self._keep(message)
        elif isinstance(message, InnerEscalated):
            self.escalated.append(
                {
                    "host": host_name(message.host_id),
                    "local_id": message.local_id,
                    "actor": message.actor,
                    "at": time.time(),
                }
            )
            del self.escalated[:-100]
        else:
            super().handle_info(message, sender)

    def _keep(self, message: InnerSpecAdded | InnerSpecRemoved) -> None:
        """Our parent keeps a copy: the specs must outlive this process (and its hosts, which die with it)."""
        if self._parent is not None:
            self._port.send(self._parent, message)

    def status(self) -> dict[str, Any]:
        status = super().status()
        status["kind"] = "host_supervisor"
        status["escalated"] = list(self.escalated)
        status["permanent_inner"] = {host_name(h): len(s) for h, s in sorted(self.inner_specs.items())}
        return status
