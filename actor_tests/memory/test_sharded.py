"""Actor-backed and sharded memory: the contract through the clients, same-scope ordering, capacity and eviction,
shard restarts, abandoned shards, the client in another process and under a Runner.

Everything runs on the session's real actor system (two hosts): shards are tier-2 actors in host processes.
"""

from __future__ import annotations

import functools
import os
import pickle
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actor_tests.memory import shard_support
from actor_tests.memory.shard_support import FileClock
from actor_tests.memory.test_contract import (  # noqa: F401 - the contract, collected again against the clients
    test_a_batch_is_atomic_and_resolves_repeats_inside_it_and_in_the_store,
    test_a_full_scope_refuses_new_entries_but_not_repeats,
    test_add_returns_a_server_made_entry_that_get_returns_unchanged,
    test_an_idempotency_key_reused_for_different_data_is_refused,
    test_an_idempotent_repeat_returns_the_first_entry_and_keeps_its_provenance,
    test_another_scope_cannot_see_find_delete_or_erase_an_entry,
    test_bad_input_is_a_validation_error_that_never_echoes_it,
    test_calls_refuse_anything_but_a_memory_scope,
    test_concurrent_adds_across_scopes_and_keys_all_land,
    test_concurrent_adds_of_one_key_make_one_entry,
    test_concurrent_adds_of_one_key_with_different_content_keep_exactly_one,
    test_delete_entry_erases_one_entry_once,
    test_erase_session_removes_only_that_sessions_entries,
    test_erase_user_removes_the_whole_scope_and_the_scope_can_start_again,
    test_every_add_gets_a_new_id_and_entries_without_provenance_are_allowed,
    test_filters_match_every_key_exactly_and_typed,
    test_idempotency_keys_belong_to_their_scope,
    test_more_occurrences_of_a_rarer_word_rank_higher,
    test_query_syntax_characters_are_text,
    test_ranking_is_deterministic_for_the_same_data,
    test_ranking_ties_go_to_the_newer_entry_then_the_smaller_id,
    test_search_finds_entries_sharing_a_word_and_ranks_them,
    test_search_honours_the_limit,
    test_words_are_runs_of_letters_and_digits,
)
from adk_actors.errors import ActorCrashed, ConfigError, StorageError
from adk_actors.memory import ActorMemoryService, MemoryScope, ShardedMemoryService
from adk_actors.memory.actor import MEMORY_METHODS, build_service, service_source
from adk_actors.runtime.host import FindInner, StopInner
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name, place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.shards.client import ROUTER_ACTOR, SERVICE_ACTOR, ServiceClient, builder
from adk_actors.shards.logic import ShardLoad, admit, idle_expired, idle_victim
from adk_actors.shards.messages import RouterArgs, ServiceArgs

pytestmark = pytest.mark.timeout(60)

A = MemoryScope("shard-tests", "alice")
B = MemoryScope("shard-tests", "bob")
C = MemoryScope("shard-tests", "carol")


# -- fixtures: the contract's ``service`` / ``make_service`` / ``clock`` as actor-backed clients ------------------


@pytest.fixture
def clock(tmp_path: Path) -> FileClock:
    return FileClock(tmp_path / "clock")


@pytest.fixture(params=["actor", "sharded"])
def make_service(
    request: pytest.FixtureRequest, system: ActorSystemHandle, clock: FileClock
) -> Iterator[Callable[..., ActorMemoryService]]:
    made: list[ActorMemoryService] = []

    def make(**options: Any) -> ActorMemoryService:
        options.setdefault("clock", clock)
        svc: ActorMemoryService
        if request.param == "actor":
            svc = ActorMemoryService.start(
                functools.partial(shard_support.InMemoryMemoryService, **options), system=system
            )
        else:
            factory = functools.partial(shard_support.in_memory_for, **options)
            svc = ShardedMemoryService.start(factory, system=system, max_active_scopes=8)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.stop()


@pytest.fixture
def service(make_service: Callable[..., ActorMemoryService]) -> ActorMemoryService:
    return make_service()


@pytest.fixture
def sharded(system: ActorSystemHandle, tmp_path: Path) -> Iterator[Callable[..., ShardedMemoryService]]:
    made: list[ShardedMemoryService] = []

    def make(factory: Any = None, **options: Any) -> ShardedMemoryService:
        if factory is None:
            factory = shard_support.SqlMemoryService(f"sqlite:///{tmp_path / 'shards.db'}")
        svc = ShardedMemoryService.start(factory, system=system, **options)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.stop()


def _shard_ids(system: ActorSystemHandle) -> set[str]:
    found: set[str] = set()
    for host in range(system.settings.hosts):
        found.update(system.ask(host_name(host), FindInner(actor=SERVICE_ACTOR), timeout=10))
    return found


def _until(check: Callable[[], Any], seconds: float, what: str) -> Any:
    """Re-ask until ``check()`` is truthy (each try is a real round trip to the actors)."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what


# -- the admission decisions (pure) ------------------------------------------------------------------------------


def test_admission_starts_until_full_then_stops_the_least_recently_used_idle_shard() -> None:
    loads = {"a": ShardLoad("a", False, 5.0), "b": ShardLoad("b", False, 1.0), "c": ShardLoad("c", True, 0.0)}
    assert admit("a", loads, max_active=3, cold_waiting=0, cold_queue=0).action == "warm"
    assert admit("d", loads, max_active=4, cold_waiting=0, cold_queue=0).action == "start"
    evict = admit("d", loads, max_active=3, cold_waiting=0, cold_queue=0)
    assert (evict.action, evict.victim) == ("evict_then_start", "b")
    busy = {k: ShardLoad(k, True, 0.0) for k in "abc"}
    assert admit("d", busy, max_active=3, cold_waiting=0, cold_queue=0).action == "refuse"
    assert admit("d", busy, max_active=3, cold_waiting=0, cold_queue=2).action == "queue"
    assert admit("d", busy, max_active=3, cold_waiting=2, cold_queue=2).action == "refuse"
    # A cold route never overtakes cold calls already waiting, even when a slot is free.
    assert admit("d", loads, max_active=9, cold_waiting=1, cold_queue=5).action == "queue"
    assert idle_expired(loads.values(), 10.0, 6.0) == ["b"] and idle_expired(loads.values(), 10.0, None) == []


@given(
    loads=st.dictionaries(st.integers(0, 20), st.tuples(st.booleans(), st.floats(0, 100)), max_size=12),
    key=st.integers(0, 25),
    max_active=st.integers(1, 12),
    cold_waiting=st.integers(0, 4),
    cold_queue=st.integers(0, 4),
)
def test_admission_never_exceeds_the_bounds_and_evicts_only_idle_shards(
    loads: dict[int, tuple[bool, float]], key: int, max_active: int, cold_waiting: int, cold_queue: int
) -> None:
    shards = {k: ShardLoad(k, busy, used) for k, (busy, used) in loads.items()}
    decision = admit(key, shards, max_active=max_active, cold_waiting=cold_waiting, cold_queue=cold_queue)
    if key in shards:
        assert decision.action == "warm"
    elif decision.action == "start":
        assert len(shards) < max_active and cold_waiting == 0
    elif decision.action == "evict_then_start":
        victim = shards[decision.victim]  # type: ignore[index]
        assert not victim.busy and victim.last_used == min(s.last_used for s in shards.values() if not s.busy)
    elif decision.action == "queue":
        assert cold_waiting < cold_queue
    else:
        assert cold_waiting >= cold_queue
    assert idle_victim(s for s in shards.values() if s.busy) is None


# -- options ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"max_active_scopes": 0},
        {"max_active_scopes": True},
        {"cold_queue": -1},
        {"idle_timeout_s": 0},
        {"heartbeat_s": float("nan")},
        {"shard_restart": "sometimes"},
    ],
)
def test_sharded_options_out_of_range_are_refused_before_anything_starts(
    system: ActorSystemHandle, options: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError) as refused:
        ShardedMemoryService.start(shard_support.in_memory_for, system=system, **options)
    assert refused.value.reason == "invalid_value" and refused.value.details["option"] == next(iter(options))


def test_an_in_memory_service_object_is_not_shareable_but_its_class_is(system: ActorSystemHandle) -> None:
    with pytest.raises(ConfigError) as unshareable:
        ActorMemoryService.start(shard_support.InMemoryMemoryService(), system=system)
    assert unshareable.value.reason == "service_not_shareable"
    with pytest.raises(ConfigError) as not_a_service:
        ActorMemoryService.start(lambda: "not a service", system=system)  # type: ignore[arg-type,return-value]
    assert not_a_service.value.reason == "invalid_value"


# -- ordering ----------------------------------------------------------------------------------------------------


def test_calls_for_one_scope_are_applied_in_arrival_order(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService]
) -> None:
    """A burst of pipelined calls (sent without waiting, so they queue at the router) for two scopes: each shard
    applies its scope's calls in the order they arrived (its clock counts its adds)."""
    from adk_actors.memory import NewMemory
    from adk_actors.runtime.messages import Call, Reply, ToInner
    from adk_actors.shards.messages import RoutedOp, ServiceOp

    svc = sharded(shard_support.counting_memory)
    router = svc.client.ref
    with system.open_endpoint() as endpoint:
        host = system.host_entry(router.host_id)
        deadline = time.monotonic() + 30
        ids = []
        for i in range(40):
            scope = A if i % 2 == 0 else B
            call = Call(
                call_id=uuid.uuid4().hex,
                request=RoutedOp(
                    key=(scope.app, scope.user),
                    op=ServiceOp(method="add_batch", args=(scope, [NewMemory(content=f"item {i}")])),
                ),
                deadline=deadline,
            )
            ids.append(call.call_id)
            endpoint.context.tell(host.address, ToInner(local_id=router.local_id, message=call))
        replies = {}
        while len(replies) < len(ids):
            message = endpoint.listen(10)
            assert isinstance(message, Reply), message
            replies[message.call_id] = message.value
    for first in (0, 1):
        entries = [replies[ids[i]][0] for i in range(first, 40, 2)]
        assert [e.created_at for e in entries] == [float(n) for n in range(1, 21)]
        assert [e.content for e in entries] == [f"item {i}" for i in range(first, 40, 2)]
    assert svc.count(A) == svc.count(B) == 20


# -- capacity and eviction -----------------------------------------------------------------------------------------


def test_past_max_active_scopes_the_least_recently_used_idle_shard_is_stopped(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService]
) -> None:
    svc = sharded(max_active_scopes=2, idle_timeout_s=None)
    svc.add(A, "alpha note")
    svc.add(B, "beta note")
    svc.count(A)  # B is now the least recently used
    before = {s["local_id"] for s in svc.status()["shards"]}
    svc.add(C, "gamma note")
    status = svc.status()
    assert status["active_scopes"] == 2 and status["evicted"] == 1
    gone = before - {s["local_id"] for s in status["shards"]}
    assert len(gone) == 1
    _until(lambda: not (gone & _shard_ids(system)), 5, "the evicted shard process-side actor stopped")
    # The SQL service keeps the evicted scope's entries: its next call starts a new shard that finds them.
    assert [h.entry.content for h in svc.search(B, "beta")] == ["beta note"]


def _gated(system: ActorSystemHandle, tmp_path: Path, **options: Any) -> tuple[ShardedMemoryService, Path]:
    """A sharded service whose shards all run on host 0 and whose router runs on host 1, so a shard blocked in
    ``count`` (see ``GatedMemory``) leaves the router free."""
    fifo_dir = tmp_path / "fifos"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "entered")
    os.mkfifo(fifo_dir / "release")
    args = RouterArgs(
        service=ServiceArgs(
            build=builder(build_service),
            build_args=(service_source(functools.partial(shard_support.gated_for, str(fifo_dir))),),
            methods=MEMORY_METHODS,
            kind="memory",
        ),
        hosts=1,
        idle_timeout_s=None,
        **options,
    )
    router_id = f"memory-router-{uuid.uuid4().hex}"
    while place(router_id, system.settings.hosts) != 1:
        router_id = f"memory-router-{uuid.uuid4().hex}"
    ref = system.spawn(ROUTER_ACTOR, args, id=router_id)
    return ShardedMemoryService(ServiceClient(ref, sharded=True, system=system), max_entries_per_scope=10), fifo_dir


@pytest.mark.parametrize("cold_queue", [0, 1])
def test_a_cold_route_when_every_shard_is_busy_is_refused_or_waits_in_the_bounded_queue(
    system: ActorSystemHandle, tmp_path: Path, cold_queue: int
) -> None:
    assert system.settings.hosts >= 2
    svc, fifos = _gated(system, tmp_path, max_active_scopes=2, cold_queue=cold_queue)
    gate = MemoryScope("shard-tests", "gate")
    entered = os.open(fifos / "entered", os.O_RDONLY | os.O_NONBLOCK)
    results: dict[str, Any] = {}

    def run(name: str, fn: Callable[[], Any]) -> threading.Thread:
        def body() -> None:
            try:
                results[name] = fn()
            except Exception as exc:
                results[name] = exc

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    try:
        blocked = run("gate", lambda: svc.count(gate))
        assert select.select([entered], [], [], 15)[0], "the gate shard entered count"
        starting = run("b", lambda: svc.count(B))  # its shard cannot start while host 0 is blocked: busy
        _until(lambda: svc.status()["active_scopes"] == 2, 10, "B's shard is starting")
        if cold_queue == 0:
            with pytest.raises(StorageError) as refused:
                svc.count(C)
            assert refused.value.reason == "memory_shard_capacity_reached"
            assert refused.value.details == {"max_active_scopes": 2, "cold_queue": 0}
            assert svc.status()["refused"] == 1
        else:
            waiting = run("c", lambda: svc.count(C))
            _until(lambda: svc.status()["cold_waiting"] == 1, 10, "C waits in the cold queue")
            with pytest.raises(StorageError) as full:
                svc.count(MemoryScope("shard-tests", "dave"))
            assert full.value.reason == "memory_shard_capacity_reached"
    finally:
        release = os.open(fifos / "release", os.O_WRONLY | os.O_NONBLOCK)
        os.write(release, b"go")
        os.close(release)
        os.close(entered)
    blocked.join(20)
    starting.join(20)
    assert results["gate"] == 0 and results["b"] == 0
    if cold_queue:
        waiting.join(20)
        assert results["c"] == 0  # admitted once a shard was idle, by stopping it
        assert svc.status()["evicted"] == 1
    svc.stop()


# -- supervision and abandoned shards ---------------------------------------------------------------------------------


def test_a_crashed_shard_is_restarted_by_its_host_and_keeps_its_ref(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService], tmp_path: Path
) -> None:
    svc = sharded(shard_support.CrashingSql(f"sqlite:///{tmp_path / 'crash.db'}"))
    svc.add(A, "kept across the restart")
    [shard] = svc.status()["shards"]
    with pytest.raises(ActorCrashed):
        svc.erase_session(A, "crash-now")
    assert svc.count(A) == 1  # the restarted shard (same ref) reopened the store
    status = svc.status()
    assert [s["local_id"] for s in status["shards"]] == [shard["local_id"]] and status["rerouted"] == 0
    host = system.ask(host_name(place(shard["local_id"], system.settings.hosts)), GetStatus(), timeout=10)
    [inner] = [i for i in host["inner"] if i["local_id"] == shard["local_id"]]
    assert inner["restarts"] == 1 and inner["restart"] == "transient"


def test_shards_whose_router_is_gone_stop_themselves_and_idle_shards_are_stopped(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService]
) -> None:
    orphaned = sharded(heartbeat_s=0.1, idle_timeout_s=None)
    orphaned.add(A, "one")
    orphaned.add(B, "two")
    ids = {s["local_id"] for s in orphaned.status()["shards"]}
    assert ids <= _shard_ids(system)
    system.stop_inner(orphaned.client.ref)  # the router goes without stopping its shards
    _until(lambda: not (ids & _shard_ids(system)), 10, "the abandoned shards stopped themselves")

    idle = sharded(idle_timeout_s=0.2)
    idle.add(C, "three")
    _until(lambda: idle.status()["idle_stopped"] == 1, 10, "the idle shard was stopped")
    assert idle.status()["active_scopes"] == 0
    assert idle.count(C) == 1  # a new shard serves the scope again (from the SQL store)


def test_a_call_finding_its_shard_gone_is_rerouted_to_a_new_shard_once(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService]
) -> None:
    svc = sharded(idle_timeout_s=None)
    svc.add(A, "still here")
    [shard] = svc.status()["shards"]
    system.ask(
        host_name(place(shard["local_id"], system.settings.hosts)),
        StopInner(local_id=shard["local_id"]),
        timeout=10,
    )
    assert svc.count(A) == 1
    status = svc.status()
    assert status["rerouted"] == 1 and [s["local_id"] for s in status["shards"]] != [shard["local_id"]]


def test_stop_stops_the_router_and_every_shard(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService]
) -> None:
    svc = sharded()
    for scope in (A, B, C):
        svc.add(scope, "x")
    ids = {s["local_id"] for s in svc.status()["shards"]}
    svc.stop()
    assert not (ids & _shard_ids(system))
    with pytest.raises(ActorCrashed):
        svc.count(A)


# -- other processes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["actor", "sharded"])
def test_the_client_pickles_and_works_from_a_worker_process(
    system: ActorSystemHandle, sharded: Callable[..., ShardedMemoryService], kind: str
) -> None:
    svc = ActorMemoryService.start(system=system) if kind == "actor" else sharded(shard_support.in_memory_for)
    try:
        copy = pickle.loads(pickle.dumps(svc))
        assert copy.max_entries_per_scope == svc.max_entries_per_scope
        result = system.run_job(shard_support.remote_roundtrip, svc, A.app, A.user, "remembered elsewhere")
        assert result["pid"] != os.getpid() and result["count"] == 1 and result["hits"] == [result["id"]]
        assert svc.get(A, result["id"]).content == "remembered elsewhere"
    finally:
        if kind == "actor":
            svc.stop()
