"""Turn admission (pure): FIFO per lane, bounded concurrent lanes, fair between waiting lanes."""

from __future__ import annotations

from adk_actors.agents.lanes import Lanes


def _drain(lanes: Lanes[str]) -> list[tuple[str, str]]:
    out = []
    while (admitted := lanes.next()) is not None:
        out.append(admitted)
    return out


def test_one_lane_runs_one_item_at_a_time_in_order() -> None:
    lanes: Lanes[str] = Lanes(8)
    for item in ("a1", "a2", "a3"):
        lanes.add("a", item)
    assert _drain(lanes) == [("a", "a1")]
    lanes.release("a", "a1")
    assert _drain(lanes) == [("a", "a2")]
    lanes.release("a", "a2")
    assert _drain(lanes) == [("a", "a3")]
    lanes.release("a", "a3")
    assert _drain(lanes) == [] and lanes.queued() == 0 and not lanes.active


def test_different_lanes_overlap_up_to_the_limit_and_waiting_lanes_are_served_fairly() -> None:
    lanes: Lanes[str] = Lanes(2)
    for item in ("a1", "a2", "b1", "b2", "c1", "c2"):
        lanes.add(item[0], item)
    assert _drain(lanes) == [("a", "a1"), ("b", "b1")]
    lanes.release("a", "a1")  # a still has work, but c has waited longer
    assert _drain(lanes) == [("c", "c1")]
    lanes.release("b", "b1")
    assert _drain(lanes) == [("a", "a2")]
    lanes.release("c", "c1")
    assert _drain(lanes) == [("b", "b2")]


def test_releasing_a_stale_item_changes_nothing_and_drain_empties_everything() -> None:
    lanes: Lanes[str] = Lanes(1)
    lanes.add("a", "a1")
    lanes.add("b", "b1")
    assert _drain(lanes) == [("a", "a1")]
    lanes.release("a", "not-active")
    assert _drain(lanes) == []
    assert sorted(lanes.drain()) == ["a1", "b1"]
    assert _drain(lanes) == [] and lanes.queued() == 0
