"""Artifact services: immutable, versioned binary artifacts under exact app, user or session scopes.

``InMemoryArtifactService`` (a dict behind a lock) and ``FileArtifactService`` (a directory tree with exclusive
durable version reservations) implement :class:`BaseArtifactService` with the same semantics and lifetime
capacities.
"""

from __future__ import annotations

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

__all__ = [
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "DEFAULT_MAX_SCAN_ENTRIES",
    "MAX_LIST_LIMIT",
    "Artifact",
    "ArtifactScope",
    "ArtifactVersion",
    "BaseArtifactService",
    "Capacities",
    "FileArtifactService",
    "InMemoryArtifactService",
    "check_artifact_name",
]
