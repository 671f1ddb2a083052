"""A SIGKILLed worker pool fails the jobs it held at once with ``worker_lost`` (issue 16, item 6c).

Every kind of caller is covered: a tier-1 actor, an inner (tier-2) actor, the facade, an agent's tool call
(``prompt``) and a Runner's tool call. Each must answer within a couple of seconds of the kill, long before the
jobs' own deadlines, and the model must see the tool's failure as a function-response error.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from actor_tests.agents.conftest import make_spawner
from actor_tests.runner.conftest import function_responses
from adk_actors import FunctionTool, Runner
from adk_actors.agents import prompt
from adk_actors.emulator import Emulator
from adk_actors.errors import WorkerError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing.actors import Job

from .helpers import PROBE, start_child, stop_child, unique, wait_exit, wait_status

JOB_S = 60.0
"""The jobs' own deadline: far beyond the bound the test asserts."""
ANSWER_S = 3.0
"""How soon after the kill every caller must have its answer."""


def _hang(seconds: float) -> None:
    time.sleep(seconds)


def lookup(city: str) -> dict:
    """Look a city up (hangs until its worker dies)."""
    time.sleep(3600)
    return {"city": city}


@pytest.fixture(scope="module")
def node(make_system: Callable[..., ActorSystemHandle]) -> ActorSystemHandle:
    # The module kills the pool four times within seconds: past the root's default window (3 restarts in 5 s) the
    # node would stop, as OTP's would.
    return make_system(
        agent_call_timeout_ms=int(JOB_S * 1000), agent_turn_timeout_ms=int(JOB_S * 2000), supervisor_intensity=20
    )


def _kill_pool_when_holding(node: ActorSystemHandle, jobs: int) -> float:
    """SIGKILL the worker pool once it holds ``jobs`` jobs (running or queued); the time of the kill."""
    status = wait_status(node, "workers", lambda s: s["running"] + s["queued"] >= jobs, timeout=30)
    os.kill(int(status["pid"]), signal.SIGKILL)
    killed_at = time.monotonic()
    assert wait_exit(int(status["pid"]), 5)
    for worker in status["workers"]:  # the hung workers do not outlive their pool
        assert not worker["pid"] or wait_exit(int(worker["pid"]), 5)
    return killed_at


def _answered_within(futures: list[Future[Any]], since: float, bound: float) -> list[BaseException | Any]:
    outcomes: list[BaseException | Any] = []
    for future in futures:
        try:
            outcomes.append(future.result(timeout=max(0.1, since + bound - time.monotonic())))
        except Exception as exc:
            outcomes.append(exc)
    assert time.monotonic() - since < bound, f"answered only after {time.monotonic() - since:.1f}s: {outcomes}"
    return outcomes


@pytest.mark.timeout(120)
def test_jobs_of_tier1_inner_and_facade_callers_fail_with_worker_lost_when_the_pool_is_sigkilled(
    node: ActorSystemHandle,
) -> None:
    tier1 = unique("t1")
    start_child(node, ChildSpec(id=tier1, actor=PROBE, register_as=tier1, restart="temporary"))
    inner = unique("t2")
    node.spawn(PROBE, id=inner, name=inner, restart="temporary")
    wait_status(node, "workers", lambda s: [w["state"] for w in s["workers"]] == ["idle", "idle"], timeout=30)
    try:
        with ThreadPoolExecutor(3) as pool:
            futures = [
                pool.submit(node.ask, tier1, Job(fn=_hang, args=(JOB_S,), timeout=JOB_S), JOB_S + 5),
                pool.submit(node.ask, inner, Job(fn=_hang, args=(JOB_S,), timeout=JOB_S), JOB_S + 5),
                pool.submit(node.run_job, _hang, JOB_S, timeout=JOB_S),
            ]
            # Two workers: two jobs run, the third waits in the pool's queue; all three are the pool's.
            killed_at = _kill_pool_when_holding(node, 3)
            outcomes = _answered_within(futures, killed_at, ANSWER_S)
        for outcome in outcomes:
            assert isinstance(outcome, WorkerError) and outcome.reason == "worker_lost", outcomes
        # The restarted pool runs jobs for the same callers again.
        assert node.ask(inner, Job(fn="os.getpid", timeout=10), 15) != os.getpid()
        assert node.ask(tier1, Job(fn="os.getpid", timeout=10), 15) != os.getpid()
        assert node.run_job("os.getpid", timeout=10) != os.getpid()
    finally:
        stop_child(node, tier1)
        node.stop_inner(node.resolve(inner))


@pytest.mark.timeout(120)
def test_a_job_held_by_the_registry_while_the_pool_is_down_is_watched_on_the_restarted_pool(
    node: ActorSystemHandle,
) -> None:
    inner = unique("t2")
    node.spawn(PROBE, id=inner, name=inner, restart="temporary")
    try:
        assert node.ask(inner, Job(fn="os.getpid", timeout=10), 15) != os.getpid()  # its host knows the pool
        # With the pool's supervisor (the root) stopped, the killed pool is not restarted yet: the job is parked
        # at the registry and later delivered to the restarted pool, without the Resolved of an immediate forward.
        pool_pid = int(node.ask("workers", GetStatus())["pid"])
        os.kill(node.root_pid, signal.SIGSTOP)
        try:
            os.kill(pool_pid, signal.SIGKILL)
            assert wait_exit(pool_pid, 5)
            with ThreadPoolExecutor(1) as pool:
                future = pool.submit(node.ask, inner, Job(fn=_hang, args=(JOB_S,), timeout=JOB_S), JOB_S + 5)
                wait_status(node, node.registry, lambda s: s["parked"].get("workers", 0) >= 1, timeout=10)
                os.kill(node.root_pid, signal.SIGCONT)
                killed_at = _kill_pool_when_holding(node, 1)
                [outcome] = _answered_within([future], killed_at, ANSWER_S)
        finally:
            os.kill(node.root_pid, signal.SIGCONT)
        assert isinstance(outcome, WorkerError) and outcome.reason == "worker_lost", outcome
    finally:
        node.stop_inner(node.resolve(inner))


@pytest.mark.timeout(120)
def test_an_agents_tool_call_fails_with_worker_lost_and_the_model_sees_it_when_the_pool_is_sigkilled(
    node: ActorSystemHandle,
) -> None:
    spawn, cleanup = make_spawner(node)
    with Emulator() as emu:
        emu.set_script(
            {
                "rules": [
                    {
                        "when": {"has_function_response": False},
                        "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]},
                    },
                    {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}},
                ]
            }
        )
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        try:
            agent = spawn(unique("Lost"), config, [FunctionTool(lookup)])
            runner = Runner(agent, "recovery", ActorSessionService(system=node), system=node)
            wait_status(node, "workers", lambda s: [w["state"] for w in s["workers"]] == ["idle", "idle"], timeout=30)
            with ThreadPoolExecutor(2) as pool:
                futures = [
                    pool.submit(prompt, agent, "Look up Oslo", system=node, timeout=JOB_S),
                    pool.submit(runner.run, "u1", unique("s"), "Look up Oslo"),
                ]
                killed_at = _kill_pool_when_holding(node, 2)
                answers = _answered_within(futures, killed_at, ANSWER_S)
            for answer in answers:
                assert isinstance(answer, str) and answer.startswith("Tool said:") and "worker_lost" in answer, answers
            tool_errors = [
                r["response"]["error"]["reason"] for request in emu.requests for r in function_responses(request)
            ]
            assert tool_errors == ["worker_lost", "worker_lost"]
            assert node.ask("workers", GetStatus())["pid"] != 0  # the pool was restarted by its supervisor
        finally:
            cleanup()
