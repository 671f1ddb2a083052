"""Durable mode's store calls run on the host's I/O threads: a slow store never stalls the trigger actor.

The trigger is started over :class:`~actor_tests.triggers.slow_store.SlowStore` (every ``accept`` takes 1 s):
while a durable submit waits for its row, the trigger answers status at once, refuses a delivery beyond
``max_queue`` (a pending accept holds a place), and a second submit of the same key shares the first one's
accept (one row, one ref).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actor_tests.runner.conftest import until
from actor_tests.triggers.slow_store import ACCEPT_S, SlowStore, accepts_file
from actor_tests.triggers.t2_support import echo_runner, emu, unique_trigger  # noqa: F401
from adk_actors import triggers
from adk_actors.errors import TriggerError
from adk_actors.runner import Runner
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers.actor import TriggerArgs
from adk_actors.triggers.messages import TRIGGER_ACTOR, trigger_local_id
from adk_actors.triggers.options import trigger_options


def start_slow_trigger(system: ActorSystemHandle, runner: Runner, url: str, **options: Any) -> str:
    """A durable trigger over a :class:`SlowStore` (spawned directly: ``register_trigger`` passes URLs only)."""
    name = unique_trigger("slow")
    local_id = trigger_local_id(name)
    args = TriggerArgs(
        name=name, runner=runner, options=trigger_options(options), hosts=system.settings.hosts, store=SlowStore(url)
    )
    system.spawn(TRIGGER_ACTOR, args, id=local_id, name=local_id, restart="permanent")
    return name


def test_a_slow_store_does_not_stall_the_trigger(
    system: ActorSystemHandle,
    echo_runner: Runner,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'slow.db'}"
    name = start_slow_trigger(system, echo_runner, url, max_queue=1)
    got: dict[str, Any] = {}

    def submit(tag: str) -> None:
        got[tag] = triggers.submit(name, {"payload": "hello", "idempotency_key": "k1"}, system=system, timeout=10)

    try:
        first = threading.Thread(target=submit, args=("first",))
        first.start()
        until(lambda: accepts_file(url).exists(), 5, "the accept starts")
        t0 = time.monotonic()
        state = triggers.trigger_status(name, system=system)
        assert time.monotonic() - t0 < 0.2  # answered while the accept is in flight
        assert state["mode"] == "durable"
        second = threading.Thread(target=submit, args=("second",))
        second.start()  # the same key while its row is being written: shares that accept
        assert first.is_alive()  # all of the above happened during the first accept
        with pytest.raises(TriggerError) as full:  # the pending accept holds the queue's one place (a refused
            triggers.submit(name, {"payload": "other", "idempotency_key": "k2"}, system=system)  # key is looked up)
        assert full.value.reason == "trigger_queue_full"
        first.join(10)
        second.join(10)
        assert time.monotonic() - t0 < ACCEPT_S + 2
        assert got["first"] == triggers.Submitted(ref=got["first"].ref, duplicate=False)
        assert got["second"] == triggers.Submitted(ref=got["first"].ref, duplicate=True)
        assert accepts_file(url).read_text().count("accept") == 1  # one row for the key
        outcome = triggers.await_event(got["first"].ref, 10, system=system)
        assert (outcome.outcome, outcome.output) == ("completed", "Done: hello")
        status = triggers.trigger_status(name, system=system)
        assert (status["accepted"], status["duplicates"], status["rejected"]) == (1, 1, 1)
    finally:
        triggers.unregister_trigger(name, system=system, timeout=10)
