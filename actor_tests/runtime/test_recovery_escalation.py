"""Tier-2 restart intensity: an inner actor past its window escalates to its host (issue 16, item 7)."""

from __future__ import annotations

import pytest

from adk_actors.errors import ActorCrashed, NameNotFound
from adk_actors.runtime.host import InnerSpec
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name, place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Crash, Incr

from .helpers import PROBE, unique, wait_exit, wait_status


def _ids_on_host(host_id: int, hosts: int, count: int) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        candidate = unique("esc")
        if place(candidate, hosts) == host_id:
            found.append(candidate)
    return found


def test_inner_defaults_follow_otp_one_restart_per_five_seconds() -> None:
    spec = InnerSpec(local_id="x", actor=PROBE)
    assert (spec.intensity, spec.period) == (1, 5.0)


@pytest.mark.timeout(90)
def test_an_inner_actor_past_its_intensity_escalates_and_a_second_escalation_restarts_the_host(
    fresh_system: ActorSystemHandle,
) -> None:
    system = fresh_system
    first, second, bystander = _ids_on_host(0, system.settings.hosts, 3)
    for name in (first, second, bystander):
        system.spawn(PROBE, id=name, name=name)
    system.ask(bystander, Incr(by=5))
    host_pid = system.host_entry(0).pid

    for _ in range(2):  # one restart is allowed in 5 s; the second crash is past the window
        with pytest.raises(ActorCrashed):
            system.ask(first, Crash(), timeout=5)
    status = wait_status(system, "hosts", lambda s: len(s["escalated"]) == 1, timeout=5)
    assert status["escalated"][0]["local_id"] == first
    host = system.ask(host_name(0), GetStatus())
    assert host["escalations"] == 1 and host["pid"] == host_pid  # the host's own window allows one
    with pytest.raises((ActorCrashed, NameNotFound)):  # removed, not restarted into a crash loop
        system.ask(first, Incr(by=0), timeout=1)
    assert system.ask(bystander, Incr(by=0)) == 5

    for _ in range(2):  # a second escalation within the period exceeds the host's window: the host exits
        with pytest.raises(ActorCrashed):
            system.ask(second, Crash(), timeout=5)
    assert wait_exit(host_pid, 5)
    assert system.ask(bystander, Incr(by=0), timeout=5) == 0  # re-created by the restarted host, fresh
    assert system.host_entry(0).pid != host_pid
