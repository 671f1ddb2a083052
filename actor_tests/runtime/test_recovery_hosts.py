"""Recovery of permanent agents when the process that supervises the hosts is SIGKILLed (issue 16, item 5)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from adk_actors.agents import describe_agent, prompt, spawn_agent
from adk_actors.emulator import Emulator
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Incr

from .helpers import PROBE, child_entry, unique, wait_exit


@pytest.mark.timeout(120)
def test_permanent_agents_come_back_within_1s_after_the_host_supervisor_is_sigkilled(
    fresh_system: ActorSystemHandle,
) -> None:
    system = fresh_system
    probes = [unique("perm") for _ in range(6)]
    for name in probes:
        system.spawn(PROBE, id=name, name=name)
        system.ask(name, Incr(by=2))
    with Emulator() as emu:
        agent = unique("Keeper")
        spawn_agent(
            agent,
            {
                "provider": "gemini",
                "base_url": emu.base_url,
                "api_key": "test-key",
                "description": "kept across crashes",
            },
            system=system,
        )
        assert isinstance(prompt(agent, "hello", system=system, timeout=10), str)
        supervisor_pid = int(child_entry(system.status(), "hosts")["pid"])
        host_pids = [system.host_entry(i).pid for i in range(system.settings.hosts)]
        os.kill(supervisor_pid, signal.SIGKILL)
        assert wait_exit(supervisor_pid, 5)
        for pid in host_pids:  # its hosts die with it (PDEATHSIG)
            assert wait_exit(pid, 5)
        dead_at = time.monotonic()
        for name in probes:
            assert system.ask(name, Incr(by=0), timeout=3) == 0  # back under the same name, fresh
        assert describe_agent(agent, system=system, timeout=3)["description"] == "kept across crashes"
        assert time.monotonic() - dead_at < 1.0
        assert isinstance(prompt(agent, "again", system=system, timeout=10), str)
        # The kept specs survive a second crash of the restarted supervisor too.
        supervisor_pid = int(child_entry(system.status(), "hosts")["pid"])
        host_pids = [system.host_entry(i).pid for i in range(system.settings.hosts)]
        os.kill(supervisor_pid, signal.SIGKILL)
        for pid in [supervisor_pid, *host_pids]:
            assert wait_exit(pid, 5)
        for name in probes:
            assert system.ask(name, Incr(by=0), timeout=3) == 0
        status = system.ask("hosts", GetStatus())
        assert sum(status["permanent_inner"].get(host_name(i), 0) for i in range(system.settings.hosts)) >= 7
