"""Triggers on a real node with the emulator: bounded queue, dedupe, retries inside one deadline, cancel, unregister.

Model calls are counted from the emulator's request log (each payload carries a per-test nonce), runs from the
trigger's outcomes; no sleep stands in for a condition (``until`` asks the node again and again).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.runner.conftest import read_events, until
from actor_tests.triggers.conftest import text_script
from adk_actors import TriggerError, runs, triggers
from adk_actors.emulator import Emulator
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers.messages import trigger_local_id


def model_calls(emu: Emulator, marker: str) -> int:
    """How many generateContent requests carried ``marker`` in their text."""
    return sum(1 for r in emu.requests if marker in str(r.get("body", "")))


def test_a_burst_beyond_max_queue_is_refused_and_every_accepted_event_completes(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any
) -> None:
    emu.set_script(text_script("ok", delay_ms=300))
    name = make_trigger({"max_concurrency": 1, "max_queue": 3})
    nonce = uuid.uuid4().hex
    accepted, refused = [], []
    for i in range(8):
        try:
            accepted.append(
                triggers.submit(name, {"payload": f"{nonce} {i}", "idempotency_key": f"k{i}"}, system=system)
            )
        except TriggerError as err:
            refused.append(err)
    assert len(accepted) == 4  # one running, three queued
    assert {e.reason for e in refused} == {"trigger_queue_full"} and len(refused) == 4
    assert refused[0].details == {"trigger": name, "max_queue": 3}
    outcomes = [triggers.await_event(s.ref, 10, system=system) for s in accepted]
    assert [o.outcome for o in outcomes] == ["completed"] * 4 and {o.output for o in outcomes} == {"ok"}
    assert model_calls(emu, nonce) == 4
    state = triggers.trigger_status(name, system=system)
    assert (state["accepted"], state["rejected"], state["completed"], state["queue_depth"]) == (4, 4, 4, 0)
    assert len(state["recent"]) == 4 and state["recent"][0]["ref"] == accepted[-1].ref


@pytest.fixture
def shared_trigger(system: ActorSystemHandle, emu: Emulator, make_trigger: Any) -> str:
    emu.set_script(text_script("ok", delay_ms=20))
    return str(make_trigger({"max_concurrency": 4}))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=10))
def test_duplicate_keys_under_concurrency_start_exactly_one_invocation_each(
    system: ActorSystemHandle, emu: Emulator, shared_trigger: str, keys: list[str]
) -> None:
    nonce = uuid.uuid4().hex
    results: list[tuple[str, triggers.Submitted]] = []
    lock = threading.Lock()

    def send(key: str) -> None:
        sub = triggers.submit(
            shared_trigger, {"payload": f"{nonce} {key}", "idempotency_key": f"{nonce}:{key}"}, system=system
        )
        with lock:
            results.append((key, sub))

    threads = [threading.Thread(target=send, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == len(keys)
    refs = {key: {s.ref for k, s in results if k == key} for key in set(keys)}
    assert all(len(r) == 1 for r in refs.values())  # one ref per key, whoever asked
    assert sum(1 for _k, s in results if not s.duplicate) == len(set(keys))
    for key in set(keys):
        assert triggers.await_event(next(iter(refs[key])), 10, system=system).outcome == "completed"
    assert model_calls(emu, nonce) == len(set(keys))
    again = triggers.submit(shared_trigger, {"payload": "x", "idempotency_key": f"{nonce}:{keys[0]}"}, system=system)
    assert again.duplicate and again.ref in refs[keys[0]]


def test_failed_attempts_are_retried_with_backoff_and_the_retry_reuses_the_session(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any, svc: Any
) -> None:
    emu.set_script({"rules": [{"respond": {"fault": {"status": 500}}, "times": 2}, {"respond": {"text": "ok"}}]})
    name = make_trigger({"retry": {"initial_delay_ms": 40, "max_delay_ms": 80, "jitter": "none"}})
    nonce = uuid.uuid4().hex
    t0 = time.monotonic()
    sub = triggers.submit(name, {"payload": nonce, "idempotency_key": nonce}, system=system)
    outcome = triggers.await_event(sub.ref, 10, system=system)
    assert (outcome.outcome, outcome.output, outcome.attempts) == ("completed", "ok", 3)
    assert time.monotonic() - t0 >= 0.12  # no jitter: 40 ms, then 80 ms
    assert outcome.run_id is not None and runs.status(outcome.run_id, system=system)["state"] == "completed"
    sessions = {str(r["body"]["contents"][0]) for r in emu.requests if nonce in str(r.get("body", ""))}
    assert len(sessions) == 1  # one session: the same first user turn each time
    assert model_calls(emu, nonce) == 3


def test_invalid_input_is_not_retried(system: ActorSystemHandle, emu: Emulator, make_trigger: Any) -> None:
    emu.set_script({"rules": [{"respond": {"fault": {"status": 400}}}]})
    name = make_trigger({"retry": {"initial_delay_ms": 10}})
    sub = triggers.submit(name, {"payload": "x", "idempotency_key": "bad"}, system=system)
    outcome = triggers.await_event(sub.ref, 10, system=system)
    assert (outcome.outcome, outcome.attempts, outcome.reason) == ("failed", 1, "invalid_argument")


def test_retries_never_run_past_the_one_event_deadline(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any
) -> None:
    emu.set_script({"rules": [{"respond": {"fault": {"status": 500}, "delay_ms": 100}}]})
    name = make_trigger(
        {"event_timeout_ms": 700, "retry": {"max_attempts": 50, "initial_delay_ms": 100, "max_delay_ms": 200}}
    )
    t0 = time.monotonic()
    sub = triggers.submit(name, {"payload": "x", "idempotency_key": "deadline"}, system=system)
    live = triggers.status(sub.ref, system=system)
    assert live["state"] in ("queued", "running", "retrying") and 0 <= live["deadline_in_ms"] <= 700
    outcome = triggers.await_event(sub.ref, 10, system=system)
    elapsed = time.monotonic() - t0
    assert (outcome.outcome, outcome.reason) == ("expired", "deadline")
    assert 2 <= outcome.attempts < 8 and elapsed < 0.7 + 0.5


def test_a_per_event_timeout_shortens_the_deadline_but_never_extends_it(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any
) -> None:
    emu.set_script(text_script("late", delay_ms=2000))
    name = make_trigger({"event_timeout_ms": 600})
    t0 = time.monotonic()
    short = triggers.submit(name, {"payload": "a", "idempotency_key": "short", "timeout_ms": 200}, system=system)
    long = triggers.submit(name, {"payload": "b", "idempotency_key": "long", "timeout_ms": 60000}, system=system)
    first = triggers.await_event(short.ref, 10, system=system)
    t_short = time.monotonic() - t0
    second = triggers.await_event(long.ref, 10, system=system)
    t_long = time.monotonic() - t0
    assert first.outcome == "expired" and second.outcome == "expired"
    assert t_short < 0.55 and 0.55 <= t_long < 1.5
    assert triggers.status(long.ref, system=system)["outcome"] == "expired"


def test_cancel_covers_queued_and_active_events(system: ActorSystemHandle, emu: Emulator, make_trigger: Any) -> None:
    emu.set_script(text_script("slow", delay_ms=3000))
    name = make_trigger({"max_concurrency": 1})
    nonce = uuid.uuid4().hex
    active = triggers.submit(name, {"payload": nonce, "idempotency_key": "active"}, system=system)
    queued = triggers.submit(name, {"payload": "b", "idempotency_key": "queued"}, system=system)
    assert triggers.status(queued.ref, system=system)["state"] == "queued"
    until(lambda: model_calls(emu, nonce) == 1, 5, "the first event's model call is in flight")
    assert triggers.status(active.ref, system=system)["state"] == "running"
    assert triggers.cancel(queued.ref, system=system) is True
    assert triggers.await_event(queued.ref, 5, system=system).outcome == "cancelled"
    assert triggers.status(queued.ref, system=system)["attempts"] == 0
    t0 = time.monotonic()
    assert triggers.cancel(active.ref, system=system) is True
    outcome = triggers.await_event(active.ref, 5, system=system)
    assert outcome.outcome == "cancelled" and time.monotonic() - t0 < 2
    assert outcome.run_id is not None and runs.status(outcome.run_id, system=system)["state"] == "cancelled"
    assert triggers.cancel(active.ref, system=system) is False  # already terminal
    emu.set_script(text_script("after"))  # the slot was freed: the next event runs
    nxt = triggers.submit(name, {"payload": "c", "idempotency_key": "next"}, system=system)
    assert triggers.await_event(nxt.ref, 5, system=system).output == "after"
    state = triggers.trigger_status(name, system=system)
    assert (state["cancelled"], state["completed"], state["active"]) == (2, 1, 0)


def test_unregister_with_events_in_flight_answers_every_awaiter(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any
) -> None:
    emu.set_script(text_script("slow", delay_ms=3000))
    name = make_trigger({"max_concurrency": 2})
    subs = [triggers.submit(name, {"payload": str(i), "idempotency_key": f"u{i}"}, system=system) for i in range(4)]
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(triggers.await_event(subs[0].ref, 10, system=system)))
    waiter.start()
    local_id = trigger_local_id(name)
    actor = LocalRef(place(local_id, system.settings.hosts), local_id)
    until(lambda: system.ask(actor, GetStatus())["waiters"] == 1, 5, "the awaiter is registered")
    t0 = time.monotonic()
    triggers.unregister_trigger(name, system=system)
    waiter.join(5)
    assert [o.outcome for o in got] == ["cancelled"] and time.monotonic() - t0 < 2.5
    with pytest.raises(TriggerError) as info:
        triggers.submit(name, {"payload": "x", "idempotency_key": "late"}, system=system)
    assert info.value.reason == "unknown_trigger"
    assert name not in {t["name"] for t in triggers.list_triggers(system=system)}


def test_registration_errors_and_unknown_refs(system: ActorSystemHandle, emu: Emulator, make_trigger: Any) -> None:
    from adk_actors import ConfigError, Runner

    name = make_trigger()
    runner = Runner("whatever", "app", None, system=system)
    with pytest.raises(TriggerError) as exists:
        triggers.register_trigger(name, runner, system=system)
    assert exists.value.reason == "trigger_exists"
    with pytest.raises(ConfigError) as bad:
        triggers.register_trigger("other", runner, {"max_queue": 0}, system=system)
    assert bad.value.details["key"] == "max_queue"
    emu.set_script(text_script("ok"))
    known = triggers.submit(name, {"payload": "x", "idempotency_key": "known"}, system=system).ref
    never = known.rsplit("-", 1)[0] + "-fffff"  # this incarnation never issued it
    for call in (triggers.await_event, triggers.status, triggers.cancel):
        with pytest.raises(TriggerError) as unknown:
            call(never, system=system)  # type: ignore[operator]
        assert unknown.value.reason == "unknown_event"
    lost = triggers.await_event(f"{name}/0000000a-1", 5, system=system)  # an earlier incarnation's event
    assert (lost.outcome, lost.reason) == ("failed", "trigger_restarted")
    with pytest.raises(TriggerError) as bad_ref:
        triggers.status("no-slash", system=system)
    assert bad_ref.value.reason == "invalid_ref"
    with pytest.raises(TriggerError) as missing:
        triggers.trigger_status("no-such-trigger", system=system)
    assert missing.value.reason == "unknown_trigger"
    with pytest.raises(TriggerError) as invalid:
        triggers.submit(name, {"payload": "x"}, system=system)
    assert (invalid.value.reason, invalid.value.details["key"]) == ("invalid_delivery", "idempotency_key")


def test_the_session_policy_decides_where_the_invocation_runs(
    system: ActorSystemHandle, emu: Emulator, make_trigger: Any, svc: Any
) -> None:
    emu.set_script(text_script("noted"))
    name = make_trigger({"session_policy": {"mode": "explicit"}})
    session = {"user_id": "u-1", "session_id": f"s-{uuid.uuid4().hex[:8]}"}
    sub = triggers.submit(name, {"payload": "remember", "idempotency_key": "e1", "session": session}, system=system)
    assert triggers.await_event(sub.ref, 10, system=system).outcome == "completed"
    texts = [e.content for e in read_events(svc, "trigger-tests", "u-1", session["session_id"])]
    assert len(texts) == 2  # the delivery and the answer, in the named session
    with pytest.raises(TriggerError) as missing:
        triggers.submit(name, {"payload": "x", "idempotency_key": "e2"}, system=system)
    assert missing.value.details == {"key": "session", "rule": "missing"}
