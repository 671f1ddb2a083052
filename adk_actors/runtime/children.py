"""The runtime's own children under the root (worker pool, hosts), built from settings.

A *node composer* is a module with ``node_children(settings)`` and ``preflight(settings)``; the boot process
imports it by name, so the runtime never imports the domain. This module is the runtime-only composer;
``adk_actors.node`` adds the domain's children (the session store) and checks.
"""

from __future__ import annotations

from adk_actors.runtime.host import HostsSpec
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.workers import PoolSpec
from adk_actors.settings import Settings

__all__ = ["node_children", "preflight"]


def preflight(settings: Settings) -> None:
    """Checks run in the boot process before the actor system starts (the runtime alone needs none)."""


def node_children(settings: Settings) -> tuple[ChildSpec, ...]:
    """Children the root starts between the router and the sandbox, in order."""
    limits = {"default": settings.worker_rlimit_as_mb} if settings.worker_rlimit_as_mb else {}
    return (
        ChildSpec(
            id="workers",
            actor="adk_actors.runtime.workers.WorkerPool",
            register_as="workers",
            args=PoolSpec(workers=settings.workers, rlimit_as_mb=limits),
            shutdown=5.0,
        ),
        ChildSpec(
            id="hosts",
            actor="adk_actors.runtime.host.HostSupervisor",
            register_as="hosts",
            kind="supervisor",
            args=HostsSpec(
                hosts=settings.hosts,
                io_threads=settings.host_io_threads,
                strict_pickle=settings.strict_pickle,
                intensity=max(10, settings.hosts * 5),
            ),
            shutdown="infinity",
        ),
    )
