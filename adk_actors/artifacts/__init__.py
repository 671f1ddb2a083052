"""Artifact services: immutable, versioned binary artifacts under exact app, user or session scopes.

``InMemoryArtifactService`` (a dict behind a lock), ``FileArtifactService`` (a directory tree with exclusive
durable version reservations) and ``SqlArtifactService`` (SQLite or PostgreSQL, with per-name version counters)
implement :class:`BaseArtifactService` with the same semantics and lifetime capacities. :func:`load_artifacts_tool`
is the tool that shows artifacts to the model. ``ActorArtifactService`` (one actor owning a service) and
``ShardedArtifactService`` (one shard actor per app and user) are picklable clients of actor-hosted services.
"""

from __future__ import annotations

from adk_actors.artifacts.actor import ActorArtifactService
from adk_actors.artifacts.base import (
    DEFAULT_MAX_ARTIFACT_BYTES,
    DEFAULT_MAX_SCAN_ENTRIES,
    MAX_LIST_LIMIT,
    Artifact,
    ArtifactScope,
    ArtifactVersion,
    BaseArtifactService,
    Capacities,
    check_artifact_name,
)
from adk_actors.artifacts.filesystem import FileArtifactService
from adk_actors.artifacts.in_memory import InMemoryArtifactService
from adk_actors.artifacts.sharded import ShardedArtifactService
from adk_actors.artifacts.sql import SqlArtifactService
from adk_actors.artifacts.tool import load_artifacts_tool

__all__ = [
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "DEFAULT_MAX_SCAN_ENTRIES",
    "MAX_LIST_LIMIT",
    "ActorArtifactService",
    "Artifact",
    "ArtifactScope",
    "ArtifactVersion",
    "BaseArtifactService",
    "Capacities",
    "FileArtifactService",
    "InMemoryArtifactService",
    "ShardedArtifactService",
    "SqlArtifactService",
    "check_artifact_name",
    "load_artifacts_tool",
]
