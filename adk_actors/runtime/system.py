"""Lifecycle and facade plumbing: start / attach / stop an actor system, and ask / cast into it.

``start()`` boots a multiprocTCPBase system from a clean subprocess (``runtime/boot.py``) and attaches to it by
admin port. In owned mode (the default) the root watches the starter's pid and takes the system down when it
dies. ``attach(port)`` joins a running system and owns nothing. ``stop()`` asks the root to stop its children
in reverse order, shuts the admin down and then kills the system's process group: no actor process outlives it.

Every ask goes through a fresh external endpoint (``ActorSystem.private()`` semantics, closed in ``finally``)
with a correlation id and an absolute deadline: replies for another call id are dropped, Thespian's ``None`` is
:class:`~adk_actors.errors.AskTimeout`, a ``PoisonMessage`` is :class:`~adk_actors.errors.ActorCrashed`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from thespian.actors import ActorAddress, ActorSystem, ActorSystemFailure, PoisonMessage
from thespian.actors import ExternalContext as _ExternalContext

from adk_actors.errors import (
    ActorCrashed,
    AdkError,
    AskTimeout,
    ConfigError,
    RuntimeFailure,
    SystemNotRunning,
    WorkerError,
    error_from_dict,
)
from adk_actors.runtime import thespian_tuning
from adk_actors.runtime.callables import callable_ref
from adk_actors.runtime.host import InnerGroupSpec, InnerSpec, Spawn, SpawnGroup, StopInner, check_group
from adk_actors.runtime.lane import ENV as LANES_ENV
from adk_actors.runtime.lane import LaneConn, address_key, lanes_enabled
from adk_actors.runtime.logdefs import NULL_LOG_DEFS, sink_path, thesplog_path
from adk_actors.runtime.messages import (
    Call,
    Failure,
    GetStatus,
    Lookup,
    Reply,
    Request,
    Resolved,
    Route,
    Shutdown,
    ToInner,
)
from adk_actors.runtime.procs import group_pids, pid_alive, pid_alive_fast
from adk_actors.runtime.refs import LocalRef, host_name, place
from adk_actors.runtime.root import ROOT_NAME, AwaitRegistry, Root, SystemInfo
from adk_actors.runtime.server import JOB_REPLY_GRACE_S
from adk_actors.runtime.workers import RunJob
from adk_actors.secrets import private_dir, private_opener
from adk_actors.settings import Settings, load_settings

__all__ = [
    "ActorSystemHandle",
    "Endpoint",
    "attach",
    "current_system",
    "group_pids",
    "open_actor_system",
    "port_listening",
    "start",
    "stop",
]

thespian_tuning.apply()
_lock = threading.RLock()
_default: ActorSystemHandle | None = None
_HOSTNAME = socket.gethostname()

R = TypeVar("R")


def port_listening(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Block (on pidfds, no polling) until every pid has exited or ``timeout`` passes; return the survivors."""
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except (ProcessLookupError, OSError):
            continue
    deadline = time.monotonic() + timeout
    try:
        while fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select(list(fds), [], [], remaining)
            for fd in ready:
                os.close(fd)
                fds.pop(fd)
        return list(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


def _thespian_env(settings: Settings, port: int) -> dict[str, str]:
    return {
        "THESPIAN_BASE_IPADDR": settings.bind_ip,
        "THESPLOG_FILE": str(thesplog_path(settings.data_path(), port)),
        "THESPLOG_THRESHOLD": "WARNING",
        "ADK_SYSTEM_PORT": str(port),
        LANES_ENV: "1" if settings.local_lanes else "0",
    }


class ActorSystemHandle:
    """One attachment to one actor system (several may coexist in a process, on different ports)."""

    def __init__(self, port: int, settings: Settings, *, owned: bool, info: dict[str, Any], asys: ActorSystem) -> None:
        self.port = port
        self.settings = settings
        self.owned = owned
        self._asys: ActorSystem | None = asys
        self.root: Any = info["root"]
        self.registry: Any = info["registry"]
        # The registry's pid is watched during lookups, so only where its process table is ours.
        self._root_local = info.get("hostname", _HOSTNAME) == _HOSTNAME
        self.registry_pid: int = int(info.get("registry_pid") or 0) if self._root_local else 0
        self.router: Any = info["router"]
        self.pgid: int = int(info["pgid"])
        self.root_pid: int = int(info["root_pid"])
        self._names: dict[str, Resolved] = {}
        self._dead: dict[str, Any] = {}
        self._local = threading.local()
        self._endpoints: weakref.WeakSet[_Endpoint] = weakref.WeakSet()
        self._names_lock = threading.Lock()
        self._tell_lock = threading.Lock()
        self._lanes_on = settings.local_lanes and lanes_enabled()
        self._no_lane: set[tuple[str, int]] = set()
        self._lane_conns: weakref.WeakSet[LaneConn] = weakref.WeakSet()

    # ---- paths ----------------------------------------------------------------------------------------------------
    @property
    def log_sink(self) -> Path:
        return sink_path(self.settings.data_path(), self.port)

    @property
    def thesplog(self) -> Path:
        return thesplog_path(self.settings.data_path(), self.port)

    @property
    def running(self) -> bool:
        return self._asys is not None

    # ---- asks -----------------------------------------------------------------------------------------------------
    def _system(self) -> ActorSystem:
        if self._asys is None:
            raise SystemNotRunning("this actor system handle is stopped", details={"port": self.port})
        return self._asys

    @overload
    def ask(self, target: Any, request: Request[R], timeout: float | None = None) -> R: ...

    @overload
    def ask(self, target: Any, request: object, timeout: float | None = None) -> Any: ...

    def ask(self, target: Any, request: object, timeout: float | None = None) -> Any:
        """Ask ``target`` (an address or a registered name) and return the reply value.

        Typed where the request fixes the reply: a request deriving from ``Request[R]`` (``Ping`` → ``str``,
        ``GetStatus`` → ``dict``, ``Lookup`` → ``Resolved``, ``Spawn`` → ``LocalRef``, ...) makes this return
        ``R`` to a type checker; any other request returns ``Any``. Nothing is checked at run time.

        Raises:
            AskTimeout: no reply before the deadline.
            ActorCrashed: the target crashed handling the request (or could not take it).
            AdkError: whatever error the target answered with.
        """
        timeout = self.settings.ask_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        if isinstance(target, LocalRef):
            return self._ask_inner(target, request, deadline)
        if not isinstance(target, str):
            return self.ask_address(address=target, request=request, deadline=deadline)
        entry = self.resolve_entry(target, deadline)
        if isinstance(entry.address, LocalRef):
            return self._ask_inner(entry.address, request, deadline)
        try:
            return self.ask_address(
                entry.address, request, deadline, monitor_pid=entry.pid if entry.hostname == _HOSTNAME else 0
            )
        except ActorCrashed:
            self._forget(target, dead=entry.address)
            raise
        except AskTimeout:
            self._forget(target)
            raise

    def _ask_inner(self, ref: LocalRef, request: Any, deadline: float) -> Any:
        """One hop in (``ToInner`` to the host), one hop out (the inner actor replies to this endpoint)."""
        name = host_name(ref.host_id)
        host = self.resolve_entry(name, deadline)
        try:
            return self.ask_address(
                host.address,
                request,
                deadline,
                monitor_pid=host.pid if host.hostname == _HOSTNAME else 0,
                wrap=lambda call: ToInner(local_id=ref.local_id, message=call),
            )
        except (AskTimeout, ActorCrashed):
            self._forget(name)
            raise

    def spawn(
        self,
        actor: str,
        args: Any = None,
        *,
        id: str | None = None,
        name: str | None = None,
        restart: str = "permanent",
        timeout: float | None = None,
    ) -> LocalRef:
        """Start an inner (tier-2) actor on the host chosen by ``blake2b(id) mod hosts``.

        Raises:
            AdkError: ``already_started`` when ``id`` is taken on its host.
        """
        local_id = id or uuid.uuid4().hex
        host_id = place(local_id, self.settings.hosts)
        spec = InnerSpec(
            local_id=local_id,
            actor=actor,
            args=args,
            restart=restart,  # type: ignore[arg-type]
            register_as=name,
        )
        ref: LocalRef = self.ask(host_name(host_id), Spawn(spec=spec), timeout)
        return ref

    def stop_inner(self, ref: LocalRef, timeout: float | None = None) -> None:
        self.ask(host_name(ref.host_id), StopInner(local_id=ref.local_id), timeout)

    def spawn_group(
        self,
        group_id: str,
        members: Sequence[InnerSpec],
        *,
        strategy: str = "one_for_one",
        intensity: int = 1,
        period: float = 5.0,
        restart: str = "permanent",
        timeout: float | None = None,
    ) -> list[LocalRef]:
        """Start a supervised group of inner actors (an inner supervisor) on the host chosen by
        ``blake2b(group_id) mod hosts``; every member runs there. See :class:`~adk_actors.runtime.host.InnerGroupSpec`
        for the strategies (``one_for_one``, ``one_for_all``, ``rest_for_one``) and the escalation past
        ``intensity`` restarts in ``period`` seconds. Returns the members' refs, in start order.

        Raises:
            ConfigError: ``invalid_group``, ``invalid_strategy``, ``invalid_value``, ``duplicate_member`` (checked
                here, before anything is sent).
            AdkError: ``already_started`` when the group id or a member id is taken on that host (nothing starts).
        """
        if isinstance(members, str | bytes) or not isinstance(members, Sequence):
            raise ConfigError(
                "members must be a sequence of InnerSpec", reason="invalid_group", details={"field": "members"}
            )
        spec = InnerGroupSpec(
            local_id=group_id,
            members=tuple(members),
            strategy=strategy,  # type: ignore[arg-type]
            intensity=intensity,
            period=period,
            restart=restart,  # type: ignore[arg-type]  # check_group validates it below
        )
        check_group(spec)
        refs: list[LocalRef] = self.ask(host_name(place(group_id, self.settings.hosts)), SpawnGroup(spec=spec), timeout)
        return list(refs)

    def stop_group(self, group_id: str, timeout: float | None = None) -> None:
        """Stop a group started with :meth:`spawn_group`: its members in reverse start order; none restart.

        Raises:
            AdkError: ``not_found`` when no such group (or inner actor) runs.
        """
        if not isinstance(group_id, str) or not group_id:
            raise ConfigError("a group id is a non-empty string", reason="invalid_group", details={"field": "group_id"})
        self.ask(host_name(place(group_id, self.settings.hosts)), StopInner(local_id=group_id), timeout)

    def run_job(
        self, fn: Any, *args: Any, timeout: float | None = None, job_class: str = "default", **kwargs: Any
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` in the worker-process pool and return its JSON-safe result.

        Raises:
            WorkerError: ``unpicklable_callable``, ``job_timeout``, ``worker_lost``, ``unserializable_result``.
            AdkError: ``function_failed`` (the function raised; only its exception type is reported).
        """
        timeout = self.settings.ask_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        job = RunJob(fn=callable_ref(fn), args=args, kwargs=kwargs, deadline=deadline, job_class=job_class)
        try:
            return self.ask("workers", job, timeout + JOB_REPLY_GRACE_S)
        except ActorCrashed as err:
            if err.reason != "noproc":
                raise
            raise WorkerError("the worker pool process exited during the job", reason="worker_lost") from None

    def open_endpoint(self) -> Endpoint:
        """A private endpoint kept open by the caller (for streams that receive many messages); close it."""
        return Endpoint(self, _ExternalContext(self._system()._systemBase.external_clone()))

    def host_entry(self, host_id: int, deadline: float | None = None) -> Resolved:
        """The registry entry of host ``host_id`` (its address and pid)."""
        return self.resolve_entry(host_name(host_id), deadline)

    def _context(self) -> tuple[Any, bool]:
        """The endpoint for one ask: fresh (closed after the ask) or this thread's (kept; see the setting)."""
        if self.settings.facade_endpoints == "per_call":
            return _ExternalContext(self._system()._systemBase.external_clone()), True
        endpoint = getattr(self._local, "endpoint", None)
        if endpoint is None or endpoint.closed:
            endpoint = _Endpoint(_ExternalContext(self._system()._systemBase.external_clone()))
            self._local.endpoint = endpoint
            with self._names_lock:
                self._endpoints.add(endpoint)
        return endpoint.context, False

    def _discard_context(self) -> None:
        endpoint = getattr(self._local, "endpoint", None)
        if endpoint is not None:
            endpoint.close()
            self._local.endpoint = None

    def ask_address(
        self,
        address: Any,
        request: Any,
        deadline: float,
        monitor_pid: int = 0,
        wrap: Any = None,
        endpoint: Any = None,
        early: collections.deque[Any] | None = None,
    ) -> Any:
        """Ask one address. With ``monitor_pid`` the target process is monitored during the wait, as OTP's
        ``gen_server:call`` does: if it dies the call fails at once with ``ActorCrashed(reason="noproc")``.
        ``endpoint`` (an :class:`Endpoint`'s context) sends from that endpoint instead of a fresh one; ``early``
        keeps the other messages that reach it before the reply (an endpoint's later messages may overtake the
        reply), in order, instead of dropping them.
        """
        call_id = uuid.uuid4().hex
        message: Any = Call(call_id=call_id, request=request, deadline=deadline)
        if wrap is not None:
            message = wrap(message)
        if endpoint is None and self._lanes_on:
            key = address_key(address)
            lane = self._lane(key) if key is not None else None
            if lane is not None and key is not None:
                return self._lane_ask(lane, key, message, call_id, request, deadline)
        context, fresh = (endpoint, False) if endpoint is not None else self._context()
        failed = True
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AskTimeout("deadline passed before the ask", details={"request": type(request).__name__})
            try:
                reply = context.ask(address, message, min(remaining, _MONITOR_SLICE) if monitor_pid else remaining)
            except ActorSystemFailure as exc:
                raise RuntimeFailure(
                    "the message could not be sent",
                    reason="send_failed",
                    details={"request": type(request).__name__, "error": type(exc).__name__},
                ) from None
            while True:
                if isinstance(reply, Reply) and reply.call_id == call_id:
                    failed = False
                    return reply.value
                if isinstance(reply, Failure) and reply.call_id == call_id:
                    failed = False
                    raise reply.error
                if isinstance(reply, PoisonMessage) and getattr(reply.poisonMessage, "call_id", None) == call_id:
                    raise ActorCrashed(
                        "the target could not handle the request", details={"request": type(request).__name__}
                    )
                if reply is not None and early is not None:
                    early.append(reply)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (reply is None and not monitor_pid):
                    raise AskTimeout(
                        "no reply before the deadline", details={"request": type(request).__name__, "call_id": call_id}
                    )
                if reply is None and not pid_alive(monitor_pid):
                    raise ActorCrashed(
                        "the target process exited during the call",
                        reason="noproc",
                        details={"request": type(request).__name__},
                    )
                reply = context.listen(min(remaining, _MONITOR_SLICE) if monitor_pid else remaining)
        finally:
            if fresh:
                context.exit_clone()
            elif failed and endpoint is None:
                self._discard_context()  # after a timeout or a transport error, start the next ask clean

    def _lane(self, key: tuple[str, int], fresh: bool = False) -> LaneConn | None:
        """This thread's lane to the actor at ``key``, connected on first use (or anew with ``fresh``);
        ``None`` when the target has none."""
        if key in self._no_lane:
            return None
        lanes: dict[tuple[str, int], LaneConn] | None = getattr(self._local, "lanes", None)
        if lanes is None:
            lanes = self._local.lanes = {}
        conn = lanes.get(key)
        if conn is not None and not conn.closed and not fresh:
            return conn
        if conn is not None:
            conn.close()
        try:
            conn = LaneConn(self.port, key)
        except OSError:
            with self._names_lock:
                self._no_lane.add(key)
            return None
        lanes[key] = conn
        with self._names_lock:
            self._lane_conns.add(conn)
        return conn

    def _lane_ask(
        self, lane: LaneConn, key: tuple[str, int], message: Any, call_id: str, request: Any, deadline: float
    ) -> Any:
        """One ask over a lane: the reply comes back on the same connection; its end is the target's exit."""
        if deadline - time.monotonic() <= 0:
            raise AskTimeout("deadline passed before the ask", details={"request": type(request).__name__})
        ok = False
        try:
            try:
                lane.send(message)
            except (BrokenPipeError, ConnectionResetError):
                # A kept connection whose actor has died since (its port may now belong to a new actor): the
                # request never left, so it is sent once more on a fresh connection to whoever listens now.
                fresh = self._lane(key, fresh=True)
                if fresh is None:
                    raise
                lane = fresh
                lane.send(message)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                reply = lane.recv(remaining)
                if isinstance(reply, Reply | Failure) and reply.call_id == call_id:
                    ok = True
                    if isinstance(reply, Failure):
                        raise reply.error
                    return reply.value
        except TimeoutError:
            raise AskTimeout(
                "no reply before the deadline", details={"request": type(request).__name__, "call_id": call_id}
            ) from None
        except OSError:  # reset, broken pipe, end of stream: the target's process is gone
            raise ActorCrashed(
                "the target process exited during the call",
                reason="noproc",
                details={"request": type(request).__name__},
            ) from None
        finally:
            if not ok:
                lane.close()  # a late reply must never reach a later ask on this connection

    def resolve(self, name: str, deadline: float | None = None) -> Any:
        """The current address registered as ``name`` (cached; re-resolved when its process is gone).

        Raises:
            NameNotFound: nothing registered it before the deadline.
        """
        return self.resolve_entry(name, deadline).address

    def resolve_entry(self, name: str, deadline: float | None = None) -> Resolved:
        if name == ROOT_NAME:
            return Resolved(name=name, address=self.root, pid=self.root_pid, hostname=_HOSTNAME, generation=0)
        with self._names_lock:
            entry = self._names.get(name)
        if entry is not None and _alive(entry):
            return entry
        deadline = deadline if deadline is not None else time.monotonic() + self.settings.ask_timeout_s
        with self._names_lock:
            dead = self._dead.pop(name, None)
        resolved = self._lookup(name, dead, deadline)
        with self._names_lock:
            self._names[name] = resolved
        return resolved

    def _lookup(self, name: str, dead: Any, deadline: float) -> Resolved:
        """Ask the registry, watching its process: if it dies (before or during the lookup) wait for the root to
        restart it and ask the new one, so a restarted registry costs callers a restart, not their deadline."""
        while True:
            registry, pid = self.registry, self.registry_pid
            try:
                resolved: Resolved = self.ask_address(
                    registry, Lookup(name=name, exclude=dead), deadline, monitor_pid=pid
                )
                return resolved
            except ActorCrashed as err:
                if err.reason != "noproc":
                    raise
            info = self.ask_address(self.root, AwaitRegistry(exclude=registry), deadline)
            with self._names_lock:
                if self.registry == registry:
                    self.registry = info["registry"]
                    self.registry_pid = int(info.get("registry_pid") or 0) if self._root_local else 0

    def _forget(self, name: str, dead: Any = None) -> None:
        with self._names_lock:
            self._names.pop(name, None)
            if dead is not None:
                self._dead[name] = dead

    def cast(self, target: Any, message: Any) -> None:
        """Fire-and-forget through the router (never blocks on a busy target).

        Sent from this thread's endpoint, as asks are: Thespian's transport is not safe to drive from two threads,
        and the system's own endpoint, shared by every thread, lost messages under concurrent casts (200 stream
        subscribers acknowledging at once stalled every one of them).
        """
        context, fresh = self._context()
        try:
            context.tell(self.router, Route(target=target, message=message))
        except ActorSystemFailure as exc:
            raise RuntimeFailure(
                "the message could not be sent", reason="send_failed", details={"error": type(exc).__name__}
            ) from None
        finally:
            if fresh:
                context.exit_clone()

    def tell(self, address: Any, message: Any) -> None:
        """A raw tell to an address from the system's own endpoint (blocks while the target is busy: prefer
        :meth:`cast`). That endpoint's undeliverable messages reach the node's dead-letter handling; it is shared,
        so tells are serialized."""
        with self._tell_lock:
            self._system().tell(address, message)

    # ---- introspection --------------------------------------------------------------------------------------------
    def status(self, timeout: float | None = None) -> dict[str, Any]:
        """The root's status: its children and node information."""
        return dict(self.ask(self.root, GetStatus(), timeout))

    def tree(self, timeout: float | None = None) -> dict[str, Any]:
        """Walk the supervision tree from the root: each supervisor's status with its children's statuses."""
        deadline = time.monotonic() + (timeout or self.settings.ask_timeout_s)
        return self._walk(self.root, deadline)

    def _walk(self, address: Any, deadline: float) -> dict[str, Any]:
        status = dict(self.ask_address(address, GetStatus(), deadline))
        status.pop("registry", None)
        status.pop("router", None)
        children = []
        for child in status.get("children", []):
            child = dict(child)
            child_address = child.pop("address", None)
            if child.get("state") == "running" and child_address is not None:
                try:
                    child["status"] = self._walk(child_address, deadline)
                except AdkError as err:
                    child["status"] = {"error": err.reason}
            children.append(child)
        if "children" in status:
            status["children"] = children
        return status

    # ---- shutdown -------------------------------------------------------------------------------------------------
    def stop(self, timeout: float = 10.0) -> None:
        """Stop the system: ordered shutdown from the root, admin shutdown, then SIGKILL of the process group."""
        asys, self._asys = self._asys, None
        if asys is None:
            return
        self._close_endpoints()
        try:
            if port_listening(self.port, self.settings.bind_ip):
                with contextlib.suppress(Exception):
                    asys.tell(self.root, Shutdown(reason="shutdown"))
                _wait_gone([self.root_pid], timeout / 2)
                done = threading.Event()

                def shutdown() -> None:
                    with contextlib.suppress(Exception):
                        asys.shutdown()
                    done.set()

                threading.Thread(target=shutdown, daemon=True, name="adk-shutdown").start()
                done.wait(timeout / 2)
        finally:
            _kill_group(self.pgid)
            with _lock:
                global _default
                if _default is self:
                    _default = None

    def _close_endpoints(self) -> None:
        with self._names_lock:
            endpoints = list(self._endpoints)
            self._endpoints.clear()
            lanes = list(self._lane_conns)
            self._lane_conns.clear()
        for endpoint in endpoints:
            endpoint.close()
        for lane in lanes:
            lane.close()

    def detach(self) -> None:
        """Forget this handle without stopping the system (attached mode)."""
        self._close_endpoints()
        self._asys = None
        with _lock:
            global _default
            if _default is self:
                _default = None


class Endpoint:
    """A caller-owned endpoint: asks from it, and messages sent to it by actors (``listen``)."""

    def __init__(self, handle: ActorSystemHandle, context: Any) -> None:
        self.handle = handle
        self.context = context
        self.closed = False
        self.early: collections.deque[Any] = collections.deque()
        """Messages that arrived while an ask waited for its reply; :meth:`listen` returns them first."""

    def ask_inner(self, ref: LocalRef, request: Any, deadline: float) -> Any:
        """Ask an inner actor from this endpoint (its replies and later messages come back here; a message that
        overtakes the reply is kept for :meth:`listen`)."""
        host = self.handle.host_entry(ref.host_id, deadline)
        return self.handle.ask_address(
            host.address,
            request,
            deadline,
            monitor_pid=host.pid if host.hostname == _HOSTNAME else 0,
            wrap=lambda call: ToInner(local_id=ref.local_id, message=call),
            endpoint=self.context,
            early=self.early,
        )

    def listen(self, timeout: float) -> Any:
        """The next message sent to this endpoint, or None after ``timeout`` seconds."""
        if self.early:
            return self.early.popleft()
        return self.context.listen(max(0.0, timeout))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                self.context.exit_clone()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Endpoint:
    """A thread's long-lived external endpoint (``facade_endpoints = "per_thread"``); closed when the thread ends
    (CPython drops thread-local values then) or when the handle stops."""

    __slots__ = ("__weakref__", "closed", "context")

    def __init__(self, context: Any) -> None:
        self.context = context
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                self.context.exit_clone()

    def __del__(self) -> None:
        self.close()


def _kill_group(pgid: int) -> None:
    if pgid <= 1 or pgid == os.getpgid(0):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    _wait_gone(group_pids(pgid), 5.0)


_MONITOR_SLICE = 0.05
"""While waiting for a reply from a monitored process, check its liveness this often (seconds)."""


def _alive(entry: Resolved) -> bool:
    return entry.hostname != _HOSTNAME or pid_alive_fast(entry.pid)


def _client_system(settings: Settings, port: int) -> ActorSystem:
    for key, value in _thespian_env(settings, port).items():
        if key != "ADK_SYSTEM_PORT":
            os.environ.setdefault(key, value)
    return ActorSystem("multiprocTCPBase", {"Admin Port": port}, logDefs=NULL_LOG_DEFS, transientUnique=True)


def _connect(settings: Settings, port: int, owned: bool, timeout: float) -> ActorSystemHandle:
    if not port_listening(port, settings.bind_ip):
        raise SystemNotRunning("no actor system listens on that port", details={"port": port})
    asys = _client_system(settings, port)
    try:
        root = asys.createActor(Root, globalName=ROOT_NAME)
        deadline = time.monotonic() + timeout
        placeholder = {"root": root, "registry": None, "router": None, "pgid": 0, "root_pid": 0}
        probe = ActorSystemHandle(port, settings, owned=owned, info=placeholder, asys=asys)
        info = probe.ask_address(root, SystemInfo(), deadline)
        if not info.get("ready") or info.get("registry") is None:
            raise SystemNotRunning("the actor system at that port is not initialised", details={"port": port})
        return ActorSystemHandle(port, settings, owned=owned, info={**info, "root": root}, asys=asys)
    except BaseException:
        # Never shut down a system we only tried to attach to: its owner decides.
        raise


def start(
    settings: Settings | None = None,
    *,
    owned: bool | None = None,
    node: str = "adk_actors.runtime.children",
    **overrides: Any,
) -> ActorSystemHandle:
    """Boot a node's actor system from a clean subprocess and attach to it.

    Args:
        settings: validated settings (default: :func:`~adk_actors.settings.load_settings` with ``overrides``).
        owned: owned mode (default ``settings.owned``): the system stops when this process exits.
        node: the node composer module (``node_children`` / ``preflight``); ``adk_actors.start`` passes
            ``adk_actors.node``, which adds the domain's children.

    Raises:
        ConfigError: invalid settings, or the admin port is already in use.
        SystemNotRunning: the system failed to boot (details name the failure; see the boot log).
    """
    settings = (
        settings.replace(**overrides)
        if settings is not None and overrides
        else (settings or load_settings(**overrides))
    )
    owned = settings.owned if owned is None else owned
    port = settings.admin_port
    if port_listening(port, settings.bind_ip):
        raise ConfigError("the admin port is already in use", reason="port_in_use", details={"port": port})
    data = settings.data_path()
    private_dir(data / "logs")  # 0700: logs and run files hold user content (boot tightens existing ones)
    private_dir(data / "run")
    ready = data / "run" / f"boot-{port}-{uuid.uuid4().hex[:8]}.json"
    spec = {
        "port": port,
        "data_dir": str(data),
        "owner_pid": os.getpid() if owned else 0,
        "ready_file": str(ready),
        "settings": settings.to_dict(),
        "log_level": settings.log_level,
        "log_format": settings.log_format,
        "timeout": settings.start_timeout_s,
        "node": node,
    }
    env = {k: v for k, v in os.environ.items() if k != "ADK_CONFIG"}
    env.update(_thespian_env(settings, port))
    if settings.gemini_api_key is not None:
        env["GEMINI_API_KEY"] = settings.gemini_api_key.reveal()
    if settings.dev_live_principal is not None:
        env["ADK_DEV_LIVE_PRINCIPAL"] = settings.dev_live_principal.reveal()  # a secret: never in to_dict()
    # The provider runs in the node's processes: the node's setting must reach them, not only this process's env.
    env["ADK_GEMINI_BASE_URL"] = settings.gemini_base_url
    boot_log = data / "logs" / f"system-{port}.out"
    with open(boot_log, "ab", opener=private_opener) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "adk_actors.runtime.boot", json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            close_fds=True,
            env=env,
            cwd=os.getcwd(),
        )
    try:
        proc.wait(timeout=settings.start_timeout_s + 5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise SystemNotRunning(
            "the actor system did not boot in time",
            reason="start_timeout",
            details={"port": port, "boot_log": str(boot_log)},
        ) from None
    try:
        result = json.loads(ready.read_text())
    except (OSError, ValueError):
        result = {"ok": False, "error": "NoReadyFile"}
    finally:
        ready.unlink(missing_ok=True)
    if not result.get("ok"):
        if isinstance(result.get("adk_error"), dict):
            raise error_from_dict(result["adk_error"])
        raise SystemNotRunning(
            "the actor system failed to boot",
            reason="start_failed",
            details={"port": port, "error": result.get("error"), "boot_log": str(boot_log)},
        )
    try:
        handle = _connect(settings, port, owned=owned, timeout=settings.start_timeout_s)
    except BaseException:
        _kill_group(int(result["pgid"]))
        raise
    with _lock:
        global _default
        _default = handle
    return handle


def attach(
    port: int | None = None,
    settings: Settings | None = None,
    *,
    make_default: bool = True,
    timeout: float | None = None,
) -> ActorSystemHandle:
    """Join a running system (attached mode: stopping this process leaves the system running).

    ``port`` defaults to ``$ADK_SYSTEM_PORT`` (set inside actor processes), then ``settings.admin_port``.

    Raises:
        SystemNotRunning: nothing listens on the port or it is not an initialised adk_actors system.
    """
    settings = settings or load_settings()
    if port is None:
        env_port = os.environ.get("ADK_SYSTEM_PORT")
        port = int(env_port) if env_port else settings.admin_port
    handle = _connect(settings, port, owned=False, timeout=timeout or settings.ask_timeout_s)
    if make_default:
        with _lock:
            global _default
            _default = handle
    return handle


def current_system() -> ActorSystemHandle:
    """The default handle of this process; inside an actor process, attaches by ``$ADK_SYSTEM_PORT``.

    Raises:
        SystemNotRunning: no system was started or attached.
    """
    with _lock:
        if _default is not None and _default.running:
            return _default
    if os.environ.get("ADK_SYSTEM_PORT"):
        return attach()
    raise SystemNotRunning("no actor system: call adk_actors.start() or attach()")


def stop() -> None:
    """Stop the default system of this process (no-op when none)."""
    with _lock:
        handle = _default
    if handle is not None:
        if handle.owned:
            handle.stop()
        else:
            handle.detach()


@contextlib.contextmanager
def open_actor_system(
    settings: Settings | None = None, *, node: str = "adk_actors.runtime.children", **overrides: Any
) -> Iterator[ActorSystemHandle]:
    """Start an owned system for the duration of a ``with`` block; stopped on exit, also on error."""
    handle = start(settings, node=node, **overrides)
    try:
        yield handle
    finally:
        handle.stop()


def is_address(value: Any) -> bool:
    return isinstance(value, ActorAddress)
