"""Stable runs on a real node: not owned by the caller, wait/status/subscribe/cancel, host loss, retention."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import adk_actors
from adk_actors.errors import RunError, RunNotFound
from adk_actors.runs import Cancelled, Completed, Failed, ReplayGap
from adk_actors.runs import api as run_api
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port
from adk_actors.testing.runs import FetchBody, JobBody, ScriptedBody


@pytest.fixture(scope="module")
def node(tmp_module_dir: Path) -> Iterator[ActorSystemHandle]:
    handle = adk_actors.start(Settings(admin_port=reserved_port(), data_dir=str(tmp_module_dir), workers=2))
    try:
        yield handle
    finally:
        handle.stop()


def test_a_run_completes_and_late_subscribers_replay_then_get_the_same_terminal(node: ActorSystemHandle) -> None:
    run_id = run_api.start(ScriptedBody(events=("a", "b", "c"), output="answer"), system=node)
    assert run_api.wait(run_id, 10, system=node) == Completed("answer")
    items = list(run_api.subscribe(run_id, system=node))
    assert [(i.seq, i.item) for i in items] == [(1, "a"), (2, "b"), (3, "c"), (4, Completed("answer"))]
    assert items[-1].terminal and run_api.status(run_id, system=node)["state"] == "completed"
    assert [i.seq for i in run_api.subscribe(run_id, after_seq=2, system=node)] == [3, 4]


def test_live_subscription_streams_events_as_they_happen(node: ActorSystemHandle) -> None:
    run_id = run_api.start(ScriptedBody(events=tuple(range(5)), interval_s=0.05), system=node)
    got = [(i.seq, i.item) for i in run_api.subscribe(run_id, system=node)]
    assert got == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, Completed("done"))]


def test_a_small_buffer_reports_a_replay_gap(node: ActorSystemHandle) -> None:
    run_id = run_api.start(ScriptedBody(events=tuple(range(6))), max_buffered_events=2, system=node)
    run_api.wait(run_id, 10, system=node)
    items = list(run_api.subscribe(run_id, system=node))
    assert items[0].item == ReplayGap(from_seq=1, resumes_at=5)
    assert [i.seq for i in items[1:]] == [5, 6, 7]


def test_credit_subscriber_disconnects_and_resumes_from_its_last_sequence(node: ActorSystemHandle) -> None:
    run_id = run_api.start(ScriptedBody(events=tuple(range(6)), interval_s=0.02), system=node)
    first = run_api.subscribe(run_id, credit=True, system=node)
    consumed = [next(first).seq, next(first).seq]
    first.close()  # disconnect mid-run
    rest = [i.seq for i in run_api.subscribe(run_id, after_seq=consumed[-1], credit=True, system=node)]
    assert consumed + rest == list(range(1, 8))


@pytest.fixture(scope="module")
def quiet_node(make_system: Any) -> ActorSystemHandle:
    """A node logging at ``warning`` (as deployed): the lost-message race below needs its speed to show."""
    handle: ActorSystemHandle = make_system(log_level="warning")
    return handle


@pytest.mark.parametrize("credit", [True, False], ids=["credit", "push"])
def test_two_hundred_concurrent_subscribers_of_a_streaming_runner_run_each_get_every_message(
    quiet_node: ActorSystemHandle, credit: bool
) -> None:
    system = quiet_node
    # Every subscriber is a thread with its own endpoint that acknowledges (credit) with casts: casts from many
    # threads at once once went through the system's shared endpoint, which is not thread-safe, and messages were
    # lost (subscribers stalled); and a run's first message can overtake the reply to SubscribeRun.
    from adk_actors import Runner
    from adk_actors.agents import spawn_agent, stop_agent
    from adk_actors.devtools.emulator_proc import emulator_process
    from adk_actors.sessions.actor import ActorSessionService

    name = f"Subscribed{os.getpid()}{int(credit)}"
    script = {"rules": [{"when": {}, "respond": {"text": "Everyone is here now.", "delay_ms": 1500}}]}
    with emulator_process(script=script) as emu:  # in a process of its own, as a real model is
        spawn_agent(name, {"provider": "gemini", "base_url": emu.base_url, "api_key": "k"}, system=system)
        try:
            runner = Runner(name, "subs", ActorSessionService(system=system), system=system, streaming_mode="text")
            run_id = run_api.start(runner, "u", f"s{int(credit)}", "hello", system=system)

            def read(_: int) -> list[int]:
                return [i.seq for i in run_api.subscribe(run_id, credit=credit, idle_timeout=20, system=system)]

            with ThreadPoolExecutor(200) as pool:
                seen = list(pool.map(read, range(200)))
            expected = [i.seq for i in run_api.subscribe(run_id, system=system)]
        finally:
            stop_agent(name, system=system)
    assert len(expected) >= 3 and seen == [expected] * 200


@pytest.mark.serial  # a 1-second bound on the cancel reaching the call: measured with nothing else running
def test_cancel_during_a_slow_call_returns_promptly_and_cancels_the_call(node: ActorSystemHandle) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    disconnected = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        if conn.recv(1) == b"":
            disconnected.set()
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        run_id = run_api.start(FetchBody(url=f"http://127.0.0.1:{listener.getsockname()[1]}/slow"), system=node)
        items = run_api.subscribe(run_id, system=node)
        assert next(items).item == {"fetching": True}  # the call is in flight
        t0 = time.monotonic()
        assert run_api.cancel(run_id, "user", system=node) == Cancelled("user")
        assert time.monotonic() - t0 < 1.0
        assert disconnected.wait(1.0), "the slow call was not cancelled"
        assert next(items).item == Cancelled("user")
        assert run_api.wait(run_id, 5, system=node) == Cancelled("user")
    finally:
        listener.close()


def test_many_runs_have_unique_ids_and_matched_results(node: ActorSystemHandle) -> None:
    def one(i: int) -> tuple[str, object]:
        run_id = run_api.start(ScriptedBody(events=(i,), output=f"out-{i}"), system=node)
        return run_id, run_api.wait(run_id, 30, system=node)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(200)))
    assert len({r for r, _ in results}) == 200
    assert [o for _, o in results] == [Completed(f"out-{i}") for i in range(200)]


def test_a_job_body_runs_user_code_in_a_worker(node: ActorSystemHandle) -> None:
    run_id = run_api.start(JobBody(fn=CallableRef.by_name("builtins.pow"), args=(2, 5)), system=node)
    assert run_api.wait(run_id, 10, system=node) == Completed(32)


def test_a_finished_run_is_gone_after_its_retention(node: ActorSystemHandle) -> None:
    run_id = run_api.start(ScriptedBody(output="x"), retention_ms=100, system=node)
    assert run_api.wait(run_id, 10, system=node) == Completed("x")
    deadline = time.monotonic() + 5
    while True:
        try:
            run_api.status(run_id, system=node)
        except RunNotFound:
            break
        assert time.monotonic() < deadline, "the run outlived its retention"


def test_invalid_options_are_run_errors(node: ActorSystemHandle) -> None:
    with pytest.raises(RunError) as info:
        run_api.start(ScriptedBody(), max_buffered_events=0, system=node)
    assert info.value.reason == "invalid_run_options"


def test_a_host_sigkilled_during_runs_fails_each_exactly_once_with_host_lost(fresh_node: ActorSystemHandle) -> None:
    node = fresh_node
    slow = ScriptedBody(events=tuple(range(100)), interval_s=1.0)
    run_ids = [run_api.start(slow, system=node) for _ in range(12)]
    on_host0 = [r for r in run_ids if place(r, node.settings.hosts) == 0]
    others = [r for r in run_ids if r not in on_host0]
    assert on_host0 and others
    waiter_results: list[object] = []
    waiter = threading.Thread(target=lambda: waiter_results.append(run_api.wait(on_host0[0], 20, system=node)))
    waiter.start()
    sub = run_api.subscribe(on_host0[-1], system=node)
    assert next(sub).seq == 1
    host_pid = node.ask("host-0", GetStatus())["pid"]
    t0 = time.monotonic()
    os.kill(host_pid, signal.SIGKILL)
    waiter.join(5)
    assert waiter_results == [Failed("host_lost", {"host_id": 0})] and time.monotonic() - t0 < 5
    assert list(sub)[-1].item == Failed("host_lost", {"host_id": 0})
    for run_id in on_host0:
        assert run_api.wait(run_id, 5, system=node) == Failed("host_lost", {"host_id": 0})
    for run_id in others:
        assert run_api.status(run_id, system=node)["state"] == "running"
        assert run_api.cancel(run_id, system=node) == Cancelled("cancelled")
    assert node.ask("runs", GetStatus())["host_lost"] == len(on_host0)


def test_a_run_outlives_the_attached_process_that_started_it(node: ActorSystemHandle) -> None:
    script = (
        f"import sys\n"
        f"from adk_actors.runtime.system import attach\n"
        f"from adk_actors.settings import Settings\n"
        f"from adk_actors.runs import api\n"
        f"from adk_actors.testing.runs import ScriptedBody\n"
        f"h = attach({node.port}, Settings(hosts={node.settings.hosts}), make_default=False)\n"
        f"print(api.start(ScriptedBody(events=(1, 2, 3), interval_s=0.3, output='survived'), system=h),"
        f" flush=True)\n"
        f"import time; time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        proc.send_signal(signal.SIGKILL)  # process A dies right after starting the run
        proc.wait(10)
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from adk_actors.runtime.system import attach\n"
                f"from adk_actors.settings import Settings\n"
                f"from adk_actors.runs import api\n"
                f"h = attach({node.port}, Settings(hosts={node.settings.hosts}),"
                f" make_default=False)\n"
                f"print(api.wait({run_id!r}, 20, system=h))\n",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert other.returncode == 0, other.stderr[-1000:]
        assert other.stdout.strip() == "Completed(output='survived')"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def fresh_node(tmp_path: Path) -> Iterator[ActorSystemHandle]:
    handle = adk_actors.start(Settings(admin_port=reserved_port(), data_dir=str(tmp_path)))
    try:
        yield handle
    finally:
        handle.stop()
