"""Stable runs of Runner invocations (``runs.start(runner, user_id, session_id, input)``) on real nodes against the
Gemini emulator: volume, resumable credit subscriptions, cancellation of a slow model call, SIGKILL of a host,
runs that outlive the attached process that started them, and status latency under a slow subscriber.

Each test owns its node (a module node, or one of its own when it kills or floods it), so admission and host
statuses count only this module's runs.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from pathlib import Path
from typing import Any

import pytest

import adk_actors
from actor_tests.agents.conftest import config_for, unique
from actor_tests.runner.conftest import until
from actor_tests.runner.runs_proxy import CutRelay
from adk_actors import FunctionTool, Runner, runs, spawn_agent, stop_agent
from adk_actors.agents.api import local_id
from adk_actors.emulator import Emulator
from adk_actors.events import Event
from adk_actors.runs import Cancelled, Completed, Failed
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name, place
from adk_actors.runtime.system import ActorSystemHandle, group_pids
from adk_actors.sessions import SessionRef, SqlSessionService
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port

APP = "runner_runs"


@contextlib.contextmanager
def _own_node(data_dir: Path, **settings: Any) -> Iterator[ActorSystemHandle]:
    """A node of the caller's own; stopped at the end, and (unless the block failed) checked to leave no process."""
    handle = adk_actors.start(Settings(admin_port=reserved_port(), data_dir=str(data_dir), **settings))
    try:
        yield handle
    finally:
        handle.stop()
    assert group_pids(handle.pgid) == [], "a process of the node outlived stop()"


@pytest.fixture(scope="module")
def node(tmp_module_dir: Path) -> Iterator[ActorSystemHandle]:
    with _own_node(tmp_module_dir, hosts=2, workers=2) as handle:
        yield handle


@pytest.fixture
def agent_on(node: ActorSystemHandle, emu: Emulator) -> Iterator[Callable[..., str]]:
    """``agent_on(prefix, tools=(), base_url=None)``: a uniquely named agent on the module node, stopped after the
    test; returns its name."""
    started: list[str] = []

    def make(prefix: str, tools: Any = (), base_url: str | None = None) -> str:
        name = unique(prefix)
        config = config_for(emu)
        if base_url is not None:
            config["base_url"] = base_url
        spawn_agent(name, config, tools, system=node)
        started.append(name)
        return name

    yield make
    for name in started:
        stop_agent(name, system=node)


# ---- helpers ---------------------------------------------------------------------------------------------------


def _admission(node: ActorSystemHandle) -> dict[str, Any]:
    return dict(node.ask("admission", GetStatus()))


def _permits_back(node: ActorSystemHandle, seconds: float = 5.0) -> dict[str, Any]:
    return until(
        lambda: (s := _admission(node))["in_use"] == 0 and s["queued"] == 0 and s,
        seconds,
        "every admission permit released",
    )


def _run_id_on(host: int, hosts: int) -> str:
    while place(run_id := uuid.uuid4().hex, hosts) != host:
        pass
    return run_id


def _agent_name_on(prefix: str, host: int, hosts: int) -> str:
    while place(local_id(name := unique(prefix)), hosts) != host:
        pass
    return name


def _session(service: Any, user_id: str, session_id: str) -> list[Event]:
    return list(service.get_session(SessionRef(app_name=APP, user_id=user_id, session_id=session_id)).events)


def _settled(future: Future[Any]) -> Any:
    """A finished future's value, or its exception (so an assertion shows every run's fate at once)."""
    error = future.exception()
    return future.result() if error is None else error


def _run_actors(node: ActorSystemHandle) -> int:
    """Run actors alive on all hosts (the host lists its first 200 inner actors, and counts them all)."""
    total = 0
    for host in range(node.settings.hosts):
        status = node.ask(host_name(host), GetStatus())
        listed_other = sum(1 for inner in status["inner"] if inner["actor"] != "RunActor")
        total += status["inner_actors"] - listed_other
    return total


# ---- 1. volume --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(420)  # ~50 s on an idle 2-core machine; the margin is for a loaded CI box
def test_a_thousand_concurrent_runner_runs_complete_with_their_own_output_and_leak_nothing(
    emu: Emulator, tmp_path: Path
) -> None:
    """1,000 runs, 8 in flight at a time (admission queue with an agent limit of 4, so half of them wait for a
    permit): each completes with the answer to its own input, its session holds exactly that invocation; then no
    run actor outlives its retention and no permit is left in use."""
    total, in_flight = 1000, 8
    with _own_node(tmp_path, hosts=2, workers=1, default_agent_limit=4, default_queue_timeout=60000) as big:
        name = unique("Volume")
        spawn_agent(name, config_for(emu), system=big)
        svc = ActorSessionService(system=big)
        runner = Runner(name, APP, svc, system=big, admission_control={"overflow": "queue", "queue_timeout": 60000})
        tag = uuid.uuid4().hex[:6]

        def one(i: int) -> tuple[str, str, Any, list[Event]]:
            text = f"stable run {i} of {tag}"
            run_id = runs.start(runner, "volume-user", f"volume-{i}", text, retention_ms=200, system=big)
            outcome = runs.wait(run_id, 120, system=big)
            return run_id, text, outcome, _session(svc, "volume-user", f"volume-{i}")

        with ThreadPoolExecutor(in_flight) as pool:
            results = list(pool.map(one, range(total)))

        assert len({run_id for run_id, *_ in results}) == total
        wrong = [(text, outcome) for _, text, outcome, _ in results if outcome != Completed(f"You said: {text}")]
        assert wrong == [], f"{len(wrong)} runs did not complete with their own answer, e.g. {wrong[:3]}"
        bad_sessions = []
        for _, text, _, events in results:
            shape = [(e.author, e.partial, e.is_final, e.text()) for e in events]
            if (
                shape != [("user", False, False, text), (name, False, True, f"You said: {text}")]
                or len({e.invocation_id for e in events}) != 1
            ):
                bad_sessions.append(shape)
        assert bad_sessions == [], f"{len(bad_sessions)} sessions do not hold exactly their invocation"

        until(lambda: _run_actors(big) == 0, 10, "every run actor retired after its 200 ms retention")
        index = until(
            lambda: (s := dict(big.ask("runs", GetStatus())))["runs"] == 0 and s,
            10,
            "the run index forgot every run after its retention",
        )
        assert index["running"] == 0 and index["host_lost"] == 0
        admission = _permits_back(big, 5)
        assert admission["granted_total"] == total and admission["rejected_total"] == 0


# ---- 2. resumable credit subscription ---------------------------------------------------------------------------


def test_a_credit_subscriber_that_reconnects_after_its_last_seq_gets_the_rest_once_then_the_terminal(
    node: ActorSystemHandle, emu: Emulator, agent_on: Callable[..., str]
) -> None:
    answer = " ".join(f"word{i}" for i in range(120))
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "lookup", "args": {"topic": "runs"}}]},
                },
                {"when": {"has_function_response": True}, "respond": {"text": answer, "chunks": 300, "delay_ms": 1500}},
            ]
        }
    )

    def lookup(topic: str) -> dict:
        """Look a topic up."""
        return {"topic": topic, "found": True}

    name = agent_on("Resume", [FunctionTool(lookup)])
    svc = ActorSessionService(system=node)
    runner = Runner(name, APP, svc, system=node, streaming_mode="text")
    run_id = runs.start(runner, "resume-user", "resume-session", "Look up runs, please.", system=node)

    first = runs.subscribe(run_id, credit=True, system=node)
    consumed = [next(first), next(first)]  # the user event and the model's function call
    first.close()  # disconnect while the second model call is still delayed
    assert runs.status(run_id, system=node)["state"] == "running"

    rest = list(runs.subscribe(run_id, credit=True, after_seq=consumed[-1].seq, system=node))
    items = consumed + rest
    assert [i.seq for i in items] == list(range(1, len(items) + 1)), "a gap or a duplicate"
    assert [i.terminal for i in items].count(True) == 1 and items[-1].terminal
    assert items[-1].item == Completed(answer)
    events = [i.item for i in items[:-1]]
    assert sum(1 for e in events if e.partial) >= 2, "the second model call streamed several partial events"
    stored = _session(svc, "resume-user", "resume-session")
    assert [e.id for e in events] == [e.id for e in stored]
    assert stored[-1].is_final and stored[-1].text() == answer


# ---- 3. cancellation ----------------------------------------------------------------------------------------------


def test_cancel_during_a_slow_model_call_cuts_the_request_and_releases_the_permit(
    node: ActorSystemHandle, emu: Emulator, agent_on: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "far too late", "delay_ms": 10000}}]})
    with CutRelay(emu.port) as relay:
        name = agent_on("Cancel", base_url=relay.base_url)
        runner = Runner(
            name,
            APP,
            ActorSessionService(system=node),
            system=node,
            admission_control={"overflow": "queue", "queue_timeout": 5000},
        )
        run_id = runs.start(runner, "cancel-user", "cancel-session", "Take your time.", system=node)
        assert relay.forwarded.wait(10), "the model request never reached the emulator"
        assert _admission(node)["in_use"] == 1

        t0 = time.monotonic()
        outcome = runs.cancel(run_id, system=node)
        elapsed = time.monotonic() - t0
        assert outcome == Cancelled("cancelled") and elapsed < 2.0, (outcome, elapsed)
        assert relay.cut.wait(2.0), "the in-flight model request was not closed"
        _permits_back(node, 2.0)
        assert runs.wait(run_id, 5, system=node) == outcome


def test_cancel_during_a_hanging_worker_tool_kills_its_worker_and_the_run_ends_cancelled(
    node: ActorSystemHandle, emu: Emulator, agent_on: Callable[..., str]
) -> None:
    """The tool tells the test its process id over a socket (a cross-process signal), then hangs; cancelling the
    run kills that worker process promptly, the pool replaces it and the permit comes back."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(30)
        port = listener.getsockname()[1]

        def lookup(city: str) -> dict:
            """Look a city up (hangs)."""
            with socket.create_connection(("127.0.0.1", port)) as conn:
                conn.sendall(str(os.getpid()).encode())
            time.sleep(120)
            return {"city": city}

        emu.set_script(
            {
                "rules": [
                    {
                        "when": {"has_function_response": False},
                        "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]},
                    },
                    {"when": {}, "respond": {"text": "never"}},
                ]
            }
        )
        name = agent_on("HangingTool", [FunctionTool(lookup)])
        runner = Runner(
            name,
            APP,
            ActorSessionService(system=node),
            system=node,
            admission_control={"overflow": "queue", "queue_timeout": 5000},
        )
        killed_before = node.ask("workers", GetStatus())["killed"]
        run_id = runs.start(runner, "hang-user", "hang-session", "Look up Oslo.", system=node)
        conn, _ = listener.accept()
        with conn:
            pid = int(conn.recv(64))

    assert pid in [w["pid"] for w in node.ask("workers", GetStatus())["workers"]], "the tool runs in a pool worker"
    exited = os.pidfd_open(pid)
    try:
        t0 = time.monotonic()
        outcome = runs.cancel(run_id, system=node)
        assert outcome == Cancelled("cancelled") and time.monotonic() - t0 < 2.0, outcome
        ready, _, _ = select.select([exited], [], [], 5.0)
        assert ready, "the worker running the cancelled tool is still alive"
    finally:
        os.close(exited)
    pool = until(
        lambda: (
            (s := node.ask("workers", GetStatus()))["running"] == 0
            and len(s["workers"]) == 2
            and all(w["pid"] != pid for w in s["workers"])
            and s
        ),
        10,
        "the killed worker replaced",
    )
    assert pool["killed"] == killed_before + 1
    _permits_back(node, 2.0)
    assert runs.wait(run_id, 5, system=node) == outcome


# ---- 4. host loss -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("victim", ["run_host", "agent_host"])
def test_a_sigkilled_host_fails_each_affected_runner_run_once_and_frees_its_permits(
    victim: str, emu: Emulator, tmp_path: Path
) -> None:
    """Six runs (four admitted, two queued for a permit) are in a slow model call when one host is SIGKILLed:
    the host of their run actors (``run_host``; the agent lives on the other host) or the agent's host
    (``agent_host``; the run actors live on the other host). Every run ends with exactly one ``Failed`` within
    5 s — ``host_lost`` when its run actor's host died — seen by a blocked waiter and a subscriber; the permits
    come back (exactly ``limit`` of ``limit + 1`` new runs are admitted, the last is ``busy``), and the user events
    committed to the SQLite session store before the kill are still there."""
    limit, hosts, victim_host, other_host = 4, 2, 0, 1
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "too late", "delay_ms": 30000}}]})
    # The pool is left after the node is stopped: a waiter still blocked then fails at once.
    with (
        ThreadPoolExecutor(limit + 4) as pool,
        _own_node(
            tmp_path / "node", hosts=hosts, workers=1, global_limit=limit, default_agent_limit=limit, overflow="queue"
        ) as sick,
    ):
        agent_host = victim_host if victim == "agent_host" else other_host
        run_host = other_host if victim == "agent_host" else victim_host
        name = _agent_name_on("HostLoss", agent_host, hosts)
        spawn_agent(name, config_for(emu), system=sick)
        svc = SqlSessionService(f"sqlite:///{tmp_path / 'sessions.db'}")
        queued = Runner(name, APP, svc, system=sick, admission_control={"overflow": "queue", "queue_timeout": 60000})

        run_ids = [
            runs.start(queued, "loss-user", f"loss-{i}", f"slow {i}", run_id=_run_id_on(run_host, hosts), system=sick)
            for i in range(limit)
        ]
        subscriptions = [runs.subscribe(run_id, system=sick) for run_id in run_ids]
        committed = [next(sub).item for sub in subscriptions]  # stored before it is published
        for sub in subscriptions[1:]:
            sub.close()
        run_ids += [
            runs.start(queued, "loss-user", f"loss-{i}", f"slow {i}", run_id=_run_id_on(run_host, hosts), system=sick)
            for i in range(limit, limit + 2)
        ]
        until(
            lambda: (s := _admission(sick))["in_use"] == limit and s["queued"] == 2,
            10,
            "four runs admitted and two queued",
        )

        waiters = [pool.submit(runs.wait, run_id, 8, system=sick) for run_id in run_ids]
        subscriber = pool.submit(list, subscriptions[0])
        host_pid = sick.ask(host_name(victim_host), GetStatus())["pid"]
        t0 = time.monotonic()
        os.kill(host_pid, signal.SIGKILL)
        done, _ = wait_futures([*waiters, subscriber], timeout=6)
        elapsed = time.monotonic() - t0
        outcomes = [_settled(w) if w in done else "no outcome" for w in waiters]
        assert all(isinstance(o, Failed) for o in outcomes) and elapsed < 5, (outcomes, elapsed)
        if victim == "run_host":
            assert outcomes == [Failed("host_lost", {"host_id": victim_host})] * len(run_ids)
            assert sick.ask("runs", GetStatus())["host_lost"] == len(run_ids)
        tail = _settled(subscriber)
        assert isinstance(tail, list), tail
        assert [i.terminal for i in tail] == [True] and tail[-1].item == outcomes[0]
        assert [runs.wait(run_id, 5, system=sick) for run_id in run_ids] == outcomes  # one outcome per run

        admission = _permits_back(sick, 5)
        rejected = admission["rejected_total"]
        fresh = Runner(name, APP, svc, system=sick, admission_control={"overflow": "reject"})
        new_ids = [
            runs.start(
                fresh, "loss-user", f"after-{i}", f"slow after {i}", run_id=_run_id_on(other_host, hosts), system=sick
            )
            for i in range(limit + 1)
        ]
        new_waits = {pool.submit(runs.wait, run_id, 15, system=sick): run_id for run_id in new_ids}
        done, _ = wait_futures(new_waits, timeout=15, return_when=FIRST_COMPLETED)
        busy = [(new_waits[f], f.result()) for f in done]
        assert [outcome for _, outcome in busy] == [Failed("busy", {"type": "PolicyDenied", "agent": name})]
        admission = _admission(sick)
        assert admission["in_use"] == limit and admission["rejected_total"] == rejected + 1
        admitted = [run_id for run_id in new_ids if run_id != busy[0][0]]
        assert [runs.cancel(run_id, system=sick) for run_id in admitted] == [Cancelled("cancelled")] * limit
        _permits_back(sick, 5)

        for i, user_event in enumerate(committed):
            stored = _session(svc, "loss-user", f"loss-{i}")
            assert (stored[0].id, stored[0].author, stored[0].text()) == (user_event.id, "user", f"slow {i}")


# ---- 5. runs outlive their starter --------------------------------------------------------------------------------


def _attached(node: ActorSystemHandle, body: str) -> str:
    return (
        f"from adk_actors import Runner, runs\n"
        f"from adk_actors.runtime.system import attach\n"
        f"from adk_actors.sessions.actor import ActorSessionService\n"
        f"from adk_actors.settings import Settings\n"
        f"h = attach({node.port}, Settings(hosts={node.settings.hosts}), make_default=False)\n" + body
    )


def test_a_runner_run_outlives_the_sigkilled_attached_process_that_started_it(
    node: ActorSystemHandle, emu: Emulator, agent_on: Callable[..., str]
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "You said: {user_text}", "delay_ms": 2500}}]})
    name = agent_on("Outlive")
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _attached(
                node,
                (
                    f"runner = Runner({name!r}, {APP!r}, ActorSessionService(), system=h)\n"
                    f"print(runs.start(runner, 'outlive-user', 'outlive-session', 'Survive me.', system=h),"
                    f" flush=True)\n"
                    f"import sys; sys.stdin.read()\n"
                ),
            ),
        ],  # stays attached until it is killed
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert starter.stdout is not None
        run_id = starter.stdout.readline().strip()
        assert run_id, starter.stderr.read() if starter.stderr else ""
        starter.send_signal(signal.SIGKILL)
        assert starter.wait(10) == -signal.SIGKILL
        assert runs.status(run_id, system=node)["state"] == "running"

        wait_script = _attached(node, f"print(runs.wait({run_id!r}, 30, system=h))\n")
        waiter = subprocess.run(
            [sys.executable, "-c", wait_script], capture_output=True, text=True, timeout=60, check=False
        )
        assert waiter.returncode == 0, waiter.stderr[-2000:]
        assert waiter.stdout.strip() == "Completed(output='You said: Survive me.')"
        stored = _session(ActorSessionService(system=node), "outlive-user", "outlive-session")
        assert [(e.author, e.is_final) for e in stored] == [("user", False), (name, True)]
    finally:
        if starter.poll() is None:
            starter.kill()
        starter.wait()
        for stream in (starter.stdin, starter.stdout, starter.stderr):
            if stream is not None:
                stream.close()


# ---- 6. status latency under a slow subscriber --------------------------------------------------------------------


def test_status_of_another_run_stays_fast_while_a_credit_subscriber_acks_every_200_ms(
    node: ActorSystemHandle, emu: Emulator, agent_on: Callable[..., str]
) -> None:
    """A credit subscriber consumes a long streamed run one item per 200 ms; meanwhile ``runs.status`` of another
    run on the same host is asked once per consumed item (20 asks). Asserted: the maximum is under 50 ms (p50 is
    reported in the failure message)."""
    answer = "".join(f"{i % 10}" for i in range(1200))
    emu.set_script(
        {
            "rules": [
                {"when": {"user_text_contains": "stream"}, "respond": {"text": answer, "chunks": 1200}},
                {"when": {}, "respond": {"text": "eventually", "delay_ms": 30000}},
            ]
        }
    )
    name = agent_on("Latency")
    runner = Runner(name, APP, ActorSessionService(system=node), system=node, streaming_mode="text")
    host = place(local_id(name), node.settings.hosts)
    streamed = runs.start(
        runner,
        "latency-user",
        "latency-stream",
        "Please stream a lot.",
        run_id=_run_id_on(host, node.settings.hosts),
        system=node,
    )
    other = runs.start(
        runner,
        "latency-user",
        "latency-other",
        "Wait for it.",
        run_id=_run_id_on(host, node.settings.hosts),
        system=node,
    )
    assert runs.wait(streamed, 30, system=node) == Completed(answer)
    assert runs.status(streamed, system=node)["last_seq"] >= 22

    asks = 20
    consumed: queue.Queue[int] = queue.Queue()

    def consume() -> None:
        items = runs.subscribe(streamed, credit=True, system=node)
        with contextlib.closing(items):
            for item in items:
                consumed.put(item.seq)
                if item.seq > asks:
                    return
                time.sleep(0.2)  # the slow consumer under test: one ack per 200 ms

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        runs.status(other, system=node)  # this thread's endpoint is open before measuring
        latencies = []
        for _ in range(asks):
            consumed.get(timeout=10)
            t0 = time.perf_counter()
            status = runs.status(other, system=node)
            latencies.append(time.perf_counter() - t0)
            assert status["state"] == "running"
        p50, worst = statistics.median(latencies) * 1000, max(latencies) * 1000
        assert worst < 50, f"status latency p50 {p50:.1f} ms, max {worst:.1f} ms"
    finally:
        consumer.join(30)
        runs.cancel(other, system=node)
