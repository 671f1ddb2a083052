"""Turn admission (pure): FIFO per session queue, bounded concurrent queues, fair between waiting queues."""

from __future__ import annotations

from adk_actors.agents.queues import SessionQueues


def _drain(queues: SessionQueues[str]) -> list[tuple[str, str]]:
    out = []
    while (admitted := queues.next()) is not None:
        out.append(admitted)
    return out


def test_one_queue_runs_one_item_at_a_time_in_order() -> None:
    queues: SessionQueues[str] = SessionQueues(8)
    for item in ("a1", "a2", "a3"):
        queues.add("a", item)
    assert _drain(queues) == [("a", "a1")]
    queues.release("a", "a1")
    assert _drain(queues) == [("a", "a2")]
    queues.release("a", "a2")
    assert _drain(queues) == [("a", "a3")]
    queues.release("a", "a3")
    assert _drain(queues) == [] and queues.queued() == 0 and not queues.active


def test_different_queues_overlap_up_to_the_limit_and_waiting_queues_are_served_fairly() -> None:
    queues: SessionQueues[str] = SessionQueues(2)
    for item in ("a1", "a2", "b1", "b2", "c1", "c2"):
        queues.add(item[0], item)
    assert _drain(queues) == [("a", "a1"), ("b", "b1")]
    queues.release("a", "a1")  # a still has work, but c has waited longer
    assert _drain(queues) == [("c", "c1")]
    queues.release("b", "b1")
    assert _drain(queues) == [("a", "a2")]
    queues.release("c", "c1")
    assert _drain(queues) == [("b", "b2")]


def test_releasing_a_stale_item_changes_nothing_and_drain_empties_everything() -> None:
    queues: SessionQueues[str] = SessionQueues(1)
    queues.add("a", "a1")
    queues.add("b", "b1")
    assert _drain(queues) == [("a", "a1")]
    queues.release("a", "not-active")
    assert _drain(queues) == []
    assert sorted(queues.drain()) == ["a1", "b1"]
    assert _drain(queues) == [] and queues.queued() == 0
