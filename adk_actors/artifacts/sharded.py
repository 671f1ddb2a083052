"""``ShardedArtifactService``: one supervised tier-2 shard actor per (app, user), behind a router.

The same machinery as :class:`~adk_actors.memory.sharded.ShardedMemoryService` (``adk_actors.shards``): a router
owns one shard per key — ``(app, user)`` for user- and session-level scopes, ``(app,)`` for app-level ones — started
on first use, supervised by its host, applying that key's calls in arrival order; at most ``max_active_scopes``
shards run (an idle one is stopped, least recently used first; when all are busy a new key waits in a queue of
``cold_queue`` calls or is refused with ``StorageError(reason="artifact_shard_capacity_reached")``); idle shards stop
after ``idle_timeout_s`` and a shard whose router is gone stops itself at its next heartbeat.

Each shard holds ``factory(app_name, user_id)`` or its own copy of a picklable service. Shards of one
:class:`~adk_actors.artifacts.filesystem.FileArtifactService` root share it safely (its version reservations are
exclusive across instances), so nothing is lost when a shard stops; an in-memory factory gives each shard a store
that lives only as long as the shard. Lifetime capacities (versions per name, names per scope) hold per scope as
usual; the scope capacity of an in-memory factory then counts per shard.
"""

from __future__ import annotations

from adk_actors.artifacts.actor import ARTIFACT_METHODS, ActorArtifactService, ArtifactFactory, build_service
from adk_actors.artifacts.actor import service_source as _source
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.shards.client import builder, start_sharded
from adk_actors.shards.messages import ServiceArgs

__all__ = ["ShardedArtifactService"]


class ShardedArtifactService(ActorArtifactService):
    """A ``BaseArtifactService`` with one shard actor per (app, user) (see the module docstring); pickles."""

    @classmethod
    def start(  # type: ignore[override]  # a sharded service has more options
        cls,
        factory: ArtifactFactory,
        *,
        max_active_scopes: int = 64,
        cold_queue: int = 0,
        max_queue_per_scope: int = 1000,
        idle_timeout_s: float | None = 300.0,
        heartbeat_s: float = 30.0,
        shard_restart: str = "transient",
        system: ActorSystemHandle | None = None,
        timeout: float | None = None,
    ) -> ShardedArtifactService:
        """Start the router (shards start on first use of their key); the options are those of
        :meth:`ShardedMemoryService.start <adk_actors.memory.sharded.ShardedMemoryService.start>`.

        Raises:
            ConfigError: ``invalid_value`` for an option out of range, ``service_not_shareable`` for a service
                that does not pickle.
        """
        service = ServiceArgs(
            build=builder(build_service), build_args=(_source(factory),), methods=ARTIFACT_METHODS, kind="artifact"
        )
        return cls(
            start_sharded(
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
        )
