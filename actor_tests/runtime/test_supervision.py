"""Supervisors on real actor processes: every strategy and restart type, SIGKILL, escalation, ordering."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from adk_actors.errors import ActorCrashed, AdkError
from adk_actors.runtime.messages import GetStatus, Ping, StartChild
from adk_actors.runtime.supervisor import ChildSpec, SupervisorSpec
from adk_actors.runtime.system import ActorSystemHandle, group_pids
from adk_actors.testing.actors import Crash, GetPid, Incr, ProbeArgs, RaiseError, StopMe

from .helpers import PROBE, SUPERVISOR, child_entry, start_child, start_supervisor, unique, wait_exit, wait_status


def _probe(cid: str, restart: str = "permanent", journal: str = "", register: bool = True) -> ChildSpec:
    return ChildSpec(
        id=cid,
        actor=PROBE,
        restart=restart,
        args=ProbeArgs(journal=journal),  # type: ignore[arg-type]
        register_as=cid if register else None,
        shutdown=2.0,
    )


def _pids(system: ActorSystemHandle, names: list[str]) -> list[int]:
    return [system.ask(n, GetPid(), timeout=5) for n in names]


def _group(prefix: str, n: int = 3) -> list[str]:
    tag = unique(prefix)
    return [f"{tag}_{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("strategy", "kill", "restarted"),
    [
        ("one_for_one", 1, {1}),
        ("one_for_all", 2, {0, 1, 2}),
        ("rest_for_one", 1, {1, 2}),
        ("rest_for_one", 0, {0, 1, 2}),
    ],
)
def test_strategies_restart_the_right_children_after_sigkill(
    system: ActorSystemHandle, strategy: str, kill: int, restarted: set[int]
) -> None:
    names = _group(strategy)
    sid, sup = start_supervisor(
        system,
        SupervisorSpec(
            strategy=strategy,
            intensity=10,
            period=5,  # type: ignore[arg-type]
            children=tuple(_probe(n) for n in names),
        ),
    )
    before = _pids(system, names)
    os.kill(before[kill], signal.SIGKILL)
    assert wait_exit(before[kill], 5)
    wait_status(system, sup, lambda s: s["restarts"] == 1 and all(c["state"] == "running" for c in s["children"]))
    after = _pids(system, names)  # names re-resolve through the registry once re-registered
    changed = {i for i in range(3) if before[i] != after[i]}
    assert changed == restarted
    for i in restarted - {kill}:
        assert wait_exit(before[i], 5), "a sibling that was restarted still runs"
    status = system.ask(sup, GetStatus())
    assert status["restarts"] == 1
    assert child_entry(status, names[kill])["restarts"] == 1


def test_sigkilled_tier1_child_is_restarted_within_1s_and_reachable_by_name(system: ActorSystemHandle) -> None:
    name = unique("killme")
    start_child(system, _probe(name))
    assert system.ask(name, Incr()) == 1
    old = system.ask(name, GetPid())
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    assert wait_exit(old, 1)
    new = system.ask(name, GetPid(), timeout=5)  # parked in the registry until the restart re-registers
    elapsed = time.monotonic() - t0
    assert new != old and elapsed < 1.0, elapsed
    assert system.ask(name, Incr()) == 1  # fresh state after restart
    tree = system.tree()
    sandbox = child_entry(tree, "sandbox")["status"]
    assert child_entry(sandbox, name)["restarts"] == 1
    registry = child_entry(tree, "registry")["status"]
    assert registry["names"][name]["pid"] == new


@pytest.mark.parametrize(
    ("restart", "how", "restarted"),
    [
        ("permanent", "normal", True),
        ("permanent", "crash", True),
        ("permanent", "kill", True),
        ("transient", "normal", False),
        ("transient", "crash", True),
        ("transient", "kill", True),
        ("temporary", "normal", False),
        ("temporary", "crash", False),
        ("temporary", "kill", False),
    ],
)
def test_restart_types(system: ActorSystemHandle, restart: str, how: str, restarted: bool) -> None:
    name = unique(f"{restart}_{how}")
    sid, sup = start_supervisor(
        system, SupervisorSpec(strategy="one_for_one", intensity=10, period=5, children=(_probe(name, restart),))
    )
    pid = system.ask(name, GetPid())
    if how == "normal":
        assert system.ask(name, StopMe()) == "stopping"
    elif how == "crash":
        with pytest.raises(ActorCrashed):
            system.ask(name, Crash())
    else:
        os.kill(pid, signal.SIGKILL)
    assert wait_exit(pid, 5)
    if restarted:
        assert system.ask(name, GetPid(), timeout=5) != pid
        assert system.ask(sup, GetStatus())["restarts"] == 1
    else:
        status = system.ask(sup, GetStatus())  # the exit has been processed once the status says so
        deadline = time.monotonic() + 5
        while any(c["id"] == name and c["state"] != "stopped" for c in status["children"]):
            assert time.monotonic() < deadline
            status = system.ask(sup, GetStatus())
        assert status["restarts"] == 0
        assert all(c["state"] == "stopped" for c in status["children"] if c["id"] == name)


def test_crash_reports_failure_to_the_asker_and_the_actor_exits_once(system: ActorSystemHandle) -> None:
    name = unique("crasher")
    start_child(system, _probe(name))
    pid = system.ask(name, GetPid())
    with pytest.raises(ActorCrashed) as info:
        system.ask(name, Crash())
    assert info.value.details["exception_type"] == "RuntimeError"
    assert "probe crash" not in str(info.value)  # structural only, never the exception text
    assert wait_exit(pid, 5)
    assert system.ask(name, GetPid(), timeout=5) != pid


def test_an_adk_error_from_a_handler_is_a_failed_reply_not_a_crash(system: ActorSystemHandle) -> None:
    name = unique("errs")
    start_child(system, _probe(name))
    pid = system.ask(name, GetPid())
    with pytest.raises(AdkError) as info:
        system.ask(name, RaiseError(reason="bad_input"))
    assert info.value.reason == "bad_input"
    assert system.ask(name, GetPid()) == pid


def test_simple_one_for_one_starts_dynamic_children_and_restarts_only_the_failed_one(system: ActorSystemHandle) -> None:
    sid, sup = start_supervisor(system, SupervisorSpec(strategy="simple_one_for_one", intensity=10, period=5))
    names = [unique("dyn") for _ in range(3)]
    for n in names:
        system.ask(sup, StartChild(spec=_probe(n)))
    pids = _pids(system, names)
    os.kill(pids[0], signal.SIGKILL)
    wait_status(system, sup, lambda s: s["restarts"] == 1 and all(c["state"] == "running" for c in s["children"]))
    after = _pids(system, names)
    assert after[0] != pids[0] and after[1:] == pids[1:]
    with pytest.raises(AdkError) as info:
        system.ask(sup, StartChild(spec=_probe(names[1])))
    assert info.value.reason == "already_started"


def test_children_start_in_order_and_stop_in_reverse_order(system: ActorSystemHandle, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    names = _group("ordered", 4)
    sid, _ = start_supervisor(system, SupervisorSpec(children=tuple(_probe(n, journal=str(journal)) for n in names)))
    inits = [line.split()[1] for line in journal.read_text().splitlines() if line.startswith("init")]
    assert inits == names
    from .helpers import stop_child

    stop_child(system, sid)
    terminates = [line.split()[1] for line in journal.read_text().splitlines() if line.startswith("terminate")]
    assert terminates == list(reversed(names))


def test_escalation_past_intensity_stops_the_subtree_in_reverse_order(
    fresh_system: ActorSystemHandle, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    names = _group("esc", 3)
    inner = SupervisorSpec(
        strategy="one_for_one", intensity=2, period=30, children=tuple(_probe(n, journal=str(journal)) for n in names)
    )
    outer_name = unique("outer")
    inner_name = unique("inner")
    outer = SupervisorSpec(
        strategy="one_for_one",
        intensity=0,
        period=30,
        children=(
            ChildSpec(
                id=inner_name,
                actor=SUPERVISOR,
                args=inner,
                kind="supervisor",
                register_as=inner_name,
                shutdown="infinity",
            ),
        ),
    )
    sid, outer_addr = start_supervisor(fresh_system, outer, name=outer_name, restart="temporary")
    all_pids = _pids(fresh_system, names) + [
        fresh_system.ask(inner_name, GetStatus())["pid"],
        fresh_system.ask(outer_addr, GetStatus())["pid"],
    ]
    journal.write_text("")
    for _ in range(3):  # intensity 2: the third restart within the period escalates
        pid = fresh_system.ask(names[1], GetPid(), timeout=5)
        os.kill(pid, signal.SIGKILL)
        assert wait_exit(pid, 5)
    for pid in all_pids:
        assert wait_exit(pid, 10), "a process of the escalated subtree is still running"
    terminates = [line.split()[1] for line in journal.read_text().splitlines() if line.startswith("terminate")]
    survivors = [n for n in names if n != names[1]]
    assert terminates[-2:] == list(reversed(survivors))
    assert all(p not in group_pids(fresh_system.pgid) for p in all_pids)
    assert fresh_system.ask(fresh_system.root, Ping()) == "pong"  # the rest of the system is unaffected
