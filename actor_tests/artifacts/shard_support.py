"""Helpers that run inside actor processes for the sharded-artifact tests (importable, so they travel by name)."""

from __future__ import annotations

import os
from typing import Any

from adk_actors.artifacts import ArtifactScope, InMemoryArtifactService


def in_memory_for(app_name: str, user_id: str | None, **options: Any) -> InMemoryArtifactService:
    """A shard factory: a fresh in-memory store per (app, user)."""
    return InMemoryArtifactService(**options)


def remote_put(service: Any, app: str, user: str, data: bytes) -> dict[str, Any]:
    """Run in a worker process: store through the unpickled client."""
    version = service.put(ArtifactScope.user(app, user), "remote.bin", data)
    return {"pid": os.getpid(), "version": version.version}
