"""The memory service in an actor: :class:`ActorMemoryService`, a picklable client usable from any process.

``ActorMemoryService.start(factory)`` starts one tier-2 service actor that builds the memory service (by default an
:class:`~adk_actors.memory.in_memory.InMemoryMemoryService`) in its own process and owns it; the returned client
implements :class:`~adk_actors.memory.base.BaseMemoryService` by asking that actor, so a Runner, a worker or another
process all reach the same store. The client checks arguments in the caller's process (a bad one never leaves it)
and the store's errors reach the caller unchanged (``StorageError`` ``memory_entry_not_found``, ...).

The actor is *permanent* on its host: if the host is restarted the actor comes back under the same ref, but an
in-memory store comes back empty (its data lived in that process). Use a SQL factory for data that must survive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adk_actors.memory.base import (
    DEFAULT_LIMIT,
    BaseMemoryService,
    MemoryEntry,
    MemoryHit,
    MemoryScope,
    MetadataValue,
    NewMemory,
    check_batch,
    check_entry_id,
    check_filter,
    check_limit,
    check_scope,
    check_session_id,
    query_terms,
)
from adk_actors.memory.in_memory import InMemoryMemoryService
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.shards.client import ServiceClient, builder, built_service, factory_source, start_service
from adk_actors.shards.messages import ServiceArgs

__all__ = ["MEMORY_METHODS", "ActorMemoryService", "MemoryFactory", "build_service", "service_source"]

MEMORY_METHODS = frozenset(
    {"add_batch", "search", "get", "delete_entry", "erase_session", "erase_user", "count", "max_entries_per_scope"}
)
"""What a memory service actor answers: the contract's methods (``add`` arrives as ``add_batch``)."""

MemoryFactory = Callable[..., BaseMemoryService] | BaseMemoryService
"""A callable building the service, or a service that pickles (each actor uses its own copy of it)."""


def _is_service(value: Any) -> bool:
    return isinstance(value, BaseMemoryService)


def service_source(factory: Any) -> Any:
    """What crosses to the actor for ``factory``: the service itself (it must pickle) or a ``CallableRef``.

    Raises:
        ConfigError: ``service_not_shareable`` (a service that does not pickle, e.g. an in-memory one: pass its
            class instead), ``invalid_value`` (neither a service nor a callable).
        WorkerError: ``unpicklable_callable``.
    """
    return factory_source(factory, _is_service, "a memory service")


def _built(service: Any) -> BaseMemoryService:
    built: BaseMemoryService = built_service(service, _is_service, "a memory service")
    return built


def build_service(source: Any, *key: str) -> BaseMemoryService:
    """Build the service in the actor's process: ``factory()`` (or ``factory(scope)`` for a shard's ``key``), or
    the shipped copy of a service."""
    if not isinstance(source, CallableRef):
        return _built(source)
    factory = source.resolve()
    return _built(factory(MemoryScope(*key)) if key else factory())


def _key(scope: MemoryScope) -> tuple[str, str]:
    return (scope.app, scope.user)


class ActorMemoryService(BaseMemoryService):
    """A ``BaseMemoryService`` whose calls are asks to a memory service actor; pickles (see the module docstring).

    Build one with :meth:`start`; :meth:`stop` stops the actor.
    """

    def __init__(self, client: ServiceClient, *, max_entries_per_scope: int) -> None:
        self._client = client
        self._max = max_entries_per_scope

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ref={self._client.ref})"

    @classmethod
    def start(
        cls,
        factory: MemoryFactory = InMemoryMemoryService,
        *,
        system: ActorSystemHandle | None = None,
        timeout: float | None = None,
    ) -> ActorMemoryService:
        """Start a memory service actor owning ``factory()`` (or a copy of a picklable service).

        Raises:
            ConfigError: see :func:`service_source`.
            AdkError: the service's own error when it cannot be built (the actor is stopped again).
        """
        args = ServiceArgs(
            build=builder(build_service), build_args=(service_source(factory),), methods=MEMORY_METHODS, kind="memory"
        )
        ref = start_service(args, system=system, timeout=timeout)
        client = ServiceClient(ref, sharded=False, timeout=timeout, system=system)
        try:
            bound = client._op((), "max_entries_per_scope")
        except Exception:
            client.stop()
            raise
        return cls(client, max_entries_per_scope=int(bound))

    @property
    def max_entries_per_scope(self) -> int:
        return self._max

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

    # Each method checks its arguments here, so only validated plain values are sent.

    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        check_scope(scope)
        return self._client._op(_key(scope), "add_batch", scope, list(check_batch(items)))

    def search(
        self,
        scope: MemoryScope,
        query: str,
        *,
        filter: Mapping[str, MetadataValue] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[MemoryHit]:
        check_scope(scope)
        query_terms(query)
        wanted = check_filter(filter)
        return self._client._op(_key(scope), "search", scope, query, filter=wanted, limit=check_limit(limit))

    def get(self, scope: MemoryScope, entry_id: str) -> MemoryEntry:
        check_scope(scope)
        return self._client._op(_key(scope), "get", scope, check_entry_id(entry_id))

    def delete_entry(self, scope: MemoryScope, entry_id: str) -> bool:
        check_scope(scope)
        return self._client._op(_key(scope), "delete_entry", scope, check_entry_id(entry_id))

    def erase_session(self, scope: MemoryScope, session_id: str) -> int:
        check_scope(scope)
        return self._client._op(_key(scope), "erase_session", scope, check_session_id(session_id))

    def erase_user(self, scope: MemoryScope) -> int:
        check_scope(scope)
        return self._client._op(_key(scope), "erase_user", scope)

    def count(self, scope: MemoryScope) -> int:
        check_scope(scope)
        return self._client._op(_key(scope), "count", scope)

    def close(self) -> None:
        """Nothing to release here: the store lives in its actor (see :meth:`stop`)."""
