"""Starting a service actor or a shard router, and the picklable client that asks them from any process.

The actors themselves live in :mod:`adk_actors.shards.actor`; other packages use only this module (and
``messages``), as the layer check requires.
"""

from __future__ import annotations

import math
import pickle
import uuid
from collections.abc import Callable
from typing import Any

from adk_actors.errors import AdkError, ConfigError
from adk_actors.runtime.callables import CallableRef, callable_ref
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import LocalRef
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.shards.messages import CheckService, RoutedOp, RouterArgs, ServiceArgs, ServiceOp, StopShards

__all__ = [
    "ROUTER_ACTOR",
    "SERVICE_ACTOR",
    "ServiceClient",
    "builder",
    "built_service",
    "check_router_options",
    "factory_source",
    "start_router",
    "start_service",
    "start_sharded",
]

SERVICE_ACTOR = "adk_actors.shards.actor.ServiceActor"
ROUTER_ACTOR = "adk_actors.shards.actor.ShardRouter"
MAX_ACTIVE_SCOPES = 10_000
MAX_COLD_QUEUE = 100_000


def _bad(option: str, rule: str) -> ConfigError:
    return ConfigError(f"{option}: {rule}", reason="invalid_value", details={"option": option, "rule": rule})


def _int(value: Any, option: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _bad(option, f"an int from {minimum} to {maximum}")
    return value


def _seconds(value: Any, option: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise _bad(option, "a finite number of seconds > 0")
    return float(value)


def check_router_options(
    *,
    max_active_scopes: Any,
    cold_queue: Any,
    max_queue_per_scope: Any,
    idle_timeout_s: Any,
    heartbeat_s: Any,
    shard_restart: Any,
) -> None:
    """Validate the options of a sharded service before anything starts.

    Raises:
        ConfigError: reason ``invalid_value`` (``details["option"]`` names it).
    """
    _int(max_active_scopes, "max_active_scopes", 1, MAX_ACTIVE_SCOPES)
    _int(cold_queue, "cold_queue", 0, MAX_COLD_QUEUE)
    _int(max_queue_per_scope, "max_queue_per_scope", 1, MAX_COLD_QUEUE)
    if idle_timeout_s is not None:
        _seconds(idle_timeout_s, "idle_timeout_s")
    _seconds(heartbeat_s, "heartbeat_s")
    if shard_restart not in ("permanent", "transient", "temporary"):
        raise _bad("shard_restart", "permanent, transient or temporary")


def start_service(
    args: ServiceArgs, *, system: ActorSystemHandle | None = None, name: str | None = None, timeout: float | None = None
) -> LocalRef:
    """Start a ``ServiceActor`` (a permanent tier-2 actor: re-created if its host is restarted)."""
    handle = system or current_system()
    local_id = f"{args.kind}-service-{uuid.uuid4().hex}"
    return handle.spawn(SERVICE_ACTOR, args, id=local_id, name=name, restart="permanent", timeout=timeout)


def start_router(
    args: RouterArgs, *, system: ActorSystemHandle | None = None, name: str | None = None, timeout: float | None = None
) -> LocalRef:
    """Start a ``ShardRouter`` (a permanent tier-2 actor)."""
    handle = system or current_system()
    local_id = f"{args.service.kind}-router-{uuid.uuid4().hex}"
    return handle.spawn(ROUTER_ACTOR, args, id=local_id, name=name, restart="permanent", timeout=timeout)


def start_sharded(
    service: ServiceArgs,
    *,
    max_active_scopes: int,
    cold_queue: int,
    max_queue_per_scope: int,
    idle_timeout_s: float | None,
    heartbeat_s: float,
    shard_restart: str,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> ServiceClient:
    """Validate the router options, start the router of ``service``'s shards and return its client (what
    ``ShardedMemoryService.start`` and ``ShardedArtifactService.start`` share).

    Raises:
        ConfigError: reason ``invalid_value`` (``details["option"]`` names it), before anything starts.
    """
    options: dict[str, Any] = {
        "max_active_scopes": max_active_scopes,
        "cold_queue": cold_queue,
        "max_queue_per_scope": max_queue_per_scope,
        "idle_timeout_s": idle_timeout_s,
        "heartbeat_s": heartbeat_s,
        "shard_restart": shard_restart,
    }
    check_router_options(**options)
    handle = system or current_system()
    ref = start_router(
        RouterArgs(service=service, hosts=handle.settings.hosts, **options), system=handle, timeout=timeout
    )
    return ServiceClient(ref, sharded=True, timeout=timeout, system=system)


def factory_source(factory: Any, is_service: Callable[[Any], bool], what: str) -> Any:
    """What crosses to a service actor for ``factory``: a service itself (``is_service``; it must pickle) or a
    ``CallableRef`` to the callable that builds one; ``what`` names the kind in errors ("a memory service").

    Raises:
        ConfigError: ``service_not_shareable`` (a service that does not pickle, e.g. an in-memory one: pass its
            class or a factory instead), ``invalid_value`` (neither a service nor a callable).
        WorkerError: ``unpicklable_callable``.
    """
    if is_service(factory):
        try:
            pickle.dumps(factory)
        except Exception:
            raise ConfigError(
                f"this {what.split(' ', 1)[1]} does not pickle: pass a factory that builds it",
                reason="service_not_shareable",
                details={"type": type(factory).__name__},
            ) from None
        return factory
    if callable(factory):
        return callable_ref(factory)
    raise ConfigError(
        f"factory must be {what} or a callable building one",
        reason="invalid_value",
        details={"option": "factory", "type": type(factory).__name__},
    )


def built_service(service: Any, is_service: Callable[[Any], bool], what: str) -> Any:
    """``service`` as a factory built it, checked to be ``what`` it should.

    Raises:
        ConfigError: ``invalid_value`` naming the option ``factory`` and the type built.
    """
    if not is_service(service):
        raise ConfigError(
            f"the factory did not build {what}",
            reason="invalid_value",
            details={"option": "factory", "type": type(service).__name__},
        )
    return service


def builder(fn: Callable[..., Any]) -> CallableRef:
    """The ``ServiceArgs.build`` of a module-level function of ours (by name: never code by value)."""
    return CallableRef.by_name(f"{fn.__module__}:{fn.__qualname__}")


class ServiceClient:
    """The picklable part of an actor-backed service: the actor's ``LocalRef`` (stable across its restarts), whether
    it is a router, and the ask timeout. In another process it asks through that process's system."""

    def __init__(
        self, ref: LocalRef, *, sharded: bool, timeout: float | None = None, system: ActorSystemHandle | None = None
    ) -> None:
        self._ref = ref
        self._sharded = sharded
        self.timeout = timeout
        self._handle = system

    def __getstate__(self) -> dict[str, Any]:
        return {"ref": self._ref, "sharded": self._sharded, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._ref, self._sharded, self.timeout = state["ref"], state["sharded"], state["timeout"]
        self._handle = None

    @property
    def ref(self) -> LocalRef:
        """The service actor's (or router's) ref."""
        return self._ref

    def _system(self) -> ActorSystemHandle:
        handle = self._handle
        return handle if handle is not None and handle.running else current_system()

    def _op(self, key: tuple[str, ...], method: str, *args: Any, **kwargs: Any) -> Any:
        op = ServiceOp(method=method, args=args, kwargs=kwargs)
        request: Any = RoutedOp(key=key, op=op) if self._sharded else op
        return self._system().ask(self._ref, request, self.timeout)

    def check(self) -> None:
        """Raise the error the service actor got building its service, if any.

        Raises:
            AdkError: the builder's error (a ``StorageError`` ``service_unavailable`` for an unforeseen one).
        """
        self._system().ask(self._ref, CheckService(), self.timeout)

    def status(self) -> dict[str, Any]:
        """The actor's status (a router's: active scopes, queues, counters; never a scope's data)."""
        return self._system().ask(self._ref, GetStatus(), self.timeout)

    def stop(self) -> None:
        """Stop the actor (a router stops its shards first); the data of an in-memory service is gone. Stopping a
        stopped service does nothing."""
        handle = self._system()
        try:
            if self._sharded:
                handle.ask(self._ref, StopShards(), self.timeout)
            handle.stop_inner(self._ref, self.timeout)
        except AdkError as err:
            if err.reason not in ("noproc", "not_found"):
                raise  # already stopped: nothing to do
