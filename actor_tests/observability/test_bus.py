"""The asynchronous observability bus: batching, fan-out, retries, timeouts, queue bounds, shutdown, flush,
reconfiguration, the inherited environment in a forked child, and configuration validation.

Every exporter here is real (a class the bus builds and calls from its own threads) and records what it gets;
tests wait on conditions with deadlines, never on sleeps. Counters are process-wide, so tests compare readings
taken before and after.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from adk_actors.errors import ConfigError
from adk_actors.observability.bus import (
    BUS_ENV,
    DROP_REASONS,
    EXPORTER_KEYS,
    TransientExportError,
    bus_configured,
    bus_environment,
    bus_stats,
    configure_bus,
    configure_bus_from_environment,
    flush,
    shutdown_bus,
    submit,
    take_bus_dropped,
)

WAIT_S = 10.0
"""Deadline for anything a test waits for (far above what a healthy run needs)."""
GATE_S = 60.0
"""How long a gated exporter call blocks at most (the ``gates`` fixture opens every gate at teardown)."""
SECRET = "sk-bus-secret-4242"


# --- helpers -----------------------------------------------------------------------------------------------------


class Recorder:
    """What one test exporter class saw, guarded by a condition the test waits on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.batches: list[list[dict[str, Any]]] = []
        self.calls: list[float] = []
        """Monotonic start time of each export call (delivered or not)."""
        self.built = 0
        self.shutdowns = 0

    def envelopes(self) -> list[dict[str, Any]]:
        with self.cond:
            return [e for batch in self.batches for e in batch]

    def seqs(self) -> list[list[int]]:
        with self.cond:
            return [[e["seq"] for e in batch] for batch in self.batches]

    def wait(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)


def recording_exporter(rec: Recorder, behave: Callable[[int], None] | None = None) -> type:
    """An exporter class recording into ``rec``; ``behave(call_number)`` runs before recording and may raise or
    block (a batch is recorded only when ``export`` returns normally)."""

    class RecordingExporter:
        def __init__(self, config: Mapping[str, Any]) -> None:
            self.config = config
            with rec.cond:
                rec.built += 1

        def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
            with rec.cond:
                rec.calls.append(time.monotonic())
                number = len(rec.calls)
                rec.cond.notify_all()
            if behave is not None:
                behave(number)
            with rec.cond:
                rec.batches.append([dict(e) for e in envelopes])
                rec.cond.notify_all()

        def shutdown(self) -> None:
            with rec.cond:
                rec.shutdowns += 1
                rec.cond.notify_all()

    return RecordingExporter


class FileExporter:
    """Appends each batch as one JSON line to ``config["path"]``: importable by name, for the environment tests."""

    built = 0

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.path = Path(config["path"])
        FileExporter.built += 1

    def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps([dict(e) for e in envelopes]) + "\n")


def env(seq: int, pad: str = "") -> dict[str, Any]:
    return {"kind": "test", "seq": seq, "pad": pad}


def encoded_size(envelope: Mapping[str, Any]) -> int:
    return len(json.dumps(envelope, separators=(",", ":")))


def changed(before: Mapping[str, Any]) -> dict[str, int]:
    """What the process-wide counters did since ``before`` (a :func:`bus_stats` reading); zeros left out."""
    after = bus_stats()
    out = {k: after[k] - before[k] for k in ("delivered", "batches", "retries", "dropped")}
    out.update({r: after["dropped_by_reason"][r] - before["dropped_by_reason"][r] for r in DROP_REASONS})
    return {k: v for k, v in out.items() if v}


def blocked_on_first_call(gate: threading.Event) -> Callable[[int], None]:
    def behave(number: int) -> None:
        if number == 1:
            gate.wait(GATE_S)

    return behave


def wait_child(pid: int, timeout: float = WAIT_S) -> int:
    """The exit code of a forked child; it is killed (and the test fails) if it has not exited by the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)  # polling the child's exit with a deadline: there is nothing to wait on in this process
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child did not exit in time")


@pytest.fixture(autouse=True)
def no_bus(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without a bus and an inherited variable; after it, the bus is shut down and no bus
    thread is left."""
    monkeypatch.delenv(BUS_ENV, raising=False)
    shutdown_bus(1.0)
    yield
    shutdown_bus(2.0)
    deadline = time.monotonic() + WAIT_S
    for thread in [t for t in threading.enumerate() if t.name.startswith("adk-obs-bus")]:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threading.enumerate() if t.name.startswith("adk-obs-bus")]
    assert alive == [], f"bus threads outlived the test: {alive}"


@pytest.fixture
def gates() -> Iterator[Callable[[], threading.Event]]:
    """``gates()`` makes an event a test exporter blocks on; every gate is opened at teardown."""
    made: list[threading.Event] = []

    def make() -> threading.Event:
        made.append(threading.Event())
        return made[-1]

    yield make
    for gate in made:
        gate.set()


# --- batching and fan-out ----------------------------------------------------------------------------------------


def test_batches_hold_at_most_batch_size_envelopes_in_submission_order(
    gates: Callable[[], threading.Event],
) -> None:
    rec, gate = Recorder(), gates()
    exporter = recording_exporter(rec, blocked_on_first_call(gate))
    configure_bus(exporters=[{"id": "a", "exporter": exporter, "timeout_ms": 60_000}], max_inflight_batches=1)
    before = bus_stats()
    assert submit(env(0))
    assert rec.wait(lambda: len(rec.calls) == 1)
    assert all(submit(env(i)) for i in range(1, 70))
    assert bus_stats()["queued"] == 69  # the exporter's one-batch window is taken: the rest waits in the queue
    gate.set()
    assert flush(WAIT_S)
    assert [len(batch) for batch in rec.batches] == [1, 32, 32, 5]
    assert [e["seq"] for e in rec.envelopes()] == list(range(70))
    assert changed(before) == {"delivered": 70, "batches": 4}
    assert bus_stats()["exporters"] == {"a": {"delivered": 70, "failures": 0}}


def test_every_exporter_gets_every_batch_in_order() -> None:
    first, second = Recorder(), Recorder()
    configure_bus(
        exporters=[
            {"id": "first", "exporter": recording_exporter(first)},
            {"id": "second", "exporter": recording_exporter(second)},
        ],
        batch_size=3,
    )
    before = bus_stats()
    assert all(submit(env(i)) for i in range(10))
    assert flush(WAIT_S)
    assert [e["seq"] for e in first.envelopes()] == [e["seq"] for e in second.envelopes()] == list(range(10))
    assert first.envelopes()[0] == env(0)
    assert changed(before)["delivered"] == 20  # counted per exporter
    assert bus_stats()["exporters"] == {
        "first": {"delivered": 10, "failures": 0},
        "second": {"delivered": 10, "failures": 0},
    }


def test_a_slower_exporter_that_keeps_up_holds_the_queue_instead_of_losing_batches(
    gates: Callable[[], threading.Event],
) -> None:
    slow, fast, gate = Recorder(), Recorder(), gates()
    configure_bus(
        exporters=[
            {"id": "slow", "exporter": recording_exporter(slow, blocked_on_first_call(gate)), "timeout_ms": 60_000},
            {"id": "fast", "exporter": recording_exporter(fast)},
        ],
        batch_size=1,
        max_inflight_batches=1,
    )
    before = bus_stats()
    assert submit(env(0))
    assert slow.wait(lambda: len(slow.calls) == 1) and fast.wait(lambda: len(fast.batches) == 1)
    assert all(submit(env(i)) for i in (1, 2, 3))
    assert not flush(0.1)  # the slow exporter's call is within its timeout: the queue waits for it
    assert bus_stats()["queued"] == 3 and fast.seqs() == [[0]]
    gate.set()
    assert flush(WAIT_S)
    assert slow.seqs() == fast.seqs() == [[0], [1], [2], [3]]
    assert changed(before) == {"delivered": 8, "batches": 4}


def test_an_exporter_gets_a_copy_made_at_submit() -> None:
    rec = Recorder()
    configure_bus(exporters=[{"id": "a", "exporter": recording_exporter(rec)}])
    envelope: dict[str, Any] = {"seq": 0, "nested": types.MappingProxyType({"k": [1, 2]})}
    assert submit(envelope)
    envelope["seq"] = 99  # a later change by the caller does not reach the exporter
    assert flush(WAIT_S)
    assert rec.envelopes() == [{"seq": 0, "nested": {"k": [1, 2]}}]


# --- retries, permanent failures, timeouts -----------------------------------------------------------------------


def test_a_transient_failure_is_retried_after_a_growing_delay_then_delivered() -> None:
    rec = Recorder()

    def behave(number: int) -> None:
        if number <= 2:
            raise TransientExportError("collector briefly down")

    configure_bus(
        exporters=[{"id": "flaky", "exporter": recording_exporter(rec, behave)}], max_attempts=3, retry_delay_ms=60
    )
    before = bus_stats()
    assert submit(env(0))
    assert flush(WAIT_S)
    assert rec.seqs() == [[0]]
    first, second, third = rec.calls
    assert second - first >= 0.06 and third - second >= 0.12  # retry_delay_ms * attempt
    assert changed(before) == {"delivered": 1, "batches": 1, "retries": 2}
    assert bus_stats()["exporters"]["flaky"] == {"delivered": 1, "failures": 0}


def test_exhausted_retries_drop_the_batch_and_the_bus_carries_on() -> None:
    rec = Recorder()

    def behave(number: int) -> None:
        raise TransientExportError

    configure_bus(
        exporters=[{"id": "down", "exporter": recording_exporter(rec, behave)}], max_attempts=2, retry_delay_ms=0
    )
    before = bus_stats()
    assert submit(env(0)) and submit(env(1))
    assert flush(WAIT_S)
    assert len(rec.calls) in (2, 4)  # one batch or two, each tried max_attempts times
    assert submit(env(2))
    assert flush(WAIT_S)
    tried = len(rec.calls)
    assert tried in (4, 6) and rec.batches == []
    delta = changed(before)
    assert delta["retries_exhausted"] == 3 and delta["dropped"] == 3 and delta["retries"] == tried // 2
    assert "delivered" not in delta
    assert bus_stats()["exporters"]["down"] == {"delivered": 0, "failures": tried // 2}


def test_an_exporter_waiting_to_retry_does_not_hold_the_others() -> None:
    retrying, ok = Recorder(), Recorder()

    def behave(number: int) -> None:
        if number == 1:
            raise TransientExportError

    configure_bus(
        exporters=[
            {"id": "retrying", "exporter": recording_exporter(retrying, behave)},
            {"id": "ok", "exporter": recording_exporter(ok)},
        ],
        batch_size=1,
        max_inflight_batches=1,
        retry_delay_ms=1500,
    )
    before = bus_stats()
    assert submit(env(0))
    assert retrying.wait(lambda: len(retrying.calls) == 1)
    assert all(submit(env(i)) for i in (1, 2))
    assert ok.wait(lambda: len(ok.batches) == 3)
    assert len(retrying.calls) == 1  # the others were delivered before the retry was due
    assert flush(WAIT_S)
    assert retrying.seqs() == [[0]] and ok.seqs() == [[0], [1], [2]]
    assert changed(before) == {"delivered": 4, "batches": 3, "retries": 1, "queue_full": 2, "dropped": 2}


def test_a_permanent_failure_drops_without_retry_and_warns_once_per_exporter_without_content() -> None:
    bad, worse, good = Recorder(), Recorder(), Recorder()

    def boom(number: int) -> None:
        raise ValueError(f"collector said no to {SECRET}")

    def crash(number: int) -> None:
        raise KeyError(SECRET)

    configure_bus(
        exporters=[
            {"id": "bad", "exporter": recording_exporter(bad, boom)},
            {"id": "worse", "exporter": recording_exporter(worse, crash)},
            {"id": "good", "exporter": recording_exporter(good)},
        ],
        batch_size=1,
    )
    before = bus_stats()
    with capture_logs() as logs:
        assert submit(env(0, pad=SECRET))
        assert flush(WAIT_S)
        assert submit(env(1, pad=SECRET))
        assert flush(WAIT_S)
    assert len(bad.calls) == len(worse.calls) == 2  # one call per batch: no retry
    assert good.seqs() == [[0], [1]]
    delta = changed(before)
    assert delta["export_failed"] == 4 and delta["delivered"] == 2 and "retries" not in delta
    warnings = sorted((r["exporter"], r["error_type"]) for r in logs if r["log_level"] == "warning")
    assert warnings == [("bad", "ValueError"), ("worse", "KeyError")]
    assert SECRET not in repr(logs)
    assert bus_stats()["exporters"]["bad"] == {"delivered": 0, "failures": 2}


def test_a_stuck_exporter_times_out_while_another_keeps_delivering(gates: Callable[[], threading.Event]) -> None:
    stuck, ok, gate = Recorder(), Recorder(), gates()
    configure_bus(
        exporters=[
            {"id": "stuck", "exporter": recording_exporter(stuck, blocked_on_first_call(gate)), "timeout_ms": 100},
            {"id": "ok", "exporter": recording_exporter(ok)},
        ],
        max_inflight_batches=2,
    )
    before = bus_stats()
    assert submit(env(0))
    assert flush(WAIT_S)  # done when the stuck call is abandoned: it no longer holds the bus
    assert changed(before)["timeout"] == 1
    for seq in range(1, 5):  # one batch each: the stuck exporter's window (2) fills, then its batches drop
        started = time.monotonic()
        assert submit(env(seq))
        assert time.monotonic() - started < 0.5  # submit never waits for an exporter
        assert ok.wait(lambda seq=seq: len(ok.batches) == seq + 1)
    assert ok.seqs() == [[0], [1], [2], [3], [4]]
    assert not flush(0.05)  # the stuck exporter still holds two batches
    delta = changed(before)
    assert (delta["timeout"], delta["queue_full"], delta["delivered"]) == (1, 2, 5)
    gate.set()
    assert flush(WAIT_S)
    assert stuck.seqs() == [[0], [1], [2]]  # the abandoned call returned late; its batch was already counted
    assert bus_stats()["exporters"] == {
        "stuck": {"delivered": 2, "failures": 3},
        "ok": {"delivered": 5, "failures": 0},
    }


# --- queue bounds ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "accepted", "delivered"),
    [("reject", [True] * 4 + [False] * 2, [0, 1, 2, 3]), ("drop_oldest", [True] * 6, [0, 3, 4, 5])],
)
def test_a_full_queue_drops_per_policy(
    gates: Callable[[], threading.Event], policy: str, accepted: list[bool], delivered: list[int]
) -> None:
    rec, gate = Recorder(), gates()
    configure_bus(
        exporters=[{"id": "a", "exporter": recording_exporter(rec, blocked_on_first_call(gate))}],
        batch_size=1,
        max_inflight_batches=1,
        max_queue_events=3,
        drop_policy=policy,
    )
    before = bus_stats()
    assert submit(env(0))
    assert rec.wait(lambda: len(rec.calls) == 1)
    assert [submit(env(i)) for i in range(1, 6)] == accepted[1:]
    assert bus_stats()["queued"] == 3
    assert changed(before) == {"queue_full": 2, "dropped": 2, "batches": 1}
    gate.set()
    assert flush(WAIT_S)
    assert [e["seq"] for e in rec.envelopes()] == delivered


def test_the_queue_is_bounded_by_bytes(gates: Callable[[], threading.Event]) -> None:
    rec, gate = Recorder(), gates()
    size = encoded_size(env(1))
    configure_bus(
        exporters=[{"id": "a", "exporter": recording_exporter(rec, blocked_on_first_call(gate))}],
        batch_size=1,
        max_inflight_batches=1,
        max_queue_events=100,
        max_queue_bytes=3 * size + size // 2,
        max_event_bytes=3 * size,
    )
    before = bus_stats()
    assert submit(env(0))
    assert rec.wait(lambda: len(rec.calls) == 1)
    assert [submit(env(i)) for i in range(1, 5)] == [True, True, True, False]
    stats = bus_stats()
    assert (stats["queued"], stats["queued_bytes"]) == (3, 3 * size)
    assert changed(before)["queue_full"] == 1
    gate.set()
    assert flush(WAIT_S)
    assert [e["seq"] for e in rec.envelopes()] == [0, 1, 2, 3]


def test_drop_oldest_drops_as_many_old_envelopes_as_the_new_ones_bytes_need(
    gates: Callable[[], threading.Event],
) -> None:
    rec, gate = Recorder(), gates()
    size = encoded_size(env(1))
    big = env(9, pad="x" * size)  # twice as large as the others
    assert encoded_size(big) == 2 * size
    configure_bus(
        exporters=[{"id": "a", "exporter": recording_exporter(rec, blocked_on_first_call(gate))}],
        batch_size=1,
        max_inflight_batches=1,
        max_queue_bytes=3 * size + size // 2,
        max_event_bytes=3 * size,
        drop_policy="drop_oldest",
    )
    before = bus_stats()
    assert submit(env(0))
    assert rec.wait(lambda: len(rec.calls) == 1)
    assert all(submit(env(i)) for i in (1, 2, 3))
    assert submit(big)
    assert bus_stats()["queued_bytes"] == 3 * size
    assert changed(before)["queue_full"] == 2
    gate.set()
    assert flush(WAIT_S)
    assert [e["seq"] for e in rec.envelopes()] == [0, 3, 9]


def test_an_envelope_over_max_event_bytes_is_dropped() -> None:
    rec = Recorder()
    limit = encoded_size(env(0, pad="x" * 50))
    configure_bus(exporters=[{"id": "a", "exporter": recording_exporter(rec)}], max_event_bytes=limit)
    before = bus_stats()
    assert submit(env(0, pad="x" * 50))  # exactly at the bound
    assert not submit(env(1, pad="x" * 51))
    assert not submit(env(2, pad="é" * 10))  # measured as sent: ASCII JSON, six bytes per escaped character
    assert flush(WAIT_S)
    assert [e["seq"] for e in rec.envelopes()] == [0]
    assert changed(before) == {"event_too_large": 2, "dropped": 2, "delivered": 1, "batches": 1}


def test_submit_never_raises_for_what_is_not_a_json_mapping() -> None:
    rec = Recorder()
    configure_bus(exporters=[{"id": "a", "exporter": recording_exporter(rec)}])
    loop: dict[str, Any] = {}
    loop["self"] = loop
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"d": deep}
    before = bus_stats()
    bad: list[Any] = [object(), ["a", "list"], None, {"x": float("nan")}, {"x": object()}, loop, deep, {(1,): 2}]
    assert [submit(b) for b in bad] == [False] * len(bad)
    assert changed(before) == {"invalid": len(bad), "dropped": len(bad)}
    assert submit(env(0)) and flush(WAIT_S) and rec.envelopes() == [env(0)]


def test_without_a_bus_submit_is_refused_and_counted() -> None:
    take_bus_dropped()
    assert not bus_configured()
    assert not submit(env(0)) and not submit(env(1))
    assert not flush(0.1)
    assert take_bus_dropped() == {"no_bus": 2}
    assert take_bus_dropped() == {}
    stats = bus_stats()
    assert (stats["configured"], stats["queued"], stats["exporters"]) == (False, 0, {})


# --- shutdown, flush, reconfiguration ----------------------------------------------------------------------------


def test_shutdown_drops_what_is_left_after_its_bound_and_shuts_the_exporters_down(
    gates: Callable[[], threading.Event],
) -> None:
    rec, gate = Recorder(), gates()
    configure_bus(
        exporters=[{"id": "a", "exporter": recording_exporter(rec, blocked_on_first_call(gate))}],
        batch_size=1,
        max_inflight_batches=1,
    )
    before = bus_stats()
    assert submit(env(0))
    assert rec.wait(lambda: len(rec.calls) == 1)
    assert all(submit(env(i)) for i in (1, 2, 3))
    started = time.monotonic()
    shutdown_bus(0.2)
    assert time.monotonic() - started < 2.0  # a stuck exporter does not hold the shutdown
    assert not bus_configured()
    assert changed(before) == {"shutdown": 4, "dropped": 4, "batches": 1}
    assert not submit(env(4))
    gate.set()  # the stuck call returns: its result is ignored, then the exporter is shut down
    assert rec.wait(lambda: rec.shutdowns == 1)
    assert changed(before) == {"shutdown": 4, "no_bus": 1, "dropped": 5, "batches": 1}


def test_flush_waits_for_delivery_and_returns_false_when_it_cannot(gates: Callable[[], threading.Event]) -> None:
    assert not flush(0.0)  # no bus
    rec, gate = Recorder(), gates()
    configure_bus(exporters=[{"id": "a", "exporter": recording_exporter(rec, blocked_on_first_call(gate))}])
    assert flush(0.0)  # nothing queued
    assert submit(env(0))
    started = time.monotonic()
    assert not flush(0.2)
    assert 0.2 <= time.monotonic() - started < 2.0
    gate.set()
    assert flush(WAIT_S) and rec.seqs() == [[0]]


def test_the_same_arguments_keep_the_bus_and_new_ones_replace_it_after_delivering_the_old_queue() -> None:
    old, new = Recorder(), Recorder()
    old_exporter = recording_exporter(old)
    arguments: dict[str, Any] = {
        "exporters": [{"id": "a", "exporter": old_exporter, "config": {"x": [1, 2]}}],
        "batch_size": 4,
    }
    assert configure_bus(**arguments)
    spelled_out = {"id": "a", "exporter": old_exporter, "config": {"x": [1, 2]}, "timeout_ms": 5000}
    assert configure_bus(exporters=[spelled_out], batch_size=4)
    assert old.built == 1  # same arguments (the default timeout spelled out): the exporter is not rebuilt
    assert all(submit(env(i)) for i in range(3))
    assert configure_bus(exporters=[{"id": "b", "exporter": recording_exporter(new)}], batch_size=4)
    assert [e["seq"] for e in old.envelopes()] == [0, 1, 2] and old.shutdowns == 1
    assert submit(env(3)) and flush(WAIT_S)
    assert new.seqs() == [[3]] and [e["seq"] for e in old.envelopes()] == [0, 1, 2]
    assert list(bus_stats()["exporters"]) == ["b"]
    assert not configure_bus(exporters=[])
    assert not bus_configured() and new.shutdowns == 1


def test_an_exporter_named_by_import_path_is_the_same_exporter_as_its_class(tmp_path: Path) -> None:
    config = {"path": str(tmp_path / "out.jsonl")}
    built = FileExporter.built
    assert configure_bus(exporters=[{"id": "f", "exporter": f"{__name__}:FileExporter", "config": config}])
    assert configure_bus(exporters=[{"id": "f", "exporter": FileExporter, "config": config}])
    assert configure_bus(exporters=[{"id": "f", "exporter": f"{__name__}.FileExporter", "config": config}])
    assert FileExporter.built == built + 1
    assert submit(env(0)) and flush(WAIT_S)
    assert [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()] == [[env(0)]]


# --- the inherited environment -----------------------------------------------------------------------------------


def test_a_forked_child_starts_without_the_parents_bus_and_configures_itself_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = Recorder()
    configure_bus(exporters=[{"id": "parent", "exporter": recording_exporter(parent)}])
    out = tmp_path / "child.jsonl"
    variable = bus_environment(
        {"exporters": [{"id": "file", "exporter": FileExporter, "config": {"path": str(out)}}], "batch_size": 8}
    )
    assert json.loads(variable[BUS_ENV])["exporters"][0]["exporter"] == f"{__name__}:FileExporter"
    monkeypatch.setenv(BUS_ENV, variable[BUS_ENV])
    pid = os.fork()
    if pid == 0:  # the child: no bus until the first submit reads the environment
        code = 1
        try:
            fresh = not bus_configured() and bus_stats()["delivered"] == 0
            ok = fresh and submit({"from": "child"}) and bus_configured() and flush(WAIT_S)
            stats = bus_stats()
            code = 0 if ok and stats["delivered"] == 1 and list(stats["exporters"]) == ["file"] else 1
            shutdown_bus(1.0)
        finally:
            os._exit(code)
    assert wait_child(pid) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [[{"from": "child"}]]
    assert submit({"from": "parent"}) and flush(WAIT_S)  # the parent's own bus is untouched
    assert parent.envelopes() == [{"from": "parent"}]


def test_a_bad_inherited_configuration_means_no_bus_in_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUS_ENV, json.dumps({"exporters": [{"id": "x", "exporter": "no_such_module_q:Cls"}]}))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with capture_logs() as logs:
                refused = not submit({"k": 1}) and not submit({"k": 2}) and not bus_configured()
            counted = bus_stats()["dropped_by_reason"]["no_bus"] == 2
            logged = [r.get("reason") for r in logs] == ["plugin_not_importable"]
            code = 0 if refused and counted and logged else 1
        finally:
            os._exit(code)
    assert wait_child(pid) == 0


def test_the_environment_entry_is_empty_without_exporters_and_refuses_what_another_process_cannot_import() -> None:
    assert bus_environment({"exporters": []}) == {BUS_ENV: ""}
    assert not configure_bus_from_environment({BUS_ENV: ""})
    local = recording_exporter(Recorder())
    with pytest.raises(ConfigError) as info:
        bus_environment({"exporters": [{"id": "local", "exporter": local}]})
    assert info.value.reason == "plugin_not_importable" and info.value.details["key"] == "exporter"
    with pytest.raises(ConfigError) as info:
        bus_environment({"exporters": [], "batch_sizes": 3})
    assert info.value.reason == "unknown_key"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "invalid_value"),
        ("[1, 2]", "invalid_value"),
        ('{"exporters": [], "surprise": 1}', "unknown_key"),
        ('{"batch_size": 3}', "unknown_key"),  # exporters is required
    ],
)
def test_a_malformed_environment_variable_is_a_config_error(raw: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        configure_bus_from_environment({BUS_ENV: raw})
    assert info.value.reason == reason and info.value.details["key"] == BUS_ENV
    assert not bus_configured()


# --- configuration validation ------------------------------------------------------------------------------------


class Unbuildable:
    def __init__(self, config: Mapping[str, Any]) -> None:
        raise RuntimeError(f"cannot start with {SECRET}")

    def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
        raise AssertionError("never built")


class Picky:
    def __init__(self, config: Mapping[str, Any]) -> None:
        raise ConfigError("endpoint missing", reason="missing_endpoint")

    def export(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
        raise AssertionError("never built")


def _good(**changes: Any) -> dict[str, Any]:
    return {"id": "e", "exporter": FileExporter, "config": {"path": "/dev/null"}, **changes}


@pytest.mark.parametrize(
    ("exporters", "reason", "key"),
    [
        ([_good(), _good()], "duplicate_id", "id"),
        ([_good(id=f"e{i}") for i in range(17)], "invalid_value", "exporters"),
        ([_good(exporter=Unbuildable)], "invalid_value", "exporter"),
        ([_good(exporter=Picky)], "missing_endpoint", "config"),
        ([_good(config={"token": SECRET, "bad": float("inf")})], "invalid_value", "config"),
        ([_good(config={"blob": "x" * (1024 * 1024)})], "invalid_value", "config"),
        ([_good(exporter=f"{__name__}:Missing{SECRET}")], "plugin_not_importable", "exporter"),
        ([_good(exporter="json:loads")], "invalid_value", "exporter"),  # importable, but not an exporter class
        ({"id": "e"}, "invalid_value", "exporters"),
        (["e"], "invalid_value", "exporters"),
        ([{"id": "e"}], "invalid_value", "exporter"),
    ],
)
def test_invalid_exporter_descriptors_are_config_errors_without_values(exporters: Any, reason: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        configure_bus(exporters=exporters)
    assert (info.value.reason, info.value.details["key"]) == (reason, key)
    assert SECRET not in str(info.value) and SECRET not in json.dumps(info.value.details)
    assert not bus_configured()


def test_max_event_bytes_may_not_exceed_max_queue_bytes() -> None:
    with pytest.raises(ConfigError) as info:
        configure_bus(exporters=[_good()], max_queue_bytes=1000, max_event_bytes=1001)
    assert (info.value.reason, info.value.details["key"]) == ("invalid_value", "max_event_bytes")
    assert configure_bus(exporters=[_good()], max_queue_bytes=1000, max_event_bytes=1000)


INT_BOUNDS = {
    "max_queue_events": (1, 65_536),
    "max_queue_bytes": (1, 256 * 1024 * 1024),
    "max_event_bytes": (1, 1024 * 1024),
    "batch_size": (1, 1024),
    "max_inflight_batches": (1, 16),
    "max_attempts": (1, 10),
    "retry_delay_ms": (0, 60_000),
}
not_an_int = st.one_of(st.booleans(), st.floats(), st.text(max_size=4), st.none(), st.lists(st.integers(), max_size=2))


def _out_of_range(low: int, high: int) -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1), not_an_int)


bus_level_cases = st.one_of(
    *[
        _out_of_range(low, high).map(lambda v, key=key: ({key: v}, "invalid_value", key))
        for key, (low, high) in INT_BOUNDS.items()
    ],
    st.one_of(st.text(max_size=12), not_an_int)
    .filter(lambda v: v not in ("reject", "drop_oldest"))
    .map(lambda v: ({"drop_policy": v}, "invalid_value", "drop_policy")),
)
descriptor_cases = st.one_of(
    st.text(min_size=1, max_size=12)
    .filter(lambda k: k not in EXPORTER_KEYS)
    .map(lambda k: ({k: 1}, "unknown_key", k if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", k) else "exporters")),
    st.sampled_from(["mode", "failure_policy", "module"]).map(lambda k: ({k: 1}, "unknown_key", k)),
    st.one_of(
        st.just(""),
        st.text(min_size=257, max_size=300),
        st.text(alphabet="é", min_size=129, max_size=200),  # 258+ UTF-8 bytes
        st.sampled_from(["a\nb", "tab\there", "\x7f"]),
        st.integers(),
        st.none(),
    ).map(lambda v: ({"id": v}, "invalid_value", "id")),
    _out_of_range(1, 120_000).map(lambda v: ({"timeout_ms": v}, "invalid_value", "timeout_ms")),
    st.one_of(
        st.integers(),
        st.lists(st.integers(), max_size=2),
        st.text(max_size=5),
        st.just({"x": float("nan")}),
        st.just({1: "non-string key"}),
    ).map(lambda v: ({"config": v}, "invalid_value", "config")),
    st.sampled_from(["", "nodots", "no_such_module_zz:Cls", "no_such_module_zz.Cls", f"{__name__}:Nope", ":X"]).map(
        lambda v: ({"exporter": v}, "plugin_not_importable", "exporter")
    ),
)


@pytest.fixture
def working_bus() -> Recorder:
    rec = Recorder()
    assert configure_bus(exporters=[{"id": "keep", "exporter": recording_exporter(rec)}], batch_size=5)
    return rec


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.one_of(bus_level_cases.map(lambda c: ("bus", *c)), descriptor_cases.map(lambda c: ("desc", *c))))
def test_invalid_arguments_are_refused_with_reason_and_key_and_the_previous_bus_keeps_working(
    working_bus: Recorder, case: tuple[str, dict[str, Any], str, str]
) -> None:
    level, change, reason, key = case
    descriptor = {"id": "new", "exporter": FileExporter, "config": {"path": "/dev/null"}}
    arguments: dict[str, Any] = {"exporters": [descriptor], "batch_size": 7}
    if level == "bus":
        arguments.update(change)
    else:
        descriptor.update(change)
    with pytest.raises(ConfigError) as info:
        configure_bus(**arguments)
    assert (info.value.reason, info.value.details["key"]) == (reason, key)
    seq = len(working_bus.envelopes())
    assert bus_configured() and list(bus_stats()["exporters"]) == ["keep"]
    assert submit(env(seq)) and flush(WAIT_S)
    assert working_bus.envelopes()[-1] == env(seq) and working_bus.built == 1
