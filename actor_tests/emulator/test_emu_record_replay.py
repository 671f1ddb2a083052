"""Record/replay: a recording emulator proxies to an upstream emulator; a replaying one serves the recording."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import requests

from adk_actors.emulator import Emulator

from .helpers import COUNT, GEN, STREAM, WEATHER_TOOL, post, sse_events, user


def test_record_then_replay(tmp_path: Path) -> None:
    tape = tmp_path / "tape.jsonl"
    body = {"contents": [user("What is the weather in Lima?")], "tools": [WEATHER_TOOL]}
    with Emulator() as upstream, Emulator(record=tape, upstream=upstream.base_url) as recorder:
        live_unary = post(recorder.base_url, GEN, body, key="super-secret")
        live_stream = post(recorder.base_url, STREAM, {"contents": [user("stream me")]}, params={"alt": "sse"},
                           key="super-secret")  # fmt: skip
        live_error = post(recorder.base_url, "/v1beta/models/nope:generateContent", body, key="super-secret")
        live_count = post(recorder.base_url, COUNT, {"contents": [user("abcd")]}, key=None,
                          params={"key": "super-secret"})  # fmt: skip
        assert live_unary.status_code == 200 and live_error.status_code == 404 and live_count.status_code == 200
        assert len(upstream.requests) == 4  # every request really went upstream ...
        assert upstream.requests[3]["query"]["key"] == ["REDACTED"]  # ... with the key passed through
    text = tape.read_text()
    assert "super-secret" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["status"] for r in records] == [200, 200, 404, 200]
    assert records[0]["request_headers"]["x-goog-api-key"] == "REDACTED"
    assert records[1]["query"] == {"alt": ["sse"]}
    assert len(records[1]["sse_events"]) >= 3

    with Emulator(replay=tape) as replayer:
        unary = post(replayer.base_url, GEN, body, key="another-key")
        assert unary.status_code == 200 and unary.content == live_unary.content
        stream = post(replayer.base_url, STREAM, {"contents": [user("stream me")]}, params={"alt": "sse"})
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert stream.content == live_stream.content
        assert len(sse_events(stream.content)) == len(records[1]["sse_events"])
        error = post(replayer.base_url, "/v1beta/models/nope:generateContent", body)
        assert error.status_code == 404 and error.json() == live_error.json()
        count = post(replayer.base_url, COUNT, {"contents": [user("abcd")]})
        assert count.json() == live_count.json()
        # the same request again replays the same (last) exchange
        assert post(replayer.base_url, GEN, body).content == live_unary.content
        miss = post(replayer.base_url, GEN, {"contents": [user("never recorded")]})
        assert miss.status_code == 404
        assert miss.json()["error"]["message"].startswith("Replay: no recorded exchange")


def test_replay_serves_repeated_requests_in_order(tmp_path: Path) -> None:
    tape = tmp_path / "tape.jsonl"
    script = {"rules": [{"when": {}, "respond": {"fault": {"status": 503}, "times": 1}},
                        {"when": {}, "respond": {"text": "ok now"}}]}  # fmt: skip
    with Emulator(script=script) as upstream, Emulator(record=tape, upstream=upstream.base_url) as recorder:
        first = post(recorder.base_url, GEN, {"contents": [user("x")]})
        second = post(recorder.base_url, GEN, {"contents": [user("x")]})
    assert (first.status_code, second.status_code) == (503, 200)
    with Emulator(replay=tape) as replayer:
        assert post(replayer.base_url, GEN, {"contents": [user("x")]}).status_code == 503
        assert post(replayer.base_url, GEN, {"contents": [user("x")]}).status_code == 200


def test_upstream_unreachable_is_502(tmp_path: Path) -> None:
    with Emulator() as dead:
        url = dead.base_url
    with Emulator(record=tmp_path / "t.jsonl", upstream=url) as recorder:
        resp = post(recorder.base_url, GEN, {"contents": [user("x")]})
    assert resp.status_code == 502
    assert not (tmp_path / "t.jsonl").exists()


def test_upstream_failure_with_the_key_in_the_query_leaks_it_nowhere(tmp_path: Path) -> None:
    tape = tmp_path / "tape.jsonl"
    secret = "AIzaSyTHIS-IS-THE-SECRET-KEY"
    body = {"contents": [user("x")]}
    upstream = Emulator().start()
    try:
        with Emulator(record=tape, upstream=upstream.base_url) as recorder:
            ok = post(recorder.base_url, GEN, body, key=None, params={"key": secret})
            upstream.stop()  # from now on the upstream URL (which carries ?key=...) refuses connections
            failed = post(recorder.base_url, GEN, body, key=None, params={"key": secret})
            logged = json.dumps(recorder.requests)
    finally:
        upstream.stop()
    assert ok.status_code == 200 and failed.status_code == 502
    assert failed.json() == {
        "error": {"code": 502, "message": "Upstream request failed (ConnectionError).", "status": "UNAVAILABLE"}
    }
    assert secret not in failed.text and secret not in ok.text and secret not in logged
    text = tape.read_text()
    assert secret not in text
    assert len(text.splitlines()) == 1  # only the exchange that reached the upstream is recorded


def test_tape_lines_are_canonical_json(tmp_path: Path) -> None:
    from adk_actors.content.canonical import canonical_dumps, canonical_loads

    tape = tmp_path / "tape.jsonl"
    nan_body = b'{"contents": [{"role": "user", "parts": [{"text": "x"}]}], "generationConfig": {"temperature": NaN}}'
    with Emulator() as upstream, Emulator(record=tape, upstream=upstream.base_url) as recorder:
        post(recorder.base_url, GEN, {"contents": [user("zebra")], "tools": [WEATHER_TOOL]})
        post(recorder.base_url, STREAM, {"contents": [user("stream \u00e9")]}, params={"alt": "sse"})
        live_nan = post(recorder.base_url, GEN, raw=nan_body)
    lines = tape.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line == canonical_dumps(canonical_loads(line))  # sorted keys, compact, no NaN, no NUL
    assert "NaN" not in lines[2] and "request_body_b64" in json.loads(lines[2])
    with Emulator(replay=tape) as replayer:  # both record forms replay
        again = post(replayer.base_url, GEN, raw=nan_body)
        assert (again.status_code, again.content) == (live_nan.status_code, live_nan.content)
        assert post(replayer.base_url, GEN, {"contents": [user("zebra")], "tools": [WEATHER_TOOL]}).status_code == 200


def test_stop_does_not_wait_for_an_in_flight_upstream_call(tmp_path: Path) -> None:
    """An upstream that accepts and never answers: stop() returns without waiting for the upstream timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted, done = threading.Event(), threading.Event()
    conns: list[socket.socket] = []

    def silent_upstream() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conns.append(conn)
            accepted.set()

    outcome: list[object] = []

    def client() -> None:
        try:
            outcome.append(post(recorder.base_url, GEN, {"contents": [user("x")]}, timeout=60).status_code)
        except requests.RequestException as exc:
            outcome.append(type(exc).__name__)

    server_thread = threading.Thread(target=silent_upstream)
    server_thread.start()
    recorder = Emulator(record=tmp_path / "t.jsonl", upstream=f"http://127.0.0.1:{listener.getsockname()[1]}")
    recorder.start()
    client_thread = threading.Thread(target=client)
    try:
        client_thread.start()
        assert accepted.wait(30), "the recorder never reached the upstream"
        stopper = threading.Thread(target=recorder.stop)
        stopper.start()
        stopper.join(10)  # the upstream timeout is 30 s: a stop() that waited for the call would still run
        assert not stopper.is_alive(), "stop() waited for the in-flight upstream call"
        client_thread.join(30)
        assert outcome and outcome[0] != 200
    finally:
        recorder.stop()
        done.set()
        server_thread.join(10)
        for conn in conns:
            conn.close()
        listener.close()
        for t in threading.enumerate():
            if t.name == "gemini-emulator-upstream":
                t.join(30)  # its upstream socket is closed now: it ends at once
    assert not (tmp_path / "t.jsonl").exists()


def test_recorded_midstream_error_replays_and_is_not_taken_for_a_response(
    tmp_path: Path, served_bodies: list[Any]
) -> None:
    tape = tmp_path / "tape.jsonl"
    script = {
        "rules": [
            {
                "when": {},
                "respond": {"text": "abcdefghij", "chunks": 4, "fault": {"kind": "midstream_error", "after_chunks": 2}},
            }
        ]
    }
    body = {"contents": [user("x")]}
    with Emulator(script=script) as upstream, Emulator(record=tape, upstream=upstream.base_url) as recorder:
        live = post(recorder.base_url, STREAM, body, params={"alt": "sse"})
    with Emulator(replay=tape) as replayer:
        again = post(replayer.base_url, STREAM, body, params={"alt": "sse"})
    assert again.content == live.content
    events = sse_events(again.content)
    assert len(events) == 3 and events[-1]["error"]["code"] == 503
    replayed = [s for s in served_bodies if s.path == STREAM]
    assert sorted(s.status for s in replayed) == [200] * 6 + [503] * 3  # upstream, recorder, replayer
