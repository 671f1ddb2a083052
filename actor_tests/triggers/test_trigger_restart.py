"""A trigger's host SIGKILLed with events queued and active: the supervisor restarts the host and the trigger.

Memory mode loses the events (documented) but never leaves an awaiter hanging: each gets ``failed`` /
``trigger_restarted``. Each test runs on a system of its own (it kills a host).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.agents.conftest import config_for, unique
from actor_tests.runner.conftest import until
from actor_tests.sessions.conftest import sql_urls
from actor_tests.triggers.conftest import text_script
from adk_actors import Runner, spawn_agent, triggers
from adk_actors.emulator import Emulator
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import LocalRef, host_name, place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.triggers.messages import trigger_local_id
from adk_actors.triggers.store import TriggerStore


def make_runner(system: ActorSystemHandle, emu: Emulator) -> Runner:
    agent = unique("TrigAgent")
    spawn_agent(agent, config_for(emu), system=system)
    return Runner(agent, "trigger-tests", ActorSessionService(system=system), system=system)


def kill_host_of(system: ActorSystemHandle, name: str) -> None:
    host = host_name(place(trigger_local_id(name), system.settings.hosts))
    os.kill(system.ask(host, GetStatus())["pid"], signal.SIGKILL)


def test_memory_mode_awaiters_get_a_clear_outcome_when_the_host_dies(
    fresh_system: ActorSystemHandle, emu: Emulator
) -> None:
    system = fresh_system
    emu.set_script(text_script("slow", delay_ms=5000))
    name = "mem-restart"
    triggers.register_trigger(name, make_runner(system, emu), {"max_concurrency": 1}, system=system)
    active = triggers.submit(name, {"payload": "a", "idempotency_key": "a"}, system=system)
    queued = triggers.submit(name, {"payload": "b", "idempotency_key": "b"}, system=system)
    got: dict[str, Any] = {}

    def wait(ref: str) -> None:
        got[ref] = triggers.await_event(ref, 15, system=system)

    waiters = [threading.Thread(target=wait, args=(s.ref,)) for s in (active, queued)]
    for w in waiters:
        w.start()
    t0 = time.monotonic()
    kill_host_of(system, name)
    for w in waiters:
        w.join(15)
    assert {r: (o.outcome, o.reason) for r, o in got.items()} == {
        active.ref: ("failed", "trigger_restarted"),
        queued.ref: ("failed", "trigger_restarted"),
    }
    assert time.monotonic() - t0 < 10
    state = triggers.trigger_status(name, system=system)
    assert (state["mode"], state["accepted"], state["queue_depth"]) == ("memory", 0, 0)
    emu.set_script(text_script("back"))
    again = triggers.submit(name, {"payload": "c", "idempotency_key": "a"}, system=system)
    assert not again.duplicate  # the dedupe table was lost with the host (memory mode)
    assert triggers.await_event(again.ref, 10, system=system).output == "back"
    triggers.unregister_trigger(name, system=system)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with sql_urls(tmp_path, "triggers") as make:
        yield make(str(request.param))


def test_durable_mode_completes_every_accepted_event_exactly_once_after_a_host_kill(
    fresh_system: ActorSystemHandle, emu: Emulator, store_url: str
) -> None:
    system = fresh_system
    emu.set_script(text_script("done", delay_ms=400))
    name = "durable-restart"
    options = {"max_concurrency": 2, "durable": {"store": store_url}}
    triggers.register_trigger(name, make_runner(system, emu), options, system=system)
    subs = [triggers.submit(name, {"payload": f"p{i}", "idempotency_key": f"k{i}"}, system=system) for i in range(5)]
    assert triggers.trigger_status(name, system=system)["mode"] == "durable"
    kill_host_of(system, name)  # two active, three queued
    outcomes = [triggers.await_event(s.ref, 20, system=system) for s in subs]
    assert [o.outcome for o in outcomes] == ["completed"] * 5
    assert {o.output for o in outcomes} == {"done"}
    state = triggers.trigger_status(name, system=system)  # the restarted incarnation reloaded and ran them all
    assert (state["accepted"], state["completed"], state["duplicates"]) == (0, 5, 0)
    store = TriggerStore(store_url)
    try:
        counts = store.counts(name)
        assert (counts["pending"], counts["terminal"], counts.get("completed")) == (0, 5, 5)
        for i, s in enumerate(subs):  # one row (and one outcome) per key; a redelivery is a duplicate
            again = triggers.submit(name, {"payload": "again", "idempotency_key": f"k{i}"}, system=system)
            assert again == triggers.Submitted(ref=s.ref, duplicate=True)
    finally:
        store.close()
    triggers.unregister_trigger(name, system=system)


def test_registering_again_with_the_same_store_resumes_pending_events_and_follows_live_runs(
    system: ActorSystemHandle, emu: Emulator, tmp_path: Path
) -> None:
    emu.set_script(text_script("resumed", delay_ms=300))
    url = f"sqlite:///{tmp_path / 'triggers.db'}"
    name = unique("durable").replace("_", "-")
    runner = make_runner(system, emu)
    options = {"max_concurrency": 1, "durable": {"store": url}}
    triggers.register_trigger(name, runner, options, system=system)
    subs = [triggers.submit(name, {"payload": f"p{i}", "idempotency_key": f"k{i}"}, system=system) for i in range(3)]
    until(lambda: triggers.status(subs[0].ref, system=system)["state"] == "running", 5, "the first event runs")
    first_run = triggers.status(subs[0].ref, system=system)["run_id"]
    # The node goes away without cancelling anything (as a node restart would): stop the actor itself.
    system.stop_inner(LocalRef(place(trigger_local_id(name), system.settings.hosts), trigger_local_id(name)))
    triggers.register_trigger(name, runner, options, system=system)
    outcomes = [triggers.await_event(s.ref, 10, system=system) for s in subs]
    assert [(o.outcome, o.attempts) for o in outcomes] == [("completed", 1)] * 3
    assert outcomes[0].run_id == first_run  # the live run was followed, not started a second time
    assert sum(1 for r in emu.requests if "p0" in str(r.get("body", ""))) == 1
    triggers.unregister_trigger(name, system=system)
