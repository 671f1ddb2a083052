"""Actor-backed services: one service owned by one actor, or one shard actor per exact scope behind a router.

The memory and artifact packages build their ``ActorMemoryService`` / ``ShardedMemoryService`` and
``ActorArtifactService`` / ``ShardedArtifactService`` on this package: :mod:`.client` starts the actors and asks
them, :mod:`.logic` holds the router's admission decisions, :mod:`.actor` the actors.
"""

from __future__ import annotations

from adk_actors.shards.client import ServiceClient, start_router, start_service
from adk_actors.shards.messages import RoutedOp, RouterArgs, ServiceArgs, ServiceOp

__all__ = ["RoutedOp", "RouterArgs", "ServiceArgs", "ServiceClient", "ServiceOp", "start_router", "start_service"]
