"""Inner supervisors: groups of tier-2 actors restarted together per strategy (issue 16, item 7, second half).

Each strategy is checked with probe actors that count (a restarted probe counts from 0 again) and journal their
``init`` / ``terminate``, so both what was restarted and the stop/start order are visible. Past its window a group
escalates to its host as a whole; a permanent group survives its host's SIGKILL with its current members.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adk_actors.errors import ActorCrashed, AdkError, AskTimeout, ConfigError, NameNotFound
from adk_actors.runtime.host import InnerSpec
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name, place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Crash, Incr, ProbeArgs, StopMe

from .helpers import PROBE, child_entry, unique, wait_exit, wait_status


@pytest.fixture(scope="module")
def node(make_system: Callable[..., ActorSystemHandle]) -> ActorSystemHandle:
    return make_system()


def _members(prefix: str, journal: Path, *restarts: str) -> list[InnerSpec]:
    names = "abcdefgh"
    return [
        InnerSpec(
            local_id=f"{prefix}-{names[i]}",
            actor=PROBE,
            args=ProbeArgs(journal=str(journal)),
            register_as=f"{prefix}-{names[i]}",
            restart=kind,
        )  # type: ignore[arg-type]
        for i, kind in enumerate(restarts)
    ]


def _journal(path: Path, prefix: str) -> list[str]:
    """``init x`` / ``terminate x reason`` lines, with the member ids shortened to their letter."""
    lines = path.read_text().splitlines() if path.exists() else []
    out = []
    for line in lines:
        words = line.split()
        words[1] = words[1].removeprefix(f"{prefix}-")
        out.append(" ".join(words[:3] if words[0] == "terminate" else words[:2]))
    return out


def _group(status: dict[str, Any], group_id: str) -> dict[str, Any] | None:
    return next((dict(g) for g in status["groups"] if g["local_id"] == group_id), None)


def _gone(system: ActorSystemHandle, name: str) -> None:
    """``name`` answers no more: a dead ref (``noproc``), or a name nothing registers (the lookup gives up)."""
    with pytest.raises((ActorCrashed, NameNotFound, AskTimeout)):
        system.ask(name, Incr(by=0), timeout=1)


def _restarts(status: dict[str, Any], prefix: str) -> dict[str, int]:
    return {
        e["local_id"].removeprefix(f"{prefix}-"): e["restarts"]
        for e in status["inner"]
        if e["local_id"].startswith(f"{prefix}-")
    }


@pytest.mark.parametrize(
    ("strategy", "counts", "restarted", "order"),
    [
        ("one_for_one", {"a": 1, "b": 0, "c": 3}, {"a": 0, "b": 1, "c": 0}, ["terminate b crash", "init b"]),
        (
            "one_for_all",
            {"a": 0, "b": 0, "c": 0},
            {"a": 1, "b": 1, "c": 1},
            ["terminate b crash", "terminate c shutdown", "terminate a shutdown", "init a", "init b", "init c"],
        ),
        (
            "rest_for_one",
            {"a": 1, "b": 0, "c": 0},
            {"a": 0, "b": 1, "c": 1},
            ["terminate b crash", "terminate c shutdown", "init b", "init c"],
        ),
    ],
)
def test_a_member_crash_restarts_the_group_per_its_strategy(
    node: ActorSystemHandle,
    tmp_path: Path,
    strategy: str,
    counts: dict[str, int],
    restarted: dict[str, int],
    order: list[str],
) -> None:
    group_id, journal = unique("grp"), tmp_path / "journal.txt"
    prefix = group_id
    refs = node.spawn_group(
        group_id, _members(prefix, journal, "permanent", "permanent", "permanent"), strategy=strategy, intensity=3
    )
    host = host_name(place(group_id, node.settings.hosts))
    assert [r.host_id for r in refs] == [place(group_id, node.settings.hosts)] * 3  # all on the group's host
    try:
        assert _journal(journal, prefix) == ["init a", "init b", "init c"]  # started in order
        for letter, by in (("a", 1), ("b", 2), ("c", 3)):
            assert node.ask(f"{prefix}-{letter}", Incr(by=by)) == by
        before = len(_journal(journal, prefix))

        with pytest.raises(ActorCrashed):
            node.ask(f"{prefix}-b", Crash(), timeout=5)
        status = wait_status(node, host, lambda s: (_group(s, group_id) or {}).get("restarts") == 1)

        assert {k: node.ask(f"{prefix}-{k}", Incr(by=0)) for k in "abc"} == counts
        assert _restarts(status, prefix) == restarted
        assert _journal(journal, prefix)[before:] == order
        assert _group(status, group_id) == {
            "local_id": group_id,
            "strategy": strategy,
            "intensity": 3,
            "period": 5.0,
            "members": [f"{prefix}-{k}" for k in "abc"],
            "restarts": 1,
        }
    finally:
        node.stop_group(group_id)
    status = node.ask(host, GetStatus())
    assert _group(status, group_id) is None and _restarts(status, prefix) == {}
    assert _journal(journal, prefix)[-3:] == ["terminate c shutdown", "terminate b shutdown", "terminate a shutdown"]


def test_a_temporary_sibling_is_removed_and_a_normal_exit_of_a_transient_member_restarts_nothing(
    node: ActorSystemHandle, tmp_path: Path
) -> None:
    group_id = unique("grp")
    prefix = group_id
    node.spawn_group(
        group_id,
        _members(prefix, tmp_path / "j.txt", "permanent", "transient", "temporary"),
        strategy="one_for_all",
        intensity=5,
    )
    host = host_name(place(group_id, node.settings.hosts))
    try:
        assert node.ask(f"{prefix}-b", StopMe(reason="normal")) == "stopping"
        status = wait_status(node, host, lambda s: f"{prefix}-b" not in (_group(s, group_id) or {})["members"])
        assert _group(status, group_id)["restarts"] == 0  # type: ignore[index]
        with pytest.raises(ActorCrashed):
            node.ask(f"{prefix}-a", Crash(), timeout=5)
        status = wait_status(node, host, lambda s: (_group(s, group_id) or {}).get("restarts") == 1)
        assert _group(status, group_id)["members"] == [f"{prefix}-a"]  # type: ignore[index]
        assert set(_restarts(status, prefix)) == {"a"}  # the temporary sibling was stopped, not restarted
        _gone(node, f"{prefix}-c")
        assert node.ask(f"{prefix}-a", Incr(by=0)) == 0
    finally:
        node.stop_group(group_id)


def test_group_specs_are_checked_before_anything_starts(node: ActorSystemHandle, tmp_path: Path) -> None:
    group_id = unique("grp")
    members = _members(group_id, tmp_path / "j.txt", "permanent", "permanent")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"strategy": "simple_one_for_one"}, "invalid_strategy"),
        ({"intensity": -1}, "invalid_value"),
        ({"period": float("nan")}, "invalid_value"),
        ({"members": []}, "invalid_group"),
        ({"members": [members[0], members[0]]}, "duplicate_member"),
        ({"members": [InnerSpec(local_id=group_id, actor=PROBE)]}, "duplicate_member"),
        ({"members": ["not a spec"]}, "invalid_group"),
        ({"members": "ab"}, "invalid_group"),
    ]
    for change, reason in cases:
        kwargs: dict[str, Any] = {"members": members, **change}
        with pytest.raises(ConfigError) as info:
            node.spawn_group(group_id, kwargs.pop("members"), **kwargs)
        assert info.value.reason == reason, change
    # An id taken on the host: the whole group is refused and none of its members starts.
    taken = unique("taken")
    other = unique("grp")
    while place(other, node.settings.hosts) != place(taken, node.settings.hosts):
        other = unique("grp")
    node.spawn(PROBE, id=taken, name=taken, restart="temporary")
    try:
        with pytest.raises(AdkError) as err:
            node.spawn_group(other, [members[0], InnerSpec(local_id=taken, actor=PROBE)])
        assert err.value.reason == "already_started"
        status = node.ask(host_name(place(other, node.settings.hosts)), GetStatus())
        assert _group(status, other) is None and _restarts(status, group_id) == {}
    finally:
        node.stop_inner(node.resolve(taken))


@pytest.mark.timeout(90)
def test_a_group_past_its_intensity_escalates_to_its_host_as_a_whole(
    fresh_system: ActorSystemHandle, tmp_path: Path
) -> None:
    system = fresh_system
    group_id = unique("grp")
    prefix = group_id
    journal = tmp_path / "j.txt"
    system.spawn_group(
        group_id, _members(prefix, journal, "permanent", "permanent", "permanent"), strategy="one_for_all"
    )  # OTP's default window: 1 restart per 5 s
    host = host_name(place(group_id, system.settings.hosts))
    host_pid = system.ask(host, GetStatus())["pid"]
    assert system.ask("hosts", GetStatus())["permanent_inner"][host] == 1
    for _ in range(2):
        with pytest.raises(ActorCrashed):
            system.ask(f"{prefix}-a", Crash(), timeout=5)
    status = wait_status(system, "hosts", lambda s: len(s["escalated"]) == 1)
    assert {k: status["escalated"][0][k] for k in ("host", "local_id", "actor")} == {
        "host": host,
        "local_id": group_id,
        "actor": "group:one_for_all",
    }
    assert status["permanent_inner"].get(host, 0) == 0  # not re-created by a later host restart
    host_status = system.ask(host, GetStatus())
    assert host_status["escalations"] == 1 and host_status["pid"] == host_pid
    assert _group(host_status, group_id) is None and _restarts(host_status, prefix) == {}
    for letter in "abc":  # every member is gone, not restarted into a crash loop
        _gone(system, f"{prefix}-{letter}")
    # The crashed member is already gone; the others are stopped in reverse start order.
    assert _journal(journal, prefix)[-3:] == ["terminate a crash", "terminate c shutdown", "terminate b shutdown"]


@pytest.mark.timeout(90)
def test_a_permanent_group_comes_back_with_its_current_members_after_its_host_is_sigkilled(
    fresh_system: ActorSystemHandle, tmp_path: Path
) -> None:
    system = fresh_system
    group_id = unique("grp")
    prefix = group_id
    system.spawn_group(
        group_id,
        _members(prefix, tmp_path / "j.txt", "permanent", "permanent", "temporary"),
        strategy="rest_for_one",
        intensity=5,
    )
    host_id = place(group_id, system.settings.hosts)
    with pytest.raises(ActorCrashed):  # the temporary member after it is dropped from the group for good
        system.ask(f"{prefix}-b", Crash(), timeout=5)
    wait_status(system, host_name(host_id), lambda s: (_group(s, group_id) or {}).get("restarts") == 1)

    host_pid = system.host_entry(host_id).pid
    os.kill(host_pid, signal.SIGKILL)
    assert wait_exit(host_pid, 5)
    assert system.ask(f"{prefix}-a", Incr(by=4), timeout=10) == 4  # re-created, fresh
    assert system.ask(f"{prefix}-b", Incr(by=0), timeout=10) == 0
    status = system.ask(host_name(host_id), GetStatus())
    assert status["pid"] != host_pid
    assert _group(status, group_id) == {
        "local_id": group_id,
        "strategy": "rest_for_one",
        "intensity": 5,
        "period": 5.0,
        "members": [f"{prefix}-a", f"{prefix}-b"],
        "restarts": 0,
    }
    assert set(_restarts(status, prefix)) == {"a", "b"}
    _gone(system, f"{prefix}-c")
    # Its strategy still applies: rest_for_one after b leaves a alone.
    with pytest.raises(ActorCrashed):
        system.ask(f"{prefix}-b", Crash(), timeout=5)
    wait_status(system, host_name(host_id), lambda s: (_group(s, group_id) or {}).get("restarts") == 1)
    assert system.ask(f"{prefix}-a", Incr(by=0)) == 4
    # The root keeps the group's spec too: it comes back after a SIGKILL of the host supervisor (and its hosts).
    supervisor_pid = int(child_entry(system.status(), "hosts")["pid"])
    host_pid = system.host_entry(host_id).pid
    os.kill(supervisor_pid, signal.SIGKILL)
    for pid in (supervisor_pid, host_pid):
        assert wait_exit(pid, 5)
    assert system.ask(f"{prefix}-b", Incr(by=0), timeout=10) == 0
    status = system.ask(host_name(host_id), GetStatus())
    assert _group(status, group_id)["members"] == [f"{prefix}-a", f"{prefix}-b"]  # type: ignore[index]
