"""The in-memory memory service: the contract in one process, for tests and single-node development."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from adk_actors.errors import ValidationError
from adk_actors.memory.base import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_ENTRIES,
    BaseMemoryService,
    MemoryEntry,
    MemoryHit,
    MemoryScope,
    MetadataValue,
    NewMemory,
    bm25_score,
    check_batch,
    check_entry_id,
    check_scope,
    check_search,
    check_session_id,
    encode_metadata_value,
    entry_not_found,
    hit_order,
    new_entry_id,
    plan_batch,
    scope_capacity_reached,
    tokenize,
)

__all__ = ["InMemoryMemoryService"]


@dataclass(slots=True)
class _Scope:
    """One scope's entries and its inverted index (the BM25 corpus is the scope)."""

    entries: dict[str, MemoryEntry] = field(default_factory=dict)
    by_key: dict[str, str] = field(default_factory=dict)
    terms: dict[str, Counter[str]] = field(default_factory=dict)
    """Entry id -> its term frequencies."""
    postings: dict[str, set[str]] = field(default_factory=dict)
    """Term -> ids of the entries holding it."""
    total_length: int = 0

    def put(self, entry: MemoryEntry) -> None:
        counts = Counter(tokenize(entry.content))
        self.entries[entry.id] = entry
        self.terms[entry.id] = counts
        self.total_length += sum(counts.values())
        for term in counts:
            self.postings.setdefault(term, set()).add(entry.id)
        if entry.idempotency_key is not None:
            self.by_key[entry.idempotency_key] = entry.id

    def remove(self, entry_id: str) -> None:
        entry = self.entries.pop(entry_id)
        counts = self.terms.pop(entry_id)
        self.total_length -= sum(counts.values())
        for term in counts:
            ids = self.postings[term]
            ids.discard(entry_id)
            if not ids:
                del self.postings[term]
        if entry.idempotency_key is not None:
            self.by_key.pop(entry.idempotency_key, None)


class InMemoryMemoryService(BaseMemoryService):
    """The memory contract in process memory, behind one lock (every call is atomic).

    Ranking: BM25 (:func:`~adk_actors.memory.base.bm25_score`, ``k1 = 1.2``, ``b = 0.75``) over the words of
    :func:`~adk_actors.memory.base.tokenize` (lowercased runs of letters and digits), with the searched scope as
    the corpus, so other scopes never influence a score. An entry matches when it holds at least one query word;
    ties go to the newer entry, then to the smaller id.

    Args:
        max_entries_per_scope: The bound on one scope's entries.
        clock: Wall-clock source in epoch seconds (``created_at``).
    """

    def __init__(
        self, *, max_entries_per_scope: int = DEFAULT_MAX_ENTRIES, clock: Callable[[], float] = time.time
    ) -> None:
        if isinstance(max_entries_per_scope, bool) or not isinstance(max_entries_per_scope, int):
            raise ValidationError("max_entries_per_scope must be an int", reason="invalid_value")
        if max_entries_per_scope < 1:
            raise ValidationError("max_entries_per_scope must be positive", reason="invalid_value")
        self._max = max_entries_per_scope
        self._clock = clock
        self._lock = threading.Lock()
        self._scopes: dict[MemoryScope, _Scope] = {}

    def __repr__(self) -> str:
        return f"InMemoryMemoryService(max_entries_per_scope={self._max})"

    @property
    def max_entries_per_scope(self) -> int:
        return self._max

    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        check_scope(scope)
        batch = check_batch(items)
        with self._lock:
            held = self._scopes.get(scope)

            def existing(key: str) -> MemoryEntry | None:
                entry_id = held.by_key.get(key) if held is not None else None
                return None if held is None or entry_id is None else held.entries[entry_id]

            slots, to_add = plan_batch(batch, existing)
            current = len(held.entries) if held is not None else 0
            if to_add and current + len(to_add) > self._max:
                raise scope_capacity_reached(self._max)
            now = self._clock()
            created = [
                MemoryEntry(
                    id=new_entry_id(),
                    scope=scope,
                    content=item.content,
                    metadata=dict(item.metadata),
                    provenance=item.provenance,
                    created_at=float(now),
                    idempotency_key=item.idempotency_key,
                )
                for item in to_add
            ]
            if created:
                target = self._scopes.setdefault(scope, _Scope())
                for entry in created:
                    target.put(entry)
        return [_copy(slot if isinstance(slot, MemoryEntry) else created[slot]) for slot in slots]

    def search(
        self,
        scope: MemoryScope,
        query: str,
        *,
        filter: Mapping[str, MetadataValue] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[MemoryHit]:
        terms, wanted, limit = check_search(scope, query, filter, limit)
        scored: list[tuple[float, MemoryEntry]] = []
        with self._lock:
            held = self._scopes.get(scope)
            if held is None or not terms:
                return []
            ordered = sorted(terms)  # a fixed summation order: equal data, equal float scores
            candidates: set[str] = set()
            for term in ordered:
                candidates |= held.postings.get(term, set())
            documents = len(held.entries)
            average = held.total_length / documents
            df = {term: len(held.postings.get(term, ())) for term in ordered}
            for entry_id in candidates:
                entry = held.entries[entry_id]
                if not _matches(entry.metadata, wanted):
                    continue
                counts = held.terms[entry_id]
                score = bm25_score(ordered, counts, sum(counts.values()), df, documents, average)
                scored.append((score, entry))
        scored.sort(key=lambda pair: hit_order(*pair))
        return [
            MemoryHit(entry=_copy(entry), score=score, rank=rank)
            for rank, (score, entry) in enumerate(scored[:limit], start=1)
        ]

    def get(self, scope: MemoryScope, entry_id: str) -> MemoryEntry:
        check_scope(scope)
        check_entry_id(entry_id)
        with self._lock:
            held = self._scopes.get(scope)
            entry = held.entries.get(entry_id) if held is not None else None
        if entry is None:
            raise entry_not_found(entry_id)
        return _copy(entry)

    def delete_entry(self, scope: MemoryScope, entry_id: str) -> bool:
        check_scope(scope)
        check_entry_id(entry_id)
        with self._lock:
            held = self._scopes.get(scope)
            if held is None or entry_id not in held.entries:
                return False
            held.remove(entry_id)
            self._drop_if_empty(scope, held)
            return True

    def erase_session(self, scope: MemoryScope, session_id: str) -> int:
        check_scope(scope)
        check_session_id(session_id)
        with self._lock:
            held = self._scopes.get(scope)
            if held is None:
                return 0
            doomed = [i for i, e in held.entries.items() if e.provenance.session_id == session_id]
            for entry_id in doomed:
                held.remove(entry_id)
            self._drop_if_empty(scope, held)
            return len(doomed)

    def erase_user(self, scope: MemoryScope) -> int:
        check_scope(scope)
        with self._lock:
            held = self._scopes.pop(scope, None)
        return 0 if held is None else len(held.entries)

    def count(self, scope: MemoryScope) -> int:
        check_scope(scope)
        with self._lock:
            held = self._scopes.get(scope)
            return 0 if held is None else len(held.entries)

    def _drop_if_empty(self, scope: MemoryScope, held: _Scope) -> None:
        if not held.entries:
            del self._scopes[scope]


def _matches(metadata: Mapping[str, MetadataValue], wanted: Mapping[str, MetadataValue]) -> bool:
    """Exact, typed equality on every filter key (``True``, ``1`` and ``1.0`` differ, as in SQL)."""
    for key, value in wanted.items():
        held = metadata.get(key)
        if held is None or encode_metadata_value(held) != encode_metadata_value(value):
            return False
    return True


def _copy(entry: MemoryEntry) -> MemoryEntry:
    """The entry with its own metadata dict (callers may edit what they get; the store never changes)."""
    return MemoryEntry(
        id=entry.id,
        scope=entry.scope,
        content=entry.content,
        metadata=dict(entry.metadata),
        provenance=entry.provenance,
        created_at=entry.created_at,
        idempotency_key=entry.idempotency_key,
    )
