"""Orphans of a SIGKILLed supervisor, dead-letter redelivery, the facade inside actor processes, strict mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from adk_actors import __version__
from adk_actors.errors import AdkError
from adk_actors.runtime.messages import Call, GetStatus, StartChild
from adk_actors.runtime.supervisor import ChildSpec, SupervisorSpec
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Echo, GetPid, Incr, SendUnpicklable

from .helpers import PROBE, child_entry, start_supervisor, unique, wait_exit, wait_status


def test_sigkill_of_a_supervisor_leaves_no_orphans_and_it_comes_back_with_new_children(
    system: ActorSystemHandle,
) -> None:
    names = [unique("orphan") for _ in range(3)]
    sid, sup = start_supervisor(
        system, SupervisorSpec(children=tuple(ChildSpec(id=n, actor=PROBE, register_as=n) for n in names))
    )
    child_pids = [system.ask(n, GetPid()) for n in names]
    sup_pid = system.ask(sup, GetStatus())["pid"]
    os.kill(sup_pid, signal.SIGKILL)
    for pid in child_pids:
        assert wait_exit(pid, 5), "a child outlived its SIGKILLed supervisor (PR_SET_PDEATHSIG)"
    new_pids = [system.ask(n, GetPid(), timeout=10) for n in names]  # the sandbox restarted the subtree
    assert set(new_pids).isdisjoint(child_pids)
    sandbox = system.ask("sandbox", GetStatus())
    assert child_entry(sandbox, sid)["restarts"] == 1


def test_a_message_to_a_dead_named_address_is_redelivered_to_the_restarted_actor(system: ActorSystemHandle) -> None:
    name = unique("dead")
    system.ask("sandbox", StartChild(spec=ChildSpec(id=name, actor=PROBE, register_as=name)))
    old_address = system.resolve(name)
    old_pid = system.ask(name, GetPid())
    os.kill(old_pid, signal.SIGKILL)
    assert wait_exit(old_pid, 5)
    assert system.ask(name, GetPid(), timeout=5) != old_pid  # restarted and re-registered
    before = system.ask(system.registry, GetStatus())["dead_letters"]
    system.tell(old_address, Call(call_id="dl", request=Incr(by=5), deadline=time.monotonic() + 30))
    status = wait_status(system, system.registry, lambda s: s["dead_letters"] > before)
    assert status["redelivered"] >= 1
    deadline = time.monotonic() + 5
    while system.ask(name, Incr(by=0)) != 5:
        assert time.monotonic() < deadline, "the dead letter was not redelivered to the new actor"


def _ask_from_inside(name: str) -> object:
    import adk_actors
    from adk_actors.testing.actors import Echo

    return adk_actors.current_system().ask(name, Echo(value=f"inside {os.getpid()}"))


def test_the_facade_works_from_inside_an_actor_process(system: ActorSystemHandle) -> None:
    name = unique("target")
    system.spawn(PROBE, name=name)
    answer = system.run_job(_ask_from_inside, name, timeout=20)
    assert isinstance(answer, str) and answer.startswith("inside ") and answer != f"inside {os.getpid()}"


def test_strict_mode_pickles_every_message_that_crosses_a_host(make_system) -> None:
    lax: ActorSystemHandle = make_system(strict_pickle=False)
    strict: ActorSystemHandle = make_system(strict_pickle=True)
    for handle, expect_error in ((lax, False), (strict, True)):
        sender = handle.spawn(PROBE, id="strict-sender")
        # a receiver on the same host: nothing but strict mode would pickle this message
        target = next(
            ref for i in range(64) if (ref := handle.spawn(PROBE, id=f"strict-target-{i}")).host_id == sender.host_id
        )
        if expect_error:
            with pytest.raises(AdkError) as info:
                handle.ask(sender, SendUnpicklable(target=target))
            assert info.value.reason == "unpicklable_message"
        else:
            assert handle.ask(sender, SendUnpicklable(target=target)) == "delivered"
        assert handle.ask(sender, Echo(value="still fine")) == "still fine"


def test_adk_version_console_script() -> None:
    adk = os.path.join(os.path.dirname(sys.executable), "adk")
    result = subprocess.run([adk, "--version"], capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"adk_actors {__version__}"
