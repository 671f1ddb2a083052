"""The provider's transport: kept urllib3 connections per thread, registered for cancel and deadline on every use.

Real TCP on 127.0.0.1 against :mod:`.scripted_http` peers, which show what the emulator cannot: which connection
carried a request, when the client shut a socket down, the exact request headers.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import socket
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors import models
from adk_actors.errors import ConfigError, ProviderError, ProviderHttpError
from adk_actors.models.cancel import CancelToken
from adk_actors.models.gemini import close_sessions, transport
from adk_actors.models.gemini.caches import create_cached_content

from .conftest import API_KEY, user
from .scripted_http import Exchange, ScriptedPeer, answer, scripted, send_chunk, start_sse

_TEXT = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}]}
ANSWER = json.dumps(_TEXT).encode()


def _frame(text: str, *, finish: bool = False) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish:
        candidate["finishReason"] = "STOP"
    return b"data: " + json.dumps({"candidates": [candidate]}).encode() + b"\r\n\r\n"


def _cfg(peer: Any, **extra: Any) -> dict[str, Any]:
    return {"api_key": API_KEY, "base_url": peer.base_url, **extra}


class _RecordingToken(CancelToken):
    """A real token that also records the local address of each socket registered on it."""

    def __init__(self) -> None:
        super().__init__()
        self.live = threading.Event()
        self.addresses: list[tuple[str, int]] = []

    def register(self, sock: socket.socket) -> None:
        super().register(sock)
        self.addresses.append(sock.getsockname())
        self.live.set()


def _answer_unless_slow(exchange: Exchange) -> None:
    if b"slow" in exchange.request.body:
        exchange.hold(None)  # until the client gives the connection up
        return
    answer(exchange, ANSWER)


def test_sequential_calls_reuse_one_kept_connection_and_register_it_on_each_call():
    with scripted(_answer_unless_slow) as peer:
        first, second = _RecordingToken(), _RecordingToken()
        assert models.generate(_cfg(peer), [user("a")], cancel=first) == "hi"
        assert models.generate(_cfg(peer), [user("b")], cancel=second) == "hi"
        assert peer.accepted == 1 and [r.conn for r in peer.requests] == [0, 0]
        # the second call never connected, and its token still holds the kept socket
        assert first.addresses and second.addresses and set(second.addresses) == set(first.addresses)


def test_cancel_while_waiting_for_headers_on_a_kept_connection_shuts_it_promptly():
    with scripted(_answer_unless_slow) as peer:
        kept = _RecordingToken()
        assert models.generate(_cfg(peer), [user("warm")], cancel=kept) == "hi"
        token = _RecordingToken()
        cancelled_at: list[float] = []

        def cancel_once_waiting() -> None:
            if peer.wait_for(lambda: len(peer.requests) == 2):  # the request is out: the call waits for headers
                cancelled_at.append(time.monotonic())
                token.cancel()

        canceller = threading.Thread(target=cancel_once_waiting)
        canceller.start()
        try:
            with pytest.raises(ProviderError) as info:
                models.generate(_cfg(peer), [user("slow")], cancel=token)  # same thread: the kept connection
            returned = time.monotonic()
        finally:
            canceller.join(10)
        assert info.value.reason == "cancelled" and returned - cancelled_at[0] < 1.0
        assert set(token.addresses) == set(kept.addresses)  # it was the kept connection, registered on reuse
        assert peer.wait_for(lambda: 0 in peer.ended, timeout=2.0)  # and the peer saw it shut down
        assert models.generate(_cfg(peer), [user("after")]) == "hi"
        assert peer.accepted == 2


def _stream_then_hold(exchange: Exchange) -> None:
    if "streamGenerateContent" not in exchange.request.path:
        answer(exchange, ANSWER)
        return
    start_sse(exchange)
    send_chunk(exchange, _frame("first "))
    exchange.hold(None)


def test_cancel_during_an_sse_stream_shuts_the_socket_promptly_and_it_is_not_kept():
    with scripted(_stream_then_hold) as peer:
        assert models.generate(_cfg(peer), [user("warm")]) == "hi"
        token = CancelToken()
        delivered = threading.Event()
        deltas: list[str] = []
        cancelled_at: list[float] = []

        def on_delta(delta: str) -> None:
            deltas.append(delta)
            delivered.set()

        def cancel_once_delivered() -> None:
            if delivered.wait(5):  # the reader now blocks waiting for the next event
                cancelled_at.append(time.monotonic())
                token.cancel()

        canceller = threading.Thread(target=cancel_once_delivered)
        canceller.start()
        try:
            with pytest.raises(ProviderError) as info:
                models.stream(_cfg(peer), [user("x")], [], on_delta, cancel=token)
            returned = time.monotonic()
        finally:
            canceller.join(10)
        assert info.value.reason == "cancelled" and deltas == ["first "]
        assert returned - cancelled_at[0] < 1.0
        assert peer.accepted == 1  # the stream ran on the kept connection
        assert peer.wait_for(lambda: 0 in peer.ended, timeout=2.0)
        assert models.generate(_cfg(peer), [user("next")]) == "hi"
        assert peer.accepted == 2 and peer.requests[-1].conn == 1


def _answer_then_stall(exchange: Exchange) -> None:
    if "streamGenerateContent" not in exchange.request.path:
        answer(exchange, ANSWER)
        return
    start_sse(exchange)
    if not exchange.hold(0.6):  # one event after 0.6 s, then silence: the read that follows would time out at 1.6 s
        send_chunk(exchange, b": still here\r\n\r\n")
        exchange.hold(None)


def test_the_whole_request_deadline_interrupts_a_read_on_a_kept_connection():
    with scripted(_answer_then_stall) as peer:
        cfg = _cfg(peer, request_timeout=1000)
        assert models.generate(cfg, [user("warm")]) == "hi"
        started = time.monotonic()
        with pytest.raises(ProviderError) as info:
            models.stream(cfg, [user("x")], [], lambda _d: None)
        elapsed = time.monotonic() - started
        assert info.value.reason == "timeout" and info.value.details == {"request_timeout_ms": 1000}
        assert 0.95 <= elapsed < 1.4  # the deadline shut the socket; the read timeout alone ends at 1.6 s
        assert peer.accepted == 1 and peer.wait_for(lambda: 0 in peer.ended, timeout=2.0)


def test_requests_carry_the_key_only_in_its_header_and_the_same_headers_as_before():
    def handler(exchange: Exchange) -> None:
        if exchange.request.path.endswith("/cachedContents"):
            answer(exchange, b'{"name": "cachedContents/c1", "expireTime": "2999-01-01T00:00:00Z"}')
        else:
            answer(exchange, ANSWER)

    with scripted(handler) as peer:
        models.generate(_cfg(peer), [user("x")])
        create_cached_content(None, _cfg(peer), {"model": "models/m", "systemInstruction": {}}, 60)
        for seen in peer.requests:
            assert seen.method == "POST" and API_KEY not in seen.path and "key=" not in seen.path
            assert seen.headers["x-goog-api-key"] == API_KEY
            assert seen.headers["user-agent"] == transport.USER_AGENT
            assert seen.headers["accept-encoding"] == "gzip, deflate"
            assert seen.headers["content-type"] == "application/json"
            assert seen.headers["content-length"] == str(len(seen.body))
            assert "authorization" not in seen.headers and "x-goog-api-client" not in seen.headers
        paths = [r.path for r in peer.requests]
        assert paths == ["/v1beta/models/gemini-3.1-flash-lite:generateContent", "/v1beta/cachedContents"]


def test_gzip_answers_are_decoded_unary_and_streamed():
    stream_body = gzip.compress(_frame("a") + _frame("b", finish=True))

    def handler(exchange: Exchange) -> None:
        if "streamGenerateContent" in exchange.request.path:
            start_sse(exchange, {"Content-Encoding": "gzip"})
            middle = len(stream_body) // 2
            send_chunk(exchange, stream_body[:middle])
            send_chunk(exchange, stream_body[middle:])
            send_chunk(exchange, b"")
        else:
            answer(exchange, gzip.compress(ANSWER), headers={"Content-Encoding": "gzip"})

    with scripted(handler) as peer:
        assert models.generate(_cfg(peer), [user("x")]) == "hi"
        deltas: list[str] = []
        assert models.stream(_cfg(peer), [user("x")], [], deltas.append).text == "ab"
        assert deltas == ["a", "b"] and peer.accepted == 1


def test_a_redirect_is_an_http_error_and_the_key_goes_to_no_other_server():
    with scripted(lambda e: answer(e, ANSWER)) as elsewhere:
        location = elsewhere.base_url + "/v1beta/models/gemini-3.1-flash-lite:generateContent"
        with scripted(
            lambda e: answer(e, b"", status="307 Temporary Redirect", headers={"Location": location})
        ) as peer:
            with pytest.raises(ProviderHttpError) as info:
                models.generate(_cfg(peer), [user("x")])
        assert info.value.status == 307 and _contacts(elsewhere) == 0


def _contacts(peer: Any) -> int:
    """Connections and requests a peer received."""
    return peer.accepted + len(peer.requests)


def test_a_kept_connection_the_server_closed_is_replaced_without_an_error():
    def close_after_answer(exchange: Exchange) -> None:
        answer(exchange, ANSWER)  # no "Connection: close": the client learns it from the socket
        exchange.keep_alive = False

    with scripted(close_after_answer) as peer:
        assert models.generate(_cfg(peer), [user("a")]) == "hi"
        assert peer.wait_for(lambda: 0 in peer.ended)
        assert models.generate(_cfg(peer), [user("b")]) == "hi"
        assert peer.accepted == 2


def test_environment_proxy_variables_are_ignored(monkeypatch):
    with scripted(lambda e: answer(e, ANSWER)) as proxy, scripted(lambda e: answer(e, ANSWER)) as target:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, proxy.base_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert models.generate(_cfg(target), [user("x")]) == "hi"
        assert len(target.requests) == 1 and _contacts(proxy) == 0


def test_a_thread_keeps_at_most_four_servers_and_closes_the_least_recently_used():
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(scripted(_answer_unless_slow)) for _ in range(transport.MAX_SERVERS + 1)]
        for server in servers:
            assert models.generate(_cfg(server), [user("x")]) == "hi"
        assert _first_connection_ends(servers[0])  # the least recently used pool was closed
        assert all(not s.ended for s in servers[1:])
        close_sessions()
        assert all(_first_connection_ends(s) for s in servers[1:])


def _first_connection_ends(peer: ScriptedPeer) -> bool:
    return peer.wait_for(lambda: 0 in peer.ended, timeout=2.0)


def test_a_refused_connection_is_a_connection_error_not_a_timeout():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(ProviderError) as info:
        models.generate({"api_key": API_KEY, "base_url": f"http://127.0.0.1:{port}"}, [user("x")])
    assert info.value.reason == "connection_error" and info.value.details["cause"] == "NewConnectionError"


def test_the_api_key_is_in_no_log_record_even_at_debug(caplog):
    def handler(exchange: Exchange) -> None:
        if b"deny" in exchange.request.body:
            body = {"error": {"code": 401, "message": f"bad key {API_KEY}", "status": "UNAUTHENTICATED"}}
            answer(exchange, json.dumps(body).encode(), status="401 Unauthorized")
        else:
            answer(exchange, ANSWER)

    caplog.set_level(logging.DEBUG)
    with scripted(handler) as peer:
        models.generate(_cfg(peer), [user("ok")])
        with pytest.raises(ProviderHttpError) as info:
            models.generate(_cfg(peer), [user("deny")])
    assert any(r.name.startswith("urllib3") for r in caplog.records)  # the transport did log, at DEBUG
    assert API_KEY not in caplog.text and API_KEY not in repr(info.value) + str(info.value.details)


_hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "generativelanguage.googleapis.com"])
_segments = st.lists(
    st.text("abcXYZ019-_~", min_size=1, max_size=8), max_size=3
)  # no dot segments: RFC 3986 drops them


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=_hosts,
    port=st.none() | st.integers(1, 65535),
    segments=_segments,
    slash=st.booleans(),
)
def test_split_base_finds_the_server_and_the_path_prefix(scheme, host, port, segments, slash):
    path = "".join(f"/{s}" for s in segments) + ("/" if slash else "")
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}{path}"
    (got_scheme, got_host, got_port), prefix = transport._split_base(url)
    assert got_scheme == scheme and got_host == host.lower()
    assert got_port == (port if port is not None else {"http": 80, "https": 443}[scheme])
    assert prefix == path.rstrip("/") and not prefix.endswith("/")


@given(st.text(max_size=40))
def test_split_base_refuses_anything_but_an_http_url_with_a_config_error(text):
    try:
        (scheme, host, port), _prefix = transport._split_base(text)
    except ConfigError as err:
        assert err.reason == "invalid_value" and err.details == {"key": "base_url"}
    else:
        assert scheme in ("http", "https") and host and 0 <= port < 65536


def test_a_forked_child_drops_the_inherited_connections_and_the_parent_keeps_its_own():
    with scripted(_answer_unless_slow) as peer:
        assert models.generate(_cfg(peer), [user("before fork")]) == "hi"
        pid = os.fork()
        if pid == 0:  # the child: report with the exit code only, never run the test's teardown
            os._exit(0 if not transport._thread_pools()._pools else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert models.generate(_cfg(peer), [user("after fork")]) == "hi"
        assert peer.accepted == 1  # the parent's kept connection survived the child's exit
