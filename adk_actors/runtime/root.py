"""The root supervisor: the one top-level actor of a node (Thespian globalName ``adk_root``).

Children, in start order: ``registry``, ``router``, then the domain supervisors later issues add, and a
``sandbox`` supervisor where tests and tools start dynamic children. The root also owns the node: in owned
mode it watches the starter's pid (a pidfd, so waiting costs nothing) and takes the whole system down when that
process dies.

Accepts (besides the Supervisor protocol): ``SupInit`` from the boot process (args: :class:`RootArgs`), calls
``AwaitReady`` and ``SystemInfo``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.server import DEFERRED, CallCtx
from adk_actors.runtime.supervisor import ChildSpec, Supervisor, SupervisorSpec

__all__ = ["ROOT_NAME", "AwaitReady", "Root", "RootArgs", "SystemInfo", "root_children"]

ROOT_NAME = "adk_root"


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
class SystemInfo:
    """Answered with the registry and router addresses, the process group and the owner."""


def root_children(args: RootArgs) -> tuple[ChildSpec, ...]:
    sandbox = SupervisorSpec(strategy="one_for_one", intensity=1000, period=1.0)
    return (
        ChildSpec(id="registry", actor="adk_actors.runtime.registry.Registry", shutdown=2.0),
        ChildSpec(id="router", actor="adk_actors.runtime.router.Router", register_as="router", shutdown=2.0),
        *args.extra_children,
        ChildSpec(id="sandbox", actor="adk_actors.runtime.supervisor.Supervisor", args=sandbox,
                  kind="supervisor", register_as="sandbox", shutdown="infinity"),
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

    def init(self, args: Any) -> Any:
        assert isinstance(args, RootArgs)
        self.args = args
        if args.owner_pid:
            try:
                self.pidfd = os.pidfd_open(args.owner_pid)
            except ProcessLookupError:
                self._owner_gone()
                return DEFERRED
        spec = SupervisorSpec(strategy="one_for_one", intensity=args.intensity, period=args.period,
                              children=root_children(args))
        return super().init(spec)

    def _create(self, child: Any) -> None:
        super()._create(child)
        if child.spec.id == "registry":
            self._registry = child.address

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
        if isinstance(request, GetStatus):
            status = self.full_status()
            status.update(self._info())
            return status
        return super().handle_call(request, ctx)

    def _info(self) -> dict[str, Any]:
        router = self.children.get("router")
        return {"registry": self._registry, "router": router.address if router else None,
                "pgid": os.getpgid(0), "root_pid": os.getpid(), "port": self.args.port if self.args else 0,
                "owner_pid": self.args.owner_pid if self.args else 0, "ready": self._announced,
                "started_at": self.started_at}

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
        self.log.warning("owner process exited; stopping the actor system",
                         owner_pid=self.args.owner_pid if self.args else 0)
        subprocess.Popen(
            [sys.executable, "-m", "adk_actors.runtime.reaper", str(os.getpgid(0))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=True, start_new_session=True,
        )
