"""``InMemoryArtifactService``: the artifact contract in a dict behind a lock, for tests and one process.

It keeps the filesystem adapter's semantics, lifetime capacities included, so code tested against it behaves
the same on durable storage; its data lives and dies with the object.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.artifacts.base import (
    DEFAULT_MAX_ARTIFACT_BYTES,
    DEFAULT_MAX_SCAN_ENTRIES,
    DEFAULT_MIME_TYPE,
    Artifact,
    ArtifactScope,
    ArtifactVersion,
    BytesLike,
    Capacities,
    Clock,
    MetadataValue,
    check_artifact_name,
    check_put,
    check_scope,
    check_version,
    digest_of,
    not_found,
    page_names,
)

__all__ = ["InMemoryArtifactService"]


@dataclass(slots=True)
class _Name:
    issued: int = 0
    """The highest version number ever given out (deleted ones included): the next one is ``issued + 1``."""
    live: dict[int, Artifact] = field(default_factory=dict)


class InMemoryArtifactService:
    """Artifacts held in this process's memory; thread-safe.

    Args:
        max_artifact_bytes: bound on one version's bytes (``artifact_too_large`` above it).
        max_scan_entries: the lifetime capacities derive from it, as for the filesystem adapter
            (:class:`~adk_actors.artifacts.base.Capacities`).
        clock: wall-clock seconds for ``created_at``.

    Raises:
        ConfigError: reason ``invalid_value`` for an option out of range.
    """

    def __init__(
        self,
        *,
        max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        clock: Clock = time.time,
    ) -> None:
        self.capacities = Capacities(max_artifact_bytes=max_artifact_bytes, max_scan_entries=max_scan_entries)
        self._clock = clock
        self._lock = threading.Lock()
        # Scopes and names are never removed, so their counts are lifetime counts.
        self._scopes: dict[ArtifactScope, dict[str, _Name]] = {}

    def __repr__(self) -> str:
        return f"InMemoryArtifactService(max_artifact_bytes={self.capacities.max_artifact_bytes})"

    def __reduce__(self) -> Any:
        raise TypeError("an InMemoryArtifactService holds its data in this process and is not sent elsewhere")

    def put(
        self,
        scope: ArtifactScope,
        name: str,
        data: BytesLike,
        *,
        mime_type: str = DEFAULT_MIME_TYPE,
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> ArtifactVersion:
        """Store ``data`` as the next version of ``name`` in ``scope`` (see ``BaseArtifactService.put``)."""
        raw, meta = check_put(scope, name, data, mime_type, metadata, self.capacities.max_artifact_bytes)
        digest = digest_of(raw)
        caps = self.capacities
        with self._lock:
            names = self._scopes.get(scope)
            if names is None:
                if len(self._scopes) >= caps.max_scopes:
                    raise caps.scope_capacity_error()
                names = self._scopes[scope] = {}
            record = names.get(name)
            if record is None:
                if len(names) >= caps.max_names_per_scope:
                    raise caps.name_capacity_error(scope)
                record = names[name] = _Name()
            if record.issued >= caps.max_versions_per_name:
                raise caps.version_capacity_error(scope, name)
            record.issued += 1
            artifact = Artifact(
                scope=scope,
                name=name,
                version=record.issued,
                digest=digest,
                size=len(raw),
                mime_type=mime_type,
                metadata=meta,
                created_at=float(self._clock()),
                data=raw,
            )
            record.live[artifact.version] = artifact
        return artifact.info()

    def get(self, scope: ArtifactScope, name: str, version: int | None = None) -> Artifact:
        """A version with its bytes, the latest when ``version`` is ``None`` (see ``BaseArtifactService.get``)."""
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)
        with self._lock:
            record = self._scopes.get(scope, {}).get(name)
            live = record.live if record is not None else {}
            number = version if version is not None else max(live, default=None)
            found = live.get(number) if number is not None else None
        if found is None:
            raise not_found(scope, name, version)
        # Artifacts are frozen and their metadata a private copy: hand out another copy so a caller's change
        # to the dict cannot reach the stored version.
        return dataclasses.replace(found, metadata=dict(found.metadata))

    def list_names(
        self, scope: ArtifactScope, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[str], str | None]:
        """A page of names with at least one stored version (see ``BaseArtifactService.list_names``)."""
        check_scope(scope)
        with self._lock:
            names = [n for n, record in self._scopes.get(scope, {}).items() if record.live]
        return page_names(names, limit, cursor)

    def list_versions(self, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        """The stored versions of ``name``, oldest first (see ``BaseArtifactService.list_versions``)."""
        check_scope(scope)
        check_artifact_name(name)
        with self._lock:
            record = self._scopes.get(scope, {}).get(name)
            found = sorted(record.live.items()) if record is not None else []
        return [artifact.info() for _, artifact in found]

    def delete(self, scope: ArtifactScope, name: str, version: int | None = None) -> int:
        """Delete one version or all; returns the count (see ``BaseArtifactService.delete``)."""
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)
        with self._lock:
            record = self._scopes.get(scope, {}).get(name)
            if record is None:
                return 0
            if version is None:
                count = len(record.live)
                record.live.clear()
                return count
            return 1 if record.live.pop(version, None) is not None else 0
