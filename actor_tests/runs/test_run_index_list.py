"""``ListRuns``: the run index's bounded, newest-first view of its runs (the admin shell's ``runs``)."""

from __future__ import annotations

import time

import pytest

from adk_actors.errors import ValidationError
from adk_actors.runs import api as run_api
from adk_actors.runs.index import _Entry, newest_runs
from adk_actors.runs.logic import Cancelled, Completed, Failed
from adk_actors.runs.messages import MAX_LIST_RUNS, ListRuns
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.runs import ScriptedBody


def _entry(run_id: str, started_at: float, outcome: object = None, parent: str = "") -> _Entry:
    return _Entry(
        run_id, host_id=1, host_pid=0, retention_ms=1000, parent_run_id=parent, started_at=started_at, outcome=outcome
    )


def test_newest_runs_lists_the_newest_first_and_counts_every_run() -> None:
    entries = [
        _entry("old", 10.0, Completed("x")),
        _entry("mid", 20.0, Failed("host_lost")),
        _entry("new", 30.0, parent="old"),
        _entry("cancelled", 25.0, Cancelled("by admin")),
    ]
    listed = newest_runs(entries, 3, now=40.0)
    assert [r["run_id"] for r in listed["runs"]] == ["new", "cancelled", "mid"]
    assert listed["runs"][0] == {
        "run_id": "new",
        "host_id": 1,
        "state": "running",
        "age_s": 10.0,
        "parent_run_id": "old",
        "reason": None,
    }
    assert [(r["state"], r["reason"]) for r in listed["runs"][1:]] == [
        ("cancelled", "by admin"),
        ("failed", "host_lost"),
    ]
    assert (listed["total"], listed["running"]) == (4, 1)


def test_newest_runs_is_bounded_and_rejects_a_bad_limit() -> None:
    entries = [_entry(str(i), float(i)) for i in range(MAX_LIST_RUNS + 5)]
    assert len(newest_runs(entries, MAX_LIST_RUNS * 10, now=0.0)["runs"]) == MAX_LIST_RUNS
    assert newest_runs(entries, 0, now=0.0)["runs"] == []
    for bad in (-1, True, "5"):
        with pytest.raises(ValidationError):
            newest_runs(entries, bad, now=0.0)  # type: ignore[arg-type]


def test_the_index_answers_list_runs_and_survives_a_bad_limit(system: ActorSystemHandle) -> None:
    first = run_api.start(ScriptedBody(), system=system)
    run_api.wait(first, 10, system=system)
    second = run_api.start(ScriptedBody(events=("a",), interval_s=60.0), system=system)
    try:
        # A run reports itself to the index from its host as it starts: the listing may trail start() briefly.
        deadline = time.monotonic() + 10
        while True:
            listed = system.ask("runs", ListRuns(limit=MAX_LIST_RUNS))
            states = {r["run_id"]: r["state"] for r in listed["runs"]}
            if second in states or time.monotonic() > deadline:
                break
        assert states[first] == "completed" and states[second] == "running"
        order = [r["run_id"] for r in listed["runs"]]
        assert order.index(second) < order.index(first)
        pid = system.ask("runs", GetStatus())["pid"]
        with pytest.raises(ValidationError):
            system.ask("runs", ListRuns(limit=-1))
        assert system.ask("runs", GetStatus())["pid"] == pid  # a failed reply, not a crash
    finally:
        run_api.cancel(second, system=system)
