"""The generic server: the loop, reply matching, deadlines, timers, crash handling. Concrete actors write handlers.

A :class:`GenServer` subclass implements only the hooks it needs::

    init(args)                      after the parent's SupInit (or at creation for top-level actors)
    handle_call(request, ctx)       return the reply value, raise AdkError to fail the call, or return DEFERRED
                                    and answer later with self.reply(ctx, value) / self.fail(ctx, error)
    handle_info(message, sender)    any other message (casts, routed tells)
    handle_timer(message)           a timer started with start_timer(delay, message) fired
    handle_ready(fds)               a watched fd (watch_fds()) became readable
    handle_child_exited(address)    a child actor process exited
    status()                        extra JSON-safe fields for introspection
    format_status()                 the redacted view of the state that a crash report logs
    terminate(reason)               last words before exit

Let it crash: an exception that is not an ``AdkError`` escaping a handler is a crash. The asker gets a
``Failure`` (``ActorCrashed``), the parent gets ``ChildExit(reason="crash")``, and the actor exits at once
(instead of Thespian's retry-then-PoisonMessage); its supervisor decides about the restart. An ``AdkError``
raised by ``handle_call`` is an ordinary failed reply and does not crash the actor. A crash is logged once, at
error level, as a crash report: the exception type, its scrubbed message and stack trace, the type of the message
being handled and ``format_status()`` (OTP's idea: by default each attribute's type and size, never a value). The
asker's ``ActorCrashed`` names the exception type only.

Deadlines: a ``Call`` whose deadline has passed is not handled (the asker has given up); the facade drops
replies whose ``call_id`` it is no longer waiting for, so a late reply never reaches a later ask.

The same class runs at tier 1 (its own process) and at tier 2 (inside a host): every outbound effect goes
through ``self._port``, a :class:`Port` (``Tier1Port`` here, ``InnerPort`` in ``runtime/host.py``).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from thespian.actors import (
    Actor,
    ActorExitRequest,
    ChildActorExited,
    DeadEnvelope,
    PoisonMessage,
    ThespianWatch,
    WakeupMessage,
    WatchMessage,
)

from adk_actors.errors import ActorCrashed, AdkError, AskTimeout, WorkerError
from adk_actors.logs import crash_fields, get_logger
from adk_actors.runtime.jobwatch import POOL_NAME, JobWatch, Lost
from adk_actors.runtime.lane import LaneReturn, LaneServer, lanes_enabled
from adk_actors.runtime.messages import (
    Call,
    ChildExit,
    ChildReady,
    Down,
    DumpProfile,
    Failure,
    Forward,
    GetStatus,
    Lookup,
    Ping,
    Register,
    RegistryMoved,
    Reply,
    Resolved,
    Shutdown,
    SupInit,
    Unregister,
)
from adk_actors.runtime.messages import (
    ToInner as ToInnerMessage,
)
from adk_actors.runtime.procs import pid_alive_fast
from adk_actors.runtime.refs import LocalRef, host_name
from adk_actors.secrets import prune_secrets

if TYPE_CHECKING:
    from adk_actors.runtime.callables import CallableRef
    from adk_actors.runtime.iopool import IOPool

__all__ = [
    "DEFERRED",
    "CallCtx",
    "GenServer",
    "InnerInit",
    "IoDone",
    "OnReply",
    "Port",
    "TimerFire",
    "ToInnerMessage",
    "crash_error",
    "redacted_state",
    "set_pdeathsig",
]

DEFERRED = object()
"""Returned by ``handle_call`` when the reply will be sent later with ``self.reply(ctx, ...)``."""

OnReply = Callable[[Any, AdkError | None], None]

JOB_REPLY_GRACE_S = 1.0
"""Extra time a caller waits past a job's deadline for the pool's own ``job_timeout`` answer."""

MAX_TIMER_S = 365 * 86400.0
"""Longest timer delay: an ``infinity`` setting becomes a year (Thespian cannot arm an infinite wakeup)."""

_THESPIAN_ONLY = (ChildExit, ChildReady, Down, Register, Unregister, SupInit, Shutdown)
"""Supervision messages stay on Thespian: their order against Thespian's own ``ChildActorExited`` matters (a
``ChildExit`` must reach the parent before the exit it explains)."""

_PR_SET_PDEATHSIG = 1


def set_pdeathsig(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to signal this process when its parent dies (orphans must not outlive a killed parent)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: nothing to set
        return


def crash_error(exc: BaseException, where: str) -> ActorCrashed:
    """A bounded structural error for a crash: exception type and location, never the exception text."""
    return ActorCrashed(
        f"{where} crashed ({type(exc).__name__})", details={"exception_type": type(exc).__name__, "where": where}
    )


_STATE_ATTRS = 64
"""A redacted state view names at most this many attributes."""


_NOT_STATE = frozenset({"_myRef", "_receive", "log", "_port", "_timer_ids", "_io_ids"})
"""Plumbing a crash report's state view leaves out (Thespian's own attributes, the logger, id counters)."""


def redacted_state(obj: Any, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """The default ``format_status``: each instance attribute's type, and its size when it has one (``"dict
    len=3"``), never a value. Attribute names are code, not data; at most :data:`_STATE_ATTRS` are named."""
    view: dict[str, str] = {}
    attrs = ((name, value) for name, value in getattr(obj, "__dict__", {}).items() if name not in skip)
    for name, value in itertools.islice(attrs, _STATE_ATTRS):
        kind = type(value).__name__
        try:
            view[name] = f"{kind} len={len(value)}"
        except Exception:  # no length (or a broken __len__): the type alone
            view[name] = kind
    return view


def _message_type(message: Any) -> str:
    """What a crash report calls the message being handled: a call's request type, else the message's type."""
    if isinstance(message, Call):
        return f"Call[{type(message.request).__name__}]"
    if isinstance(message, WakeupMessage | TimerFire):
        payload = message.payload if isinstance(message, WakeupMessage) else message.message
        return f"{type(message).__name__}[{type(payload).__name__}]"
    return type(message).__name__


@dataclass(frozen=True, slots=True)
class CallCtx:
    """Where and how to answer one call."""

    call_id: str
    reply_to: Any
    deadline: float


@dataclass(frozen=True, slots=True)
class TimerFire:
    """A timer started with ``start_timer`` is due (delivered by Thespian at tier 1, by the host at tier 2)."""

    timer_id: int
    message: Any


@dataclass(frozen=True, slots=True)
class IoDone:
    """A blocking call submitted with ``io_call`` finished."""

    io_id: int
    value: Any
    error: AdkError | None
    progress: bool = False
    """An intermediate value (``token.report``); the call is still running."""


@dataclass(frozen=True, slots=True)
class InnerInit:
    """The host's first message to an inner actor (never pickled: it carries the host's port object)."""

    port: Port
    local_id: str
    args: Any
    registry: Any
    register_as: str | None
    system_port: int
    parent: Any


@dataclass(frozen=True, slots=True)
class _LaneRetry:
    target: LaneReturn
    message: Any
    attempt: int


_LANE_RETRIES = 100
"""About 5 s of retries (1 ms doubling to 50 ms) for an answer that cannot be pickled yet."""


@dataclass(frozen=True, slots=True)
class _PoolGone:
    """Answer pool calls found lost while they were being sent (delivered next, never re-entrantly)."""

    lost: tuple[Lost, ...]


@dataclass(frozen=True, slots=True)
class _CallExpired:
    call_id: str


@dataclass(frozen=True, slots=True)
class _IoExpired:
    io_id: int


@dataclass(frozen=True, slots=True)
class _InlineDone:
    on_done: OnReply
    value: Any
    error: AdkError | None


class Port(Protocol):
    """The outbound effects of one actor, the same contract at both tiers.

    ``Tier1Port`` (below) serves a process actor: direct Thespian or lane sends, ``wakeupAfter`` timers, registry
    forwarding, its own I/O pool. ``InnerPort`` (``runtime/host.py``) serves an inner actor: every effect is routed
    by its host. ``GenServer`` calls only these members, so a handler never asks which tier it runs at. A Protocol
    is structural: neither port inherits from it, and it costs nothing at run time.
    """

    @property
    def ref(self) -> Any:
        """The actor's own ref: its Thespian address (tier 1) or its ``LocalRef`` (tier 2)."""

    @property
    def names(self) -> dict[str, Resolved]:
        """The cache of resolved registry names (at tier 2: the host's)."""

    @property
    def lane(self) -> LaneServer | None:
        """The actor's lane, if it listens on one (never at tier 2)."""

    def send(self, target: Any, message: Any) -> None:
        """Send to a registered name, a Thespian address, a ``LocalRef`` or a facade's ``LaneReturn``."""

    def start_timer(self, delay: float, timer_id: int, message: Any) -> None:
        """Deliver ``TimerFire(timer_id, message)`` to the actor after ``delay`` seconds."""

    def cancel_timer(self, timer_id: int) -> None:
        """Withdraw a timer where the tier can (a fire of a cancelled timer is ignored by the actor anyway)."""

    def exit_self(self) -> None:
        """Make the actor go away after this handler."""

    def submit_io(self, io_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Run blocking ``fn(cancel_token, *args)`` on I/O threads; its result arrives as ``IoDone``."""

    def cancel_io(self, io_id: int) -> None:
        """Cancel a blocking call submitted with ``submit_io``."""

    def resolved(self, entry: Resolved) -> None:
        """A registry entry arrived: cache it."""

    def settle_job(self, call_id: str) -> None:
        """A reply passed by: stop watching the worker-pool call it answers (tier 2: the host does this)."""

    def extra_fds(self) -> list[int]:
        """The port's own fds the actor must watch besides ``watch_fds()``."""

    def take_ready(self, ready: list[int]) -> list[int]:
        """Serve the port's own fds among the readable ``ready`` ones; return the rest for ``handle_ready``."""


class Tier1Port:
    """Outbound effects of a process actor: direct Thespian sends, wakeupAfter timers, registry forwarding."""

    def __init__(self, actor: GenServer) -> None:
        self.actor = actor
        self.names: dict[str, Resolved] = {}
        self.hostname = socket.gethostname()
        self.io_pool: IOPool | None = None
        self.lane: LaneServer | None = None
        self.jobs: JobWatch | None = None
        """Calls in flight to the worker pool (this actor's or, for a host, its inner actors'), watched for the
        pool's death."""
        self.pool_lookup = False

    @property
    def ref(self) -> Any:
        return self.actor.myAddress

    def send(self, target: Any, message: Any) -> None:
        if isinstance(target, str):
            entry = self.names.get(target)
            if entry is None or not self._alive(entry):
                self.names.pop(target, None)
                if self.actor._registry is None:
                    raise AdkError("no registry to resolve names", reason="name_not_found", details={"name": target})
                self.actor.send(
                    self.actor._registry, Forward(name=target, message=message, deadline=time.monotonic() + 30.0)
                )
                if target == POOL_NAME and isinstance(message, Call):
                    self._watch_job(message, 0)
                    self._lookup_pool(message.deadline)
                return
            if target == POOL_NAME and isinstance(message, Call):
                self._watch_job(message, entry.pid if entry.hostname == self.hostname else 0)
            target = entry.address
        if isinstance(target, LocalRef):
            self.send(host_name(target.host_id), ToInnerMessage(local_id=target.local_id, message=message))
            return
        if isinstance(target, LaneReturn):
            self.answer(target, message, 0)
            return
        if (
            self.lane is not None
            and not self.actor._exiting
            and not isinstance(message, _THESPIAN_ONLY)
            and self.lane.client.send(target, self.actor.myAddress, message)
        ):
            return
        self.actor.send(target, message)

    def _watch_job(self, call: Call, pid: int) -> None:
        if self.jobs is None:
            self.jobs = JobWatch()
        if not self.jobs.track(call.call_id, call.reply_to, call.deadline, pid):
            self.jobs.settle(call.call_id)
            self.actor.wakeupAfter(0.0, payload=_PoolGone(((call.call_id, call.reply_to),)))

    def _lookup_pool(self, deadline: float) -> None:
        """Learn which pool process a forwarded call reached. The registry answers a forward it delivers at once
        with ``Resolved``, but not one it parked while the pool was down (delivered to the restarted pool): this
        lookup, parked the same way, names the restarted pool. One at a time, on a cache miss only."""
        if self.pool_lookup or self.actor._registry is None:
            return
        self.pool_lookup = True

        def done(value: Any, _error: AdkError | None) -> None:
            self.pool_lookup = False
            if isinstance(value, Resolved):
                self.resolved(value)

        self.actor.call(self.actor._registry, Lookup(name=POOL_NAME), deadline, done)

    def settle_job(self, call_id: str) -> None:
        """A reply passed by: the call it answers is no longer watched."""
        if self.jobs is not None and self.jobs.pending:
            self.jobs.settle(call_id)

    def resolved(self, entry: Resolved) -> None:
        self.names[entry.name] = entry
        if entry.name == POOL_NAME and self.jobs is not None and self.jobs.pending:
            lost = self.jobs.resolved(entry.pid if entry.hostname == self.hostname else 0)
            if lost:
                self.actor.pool_lost(lost)

    def answer(self, target: LaneReturn, message: Any, attempt: int) -> None:
        """Answer a facade caller on its lane. A message holding an address Thespian has not translated yet (a
        child just created) cannot be pickled: Thespian would postpone such a send, so we retry it shortly."""
        try:
            if self.lane is None or not self.lane.answer(target, message):
                self.actor.log.debug("answer for a closed lane dropped", message_type=type(message).__name__)
        except Exception as exc:
            if attempt >= _LANE_RETRIES:
                self.actor.log.warning(
                    "answer could not be encoded; dropped",
                    message_type=type(message).__name__,
                    error=type(exc).__name__,
                )
                return
            self.actor.wakeupAfter(min(0.001 * 2**attempt, 0.05), payload=_LaneRetry(target, message, attempt + 1))

    def open_lane(self, system_port: int) -> None:
        """Listen on this actor's lane (see :mod:`adk_actors.runtime.lane`); without one, Thespian carries all."""
        if not system_port or not lanes_enabled():
            return
        try:
            self.lane = LaneServer(system_port, self.actor.myAddress)
        except OSError as exc:
            self.actor.log.warning("lane not opened; messages go through Thespian", error=type(exc).__name__)

    def _alive(self, entry: Resolved) -> bool:
        return entry.hostname != self.hostname or pid_alive_fast(entry.pid)

    def start_timer(self, delay: float, timer_id: int, message: Any) -> None:
        self.actor.wakeupAfter(min(max(0.0, delay), MAX_TIMER_S), payload=TimerFire(timer_id, message))

    def cancel_timer(self, timer_id: int) -> None:
        """Thespian wakeups cannot be withdrawn: the fire is ignored when it arrives (see GenServer)."""

    def exit_self(self) -> None:
        self.actor.send(self.actor.myAddress, ActorExitRequest())

    def submit_io(self, io_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Tier-1 blocking calls: a lazily created pool; the actor must then stay a leaf (no forking)."""
        if self.io_pool is None:
            from adk_actors.runtime.iopool import IOPool

            self.io_pool = IOPool(4)
        self.io_pool.submit(io_id, fn, *args)

    def cancel_io(self, io_id: int) -> None:
        if self.io_pool is not None:
            self.io_pool.cancel(io_id)

    def extra_fds(self) -> list[int]:
        fds = [self.io_pool.read_fd] if self.io_pool is not None else []
        if self.lane is not None:
            fds.append(self.lane.fileno())
        if self.jobs is not None and self.jobs.pending:
            fds.extend(self.jobs.fds())
        return fds

    def take_ready(self, ready: list[int]) -> list[int]:
        """Blocking-call results first, then worker-pool calls found lost, then what arrived on the lane."""
        actor = self.actor
        if self.io_pool is not None and self.io_pool.read_fd in ready:
            for result in self.io_pool.drain():
                actor._on_io(IoDone(result.io_id, result.value, result.error, result.progress))
            ready.remove(self.io_pool.read_fd)
        if self.jobs is not None and self.jobs.pending:
            ready, lost = self.jobs.take_ready(ready)
            if lost:
                actor.pool_lost(lost)
        if self.lane is not None and self.lane.fileno() in ready:
            ready.remove(self.lane.fileno())
            actor._on_lane(self.lane)
        return ready


class GenServer(Actor):  # type: ignore[misc]  # Actor is Any: thespian is untyped (follow_imports=skip)
    """Base class of every adk_actors actor. See the module docstring for the hooks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parent: Any = None
        self._child_id: str = type(self).__name__
        self._registry: Any = None
        self._register_as: str | None = None
        self._system_port = 0
        self._initialised = False
        self._exiting = False
        self._timer_ids = itertools.count(1)
        self._timers: set[int] = set()
        self._pending: dict[str, tuple[OnReply, int]] = {}
        self._io_pending: dict[int, tuple[OnReply, int]] = {}
        self._io_progress: dict[int, Callable[[Any], None]] = {}
        self._io_ids = itertools.count(1)
        self._port: Port = Tier1Port(self)
        self.tier = 1
        self.log = get_logger(f"adk_actors.{type(self).__name__}")

    # ---- hooks (override) -------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        """Called once with ``SupInit.args``; return DEFERRED to announce readiness later with ``ready()``."""
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Ping):
            return "pong"
        if isinstance(request, GetStatus):
            return self.full_status()
        if isinstance(request, DumpProfile):
            return self._dump_profile()
        raise AdkError(
            f"{type(self).__name__} does not handle {type(request).__name__}",
            reason="unknown_request",
            details={"request": type(request).__name__},
        )

    def handle_info(self, message: Any, sender: Any) -> None:
        self.log.debug("unhandled message", message_type=type(message).__name__)

    def _dump_profile(self) -> str | None:
        profiler = getattr(self, "_profiler", None)
        directory = os.environ.get("ADKACTORS_PROFILE_DIR")
        if profiler is None or not directory:
            return None
        path = os.path.join(directory, f"{self._child_id}-{os.getpid()}.prof")
        profiler.dump_stats(path)
        return path

    def handle_timer(self, message: Any) -> None:
        self.handle_info(message, None)

    def handle_ready(self, fds: list[int]) -> None:
        """A watched fd is readable."""

    def handle_child_exited(self, address: Any) -> None:
        """A child actor exited (no reason is known here; supervisors track ``ChildExit`` reports)."""

    def watch_fds(self) -> list[int]:
        return []

    def status(self) -> dict[str, Any]:
        return {}

    def terminate(self, reason: str) -> None:
        """Release resources before exit."""

    def format_status(self) -> dict[str, Any]:
        """A redacted view of this actor's state for its crash report (OTP's ``format_status``). The default names
        each instance attribute with its type and size, never a value; an override may add values it knows to be
        harmless (the result is secret-pruned and scrubbed before it is logged). Called only on a crash."""
        return redacted_state(self, _NOT_STATE)

    # ---- API for subclasses -----------------------------------------------------------------------------------
    def full_status(self) -> dict[str, Any]:
        base = {
            "id": self._child_id,
            "type": type(self).__name__,
            "pid": os.getpid(),
            "timers": len(self._timers),
            "pending_calls": len(self._pending),
        }
        lane = self._port.lane
        if lane is not None:
            base["lane"] = {
                "peers": len(lane.peers),
                "targets": len(lane.client.by_key),
                "frames_in": lane.frames_in,
                "frames_out": lane.client.frames_out,
            }
        base.update(self.status())
        return base

    def reply(self, ctx: CallCtx, value: Any) -> None:
        """Answer a deferred call (dropped when its deadline has passed: the asker has gone)."""
        if time.monotonic() <= ctx.deadline:
            self._port.send(ctx.reply_to, Reply(call_id=ctx.call_id, value=value))

    def fail(self, ctx: CallCtx, error: AdkError) -> None:
        if time.monotonic() <= ctx.deadline:
            self._port.send(ctx.reply_to, Failure(call_id=ctx.call_id, error=error))

    def send_to(self, ref: Any, message: Any) -> None:
        """Send ``message`` to a ref: a registered name, an address, or (at tier 2) a ``LocalRef``."""
        self._port.send(ref, message)

    def call(self, ref: Any, request: Any, deadline: float, on_reply: OnReply) -> str:
        """Asynchronous call: ``on_reply(value, None)`` or ``on_reply(None, error)`` runs exactly once later.

        An ``AskTimeout`` is delivered when ``deadline`` (absolute monotonic) passes first; a later reply is
        dropped.
        """
        call_id = uuid.uuid4().hex
        timer = self.start_timer(max(0.0, deadline - time.monotonic()), _CallExpired(call_id))
        self._pending[call_id] = (on_reply, timer)
        self._port.send(ref, Call(call_id=call_id, request=request, deadline=deadline, reply_to=self.my_ref()))
        return call_id

    def my_ref(self) -> Any:
        """This actor's ref: its address at tier 1, its ``LocalRef`` at tier 2."""
        return self._port.ref

    def io_call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        deadline: float,
        on_done: OnReply,
        on_progress: Callable[[Any], None] | None = None,
    ) -> int:
        """Run blocking ``fn(cancel_token, *args)`` on the I/O threads; ``on_done`` runs exactly once later.

        At the deadline the call is cancelled (its sockets shut down) and ``on_done`` gets ``AskTimeout``. Values
        ``fn`` reports with ``cancel_token.report(value)`` reach ``on_progress`` in order, before ``on_done``
        (dropped when no ``on_progress`` was given).
        """
        io_id = next(self._io_ids)
        timer = self.start_timer(max(0.0, deadline - time.monotonic()), _IoExpired(io_id))
        self._io_pending[io_id] = (on_done, timer)
        if on_progress is not None:
            self._io_progress[io_id] = on_progress
        self._port.submit_io(io_id, fn, args)
        return io_id

    def cancel_io(self, io_id: int) -> None:
        """Cancel a blocking call; its ``on_done`` receives a ``cancelled`` error."""
        if io_id in self._io_pending:
            self._port.cancel_io(io_id)

    def run_job(
        self,
        fn: Callable[..., Any] | CallableRef | str,
        args: tuple[Any, ...],
        deadline: float,
        on_done: OnReply,
        *,
        inline: bool = False,
        job_class: str = "default",
        max_memory_mb: int | None = None,
    ) -> str | None:
        """Run user code: in the worker-process pool (default) or, with ``inline=True``, right here.

        Inline code must be trusted, fast and non-blocking; its result is still delivered asynchronously.
        ``max_memory_mb`` bounds a pool job's address space (below its job class's bound, if any).
        """
        from adk_actors.runtime.callables import callable_ref
        from adk_actors.runtime.workers import RunJob, normalize_result

        ref = callable_ref(fn)
        if inline:
            try:
                value, error = normalize_result(ref.resolve()(*args)), None
            except AdkError as err:
                value, error = None, err
            except Exception as exc:
                self.log.error("inline function raised", actor=self._child_id, callable=ref.label, **crash_fields(exc))
                value, error = (
                    None,
                    AdkError(
                        f"inline function failed ({type(exc).__name__})",
                        reason="function_failed",
                        details={"exception_type": type(exc).__name__},
                    ),
                )
            self.start_timer(0.0, _InlineDone(on_done, value, error))
            return None
        # The pool answers job_timeout at the job's deadline; the call itself gets a grace period so that
        # answer (which says what happened) wins over a bare AskTimeout.
        return self.call(
            "workers",
            RunJob(fn=ref, args=args, deadline=deadline, job_class=job_class, max_memory_mb=max_memory_mb),
            deadline + JOB_REPLY_GRACE_S,
            on_done,
        )

    def start_timer(self, delay: float, message: Any) -> int:
        """Deliver ``message`` to ``handle_timer`` after ``delay`` seconds; returns a timer id."""
        timer_id = next(self._timer_ids)
        self._timers.add(timer_id)
        self._port.start_timer(delay, timer_id, message)
        return timer_id

    def cancel_timer(self, timer_id: int) -> None:
        if timer_id in self._timers:
            self._timers.discard(timer_id)
            self._port.cancel_timer(timer_id)

    def recheck_children(self) -> None:
        """Make Thespian re-examine this actor's child processes.

        Thespian learns of child deaths from SIGCHLD, and signals coalesce: when several children die at once,
        some may stay unnoticed zombies. Sending ourselves SIGCHLD re-runs its liveness check, which then
        reports each dead child as ``ChildActorExited``.
        """
        if self.tier == 1:
            os.kill(os.getpid(), signal.SIGCHLD)

    def stop(self, reason: str = "normal") -> None:
        """Exit after this handler, telling the parent why."""
        self._exit(reason, None)

    # ---- the loop ---------------------------------------------------------------------------------------------
    def receiveMessage(self, message: Any, sender: Any) -> Any:
        if self._exiting:
            if isinstance(message, Call):
                self._answer_dead(message, sender)
            return None
        try:
            self._dispatch(message, sender)
        except Exception as exc:  # let it crash: report, answer, exit
            self._crash(exc, message, sender)
            return None
        if self._exiting:
            return None
        fds = self.watch_fds() + self._port.extra_fds()
        return ThespianWatch(fds) if fds else None

    def _dispatch(self, message: Any, sender: Any) -> None:
        if isinstance(message, Call):
            self._on_call(message, sender)
        elif isinstance(message, Reply | Failure):
            self._on_reply(message)
        elif isinstance(message, WakeupMessage):
            payload = message.payload
            if isinstance(payload, TimerFire):
                self._fire(payload)
            elif isinstance(payload, _LaneRetry):
                if isinstance(self._port, Tier1Port):  # only a process actor answers on a lane
                    self._port.answer(payload.target, payload.message, payload.attempt)
            elif isinstance(payload, _PoolGone):
                self.pool_lost(list(payload.lost))
            else:
                self.handle_wakeup(payload)
        elif isinstance(message, TimerFire):  # tier-2 timers arrive unwrapped
            self._fire(message)
        elif isinstance(message, IoDone):
            self._on_io(message)
        elif isinstance(message, WatchMessage):
            ready = self._port.take_ready(list(message.ready))
            if ready:
                self.handle_ready(ready)
        elif isinstance(message, SupInit):
            self._on_init(message, sender)
        elif isinstance(message, InnerInit):
            self._port = message.port
            self.tier = 2
            self._on_init(
                SupInit(
                    parent=message.parent,
                    child_id=message.local_id,
                    args=message.args,
                    registry=message.registry,
                    register_as=message.register_as,
                    system_port=message.system_port,
                ),
                sender,
            )
        elif isinstance(message, ActorExitRequest):
            self._exiting = True
            self._safe_terminate("shutdown")
        elif isinstance(message, Shutdown):
            self.stop(message.reason)
        elif isinstance(message, ChildActorExited):
            self.handle_child_exited(message.childAddress)
        elif isinstance(message, Resolved):
            self._port.resolved(message)
        elif isinstance(message, RegistryMoved):
            # Our registry was restarted: later registrations, Downs and forwards go to the new one.
            self._registry = message.address
            self.handle_info(message, sender)
        elif isinstance(message, PoisonMessage):
            self.log.warning("message could not be delivered", message_type=type(message.poisonMessage).__name__)
        elif isinstance(message, DeadEnvelope):
            self.handle_info(message, sender)
        else:
            self.handle_info(message, sender)

    def _on_lane(self, lane: LaneServer) -> None:
        """Dispatch what arrived on the lane, one message at a time, each with the usual crash handling."""
        for sender, message in lane.poll():
            if self._exiting:
                if isinstance(message, Call):
                    self._answer_dead(message, sender)
                continue
            try:
                self._dispatch(message, sender)
            except Exception as exc:  # let it crash, as for a Thespian delivery
                self._crash(exc, message, sender)

    def _on_init(self, message: SupInit, sender: Any) -> None:
        self._parent = message.parent
        self._child_id = message.child_id
        self._registry = message.registry
        self._register_as = message.register_as
        self._system_port = message.system_port
        if self._system_port and self.tier == 1:
            os.environ["ADK_SYSTEM_PORT"] = str(self._system_port)
        if isinstance(self._port, Tier1Port):  # process-wide setup, for a process actor only
            set_pdeathsig()
            self._port.open_lane(self._system_port)  # before Register: whoever finds us finds our lane
            if os.environ.get("ADKACTORS_PROFILE_DIR"):  # diagnostics for `make bench` profiles; off by default
                import cProfile

                self._profiler = cProfile.Profile()
                self._profiler.enable()
        result = self.init(message.args)
        self._initialised = True
        if self._register_as and self._registry is not None:
            self._port.send(
                self._registry,
                Register.here(self._register_as, self.my_ref(), os.getpid(), type(self).__name__),
            )
        if result is not DEFERRED:
            self.ready()

    def ready(self) -> None:
        """Tell the parent this actor is started (called automatically unless ``init`` returned DEFERRED)."""
        if self._parent is not None:
            self._port.send(self._parent, ChildReady(child_id=self._child_id, pid=os.getpid(), address=self.my_ref()))

    def _on_call(self, call: Call, sender: Any) -> None:
        ctx = CallCtx(call.call_id, call.reply_to if call.reply_to is not None else sender, call.deadline)
        if time.monotonic() > call.deadline:
            return
        try:
            value = self.handle_call(call.request, ctx)
        except AdkError as err:
            self.fail(ctx, err)
            return
        except Exception as exc:
            self._crash(exc, call, ctx.reply_to)
            return
        if value is not DEFERRED:
            self.reply(ctx, value)

    def _on_reply(self, message: Reply | Failure) -> None:
        self._port.settle_job(message.call_id)
        entry = self._pending.pop(message.call_id, None)
        if entry is None:
            return  # late or unknown: dropped
        on_reply, timer = entry
        self.cancel_timer(timer)
        if isinstance(message, Reply):
            on_reply(message.value, None)
        else:
            on_reply(None, message.error)

    def _on_io(self, done: IoDone) -> None:
        if done.progress:
            on_progress = self._io_progress.get(done.io_id)
            if on_progress is not None and done.io_id in self._io_pending:
                on_progress(done.value)
            return
        self._io_progress.pop(done.io_id, None)
        entry = self._io_pending.pop(done.io_id, None)
        if entry is None:
            return
        on_done, timer = entry
        self.cancel_timer(timer)
        on_done(done.value, done.error)

    def handle_wakeup(self, payload: Any) -> None:
        """A raw Thespian wakeup with a payload of the subclass's own (tier-1 actors only)."""

    def _fire(self, fire: TimerFire) -> None:
        if fire.timer_id not in self._timers:
            return
        self._timers.discard(fire.timer_id)
        if isinstance(fire.message, _InlineDone):
            fire.message.on_done(fire.message.value, fire.message.error)
            return
        if isinstance(fire.message, _IoExpired):
            entry = self._io_pending.pop(fire.message.io_id, None)
            self._io_progress.pop(fire.message.io_id, None)
            if entry is not None:
                self._port.cancel_io(fire.message.io_id)
                entry[0](None, AskTimeout("blocking call deadline passed", details={"io_id": fire.message.io_id}))
            return
        if isinstance(fire.message, _CallExpired):
            entry = self._pending.pop(fire.message.call_id, None)
            if entry is not None:
                entry[0](None, AskTimeout("call deadline passed", details={"call_id": fire.message.call_id}))
            return
        self.handle_timer(fire.message)

    def pool_lost(self, lost: list[Lost]) -> None:
        """The worker pool process died holding these calls: answer each at once with ``worker_lost`` (as the pool
        answers a job whose worker died), instead of leaving the callers to their deadlines."""
        self.log.warning("the worker pool exited with calls in flight; failing them", calls=len(lost))
        for call_id, reply_to in lost:
            failure = Failure(
                call_id=call_id,
                error=WorkerError("the worker pool process exited during the job", reason="worker_lost"),
            )
            self.deliver_local(reply_to, failure)

    def deliver_local(self, target: Any, message: Any) -> None:
        """Deliver ``message`` to ``target`` as if it had arrived from outside (to this actor: directly)."""
        if target is None or target == self.myAddress:
            self._dispatch(message, None)
        else:
            self._port.send(target, message)

    def _answer_dead(self, call: Call, sender: Any) -> None:
        target = call.reply_to if call.reply_to is not None else sender
        err = ActorCrashed("actor is exiting", details={"actor": self._child_id})
        self._port.send(target, Failure(call_id=call.call_id, error=err))

    def _crash(self, exc: BaseException, message: Any, sender: Any) -> None:
        if self._exiting:
            return
        where = f"{type(self).__name__}.{type(message).__name__}"
        self._report_crash(exc, message, where)
        err = crash_error(exc, where)
        if isinstance(message, Call) and sender is not None and time.monotonic() <= message.deadline:
            target = message.reply_to if message.reply_to is not None else sender
            self._port.send(target, Failure(call_id=message.call_id, error=err))
        self._exit("crash", {"type": type(exc).__name__, "where": where})

    def _report_crash(self, exc: BaseException, message: Any, where: str) -> None:
        """Log the crash report (once per crash, on the crash path only; see the module docstring)."""
        try:
            state: Any = prune_secrets(self.format_status())
        except Exception as status_exc:  # a broken format_status must not lose the report
            state = f"format_status raised {type(status_exc).__name__}"
        try:
            self.log.error(
                "actor crashed",
                actor=self._child_id,
                actor_type=type(self).__name__,
                tier=self.tier,
                where=where,
                message_type=_message_type(message),
                state=state,
                **crash_fields(exc),
            )
        except Exception:  # logging must not stop the crash handling (the asker's answer, the exit)
            return

    def _exit(self, reason: str, error: dict[str, Any] | None) -> None:
        if self._exiting:
            return
        self._exiting = True
        self._safe_terminate(reason)
        for on_reply, _timer in [*self._pending.values(), *self._io_pending.values()]:
            try:
                on_reply(None, ActorCrashed("caller exited", details={"actor": self._child_id}))
            except Exception:  # the caller is exiting anyway
                pass
        self._pending.clear()
        self._io_pending.clear()
        if self._register_as and self._registry is not None and self.tier == 1:
            # Like Erlang's unregister-on-exit: lookups wait for the restart instead of finding a dying process.
            self._port.send(self._registry, Down(name=self._register_as, address=self.myAddress))
        if self._parent is not None:
            self._port.send(self._parent, ChildExit(child_id=self._child_id, reason=reason, error=error))
        self._port.exit_self()

    def _safe_terminate(self, reason: str) -> None:
        try:
            self.terminate(reason)
        except Exception as exc:
            self.log.warning("terminate raised", actor=self._child_id, reason=reason, **crash_fields(exc))
