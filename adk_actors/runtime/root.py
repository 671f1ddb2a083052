"""The root supervisor: the one top-level actor of a node (Thespian globalName ``adk_root``).

Children, in start order: ``registry``, ``router``, then the domain supervisors later issues add, and a
``sandbox`` supervisor where tests and tools start dynamic children. The root also owns the node: in owned
mode it watches the starter's pid (a pidfd, so waiting costs nothing) and takes the whole system down when that
process dies.

Accepts (besides the Supervisor protocol): ``SupInit`` from the boot process (args: :class:`RootArgs`), calls
``AwaitReady``, ``AwaitRegistry`` and ``SystemInfo``.

The root keeps the permanent inner actors of every host (reported by the HostSupervisor), so a restarted
HostSupervisor brings its hosts back with their agents.

When the registry is restarted the root sends ``RegistryMoved`` to its other children, which re-register their
named children with it and pass it down; facades that saw the old registry die ask ``AwaitRegistry``.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from thespian.actors import DeadEnvelope

from adk_actors.runtime.host import HostsSpec, InnerEntry, InnerSpecAdded, InnerSpecRemoved
from adk_actors.runtime.messages import ChildReady, GetStatus, RegistryMoved
from adk_actors.runtime.server import DEFERRED, CallCtx
from adk_actors.runtime.supervisor import ChildSpec, Supervisor, SupervisorSpec

__all__ = ["ROOT_NAME", "AwaitReady", "AwaitRegistry", "Root", "RootArgs", "SystemInfo", "root_children"]

ROOT_NAME = "adk_root"
_MAX_HELD_DEAD_LETTERS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class RootArgs:
    """What the boot process tells the root."""

    port: int
    owner_pid: int = 0
    """Owned mode when non-zero: the system stops when this process exits."""
    data_dir: str = ""
    intensity: int = 3
    period: float = 5.0
    extra_children: tuple[ChildSpec, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitReady:
    """Answered once every root child has started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitRegistry:
    """Answered with the system info once a registry other than ``exclude`` (one the caller saw die) runs."""

    exclude: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemInfo:
    """Answered with the registry and router addresses, the process group and the owner."""


def root_children(args: RootArgs) -> tuple[ChildSpec, ...]:
    sandbox = SupervisorSpec(strategy="one_for_one", intensity=1000, period=1.0)
    return (
        ChildSpec(id="registry", actor="adk_actors.runtime.registry.Registry", shutdown=2.0),
        ChildSpec(id="router", actor="adk_actors.runtime.router.Router", register_as="router", shutdown=2.0),
        *args.extra_children,
        ChildSpec(
            id="sandbox",
            actor="adk_actors.runtime.supervisor.Supervisor",
            args=sandbox,
            kind="supervisor",
            register_as="sandbox",
            shutdown="infinity",
        ),
    )


class Root(Supervisor):
    """Top-level supervisor; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args: RootArgs | None = None
        self.ready_waiters: list[CallCtx] = []
        self.pidfd: int | None = None
        self.started_at = time.time()
        self.owner_lost = False
        self.registry_waiters: list[tuple[CallCtx, Any]] = []
        self._registry_starts = 0
        self.dead_letters: list[DeadEnvelope] = []
        self.host_inner: dict[int, dict[str, InnerEntry]] = {}

    def init(self, args: Any) -> Any:
        assert isinstance(args, RootArgs)
        self.args = args
        self.handleDeadLetters(startHandling=True)
        if args.owner_pid:
            try:
                self.pidfd = os.pidfd_open(args.owner_pid)
            except ProcessLookupError:
                self._owner_gone()
                return DEFERRED
        spec = SupervisorSpec(
            strategy="one_for_one", intensity=args.intensity, period=args.period, children=root_children(args)
        )
        return super().init(spec)

    def _create(self, child: Any) -> None:
        if isinstance(child.spec.args, HostsSpec):
            kept = tuple((host_id, tuple(specs.values())) for host_id, specs in sorted(self.host_inner.items()))
            child.spec = dataclasses.replace(child.spec, args=dataclasses.replace(child.spec.args, inner=kept))
        super()._create(child)
        if child.spec.id == "registry":
            self._registry = child.address

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, DeadEnvelope):
            self._dead_letter(message)
            return
        if isinstance(message, InnerSpecAdded):
            specs = self.host_inner.setdefault(message.host_id, {})
            specs.update((spec.local_id, spec) for spec in message.specs)
            return
        if isinstance(message, InnerSpecRemoved):
            self.host_inner.get(message.host_id, {}).pop(message.local_id, None)
            return
        super().handle_info(message, sender)
        if not isinstance(message, ChildReady) or message.child_id != "registry":
            return
        child = self.children.get("registry")
        if child is None or child.state != "running":
            return
        self._registry_starts += 1
        if self._registry_starts > 1:
            self.log.warning("registry restarted; rebuilding its table", registry_pid=child.pid)
            self.registry_moved(RegistryMoved(address=child.address))
        held, self.dead_letters = self.dead_letters, []
        for envelope in held:
            self.send(child.address, envelope)
        waiting, self.registry_waiters = self.registry_waiters, []
        for ctx, exclude in waiting:
            self._answer_registry(ctx, exclude)

    def _dead_letter(self, envelope: DeadEnvelope) -> None:
        """The root, which outlives every registry, takes the node's dead letters and hands them to the current
        registry (which redelivers by name): while the registry itself is down, what was sent to it (a
        registration, a forward) waits here instead of being lost with the dead handler."""
        child = self.children.get("registry")
        if child is not None and child.state == "running" and child.address is not None:
            self.send(child.address, envelope)
        elif len(self.dead_letters) < _MAX_HELD_DEAD_LETTERS:
            self.dead_letters.append(envelope)

    def _answer_registry(self, ctx: CallCtx, exclude: Any) -> None:
        child = self.children.get("registry")
        if child is not None and child.state == "running" and child.address != exclude:
            self.reply(ctx, self._info())
        else:
            self.registry_waiters.append((ctx, exclude))

    def ready(self) -> None:
        super().ready()
        for ctx in self.ready_waiters:
            self.reply(ctx, self._info())
        self.ready_waiters.clear()

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, AwaitReady):
            if self._announced:
                return self._info()
            self.ready_waiters.append(ctx)
            return DEFERRED
        if isinstance(request, SystemInfo):
            return self._info()
        if isinstance(request, AwaitRegistry):
            self._answer_registry(ctx, request.exclude)
            return DEFERRED
        if isinstance(request, GetStatus):
            status = self.full_status()
            status.update(self._info())
            return status
        return super().handle_call(request, ctx)

    def _info(self) -> dict[str, Any]:
        router = self.children.get("router")
        registry = self.children.get("registry")
        return {
            "registry": self._registry,
            "registry_pid": registry.pid if registry else 0,
            "hostname": socket.gethostname(),
            "router": router.address if router else None,
            "pgid": os.getpgid(0),
            "root_pid": os.getpid(),
            "port": self.args.port if self.args else 0,
            "owner_pid": self.args.owner_pid if self.args else 0,
            "ready": self._announced,
            "started_at": self.started_at,
        }

    def watch_fds(self) -> list[int]:
        return [self.pidfd] if self.pidfd is not None else []

    def handle_ready(self, fds: list[int]) -> None:
        if self.pidfd is not None and self.pidfd in fds:
            os.close(self.pidfd)
            self.pidfd = None
            self._owner_gone()

    def _owner_gone(self) -> None:
        """The starter died: take the whole process group down from a detached reaper process."""
        if self.owner_lost:
            return
        self.owner_lost = True
        self.log.warning(
            "owner process exited; stopping the actor system", owner_pid=self.args.owner_pid if self.args else 0
        )
        subprocess.Popen(
            [sys.executable, "-m", "adk_actors.runtime.reaper", str(os.getpgid(0))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
