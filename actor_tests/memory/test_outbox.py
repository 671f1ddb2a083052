"""The durable ingestion outbox on SQLite and PostgreSQL: idempotent enqueue, leases (expiry, takeover, renewal,
revalidation before each mutation), bounded attempts, the status API, purge, hostile input and the Runner option.
Time is a hand-moved millisecond clock here; the node tests (test_outbox_node.py) use the database clock."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors.agents.turn.options import runner_options
from adk_actors.errors import AdkError, ConcurrencyConflict, ConfigError, StorageError, ValidationError
from adk_actors.memory import MemoryEntry, MemoryScope, NewMemory, SqlMemoryService
from adk_actors.memory.drain import DrainerSpec, _apply, drain_outbox, drainer_id
from adk_actors.memory.outbox import MemoryOutbox

SCOPE = MemoryScope("crm", "u1")
OTHER = MemoryScope("crm", "u2")
LEASE = 1000


class MsClock:
    """Epoch milliseconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def _items(*names: str) -> list[dict[str, str]]:
    return [{"event_id": n, "author": "user", "text": f"text of {n}"} for n in names]


@pytest.fixture
def ms() -> MsClock:
    return MsClock()


@pytest.fixture
def make_outbox(urls: Callable[[str], str], sql_kind: str, ms: MsClock) -> Iterator[Callable[..., MemoryOutbox]]:
    made: list[MemoryOutbox] = []

    def make(**options: Any) -> MemoryOutbox:
        options.setdefault("clock", ms)
        outbox = MemoryOutbox(options.pop("url", None) or urls(sql_kind), **options)
        made.append(outbox)
        return outbox

    yield make
    for outbox in made:
        outbox.close()


@pytest.fixture
def memory(urls: Callable[[str], str], sql_kind: str) -> Iterator[SqlMemoryService]:
    service = SqlMemoryService(urls(sql_kind))
    yield service
    service.close()


class Failing(SqlMemoryService):
    """An adapter whose adds always fail with a structural reason."""

    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        raise StorageError("down", reason="memory_down")


def test_enqueue_is_idempotent_per_event_and_the_status_api_counts_by_state(
    make_outbox: Callable[..., MemoryOutbox],
) -> None:
    outbox = make_outbox()
    first = outbox.enqueue(SCOPE, "s1", _items("e1", "e2", "e2"))
    assert (first.enqueued, first.duplicates) == (2, 1)
    again = outbox.enqueue(SCOPE, "s1", _items("e1", "e2"))
    assert (again.enqueued, again.duplicates) == (0, 2)
    outbox.enqueue(SCOPE, "s2", _items("e1"))  # another session's event of the same id is another row
    outbox.enqueue(OTHER, "s1", _items("e1"))
    status = outbox.status()
    assert status["states"] == {"pending": 4, "claimed": 0, "done": 0, "dead": 0}
    assert [(s["app"], s["user"], s["states"]["pending"]) for s in status["scopes"]] == [
        ("crm", "u1", 3),
        ("crm", "u2", 1),
    ]
    assert outbox.status(limit=1)["truncated"] is True
    assert outbox.scope_status(SCOPE)["pending"] == 3
    batch = outbox.batch_status(first.batch_id)
    assert batch == {
        "batch_id": first.batch_id,
        "items": 2,
        "states": {"pending": 2, "claimed": 0, "done": 0, "dead": 0},
        "attempts": 0,
        "errors": [],
    }
    for unknown in (again.batch_id, "obx_" + "0" * 32, "x" * 10_000):  # a batch that added nothing has no rows
        with pytest.raises(StorageError) as info:
            outbox.batch_status(unknown)
        assert info.value.reason == "outbox_batch_not_found"


def test_an_expired_lease_is_taken_over_and_the_old_claim_can_neither_renew_nor_complete(
    make_outbox: Callable[..., MemoryOutbox], ms: MsClock
) -> None:
    outbox = make_outbox()
    outbox.enqueue(SCOPE, "s1", _items("e1", "e2"))
    a = outbox.claim("node-a", lease_ms=LEASE)
    assert a is not None and [i.attempts for i in a.items] == [1, 1]
    assert outbox.claim("node-b", lease_ms=LEASE) is None  # held
    assert outbox.due_in_ms() == LEASE
    ms.now += LEASE  # expiry is inclusive: lease_until == now is expired
    b = outbox.claim("node-b", lease_ms=LEASE)
    assert b is not None and [i.seq for i in b.items] == [i.seq for i in a.items]
    assert [i.attempts for i in b.items] == [2, 2]
    for call in (lambda: outbox.renew(a, lease_ms=LEASE), lambda: outbox.revalidate(a, [a.items[0].seq])):
        with pytest.raises(ConcurrencyConflict) as info:
            call()
        assert info.value.reason == "lease_lost"
    assert outbox.complete(a, [i.seq for i in a.items]) == 0
    assert outbox.fail(a, [i.seq for i in a.items], "memory_down") == {"retry": 0, "dead": 0}
    assert outbox.complete(b, [i.seq for i in b.items]) == 2
    assert outbox.scope_status(SCOPE)["done"] == 2 and outbox.due_in_ms() is None


def test_renewal_keeps_the_rows_and_a_renewal_after_expiry_is_refused(
    make_outbox: Callable[..., MemoryOutbox], ms: MsClock
) -> None:
    outbox = make_outbox()
    outbox.enqueue(SCOPE, "s1", _items("e1"))
    claim = outbox.claim("node-a", lease_ms=LEASE)
    assert claim is not None
    ms.now += 800
    claim = outbox.renew(claim, lease_ms=LEASE)
    ms.now += 800  # past the first lease, inside the renewed one
    assert outbox.claim("node-b", lease_ms=LEASE) is None
    outbox.revalidate(claim, [claim.items[0].seq])
    with pytest.raises(ConcurrencyConflict):  # less than the margin left
        outbox.revalidate(claim, [claim.items[0].seq], margin_ms=500)
    ms.now += 200
    with pytest.raises(ConcurrencyConflict) as info:
        outbox.renew(claim, lease_ms=LEASE)
    assert info.value.reason == "lease_lost"


def test_a_pass_that_lost_its_lease_adds_nothing(
    make_outbox: Callable[..., MemoryOutbox], memory: SqlMemoryService, ms: MsClock
) -> None:
    outbox = make_outbox()
    outbox.enqueue(SCOPE, "s1", _items("e1", "e2"))
    outbox.enqueue(OTHER, "s9", _items("e3"))
    stale = outbox.claim("node-a", lease_ms=LEASE)
    assert stale is not None
    ms.now += LEASE
    assert outbox.claim("node-b", lease_ms=LEASE) is not None
    report = {"claimed": 3, "applied": 0, "failed": 0, "lost": 0}
    _apply(outbox, memory, stale, LEASE, 0, report)
    assert report["lost"] == 3 and report["applied"] == 0
    assert memory.count(SCOPE) == memory.count(OTHER) == 0


def test_re_delivery_adds_nothing_twice_and_the_counts_prove_it(
    make_outbox: Callable[..., MemoryOutbox], memory: SqlMemoryService, ms: MsClock
) -> None:
    outbox = make_outbox()
    receipt = outbox.enqueue(SCOPE, "s1", _items("e1", "e2", "e3"))
    crashed = outbox.claim("node-a", lease_ms=LEASE)
    assert crashed is not None
    memory.add_batch(SCOPE, [i.to_memory() for i in crashed.items[:2]])  # added, then the node died
    ms.now += LEASE
    report = drain_outbox(outbox, memory, LEASE, 10, owner="node-b")
    assert report == {"claimed": 3, "applied": 3, "failed": 0, "lost": 0, "due_ms": None}
    assert memory.count(SCOPE) == 3
    batch = outbox.batch_status(receipt.batch_id)
    assert batch["states"]["done"] == 3 and batch["attempts"] == 2
    entries = memory.search(SCOPE, "text", limit=10)
    assert sorted(h.entry.idempotency_key or "" for h in entries) == ["s1:e1", "s1:e2", "s1:e3"]


def test_failed_attempts_back_off_and_end_dead_with_a_structural_reason(
    make_outbox: Callable[..., MemoryOutbox], urls: Callable[[str], str], sql_kind: str, ms: MsClock
) -> None:
    outbox = make_outbox(max_attempts=2, backoff_ms=100)
    failing = Failing(urls(sql_kind))
    try:
        receipt = outbox.enqueue(SCOPE, "s1", _items("e1"))
        first = drain_outbox(outbox, failing, LEASE, 10)
        assert (first["failed"], first["due_ms"]) == (1, 100)
        assert drain_outbox(outbox, failing, LEASE, 10)["claimed"] == 0  # backing off
        ms.now += 100
        assert drain_outbox(outbox, failing, LEASE, 10)["failed"] == 1
        batch = outbox.batch_status(receipt.batch_id)
        assert batch["states"]["dead"] == 1 and batch["errors"] == ["memory_down"] and batch["attempts"] == 2
        assert outbox.due_in_ms() is None
        # A row whose last allowed attempt's lease expired (its node crashed) is dead too.
        lost = outbox.enqueue(SCOPE, "s1", _items("e2"))
        for _ in range(2):
            assert outbox.claim("node-a", lease_ms=LEASE) is not None
            ms.now += LEASE
        assert outbox.claim("node-b", lease_ms=LEASE) is None
        assert outbox.batch_status(lost.batch_id)["errors"] == ["lease_expired"]
    finally:
        failing.close()


def test_purge_deletes_only_done_rows_past_retention_and_is_bounded(
    make_outbox: Callable[..., MemoryOutbox], memory: SqlMemoryService, ms: MsClock
) -> None:
    outbox = make_outbox()
    outbox.enqueue(SCOPE, "s1", _items("e1", "e2", "e3"))
    drain_outbox(outbox, memory, LEASE, 10)
    outbox.enqueue(SCOPE, "s1", _items("e4"))
    assert outbox.purge(retention_ms=60_000) == 0
    ms.now += 60_001
    assert outbox.purge(retention_ms=60_000, limit=2) == 2
    assert outbox.purge(retention_ms=60_000) == 1
    assert outbox.scope_status(SCOPE) == {"pending": 1, "claimed": 0, "done": 0, "dead": 0}


def test_a_full_outbox_refuses_enqueues(make_outbox: Callable[..., MemoryOutbox]) -> None:
    outbox = make_outbox(max_pending=2)
    outbox.enqueue(SCOPE, "s1", _items("e1"))
    with pytest.raises(StorageError) as info:
        outbox.enqueue(SCOPE, "s1", _items("e2", "e3"))
    assert info.value.reason == "outbox_capacity_reached"
    assert outbox.scope_status(SCOPE)["pending"] == 1


def test_the_outbox_and_the_drainer_spec_pickle_as_descriptors(
    make_outbox: Callable[..., MemoryOutbox], memory: SqlMemoryService
) -> None:
    outbox = make_outbox(max_attempts=3)
    copy = pickle.loads(pickle.dumps(outbox))
    assert copy.url == outbox.url and copy.max_attempts == 3
    spec = DrainerSpec(outbox=outbox, memory=memory, lease_ms=500)
    assert drainer_id(pickle.loads(pickle.dumps(spec))) == drainer_id(spec)
    with pytest.raises(ConfigError) as info:
        DrainerSpec(outbox=outbox, memory=memory, batch=0).check()
    assert info.value.details["key"] == "batch"


_text = st.one_of(st.text(max_size=40), st.integers(), st.none(), st.binary(max_size=4))
_item = st.dictionaries(st.sampled_from(["event_id", "author", "text", "extra", "\x00"]), _text, max_size=4)
_items_strategy = st.one_of(st.lists(_item, max_size=4), _text, st.dictionaries(st.text(max_size=3), _text))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session_id=_text, items=_items_strategy)
def test_hostile_enqueues_fail_structurally_and_add_nothing(
    make_outbox: Callable[..., MemoryOutbox], session_id: Any, items: Any
) -> None:
    outbox = make_outbox(url=_shared_url(make_outbox))
    before = outbox.status()["states"]["pending"]
    try:
        receipt = outbox.enqueue(SCOPE, session_id, items)
    except AdkError as err:
        assert isinstance(err, ValidationError) and err.reason
        details = repr(err.details)
        for value in items if isinstance(items, list) else []:
            for text in value.values():
                if isinstance(text, str) and len(text) > 3:
                    assert text not in details  # structural: never the content
        assert outbox.status()["states"]["pending"] == before
    else:
        assert receipt.enqueued + receipt.duplicates == len(items)


_urls: dict[int, str] = {}


def _shared_url(make: Callable[..., MemoryOutbox]) -> str:
    """One database per test function (hypothesis calls the body many times with the same fixtures)."""
    key = id(make)
    if key not in _urls:
        _urls.clear()
        _urls[key] = make().url
    return _urls[key]


def test_runner_option_durable_needs_a_reachable_outbox_and_checks_its_knobs(
    make_outbox: Callable[..., MemoryOutbox], memory: SqlMemoryService, tmp_dir: Any
) -> None:
    def reason(**ingestion: Any) -> str:
        with pytest.raises(ConfigError) as info:
            runner_options(memory_svc=memory, memory_ingestion={"mode": "durable", **ingestion})
        return info.value.reason

    assert reason() == "durable_ingestion_unavailable"
    (tmp_dir / "a-file").write_text("not a directory")
    assert reason(outbox=f"sqlite:///{tmp_dir}/a-file/outbox.db") == "durable_ingestion_unavailable"
    unreachable = "postgresql+psycopg://nobody@127.0.0.1:1/test?connect_timeout=2"
    assert reason(outbox=unreachable) == "durable_ingestion_unavailable"
    outbox = make_outbox()
    assert reason(outbox=outbox, lease_ms=5) == "invalid_value"
    assert reason(outbox=outbox, retries=3) == "unknown_key"
    assert reason(outbox=42) == "invalid_value"
    with pytest.raises(ConfigError) as alone:
        runner_options(memory_ingestion={"mode": "durable", "outbox": outbox})
    assert alone.value.reason == "invalid_value"
    options = runner_options(memory_svc=memory, memory_ingestion={"mode": "durable", "outbox": outbox.url, "batch": 7})
    assert options.memory_ingestion == "durable"
    assert options.memory_outbox.batch == 7 and options.memory_outbox.outbox.url == outbox.url
    pickle.loads(pickle.dumps(options))
    assert runner_options(memory_svc=memory, memory_ingestion="on_success").memory_outbox is None
