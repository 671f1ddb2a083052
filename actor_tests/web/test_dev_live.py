"""The developer Live surfaces over real parts: ``/dev/v1/live`` routes and the voice WebSocket served by uvicorn on
127.0.0.1, a real node, Live sessions on the Gemini emulator's Live endpoint, and ``adk live`` as a subprocess.

Pinned: the routes act only as the configured principal (unset: 503; another principal's session looks missing);
text reaches the emulator; the event stream is future-only (``Last-Event-ID`` refused), projects audio to its size
and unsubscribes when it ends; the voice socket authenticates by subprotocol, carries the v1 frames both ways,
answers bad frames without closing and stops its bridge when the browser leaves; no token or principal reaches an
answer or a log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actor_tests.live.conftest import PRINCIPAL, StartLive, emu, live_config, start_live  # noqa: F401
from actor_tests.web.live_support import (
    OWNER,
    TOKEN,
    LiveDev,
    audio_frames,
    parse_server_frame,
    serve_live,
    speech_pcm,
    voice_connect,
)
from adk_actors.devapi.live import EVENT_PAYLOAD_KEYS, STATUS_KEYS, live_event_json
from adk_actors.emulator import Emulator
from adk_actors.live import LiveEvent, close_live_session, live_status, start_live_session
from adk_actors.live import voice_protocol as vp
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web.voice_page import BEARER_PREFIX, SUBPROTOCOL, _offered_token, bearer_subprotocol

ADK = str(Path(sys.executable).with_name("adk"))
WAIT_S = 20.0
SCRIPT = {
    "rules": [
        {
            "when": {"user_text_contains": "audio"},
            "respond": {"text": "Okay, the lights are on.", "input_transcription": "turn on the lights"},
        },
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}


def until(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} not reached before the deadline"
        threading.Event().wait(0.02)
    return value


def closed_with(ws: Any) -> tuple[int, str]:
    """Read the voice socket until the server closes it; its close code and reason."""
    from websockets.exceptions import ConnectionClosed

    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=WAIT_S)
    assert closed.value.rcvd is not None, "closed without a close frame"
    return closed.value.rcvd.code, closed.value.rcvd.reason


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"])


@pytest.fixture
def dev(system: ActorSystemHandle, emu: Emulator) -> Iterator[LiveDev]:  # noqa: F811
    emu.set_script(SCRIPT)
    with serve_live(system, emu) as served:
        yield served


@pytest.fixture
def mine(start_live: StartLive) -> Callable[..., Any]:  # noqa: F811
    """``mine(**config)``: a Live session of the developer principal, active, closed after the test."""

    def start(**config: Any) -> Any:
        session = start_live(principal=OWNER, input_audio_transcription=True, **config)
        until(lambda: live_status(session, OWNER)["state"] == "active", "the session active")
        return session

    return start


class LiveStream:
    """An open ``/events`` response read line by line across calls."""

    def __init__(self, answer: httpx.Response) -> None:
        self.answer = answer
        self._lines: Iterator[str] | None = None

    def until(self, *kinds: str) -> tuple[list[Any], str]:
        """The SSE items up to the first ``live`` event of one of ``kinds`` (or ``subscribed``, ``error``,
        ``bound``, or the end of the body), as ``(id, event, data)``, and the raw text read."""
        if self._lines is None:
            self._lines = self.answer.iter_lines()
        items: list[Any] = []
        raw: list[str] = []
        fields: dict[str, str] = {}
        for line in self._lines:
            raw.append(line)
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if not fields:
                continue
            item = (fields.get("id"), fields["event"], json.loads(fields["data"]))
            items.append(item)
            fields = {}
            if item[1] in ("error", "bound") or (item[1] == "subscribed" and "subscribed" in kinds):
                break
            if item[1] == "live" and item[2]["kind"] in kinds:
                break
        return items, "\n".join(raw)


@contextlib.contextmanager
def open_events(dev: LiveDev, session_id: str, **headers: str) -> Iterator[LiveStream]:
    with dev.client.stream("GET", f"/dev/v1/live/sessions/{session_id}/events", headers=headers) as answer:
        yield LiveStream(answer)


# ---- principal ---------------------------------------------------------------------------------------------


def test_without_a_principal_every_live_route_answers_503_live_unavailable(
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
) -> None:
    assert system.settings.dev_live_principal is None and "ADK_DEV_LIVE_PRINCIPAL" not in os.environ
    with serve_live(system, emu, live_principal=None) as dev:
        answers = [
            dev.client.get("/dev/v1/live/sessions"),
            dev.client.get("/dev/v1/live/sessions/any-session"),
            dev.client.post("/dev/v1/live/sessions/any-session/text", json={"text": "hi"}),
            dev.client.get("/dev/v1/live/sessions/any-session/events"),
        ]
        for answer in answers:
            assert error_of(answer, 503)["reason"] == "live_unavailable"
        with voice_connect(dev, "any-session") as ws:
            assert closed_with(ws) == (1008, "live_unavailable")


def test_the_list_and_status_show_only_the_principals_sessions_and_hide_the_others(
    dev: LiveDev,
    mine: Callable[..., Any],
    start_live: StartLive,  # noqa: F811
) -> None:
    own = mine()
    other = start_live(principal="someone-else")

    listed = dev.client.get("/dev/v1/live/sessions").json()
    ids = [s["session_id"] for s in listed["sessions"]]
    assert own.session_id in ids and other.session_id not in ids and listed["truncated"] is False
    shown = next(s for s in listed["sessions"] if s["session_id"] == own.session_id)
    assert set(shown) == set(STATUS_KEYS) and shown["state"] == "active" and shown["subscribers"] == 0
    assert set(shown["ingress"]) == {"messages", "bytes"}

    status = dev.client.get(f"/dev/v1/live/sessions/{own.session_id}").json()
    assert status["session_id"] == own.session_id and status["model"] == shown["model"]

    hidden = error_of(dev.client.get(f"/dev/v1/live/sessions/{other.session_id}"), 404)
    missing = error_of(dev.client.get("/dev/v1/live/sessions/no-such-session"), 404)
    assert hidden == missing == {"reason": "live_session_not_found", "message": "no such Live session"}
    for path in (f"{other.session_id}/text", "no-such-session/text"):
        answer = dev.client.post(f"/dev/v1/live/sessions/{path}", json={"text": "hi"})
        assert error_of(answer, 404) == hidden
    with open_events(dev, other.session_id) as stream:
        assert stream.answer.status_code == 404
        stream.answer.read()
        assert error_of(stream.answer, 404) == hidden
    assert error_of(dev.client.get("/dev/v1/live/sessions/bad%20id"), 400)["reason"] == "invalid_session_id"


# ---- text and events ----------------------------------------------------------------------------------------


def test_text_reaches_the_emulator_and_the_stream_projects_audio_to_its_size(
    dev: LiveDev, mine: Callable[..., Any]
) -> None:
    session = mine()
    with open_events(dev, session.session_id) as stream:
        answer = stream.answer
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        head, _ = stream.until("subscribed")
        assert head == [(None, "subscribed", {"session_id": session.session_id, "state": "active"})]

        sent = dev.client.post(f"/dev/v1/live/sessions/{session.session_id}/text", json={"text": "hello there"})
        assert sent.status_code == 200 and sent.json() == {"input_seq": 1}
        items, raw = stream.until("turn_complete")

    assert all(item_id is None for item_id, _, _ in items)  # no id lines: Live is not replayed
    events = [data for _, name, data in items if name == "live"]
    kinds = [e["kind"] for e in events]
    assert "audio" in kinds and kinds[-1] == "turn_complete"
    for event in events:
        if event["kind"] == "audio":
            assert set(event) == {"kind", "seq", "bytes"} and event["bytes"] > 0
        else:
            assert set(event) == {"kind", "seq", "payload"}
            assert set(event["payload"]) <= set(EVENT_PAYLOAD_KEYS[event["kind"]])
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    said = "".join(e["payload"]["text"] for e in events if e["kind"] == "output_transcription")
    assert "hello there" in said.lower()
    assert not re.search(r"[A-Za-z0-9+/]{120,}", raw), "base64 (PCM) in the stream"
    assert "mime_type" not in raw and "inlineData" not in raw

    texts = [e for e in dev.emu.live_log if e["direction"] == "in" and e["kind"] == "realtimeInput.text"]
    assert len(texts) == 1
    assert live_status(session, OWNER)["input_seq"] == 1


def test_a_last_event_id_is_refused_with_400_live_replay_unsupported(dev: LiveDev, mine: Callable[..., Any]) -> None:
    session = mine()
    with open_events(dev, session.session_id, **{"Last-Event-ID": "3"}) as stream:
        assert stream.answer.status_code == 400  # before reading: a stream would not end
        stream.answer.read()
        assert error_of(stream.answer, 400)["reason"] == "live_replay_unsupported"
    assert live_status(session, OWNER)["subscribers"] == []


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"text": ""}, "invalid_text"),
        ({"text": 42}, "invalid_text"),
        ({"text": "x" * (64 * 1024 + 1)}, "invalid_text"),
        ({}, "invalid_text"),
        ({"text": "hi", "principal": "someone-else"}, "unknown_key"),
    ],
)
def test_bad_text_is_400_and_sends_nothing(
    dev: LiveDev, mine: Callable[..., Any], body: dict[str, Any], reason: str
) -> None:
    session = mine()
    answer = dev.client.post(f"/dev/v1/live/sessions/{session.session_id}/text", json=body)
    assert error_of(answer, 400)["reason"] == reason
    assert live_status(session, OWNER)["input_seq"] == 0


def test_text_to_a_session_that_is_not_active_is_409(
    dev: LiveDev,
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:  # accepts TCP, never answers the upgrade
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        config = live_config(emu)
        path = emu.live_url.split("/", 3)[3]
        config["endpoint"]["url"] = f"ws://127.0.0.1:{silent.getsockname()[1]}/{path}"
        session = start_live_session(f"live-{uuid.uuid4().hex[:10]}", OWNER, config, system=system)
        try:
            assert live_status(session, OWNER)["state"] == "connecting"
            answer = dev.client.post(f"/dev/v1/live/sessions/{session.session_id}/text", json={"text": "hi"})
            assert error_of(answer, 409) == {"reason": "live_not_active", "message": "the Live session is not active"}
        finally:
            close_live_session(session, OWNER, timeout=10)


def test_the_stream_unsubscribes_when_the_client_goes_away(dev: LiveDev, mine: Callable[..., Any]) -> None:
    session = mine()
    with open_events(dev, session.session_id) as stream:
        stream.until("subscribed")
        assert len(live_status(session, OWNER)["subscribers"]) == 1
    until(lambda: live_status(session, OWNER)["subscribers"] == [], "the subscription released")


def test_the_stream_ends_after_the_terminal_event(dev: LiveDev, mine: Callable[..., Any]) -> None:
    session = mine()
    with open_events(dev, session.session_id) as stream:
        stream.until("subscribed")
        close_live_session(session, OWNER)
        rest, _ = stream.until()  # to the end of the body
        assert list(stream.until()[0]) == []
    assert rest[-1][1] == "live" and rest[-1][2]["kind"] == "terminal"
    assert rest[-1][2]["payload"] == {"reason": "closed"}


# ---- the voice socket ---------------------------------------------------------------------------------------


def _receive_until(ws: Any, stop: Callable[[dict[str, Any]], bool], ack: bool = True) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = parse_server_frame(ws.recv(timeout=WAIT_S))
        frames.append(frame)
        if ack and frame["seq"]:
            ws.send(vp.encode_ack(frame["seq"]))
        if stop(frame):
            return frames


def test_the_voice_socket_carries_speech_up_and_transcriptions_and_audio_down(
    dev: LiveDev, mine: Callable[..., Any]
) -> None:
    session = mine()
    with voice_connect(dev, session.session_id) as ws:
        assert ws.subprotocol == SUBPROTOCOL
        for frame in audio_frames(speech_pcm()):
            ws.send(frame)
        frames = _receive_until(ws, lambda f: f["type"] == 131 and f["code"] == vp.LIFECYCLE["turn_complete"])
        until(lambda: len(live_status(session, OWNER)["subscribers"]) == 1, "the bridge subscribed")
    heard = [f["text"] for f in frames if f["type"] == 130 and f["direction"] == "input"]
    assert heard == ["turn on the lights"]
    said = "".join(f["text"] for f in frames if f["type"] == 130 and f["direction"] == "output")
    assert said == "Okay, the lights are on."
    audio = [f for f in frames if f["type"] == 129]
    assert audio and all(f["rate"] == 24000 and f["channels"] == 1 and f["pcm"] for f in audio)
    assert [e for e in dev.emu.live_log if e["kind"] == "realtimeInput.audio"]
    # the socket closed: the bridge stopped and unsubscribed, and a new one may start
    until(lambda: live_status(session, OWNER)["subscribers"] == [], "the bridge gone")
    with voice_connect(dev, session.session_id) as again:
        again.send(audio_frames(bytes(640))[0])
        until(lambda: len(live_status(session, OWNER)["subscribers"]) == 1, "the second bridge subscribed")


def test_a_bad_frame_is_answered_with_an_error_frame_and_the_socket_stays_open(
    dev: LiveDev, mine: Callable[..., Any]
) -> None:
    session = mine()
    with voice_connect(dev, session.session_id) as ws:
        ws.send(vp.encode_audio(5, bytes(640)))  # audio sequences start at 1
        refused = parse_server_frame(ws.recv(timeout=WAIT_S))
        assert refused == {"type": 131, "seq": 0, "code": vp.LIFECYCLE["error"], "reason": "invalid_voice_frame:seq"}
        ws.send(b"\x02\x01")  # version 2
        assert parse_server_frame(ws.recv(timeout=WAIT_S))["reason"] == "invalid_voice_frame:version"
        for frame in audio_frames(speech_pcm("hi"), first_seq=1):
            ws.send(frame)
        frames = _receive_until(ws, lambda f: f["type"] == 131 and f["code"] == vp.LIFECYCLE["turn_complete"])
        assert any(f["type"] == 129 for f in frames)
        ws.send("a text message")
        assert closed_with(ws) == (1003, "binary_frames_only")


@pytest.mark.parametrize(
    "protocols",
    [
        [SUBPROTOCOL],
        [SUBPROTOCOL, bearer_subprotocol("wrong-" + uuid.uuid4().hex)],
        [bearer_subprotocol(TOKEN)],
        [SUBPROTOCOL, bearer_subprotocol(TOKEN), bearer_subprotocol(TOKEN + "x")],
        [SUBPROTOCOL, BEARER_PREFIX + "%%%"],
    ],
)
def test_a_voice_handshake_without_exactly_one_valid_token_is_refused(
    dev: LiveDev, mine: Callable[..., Any], protocols: list[str]
) -> None:
    from websockets.exceptions import InvalidStatus

    session = mine()
    with pytest.raises(InvalidStatus) as refused:
        voice_connect(dev, session.session_id, protocols=protocols)
    assert refused.value.response.status_code == 403
    assert live_status(session, OWNER)["subscribers"] == []


def test_a_voice_handshake_from_another_origin_is_refused(dev: LiveDev, mine: Callable[..., Any]) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect
    from websockets.typing import Origin, Subprotocol

    session = mine()
    with pytest.raises(InvalidStatus) as refused:
        connect(
            f"{dev.ws_url}/dev/v1/live/sessions/{session.session_id}/voice",
            subprotocols=[Subprotocol(SUBPROTOCOL), Subprotocol(bearer_subprotocol(TOKEN))],
            origin=Origin("http://evil.example"),
            open_timeout=10,
        )
    assert refused.value.response.status_code == 403


def test_the_voice_socket_of_another_principals_session_closes_1008_not_found(
    dev: LiveDev,
    start_live: StartLive,  # noqa: F811
) -> None:
    other = start_live(principal="someone-else")
    until(lambda: live_status(other, "someone-else")["state"] == "active", "the other session active")
    for session_id in (other.session_id, "no-such-session"):
        with voice_connect(dev, session_id) as ws:
            assert closed_with(ws) == (1008, "live_session_not_found")
    assert live_status(other, "someone-else")["subscribers"] == []


def test_a_second_voice_socket_on_one_session_is_refused_voice_bridge_exists(
    dev: LiveDev, mine: Callable[..., Any]
) -> None:
    session = mine()
    with voice_connect(dev, session.session_id) as first:
        first.send(audio_frames(bytes(640))[0])
        until(lambda: len(live_status(session, OWNER)["subscribers"]) == 1, "the first bridge subscribed")
        with voice_connect(dev, session.session_id) as second:
            assert closed_with(second) == (1008, "voice_bridge_exists")


# ---- the command line ---------------------------------------------------------------------------------------


def adk(*args: str, principal: str | None = OWNER) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ADK_DEV_LIVE_PRINCIPAL"}
    if principal is not None:
        env["ADK_DEV_LIVE_PRINCIPAL"] = principal
    return subprocess.run([ADK, *args], capture_output=True, text=True, timeout=60, env=env)


def test_adk_live_lists_shows_and_sends_as_the_configured_principal(
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
    mine: Callable[..., Any],
    start_live: StartLive,  # noqa: F811
) -> None:
    emu.set_script(SCRIPT)
    session = mine()
    other = start_live(principal="someone-else")
    port = str(system.port)

    listed = adk("live", "list", "--port", port)
    assert listed.returncode == 0, listed.stderr
    ids = [s["session_id"] for s in json.loads(listed.stdout)["sessions"]]
    assert session.session_id in ids and other.session_id not in ids

    shown = adk("live", "status", session.session_id, "--port", port)
    assert json.loads(shown.stdout)["state"] == "active"
    sent = adk("live", "send", session.session_id, "hello from the shell", "--port", port)
    assert sent.returncode == 0 and json.loads(sent.stdout) == {"input_seq": 1}
    until(lambda: any(e["kind"] == "realtimeInput.text" for e in emu.live_log), "the text at the emulator")

    hidden = adk("live", "status", other.session_id, "--port", port)
    assert hidden.returncode == 1 and "[live_session_not_found]" in hidden.stderr and hidden.stdout == ""
    unset = adk("live", "list", "--port", port, principal=None)
    assert unset.returncode == 1 and "[live_unavailable]" in unset.stderr
    for run in (listed, shown, sent, hidden, unset):
        assert OWNER not in run.stdout + run.stderr


# ---- nothing leaks --------------------------------------------------------------------------------------------


def test_the_token_and_the_principal_appear_in_no_answer_and_no_log(
    dev: LiveDev, mine: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    session = mine()
    sid = session.session_id
    client = dev.client
    with open_events(dev, sid) as stream:
        stream.until("subscribed")
        client.post(f"/dev/v1/live/sessions/{sid}/text", json={"text": f"say {OWNER} and {TOKEN}"})
        _, streamed = stream.until("turn_complete")
    client.get("/dev/v1/live/sessions")
    client.get(f"/dev/v1/live/sessions/{sid}")
    client.get(f"/dev/v1/live/sessions/{OWNER}")
    client.post(f"/dev/v1/live/sessions/{sid}/text", json={"text": ""})
    client.post(f"/dev/v1/live/sessions/{sid}/text?token={TOKEN}", json={"text": "x"})
    with open_events(dev, sid, **{"Last-Event-ID": TOKEN}) as refused:
        assert refused.answer.status_code == 400
        refused.answer.read()
    with voice_connect(dev, sid) as ws:
        ws.send(vp.encode_audio(9, bytes(640)))
        ws.recv(timeout=WAIT_S)
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus):
        voice_connect(dev, sid, token=TOKEN + "0")

    answers = [r.text + json.dumps(dict(r.headers)) for r in dev.responses]
    assert len(answers) >= 6
    marker = "canary-" + uuid.uuid4().hex
    logging.getLogger("adk_actors.web").warning("leak check %s", marker)
    sink = dev.system.log_sink.read_text(errors="replace")
    server_side = [
        f"{r.getMessage()} {r.__dict__}" for r in caplog.records if not r.name.startswith(("httpx", "httpc"))
    ]
    assert any(marker in line for line in server_side), "the captured log did not see the canary"
    for secret in (TOKEN, OWNER):
        for text in [*answers, sink, *server_side]:
            assert secret not in text
    assert TOKEN not in streamed.replace(f"say {OWNER} and {TOKEN}", "")  # only the echo of the user's own text


# ---- pure parts -------------------------------------------------------------------------------------------------

_TOKENS = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=16, max_size=256)


@given(_TOKENS)
@settings(max_examples=200, deadline=None)
def test_a_token_survives_the_subprotocol_round_trip_in_token_characters(token: str) -> None:
    offered = bearer_subprotocol(token)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", offered)  # an RFC 7230 token: what a browser accepts
    assert _offered_token([SUBPROTOCOL, offered]) == token
    assert _offered_token([SUBPROTOCOL, offered, offered]) is None


@given(st.lists(st.text(max_size=40), max_size=4))
@settings(max_examples=200, deadline=None)
def test_arbitrary_offers_never_crash_the_token_parser(offers: list[str]) -> None:
    found = _offered_token([BEARER_PREFIX + o for o in offers])
    assert found is None or isinstance(found, str)


_PAYLOADS = st.dictionaries(
    st.text(max_size=12), st.one_of(st.text(max_size=30), st.integers(), st.booleans(), st.none()), max_size=6
)


@given(
    kind=st.sampled_from([*EVENT_PAYLOAD_KEYS, "audio", "brand_new_kind"]),
    payload=_PAYLOADS,
    data=st.binary(max_size=64),
    seq=st.integers(min_value=1, max_value=2**40),
)
@settings(max_examples=300, deadline=None)
def test_an_event_shows_only_its_allowlisted_keys_and_audio_only_its_size(
    kind: str, payload: dict[str, Any], data: bytes, seq: int
) -> None:
    shown = live_event_json(LiveEvent("s", seq, kind, payload, data or None))
    if kind == "audio":
        assert shown == {"kind": "audio", "seq": seq, "bytes": len(data)}
        return
    assert set(shown) == {"kind", "seq", "payload"} and shown["seq"] == seq
    assert set(shown["payload"]) <= set(EVENT_PAYLOAD_KEYS.get(kind, ()))
    assert set(shown["payload"]) == {k for k in EVENT_PAYLOAD_KEYS.get(kind, ()) if k in payload}


def test_every_event_kind_of_the_live_api_has_a_reviewed_projection() -> None:
    documented = re.findall(r"``(\w+)``", LiveEvent.__doc__ or "")
    assert {"audio", *EVENT_PAYLOAD_KEYS} >= set(documented) - {"kind", "payload", "data"}


def test_a_principal_is_read_from_the_settings_then_the_environment() -> None:
    from adk_actors.devapi.live import live_principal
    from adk_actors.settings import Settings

    assert live_principal(Settings.from_dict({}), {}) is None
    assert live_principal(Settings.from_dict({}), {"ADK_DEV_LIVE_PRINCIPAL": "env-owner"}).reveal() == "env-owner"  # type: ignore[union-attr]
    configured = Settings.from_dict({"dev_live_principal": "file-owner"})
    assert live_principal(configured, {"ADK_DEV_LIVE_PRINCIPAL": "env-owner"}).reveal() == "file-owner"  # type: ignore[union-attr]
