"""``GET /dev/v1/triggers``, ``GET /dev/v1/triggers/{name}`` and the event route over a real node, the emulator and
the served ``dev_app``: the list with queue depth, counters and recent outcomes, one trigger, one event, the
reasons of what is missing, and nothing of an event's payload, metadata or output on the wire."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actor_tests.triggers.t2_support import Register, echo_runner, emu, register, unique_trigger  # noqa: F401
from actor_tests.web.dev_support import DevServer, serve_dev
from adk_actors.devapi.triggers import EVENT_KEYS, RECENT_KEYS, TRIGGER_KEYS
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import await_event, submit

MARKER = "payload-marker-7c1e"
"""Text only the deliveries carry: it must never reach a response."""


@pytest.fixture
def served(system: ActorSystemHandle, emu: Emulator) -> Iterator[DevServer]:  # noqa: F811
    with serve_dev(system, emu, "none") as dev:
        yield dev


def _run_two(system: ActorSystemHandle, name: str) -> list[str]:
    refs = []
    for i in range(2):
        delivery = {"payload": f"{MARKER} {i}", "idempotency_key": f"k{i}", "metadata": {"note": MARKER}}
        refs.append(submit(name, delivery, system=system).ref)
    for ref in refs:
        assert await_event(ref, 30, system=system).outcome == "completed"
    return refs


def test_the_list_shows_each_trigger_with_queue_depth_counters_and_recent_outcomes(
    served: DevServer,
    register: Register,  # noqa: F811
    system: ActorSystemHandle,
) -> None:
    name = register(max_concurrency=2, max_queue=16)
    other = register(unique_trigger("t2-aaa"))
    refs = _run_two(system, name)
    submit(name, {"payload": "again", "idempotency_key": "k0"}, system=system)  # a duplicate

    answer = served.client.get("/dev/v1/triggers")
    assert answer.status_code == 200, answer.text
    listed = answer.json()["triggers"]
    names = [t["name"] for t in listed]
    assert names == sorted(names) and {name, other} <= set(names)
    mine = next(t for t in listed if t["name"] == name)
    assert set(mine) == {*TRIGGER_KEYS, "recent"}
    assert mine["mode"] == "memory" and mine["max_queue"] == 16 and mine["max_concurrency"] == 2
    assert (mine["queue_depth"], mine["active"]) == (0, 0)
    assert (mine["accepted"], mine["duplicates"], mine["completed"]) == (2, 1, 2)
    assert {r["ref"] for r in mine["recent"]} == set(refs)
    assert all(set(r) == set(RECENT_KEYS) and r["outcome"] == "completed" for r in mine["recent"])
    assert MARKER not in answer.text


def test_one_trigger_and_one_event_by_route(served: DevServer, register: Register, system: ActorSystemHandle) -> None:  # noqa: F811
    name = register()
    ref = _run_two(system, name)[0]

    one = served.client.get(f"/dev/v1/triggers/{name}")
    assert one.status_code == 200 and one.json()["name"] == name and one.json()["completed"] == 2

    event_id = ref.split("/", 1)[1]
    event = served.client.get(f"/dev/v1/triggers/{name}/events/{event_id}")
    assert event.status_code == 200, event.text
    body = event.json()
    assert set(body) == set(EVENT_KEYS)
    assert (body["ref"], body["trigger"], body["state"], body["outcome"]) == (ref, name, "terminal", "completed")
    assert body["attempts"] == 1 and isinstance(body["run_id"], str)
    assert MARKER not in one.text + event.text


def test_an_unknown_trigger_or_event_is_404_by_reason_and_a_bad_name_400(served: DevServer, register: Register) -> None:  # noqa: F811
    missing = served.client.get(f"/dev/v1/triggers/{unique_trigger('absent')}")
    assert missing.status_code == 404 and missing.json()["error"]["reason"] == "unknown_trigger"
    name = register()
    ref = submit(name, {"payload": "one", "idempotency_key": "only"}, system=served.system).ref
    never = ref.split("/", 1)[1].rsplit("-", 1)[0] + "-fffffff"  # this trigger's id form, never issued
    gone = served.client.get(f"/dev/v1/triggers/{name}/events/{never}")
    assert gone.status_code == 404 and gone.json()["error"]["reason"] == "unknown_event"
    long_name = served.client.get(f"/dev/v1/triggers/{'x' * 300}")
    assert long_name.status_code == 400 and long_name.json()["error"]["reason"] == "limit_exceeded"


def test_the_routes_need_the_token(served: DevServer) -> None:
    import httpx

    with httpx.Client(base_url=served.url, trust_env=False, timeout=10) as anonymous:
        assert anonymous.get("/dev/v1/triggers").status_code == 401
