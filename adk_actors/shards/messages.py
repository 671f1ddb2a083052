"""Messages of the service actor, the shard router and its shards (frozen, picklable, documented field by field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.messages import Request

__all__ = [
    "CheckService",
    "RoutedOp",
    "RouterArgs",
    "ServiceArgs",
    "ServiceOp",
    "ShardCheck",
    "StopShards",
]

ScopeKey = tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceOp:
    """Run one method of the hosted service and answer with its result (its ``AdkError`` fails the call)."""

    method: str
    """A method name from the actor's allow-list (``ServiceArgs.methods``)."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedOp:
    """A ``ServiceOp`` for the shard of one exact scope; the router applies one scope's ops in arrival order."""

    key: ScopeKey
    """The exact scope (``(app, user)`` for memory): one shard per distinct key."""
    op: ServiceOp


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceArgs:
    """How a service actor (or a shard) builds the service it hosts: ``build(*build_args[, key])``."""

    build: CallableRef
    """An importable builder (never user code by value: the domain package's own function)."""
    build_args: tuple[Any, ...] = ()
    """Picklable arguments of the builder (a service template, a ``CallableRef`` of a user factory)."""
    methods: frozenset[str] = frozenset()
    """The service methods a ``ServiceOp`` may name; anything else is ``unknown_method``."""
    kind: str = "service"
    """What the service is (``"memory"``, ``"artifact"``): used in status and error reasons."""
    key: ScopeKey | None = None
    """Set for a shard: the exact scope it serves (its names are passed to the builder after ``build_args``)."""
    router: Any = None
    """Set for a shard: the ``LocalRef`` of the router that started it."""
    router_nonce: str = ""
    """The router incarnation that started this shard: a restarted router does not know it."""
    heartbeat_s: float = 0.0
    """How often a shard asks its router whether it still belongs to it (0: never)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterArgs:
    """How a shard router admits scopes and starts shards."""

    service: ServiceArgs
    """The shards' template (``key``, ``router`` and ``router_nonce`` are filled per shard)."""
    hosts: int
    """How many hosts shards are placed on (``blake2b(shard id) mod hosts``)."""
    max_active_scopes: int = 64
    """Shards alive at once; past it an idle shard is stopped (least recently used first)."""
    cold_queue: int = 0
    """Calls for a new scope that may wait while every shard is busy (0: refuse them at once)."""
    max_queue_per_scope: int = 1000
    """Calls one scope may have waiting behind the one in flight."""
    idle_timeout_s: float | None = 300.0
    """A shard unused this long is stopped (``None``: only capacity stops shards)."""
    heartbeat_s: float = 30.0
    """How often each shard checks that its router is alive and still owns it."""
    shard_restart: str = "transient"
    """The shards' OTP restart type under their host (``transient``: a crash restarts, a stop does not)."""
    spawn_timeout_s: float = 10.0
    """Bound on starting one shard."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardCheck(Request[bool]):
    """A shard asks its router whether it still owns it; ``False`` (or no router) makes the shard stop."""

    local_id: str
    nonce: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StopShards(Request[int]):
    """Stop every shard of the router (before the router itself is stopped); answered with how many."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckService(Request[bool]):
    """Whether the service actor built its service: answered ``True``, or failed with the builder's error."""
