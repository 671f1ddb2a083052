"""The facade's asks: correlation under thread load, late replies, timeouts, casts through the router."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from adk_actors.errors import AskTimeout, NameNotFound
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Block, Echo, GetNotes, Incr, Note, NotesFirst, ReplyLater

from .helpers import PROBE, mismatched_replies, start_child, unique


def test_32_threads_x_100_asks_with_zero_misrouted_timed_out_or_dropped_replies(system: ActorSystemHandle) -> None:
    names = [unique("echo") for _ in range(4)]
    for n in names:
        start_child(system, ChildSpec(id=n, actor=PROBE, register_as=n))
    errors: list[str] = []
    counts = [0] * 32

    def worker(t: int) -> None:
        for i in range(100):
            token = (t, i, names[(t + i) % 4])
            try:
                got = system.ask(token[2], Echo(value=token), timeout=30)
            except Exception as exc:  # any failure is a test failure; record it for the assertion
                errors.append(f"{token}: {type(exc).__name__}")
                continue
            if got != token:
                errors.append(f"misrouted: sent {token} got {got}")
            counts[t] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(32)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert sum(counts) == 3200


def test_a_late_reply_never_reaches_a_later_ask(system: ActorSystemHandle) -> None:
    name = unique("late")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    with pytest.raises(AskTimeout):
        system.ask(name, ReplyLater(seconds=0.3, value="late-value"), timeout=0.1)
    # The deferred reply is sent after the deadline; the next asks see only their own replies.
    for i in range(5):
        assert system.ask(name, Echo(value=i)) == i
    assert system.ask(name, ReplyLater(seconds=0.05, value="on-time"), timeout=5) == "on-time"


def test_an_expired_call_is_not_handled(system: ActorSystemHandle) -> None:
    name = unique("blocked")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    with pytest.raises(AskTimeout):
        system.ask(name, Block(seconds=0.4), timeout=0.1)
    with pytest.raises(AskTimeout):
        system.ask(name, Incr(), timeout=0.05)  # queued behind the block; expired before it is handled
    assert system.ask(name, Incr(), timeout=5) == 1  # the expired increment never ran


def test_casts_through_the_router_do_not_block_on_a_busy_target(system: ActorSystemHandle) -> None:
    name = unique("busy")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    from adk_actors.runtime.messages import Call

    blocker = threading.Thread(target=lambda: system.ask(name, Block(seconds=1.0), timeout=5))
    blocker.start()
    try:
        t0 = time.monotonic()
        for i in range(5):
            system.cast(name, Call(call_id=f"cast-{i}", request=Incr(), deadline=time.monotonic() + 30))
        assert time.monotonic() - t0 < 0.5
    finally:
        blocker.join()
    # Casts travel facade -> router -> target and may arrive after a direct ask: wait for all five.
    deadline = time.monotonic() + 10
    while system.ask(name, Incr(by=0), timeout=5) < 5:
        assert time.monotonic() < deadline, "a cast was lost"
    assert system.ask(name, Incr(by=0), timeout=5) == 5
    router = system.ask("router", GetStatus())
    assert router["routed"] >= 5


def test_lookup_of_an_unknown_name_fails_at_the_deadline(system: ActorSystemHandle) -> None:
    t0 = time.monotonic()
    with pytest.raises((NameNotFound, AskTimeout)):
        system.ask(unique("nobody"), Echo(value=1), timeout=0.3)
    assert time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("mode", ["per_thread", "per_call"])
def test_both_endpoint_modes_keep_replies_matched_and_drop_late_ones(make_system, mode: str) -> None:
    # Thespian endpoints carry facade asks only without lanes (test_lane.py pins the lane path).
    handle: ActorSystemHandle = make_system(facade_endpoints=mode, local_lanes=False)
    name = unique("pt")
    start_child(handle, ChildSpec(id=name, actor=PROBE, register_as=name))
    with pytest.raises(AskTimeout):
        handle.ask(name, ReplyLater(seconds=0.2, value="late"), timeout=0.05)
    assert handle.ask(name, ReplyLater(seconds=0.3, value="on-time"), timeout=5) == "on-time"
    assert mismatched_replies(handle, name) == []
    assert (len(handle._endpoints) >= 1) == (mode == "per_thread")  # only per_thread keeps endpoints


def test_messages_that_reach_an_endpoint_before_its_reply_are_kept_for_listen(system: ActorSystemHandle) -> None:
    # A run answers SubscribeRun and then sends its first events; those can overtake the reply. Here the actor sends
    # its messages first on purpose: none may be lost, and they come out of listen() in order.
    ref = system.spawn(PROBE, id=unique("early"), restart="temporary")
    endpoint = system.open_endpoint()
    try:
        assert endpoint.ask_inner(ref, NotesFirst(count=3), time.monotonic() + 10) == 3
        assert [endpoint.listen(5) for _ in range(3)] == [Note(0), Note(1), Note(2)]
        assert endpoint.listen(0.05) is None
    finally:
        endpoint.close()
        system.stop_inner(ref)


def test_casts_from_many_threads_at_once_all_arrive(system: ActorSystemHandle) -> None:
    # Each thread casts from its own endpoint: the system's shared one is not safe to drive from two threads.
    ref = system.spawn(PROBE, id=unique("casts"), restart="temporary")
    threads, each = 32, 50

    def cast_all(k: int) -> None:
        for i in range(each):
            system.cast(ref, Note(k * each + i))

    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(cast_all, range(threads)))
        deadline = time.monotonic() + 30
        while len(notes := system.ask(ref, GetNotes(), 10)) < threads * each:
            assert time.monotonic() < deadline, f"{len(notes)} of {threads * each} casts arrived"
        assert sorted(notes) == list(range(threads * each))
    finally:
        system.stop_inner(ref)
