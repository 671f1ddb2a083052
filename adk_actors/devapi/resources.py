"""Developer operations over memory, artifacts and context: what ``/dev/v1/{memory,artifacts,context}`` and the
``adk memory``/``artifact``/``context-cache`` commands call.

The services are never looked up by path text. The embedding application hands the developer server a
:data:`ResourceProvider` — ``provider(app_name, user_id, session_id | None) -> DevResources | None`` — called with
the exact scope of each request (``session_id`` is ``None`` for the user-scoped memory routes); ``None`` denies the
scope (403 ``resource_forbidden``). :func:`single_tenant` builds one for a local server with one app and user; a
bare :class:`DevResources` serves every scope (each adapter call still names the exact scope).

Adapters are not trusted to answer for the scope they were asked about: a version record or memory hit whose
embedded scope differs from the path's, a page longer than asked or out of order, or a value of the wrong shape fails
the whole answer closed as ``<kind>_unavailable`` (503); nothing of it is projected. Outputs are metadata only (no
artifact bytes, no handles, no provider resource names, no policy values) and every list is bounded.

Destructive operations take a confirmation object that must equal the expected one exactly (same keys, same string
values): :func:`artifact_confirmation`, :func:`memory_confirmation`, :func:`cache_confirmation`. A missing one is
``confirmation_required``, any other ``confirmation_mismatch`` (both 400, details ``expected_keys``); nothing is
deleted either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from adk_actors.agents.context import ContextPolicy, history_from_events
from adk_actors.artifacts.base import ArtifactScope, ArtifactVersion, check_artifact_name
from adk_actors.content.validation import check_id, check_int, check_text
from adk_actors.errors import AdkError, BudgetExceeded, PolicyDenied, StorageError, ValidationError
from adk_actors.logs import scrub
from adk_actors.memory.base import (
    MAX_CONTENT_BYTES,
    MAX_QUERY_BYTES,
    BaseMemoryService,
    MemoryHit,
    MemoryScope,
    check_entry_id,
    check_session_id,
)
from adk_actors.secrets import is_secret_key, prune_secrets
from adk_actors.sessions.base import BaseSessionService
from adk_actors.sessions.model import SessionRef

__all__ = [
    "ARTIFACT_SELECTORS",
    "DEFAULT_RESOURCE_PAGE",
    "MAX_RESOURCE_PAGE",
    "MAX_SNIPPET_CHARS",
    "MEMORY_TARGETS",
    "DevResources",
    "ResourceOps",
    "ResourceProvider",
    "artifact_confirmation",
    "cache_confirmation",
    "memory_confirmation",
    "single_tenant",
]

MAX_RESOURCE_PAGE = 100
"""Largest page of artifact names, artifact versions or memory hits."""
DEFAULT_RESOURCE_PAGE = 20
"""Page size when a request names none (memory search: the memory services' default of 10)."""
MAX_SNIPPET_CHARS = 1024
"""Most characters of a memory entry's content a search hit shows (the rest is cut, ``content_truncated``)."""
ARTIFACT_SELECTORS = ("latest", "all")
"""Selectors of an artifact delete besides a version number written in decimal (``"3"``)."""
MEMORY_TARGETS = ("entry", "session", "user")
"""What a memory erase removes: one entry (by id), a session's entries (by session id), the user's entries."""
DIAGNOSTIC_POLICY = ContextPolicy(max_bytes=1024 * 1024, max_tokens=262_144)
"""The policy context explanation selects history with (the reference's ``dev_diagnostic_context_policy``)."""

_MAX_STAT_KEYS = 32
_STAT_KEY = re.compile(r"[a-z][a-z0-9_]{0,47}")
_FINGERPRINT = re.compile(r"[0-9a-f]{16,128}")
_COMPRESSOR = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
_SELECTOR_VERSION = re.compile(r"[1-9][0-9]{0,17}")
_KEPT_DETAILS = frozenset({"field", "rule", "max", "min", "max_bytes", "max_chars", "max_keys", "problem", "key"})
"""Details of an adapter's validation error that are structural (the names and limits of the rule broken)."""
_NOT_FOUND = frozenset({"artifact_not_found", "memory_entry_not_found"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DevResources:
    """The services one scope's developer requests use; every field is optional (``None``: unavailable)."""

    artifacts: Any = None
    """A :class:`~adk_actors.artifacts.BaseArtifactService` (session-scoped artifacts of the path's session)."""
    memory: BaseMemoryService | None = None
    """A :class:`~adk_actors.memory.BaseMemoryService` (the path's user scope)."""
    context_cache: Any = None
    """A context-cache client (``stats(scope_fingerprint=)``, ``invalidate(scope_fingerprint)``)."""
    cache_policy: Mapping[str, Any] | None = None
    """The cache policy the application runs with: part of the cache scope's fingerprint, never shown."""
    cache_provider: str = "gemini"
    """The model provider whose cache the scope names (part of the fingerprint)."""


ResourceProvider: TypeAlias = Callable[[str, str, "str | None"], "DevResources | None"]
"""``(app_name, user_id, session_id | None) -> DevResources | None``; ``None`` denies the scope."""


def single_tenant(
    resources: DevResources, *, app_name: str, user_id: str, session_ids: Sequence[str] | None = None
) -> ResourceProvider:
    """A provider that serves ``resources`` to exactly one app and user (and, with ``session_ids``, only those
    sessions for the session routes) and denies every other scope."""
    sessions = None if session_ids is None else frozenset(session_ids)

    def provide(app: str, user: str, session: str | None) -> DevResources | None:
        if app != app_name or user != user_id:
            return None
        if session is not None and sessions is not None and session not in sessions:
            return None
        return resources

    return provide


def artifact_confirmation(app_name: str, user_id: str, session_id: str, name: str, selector: str) -> dict[str, str]:
    """The confirmation an artifact delete must carry."""
    return {"app_name": app_name, "user_id": user_id, "session_id": session_id, "name": name, "selector": selector}


def memory_confirmation(app_name: str, user_id: str, target: str, identifier: str) -> dict[str, str]:
    """The confirmation a memory erase must carry."""
    return {"app_name": app_name, "user_id": user_id, "target": target, "identifier": identifier}


def cache_confirmation(
    app_name: str, user_id: str, session_id: str, model: str, scope_fingerprint: str
) -> dict[str, str]:
    """The confirmation a context-cache invalidation must carry (``scope_fingerprint`` as lifecycle shows it)."""
    return {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "model": model,
        "scope_fingerprint": scope_fingerprint,
    }


def _confirm(confirmation: Any, expected: Mapping[str, str]) -> None:
    details = {"expected_keys": sorted(expected)}
    if confirmation is None:
        raise ValidationError(
            "this operation needs its exact confirmation object", reason="confirmation_required", details=details
        )
    exact = (
        isinstance(confirmation, Mapping)
        and set(confirmation) == set(expected)
        and all(type(confirmation[k]) is str and confirmation[k] == v for k, v in expected.items())
    )
    if not exact:
        raise ValidationError(
            "the confirmation does not match this operation", reason="confirmation_mismatch", details=details
        )


def _unavailable(kind: str, problem: str) -> StorageError:
    return StorageError(f"the {kind.replace('_', ' ')} source is unavailable", reason=f"{kind}_unavailable",
                        details={"problem": problem})  # fmt: skip


def _adapter_error(kind: str, err: Exception) -> AdkError:
    """What the edge may show of an adapter's failure: a validation error's structural details, a not-found's
    reason, and for anything else only that the source is unavailable."""
    if isinstance(err, ValidationError):
        kept = {k: v for k, v in err.details.items() if k in _KEPT_DETAILS and not isinstance(v, Mapping | list)}
        return ValidationError(scrub(err.message), reason=err.reason, details=kept)
    if isinstance(err, StorageError) and err.reason in _NOT_FOUND:
        what = "artifact" if err.reason == "artifact_not_found" else "memory entry"
        return StorageError(f"no such {what}", reason=err.reason)
    return _unavailable(kind, "adapter_failed")


def _call(kind: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # an adapter is foreign code: its failure is reported, never passed through raw
        raise _adapter_error(kind, err) from None


def _page_limit(limit: Any, default: int = DEFAULT_RESOURCE_PAGE) -> int:
    return check_int(default if limit is None else limit, "limit", minimum=1, maximum=MAX_RESOURCE_PAGE)


class ResourceOps:
    """The resource operations of one developer server.

    Args:
        provider: the application's :data:`ResourceProvider`, a :class:`DevResources` for every scope, or ``None``
            (every resource route answers ``<kind>_unavailable``; context explanation still works).
        sessions: the session service context explanation and lifecycle read.
        context_policy: the policy explanation selects history with (default :data:`DIAGNOSTIC_POLICY`).
        system: the node a :class:`~adk_actors.context.cache.ContextCache` handle is asked on (default: the
            process's current one).
    """

    def __init__(
        self,
        provider: ResourceProvider | DevResources | None,
        sessions: BaseSessionService,
        *,
        context_policy: ContextPolicy | None = None,
        system: Any = None,
    ) -> None:
        if provider is not None and not isinstance(provider, DevResources) and not callable(provider):
            raise ValidationError(
                "a resource provider is a callable or DevResources",
                reason="invalid_value",
                details={"key": "resources"},
            )
        self._provider = provider
        self.sessions = sessions
        self.context_policy = context_policy or DIAGNOSTIC_POLICY
        self.system = system

    # ---- resolution --------------------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What diagnostics show of the configuration: kinds, never services, handles or policies."""
        if self._provider is None:
            kind = "none"
        elif isinstance(self._provider, DevResources):
            kind = "fixed"
        else:
            kind = "provider"
        return {"resource_provider": kind, "context_explain": "available", "max_resource_results": MAX_RESOURCE_PAGE}

    def _resolve(self, kind: str, app: str, user: str, session: str | None) -> Any:
        """The service of ``kind`` (``artifact``, ``memory``, ``context_cache``) for the exact scope."""
        provider = self._provider
        if provider is None:
            raise _unavailable(kind, "not_configured")
        if isinstance(provider, DevResources):
            found: Any = provider
        else:
            try:
                found = provider(app, user, session)
            except Exception:  # the provider is the application's code: fail closed, show nothing of it
                raise _unavailable(kind, "provider_failed") from None
        if found is None:
            raise PolicyDenied("the resource provider refused this scope", reason="resource_forbidden")
        if not isinstance(found, DevResources):
            raise _unavailable(kind, "invalid_result")
        service = {"artifact": found.artifacts, "memory": found.memory, "context_cache": found.context_cache}[kind]
        if service is None:
            raise _unavailable(kind, "not_configured")
        if kind == "context_cache":
            return found
        return service

    @staticmethod
    def _ids(app: Any, user: Any, session: Any = None) -> tuple[str, str, str | None]:
        return (
            check_id(app, "app_name"),
            check_id(user, "user_id"),
            None if session is None else check_id(session, "session_id"),
        )

    # ---- artifacts ---------------------------------------------------------------------------------------------

    def _artifact_scope(self, app: Any, user: Any, session: Any) -> tuple[Any, ArtifactScope]:
        a, u, s = self._ids(app, user, session)
        assert s is not None
        scope = ArtifactScope.session(a, u, s)
        return self._resolve("artifact", a, u, s), scope

    def list_artifacts(
        self, app: Any, user: Any, session: Any, limit: Any = None, cursor: Any = None
    ) -> dict[str, Any]:
        """A page of the session's artifact names in code-point order after ``cursor`` (exclusive):
        ``{"names": [...], "next_cursor": str | None}``.

        Raises:
            ValidationError: a malformed id, ``limit`` outside 1..:data:`MAX_RESOURCE_PAGE`, ``invalid_cursor``.
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``artifact_unavailable`` (none configured, the adapter failed or answered out of shape).
        """
        service, scope = self._artifact_scope(app, user, session)
        size = _page_limit(limit)
        if cursor is not None:
            cursor = check_text(cursor, "cursor", max_bytes=4096, allow_empty=False)
        answer = _call("artifact", service.list_names, scope, limit=size, cursor=cursor)
        return {"names": _checked_names(answer, size, cursor), "next_cursor": answer[1]}

    def _versions(self, service: Any, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        found = _call("artifact", service.list_versions, scope, name)
        if not isinstance(found, list):
            raise _unavailable("artifact", "invalid_result")
        seen: set[int] = set()
        for record in found:
            if not isinstance(record, ArtifactVersion):
                raise _unavailable("artifact", "invalid_result")
            if record.scope != scope or record.name != name:
                raise _unavailable("artifact", "scope_mismatch")
            if isinstance(record.version, bool) or not isinstance(record.version, int) or record.version < 1:
                raise _unavailable("artifact", "invalid_result")
            if record.version in seen:
                raise _unavailable("artifact", "invalid_result")
            seen.add(record.version)
        return sorted(found, key=lambda r: r.version)

    def artifact_versions(
        self, app: Any, user: Any, session: Any, name: Any, limit: Any = None, cursor: Any = None
    ) -> dict[str, Any]:
        """A page of one artifact's stored versions, oldest first, after version ``cursor`` (exclusive), metadata
        only: ``{"name", "versions": [{version, size, digest, mime_type, created_at, metadata}], "next_cursor"}``.

        Raises:
            ValidationError: ``invalid_artifact_name``, ``invalid_limit``/``invalid_value``, a malformed cursor.
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``artifact_unavailable`` (also when a record names another scope or artifact).
        """
        service, scope = self._artifact_scope(app, user, session)
        name = check_artifact_name(name)
        size = _page_limit(limit)
        after = 0 if cursor is None else check_int(cursor, "cursor", minimum=0)
        versions = [v for v in self._versions(service, scope, name) if v.version > after]
        page = versions[:size]
        return {
            "name": name,
            "versions": [_version_json(v) for v in page],
            "next_cursor": page[-1].version if len(versions) > size else None,
        }

    def delete_artifact(
        self, app: Any, user: Any, session: Any, name: Any, selector: Any, confirmation: Any
    ) -> dict[str, Any]:
        """Delete the versions ``selector`` picks (``"latest"``, ``"all"`` or a decimal version) after the exact
        :func:`artifact_confirmation`: ``{"deleted": n, "versions": [...]}``.

        Raises:
            ValidationError: a malformed argument; ``confirmation_required``/``confirmation_mismatch`` (nothing is
                deleted).
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``artifact_not_found``; ``artifact_unavailable``.
        """
        a, u, s = self._ids(app, user, session)
        assert s is not None
        name = check_artifact_name(name)
        if not isinstance(selector, str) or not (
            selector in ARTIFACT_SELECTORS or _SELECTOR_VERSION.fullmatch(selector)
        ):
            raise ValidationError(
                'selector is "latest", "all" or a version number',
                reason="invalid_value",
                details={"key": "selector", "allowed": list(ARTIFACT_SELECTORS)},
            )
        _confirm(confirmation, artifact_confirmation(a, u, s, name, selector))
        service, scope = self._artifact_scope(a, u, s)
        stored = [v.version for v in self._versions(service, scope, name)]
        if selector == "all":
            chosen = stored
        elif selector == "latest":
            chosen = stored[-1:]
        else:
            chosen = [v for v in stored if v == int(selector)]
        if not chosen:
            raise StorageError("no such artifact", reason="artifact_not_found")
        if selector == "all":
            deleted = _call("artifact", service.delete, scope, name, None)
        else:
            deleted = _call("artifact", service.delete, scope, name, chosen[0])
        if isinstance(deleted, bool) or not isinstance(deleted, int) or deleted < 0:
            raise _unavailable("artifact", "invalid_result")
        return {"deleted": deleted, "versions": chosen[:MAX_RESOURCE_PAGE], "selector": selector}

    # ---- memory ------------------------------------------------------------------------------------------------

    def _memory(self, app: Any, user: Any) -> tuple[BaseMemoryService, MemoryScope]:
        a, u, _ = self._ids(app, user)
        return self._resolve("memory", a, u, None), MemoryScope(a, u)

    def memory_info(self, app: Any, user: Any) -> dict[str, Any]:
        """The scoped adapter's public capabilities, limits and entry count.

        Raises:
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``memory_unavailable``.
        """
        service, scope = self._memory(app, user)
        count = _call("memory", service.count, scope)
        bound = _call("memory", lambda: service.max_entries_per_scope)
        for value in (count, bound):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _unavailable("memory", "invalid_result")
        return {
            "app_name": scope.app,
            "user_id": scope.user,
            "adapter": _adapter_kind(service),
            "search": "lexical",
            "entries": count,
            "limits": {
                "max_entries_per_scope": bound,
                "max_query_bytes": MAX_QUERY_BYTES,
                "max_results": MAX_RESOURCE_PAGE,
                "max_content_bytes": MAX_CONTENT_BYTES,
                "snippet_chars": MAX_SNIPPET_CHARS,
            },
            "erase_targets": list(MEMORY_TARGETS),
        }

    def search_memory(self, app: Any, user: Any, query: Any, limit: Any = None, filter: Any = None) -> dict[str, Any]:
        """The scope's best entries for ``query``: ``{"hits": [{entry_id, rank, score, content, content_truncated,
        metadata, session_id, author, created_at}]}``; content is cut to :data:`MAX_SNIPPET_CHARS` and scrubbed of
        known secret values, metadata pruned of secret-named keys.

        Raises:
            ValidationError: ``invalid_query``, ``invalid_metadata``, ``invalid_value`` (limit).
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``memory_unavailable`` (also when a hit belongs to another scope).
        """
        service, scope = self._memory(app, user)
        size = _page_limit(limit, 10)
        hits = _call("memory", service.search, scope, query, filter=filter, limit=size)
        if not isinstance(hits, list) or len(hits) > size:
            raise _unavailable("memory", "invalid_result")
        for hit in hits:
            if not isinstance(hit, MemoryHit):
                raise _unavailable("memory", "invalid_result")
            if hit.entry.scope != scope:
                raise _unavailable("memory", "scope_mismatch")
        return {"hits": [_hit_json(h) for h in hits]}

    def erase_memory(self, app: Any, user: Any, target: Any, identifier: Any, confirmation: Any) -> dict[str, Any]:
        """Erase one entry (``target="entry"``, its id), a session's entries (``"session"``, the session id) or the
        user's entries (``"user"``, the user id) after the exact :func:`memory_confirmation`: ``{"erased": n}``.

        Raises:
            ValidationError: a malformed argument; ``confirmation_required``/``confirmation_mismatch`` (nothing is
                erased).
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``memory_unavailable``.
        """
        a, u, _ = self._ids(app, user)
        if target not in MEMORY_TARGETS:
            raise ValidationError(
                "target is entry, session or user",
                reason="invalid_value",
                details={"key": "target", "allowed": list(MEMORY_TARGETS)},
            )
        if target == "entry":
            identifier = check_entry_id(identifier)
        elif target == "session":
            identifier = check_session_id(identifier)
        elif identifier != u:
            raise ValidationError(
                "erasing a user names that user as the identifier",
                reason="invalid_value",
                details={"key": "identifier"},
            )
        _confirm(confirmation, memory_confirmation(a, u, target, identifier))
        service, scope = self._memory(a, u)
        if target == "entry":
            erased: Any = _call("memory", service.delete_entry, scope, identifier)
            if not isinstance(erased, bool):
                raise _unavailable("memory", "invalid_result")
            erased = int(erased)
        elif target == "session":
            erased = _call("memory", service.erase_session, scope, identifier)
        else:
            erased = _call("memory", service.erase_user, scope)
        if isinstance(erased, bool) or not isinstance(erased, int) or erased < 0:
            raise _unavailable("memory", "invalid_result")
        return {"erased": erased, "target": target}

    # ---- context -----------------------------------------------------------------------------------------------

    def _session(self, app: Any, user: Any, session: Any) -> Any:
        a, u, s = self._ids(app, user, session)
        assert s is not None
        return self.sessions.get_session(SessionRef(app_name=a, user_id=u, session_id=s))

    def explain_context(self, app: Any, user: Any, session: Any) -> dict[str, Any]:
        """Bounded counts and the history fingerprint of one exact session, as the diagnostic policy selects its
        history for a new invocation; events and state are omitted (their counts only).

        Raises:
            ValidationError: a malformed id.
            SessionNotFound: ``not_found``.
        """
        found = self._session(app, user, session)
        events = list(found.events)
        try:
            _, stats = history_from_events(events, current_invocation_id="", policy=self.context_policy)
            history: dict[str, Any] = dict(stats)
        except BudgetExceeded as err:
            history = {"over_budget": err.reason}
        return {
            "app_name": found.app_name,
            "user_id": found.user_id,
            "session_id": found.id,
            "events_total": len(events),
            "state_keys": len(found.state),
            "last_update_time": found.last_update_time,
            "history": history,
            "policy": {"max_bytes": self.context_policy.max_bytes, "max_tokens": self.context_policy.max_tokens},
            "compaction": _latest_compaction(events),
        }

    def _cache(self, app: Any, user: Any, session: Any, model: Any) -> tuple[Any, str, str, str, str, str]:
        a, u, s = self._ids(app, user, session)
        assert s is not None
        model = check_id(model, "model", max_length=128)
        found = self._resolve("context_cache", a, u, s)
        try:
            from adk_actors.context.cache import scope_fingerprint
        except ImportError:
            raise _unavailable("context_cache", "not_configured") from None
        fingerprint = _call(
            "context_cache",
            scope_fingerprint,
            a,
            u,
            model,
            dict(found.cache_policy or {}),
            provider=found.cache_provider,
        )
        if not isinstance(fingerprint, str) or not _FINGERPRINT.fullmatch(fingerprint):
            raise _unavailable("context_cache", "invalid_result")
        return found.context_cache, fingerprint, a, u, s, model

    def _on(self, cache: Any) -> dict[str, Any]:
        """``system=`` for a :class:`~adk_actors.context.cache.ContextCache` handle (it asks a node's actor)."""
        from adk_actors.context.cache import ContextCache

        return {"system": self.system} if isinstance(cache, ContextCache) and self.system is not None else {}

    def context_lifecycle(self, app: Any, user: Any, session: Any, model: Any) -> dict[str, Any]:
        """The session's latest compaction checkpoint (whitelisted identifiers and counts) and the content-free
        counts of the cache scope (provider/app/user/model/policy) the session's requests share:
        ``{"app_name", "user_id", "session_id", "model", "compaction", "cache": {"scope_fingerprint", "counts"}}``.

        Raises:
            ValidationError: a malformed id or model.
            SessionNotFound: ``not_found`` (the anchor session must exist).
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``context_cache_unavailable``.
        """
        found = self._session(app, user, session)
        cache, fingerprint, a, u, s, model = self._cache(app, user, session, model)
        stats = _call("context_cache", cache.stats, scope_fingerprint=fingerprint, **self._on(cache))
        if not isinstance(stats, Mapping):
            raise _unavailable("context_cache", "invalid_result")
        counts = {
            k: v
            for k, v in stats.items()
            if isinstance(k, str) and _STAT_KEY.fullmatch(k) and not is_secret_key(k)
            and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        }  # fmt: skip
        counts = dict(sorted(counts.items())[:_MAX_STAT_KEYS])
        return {
            "app_name": a,
            "user_id": u,
            "session_id": s,
            "model": model,
            "compaction": _latest_compaction(list(found.events)),
            "cache": {"scope_fingerprint": fingerprint, "counts": counts},
        }

    def invalidate_cache(self, app: Any, user: Any, session: Any, model: Any, confirmation: Any) -> dict[str, Any]:
        """Invalidate every entry of the cache scope across sessions after the exact :func:`cache_confirmation`
        (whose ``scope_fingerprint`` is the one :meth:`context_lifecycle` shows): ``{"invalidated": n,
        "scope_fingerprint"}``.

        Raises:
            ValidationError: ``confirmation_required``/``confirmation_mismatch`` (nothing is invalidated).
            SessionNotFound: ``not_found``.
            PolicyDenied: ``resource_forbidden``.
            StorageError: ``context_cache_unavailable``.
        """
        self._session(app, user, session)
        cache, fingerprint, a, u, s, model = self._cache(app, user, session, model)
        _confirm(confirmation, cache_confirmation(a, u, s, model, fingerprint))
        count = _call("context_cache", cache.invalidate, fingerprint, **self._on(cache))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _unavailable("context_cache", "invalid_result")
        return {"invalidated": count, "scope_fingerprint": fingerprint}


# ---- projections -------------------------------------------------------------------------------------------------


def _checked_names(answer: Any, size: int, cursor: str | None) -> list[str]:
    if not isinstance(answer, tuple | list) or len(answer) != 2:
        raise _unavailable("artifact", "invalid_result")
    names, next_cursor = answer
    if not isinstance(names, list) or len(names) > size:
        raise _unavailable("artifact", "invalid_result")
    previous = cursor
    for name in names:
        try:
            check_artifact_name(name)
        except ValidationError:
            raise _unavailable("artifact", "invalid_result") from None
        if previous is not None and not name > previous:
            raise _unavailable("artifact", "invalid_result")
        previous = name
    if next_cursor is not None and (not names or next_cursor != names[-1]):
        raise _unavailable("artifact", "invalid_result")
    return list(names)


def _version_json(record: ArtifactVersion) -> dict[str, Any]:
    return {
        "version": record.version,
        "size": record.size,
        "digest": record.digest,
        "mime_type": record.mime_type,
        "created_at": record.created_at,
        "metadata": prune_secrets(dict(record.metadata)),
    }


def _hit_json(hit: MemoryHit) -> dict[str, Any]:
    entry = hit.entry
    content = entry.content
    return {
        "entry_id": entry.id,
        "rank": hit.rank,
        "score": hit.score,
        "content": scrub(content[:MAX_SNIPPET_CHARS]),
        "content_truncated": len(content) > MAX_SNIPPET_CHARS,
        "metadata": prune_secrets(dict(entry.metadata)),
        "session_id": entry.provenance.session_id,
        "author": entry.provenance.author,
        "created_at": entry.created_at,
    }


def _adapter_kind(service: Any) -> str:
    from adk_actors.memory import InMemoryMemoryService, SqlMemoryService

    if isinstance(service, SqlMemoryService):
        return "sql"
    if isinstance(service, InMemoryMemoryService):
        return "in_memory"
    return "custom"


def _latest_compaction(events: Sequence[Any]) -> dict[str, Any] | None:
    """The whitelisted fields of the newest compaction checkpoint among ``events``: counts and identifiers, never
    its summary, events or policy."""
    for event in reversed(events):
        actions = getattr(event, "actions", None)
        for effect in reversed(tuple(getattr(actions, "context_effects", ()) or ())):
            if isinstance(effect, Mapping) and effect.get("type") == "compaction":
                return _compaction_json(effect, getattr(event, "id", None))
    return None


def _compaction_json(effect: Mapping[str, Any], event_id: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("through_seq", "folded_events", "summary_bytes"):
        value = effect.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[key] = value
    fingerprint = effect.get("fingerprint")
    if isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint):
        out["fingerprint"] = fingerprint
    compressor = effect.get("compressor")
    if isinstance(compressor, Mapping):
        compressor = compressor.get("kind") or compressor.get("type")
    if isinstance(compressor, str) and _COMPRESSOR.fullmatch(compressor):
        out["compressor"] = compressor
    if isinstance(event_id, str) and len(event_id) <= 128:
        out["event_id"] = event_id
    return out
