"""The memory contract: values, validation, the service interface and the in-memory ranking.

Every call names an exact :class:`MemoryScope` (an app and a user): an entry is visible, searchable and erasable
only through the scope it was added under, and another scope's entry id behaves exactly like an unknown one.
Inputs are validated here, once, for every adapter (:class:`NewMemory` checks itself on construction), and every
input is bounded (the ``MAX_*`` constants). Errors are structural: they name the field and the limit, never the
content, a metadata value or a query.

Ranking is lexical, never semantic: the adapters rank by word overlap (BM25 in memory and on SQLite FTS5,
``ts_rank`` on PostgreSQL) and none of them pretends to be a vector store. Each adapter's order is deterministic
and documented on its class; ties always fall to the newer entry (``created_at`` descending), then to the entry
id (ascending).

Metadata is a flat dict of at most :data:`MAX_METADATA_KEYS` keys whose values are ``str``, ``int``, ``float`` or
``bool``. Search filters compare exactly, type included: ``True``, ``1`` and ``1.0`` are three different values.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from adk_actors.errors import StorageError, ValidationError
from adk_actors.sessions.model import validate_name

__all__ = [
    "BM25_B",
    "BM25_K1",
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_ENTRIES",
    "MAX_BATCH_ENTRIES",
    "MAX_CONTENT_BYTES",
    "MAX_LIMIT",
    "MAX_METADATA_KEYS",
    "MAX_METADATA_KEY_CHARS",
    "MAX_METADATA_VALUE_CHARS",
    "MAX_QUERY_BYTES",
    "BaseMemoryService",
    "MemoryEntry",
    "MemoryHit",
    "MemoryProvenance",
    "MemoryScope",
    "MetadataValue",
    "NewMemory",
    "bm25_score",
    "check_batch",
    "check_entry_id",
    "check_filter",
    "check_limit",
    "check_metadata",
    "check_scope",
    "check_search",
    "check_session_id",
    "encode_metadata_value",
    "entry_not_found",
    "hit_order",
    "idempotency_conflict",
    "is_entry_id",
    "metadata_from_json",
    "metadata_to_json",
    "new_entry_id",
    "plan_batch",
    "query_terms",
    "scope_capacity_reached",
    "tokenize",
]

MetadataValue: TypeAlias = str | int | float | bool
"""A metadata value: ``str`` (at most :data:`MAX_METADATA_VALUE_CHARS`), 64-bit ``int``, finite ``float``, ``bool``."""

MAX_CONTENT_BYTES: Final = 64 * 1024
"""Bound on an entry's content, in UTF-8 bytes."""
MAX_METADATA_KEYS: Final = 32
"""Bound on the keys of an entry's metadata (and of a search filter)."""
MAX_METADATA_KEY_CHARS: Final = 64
"""Bound on one metadata key."""
MAX_METADATA_VALUE_CHARS: Final = 256
"""Bound on one string metadata value (256 characters stay under 1 KiB of UTF-8, so they fit any index)."""
MAX_QUERY_BYTES: Final = 1024
"""Bound on a search query, in UTF-8 bytes."""
MAX_LIMIT: Final = 100
"""The most hits one search returns."""
DEFAULT_LIMIT: Final = 10
"""Hits per search unless the caller says otherwise."""
MAX_BATCH_ENTRIES: Final = 1000
"""Bound on the entries of one :meth:`BaseMemoryService.add_batch`."""
DEFAULT_MAX_ENTRIES: Final = 100_000
"""Default bound on the entries of one scope."""
BM25_K1: Final = 1.2
"""BM25 term-frequency saturation (the value SQLite's ``bm25()`` uses too)."""
BM25_B: Final = 0.75
"""BM25 length normalization (the value SQLite's ``bm25()`` uses too)."""

_INT_LIMIT: Final = 1 << 63
_ENTRY_ID_RE: Final = re.compile(r"mem_[0-9a-f]{32}")
_MAX_ENTRY_ID_CHARS: Final = 64
# Runs of letters and digits: "_" separates words, as it does for SQLite's unicode61 and PostgreSQL's parser.
_WORD_RE: Final = re.compile(r"[^\W_]+")
# NUL (PostgreSQL text refuses it) and lone surrogates (not encodable as UTF-8): no store could keep them.
_UNSTORABLE: Final = re.compile(r"[\x00\ud800-\udfff]")
_KEY_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


# -- values ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """The exact owner of memory entries: one user of one app.

    Both names follow the sessions' rules (non-empty, at most 255 characters, no control characters).

    Raises:
        ValidationError: reason ``invalid_name``.
    """

    app: str
    """The application name."""
    user: str
    """The user id within the application."""

    def __post_init__(self) -> None:
        validate_name(self.app, "app")
        validate_name(self.user, "user")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProvenance:
    """Where an entry came from; every field is optional and follows the sessions' name rules.

    Raises:
        ValidationError: reason ``invalid_name``.
    """

    session_id: str | None = None
    """The session the entry was taken from (what :meth:`BaseMemoryService.erase_session` matches)."""
    event_id: str | None = None
    """The event the entry was taken from."""
    author: str | None = None
    """Who wrote that event (``"user"`` or an agent name)."""

    def __post_init__(self) -> None:
        for name in ("session_id", "event_id", "author"):
            value = getattr(self, name)
            if value is not None:
                validate_name(value, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One stored memory (immutable: entries are added and erased, never edited)."""

    id: str
    """Server-generated: ``"mem_"`` and 32 hex digits."""
    scope: MemoryScope
    """The exact scope it belongs to."""
    content: str
    """The remembered text."""
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict, hash=False)
    """Flat metadata, keys sorted (a copy: editing it changes nothing stored)."""
    provenance: MemoryProvenance = field(default_factory=MemoryProvenance)
    """Where the entry came from."""
    created_at: float
    """Epoch seconds, from the service's clock."""
    idempotency_key: str | None = None
    """The key it was added with, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHit:
    """One search result."""

    entry: MemoryEntry
    """The entry found."""
    score: float
    """The adapter's relevance score: higher is better; comparable only within one adapter and one search."""
    rank: int
    """1-based position in the result list."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMemory:
    """An entry to add (validated and normalized on construction).

    Raises:
        ValidationError: ``invalid_content`` (not a str, blank, NUL or a lone surrogate), ``limit_exceeded``
            (content over :data:`MAX_CONTENT_BYTES`), ``invalid_metadata``, ``invalid_name`` (provenance or
            idempotency key).
    """

    content: str
    """The text to remember."""
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict, hash=False)
    """Flat metadata (see :data:`MetadataValue`)."""
    provenance: MemoryProvenance = field(default_factory=MemoryProvenance)
    """Where the text came from (a mapping with the same keys is accepted)."""
    idempotency_key: str | None = None
    """Adding again under the same scope and key returns the first entry instead of a duplicate."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _check_content(self.content))
        object.__setattr__(self, "metadata", check_metadata(self.metadata))
        object.__setattr__(self, "provenance", _check_provenance(self.provenance))
        if self.idempotency_key is not None:
            validate_name(self.idempotency_key, "idempotency_key")

    def same_as(self, other: MemoryEntry | NewMemory) -> bool:
        """Whether ``other`` holds this content and metadata (what an idempotent repeat must match)."""
        return other.content == self.content and metadata_to_json(other.metadata) == metadata_to_json(self.metadata)


# -- validation ------------------------------------------------------------------------------------------------


def check_scope(scope: Any) -> MemoryScope:
    """Raises: ValidationError ``invalid_scope`` unless ``scope`` is a :class:`MemoryScope`."""
    if not isinstance(scope, MemoryScope):
        raise ValidationError(
            "scope must be a MemoryScope", reason="invalid_scope", details={"type": type(scope).__name__}
        )
    return scope


def _check_content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip() or _UNSTORABLE.search(content):
        raise ValidationError(
            "content must be a non-blank str without NUL or lone surrogates",
            reason="invalid_content",
            details={"field": "content", "type": type(content).__name__},
        )
    if len(content) > MAX_CONTENT_BYTES // 4 and len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
        raise ValidationError(
            "content is too large",
            reason="limit_exceeded",
            details={"field": "content", "max_bytes": MAX_CONTENT_BYTES},
        )
    return content


def _check_provenance(provenance: Any) -> MemoryProvenance:
    if isinstance(provenance, MemoryProvenance):
        return provenance
    if provenance is None:
        return MemoryProvenance()
    if isinstance(provenance, Mapping):
        fields = {"session_id", "event_id", "author"}
        if not all(isinstance(k, str) and k in fields for k in provenance):
            raise ValidationError(
                "provenance keys are session_id, event_id and author",
                reason="invalid_value",
                details={"field": "provenance", "allowed": sorted(fields)},
            )
        return MemoryProvenance(**provenance)
    raise ValidationError(
        "provenance must be a MemoryProvenance or a mapping",
        reason="invalid_value",
        details={"field": "provenance", "type": type(provenance).__name__},
    )


def _bad_metadata(what: str, problem: str, **details: Any) -> ValidationError:
    return ValidationError(
        f"{what}: {problem}", reason="invalid_metadata", details={"field": what, "problem": problem, **details}
    )


def check_metadata(metadata: Any, *, what: str = "metadata") -> dict[str, MetadataValue]:
    """Validate flat metadata (or a search filter); returns a copy with its keys sorted and ``-0.0`` as ``0.0``.

    Raises:
        ValidationError: reason ``invalid_metadata`` (details name the problem, never a key or value).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise _bad_metadata(what, "not_a_mapping", type=type(metadata).__name__)
    if len(metadata) > MAX_METADATA_KEYS:
        raise _bad_metadata(what, "too_many_keys", max_keys=MAX_METADATA_KEYS)
    out: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if (
            not isinstance(key, str)
            or not key
            or len(key) > MAX_METADATA_KEY_CHARS
            or _KEY_CONTROL.search(key) is not None
        ):
            raise _bad_metadata(what, "invalid_key", max_chars=MAX_METADATA_KEY_CHARS)
        out[key] = _check_value(value, what)
    return dict(sorted(out.items()))


def _check_value(value: Any, what: str) -> MetadataValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT_LIMIT <= value < _INT_LIMIT:
            raise _bad_metadata(what, "int_out_of_range")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _bad_metadata(what, "float_not_finite")
        return float(value) + 0.0  # -0.0 == 0.0, so both must encode alike
    if isinstance(value, str):
        if len(value) > MAX_METADATA_VALUE_CHARS or _UNSTORABLE.search(value):
            raise _bad_metadata(what, "invalid_string", max_chars=MAX_METADATA_VALUE_CHARS)
        return str(value)
    raise _bad_metadata(what, "invalid_type", type=type(value).__name__)


def check_filter(filter: Any) -> dict[str, MetadataValue]:
    """Validate a search filter (metadata rules); returns it normalized.

    Raises:
        ValidationError: reason ``invalid_metadata`` with ``details.field == "filter"``.
    """
    return check_metadata(filter, what="filter")


def check_limit(limit: Any) -> int:
    """Raises: ValidationError ``invalid_limit`` unless ``limit`` is an int in 1..:data:`MAX_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(
            f"limit must be an int from 1 to {MAX_LIMIT}", reason="invalid_limit", details={"max": MAX_LIMIT}
        )
    return int(limit)


def check_entry_id(entry_id: Any) -> str:
    """Raises: ValidationError ``invalid_value`` for a non-str, empty or overlong id, or one with control
    characters or lone surrogates (any other str is a possible id; one not shaped like ours is simply unknown)."""
    if (
        not isinstance(entry_id, str)
        or not entry_id
        or len(entry_id) > _MAX_ENTRY_ID_CHARS
        or _KEY_CONTROL.search(entry_id) is not None
    ):
        raise ValidationError(
            "entry_id must be a str of 1-64 printable characters",
            reason="invalid_value",
            details={"field": "entry_id", "type": type(entry_id).__name__},
        )
    return entry_id


def check_search(
    scope: Any, query: Any, filter: Any, limit: Any
) -> tuple[tuple[str, ...], dict[str, MetadataValue], int]:
    """Validate a search's arguments, in the contract's order: ``(terms, filter, limit)`` (every adapter's ``search``).

    Raises:
        ValidationError: as :func:`check_scope`, :func:`query_terms`, :func:`check_filter`, :func:`check_limit`.
    """
    check_scope(scope)
    terms = query_terms(query)
    return terms, check_filter(filter), check_limit(limit)


def check_session_id(session_id: Any) -> str:
    """Raises: ValidationError ``invalid_name`` (the sessions' rule for session ids)."""
    return validate_name(session_id, "session_id")


def tokenize(text: str) -> list[str]:
    """The words of ``text``: lowercased runs of Unicode letters and digits (``_`` and punctuation separate)."""
    return _WORD_RE.findall(text.lower())


def query_terms(query: Any) -> tuple[str, ...]:
    """The distinct words of a search query, in first-seen order (possibly none, e.g. for ``"*?!"``).

    Every character of the query is text: FTS or ``tsquery`` syntax (``"``, ``*``, ``NEAR``, ``-``, ``:``,
    ``&``, ``|``) never reaches a query parser, because the adapters only ever search for these words.

    Raises:
        ValidationError: reason ``invalid_query`` (not a str, blank, over :data:`MAX_QUERY_BYTES`).
    """
    if not isinstance(query, str) or not query.strip():
        raise ValidationError(
            "query must be a non-blank str",
            reason="invalid_query",
            details={"problem": "empty" if isinstance(query, str) else "type"},
        )
    if len(query) > MAX_QUERY_BYTES // 4 and len(query.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise ValidationError(
            "query is too large", reason="invalid_query", details={"problem": "too_large", "max_bytes": MAX_QUERY_BYTES}
        )
    return tuple(dict.fromkeys(tokenize(query)))


# -- encodings -------------------------------------------------------------------------------------------------


def encode_metadata_value(value: MetadataValue) -> str:
    """A typed text form for exact matching in SQL: ``s:text``, ``i:12``, ``f:1.5``, ``b:true``."""
    if isinstance(value, bool):
        return "b:true" if value else "b:false"
    if isinstance(value, int):
        return f"i:{value}"
    if isinstance(value, float):
        return f"f:{value!r}"
    return f"s:{value}"


def metadata_to_json(metadata: Mapping[str, MetadataValue]) -> str:
    """Canonical JSON of validated metadata (sorted keys; JSON keeps int, float and bool apart)."""
    return json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def metadata_from_json(text: str) -> dict[str, MetadataValue]:
    """The inverse of :func:`metadata_to_json`."""
    value = json.loads(text)
    return dict(value) if isinstance(value, dict) else {}


def new_entry_id() -> str:
    """A fresh entry id: ``"mem_"`` and 128 random bits in hex."""
    return "mem_" + secrets.token_hex(16)


def is_entry_id(value: str) -> bool:
    """Whether ``value`` has the shape of an entry id (only such ids are worth a lookup)."""
    return _ENTRY_ID_RE.fullmatch(value) is not None


# -- errors ----------------------------------------------------------------------------------------------------


def entry_not_found(entry_id: str) -> StorageError:
    """The one error for an unknown id and for another scope's id (so ids reveal nothing across scopes)."""
    details = {"entry_id": entry_id} if is_entry_id(entry_id) else {}
    return StorageError("no such memory entry", reason="memory_entry_not_found", details=details)


def scope_capacity_reached(limit: int) -> StorageError:
    """The error of an add that would take a scope past its entry bound."""
    return StorageError(
        "the memory scope is full", reason="memory_scope_capacity_reached", details={"max_entries": limit}
    )


def idempotency_conflict() -> ValidationError:
    """The error of an idempotent repeat whose content or metadata differ from the first entry's."""
    return ValidationError(
        "the idempotency key was used for different content or metadata", reason="idempotency_conflict"
    )


# -- ranking ---------------------------------------------------------------------------------------------------


def bm25_score(
    terms: Sequence[str],
    frequencies: Mapping[str, int],
    length: int,
    document_frequency: Mapping[str, int],
    documents: int,
    average_length: float,
) -> float:
    """BM25 of one document for distinct query ``terms`` (higher is better), summed in ``terms`` order.

    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative), ``k1 =`` :data:`BM25_K1`,
    ``b =`` :data:`BM25_B`; the corpus is the one scope being searched.
    """
    score = 0.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average_length) if average_length > 0 else BM25_K1
    for term in terms:
        tf = frequencies.get(term, 0)
        if tf:
            df = document_frequency.get(term, 0)
            idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
            score += idf * tf * (BM25_K1 + 1) / (tf + norm)
    return score


def hit_order(score: float, entry: MemoryEntry) -> tuple[float, float, str]:
    """The sort key of every adapter: score descending, then ``created_at`` descending, then id ascending."""
    return (-score, -entry.created_at, entry.id)


# -- the interface ---------------------------------------------------------------------------------------------


class BaseMemoryService(ABC):
    """The memory contract every adapter implements (synchronous; each call is atomic on its adapter).

    All calls take an exact :class:`MemoryScope`; nothing crosses scopes. ``add`` and ``add_batch`` are
    idempotent per (scope, idempotency key).
    """

    @property
    @abstractmethod
    def max_entries_per_scope(self) -> int:
        """The bound on one scope's entries."""

    def add(
        self,
        scope: MemoryScope,
        content: str,
        *,
        metadata: Mapping[str, MetadataValue] | None = None,
        provenance: MemoryProvenance | Mapping[str, str | None] | None = None,
        idempotency_key: str | None = None,
    ) -> MemoryEntry:
        """Remember ``content`` in ``scope``; with a key already used in the scope, return that entry instead.

        Raises:
            ValidationError: a bad scope or input (see :class:`NewMemory`); ``idempotency_conflict`` when the key
                was used for different content or metadata (the first entry's provenance is kept).
            StorageError: ``memory_scope_capacity_reached``, or the store failed.
        """
        item = NewMemory(
            content=content,
            metadata=metadata or {},
            provenance=_check_provenance(provenance),
            idempotency_key=idempotency_key,
        )
        return self.add_batch(scope, [item])[0]

    @abstractmethod
    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        """Add up to :data:`MAX_BATCH_ENTRIES` entries atomically (all or none); one result per item, in order.

        Items whose key was already used (in the scope or earlier in the batch) return that entry.

        Raises:
            ValidationError: ``invalid_batch`` (not a sequence of :class:`NewMemory`, or too long),
                ``idempotency_conflict``.
            StorageError: ``memory_scope_capacity_reached`` (nothing is added), or the store failed.
        """

    @abstractmethod
    def search(
        self,
        scope: MemoryScope,
        query: str,
        *,
        filter: Mapping[str, MetadataValue] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[MemoryHit]:
        """The scope's best entries for ``query`` whose metadata has every ``filter`` pair (exact, typed).

        Raises:
            ValidationError: ``invalid_query``, ``invalid_metadata`` (the filter), ``invalid_limit``.
            StorageError: the store failed.
        """

    @abstractmethod
    def get(self, scope: MemoryScope, entry_id: str) -> MemoryEntry:
        """One entry of the scope.

        Raises:
            StorageError: ``memory_entry_not_found`` (also for another scope's id), or the store failed.
        """

    @abstractmethod
    def delete_entry(self, scope: MemoryScope, entry_id: str) -> bool:
        """Erase one entry of the scope; False when the scope has no such entry."""

    @abstractmethod
    def erase_session(self, scope: MemoryScope, session_id: str) -> int:
        """Erase the scope's entries whose provenance names ``session_id``; returns how many."""

    @abstractmethod
    def erase_user(self, scope: MemoryScope) -> int:
        """Erase every entry of the scope; returns how many."""

    @abstractmethod
    def count(self, scope: MemoryScope) -> int:
        """How many entries the scope holds."""

    def close(self) -> None:  # noqa: B027 - optional hook: adapters without resources keep the default
        """Release the adapter's resources (the SQL adapter's engine); the next call reopens them."""


def check_batch(items: Any) -> list[NewMemory]:
    """Raises: ValidationError ``invalid_batch`` unless ``items`` is a sequence of 1..:data:`MAX_BATCH_ENTRIES`
    :class:`NewMemory`."""
    if (
        not isinstance(items, Sequence)
        or isinstance(items, str | bytes)
        or not 1 <= len(items) <= MAX_BATCH_ENTRIES
        or not all(isinstance(i, NewMemory) for i in items)
    ):
        raise ValidationError(
            f"a batch is a sequence of 1 to {MAX_BATCH_ENTRIES} NewMemory",
            reason="invalid_batch",
            details={"max_entries": MAX_BATCH_ENTRIES},
        )
    return list(items)


def plan_batch(
    items: Iterable[NewMemory], existing: Callable[[str], MemoryEntry | None]
) -> tuple[list[MemoryEntry | int], list[NewMemory]]:
    """Resolve a batch's idempotent repeats before anything is written.

    ``existing(key)`` looks a key up in the store. Returns ``(slots, to_add)``: each slot is the stored entry of
    a used key or the index in ``to_add`` of the item that creates the result (a key repeated inside the batch
    points at its first item).

    Raises:
        ValidationError: ``idempotency_conflict`` (a repeat whose content or metadata differ).
    """
    slots: list[MemoryEntry | int] = []
    to_add: list[NewMemory] = []
    first: dict[str, MemoryEntry | int] = {}
    for item in items:
        key = item.idempotency_key
        if key is not None:
            seen = first.get(key)
            if seen is None:
                seen = existing(key)
            if seen is not None:
                stored = seen if isinstance(seen, MemoryEntry) else to_add[seen]
                if not item.same_as(stored):
                    raise idempotency_conflict()
                slots.append(seen)
                continue
            first[key] = len(to_add)
        slots.append(len(to_add))
        to_add.append(item)
    return slots, to_add
