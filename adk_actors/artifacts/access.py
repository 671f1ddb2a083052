"""What a tool's context holds for artifacts: a service bound to one Runner session (app, user, session).

The engine builds one :class:`ArtifactAccess` per tool call from the Runner's ``artifact_svc`` and the session it
serves; ``tool_context.save_artifact`` and its siblings call it with a scope level (``session``, ``user`` or
``app``), so a tool can only reach its own app, user and session. It pickles (the service pickles), since the call
runs in a worker process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adk_actors.artifacts.base import ArtifactScope
from adk_actors.errors import ValidationError

__all__ = ["ArtifactAccess", "artifact_record"]

LEVELS = ("session", "user", "app")


def artifact_record(version: Any, level: str) -> dict[str, Any]:
    """An artifact version's metadata as JSON (never its bytes)."""
    return {
        "scope": level,
        "name": version.name,
        "version": version.version,
        "digest": version.digest,
        "size": version.size,
        "mime_type": version.mime_type,
    }


@dataclass(frozen=True, slots=True)
class ArtifactAccess:
    """An artifact service bound to one session's app, user and session ids."""

    _service: Any
    """The service (private: tools use the scoped methods)."""
    app: str
    user: str
    session: str

    def scope(self, level: str) -> ArtifactScope:
        """The exact scope of ``level``.

        Raises:
            ValidationError: ``invalid_artifact_scope`` for another level.
        """
        if level == "session":
            return ArtifactScope.session(self.app, self.user, self.session)
        if level == "user":
            return ArtifactScope.user(self.app, self.user)
        if level == "app":
            return ArtifactScope.app(self.app)
        raise ValidationError(
            "scope is session, user or app", reason="invalid_artifact_scope", details={"scope": str(level)[:16]}
        )

    def save(self, level: str, name: str, data: bytes, mime_type: str, metadata: dict[str, Any]) -> dict[str, Any]:
        version = self._service.put(self.scope(level), name, data, mime_type=mime_type, metadata=metadata)
        return artifact_record(version, level)

    def load(self, level: str, name: str, version: int | None) -> Any:
        return self._service.get(self.scope(level), name, version)

    def names(self, level: str, limit: int, cursor: str | None) -> Any:
        return self._service.list_names(self.scope(level), limit=limit, cursor=cursor)

    def versions(self, level: str, name: str) -> list[dict[str, Any]]:
        return [artifact_record(v, level) for v in self._service.list_versions(self.scope(level), name)]

    def delete(self, level: str, name: str, version: int | None) -> int:
        return int(self._service.delete(self.scope(level), name, version))
