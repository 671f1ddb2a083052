"""``ShardedMemoryService``: one supervised tier-2 shard actor per exact (app, user) scope, behind a router.

A router actor owns the table of shards. Each scope gets its own shard on first use — a service actor holding
``factory(scope)`` (or its own copy of a picklable service such as a
:class:`~adk_actors.memory.sql.SqlMemoryService`), placed on a host by ``blake2b`` and supervised there
(``shard_restart``, ``transient`` by default: a crash restarts it, a stop does not). The router applies the calls of
one scope in arrival order, one at a time; different scopes run in parallel on their shards.

Bounds: at most ``max_active_scopes`` shards run; a call for a new scope stops the least recently used idle shard
to make room; when every shard is busy it waits in a queue of ``cold_queue`` calls (0, the default: it is refused
at once) and past that fails with ``StorageError(reason="memory_shard_capacity_reached")``. One scope queues at most
``max_queue_per_scope`` calls (``memory_shard_queue_full``). Abandoned shards: a shard unused for
``idle_timeout_s`` is stopped, and a shard whose router is gone (or restarted) stops itself at its next heartbeat.

A shard's data is whatever its service keeps: with an in-memory factory a stopped, evicted or restarted shard
starts empty again, so use a SQL service when entries must outlive a shard.
"""

from __future__ import annotations

from adk_actors.memory.actor import MEMORY_METHODS, ActorMemoryService, MemoryFactory, build_service, service_source
from adk_actors.memory.base import DEFAULT_MAX_ENTRIES, BaseMemoryService
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.shards.client import builder, start_sharded
from adk_actors.shards.messages import ServiceArgs

__all__ = ["ShardedMemoryService"]


class ShardedMemoryService(ActorMemoryService):
    """A ``BaseMemoryService`` with one shard actor per exact scope (see the module docstring); pickles."""

    @classmethod
    def start(  # type: ignore[override]  # a sharded service has more options
        cls,
        factory: MemoryFactory,
        *,
        max_active_scopes: int = 64,
        cold_queue: int = 0,
        max_queue_per_scope: int = 1000,
        idle_timeout_s: float | None = 300.0,
        heartbeat_s: float = 30.0,
        shard_restart: str = "transient",
        max_entries_per_scope: int | None = None,
        system: ActorSystemHandle | None = None,
        timeout: float | None = None,
    ) -> ShardedMemoryService:
        """Start the router (shards start on first use of their scope).

        Args:
            factory: ``factory(scope)`` builds one scope's service, or a picklable service each shard copies.
            max_active_scopes: Shards running at once.
            cold_queue: Calls for new scopes that may wait while every shard is busy (0: refused at once).
            max_queue_per_scope: Calls one scope may queue behind the one in flight.
            idle_timeout_s: A shard unused this long is stopped (``None``: never for idleness).
            heartbeat_s: How often a shard checks that its router still owns it.
            shard_restart: The shards' OTP restart type.
            max_entries_per_scope: The bound reported by :attr:`max_entries_per_scope` when ``factory`` is a
                callable (a service's own bound is used otherwise); the shards' services enforce their own.
            system: The actor system (default: this process's).
            timeout: Ask timeout in seconds for every call (default: the system's).

        Raises:
            ConfigError: ``invalid_value`` for an option out of range, ``service_not_shareable`` for a service
                that does not pickle.
        """
        source = service_source(factory)
        bound = factory.max_entries_per_scope if isinstance(factory, BaseMemoryService) else max_entries_per_scope
        service = ServiceArgs(build=builder(build_service), build_args=(source,), methods=MEMORY_METHODS, kind="memory")
        client = start_sharded(
            service,
            max_active_scopes=max_active_scopes,
            cold_queue=cold_queue,
            max_queue_per_scope=max_queue_per_scope,
            idle_timeout_s=idle_timeout_s,
            heartbeat_s=heartbeat_s,
            shard_restart=shard_restart,
            system=system,
            timeout=timeout,
        )
        return cls(client, max_entries_per_scope=bound or DEFAULT_MAX_ENTRIES)
