"""The memory contract, run unchanged against every adapter (in memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from actor_tests.memory.conftest import MakeService, ManualClock
from adk_actors.errors import StorageError, ValidationError
from adk_actors.memory import (
    MAX_BATCH_ENTRIES,
    MAX_CONTENT_BYTES,
    MAX_LIMIT,
    MAX_METADATA_KEYS,
    MAX_QUERY_BYTES,
    BaseMemoryService,
    MemoryEntry,
    MemoryProvenance,
    MemoryScope,
    NewMemory,
)

SCOPE = MemoryScope("crm", "u1")
OTHER_USER = MemoryScope("crm", "u2")
OTHER_APP = MemoryScope("billing", "u1")
SECRET = "zq-private-content-7c1e"


def _ids(hits: list[Any]) -> list[str]:
    return [h.entry.id for h in hits]


def _run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads released together; returns results or raised errors, in order."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return results


# -- add and get -----------------------------------------------------------------------------------------------


def test_add_returns_a_server_made_entry_that_get_returns_unchanged(
    service: BaseMemoryService, clock: ManualClock
) -> None:
    metadata: dict[str, Any] = {"topic": "otp", "n": 3, "weight": 0.5, "pinned": True, "zero": -0.0}
    entry = service.add(
        SCOPE,
        "OTP supervision trees restart failed children",
        metadata=metadata,
        provenance={"session_id": "s1", "event_id": "e1", "author": "user"},
        idempotency_key="s1:e1",
    )
    assert entry.id.startswith("mem_") and len(entry.id) == 36 and int(entry.id[4:], 16) >= 0
    assert entry.scope == SCOPE and entry.created_at == clock.now and entry.idempotency_key == "s1:e1"
    assert entry.provenance == MemoryProvenance(session_id="s1", event_id="e1", author="user")
    assert entry.metadata == {"n": 3, "pinned": True, "topic": "otp", "weight": 0.5, "zero": 0.0}
    assert list(entry.metadata) == sorted(entry.metadata)
    got = service.get(SCOPE, entry.id)
    assert got == entry
    # Types survive the store: bool stays bool, int stays int, float stays float.
    assert [type(got.metadata[k]) for k in ("n", "pinned", "weight", "zero")] == [int, bool, float, float]
    got.metadata["topic"] = "edited"  # type: ignore[index]
    assert service.get(SCOPE, entry.id).metadata["topic"] == "otp"
    assert service.count(SCOPE) == 1


def test_every_add_gets_a_new_id_and_entries_without_provenance_are_allowed(service: BaseMemoryService) -> None:
    a = service.add(SCOPE, "same text")
    b = service.add(SCOPE, "same text")
    assert a.id != b.id and a.provenance == MemoryProvenance() and a.metadata == {}
    assert service.count(SCOPE) == 2


# -- idempotency -----------------------------------------------------------------------------------------------


def test_an_idempotent_repeat_returns_the_first_entry_and_keeps_its_provenance(service: BaseMemoryService) -> None:
    first = service.add(SCOPE, "fact", metadata={"k": 1}, provenance={"session_id": "s1"}, idempotency_key="key")
    again = service.add(SCOPE, "fact", metadata={"k": 1}, provenance={"session_id": "s9"}, idempotency_key="key")
    assert again == first and service.count(SCOPE) == 1


@pytest.mark.parametrize(
    "content, metadata",
    [("other fact", {"k": 1}), ("fact", {"k": 2}), ("fact", {"k": 1.0}), ("fact", {"k": True}), ("fact", {})],
    ids=["content", "value", "int-vs-float", "int-vs-bool", "missing-key"],
)
def test_an_idempotency_key_reused_for_different_data_is_refused(
    service: BaseMemoryService, content: str, metadata: dict[str, Any]
) -> None:
    service.add(SCOPE, "fact", metadata={"k": 1}, idempotency_key="key")
    with pytest.raises(ValidationError) as info:
        service.add(SCOPE, content, metadata=metadata, idempotency_key="key")
    assert info.value.reason == "idempotency_conflict"
    assert "fact" not in str(info.value) and "key" not in str(info.value.details)
    assert service.count(SCOPE) == 1


def test_idempotency_keys_belong_to_their_scope(service: BaseMemoryService) -> None:
    a = service.add(SCOPE, "fact", idempotency_key="key")
    b = service.add(OTHER_USER, "different fact", idempotency_key="key")
    c = service.add(OTHER_APP, "fact", idempotency_key="key")
    assert len({a.id, b.id, c.id}) == 3
    assert [service.count(s) for s in (SCOPE, OTHER_USER, OTHER_APP)] == [1, 1, 1]


def test_a_batch_is_atomic_and_resolves_repeats_inside_it_and_in_the_store(service: BaseMemoryService) -> None:
    stored = service.add(SCOPE, "stored fact", idempotency_key="k0")
    out = service.add_batch(
        SCOPE,
        [
            NewMemory(content="stored fact", idempotency_key="k0"),
            NewMemory(content="new fact", idempotency_key="k1"),
            NewMemory(content="new fact", idempotency_key="k1"),
            NewMemory(content="no key"),
        ],
    )
    assert out[0] == stored and out[1] == out[2] and out[1].id != stored.id and out[3].idempotency_key is None
    assert service.count(SCOPE) == 3
    with pytest.raises(ValidationError) as info:
        service.add_batch(
            SCOPE,
            [
                NewMemory(content="fresh"),
                NewMemory(content="x", idempotency_key="k2"),
                NewMemory(content="y", idempotency_key="k2"),
            ],
        )
    assert info.value.reason == "idempotency_conflict"
    assert service.count(SCOPE) == 3  # nothing of the refused batch was kept
    assert service.search(SCOPE, "fresh") == []
    for bad in ([], [{"content": "dict"}], "text", [NewMemory(content="x")] * (MAX_BATCH_ENTRIES + 1)):
        with pytest.raises(ValidationError) as info:
            service.add_batch(SCOPE, bad)  # type: ignore[arg-type]
        assert info.value.reason == "invalid_batch"


def test_concurrent_adds_of_one_key_make_one_entry(service: BaseMemoryService) -> None:
    service.add(SCOPE, "an existing entry")  # the scope exists: its first creation is not what serializes adds
    results = _run_threads(8, lambda i: service.add(SCOPE, "raced fact", metadata={"t": "x"}, idempotency_key="race"))
    assert all(isinstance(r, MemoryEntry) for r in results), results
    assert len({r.id for r in results}) == 1
    assert service.count(SCOPE) == 2
    assert len(service.search(SCOPE, "raced")) == 1


def test_concurrent_adds_of_one_key_with_different_content_keep_exactly_one(service: BaseMemoryService) -> None:
    service.add(SCOPE, "an existing entry")
    results = _run_threads(8, lambda i: service.add(SCOPE, f"version {i}", idempotency_key="race"))
    winners = [r for r in results if isinstance(r, MemoryEntry)]
    losers = [r for r in results if not isinstance(r, MemoryEntry)]
    assert len(winners) == 1 and len(losers) == 7, results
    assert all(isinstance(e, ValidationError) and e.reason == "idempotency_conflict" for e in losers)
    assert service.count(SCOPE) == 2
    assert service.get(SCOPE, winners[0].id).content == winners[0].content


def test_concurrent_adds_across_scopes_and_keys_all_land(service: BaseMemoryService) -> None:
    scopes = [MemoryScope("crm", f"user-{i % 4}") for i in range(8)]
    results = _run_threads(8, lambda i: [service.add(scopes[i], f"note {i} {n}") for n in range(5)])
    assert all(isinstance(r, list) for r in results), results
    assert sum(service.count(MemoryScope("crm", f"user-{u}")) for u in range(4)) == 40


# -- search ----------------------------------------------------------------------------------------------------


def test_search_finds_entries_sharing_a_word_and_ranks_them(service: BaseMemoryService, clock: ManualClock) -> None:
    both = service.add(SCOPE, "supervision trees restart failed children")
    clock.advance()
    one = service.add(SCOPE, "the server restart happened at noon")
    clock.advance()
    service.add(SCOPE, "unrelated note about lunch")
    hits = service.search(SCOPE, "Supervision RESTART")
    assert _ids(hits) == [both.id, one.id]
    assert [h.rank for h in hits] == [1, 2]
    assert hits[0].score > hits[1].score > 0
    assert service.search(SCOPE, "nothing matches this") == []


def test_search_honours_the_limit(service: BaseMemoryService, clock: ManualClock) -> None:
    for i in range(12):
        service.add(SCOPE, f"common word {i}")
        clock.advance()
    assert len(service.search(SCOPE, "common")) == 10
    assert len(service.search(SCOPE, "common", limit=3)) == 3
    assert len(service.search(SCOPE, "common", limit=MAX_LIMIT)) == 12


def test_filters_match_every_key_exactly_and_typed(service: BaseMemoryService) -> None:
    s = service.add(SCOPE, "fact one", metadata={"k": "1", "topic": "otp"})
    i = service.add(SCOPE, "fact two", metadata={"k": 1, "topic": "otp"})
    f = service.add(SCOPE, "fact three", metadata={"k": 1.0, "topic": "ops"})
    b = service.add(SCOPE, "fact four", metadata={"k": True})
    service.add(SCOPE, "fact five")

    def found(flt: dict[str, Any]) -> set[str]:
        return set(_ids(service.search(SCOPE, "fact", filter=flt, limit=100)))

    assert found({"k": "1"}) == {s.id}
    assert found({"k": 1}) == {i.id}
    assert found({"k": 1.0}) == {f.id}
    assert found({"k": True}) == {b.id}
    assert found({"topic": "otp"}) == {s.id, i.id}
    assert found({"topic": "otp", "k": 1}) == {i.id}
    assert found({"topic": "ops", "k": 1}) == set()
    assert found({"missing": "x"}) == set()
    assert len(found({})) == 5


def test_ranking_ties_go_to_the_newer_entry_then_the_smaller_id(service: BaseMemoryService, clock: ManualClock) -> None:
    old = service.add(SCOPE, "alpha beta")
    clock.advance()
    same_time = [service.add(SCOPE, "alpha beta") for _ in range(4)]
    clock.advance()
    new = service.add(SCOPE, "alpha beta")
    hits = service.search(SCOPE, "alpha")
    assert len({h.score for h in hits}) == 1  # identical texts score alike
    assert _ids(hits) == [new.id, *sorted(e.id for e in same_time), old.id]


def test_ranking_is_deterministic_for_the_same_data(service: BaseMemoryService, clock: ManualClock) -> None:
    words = ["apple", "banana", "cherry", "date", "elder", "fig"]
    for i in range(40):
        text = " ".join(words[(i * k) % len(words)] for k in range(1, 2 + i % 5))
        service.add(SCOPE, text, metadata={"parity": i % 2})
        if i % 3 == 0:
            clock.advance()
    first = [(h.entry.id, h.score, h.rank) for h in service.search(SCOPE, "apple cherry fig", limit=100)]
    assert len(first) > 10
    for _ in range(3):
        again = [(h.entry.id, h.score, h.rank) for h in service.search(SCOPE, "fig cherry apple apple", limit=100)]
        assert again == first
    scores = [s for _, s, _ in first]
    assert scores == sorted(scores, reverse=True)
    filtered = _ids(service.search(SCOPE, "apple cherry fig", filter={"parity": 1}, limit=100))
    assert filtered == [i for i, *_ in first if service.get(SCOPE, i).metadata["parity"] == 1]


def test_more_occurrences_of_a_rarer_word_rank_higher(service: BaseMemoryService, clock: ManualClock) -> None:
    for i in range(6):
        service.add(SCOPE, f"filler text number {i} common")
    rare_once = service.add(SCOPE, "common rare")
    rare_twice = service.add(SCOPE, "rare common rare")
    hits = service.search(SCOPE, "rare common")
    assert _ids(hits)[:2] == [rare_twice.id, rare_once.id]


@pytest.mark.parametrize(
    "query, expected",
    [
        ('"near', ["near"]),
        ("NEAR(alpha omega)", ["near", "alpha", "omega"]),
        ("alph*", []),
        ("-alpha", ["alpha"]),
        ("content:alpha", ["content", "alpha"]),
        ("alpha AND NOT omega", ["alpha", "and", "not", "omega"]),
        ("alpha OR", ["alpha", "or"]),
        ("alpha & !omega | (near) <-> x", ["alpha", "omega", "near"]),
        ("'alpha'", ["alpha"]),
        ("^alpha", ["alpha"]),
        ("{content}: alpha", ["content", "alpha"]),
        ("alpha:*", ["alpha"]),
        ("\\alpha", ["alpha"]),
        ("*", []),
        ('""', []),
    ],
)
def test_query_syntax_characters_are_text(service: BaseMemoryService, query: str, expected: list[str]) -> None:
    by_word = {
        word: service.add(SCOPE, f"{word} marker", metadata={"w": word})
        for word in ("near", "alpha", "omega", "content", "and", "not", "or", "alphabet")
    }
    found = {h.entry.metadata["w"] for h in service.search(SCOPE, query, limit=100)}
    assert found == set(expected)
    assert by_word["alphabet"].id not in {h.entry.id for h in service.search(SCOPE, query, limit=100)}


def test_words_are_runs_of_letters_and_digits(service: BaseMemoryService) -> None:
    a = service.add(SCOPE, "snake_case and kebab-case and dotted.name 2024")
    for query in ("snake", "CASE", "kebab", "name", "2024", "dotted"):
        assert _ids(service.search(SCOPE, query)) == [a.id], query
    assert service.search(SCOPE, "snak") == []


# -- exact scope -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("other", [OTHER_USER, OTHER_APP], ids=["other-user", "other-app"])
def test_another_scope_cannot_see_find_delete_or_erase_an_entry(service: BaseMemoryService, other: MemoryScope) -> None:
    mine = service.add(SCOPE, "private fact", provenance={"session_id": "s1"}, idempotency_key="k")
    with pytest.raises(StorageError) as foreign:
        service.get(other, mine.id)
    with pytest.raises(StorageError) as unknown:
        service.get(other, "mem_" + "0" * 32)
    assert foreign.value.reason == unknown.value.reason == "memory_entry_not_found"
    assert set(foreign.value.details) == set(unknown.value.details)
    assert type(foreign.value) is type(unknown.value)
    assert service.search(other, "private fact") == []
    assert service.delete_entry(other, mine.id) is False
    assert service.erase_session(other, "s1") == 0
    assert service.erase_user(other) == 0
    assert service.count(other) == 0
    assert service.get(SCOPE, mine.id) == mine and service.count(SCOPE) == 1
    assert _ids(service.search(SCOPE, "private")) == [mine.id]


def test_scope_names_follow_the_session_rules() -> None:
    for app, user in [("", "u"), ("a", ""), ("a\x00", "u"), ("a", "u\n"), ("x" * 256, "u"), (1, "u")]:
        with pytest.raises(ValidationError) as info:
            MemoryScope(app, user)  # type: ignore[arg-type]
        assert info.value.reason == "invalid_name"
    assert MemoryScope("a" * 255, "ユーザー").user == "ユーザー"


def test_calls_refuse_anything_but_a_memory_scope(service: BaseMemoryService) -> None:
    for call in (
        lambda: service.add(("crm", "u1"), "x"),  # type: ignore[arg-type]
        lambda: service.search("crm/u1", "x"),  # type: ignore[arg-type]
        lambda: service.get(None, "mem_x"),  # type: ignore[arg-type]
        lambda: service.erase_user({"app": "crm", "user": "u1"}),  # type: ignore[arg-type]
        lambda: service.count(object()),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.reason == "invalid_scope"


# -- erasure ---------------------------------------------------------------------------------------------------


def test_delete_entry_erases_one_entry_once(service: BaseMemoryService) -> None:
    a = service.add(SCOPE, "first note", metadata={"t": "a"})
    b = service.add(SCOPE, "second note", metadata={"t": "a"})
    assert service.delete_entry(SCOPE, a.id) is True
    assert service.delete_entry(SCOPE, a.id) is False
    assert service.delete_entry(SCOPE, "mem_unknown") is False
    with pytest.raises(StorageError):
        service.get(SCOPE, a.id)
    assert _ids(service.search(SCOPE, "note", filter={"t": "a"})) == [b.id]
    assert service.count(SCOPE) == 1


def test_erase_session_removes_only_that_sessions_entries(service: BaseMemoryService) -> None:
    for i in range(3):
        service.add(SCOPE, f"from s1 {i}", provenance={"session_id": "s1"})
    kept = service.add(SCOPE, "from s2", provenance={"session_id": "s2"})
    loose = service.add(SCOPE, "from nowhere")
    other = service.add(OTHER_USER, "from s1 too", provenance={"session_id": "s1"})
    assert service.erase_session(SCOPE, "s1") == 3
    assert service.erase_session(SCOPE, "s1") == 0
    assert sorted(_ids(service.search(SCOPE, "from", limit=100))) == sorted([kept.id, loose.id])
    assert service.count(SCOPE) == 2 and service.get(OTHER_USER, other.id) == other
    with pytest.raises(ValidationError):
        service.erase_session(SCOPE, "")


def test_erase_user_removes_the_whole_scope_and_the_scope_can_start_again(service: BaseMemoryService) -> None:
    ids = [service.add(SCOPE, f"note {i}", metadata={"i": i}, idempotency_key=f"k{i}").id for i in range(5)]
    other = service.add(OTHER_APP, "note elsewhere")
    assert service.erase_user(SCOPE) == 5
    assert service.erase_user(SCOPE) == 0
    assert service.count(SCOPE) == 0 and service.search(SCOPE, "note") == []
    for entry_id in ids:
        with pytest.raises(StorageError):
            service.get(SCOPE, entry_id)
    again = service.add(SCOPE, "note 0", metadata={"i": 0}, idempotency_key="k0")  # keys are free again
    assert again.id not in ids and service.count(SCOPE) == 1
    assert service.get(OTHER_APP, other.id) == other


# -- bounds ----------------------------------------------------------------------------------------------------


def test_a_full_scope_refuses_new_entries_but_not_repeats(make_service: MakeService) -> None:
    service = make_service(max_entries_per_scope=3)
    first = service.add(SCOPE, "one", idempotency_key="k1")
    service.add(SCOPE, "two")
    service.add(SCOPE, "three")
    with pytest.raises(StorageError) as info:
        service.add(SCOPE, "four")
    assert info.value.reason == "memory_scope_capacity_reached" and info.value.details == {"max_entries": 3}
    assert service.add(SCOPE, "one", idempotency_key="k1") == first
    service.add(OTHER_USER, "elsewhere")  # the bound is per scope
    service.delete_entry(SCOPE, first.id)
    with pytest.raises(StorageError):
        service.add_batch(SCOPE, [NewMemory(content="a"), NewMemory(content="b")])
    assert service.count(SCOPE) == 2  # the refused batch left nothing behind
    service.add(SCOPE, "four")
    assert service.count(SCOPE) == 3


@pytest.mark.parametrize(
    "call, reason",
    [
        (lambda s: s.search(SCOPE, ""), "invalid_query"),
        (lambda s: s.search(SCOPE, " \t\n"), "invalid_query"),
        (lambda s: s.search(SCOPE, None), "invalid_query"),
        (lambda s: s.search(SCOPE, "a" * (MAX_QUERY_BYTES + 1)), "invalid_query"),
        (lambda s: s.search(SCOPE, "é" * (MAX_QUERY_BYTES // 2 + 1)), "invalid_query"),
        (lambda s: s.search(SCOPE, "x", limit=0), "invalid_limit"),
        (lambda s: s.search(SCOPE, "x", limit=MAX_LIMIT + 1), "invalid_limit"),
        (lambda s: s.search(SCOPE, "x", limit=True), "invalid_limit"),
        (lambda s: s.search(SCOPE, "x", limit=2.0), "invalid_limit"),
        (lambda s: s.search(SCOPE, "x", filter={"k": [1]}), "invalid_metadata"),
        (lambda s: s.search(SCOPE, "x", filter=[("k", 1)]), "invalid_metadata"),
        (lambda s: s.add(SCOPE, ""), "invalid_content"),
        (lambda s: s.add(SCOPE, "   "), "invalid_content"),
        (lambda s: s.add(SCOPE, b"bytes"), "invalid_content"),
        (lambda s: s.add(SCOPE, SECRET + "\x00"), "invalid_content"),
        (lambda s: s.add(SCOPE, SECRET + "\ud800"), "invalid_content"),
        (lambda s: s.add(SCOPE, SECRET + "x" * MAX_CONTENT_BYTES), "limit_exceeded"),
        (lambda s: s.add(SCOPE, "é" * (MAX_CONTENT_BYTES // 2 + 1)), "limit_exceeded"),
        (lambda s: s.add(SCOPE, "x", metadata={f"k{i}": i for i in range(MAX_METADATA_KEYS + 1)}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"k": {"nested": 1}}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"k": float("nan")}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"k": 1 << 63}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"k": None}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"k": SECRET * 20}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"": 1}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={"k\n": 1}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", metadata={1: 1}), "invalid_metadata"),
        (lambda s: s.add(SCOPE, "x", provenance={"session": "s"}), "invalid_value"),
        (lambda s: s.add(SCOPE, "x", provenance={"session_id": ""}), "invalid_name"),
        (lambda s: s.add(SCOPE, "x", idempotency_key="k" * 256), "invalid_name"),
        (lambda s: s.get(SCOPE, ""), "invalid_value"),
        (lambda s: s.get(SCOPE, 7), "invalid_value"),
        (lambda s: s.delete_entry(SCOPE, "m" * 65), "invalid_value"),
        (lambda s: s.get(SCOPE, "mem_\x00"), "invalid_value"),
        (lambda s: s.delete_entry(SCOPE, "\ud800"), "invalid_value"),
    ],
)
def test_bad_input_is_a_validation_error_that_never_echoes_it(
    service: BaseMemoryService, call: Callable[[BaseMemoryService], Any], reason: str
) -> None:
    with pytest.raises(ValidationError) as info:
        call(service)
    err = info.value
    assert err.reason == reason
    assert SECRET not in f"{err} {err!r} {err.details}"
    assert service.count(SCOPE) == 0
