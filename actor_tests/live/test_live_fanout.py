"""Live subscribers as pure logic (``adk_actors.live.fanout``): credit windows, exact-sequence ACKs, bounded
backlogs, slow-subscriber removal that never stalls the others, and the interruption purge."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.live.fanout import Fanout, LiveEvent, Subscriber


def _fanout(**kw: int) -> Fanout:
    return Fanout(
        max_subscribers=kw.get("subs", 4),
        max_backlog_messages=kw.get("backlog", 8),
        max_backlog_bytes=kw.get("backlog_bytes", 1 << 20),
    )


def _event(seq: int, kind: str = "output_transcription", data: bytes | None = None, generation: int = 1) -> LiveEvent:
    return LiveEvent("s", seq, kind, {"text": "x"}, data, generation)


def test_a_subscriber_gets_at_most_its_window_until_it_acks_the_exact_sequence() -> None:
    fan = _fanout()
    fan.add(Subscriber("a", "A", 2, 1 << 20))
    sent = [fan.publish(_event(i))[0] for i in range(1, 6)]
    assert [len(s) for s in sent] == [1, 1, 0, 0, 0]
    assert fan.ack("a", 99) == []  # an unknown sequence returns no credit
    moved = fan.ack("a", 1)
    assert [e.seq for _, e in moved] == [3]
    assert [e.seq for _, e in fan.ack("a", 2)] == [4]


def test_the_byte_window_bounds_inflight_but_one_event_always_fits() -> None:
    fan = _fanout()
    fan.add(Subscriber("a", "A", 100, 1000))
    big = _event(1, "audio", b"\0" * 5000)
    assert len(fan.publish(big)[0]) == 1  # larger than the window, but nothing is in flight
    assert fan.publish(_event(2, "audio", b"\0" * 10))[0] == []
    assert [e.seq for _, e in fan.ack("a", 1)] == [2]


def test_a_slow_subscriber_is_removed_and_the_others_keep_receiving() -> None:
    fan = _fanout(backlog=3)
    fan.add(Subscriber("slow", "S", 1, 1 << 20))
    fan.add(Subscriber("fast", "F", 1, 1 << 20))
    removed: list[str] = []
    for seq in range(1, 8):
        sends, slow = fan.publish(_event(seq))
        removed += [s.sub_id for s in slow]
        for sub, event in sends:
            if sub.sub_id == "fast":
                fan.ack("fast", event.seq)
    assert removed == ["slow"]
    assert "slow" not in fan.subs and fan.subs["fast"].delivered == 7
    assert fan.dropped == 1


def test_the_subscriber_limit_is_enforced_and_a_slot_frees_on_remove() -> None:
    fan = _fanout(subs=2)
    assert fan.add(Subscriber("a", "A", 1, 1)) and fan.add(Subscriber("b", "B", 1, 1))
    assert not fan.add(Subscriber("c", "C", 1, 1))
    fan.remove("a")
    assert fan.add(Subscriber("c", "C", 1, 1))


def test_an_interruption_purges_queued_audio_of_that_generation_only() -> None:
    fan = _fanout()
    fan.add(Subscriber("a", "A", 1, 1 << 20))
    fan.publish(_event(1, "audio", b"\0\0", generation=1))
    fan.publish(_event(2, "audio", b"\0\0", generation=1))
    fan.publish(_event(3, "output_transcription", generation=1))
    fan.publish(_event(4, "audio", b"\0\0", generation=2))
    assert fan.purge_audio(1) == 1
    assert [e.seq for e in fan.subs["a"].backlog] == [3, 4]
    assert fan.subs["a"].backlog_bytes == sum(e.size for e in fan.subs["a"].backlog)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.just("pub"), st.integers(min_value=1, max_value=40)), max_size=80))
def test_credit_is_never_exceeded_and_every_event_is_sent_once_in_order(ops: list[object]) -> None:
    fan = _fanout(backlog=1000)
    fan.add(Subscriber("a", "A", 3, 1 << 20))
    seq, got = 0, []
    for op in ops:
        if op == "pub":
            seq += 1
            sends, slow = fan.publish(_event(seq))
            assert not slow
        else:
            sends = fan.ack("a", int(op))  # type: ignore[call-overload]
        got += [e.seq for _, e in sends]
        assert len(fan.subs["a"].inflight) <= 3
    assert got == sorted(got) == list(range(1, len(got) + 1))
