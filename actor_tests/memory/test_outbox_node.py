"""Durable ingestion with real nodes: a Runner enqueues before it answers and the drainer actor adds the entries;
a node SIGKILLed mid-ingestion leaves a claimed, half-applied outbox that a restarted node's drainer takes over
once the lease expires (database clock), ending with exact entry counts and no duplicate mutation."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actor_tests.memory.outbox_helpers import BlockingMemory, CountingMemory
from actor_tests.runner.conftest import unique
from adk_actors import Runner
from adk_actors.memory import MemoryScope, SqlMemoryService
from adk_actors.memory.drain import AwaitIdle, DrainerSpec, ensure_drainer
from adk_actors.memory.outbox import MemoryOutbox
from adk_actors.runtime.system import ActorSystemHandle, _wait_gone, group_pids
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import CrossProcessCounter

pytestmark = pytest.mark.timeout(90)

APP = "outbox_node_tests"


def test_a_runner_with_durable_ingestion_enqueues_before_answering_and_the_drainer_adds(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str], tmp_path: Path
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "durable answer"}}]})
    memory = SqlMemoryService(f"sqlite:///{tmp_path / 'memory.db'}")
    outbox = MemoryOutbox(f"sqlite:///{tmp_path / 'outbox.db'}")
    try:
        runner = Runner(
            agent_factory("Durable", []),
            APP,
            svc,
            system=system,
            memory_svc=memory,
            memory_ingestion={"mode": "durable", "outbox": outbox, "lease_ms": 5000},
        )
        sid = unique("s")
        assert runner.run("u1", sid, "remember the durable outbox") == "durable answer"
        scope = MemoryScope(APP, "u1")
        # Committed before the answer came back: both texts are in the outbox (in whatever state the drainer has
        # them by now).
        assert sum(outbox.scope_status(scope).values()) == 2
        ref = ensure_drainer(runner.options.memory_outbox, system=system)
        assert system.ask(ref, AwaitIdle(), 20) is True
        assert outbox.scope_status(scope)["done"] == 2
        assert memory.count(scope) == 2
        keys = {h.entry.idempotency_key for h in memory.search(scope, "durable", limit=10)}
        assert all(k and k.startswith(f"{sid}:") for k in keys) and len(keys) == 2
    finally:
        memory.close()
        outbox.close()


def test_a_failed_durable_enqueue_fails_the_invocation_and_keeps_its_answer(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str], tmp_path: Path
) -> None:
    from adk_actors.errors import AgentError
    from adk_actors.sessions import SessionRef

    emu.set_script({"rules": [{"when": {}, "respond": {"text": "durable answer"}}]})
    memory = SqlMemoryService(f"sqlite:///{tmp_path / 'memory.db'}")
    outbox = MemoryOutbox(f"sqlite:///{tmp_path / 'outbox.db'}", max_pending=1)  # the input and answer are two rows
    try:
        runner = Runner(
            agent_factory("DurableFull", []),
            APP,
            svc,
            system=system,
            memory_svc=memory,
            memory_ingestion={"mode": "durable", "outbox": outbox},
        )
        sid = unique("s")
        with pytest.raises(AgentError) as failed:
            runner.run("u1", sid, "this will not fit in the outbox")
        assert failed.value.reason == "memory_ingestion_failed"
        assert failed.value.details == {"type": "outbox_capacity_reached"}
        assert sum(outbox.scope_status(MemoryScope(APP, "u1")).values()) == 0  # the batch is all or nothing
        events = svc.get_session(SessionRef(app_name=APP, user_id="u1", session_id=sid)).events
        assert [e.text() for e in events if e.is_final] == ["durable answer"]
    finally:
        memory.close()
        outbox.close()


def test_building_the_runner_again_drains_what_an_earlier_process_accepted(
    system: ActorSystemHandle, emu: Any, svc: ActorSessionService, agent_factory: Callable[..., str], tmp_path: Path
) -> None:
    """What an earlier process enqueued (and never applied) is drained once the application builds its Runner, with
    no turn needed."""
    memory = SqlMemoryService(f"sqlite:///{tmp_path / 'memory.db'}")
    outbox = MemoryOutbox(f"sqlite:///{tmp_path / 'outbox.db'}")
    scope = MemoryScope(APP, "u-restart")
    try:
        items = [{"event_id": f"e{i}", "author": "user", "text": f"left over text {i}"} for i in range(3)]
        outbox.enqueue(scope, "old-session", items)
        assert memory.count(scope) == 0
        runner = Runner(
            agent_factory("DurableRestart", []),
            APP,
            svc,
            system=system,
            memory_svc=memory,
            memory_ingestion={"mode": "durable", "outbox": outbox},
        )
        ref = ensure_drainer(runner.options.memory_outbox, system=system)  # the same drainer: it is already started
        assert system.ask(ref, AwaitIdle(), 20) is True
        assert memory.count(scope) == 3 and outbox.scope_status(scope)["done"] == 3
    finally:
        memory.close()
        outbox.close()


def _accept_one(path: str, timeout: float) -> None:
    """Block until the node's memory service says it is mid-ingestion (or fail after ``timeout``)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        server.settimeout(timeout)
        conn, _ = server.accept()
        with conn:
            assert conn.recv(1) == b"x"


def test_a_node_sigkilled_mid_ingestion_resumes_the_outbox_without_loss_or_duplicates(
    make_system: Callable[..., ActorSystemHandle], urls: Callable[[str], str], tmp_dir: Path
) -> None:
    import threading

    # SQLite only here (two node starts make it the slowest memory test); the outbox's leases, takeover and
    # idempotency run on PostgreSQL too in test_outbox.py.
    outbox = MemoryOutbox(urls("sqlite"))
    memory_url = urls("sqlite")
    scopes = [MemoryScope(APP, f"user-{i}") for i in range(3)]
    for i, scope in enumerate(scopes):
        outbox.enqueue(scope, f"session-{i}", [{"event_id": f"e{j}", "author": "user", "text": f"fact {i} {j}"}
                                               for j in range(2)])  # fmt: skip
    adds = str(tmp_dir / "adds")
    notify = str(tmp_dir / "mid-ingestion.sock")
    knobs = {"lease_ms": 2500, "batch": 100, "concurrency": 1}

    node_a = make_system()
    waiter = threading.Thread(target=_accept_one, args=(notify, 30.0))
    waiter.start()
    ensure_drainer(
        DrainerSpec(outbox=outbox, memory=BlockingMemory(memory_url, counter=adds, notify=notify), **knobs),
        system=node_a,
    )
    waiter.join()  # the first group is committed to memory; its outbox rows are still claimed
    os.killpg(node_a.pgid, signal.SIGKILL)
    _wait_gone(group_pids(node_a.pgid), 10.0)
    assert group_pids(node_a.pgid) == []
    assert outbox.status()["states"]["claimed"] == 6 and CrossProcessCounter(adds).value == 1

    node_b = make_system()
    ref = ensure_drainer(DrainerSpec(outbox=outbox, memory=CountingMemory(memory_url, counter=adds), **knobs),
                         system=node_b)  # fmt: skip
    assert node_b.ask(ref, AwaitIdle(), 30) is True
    check = SqlMemoryService(memory_url)
    try:
        assert [check.count(s) for s in scopes] == [2, 2, 2]  # nothing lost, nothing twice
        assert outbox.status()["states"] == {"pending": 0, "claimed": 0, "done": 6, "dead": 0}
        # Four adapter mutations for three groups: the re-delivered group was an idempotent no-op.
        assert CrossProcessCounter(adds).value == 4
    finally:
        check.close()
        outbox.close()
