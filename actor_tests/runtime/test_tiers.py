"""The same actor class passes the same tests at tier 1 (its own process) and tier 2 (inside a host)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from adk_actors.errors import ActorCrashed, AdkError, AskTimeout
from adk_actors.runtime.refs import LocalRef
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Crash, Echo, Incr, RaiseError, Relay, ReplyLater

from .helpers import PROBE, start_child, unique


def _tier1(system: ActorSystemHandle, name: str) -> Any:
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    return name


def _tier2(system: ActorSystemHandle, name: str) -> Any:
    system.spawn(PROBE, name=name, id=name)
    return name


@pytest.fixture(params=["tier1", "tier2"])
def make_probe(request: pytest.FixtureRequest, system: ActorSystemHandle) -> Callable[[str], Any]:
    factory = _tier1 if request.param == "tier1" else _tier2
    return lambda prefix: factory(system, unique(prefix))


def test_echo_and_state(system: ActorSystemHandle, make_probe: Callable[[str], Any]) -> None:
    probe = make_probe("state")
    assert system.ask(probe, Echo(value={"a": [1, 2]})) == {"a": [1, 2]}
    assert [system.ask(probe, Incr()) for _ in range(3)] == [1, 2, 3]


def test_crash_fails_the_call_and_restarts_fresh(system: ActorSystemHandle, make_probe: Callable[[str], Any]) -> None:
    probe = make_probe("crash")
    assert system.ask(probe, Incr(by=5)) == 5
    with pytest.raises(ActorCrashed):
        system.ask(probe, Crash())
    assert system.ask(probe, Incr(), timeout=5) == 1


def test_adk_error_is_a_failed_reply(system: ActorSystemHandle, make_probe: Callable[[str], Any]) -> None:
    probe = make_probe("err")
    system.ask(probe, Incr())
    with pytest.raises(AdkError) as info:
        system.ask(probe, RaiseError(reason="nope"))
    assert info.value.reason == "nope"
    assert system.ask(probe, Incr()) == 2


def test_timers_and_deferred_replies(system: ActorSystemHandle, make_probe: Callable[[str], Any]) -> None:
    probe = make_probe("timer")
    t0 = time.monotonic()
    assert system.ask(probe, ReplyLater(seconds=0.1, value="done")) == "done"
    assert 0.09 <= time.monotonic() - t0 < 1.0
    with pytest.raises(AskTimeout):
        system.ask(probe, ReplyLater(seconds=0.3, value="late"), timeout=0.1)
    assert system.ask(probe, Echo(value="next")) == "next"


def test_asynchronous_calls_to_every_kind_of_ref(system: ActorSystemHandle, make_probe: Callable[[str], Any]) -> None:
    caller = make_probe("caller")
    tier1 = _tier1(system, unique("t1"))
    inner_names = [_tier2(system, unique("t2")) for _ in range(4)]  # spread over both hosts
    refs = [system.resolve(n) for n in inner_names]
    assert {r.host_id for r in refs if isinstance(r, LocalRef)} == {0, 1} or len(refs) == 4
    assert system.ask(caller, Relay(target=tier1, request=Echo(value="to-tier1"))) == "to-tier1"
    for ref in refs:
        assert system.ask(caller, Relay(target=ref, request=Echo(value=str(ref)))) == str(ref)
    assert system.ask(caller, Relay(target=inner_names[0], request=Incr())) == 1
    with pytest.raises(AskTimeout):
        system.ask(caller, Relay(target=tier1, request=ReplyLater(seconds=1.0), timeout=0.1), timeout=3)
