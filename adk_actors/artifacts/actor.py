"""The artifact service in an actor: :class:`ActorArtifactService`, a picklable client usable from any process.

``ActorArtifactService.start(factory)`` starts one tier-2 service actor that builds the artifact service (by default
an :class:`~adk_actors.artifacts.in_memory.InMemoryArtifactService`) in its own process and owns it; the client
implements :class:`~adk_actors.artifacts.base.BaseArtifactService` by asking it. Arguments are checked in the
caller's process and the store's errors reach the caller unchanged. An in-memory store's data lives in the actor's
process: a restarted actor starts empty; a :class:`~adk_actors.artifacts.filesystem.FileArtifactService` (which
pickles as its root) keeps everything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adk_actors.artifacts.base import (
    DEFAULT_MIME_TYPE,
    Artifact,
    ArtifactScope,
    ArtifactVersion,
    BaseArtifactService,
    BytesLike,
    MetadataValue,
    check_artifact_name,
    check_limit,
    check_metadata,
    check_scope,
    check_version,
)
from adk_actors.artifacts.in_memory import InMemoryArtifactService
from adk_actors.content.parts import check_mime_type
from adk_actors.errors import ValidationError
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.shards.client import ServiceClient, builder, built_service, factory_source, start_service
from adk_actors.shards.messages import ServiceArgs

__all__ = ["ARTIFACT_METHODS", "ActorArtifactService", "ArtifactFactory", "build_service", "service_source"]

ARTIFACT_METHODS = frozenset({"put", "get", "list_names", "list_versions", "delete"})
"""What an artifact service actor answers: the contract's methods."""

ArtifactFactory = Callable[..., Any] | BaseArtifactService
"""A callable building the service, or a service that pickles (each actor uses its own copy of it)."""


def _is_service(value: Any) -> bool:
    return isinstance(value, BaseArtifactService) and not isinstance(value, type)


def service_source(factory: Any) -> Any:
    """What crosses to the actor for ``factory``: the service itself (it must pickle) or a ``CallableRef``.

    Raises:
        ConfigError: ``service_not_shareable`` (a service that does not pickle: pass its class or a factory),
            ``invalid_value`` (neither a service nor a callable).
        WorkerError: ``unpicklable_callable``.
    """
    return factory_source(factory, _is_service, "an artifact service")


def _built(service: Any) -> Any:
    return built_service(service, _is_service, "an artifact service")


def build_service(source: Any, *key: str) -> Any:
    """Build the service in the actor's process: ``factory()``, or ``factory(app_name, user_id)`` for a shard
    (``user_id`` is ``None`` for the app-level shard), or the shipped copy of a service."""
    if not isinstance(source, CallableRef):
        return _built(source)
    factory = source.resolve()
    if not key:
        return _built(factory())
    return _built(factory(key[0], key[1] if len(key) > 1 else None))


def _key(scope: ArtifactScope) -> tuple[str, ...]:
    """The shard of a scope: its app and user (an app-level scope has a shard of its own per app)."""
    return (scope.app_name,) if scope.user_id is None else (scope.app_name, scope.user_id)


def _data(data: Any) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            "artifact data is bytes", reason="invalid_artifact_data", details={"type": type(data).__name__}
        )
    return bytes(data)


class ActorArtifactService:
    """A ``BaseArtifactService`` whose calls are asks to an artifact service actor; pickles.

    Build one with :meth:`start`; :meth:`stop` stops the actor.
    """

    def __init__(self, client: ServiceClient) -> None:
        self._client = client

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ref={self._client.ref})"

    @classmethod
    def start(
        cls,
        factory: ArtifactFactory = InMemoryArtifactService,
        *,
        system: ActorSystemHandle | None = None,
        timeout: float | None = None,
    ) -> ActorArtifactService:
        """Start an artifact service actor owning ``factory()`` (or a copy of a picklable service).

        Raises:
            ConfigError: see :func:`service_source`; the service's own ``ConfigError`` when it cannot be built
                (the actor is stopped again).
        """
        args = ServiceArgs(
            build=builder(build_service),
            build_args=(service_source(factory),),
            methods=ARTIFACT_METHODS,
            kind="artifact",
        )
        ref = start_service(args, system=system, timeout=timeout)
        client = ServiceClient(ref, sharded=False, timeout=timeout, system=system)
        try:
            client.check()
        except Exception:
            client.stop()
            raise
        return cls(client)

    @property
    def client(self) -> ServiceClient:
        """The actor's client (its ref, ``status()`` and ``stop()``)."""
        return self._client

    def status(self) -> dict[str, Any]:
        """The service actor's (or router's) status."""
        return self._client.status()

    def stop(self) -> None:
        """Stop the actor (and, for a sharded service, every shard); an in-memory store's data is gone."""
        self._client.stop()

    def put(
        self,
        scope: ArtifactScope,
        name: str,
        data: BytesLike,
        *,
        mime_type: str = DEFAULT_MIME_TYPE,
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> ArtifactVersion:
        check_scope(scope)
        check_artifact_name(name)
        raw = _data(data)
        check_mime_type(mime_type)
        meta = check_metadata(metadata)
        return self._client._op(_key(scope), "put", scope, name, raw, mime_type=mime_type, metadata=meta)

    def get(self, scope: ArtifactScope, name: str, version: int | None = None) -> Artifact:
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)
        return self._client._op(_key(scope), "get", scope, name, version)

    def list_names(
        self, scope: ArtifactScope, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[str], str | None]:
        check_scope(scope)
        check_limit(limit)
        if cursor is not None and not isinstance(cursor, str):
            raise ValidationError("a cursor is the last name of the previous page", reason="invalid_cursor", details={})
        return self._client._op(_key(scope), "list_names", scope, limit=limit, cursor=cursor)

    def list_versions(self, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        check_scope(scope)
        check_artifact_name(name)
        return self._client._op(_key(scope), "list_versions", scope, name)

    def delete(self, scope: ArtifactScope, name: str, version: int | None = None) -> int:
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)
        return self._client._op(_key(scope), "delete", scope, name, version)

    def close(self) -> None:
        """Nothing to release here: the store lives in its actor (see :meth:`stop`)."""
