"""The fixed-delay schedule source: start, status, firings with stable keys, stop."""

from __future__ import annotations

from typing import Any

import pytest

from actor_tests.runner.conftest import until
from actor_tests.triggers.conftest import text_script
from adk_actors import ConfigError, TriggerError, triggers
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers.schedule import start_schedule


def test_a_schedule_fires_with_stable_keys_reports_status_and_stops(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any
) -> None:
    emu.set_script(text_script("summary"))
    name = make_trigger()
    handle = start_schedule(name, "hourly", 50, {"payload": "Summarize the last hour"}, system=system)
    try:
        state = until(lambda: s if (s := handle.status())["fired"] >= 3 else None, 5, "three firings")
        assert (state["type"], state["interval_ms"], state["schedule_id"], state["trigger"]) == (
            "schedule", 50, "hourly", name)  # fmt: skip
        outcome = triggers.await_event(state["last_ref"], 5, system=system)
        assert outcome.outcome == "completed" and outcome.output == "summary"
    finally:
        handle.stop()
    fired = triggers.trigger_status(name, system=system)["accepted"]
    assert fired >= 3
    with pytest.raises(TriggerError) as gone:
        handle.status()
    assert gone.value.reason == "unknown_source"
    handle.stop()  # idempotent
    # the keys were f"{schedule_id}:{n}": a redelivery of firing 1 is a duplicate
    assert triggers.submit(name, {"payload": "x", "idempotency_key": "hourly:1"}, system=system).duplicate


def test_schedule_arguments_are_checked_before_anything_starts(system: ActorSystemHandle) -> None:
    with pytest.raises(ConfigError) as interval:
        start_schedule("t", "s", 0, {"payload": "x"}, system=system)
    assert interval.value.details["key"] == "interval_ms"
    with pytest.raises(TriggerError) as template:
        start_schedule("t", "s", 10, {"payload": "x", "idempotency_key": "fixed"}, system=system)
    assert template.value.reason == "invalid_delivery"
    with pytest.raises(TriggerError) as payload:
        start_schedule("t", "s", 10, {"nope": 1}, system=system)
    assert payload.value.details["key"] == "nope"


def test_a_restarted_schedule_moves_past_the_keys_its_earlier_incarnation_fired(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any
) -> None:
    emu.set_script(text_script("summary"))
    name = make_trigger()
    first = start_schedule(name, "daily", 50, {"payload": "Summarize"}, system=system)
    try:
        until(lambda: first.status()["fired"] >= 2 or None, 5, "two firings")
    finally:
        first.stop()
    before = triggers.trigger_status(name, system=system)["accepted"]
    # A new incarnation counts from 1 again (as one restarted with its host does); the trigger retains keys 1..n.
    again = start_schedule(name, "daily", 60_000, {"payload": "Summarize"}, initial_delay_ms=1, system=system)
    try:
        state = until(lambda: s if (s := again.status())["last_ref"] else None, 5, "a new firing")
    finally:
        again.stop()
    assert state["skipped_duplicates"] >= before and state["fired"] == before + 1
    assert triggers.await_event(state["last_ref"], 5, system=system).outcome == "completed"
    assert triggers.trigger_status(name, system=system)["accepted"] >= before + 1
