"""The prefix-cache actor: a supervised, named tier-2 actor (``permanent``) that owns one :class:`CacheTable`.

Accepts (calls): :class:`~adk_actors.context.cache.Acquire` (answered with a
:class:`~adk_actors.context.cache.CacheDecision`, possibly after the single-flight create),
:class:`~adk_actors.context.cache.Invalidate` (answered with a count), :class:`~adk_actors.context.cache.GetCacheStats`
(answered with counts), ``Ping``, ``GetStatus``. Emits nothing but replies.

Provider creates and deletes run on the host's I/O threads (``io_call``), bounded by ``create_timeout_ms``; the
mailbox never blocks. A crash restarts the actor empty: resources it held are no longer handed out and expire at
the provider by their TTL. It keeps provider configs (with their API keys) in memory only, for deletes; its
status and crash report show counts and types, never a value.
"""

from __future__ import annotations

import time
from typing import Any

from adk_actors.context.cache import (
    Acquire,
    Bypass,
    CacheArgs,
    CacheDecision,
    CacheTable,
    Create,
    GetCacheStats,
    Hit,
    Invalidate,
)
from adk_actors.errors import AdkError, ConfigError, ProviderHttpError
from adk_actors.models.gemini.caches import CreatedCache, create_cached_content, delete_cached_content
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["ContextCacheActor"]


def _create(token: Any, config: dict[str, Any], prefix: dict[str, Any], ttl_s: float) -> CreatedCache:
    return create_cached_content(token, config, prefix, ttl_s)


def _delete(token: Any, config: dict[str, Any], name: str) -> bool:
    return delete_cached_content(token, config, name)


def _cause(error: AdkError) -> dict[str, Any]:
    details: dict[str, Any] = {"cause": error.reason}
    if isinstance(error, ProviderHttpError):
        details["status"] = error.status
    return details


class ContextCacheActor(GenServer):
    """One prefix cache; see the module docstring."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, CacheArgs):
            raise ConfigError("the context cache needs CacheArgs", reason="invalid_request")
        self.args = args
        self.table: CacheTable[CallCtx] = CacheTable(args.max_entries, args.max_waiters)
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Acquire):
            return self._acquire(request, ctx)
        if isinstance(request, Invalidate):
            if request.name:
                return self.table.forget(request.scope, request.name)
            count, dropped = self.table.invalidate(request.scope)
            for entry in dropped:
                self._delete_resource(entry.scope, entry.config, entry.name, None)
            return count
        if isinstance(request, GetCacheStats):
            return self.table.stats(request.scope)
        return super().handle_call(request, ctx)

    def _acquire(self, request: Acquire, ctx: CallCtx) -> Any:
        decision = self.table.lookup(request.scope, request.prefix_key, ctx, request.config)
        if isinstance(decision, Hit):
            return CacheDecision(outcome="hit", name=decision.name)
        if isinstance(decision, Bypass):
            return CacheDecision(outcome="bypass", reason=decision.reason)
        if isinstance(decision, Create):
            scope, key = request.scope, request.prefix_key

            def done(value: Any, error: AdkError | None) -> None:
                if error is not None or not isinstance(value, CreatedCache):
                    failure = error or AdkError("the create answered nothing", reason="malformed_response")
                    answer = CacheDecision(outcome="bypass", reason="create_failed", details=_cause(failure))
                    for waiter in self.table.failed(scope, key):
                        self.reply(waiter, answer)
                    return
                config = self.table.flight_config(scope, key)
                installed = self.table.created(scope, key, value.name, value.expires_in_s)
                if installed.orphan:
                    self._delete_resource(scope, config, value.name, "orphans_deleted")
                for waiter in installed.waiters:
                    self.reply(waiter, CacheDecision(outcome="created", name=value.name))
                for waiter in installed.stale:
                    self.reply(waiter, CacheDecision(outcome="bypass", reason="invalidated"))
                for entry in installed.evicted:
                    self._delete_resource(entry.scope, entry.config, entry.name, None)

            ttl_s = request.ttl_ms / 1000
            self.io_call(_create, (request.config, request.prefix, ttl_s), self._io_deadline(), done)
        return DEFERRED  # a Create or a Wait: answered when the flight lands

    def _io_deadline(self) -> float:
        return time.monotonic() + self.args.create_timeout_ms / 1000

    def _delete_resource(self, scope: str, config: dict[str, Any], name: str, counter: str | None) -> None:
        def done(_value: Any, error: AdkError | None) -> None:
            if error is not None:
                self.table.count(scope, "deletes_failed")
                self.log.warning("context cache delete failed", reason=error.reason)
            elif counter is not None:
                self.table.count(scope, counter)

        self.io_call(_delete, (config, name), self._io_deadline(), done)

    def status(self) -> dict[str, Any]:
        return {"kind": "context_cache", **self.table.stats(None)}
