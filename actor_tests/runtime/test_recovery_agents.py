"""A permanent agent that really crashes is restarted by its host (issue 16, item 6, second half).

The crash happens inside the agent's I/O completion handler (the provider's answer reaches the agent through the
host's I/O pool as an ``IoDone``): the turn's caller gets ``ActorCrashed``, the host re-creates the agent under the
same local id and name, and ``describe_agent`` / ``prompt`` work again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actor_tests.agents.conftest import make_spawner
from adk_actors.agents import describe_agent, prompt
from adk_actors.errors import ActorCrashed
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name
from adk_actors.runtime.system import ActorSystemHandle

from .faults import CrashOnceProvider
from .helpers import unique, wait_status


def _inner(status: dict, local_id: str) -> dict:
    [entry] = [e for e in status["inner"] if e["local_id"] == local_id]
    return dict(entry)


@pytest.mark.timeout(60)
def test_a_permanent_agent_that_crashes_in_an_io_completion_is_restarted_by_its_host(
    fresh_system: ActorSystemHandle, tmp_path: Path
) -> None:
    system = fresh_system  # a host's status lists its first 200 inner actors: a shared node may hold more
    flag = tmp_path / "crash-next"
    spawn, cleanup = make_spawner(system)
    try:
        agent = spawn(unique("Crashy"), {"provider": CrashOnceProvider(str(flag)), "description": "crashes once"})
        host = host_name(agent.ref.host_id)
        assert prompt(agent, "hello", system=system, timeout=10) == "fine"
        before = system.ask(host, GetStatus())
        assert _inner(before, agent.ref.local_id)["restarts"] == 0

        flag.write_text("1")
        with pytest.raises(ActorCrashed) as info:
            prompt(agent, "crash now", system=system, timeout=10)
        assert info.value.reason == "agent_exited"
        assert not flag.exists(), "the crashing answer was produced"

        after = wait_status(system, host, lambda s: _inner(s, agent.ref.local_id)["state"] == "running", timeout=5)
        assert _inner(after, agent.ref.local_id)["restarts"] == 1
        assert after["restarts"] == before["restarts"] + 1 and after["pid"] == before["pid"]  # the host stayed
        assert describe_agent(agent, system=system, timeout=5)["description"] == "crashes once"
        assert prompt(agent, "hello again", system=system, timeout=10) == "fine"
        assert prompt(agent.name, "by name", system=system, timeout=10) == "fine"
    finally:
        cleanup()
