"""SSE on the edge: encoding and ``Last-Event-ID`` (with property tests), the bounds of a stream, keepalive, the
concurrent-stream slots, and blocking subscriptions bridged by ``Offload.iterate`` — over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actor_tests.web.conftest import INTERNAL_TEXT, Edge, auth, error_of
from adk_actors import errors
from adk_actors.web import BlockingIterator, EdgeLimits, Offload, encode_event, parse_last_event_id
from adk_actors.web.sse import MAX_EVENT_ID


def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        threading.Event().wait(0.01)


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    """Events and comments of an SSE body, parsed as the HTML living standard says a client does."""
    out: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
    data: list[str] = []
    for line in re.split(r"\r\n|\r|\n", raw.decode("utf-8")):
        if line == "":
            if data or fields:
                out.append({**fields, "data": "\n".join(data) if data else None})
            fields, data = {}, []
        elif line.startswith(":"):
            out.append({"comment": line[1:].strip()})
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name in ("id", "event"):
                fields[name] = value
            else:
                fields.setdefault("unknown", []).append(name)
    return out


def events_of(raw: bytes) -> list[dict[str, Any]]:
    """The events (not comments) of an SSE body, with ``data`` decoded from JSON."""
    return [{**e, "data": json.loads(e["data"])} for e in parse_sse(raw) if "comment" not in e]


def get_stream(edge: Edge, query: str, **headers: str) -> httpx.Response:
    response = edge.client.get(f"/api/stream?{query}", headers={**auth(), **headers})
    return response


# --- encoding ---------------------------------------------------------------------------------------------------


def test_encode_event_writes_id_event_and_compact_json_data() -> None:
    assert encode_event(7, "item", {"a": [1, "x"]}) == b'id: 7\nevent: item\ndata: {"a":[1,"x"]}\n\n'
    assert encode_event(None, "bound", {"bound": "events"}) == b'event: bound\ndata: {"bound":"events"}\n\n'


def test_line_breaks_in_data_stay_inside_the_one_data_line() -> None:
    raw = encode_event(1, "item", {"text": "a\nb\r\nid: 99\revent: forged\n\n"})
    assert raw.count(b"\n") == 4  # id, event, data, blank line
    assert events_of(raw) == [{"id": "1", "event": "item", "data": {"text": "a\nb\r\nid: 99\revent: forged\n\n"}}]


@pytest.mark.parametrize("name", ["", "has space", "line\nbreak", "cr\rname", "x" * 65, "9starts-with-digit", None])
def test_event_names_that_could_inject_fields_are_refused(name: Any) -> None:
    with pytest.raises(errors.ValidationError) as info:
        encode_event(1, name, {})
    assert info.value.reason == "invalid_event_name"


@pytest.mark.parametrize(
    ("id_", "data", "reason"),
    [
        (-1, {}, "invalid_event_id"),
        (MAX_EVENT_ID + 1, {}, "invalid_event_id"),
        (True, {}, "invalid_event_id"),
        ("1", {}, "invalid_event_id"),
        (1, {"x": float("nan")}, "invalid_event_data"),
        (1, {"x": object()}, "invalid_event_data"),
    ],
)
def test_bad_ids_and_data_are_refused(id_: Any, data: Any, reason: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        encode_event(id_, "item", data)
    assert info.value.reason == reason


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=15,
)


_NAMES = st.one_of(st.from_regex(r"[A-Za-z][A-Za-z0-9_.:\-]{0,63}", fullmatch=True), st.text(max_size=70))


@settings(max_examples=300, deadline=None)
@given(id_=st.none() | st.integers(0, MAX_EVENT_ID), name=_NAMES, data=_JSON)
def test_encoded_events_parse_back_exactly_or_are_refused(id_: int | None, name: str, data: Any) -> None:
    try:
        raw = encode_event(id_, name, data)
    except errors.ValidationError as err:
        assert err.reason == "invalid_event_name"
        assert not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.:\-]{0,63}", name)
        return
    parsed = events_of(raw)
    expected: dict[str, Any] = {"event": name, "data": data}
    if id_ is not None:
        expected["id"] = str(id_)
    assert parsed == [expected]


# --- Last-Event-ID ----------------------------------------------------------------------------------------------


def test_last_event_id_accepts_canonical_decimals() -> None:
    assert parse_last_event_id(None) is None
    assert [parse_last_event_id(v) for v in ("0", "7", "120", str(MAX_EVENT_ID))] == [0, 7, 120, MAX_EVENT_ID]
    assert parse_last_event_id(b"42") == 42


@pytest.mark.parametrize(
    "value", ["", " 1", "1 ", "+1", "-1", "01", "1.0", "1e3", "0x10", "١٢", str(MAX_EVENT_ID + 1), "9" * 40, 5]
)
def test_last_event_id_refuses_everything_else_without_echoing_it(value: Any) -> None:
    with pytest.raises(errors.ValidationError) as info:
        parse_last_event_id(value)
    assert info.value.reason == "invalid_last_event_id"
    assert info.value.details == {"max_digits": 19}


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=25))
def test_last_event_id_parses_exactly_the_canonical_forms(text: str) -> None:
    try:
        value = parse_last_event_id(text)
    except errors.ValidationError as err:
        assert err.reason == "invalid_last_event_id"
        canonical = text.isascii() and text.isdigit() and str(int(text)) == text and int(text) <= MAX_EVENT_ID
        assert not canonical
        return
    assert value is not None and str(value) == text and 0 <= value <= MAX_EVENT_ID


@given(value=st.integers(0, MAX_EVENT_ID))
def test_last_event_id_round_trips_every_id(value: int) -> None:
    assert parse_last_event_id(str(value)) == value


def test_an_invalid_last_event_id_header_is_a_400(edge: Edge) -> None:
    response = get_stream(edge, "count=1", **{"Last-Event-ID": "abc"})
    assert response.status_code == 400
    assert error_of(response) == {
        "reason": "invalid_last_event_id",
        "message": "Last-Event-ID must be a decimal event id",
        "max_digits": 19,
    }


def test_a_stream_resumes_after_the_last_event_id(edge: Edge) -> None:
    response = get_stream(edge, "count=3", **{"Last-Event-ID": "2"})
    assert [e["id"] for e in events_of(response.content)] == ["3", "4", "5"]


# --- bounds -----------------------------------------------------------------------------------------------------


def test_a_stream_that_ends_by_itself_has_no_bound_event(edge: Edge) -> None:
    response = get_stream(edge, "count=2")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    assert [(e["id"], e["event"]) for e in events_of(response.content)] == [("1", "item"), ("2", "item")]
    until(lambda: edge.sources.closed == 1 and edge.guard.streams.in_use == 0)


def test_the_event_bound_closes_the_stream_with_a_bound_event(serve: Callable[..., Edge]) -> None:
    edge = serve(limits=EdgeLimits(sse_max_events=3))
    events = events_of(get_stream(edge, "count=10").content)
    assert [e.get("id") for e in events] == ["1", "2", "3", None]
    assert events[-1] == {"event": "bound", "data": {"bound": "events", "limit": 3}}
    until(lambda: edge.sources.closed == 1)


def test_a_last_event_that_reaches_the_event_bound_ends_the_stream_without_a_bound_event(
    serve: Callable[..., Edge],
) -> None:
    # A run's outcome landing exactly on the bound must not tell the client to reconnect.
    edge = serve(limits=EdgeLimits(sse_max_events=3))
    events = events_of(get_stream(edge, "count=3&last").content)
    assert [(e.get("id"), e["event"]) for e in events] == [("1", "item"), ("2", "item"), ("3", "item")]
    until(lambda: edge.sources.closed == 1)


def test_the_byte_bound_closes_the_stream_before_the_event_that_would_cross_it(serve: Callable[..., Edge]) -> None:
    one = len(encode_event(1, "item", {"seq": 1, "pad": "x" * 100}))
    limit = 3 * one + one // 2
    edge = serve(limits=EdgeLimits(sse_max_bytes=limit))
    raw = get_stream(edge, "count=10&size=100").content
    events = events_of(raw)
    assert [e.get("id") for e in events] == ["1", "2", "3", None]
    assert events[-1]["data"] == {"bound": "bytes", "limit": limit}
    sent = raw[: raw.index(b"event: bound")]
    assert len(sent) <= limit


def test_the_duration_bound_closes_an_idle_stream(serve: Callable[..., Edge]) -> None:
    edge = serve(limits=EdgeLimits(sse_max_duration_ms=300, keepalive_s=60))
    began = time.monotonic()
    events = events_of(get_stream(edge, "count=1&idle").content)
    assert time.monotonic() - began >= 0.3
    assert events == [
        {"id": "1", "event": "item", "data": {"seq": 1, "pad": ""}},
        {"event": "bound", "data": {"bound": "duration", "limit": 300}},
    ]
    until(lambda: edge.sources.closed == 1)


def test_an_idle_stream_sends_keepalive_comments(serve: Callable[..., Edge]) -> None:
    edge = serve(limits=EdgeLimits(sse_max_duration_ms=500, keepalive_s=0.05))
    parsed = parse_sse(get_stream(edge, "count=0&idle").content)
    assert sum(1 for e in parsed if e.get("comment") == "keepalive") >= 3
    assert parsed[-1]["event"] == "bound"


def test_source_failures_end_the_stream_with_an_error_event(edge: Edge) -> None:
    adk = events_of(get_stream(edge, "count=1&fail=adk").content)
    assert adk[-1] == {"event": "error", "data": {"reason": "run_failed"}}
    boom = get_stream(edge, "count=1&fail=boom")
    assert events_of(boom.content)[-1] == {"event": "error", "data": {"reason": "internal"}}
    assert INTERNAL_TEXT not in boom.text
    until(lambda: edge.sources.closed == 2)


def test_too_many_streams_get_503_until_a_client_disconnects(serve: Callable[..., Edge]) -> None:
    edge = serve(limits=EdgeLimits(max_concurrent_streams=1))
    with httpx.Client(base_url=edge.url, timeout=10.0, trust_env=False) as first:
        with first.stream("GET", "/api/stream?count=1&idle", headers=auth()) as held:
            assert held.status_code == 200
            lines = held.iter_lines()  # kept: a dropped line iterator closes the response
            assert next(lines) == "id: 1"
            assert edge.guard.streams.in_use == 1
            refused = get_stream(edge, "count=1")
            assert refused.status_code == 503
            assert error_of(refused)["reason"] == "too_many_streams"
            assert error_of(refused)["max_concurrent_streams"] == 1
    until(lambda: edge.guard.streams.in_use == 0)
    until(lambda: edge.sources.closed == 1)
    again = get_stream(edge, "count=1")
    assert again.status_code == 200
    assert [e["id"] for e in events_of(again.content)] == ["1"]


# --- Offload.iterate ----------------------------------------------------------------------------------------------


def test_a_blocking_subscription_is_streamed_and_closed_when_the_client_leaves(edge: Edge) -> None:
    with httpx.Client(base_url=edge.url, timeout=10.0, trust_env=False) as client:
        with client.stream("GET", "/api/blocking-stream", headers=auth()) as held:
            ids: list[str] = []
            for line in held.iter_lines():
                if line.startswith("id: "):
                    ids.append(line)
                if len(ids) == 3:
                    break
    assert ids == ["id: 1", "id: 2", "id: 3"]
    until(lambda: edge.guard.streams.in_use == 0)
    # Either the stream had already asked for item 4 (the feed is blocked in that next(): it closes as soon as the
    # next() returns) or it had not (the feed was closed at once); either way nothing more is pulled.
    if edge.sources.blocking_closed.is_set():
        assert edge.sources.feed == [1, 2, 3]
    else:
        edge.sources.more.set()
        assert edge.sources.blocking_closed.wait(10.0)
        assert edge.sources.feed == [1, 2, 3, 4]
    until(lambda: edge.offload.stats()["iterators"] == 0)


def _counting(limit: int, counter: list[int], closed: threading.Event) -> Iterator[int]:
    try:
        for n in range(limit):
            counter.append(n)
            yield n
    finally:
        closed.set()


def test_iterate_pulls_only_what_the_consumer_asks_for_and_closes_on_aclose() -> None:
    offload = Offload()
    pulled: list[int] = []
    closed = threading.Event()

    async def main() -> list[int]:
        got = []
        async with offload.iterate(_counting, 100, pulled, closed) as items:
            async for n in items:
                got.append(n)
                if n == 2:
                    break
        return got

    try:
        assert asyncio.run(main()) == [0, 1, 2]
        assert closed.wait(10.0)
        assert pulled == [0, 1, 2]
    finally:
        offload.close()
    assert offload.stats()["iterators"] == 0


def test_iterate_runs_to_the_end_and_raises_errors_of_the_factory_and_the_iterator() -> None:
    offload = Offload()
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def failing_factory() -> Iterator[int]:
        raise errors.RunNotFound("no run", details={"run_id": "r"})

    def failing_iterator() -> Iterator[str]:
        yield var.get()
        raise errors.AskTimeout("idle")

    async def main() -> tuple[list[int], list[str]]:
        var.set("handler-context")
        whole = [n async for n in offload.iterate(_counting, 3, [], threading.Event())]
        with pytest.raises(errors.RunNotFound):
            await anext(offload.iterate(failing_factory))
        seen: list[str] = []
        with pytest.raises(errors.AskTimeout):
            async for item in offload.iterate(failing_iterator):
                seen.append(item)
        return whole, seen

    try:
        whole, seen = asyncio.run(main())
        until(lambda: offload.stats()["iterators"] == 0)
    finally:
        offload.close()
    assert whole == [0, 1, 2]
    assert seen == ["handler-context"]


def test_iterate_refuses_past_max_iterators() -> None:
    offload = Offload(max_iterators=1)

    async def main() -> BlockingIterator[int]:
        first = offload.iterate(_counting, 10, [], threading.Event())
        try:
            with pytest.raises(errors.RuntimeFailure) as info:
                offload.iterate(_counting, 10, [], threading.Event())
            assert (info.value.reason, info.value.details) == ("edge_busy", {"max_iterators": 1})
        finally:
            await first.aclose()
        return first

    try:
        first = asyncio.run(main())
        until(lambda: first.finished)
        assert offload.stats()["iterators"] == 0
    finally:
        offload.close()
