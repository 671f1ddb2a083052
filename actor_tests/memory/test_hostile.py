"""Hostile input against every adapter: odd Unicode, NUL, surrogates, FTS and tsquery syntax, huge numbers.

Whatever comes in, a call either works or raises our ``ValidationError``; what was stored reads back unchanged;
query syntax is searched for as text.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from adk_actors.errors import StorageError, ValidationError
from adk_actors.memory import BaseMemoryService, MemoryScope
from adk_actors.memory.base import query_terms

FRAGMENTS = [
    '"',
    "'",
    "*",
    "NEAR(",
    ")",
    "NEAR/3",
    "-",
    ":",
    "^",
    "{content}:",
    "AND",
    "OR",
    "NOT",
    "&",
    "|",
    "!",
    "<->",
    "<2>",
    ":*",
    "\\",
    "%",
    "_",
    "; DROP TABLE adk_memory_entries; --",
    "\x00",
    "\ud800",
    "\udfff",
    "\u202e",
    "\u200b",
    "\ufeff",
    "İ",
    "ß",
    "ǅ",
    "\u0301",
    "🙂",
    "\n",
    "\t",
    " ",
    "x" * 300,
]
HOSTILE = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=8).map("".join)
NAMES = st.one_of(HOSTILE, st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=255))
MARKER = "zebracorn"
HOSTILE_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

values = st.one_of(
    HOSTILE,
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.binary(max_size=4),
)
plausible_values = st.one_of(
    HOSTILE.filter(lambda v: "\x00" not in v and not any("\ud800" <= c <= "\udfff" for c in v)).map(lambda v: v[:256]),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
plausible_keys = st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=64)
metadata = st.one_of(
    st.none(),
    st.dictionaries(plausible_keys, plausible_values, max_size=6),  # mostly valid: stored and filtered on
    st.dictionaries(st.one_of(HOSTILE, st.integers()), values, max_size=4),  # mostly refused
    st.sampled_from([[("k", 1)], "k=1", 7]),
)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


@HOSTILE_SETTINGS
@given(before=HOSTILE, after=HOSTILE, meta=metadata, key=st.one_of(st.none(), HOSTILE))
def test_hostile_content_and_metadata_are_stored_exactly_or_refused(
    service: BaseMemoryService, before: str, after: str, meta: Any, key: Any
) -> None:
    scope = MemoryScope("hostile", "u1")
    content = f"{before} {MARKER} {after}"
    try:
        entry = service.add(scope, content, metadata=meta, idempotency_key=key)
    except ValidationError as exc:
        event(f"refused: {exc.reason}")
        return
    event("stored")
    got = service.get(scope, entry.id)
    assert got.content == content
    assert set(got.metadata) == set(meta or {})
    assert all(_same_value(got.metadata[k], (meta or {})[k]) for k in got.metadata)
    found = service.search(scope, MARKER, filter=meta or None, limit=100)
    assert entry.id in {h.entry.id for h in found}
    assert service.delete_entry(scope, entry.id)


@HOSTILE_SETTINGS
@given(
    query=HOSTILE,
    extra=st.booleans(),
    flt=st.one_of(st.none(), st.just({"k": 1}), metadata),
    limit=st.one_of(st.none(), st.integers(1, 100), st.integers(-5, 150)),
)
@example(query="¼NEAR(", extra=False, flt=None, limit=None)  # PostgreSQL's parser once cut "¼near" to "near"
def test_hostile_queries_are_text_never_syntax(
    service: BaseMemoryService, query: str, extra: bool, flt: Any, limit: Any
) -> None:
    scope = MemoryScope("hostile", "u2")
    if service.count(scope) == 0:
        service.add(scope, f"{MARKER} near and or not content", metadata={"k": 1})
        service.add(scope, "another entry without the word")
    text = f"{query} {MARKER}" if extra else query
    try:
        hits = service.search(scope, text, filter=flt, limit=10 if limit is None else limit)
    except ValidationError as exc:
        event(f"refused: {exc.reason}")
        return
    event("searched")
    assert len(hits) <= 10 if limit is None else len(hits) <= limit
    words = set(query_terms(text))
    contents = {h.entry.content for h in hits}
    if MARKER in words and not flt:
        assert f"{MARKER} near and or not content" in contents
    if not words & {MARKER, "near", "and", "or", "not", "content", "another", "entry", "without", "the", "word"}:
        assert hits == []


@HOSTILE_SETTINGS
@given(app=NAMES, user=NAMES, session=NAMES, entry_id=st.one_of(HOSTILE, st.just("mem_" + "0" * 32)))
def test_hostile_names_and_ids_are_refused_or_kept_apart(
    service: BaseMemoryService, app: str, user: str, session: str, entry_id: str
) -> None:
    try:
        scope = MemoryScope(app, user)
    except ValidationError:
        event("scope refused")
        return
    for call in (
        lambda: service.get(scope, entry_id),
        lambda: service.delete_entry(scope, entry_id),
        lambda: service.erase_session(scope, session),
    ):
        try:
            result = call()
        except ValidationError:
            continue
        except StorageError as exc:  # get of an unknown id
            assert exc.reason == "memory_entry_not_found"
            continue
        assert result in (False, 0)
    try:
        entry = service.add(scope, f"{MARKER} owned", provenance={"session_id": session})
    except ValidationError:
        event("session id refused")
        return
    event("stored")
    assert service.get(scope, entry.id) == entry
    assert service.search(MemoryScope("another-app", user), MARKER) == []
    assert service.erase_session(scope, session) == 1
