"""The ``/dev/v1`` developer API over real HTTP on 127.0.0.1: a real node, a real agent with a plain and a gated
tool, the Gemini emulator, ``dev_app`` served by uvicorn and httpx as the client.

Sections: agents; runs (start, SSE, tool turns, cancel, resume); SSE reconnection; sessions and state; node
snapshots and unknown paths; token, origin and body bounds with property tests; the token never leaking.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.web.dev_support import APP, TOKEN, USER, DevServer, SseItem, read_sse, serve_dev, until
from adk_actors.devapi import MAX_PAGE
from adk_actors.secrets import is_secret_key
from adk_actors.web import EdgeLimits
from adk_actors.web.dev import FUTURE_SURFACES

MARK = "FZX"
"""Prefix of every fuzzed string: finding it in an answer means the answer echoed the request."""
FUZZ = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def error_of(response: httpx.Response, status: int | None = None) -> dict[str, Any]:
    """The ``error`` object of a JSON error answer (asserting the edge's shape, and ``status`` when given)."""
    if status is not None:
        assert response.status_code == status, response.text
    assert response.status_code >= 400, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["reason"], str) and isinstance(body["error"]["message"], str)
    assert "Traceback" not in response.text
    return dict(body["error"])


def parts_of(items: list[SseItem], kind: str) -> list[dict[str, Any]]:
    """The content parts of type ``kind`` in the ``event`` items."""
    return [
        part
        for item in items
        if item.event == "event" and item.data.get("content")
        for part in item.data["content"]["parts"]
        if part["type"] == kind
    ]


def event_items(items: list[SseItem]) -> list[SseItem]:
    return [item for item in items if item.event == "event"]


def nothing_started(dev: DevServer, sessions_before: int, model_calls_before: int) -> None:
    """No session was created and no model call was made since the counts were taken."""
    assert dev.session_count() == sessions_before, "a session was created"
    assert len(dev.emu.requests) == model_calls_before, "a run reached the model"


# ---- agents ----------------------------------------------------------------------------------------------------


def test_agents_lists_the_running_agent_with_its_tools(dev_server: DevServer) -> None:
    answer = dev_server.client.get("/dev/v1/agents")

    assert answer.status_code == 200
    [agent] = [a for a in answer.json()["agents"] if a["name"] == dev_server.agent]
    assert agent["available"] is True and agent["tools"] == ["get_weather", "book_trip"]


def test_describe_gives_one_agents_shape(dev_server: DevServer) -> None:
    answer = dev_server.client.get(f"/dev/v1/agents/{dev_server.agent}")

    assert answer.status_code == 200
    assert answer.json()["name"] == dev_server.agent and answer.json()["tools"] == ["get_weather", "book_trip"]


@pytest.mark.parametrize(
    "name",
    ["NoSuchAgent", "not-an-agent-name{", "user", "registry", "sessions"],
    ids=["unknown", "malformed", "reserved", "runtime-actor", "store-actor"],
)
def test_a_name_that_is_no_running_agent_is_404_agent_not_found_for_describe_and_run(
    dev_server: DevServer, name: str
) -> None:
    sessions, calls = dev_server.session_count(), len(dev_server.emu.requests)

    assert error_of(dev_server.client.get(f"/dev/v1/agents/{quote(name)}"), 404)["reason"] == "agent_not_found"
    started = dev_server.client.post("/dev/v1/runs", json={"agent": name, "input": "hi"})
    assert error_of(started, 404)["reason"] == "agent_not_found"
    nothing_started(dev_server, sessions, calls)


# ---- runs ------------------------------------------------------------------------------------------------------


def test_a_run_starts_with_201_and_its_events_stream_to_the_outcome(dev_server: DevServer) -> None:
    started = dev_server.start_run("hello there")
    assert set(started) == {"run_id", "app_name", "user_id", "session_id"}
    assert (started["app_name"], started["user_id"]) == (APP, USER)

    items = dev_server.events(started["run_id"])

    assert [i.event for i in items][-1:] == ["outcome"] and len(items) >= 3
    assert items[-1].data == {"state": "completed", "output": "You said: hello there"}
    final = [i.data["author"] for i in event_items(items) if not i.data["partial"]]  # partials come as they stream
    assert final == ["user", dev_server.agent]
    status = dev_server.client.get(f"/dev/v1/runs/{started['run_id']}").json()
    assert status["state"] == "completed" and status["outcome"]["output"] == "You said: hello there"
    stored = dev_server.stored_events(started["session_id"])
    assert [e.id for e in stored] == [i.data["id"] for i in event_items(items)]


def test_a_tool_turn_streams_the_function_call_and_its_response(dev_server: DevServer) -> None:
    started = dev_server.start_run("what is the weather in Tokyo?")

    items = dev_server.events(started["run_id"])

    [call] = parts_of(items, "function_call")
    [response] = parts_of(items, "function_response")
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Tokyo"})
    assert response["name"] == "get_weather" and response["response"]["forecast"] == "sunny"
    assert response["id"] == call["id"]
    assert items[-1].data == {"state": "completed", "output": "The weather in Tokyo is sunny."}


def test_cancel_ends_a_run_whose_model_call_is_still_pending(dev_server: DevServer) -> None:
    started = dev_server.start_run("a slow question")
    run_id = started["run_id"]
    until(lambda: dev_server.emu.requests, what="the slow model call")
    assert dev_server.client.get(f"/dev/v1/runs/{run_id}").json()["state"] == "running"

    cancelled = dev_server.client.post(f"/dev/v1/runs/{run_id}/cancel", json={"reason": "user_stop"})

    assert cancelled.status_code == 200 and cancelled.json() == {"state": "cancelled", "reason": "user_stop"}
    assert dev_server.client.get(f"/dev/v1/runs/{run_id}").json()["state"] == "cancelled"
    assert dev_server.outcome(run_id) == {"state": "cancelled", "reason": "user_stop"}


def test_cancel_without_a_body_uses_the_default_reason(dev_server: DevServer) -> None:
    run_id = dev_server.start_run("another slow one")["run_id"]

    cancelled = dev_server.client.post(f"/dev/v1/runs/{run_id}/cancel")

    assert cancelled.json() == {"state": "cancelled", "reason": "cancelled"}


def _paused_run(dev: DevServer) -> tuple[str, dict[str, Any]]:
    started = dev.start_run("book a trip to Paris")
    outcome = dev.outcome(started["run_id"])
    assert outcome["state"] == "paused", outcome
    return started["run_id"], outcome


def test_a_gated_tool_pauses_and_resume_completes_a_new_run(dev_server: DevServer) -> None:
    run_id, outcome = _paused_run(dev_server)
    pause = outcome["event"]["actions"]["pause"]
    assert pause["reason"] == "tool_confirmation" and pause["details"]["function_name"] == "book_trip"
    assert dev_server.client.get(f"/dev/v1/runs/{run_id}").json()["state"] == "paused"

    resumed = dev_server.client.post(f"/dev/v1/runs/{run_id}/resume", json={"tool_response": {"confirmed": True}})

    assert resumed.status_code == 201, resumed.text
    child = resumed.json()["run_id"]
    assert resumed.json() == {"run_id": child, "parent_run_id": run_id} and child != run_id
    items = dev_server.events(child)
    assert items[-1].data == {"state": "completed", "output": "Booked."}
    [response] = parts_of(items, "function_response")
    assert response["name"] == "book_trip" and response["response"] == {"booked": "Paris"}
    assert dev_server.client.get(f"/dev/v1/runs/{run_id}").json()["resumed_to"] == child
    assert dev_server.client.get(f"/dev/v1/runs/{child}").json()["parent_run_id"] == run_id


def test_a_second_resume_is_409_already_resumed_and_a_finished_run_409_not_paused(dev_server: DevServer) -> None:
    run_id, _ = _paused_run(dev_server)
    body = {"tool_response": {"confirmed": True}}
    child = dev_server.client.post(f"/dev/v1/runs/{run_id}/resume", json=body).json()["run_id"]

    again = error_of(dev_server.client.post(f"/dev/v1/runs/{run_id}/resume", json=body), 409)
    assert again["reason"] == "already_resumed" and again["resumed_to"] == child
    assert dev_server.outcome(child)["state"] == "completed"
    finished = error_of(dev_server.client.post(f"/dev/v1/runs/{child}/resume", json=body), 409)
    assert finished["reason"] == "not_paused" and finished["state"] == "completed"


BAD_RESUME_BODIES: list[tuple[Any, str]] = [
    ({}, "invalid_resume_response"),
    ({"tool_response": {"confirmed": "yes"}}, "invalid_resume_response"),
    ({"tool_response": {"confirmed": True, "extra": 1}}, "invalid_resume_response"),
    ({"tool_response": "yes"}, "invalid_resume_response"),
    ({"tool_response": {"confirmed": True}, "extra": 1}, "unknown_key"),
    ([{"confirmed": True}], "invalid_body"),
    ("{not json", "invalid_json"),
]


def test_bad_resume_bodies_are_400_and_leave_the_run_resumable(dev_server: DevServer) -> None:
    run_id, _ = _paused_run(dev_server)
    url = f"/dev/v1/runs/{run_id}/resume"

    for body, reason in BAD_RESUME_BODIES:
        raw = body if isinstance(body, str) else json.dumps(body)
        answer = dev_server.client.post(url, content=raw, headers={"content-type": "application/json"})
        assert error_of(answer, 400)["reason"] == reason, body

    assert dev_server.client.get(f"/dev/v1/runs/{run_id}").json()["resumed_to"] is None
    assert dev_server.client.post(url, json={"tool_response": {"confirmed": True}}).status_code == 201


def test_an_unknown_run_is_404_for_status_cancel_resume_and_events(dev_server: DevServer) -> None:
    client = dev_server.client
    missing = "0" * 32

    assert error_of(client.get(f"/dev/v1/runs/{missing}"), 404)["reason"] == "not_found"
    assert error_of(client.post(f"/dev/v1/runs/{missing}/cancel"), 404)["reason"] == "not_found"
    resume = client.post(f"/dev/v1/runs/{missing}/resume", json={"tool_response": {"confirmed": True}})
    assert error_of(resume, 404)["reason"] == "not_found"
    assert error_of(client.get(f"/dev/v1/runs/{missing}/events"), 404)["reason"] == "not_found"


# ---- SSE reconnection ------------------------------------------------------------------------------------------


def _assert_union_is_the_session(dev: DevServer, session_id: str, items: list[SseItem]) -> None:
    """The events received over every connection are the session's stored events, each once, in order."""
    events = event_items(items)
    seqs = [i.id for i in events]
    assert seqs == list(range(1, len(events) + 1)), f"lost or repeated seq ids: {seqs}"
    assert [i.data["id"] for i in events] == [e.id for e in dev.stored_events(session_id)]
    assert [i.event for i in items if i.event == "outcome"] == ["outcome"]


def test_a_dropped_stream_resumes_from_last_event_id_without_loss_or_duplicate(dev_server: DevServer) -> None:
    dev_server.script(answer_delay_ms=1500)  # the run is still live when the client drops and comes back
    started = dev_server.start_run("weather in Tokyo, please")

    first = dev_server.events(started["run_id"], stop_after=2)
    assert [i.id for i in first] == [1, 2] and parts_of(first, "function_call")
    rest = dev_server.events(started["run_id"], last_event_id=str(first[-1].id))

    assert rest[0].id == 3 and rest[-1].data["state"] == "completed"
    _assert_union_is_the_session(dev_server, started["session_id"], first + rest)


def test_a_stream_cut_by_its_event_bound_is_completed_by_reconnects(dev_server: DevServer) -> None:
    limits = EdgeLimits(sse_max_events=1)
    with serve_dev(dev_server.system, dev_server.emu, dev_server.agent, limits=limits) as bounded:
        started = bounded.start_run("weather in Tokyo, please")
        received: list[SseItem] = []
        last: str | None = None
        for _ in range(10):
            items = bounded.events(started["run_id"], last_event_id=last)
            if items[-1].event == "outcome":  # the run's last message ends the stream: no bound after it
                received += items
                break
            assert items[-1].event == "bound" and items[-1].data == {"bound": "events", "limit": 1}
            received += items[:-1]
            last = str(received[-1].id)

        _assert_union_is_the_session(bounded, started["session_id"], received)
        assert received[-1].data == {"state": "completed", "output": "The weather in Tokyo is sunny."}


def test_a_last_event_id_past_a_finished_runs_end_still_gets_the_outcome(dev_server: DevServer) -> None:
    run_id = dev_server.start_run("hello")["run_id"]
    dev_server.outcome(run_id)
    url = f"/dev/v1/runs/{run_id}/events"

    with dev_server.client.stream("GET", url, headers={"Last-Event-ID": "100"}, timeout=5) as answer:
        items = read_sse(answer)

    assert [(i.id, i.event) for i in items] == [(None, "outcome")]
    assert items[0].data == {"state": "completed", "output": "You said: hello"}


def test_a_last_event_id_past_a_live_runs_newest_event_waits_for_what_comes_next(dev_server: DevServer) -> None:
    run_id = dev_server.start_run("a slow question")["run_id"]
    until(lambda: dev_server.emu.requests, what="the slow model call")
    url = f"/dev/v1/runs/{run_id}/events"

    with dev_server.client.stream("GET", url, headers={"Last-Event-ID": "50"}, timeout=5) as answer:
        dev_server.client.post(f"/dev/v1/runs/{run_id}/cancel", json={"reason": "enough"})
        items = read_sse(answer)

    assert [i.event for i in items] == ["outcome"] and items[0].data == {"state": "cancelled", "reason": "enough"}


def test_head_on_events_answers_at_once_without_holding_the_connection(dev_server: DevServer) -> None:
    run_id = dev_server.start_run("a slow question")["run_id"]
    until(lambda: dev_server.emu.requests, what="the slow model call")

    head = dev_server.client.head(f"/dev/v1/runs/{run_id}/events", timeout=5)
    status = dev_server.client.get(f"/dev/v1/runs/{run_id}", timeout=5)  # the same keep-alive connection

    assert head.status_code == 200 and head.headers["content-type"].startswith("text/event-stream")
    assert status.json()["state"] == "running"
    assert dev_server.client.head(f"/dev/v1/runs/{'0' * 32}/events", timeout=5).status_code == 404
    dev_server.client.post(f"/dev/v1/runs/{run_id}/cancel")


@pytest.mark.parametrize("header", ["abc", "-1", "01", "1 2", "1" * 20, "9" * 19, "1.5", ""])
def test_a_malformed_last_event_id_is_400_invalid_last_event_id(dev_server: DevServer, header: str) -> None:
    run_id = dev_server.start_run("hello")["run_id"]

    answer = dev_server.client.get(f"/dev/v1/runs/{run_id}/events", headers={"Last-Event-ID": header})

    error = error_of(answer, 400)
    assert error["reason"] == "invalid_last_event_id"
    assert header not in json.dumps(error["message"]) or not header


def test_a_malformed_after_seq_is_400(dev_server: DevServer) -> None:
    run_id = dev_server.start_run("hello")["run_id"]

    answer = dev_server.client.get(f"/dev/v1/runs/{run_id}/events", params={"after_seq": "-3"})

    assert error_of(answer, 400)["reason"] == "invalid_value"


# ---- sessions --------------------------------------------------------------------------------------------------


def _create(dev: DevServer, **body: Any) -> dict[str, Any]:
    answer = dev.client.post("/dev/v1/sessions", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_sessions_are_listed_newest_update_first_and_bounded(dev_server: DevServer) -> None:
    user = "lister"
    ids = [_create(dev_server, user_id=user)["session_id"] for _ in range(3)]
    client = dev_server.client

    listed = client.get("/dev/v1/sessions", params={"user_id": user}).json()
    assert [s["session_id"] for s in listed["sessions"]] == ids[::-1] and listed["truncated"] is False
    client.patch(f"/dev/v1/sessions/{APP}/{user}/{ids[0]}/state", json={"delta": {"touched": True}})
    page = client.get("/dev/v1/sessions", params={"user_id": user, "limit": 2}).json()

    assert [s["session_id"] for s in page["sessions"]] == [ids[0], ids[2]] and page["truncated"] is True
    assert page["sessions"][0]["state_keys"] == 1
    for limit in (MAX_PAGE + 1, 0, "abc", "-1"):
        assert error_of(client.get("/dev/v1/sessions", params={"limit": limit}), 400)["reason"] in {
            "invalid_value",
            "limit_exceeded",
        }
    assert client.get("/dev/v1/sessions", params={"limit": MAX_PAGE}).status_code == 200


def test_create_is_201_and_a_duplicate_is_409_already_exists_without_echoing_the_id(dev_server: DevServer) -> None:
    # A user of its own: user-scoped state (user:...) that other tests give the shared dev user shows in every
    # session of that user.
    sid, user = f"{MARK}-dup-session-{uuid.uuid4().hex[:8]}", f"dup-{uuid.uuid4().hex[:8]}"
    created = _create(dev_server, session_id=sid, user_id=user, state={"color": "red"})
    assert (created["session_id"], created["state"], created["events"]) == (sid, {"color": "red"}, [])

    duplicate = dev_server.client.post(
        "/dev/v1/sessions", json={"session_id": sid, "user_id": user, "state": {"color": "blue"}}
    )

    assert error_of(duplicate, 409)["reason"] == "already_exists"
    assert MARK not in duplicate.text
    assert dev_server.state(sid, user)["color"] == "red"


def test_create_with_a_secret_state_key_is_refused_and_creates_nothing(dev_server: DevServer) -> None:
    before = dev_server.session_count()

    answer = dev_server.client.post("/dev/v1/sessions", json={"state": {"color": "red", "user:api_key": "sk-1"}})

    assert error_of(answer, 400)["reason"] == "secret_key_refused" and "sk-1" not in answer.text
    assert dev_server.session_count() == before


def test_show_gives_state_and_newest_events_and_an_unknown_session_is_404(dev_server: DevServer) -> None:
    started = dev_server.start_run("hello there")
    dev_server.outcome(started["run_id"])
    url = f"/dev/v1/sessions/{APP}/{USER}/{started['session_id']}"

    stored = dev_server.stored_events(started["session_id"])

    shown = dev_server.client.get(url).json()
    newest = dev_server.client.get(url, params={"max_events": 1}).json()

    assert shown["events_total"] == len(stored) >= 2 and [e["id"] for e in shown["events"]] == [e.id for e in stored]
    assert shown["events"][0]["author"] == "user" and shown["events"][-1]["author"] == dev_server.agent
    assert newest["events_total"] == len(stored) and [e["id"] for e in newest["events"]] == [stored[-1].id]
    assert error_of(dev_server.client.get(url, params={"max_events": 0}), 400)["reason"] == "invalid_value"
    assert error_of(dev_server.client.get(f"/dev/v1/sessions/{APP}/{USER}/nope"), 404)["reason"] == "not_found"


def test_delete_removes_a_session_and_is_idempotent(dev_server: DevServer) -> None:
    sid = _create(dev_server)["session_id"]
    url = f"/dev/v1/sessions/{APP}/{USER}/{sid}"

    assert dev_server.client.delete(url).json() == {"deleted": True}
    assert error_of(dev_server.client.get(url), 404)["reason"] == "not_found"
    assert dev_server.client.delete(url).json() == {"deleted": False}


def test_a_state_delta_is_applied_and_the_new_state_returned(dev_server: DevServer) -> None:
    user = "state-user"  # user: keys are shared by the user's sessions
    sid = _create(dev_server, user_id=user, state={"color": "red"})["session_id"]

    answer = dev_server.client.patch(
        f"/dev/v1/sessions/{APP}/{user}/{sid}/state", json={"delta": {"color": "blue", "user:lang": "en"}}
    )

    assert answer.status_code == 200
    assert answer.json()["state"] == {"color": "blue", "user:lang": "en"} == dev_server.state(sid, user)


@pytest.mark.parametrize("key", ["api_key", "user:token", "app:apiKey", "temp:password", "x-goog-api-key"])
def test_a_delta_with_a_secret_like_key_is_400_and_writes_nothing(dev_server: DevServer, key: str) -> None:
    sid = _create(dev_server, state={"color": "red"})["session_id"]
    before = dev_server.state(sid)

    answer = dev_server.client.patch(
        f"/dev/v1/sessions/{APP}/{USER}/{sid}/state", json={"delta": {"color": "blue", key: "hunter2-value"}}
    )

    assert error_of(answer, 400)["reason"] == "secret_key_refused" and "hunter2" not in answer.text
    assert dev_server.state(sid) == before and before["color"] == "red"


def test_a_delta_for_an_unknown_session_is_404_and_creates_nothing(dev_server: DevServer) -> None:
    before = dev_server.session_count()

    answer = dev_server.client.patch(f"/dev/v1/sessions/{APP}/{USER}/nope/state", json={"delta": {"a": 1}})

    assert error_of(answer, 404)["reason"] == "not_found"
    assert dev_server.session_count() == before


# ---- node snapshots and unknown paths --------------------------------------------------------------------------


def test_diagnostics_reports_version_port_status_and_public_settings(dev_server: DevServer) -> None:
    answer = dev_server.client.get("/dev/v1/diagnostics")

    assert answer.status_code == 200
    body = answer.json()
    assert body["port"] == dev_server.system.port and body["status"]["ready"] is True
    assert {c["id"] for c in body["status"]["children"]} >= {"runs", "sessions", "telemetry"}
    assert body["settings"]["gemini_api_key"] in {"set", "unset"}


def test_observability_gives_the_metrics_snapshot(dev_server: DevServer) -> None:
    dev_server.outcome(dev_server.start_run("count me")["run_id"])

    answer = dev_server.client.get("/dev/v1/observability")

    assert answer.status_code == 200
    assert {"instruments", "overflowed", "limits"} <= set(answer.json())
    assert answer.json()["instruments"]


def test_every_surface_of_the_reference_is_served_now() -> None:
    assert dict(FUTURE_SURFACES) == {}  # Live was the last one (issue 26)


@pytest.mark.parametrize("path", ["live/items/1", "live/session"])
def test_a_path_under_a_served_surface_that_is_no_route_is_404_not_found(dev_server: DevServer, path: str) -> None:
    assert error_of(dev_server.client.get(f"/dev/v1/{path}"), 404)["reason"] == "not_found"


@pytest.mark.parametrize("path", ["/dev/v1/nope", "/dev/v1/nope/deeper/still", "/dev/v2/agents", "/dev/v1x"])
def test_an_unknown_path_is_404_not_found(dev_server: DevServer, path: str) -> None:
    assert error_of(dev_server.client.get(path), 404)["reason"] == "not_found"


def test_a_wrong_method_is_405_method_not_allowed(dev_server: DevServer) -> None:
    assert error_of(dev_server.client.delete("/dev/v1/agents"), 405)["reason"] == "method_not_allowed"


# ---- token, origin and body bounds -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer " + "w" * 40},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ],
    ids=["none", "wrong", "longer", "basic", "bare"],
)
def test_a_missing_or_wrong_token_is_401_and_starts_nothing(dev_server: DevServer, headers: dict[str, str]) -> None:
    sessions, calls = dev_server.session_count(), len(dev_server.emu.requests)
    with httpx.Client(base_url=dev_server.url, headers=headers, trust_env=False, timeout=10) as stranger:
        answers = [
            stranger.post("/dev/v1/runs", json={"agent": dev_server.agent, "input": "hi"}),
            stranger.post("/dev/v1/sessions", json={}),
            stranger.get("/dev/v1/agents"),
        ]

    for answer in answers:
        assert error_of(answer, 401)["reason"] == "unauthorized"
        assert answer.headers["www-authenticate"] == "Bearer"
    nothing_started(dev_server, sessions, calls)


def test_a_token_in_the_query_is_400_even_with_a_valid_header(dev_server: DevServer) -> None:
    sessions, calls = dev_server.session_count(), len(dev_server.emu.requests)

    for name in ("token", "access_token", "Authorization"):
        answer = dev_server.client.post(f"/dev/v1/runs?{name}={TOKEN}", json={"agent": dev_server.agent, "input": "hi"})
        assert error_of(answer, 400)["reason"] == "token_in_query"
    nothing_started(dev_server, sessions, calls)


def test_a_cross_origin_request_is_403_and_a_same_origin_one_is_served(dev_server: DevServer) -> None:
    sessions, calls = dev_server.session_count(), len(dev_server.emu.requests)
    body = {"agent": dev_server.agent, "input": "hi"}

    for origin in ("http://evil.example", "null", dev_server.url.replace("127.0.0.1", "localhost")):
        answer = dev_server.client.post("/dev/v1/runs", json=body, headers={"Origin": origin})
        assert error_of(answer, 403)["reason"] == "cross_origin"
    nothing_started(dev_server, sessions, calls)
    same = dev_server.client.post("/dev/v1/runs", json=body, headers={"Origin": dev_server.url})
    assert same.status_code == 201 and "access-control-allow-origin" not in same.headers


def test_a_body_over_the_bound_is_413_whether_announced_or_streamed(dev_server: DevServer) -> None:
    sessions, calls = dev_server.session_count(), len(dev_server.emu.requests)
    big = json.dumps({"agent": dev_server.agent, "input": "x" * (EdgeLimits().max_body_bytes + 1)}).encode()
    headers = {"content-type": "application/json"}

    announced = dev_server.client.post("/dev/v1/runs", content=big, headers=headers)
    chunks = (big[i : i + 65536] for i in range(0, len(big), 65536))
    streamed = dev_server.client.post("/dev/v1/runs", content=chunks, headers=headers)

    assert error_of(announced, 413)["reason"] == "body_too_large"
    assert error_of(streamed, 413)["reason"] == "body_too_large"
    nothing_started(dev_server, sessions, calls)


# ---- property tests --------------------------------------------------------------------------------------------

_fuzz_text = st.text(st.characters(codec="utf-8"), min_size=0, max_size=16).map(lambda t: MARK + t)
_words = st.sampled_from(
    ["agents", "runs", "sessions", "events", "cancel", "resume", "state", "diagnostics", "observability", "live"]
    + ["memory", APP, USER, "", "0" * 32]
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _fuzz_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_fuzz_text, inner, max_size=4),
    max_leaves=12,
)


class _Snapshot:
    """What must not change under hostile requests: the session count, one session's state, the model calls."""

    def __init__(self, dev: DevServer, session_id: str) -> None:
        self.dev, self.session_id = dev, session_id
        self.values = self.take()

    def take(self) -> tuple[int, dict[str, Any], int]:
        return self.dev.session_count(), self.dev.state(self.session_id), len(self.dev.emu.requests)

    def unchanged(self) -> None:
        assert self.take() == self.values, "a refused request changed something"


@pytest.fixture
def snapshot(dev_server: DevServer) -> Iterator[_Snapshot]:
    sid = _create(dev_server, state={"color": "red"})["session_id"]
    yield _Snapshot(dev_server, sid)


def _refused_cleanly(answer: httpx.Response) -> None:
    assert 400 <= answer.status_code < 500, answer.text
    error_of(answer)
    assert MARK not in answer.text, "the answer echoed the request"


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT"]),
    segments=st.lists(_words | _fuzz_text, max_size=5),
    query=st.none() | st.tuples(st.sampled_from(["limit", "after_seq", "max_events", "user_id"]), _fuzz_text),
)
def test_fuzzed_paths_never_fail_with_500_echo_or_change(
    dev_server: DevServer, snapshot: _Snapshot, method: str, segments: list[str], query: tuple[str, str] | None
) -> None:
    path = "/dev/v1/" + "/".join(quote(s, safe="") for s in segments)
    params = dict([query]) if query else None
    body = json.dumps({MARK + "unknown": MARK}) if method in ("POST", "PATCH", "PUT") else None
    headers = {"content-type": "application/json"} if body else {}

    answer = dev_server.client.request(method, path, params=params, content=body, headers=headers)

    assert answer.status_code != 500 and "Traceback" not in answer.text, answer.text
    assert MARK not in answer.text, "the answer echoed the request"
    if answer.status_code >= 400:
        error_of(answer)
    snapshot.unchanged()


_run_keys = st.sampled_from(["agent", "input", "user_id", "session_id", "app_name", MARK + "key"])


@FUZZ
@given(
    body=st.fixed_dictionaries(
        {"agent": _fuzz_text | _json_values, "input": _fuzz_text | _json_values},
        optional={"user_id": _fuzz_text | _json_values, "session_id": _fuzz_text, "app_name": _fuzz_text},
    )
    | st.dictionaries(_run_keys, _json_values, max_size=6)
    | st.lists(_json_values, max_size=3)
    | _json_values
    | st.sampled_from(["{", "NaN", '{"agent": 1, "agent": 2}', '{"input": NaN}', "\ufeff{}", "[" * 2000])
)
def test_fuzzed_run_bodies_are_refused_with_a_json_error_and_start_nothing(
    dev_server: DevServer, snapshot: _Snapshot, body: Any
) -> None:
    raw = body if isinstance(body, str) and not body.startswith(MARK) else json.dumps(body)

    answer = dev_server.client.post(
        "/dev/v1/runs", content=raw.encode("utf-8", "surrogatepass"), headers={"content-type": "application/json"}
    )

    _refused_cleanly(answer)
    snapshot.unchanged()


_secret_keys = st.sampled_from(["api_key", "user:token", "app:apiKey", "temp:password", "client_secret", "Cookie"])
_bad_deltas = (
    st.tuples(st.dictionaries(_fuzz_text, _json_values, max_size=5), _secret_keys, st.integers(0, 5), _json_values)
    .map(lambda t: dict([*list(t[0].items())[: t[2]], (t[1], t[3]), *list(t[0].items())[t[2] :]]))
    .map(lambda delta: {"delta": delta})
)


@FUZZ
@given(
    body=_bad_deltas
    | st.builds(lambda v: {"delta": v}, st.lists(_json_values, max_size=3) | _fuzz_text | st.integers() | st.none())
    | st.builds(lambda d: {"delta": d, MARK + "extra": 1}, st.dictionaries(_fuzz_text, _json_values, max_size=3))
    | st.just({"delta": {f"{MARK}{i}": i for i in range(101)}})
    | st.just({"delta": {"": 1}})
    | st.just({"delta": {MARK + "\x00": 1}})
)
def test_fuzzed_state_deltas_that_are_invalid_are_refused_and_write_nothing(
    dev_server: DevServer, snapshot: _Snapshot, body: dict[str, Any]
) -> None:
    delta = body.get("delta")
    if isinstance(delta, dict) and len(delta) < 100 and set(body) == {"delta"}:
        assert any(is_secret_key(k) for k in delta) or any(not k or "\x00" in k for k in delta)

    answer = dev_server.client.patch(
        f"/dev/v1/sessions/{APP}/{USER}/{snapshot.session_id}/state",
        content=json.dumps(body).encode("utf-8", "surrogatepass"),
        headers={"content-type": "application/json"},
    )

    _refused_cleanly(answer)
    snapshot.unchanged()


# ---- the token never leaks -------------------------------------------------------------------------------------


def test_the_token_appears_in_no_answer_event_model_request_or_log(
    dev_server: DevServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = dev_server.client
    started = dev_server.start_run("weather in Tokyo")
    streamed = [json.dumps(i.data) for i in dev_server.events(started["run_id"])]
    paused_run, _ = _paused_run(dev_server)
    client.post(f"/dev/v1/runs/{paused_run}/resume", json={"tool_response": {"confirmed": "maybe"}})
    client.post(f"/dev/v1/runs?token={TOKEN}", json={})
    client.get("/dev/v1/runs/nope/events", headers={"Last-Event-ID": TOKEN})
    client.post("/dev/v1/sessions", json={"state": {"api_key": TOKEN}})
    client.patch(f"/dev/v1/sessions/{APP}/{USER}/{started['session_id']}/state", json={"delta": {"token": TOKEN}})
    client.get(f"/dev/v1/{TOKEN}")
    client.get(f"/dev/v1/agents/{TOKEN}")
    for path in ("/dev/v1/agents", "/dev/v1/sessions", "/dev/v1/diagnostics", "/dev/v1/observability"):
        client.get(path)
    client.get(f"/dev/v1/sessions/{APP}/{USER}/{started['session_id']}")
    with httpx.Client(base_url=dev_server.url, trust_env=False) as stranger:
        dev_server.responses.append(stranger.get("/dev/v1/agents", headers={"Authorization": f"Bearer {TOKEN}0"}))

    answers = [r.text + json.dumps(dict(r.headers)) for r in dev_server.responses]
    assert len(answers) >= 15
    for text in answers + streamed:
        assert TOKEN not in text
    assert TOKEN not in json.dumps(dev_server.emu.requests)
    assert TOKEN not in dev_server.system.log_sink.read_text(errors="replace")
    server_side = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]  # not the client's
    assert not any(TOKEN in f"{r.getMessage()} {r.__dict__}" for r in server_side)


def test_a_run_started_with_accept_event_stream_is_streamed_in_the_same_request(dev_server: DevServer) -> None:
    dev_server.script()
    body = {"agent": dev_server.agent, "input": "hello in one request"}
    headers = {"accept": "text/event-stream"}
    with dev_server.client.stream("POST", "/dev/v1/runs", json=body, headers=headers) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        items = read_sse(answer)
    head, *rest = items
    assert head.event == "run" and head.id is None and set(head.data) == {"run_id", "app_name", "user_id", "session_id"}
    events = [i for i in rest if i.event == "event"]
    assert [i.id for i in events] == list(range(1, len(events) + 1)) and rest[-1].event == "outcome"
    assert rest[-1].data["state"] == "completed"
    # the same run, read again from its events route, has the same events
    again = dev_server.events(head.data["run_id"])
    assert [(i.id, i.data["id"]) for i in again if i.event == "event"] == [(i.id, i.data["id"]) for i in events]


def test_the_observability_snapshot_is_served_whole_however_many_series_it_has(dev_server: DevServer) -> None:
    from adk_actors import telemetry
    from adk_actors.telemetry import TELEMETRY_NAME, Emit

    # More label series than a generic JSON budget keeps: the route must not cut them.
    events = tuple(
        telemetry.event("plugin.failed", {}, plugin=f"{MARK}{i}", hook="before_run", reason="plugin_raised")
        for i in range(400)
    )
    dev_server.system.cast(TELEMETRY_NAME, Emit(events=events))

    def series() -> list[Any]:
        answer = dev_server.client.get("/dev/v1/observability").json()
        found = answer["instruments"].get("adk.plugin.failures", {}).get("series", [])
        mine = [x for x in found if not isinstance(x, dict) or str(x["labels"].get("plugin", "")).startswith(MARK)]
        return found if len(mine) >= 400 or any(not isinstance(x, dict) for x in found) else []

    assert all(isinstance(s, dict) and "labels" in s for s in until(series, 30, "400 series"))


def test_agents_lists_an_agent_on_a_host_that_reports_only_its_first_200_inner_actors(dev_server: DevServer) -> None:
    from adk_actors.agents import spawn_agent, stop_agent

    # A host's status lists at most 200 inner actors, so a busy node hides new agents from the tree: the registry
    # is asked too.
    system = dev_server.system
    probes = [system.spawn("adk_actors.testing.actors.Probe", id=f"crowd-{uuid.uuid4().hex[:10]}") for _ in range(450)]
    name = f"Late{uuid.uuid4().hex[:8]}"
    spawn_agent(name, {"provider": "gemini", "base_url": dev_server.emu.base_url, "api_key": "k"}, system=system)
    try:
        assert name not in dev_server.ops.agent_names()  # hidden from the hosts' reports
        listed = dev_server.client.get("/dev/v1/agents").json()
        assert [a["available"] for a in listed["agents"] if a["name"] == name] == [True]
        assert all(not a["name"].startswith("crowd-") for a in listed["agents"])
    finally:
        stop_agent(name, system=system)
        for ref in probes:
            system.stop_inner(ref)
