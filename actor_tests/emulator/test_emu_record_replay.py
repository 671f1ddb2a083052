"""Record/replay: a recording emulator proxies to an upstream emulator; a replaying one serves the recording."""

from __future__ import annotations

import json
from pathlib import Path

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
