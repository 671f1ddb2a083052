"""The stable-run core without actors: exactly one terminal, bounded replay with explicit gaps, credit flow."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import RunError
from adk_actors.runs import (
    Cancelled,
    Completed,
    CreditSubscription,
    Failed,
    Paused,
    PushSubscription,
    ReplayGap,
    RunLog,
)


def test_exactly_one_terminal_outcome_and_nothing_after_it() -> None:
    log = RunLog()
    assert log.append("e1") == 1 and log.append("e2") == 2
    assert log.finish(Completed("answer")) == 3
    assert log.finish(Failed("late")) is None  # the first terminal wins
    assert log.outcome == Completed("answer")
    with pytest.raises(RunError) as info:
        log.append("e3")
    assert info.value.reason == "run_finished"
    assert [(d.seq, d.item, d.terminal) for d in log.replay(0)] == [
        (1, "e1", False),
        (2, "e2", False),
        (3, Completed("answer"), True),
    ]


def test_a_late_subscriber_gets_replay_then_the_same_terminal() -> None:
    log = RunLog()
    for i in range(3):
        log.append(f"e{i}")
    log.finish(Completed("done"))
    sub = PushSubscription("late")
    assert [d.seq for d in sub.pending(log)] == [1, 2, 3, 4]
    assert sub.pending(log) == []
    assert PushSubscription("from-2", after_seq=2).pending(log)[-1].item == Completed("done")


def test_a_dropped_prefix_is_reported_as_a_replay_gap_never_skipped() -> None:
    log = RunLog(max_buffered_events=2)
    for i in range(5):
        log.append(i)
    gap, *rest = PushSubscription("s", after_seq=1).pending(log)
    assert gap.item == ReplayGap(from_seq=2, resumes_at=4)
    assert [d.seq for d in rest] == [4, 5]
    assert PushSubscription("s", after_seq=3).pending(log)[0].seq == 4  # nothing missing: no gap


def test_credit_allows_one_unacknowledged_message_and_resumes_after_reconnect() -> None:
    log = RunLog()
    for i in range(3):
        log.append(i)
    sub = CreditSubscription("c")
    first = sub.pending(log)
    assert [d.seq for d in first] == [1] and sub.pending(log) == []  # one in flight
    assert not sub.ack(2) and sub.ack(1)  # a stale ack is ignored
    assert [d.seq for d in sub.pending(log)] == [2]
    sub.ack(2)
    # the consumer disconnects; it reconnects with credit from its last sequence
    again = CreditSubscription("c", after_seq=2)
    log.finish(Cancelled("user"))
    assert [d.seq for d in again.pending(log)] == [3]
    again.ack(3)
    assert [d.item for d in again.pending(log)] == [Cancelled("user")]
    again.ack(4)
    assert again.done(log)


def test_outcomes_pickle() -> None:
    for outcome in (
        Completed("x"),
        Paused({"id": "e"}),
        Cancelled("r"),
        Failed("host_lost", {"host": 1}),
        ReplayGap(1, 3),
    ):
        assert pickle.loads(pickle.dumps(outcome)) == outcome


def test_invalid_buffer_size() -> None:
    with pytest.raises(RunError):
        RunLog(max_buffered_events=0)


steps = st.lists(
    st.one_of(st.just(("event",)), st.just(("finish",)), st.tuples(st.just("ack"), st.booleans())), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(1, 6), st.integers(0, 8), st.booleans())
def test_every_subscriber_sees_increasing_sequences_with_gaps_covering_exactly_what_is_missing(
    ops: list[tuple], buffer: int, start_after: int, credit: bool
) -> None:
    log = RunLog(max_buffered_events=buffer)
    sub: CreditSubscription | PushSubscription = (
        CreditSubscription("s", after_seq=start_after) if credit else PushSubscription("s", after_seq=start_after)
    )
    seen: list[int] = []
    covered: list[int] = []
    terminals = 0

    def take() -> None:
        nonlocal terminals
        for d in sub.pending(log):
            if isinstance(d.item, ReplayGap):
                covered.extend(range(d.item.from_seq, d.item.resumes_at))
            else:
                seen.append(d.seq)
                terminals += d.terminal

    for op in ops:
        if op[0] == "event" and not log.done:
            log.append(len(seen))
        elif op[0] == "finish":
            log.finish(Completed("ok"))
        elif op[0] == "ack" and isinstance(sub, CreditSubscription) and sub.in_flight is not None and op[1]:
            sub.ack(sub.in_flight.seq)
        take()
    # drain what is left
    for _ in range(200):
        if isinstance(sub, CreditSubscription) and sub.in_flight is not None:
            sub.ack(sub.in_flight.seq)
        before = len(seen) + len(covered)
        take()
        if len(seen) + len(covered) == before and (not isinstance(sub, CreditSubscription) or sub.in_flight is None):
            break
    assert seen == sorted(set(seen))  # increasing, no duplicates
    assert set(seen).isdisjoint(covered)
    assert sorted(seen + covered) == list(range(start_after + 1, log.last_seq + 1))  # nothing silently skipped
    assert terminals == (1 if log.done and log.terminal_seq > start_after else 0)


@given(events=st.integers(min_value=0, max_value=6), after=st.integers(min_value=0, max_value=50))
@settings(max_examples=100, deadline=None)
def test_a_subscriber_from_any_position_of_a_finished_run_gets_the_terminal_outcome(events: int, after: int) -> None:
    # A stale or bogus Last-Event-ID past the end must still end with the outcome (it used to wait forever).
    log = RunLog()
    for i in range(events):
        log.append(f"e{i}")
    log.finish(Completed("done"))
    start = log.start_point(after)
    delivered = [d.seq for d in CreditSubscription("c", start).pending(log)]
    pushed = PushSubscription("p", start).pending(log)
    assert pushed[-1].terminal and pushed[-1].item == Completed("done")
    assert [d.seq for d in pushed] == list(range(min(after, events) + 1, events + 2))
    assert delivered == [pushed[0].seq]


def test_a_subscriber_past_the_newest_event_of_a_running_run_starts_at_that_event() -> None:
    log = RunLog()
    log.append("e1")
    assert log.start_point(0) == 0
    sub = PushSubscription("p", log.start_point(99))  # it claims to have seen more than there is: from e1 on
    log.append("e2")
    assert [d.seq for d in sub.pending(log)] == [2]
