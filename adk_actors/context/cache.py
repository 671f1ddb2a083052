"""The provider prefix cache: a picklable client, its messages, the ``context_cache`` option and the pure table.

::

    cache = ContextCache.start(system=system)                       # one per node (or per explicit name)
    runner = Runner(agent, "app", svc, context_cache={"cache": cache, "ttl_ms": 300_000})
    cache.stats(scope_fingerprint("app", "user-1", "gemini-3.1-flash-lite", {}))   # content-free counts
    cache.invalidate(scope)                                          # every entry and in-flight create

The cache holds *request prefixes* (system instruction, tools, tool config) as provider resources (Gemini
``cachedContents``), never model responses. One entry per (scope fingerprint, prefix fingerprint); the scope is
provider/app/user/model/policy, so every session of one user with one model and policy shares an entry. The actor
(:mod:`adk_actors.context.cache_actor`) decides with :class:`CacheTable` (pure, clock injected): a hit answers at
once; the first miss creates the resource on the actor's I/O threads while later callers for the same key wait on
that single flight; when the create completes, every waiter's absolute deadline is rechecked before the name is
handed out, and a resource nobody is left to use (all waiters gone, or the scope invalidated meanwhile) is deleted
as an orphan. Entries expire locally a margin before the provider's ``expireTime``; past ``max_entries`` the least
recently used entry is evicted and its resource deleted.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import AdkError, AskTimeout, ConfigError
from adk_actors.runtime.messages import Request

__all__ = [
    "CACHE_ACTOR",
    "COUNTERS",
    "DEFAULT_NAME",
    "Acquire",
    "CacheArgs",
    "CacheCall",
    "CacheDecision",
    "CacheOptions",
    "CacheTable",
    "ContextCache",
    "GetCacheStats",
    "Invalidate",
    "context_cache_options",
    "prefix_fingerprint",
    "prefix_tokens",
    "scope_fingerprint",
]

DEFAULT_NAME = "adk.context_cache"
CACHE_ACTOR = "adk_actors.context.cache_actor.ContextCacheActor"
DEFAULT_TTL_MS = 3_600_000
DEFAULT_MIN_PREFIX_TOKENS = 1024
DEFAULT_ACQUIRE_TIMEOUT_MS = 10_000
MAX_TTL_MS = 30 * 86400 * 1000
MIN_TTL_MS = 1000
MAX_POLICY_BYTES = 4096
MAX_SCOPES_COUNTED = 4096
"""Scopes whose counters are kept (oldest forgotten first); totals are always kept."""
MAX_EXPIRY_MARGIN_S = 5.0
CREATE_COOLDOWN_S = 30.0
"""After a failed create, acquisitions of that (scope, prefix) bypass without trying again for this long (the
provider refusing every create must not cost every turn a round trip first)."""
COUNTERS = (
    "hits",
    "misses",
    "creates",
    "create_failures",
    "bypasses",
    "expired_waiters",
    "orphans_deleted",
    "invalidations",
    "evictions",
    "expirations",
    "deletes_failed",
)
"""The counters :meth:`ContextCache.stats` reports (plus ``entries`` and ``creating``)."""
_OPTION_KEYS = frozenset({"cache", "ttl_ms", "min_prefix_tokens", "failure_mode", "policy", "acquire_timeout_ms"})


def scope_fingerprint(
    app: str, user: str, model: str, policy: Mapping[str, Any] | None = None, *, provider: str = "gemini"
) -> str:
    """The 64-hex-digit SHA-256 of the canonical JSON of the cache scope (provider, app, user, model, policy).

    Raises:
        ValidationError: ``policy`` is not JSON-safe.
    """
    scope = {"provider": provider, "app": app, "user": user, "model": model, "policy": dict(policy or {})}
    return hashlib.sha256(canonical_dumps(scope).encode("utf-8")).hexdigest()


def prefix_fingerprint(prefix: Mapping[str, Any]) -> str:
    """The SHA-256 of a prefix's canonical JSON (what makes two requests' prefixes the same)."""
    return hashlib.sha256(canonical_dumps(dict(prefix)).encode("utf-8")).hexdigest()


def prefix_tokens(prefix: Mapping[str, Any]) -> int:
    """The prefix's token estimate, as the context budgets estimate: ``ceil(canonical bytes / 4)``."""
    return math.ceil(len(canonical_dumps(dict(prefix)).encode("utf-8")) / 4)


# ---- messages -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheDecision:
    """The answer to :class:`Acquire`: use ``name`` (``outcome`` ``"hit"`` or ``"created"``) or send the request
    uncached (``"bypass"``, with a structural ``reason``)."""

    outcome: str
    name: str = field(default="", repr=False)
    """The provider resource (``cachedContents/...``); empty for a bypass."""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    """Structural only (an HTTP status, an error reason)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Acquire(Request[CacheDecision]):
    """A cached prefix for ``prefix`` in ``scope``: reused, created once for all waiters, or a bypass."""

    scope: str
    """A :func:`scope_fingerprint`."""
    prefix: dict[str, Any] = field(repr=False)
    """The provider's create body without ``ttl`` (model, systemInstruction, tools, toolConfig)."""
    prefix_key: str
    """:func:`prefix_fingerprint` of ``prefix``."""
    config: dict[str, Any] = field(repr=False)
    """The provider connection (``model``, ``api_key``, ``base_url``, ``request_timeout``): used to create the
    resource and, later, to delete it."""
    ttl_ms: int = DEFAULT_TTL_MS


@dataclass(frozen=True, slots=True, kw_only=True)
class Invalidate(Request[int]):
    """Drop every entry and in-flight create of ``scope`` (deleting their resources), or with ``name`` only the
    entry holding that resource (the provider no longer knows it); answered with how many were dropped."""

    scope: str
    name: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetCacheStats(Request[dict[str, int]]):
    """Content-free counts of ``scope`` (``None``: of the whole cache)."""

    scope: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheArgs:
    """The cache actor's start arguments."""

    max_entries: int = 256
    """Entries held (least recently used evicted past it); also the bound of creates in flight."""
    max_waiters: int = 1024
    """Callers waiting on one create; more are answered with a bypass."""
    create_timeout_ms: int = 30_000
    """Bound of one provider create or delete."""


# ---- the client ------------------------------------------------------------------------------------------------


def _system(system: Any) -> Any:
    if system is not None:
        return system
    from adk_actors.runtime.system import current_system

    return current_system()


@dataclass(frozen=True, slots=True)
class ContextCache:
    """A handle on a cache actor (picklable: only its registered name). See the module docstring."""

    name: str = DEFAULT_NAME

    @classmethod
    def start(
        cls,
        *,
        system: Any = None,
        name: str = DEFAULT_NAME,
        max_entries: int = 256,
        max_waiters: int = 1024,
        create_timeout_ms: int = 30_000,
    ) -> ContextCache:
        """Start a cache actor (``permanent``: a crash restarts it empty) registered as ``name``.

        Raises:
            ConfigError: ``invalid_value`` for a bound out of range.
            AdkError: ``already_started`` when an actor of that name runs.
        """
        for key, value, top in (
            ("max_entries", max_entries, 1_000_000),
            ("max_waiters", max_waiters, 1_000_000),
            ("create_timeout_ms", create_timeout_ms, 600_000),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(f"{key} is out of range", reason="invalid_value", details={"key": key, "max": top})
        args = CacheArgs(max_entries=max_entries, max_waiters=max_waiters, create_timeout_ms=create_timeout_ms)
        _system(system).spawn(CACHE_ACTOR, args, id=name, name=name, restart="permanent")
        return cls(name)

    def acquire(
        self,
        scope: str,
        prefix: Mapping[str, Any],
        deadline: float,
        *,
        config: Mapping[str, Any],
        ttl_ms: int = DEFAULT_TTL_MS,
        system: Any = None,
    ) -> CacheDecision:
        """A cache for ``prefix`` (a provider create body without ``ttl``) in ``scope`` before ``deadline``
        (absolute, ``time.monotonic()``); past the deadline the answer is a bypass with reason ``deadline``.

        Raises:
            AdkError: the actor is not running (``name_not_found``).
        """
        request = Acquire(
            scope=scope, prefix=dict(prefix), prefix_key=prefix_fingerprint(prefix), config=dict(config), ttl_ms=ttl_ms
        )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return CacheDecision(outcome="bypass", reason="deadline")
        try:
            return _system(system).ask(self.name, request, remaining)
        except AskTimeout:
            return CacheDecision(outcome="bypass", reason="deadline")

    def invalidate(self, scope_fingerprint: str, *, system: Any = None) -> int:
        """Drop every entry and in-flight create of the scope (their provider resources are deleted)."""
        return int(_system(system).ask(self.name, Invalidate(scope=scope_fingerprint)))

    def stats(self, scope_fingerprint: str | None = None, *, system: Any = None) -> dict[str, int]:
        """Counts of one scope or of the whole cache: ``entries``, ``creating`` and :data:`COUNTERS`."""
        return dict(_system(system).ask(self.name, GetCacheStats(scope=scope_fingerprint)))

    def stop(self, *, system: Any = None) -> None:
        """Stop the actor (its entries are forgotten; resources live on until their TTL)."""
        handle = _system(system)
        handle.stop_inner(handle.resolve(self.name))


# ---- the Runner option -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheOptions:
    """The validated ``context_cache`` Runner option."""

    cache: ContextCache
    ttl_ms: int = DEFAULT_TTL_MS
    min_prefix_tokens: int = DEFAULT_MIN_PREFIX_TOKENS
    """Prefixes estimated below this many tokens are sent uncached (no resource is created)."""
    failure_mode: str = "bypass"
    """``bypass``: any cache failure sends the full request uncached; ``fail``: the turn fails
    (``AgentError(reason="context_cache_failed")``)."""
    policy: dict[str, Any] = field(default_factory=dict)
    """Small JSON that joins the scope fingerprint (callers with different policies never share)."""
    acquire_timeout_ms: int = DEFAULT_ACQUIRE_TIMEOUT_MS
    """How long a turn waits for the cache (never past the turn's own deadline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCall:
    """What a model call needs to use the cache: the options and the call's scope fingerprint."""

    options: CacheOptions
    scope: str


def _bad(key: str, message: str, **details: Any) -> ConfigError:
    return ConfigError(message, reason="invalid_value", details={"key": f"context_cache.{key}", **details})


def _int(spec: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(key, f"context_cache.{key} must be an integer in range", min=low, max=high)
    return value


def context_cache_options(value: Any) -> CacheOptions | None:
    """Validate the ``context_cache`` Runner option (``None``: no cache).

    Raises:
        ConfigError: ``unknown_key`` or ``invalid_value`` with ``details["key"]``.
    """
    if value is None:
        return None
    if isinstance(value, CacheOptions):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError("context_cache must be a mapping", reason="invalid_value", details={"key": "context_cache"})
    unknown = sorted(str(k)[:64] for k in value if k not in _OPTION_KEYS)
    if unknown:
        raise ConfigError(
            "unknown context_cache key", reason="unknown_key", details={"key": f"context_cache.{unknown[0]}"}
        )
    cache = value.get("cache")
    if not isinstance(cache, ContextCache):
        raise _bad("cache", "context_cache.cache must be a ContextCache (ContextCache.start())")
    mode = value.get("failure_mode", "bypass")
    if mode not in ("bypass", "fail"):
        raise _bad("failure_mode", "context_cache.failure_mode is bypass or fail")
    policy = value.get("policy", {})
    try:
        size = len(canonical_dumps(policy).encode("utf-8")) if isinstance(policy, Mapping) else -1
    except (AdkError, TypeError, ValueError, RecursionError):
        size = -1
    if not 0 <= size <= MAX_POLICY_BYTES:
        raise _bad("policy", "context_cache.policy must be a JSON object of at most 4 KiB", max_bytes=MAX_POLICY_BYTES)
    return CacheOptions(
        cache=cache,
        ttl_ms=_int(value, "ttl_ms", DEFAULT_TTL_MS, MIN_TTL_MS, MAX_TTL_MS),
        min_prefix_tokens=_int(value, "min_prefix_tokens", DEFAULT_MIN_PREFIX_TOKENS, 0, 100_000_000),
        failure_mode=mode,
        policy=dict(policy),
        acquire_timeout_ms=_int(value, "acquire_timeout_ms", DEFAULT_ACQUIRE_TIMEOUT_MS, 1, 600_000),
    )


# ---- the table (pure) ------------------------------------------------------------------------------------------


class Waiter(Protocol):
    @property
    def deadline(self) -> float: ...


W = TypeVar("W", bound=Waiter)


@dataclass(slots=True)
class Entry:
    """A provider resource holding one prefix of one scope."""

    scope: str
    name: str
    expires_at: float
    """Monotonic time after which the entry is no longer handed out (a margin before the provider's expiry)."""
    config: dict[str, Any] = field(repr=False)


@dataclass(slots=True)
class Flight(Generic[W]):
    """A create in flight and the callers waiting on it."""

    scope: str
    generation: int
    config: dict[str, Any] = field(repr=False)
    waiters: list[W] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Hit:
    name: str


@dataclass(frozen=True, slots=True)
class Wait:
    pass


@dataclass(frozen=True, slots=True)
class Create:
    pass


@dataclass(frozen=True, slots=True)
class Bypass:
    reason: str


@dataclass(frozen=True, slots=True)
class Installed(Generic[W]):
    """A create completed: hand ``name`` to ``waiters``; delete ``orphan`` (a resource nobody is left to use)
    and the resources of the ``evicted`` entries."""

    waiters: list[W]
    orphan: bool
    evicted: list[Entry]
    stale: list[W] = field(default_factory=list)
    """Waiters still in time whose scope was invalidated during the create: they get a bypass."""


class CacheTable(Generic[W]):
    """Entries, single flights, LRU order and counters; every decision the cache actor takes. No I/O."""

    def __init__(self, max_entries: int = 256, max_waiters: int = 1024, clock: Callable[[], float] = time.monotonic):
        self.max_entries = max_entries
        self.max_waiters = max_waiters
        self.clock = clock
        self.entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self.flights: dict[tuple[str, str], Flight[W]] = {}
        self.generations: dict[str, int] = {}
        self.counts: OrderedDict[str, Counter[str]] = OrderedDict()
        self.totals: Counter[str] = Counter()
        self.cooldowns: OrderedDict[tuple[str, str], float] = OrderedDict()
        """(scope, prefix) → when creating may be tried again after a failed create (bounded like entries)."""

    def count(self, scope: str, counter: str, n: int = 1) -> None:
        if n <= 0:
            return
        self.totals[counter] += n
        counts = self.counts.get(scope)
        if counts is None:
            if len(self.counts) >= MAX_SCOPES_COUNTED:
                self.counts.popitem(last=False)
            counts = self.counts[scope] = Counter()
        counts[counter] += n

    def lookup(self, scope: str, prefix_key: str, waiter: W, config: dict[str, Any]) -> Hit | Wait | Create | Bypass:
        """What to do for one acquisition; a ``Create`` opens the flight ``waiter`` is the first of."""
        key = (scope, prefix_key)
        now = self.clock()
        entry = self.entries.get(key)
        if entry is not None:
            if now < entry.expires_at:
                self.entries.move_to_end(key)
                self.count(scope, "hits")
                return Hit(entry.name)
            del self.entries[key]  # the provider drops it by itself a margin later
            self.count(scope, "expirations")
        flight = self.flights.get(key)
        if flight is not None:
            if len(flight.waiters) >= self.max_waiters:
                self.count(scope, "bypasses")
                return Bypass("cache_busy")
            flight.waiters.append(waiter)
            self.count(scope, "hits")
            return Wait()
        if len(self.flights) >= self.max_entries:
            self.count(scope, "bypasses")
            return Bypass("cache_busy")
        retry_at = self.cooldowns.get(key)
        if retry_at is not None:
            if now < retry_at:
                self.count(scope, "bypasses")
                return Bypass("create_cooling_down")
            del self.cooldowns[key]
        self.flights[key] = Flight(scope, self.generations.get(scope, 0), config, [waiter])
        self.count(scope, "misses")
        self.count(scope, "creates")
        return Create()

    def created(self, scope: str, prefix_key: str, name: str, expires_in_s: float) -> Installed[W]:
        """The create of ``(scope, prefix_key)`` answered ``name``: recheck every waiter's deadline now, install the
        entry when someone is left to use it and the scope was not invalidated meanwhile, else declare an orphan."""
        key = (scope, prefix_key)
        flight = self.flights.pop(key)
        now = self.clock()
        live = [w for w in flight.waiters if now <= w.deadline]
        self.count(scope, "expired_waiters", len(flight.waiters) - len(live))
        if flight.generation != self.generations.get(scope, 0):
            self.count(scope, "bypasses", len(live))
            return Installed([], True, [], live)
        if not live:
            return Installed([], True, [])
        margin = min(MAX_EXPIRY_MARGIN_S, expires_in_s / 10)
        self.entries[key] = Entry(scope, name, now + expires_in_s - margin, flight.config)
        self.entries.move_to_end(key)
        evicted: list[Entry] = []
        while len(self.entries) > self.max_entries:
            _, old = self.entries.popitem(last=False)
            self.count(old.scope, "evictions")
            evicted.append(old)
        return Installed(live, False, evicted)

    def failed(self, scope: str, prefix_key: str) -> list[W]:
        """The create failed: the waiters still in time (each gets a bypass)."""
        key = (scope, prefix_key)
        flight = self.flights.pop(key)
        now = self.clock()
        live = [w for w in flight.waiters if now <= w.deadline]
        self.cooldowns[key] = now + CREATE_COOLDOWN_S
        self.cooldowns.move_to_end(key)
        while len(self.cooldowns) > self.max_entries:
            self.cooldowns.popitem(last=False)
        self.count(scope, "create_failures")
        self.count(scope, "expired_waiters", len(flight.waiters) - len(live))
        self.count(scope, "bypasses", len(live))
        return live

    def flight_config(self, scope: str, prefix_key: str) -> dict[str, Any]:
        return self.flights[(scope, prefix_key)].config

    def invalidate(self, scope: str) -> tuple[int, list[Entry]]:
        """Drop the scope's entries (returned: their resources are to be deleted) and mark its in-flight creates
        stale (their results become orphans); the count covers both."""
        doomed = [key for key in self.entries if key[0] == scope]
        dropped = [self.entries.pop(key) for key in doomed]
        for key in [key for key in self.cooldowns if key[0] == scope]:  # an invalidation also means "try again"
            del self.cooldowns[key]
        stale = sum(1 for key in self.flights if key[0] == scope)
        if stale:
            self.generations[scope] = self.generations.get(scope, 0) + 1
        self.count(scope, "invalidations", len(dropped) + stale)
        return len(dropped) + stale, dropped

    def forget(self, scope: str, name: str) -> int:
        """Drop the entry holding ``name`` (the provider no longer knows it)."""
        for key, entry in list(self.entries.items()):
            if key[0] == scope and entry.name == name:
                del self.entries[key]
                self.count(scope, "invalidations")
                return 1
        return 0

    def stats(self, scope: str | None) -> dict[str, int]:
        counts = self.totals if scope is None else self.counts.get(scope, Counter())
        entries = sum(1 for key in self.entries if scope is None or key[0] == scope)
        creating = sum(1 for key in self.flights if scope is None or key[0] == scope)
        return {"entries": entries, "creating": creating, **{name: int(counts[name]) for name in COUNTERS}}
