"""Live sessions end to end: the session actor on a real node, its WebSocket to the emulator's Live endpoint."""

from __future__ import annotations

import os
import signal
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from actor_tests.live.conftest import (
    PRINCIPAL,
    WEATHER_DECLARATION,
    StartLive,
    live_config,
    speech_then_silence,
    wait_for,
    weather_tool,
)
from adk_actors.emulator import Emulator
from adk_actors.errors import LiveError
from adk_actors.live import (
    LiveSubscription,
    close_live_session,
    live_send_audio,
    live_send_text,
    live_send_tool_response,
    live_sessions,
    live_status,
    live_subscribe,
    start_live_session,
)
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name


def _until(events: LiveSubscription, *kinds: str, timeout: float = 20.0) -> list[Any]:
    seen = []
    while True:
        event = events.next(timeout)
        assert event is not None, f"no {kinds} event; saw {[e.kind for e in seen]}"
        events.ack(event.seq)
        seen.append(event)
        if event.kind in kinds or event.kind == "terminal":
            return seen


def _active(events: LiveSubscription) -> None:
    """Wait for ``ready`` unless the session was already active when the subscription started (future-only)."""
    if events.state != "active":
        assert _until(events, "ready")[-1].kind == "ready"


def test_a_text_turn_streams_audio_and_its_transcription(start_live: StartLive) -> None:
    session = start_live()
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        seq = live_send_text(session, PRINCIPAL, "hello there")
        assert seq == 1
        seen = _until(events, "turn_complete")
        seen += _until(events, "usage")
    kinds = [e.kind for e in seen]
    assert kinds[-2:] == ["turn_complete", "usage"]
    audio = [e for e in seen if e.kind == "audio"]
    assert audio and all(e.data for e in audio)
    text = "".join(e.payload["text"] for e in seen if e.kind == "output_transcription")
    assert "hello there" in text.lower()
    assert "generation_complete" in kinds and "usage" in kinds
    status = live_status(session, PRINCIPAL)
    assert status["state"] == "active" and status["input_seq"] == 1


def test_every_operation_checks_the_exact_principal(start_live: StartLive) -> None:
    session = start_live()
    for call in (
        lambda: live_status(session, "someone-else"),
        lambda: live_send_text(session, "someone-else", "hi"),
        lambda: live_subscribe(session, PRINCIPAL + " "),
    ):
        with pytest.raises(LiveError) as err:
            call()
        assert err.value.reason == "principal_mismatch"


def _turn(session: Any, events: LiveSubscription, text: str) -> list[Any]:
    live_send_text(session, PRINCIPAL, text)
    seen = _until(events, "turn_complete")
    assert seen[-1].kind == "turn_complete", [e.kind for e in seen]
    return seen


def test_the_subscriber_limit_is_enforced_and_unsubscribe_frees_the_slot(start_live: StartLive) -> None:
    session = start_live(max_subscribers=1)
    first = live_subscribe(session, PRINCIPAL)
    with pytest.raises(LiveError) as err:
        live_subscribe(session, PRINCIPAL)
    assert err.value.reason == "subscriber_limit"
    first.close()
    live_subscribe(session, PRINCIPAL).close()


def test_an_input_larger_than_the_ingress_window_is_refused_and_nothing_is_sent(
    start_live: StartLive, emu: Emulator
) -> None:
    session = start_live(max_ingress_bytes=1024)
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        with pytest.raises(LiveError) as err:
            live_send_audio(session, PRINCIPAL, b"\1\0" * 1024)
        assert err.value.reason == "ingress_full"
        assert not [e for e in emu.live_log if e["kind"] == "realtimeInput.audio"]
        _turn(session, events, "still works")  # the refusal lost nothing and blocked nothing


def test_a_slow_subscriber_is_removed_without_stalling_the_others(start_live: StartLive) -> None:
    session = start_live(max_subscriber_messages=12)
    slow = live_subscribe(session, PRINCIPAL, messages=1)
    with live_subscribe(session, PRINCIPAL, messages=64) as fast:
        _active(fast)
        seen = _turn(session, fast, "a long enough answer to overflow a small backlog of twelve events")
    assert len(seen) > 14
    with pytest.raises(LiveError) as err:
        while slow.next(10.0) is not None:
            pass  # never acked: at most one event arrives, then the drop
    assert err.value.reason == "subscriber_dropped" and err.value.details["reason"] == "slow_subscriber"
    slow.close()
    assert live_status(session, PRINCIPAL)["slow_subscribers_dropped"] == 1


def test_close_ends_the_socket_normally_and_subscribers_get_a_terminal_event(
    start_live: StartLive, emu: Emulator
) -> None:
    session = start_live()
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        close_live_session(session, PRINCIPAL, "done")
        last = _until(events, "terminal")[-1]
    assert last.kind == "terminal" and last.payload["reason"] == "closed"
    wait_for(lambda: emu.live_connections() == 0)
    with pytest.raises(LiveError) as err:
        live_status(session, PRINCIPAL)
    assert err.value.reason == "live_session_not_found"
    close_live_session(session, PRINCIPAL)  # closing an ended session does nothing


def test_a_dropped_socket_resumes_with_the_newest_handle_in_one_stream(start_live: StartLive, emu: Emulator) -> None:
    session = start_live(session_resumption=True)
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        _turn(session, events, "remember the word tangerine")
        _until(events, "usage")
        wait_for(lambda: live_status(session, PRINCIPAL)["resumable"])
        emu.live_drop_all()
        kinds = [e.kind for e in _until(events, "resumed")]
        assert kinds[-2:] == ["resuming", "resumed"] or kinds[-1] == "resumed"
        assert "terminal" not in kinds
        _turn(session, events, "and again")
    setups = [e for e in emu.live_log if e["kind"] == "setup" and e["direction"] == "in"]
    assert len(setups) == 2
    assert live_status(session, PRINCIPAL)["resumes"] == 1


def test_go_away_starts_a_proactive_resume(start_live: StartLive, emu: Emulator) -> None:
    session = start_live(session_resumption=True)
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        _turn(session, events, "first")
        _until(events, "usage")
        wait_for(lambda: live_status(session, PRINCIPAL)["resumable"])
        emu.live_go_away(5000)
        kinds = [e.kind for e in _until(events, "resumed")]
        assert "go_away" in kinds and kinds[-1] == "resumed"
        _turn(session, events, "second")


def test_without_resumption_a_dropped_socket_is_terminal(start_live: StartLive, emu: Emulator) -> None:
    session = start_live()
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        emu.live_drop_all()
        last = _until(events, "terminal")[-1]
    assert last.kind == "terminal" and last.payload["reason"] == "connection_lost"


def test_audio_input_ends_a_turn_on_silence_and_is_transcribed(start_live: StartLive, emu: Emulator) -> None:
    session = start_live(input_audio_transcription=True)
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        for chunk in speech_then_silence(speech_ms=400, silence_ms=700):
            live_send_audio(session, PRINCIPAL, chunk)
        seen = _until(events, "turn_complete")
    kinds = [e.kind for e in seen]
    assert "input_transcription" in kinds and "audio" in kinds
    sent = sum(e.get("audio_bytes", 0) for e in emu.live_log if e["kind"] == "realtimeInput.audio")
    assert sent == 2 * 16 * (400 + 700)


def test_barge_in_interrupts_the_answer_and_the_turn_completes(start_live: StartLive, emu: Emulator) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "x" * 400, "pace": 1.0, "audio_ms_per_char": 20}}]})
    session = start_live()
    with live_subscribe(session, PRINCIPAL, messages=64) as events:
        _active(events)
        live_send_text(session, PRINCIPAL, "tell me a long story")
        _until(events, "audio")
        for chunk in speech_then_silence(speech_ms=300, silence_ms=0):
            live_send_audio(session, PRINCIPAL, chunk)
        seen = _until(events, "interrupted")
        assert seen[-1].kind == "interrupted"
        after = _until(events, "turn_complete")
    assert "generation_complete" not in [e.kind for e in seen + after][: len(seen)]


def test_an_allowlisted_tool_call_runs_in_the_worker_pool_and_its_result_goes_back(
    start_live: StartLive, emu: Emulator
) -> None:
    emu.set_script(
        {
            "rules": [
                {"when": {"has_function_response": True}, "respond": {"text": "It is {response.forecast}."}},
                {"when": {}, "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}},
            ]
        }
    )
    session = start_live(
        tools=[WEATHER_DECLARATION],
        tool_execution={"enabled": True, "allowed_tools": ["get_weather"], "tools": [weather_tool()]},
    )
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        seen = _turn(session, events, "weather in Paris?")
    kinds = [e.kind for e in seen]
    assert kinds.index("tool_call") < kinds.index("tool_result")
    assert [e.payload["ok"] for e in seen if e.kind == "tool_result"] == [True]
    text = "".join(e.payload["text"] for e in seen if e.kind == "output_transcription")
    assert "sunny in paris" in text.lower()


def test_a_tool_call_outside_the_allowlist_is_left_to_the_application(start_live: StartLive, emu: Emulator) -> None:
    emu.set_script(
        {
            "rules": [
                {"when": {"has_function_response": True}, "respond": {"text": "Answer {response.forecast}."}},
                {"when": {}, "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]}},
            ]
        }
    )
    session = start_live(tools=[WEATHER_DECLARATION])
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        live_send_text(session, PRINCIPAL, "weather?")
        call = _until(events, "tool_call")[-1].payload["calls"][0]
        assert call["name"] == "get_weather" and call["args"] == {"city": "Oslo"}
        live_send_tool_response(session, PRINCIPAL, call["id"], "get_weather", {"forecast": "snowy"})
        seen = _until(events, "turn_complete")
    assert "snowy" in "".join(e.payload["text"] for e in seen if e.kind == "output_transcription")


def test_the_session_limit_is_node_wide_and_a_closed_session_frees_its_slot(make_system: Any, emu: Emulator) -> None:
    handle = make_system(live_session_limit=2)
    try:
        config = live_config(emu)
        a = start_live_session("limit-a", PRINCIPAL, config, system=handle)
        start_live_session("limit-b", PRINCIPAL, config, system=handle)
        with pytest.raises(LiveError) as err:
            start_live_session("limit-c", PRINCIPAL, config, system=handle)
        assert err.value.reason == "live_session_limit"
        with pytest.raises(LiveError) as err:
            start_live_session("limit-a", PRINCIPAL, config, system=handle)
        assert err.value.reason == "live_session_exists"
        close_live_session(a, PRINCIPAL)
        wait_for(lambda: _starts(handle, "limit-c", config))
        assert sorted(s["session_id"] for s in live_sessions(PRINCIPAL, system=handle)) == ["limit-b", "limit-c"]
        assert live_sessions("another-principal", system=handle) == []
    finally:
        handle.stop()


def _starts(handle: Any, session_id: str, config: dict[str, Any]) -> bool:
    try:
        start_live_session(session_id, PRINCIPAL, config, system=handle)
    except LiveError as err:
        if err.reason != "live_session_limit":
            raise
        return False
    return True


def test_sigkill_of_the_sessions_host_ends_subscribers_and_leaves_no_socket(make_system: Any, emu: Emulator) -> None:
    handle = make_system(live_session_limit=1)
    try:
        session = start_live_session("doomed", PRINCIPAL, live_config(emu), system=handle)
        with live_subscribe(session, PRINCIPAL) as events:
            _active(events)
            assert emu.live_connections() == 1
            host = handle.ask(host_name(session.ref.host_id), GetStatus())
            os.kill(host["pid"], signal.SIGKILL)
            last = _until(events, "terminal")[-1]
        assert last.payload["reason"] == "host_lost"
        wait_for(lambda: emu.live_connections() == 0)
        # The dead session's slot is reclaimed by the index's recount at the next start that needs it.
        wait_for(lambda: _starts(handle, "after-kill", live_config(emu)), seconds=20)
    finally:
        handle.stop()


def test_one_hundred_concurrent_sessions_each_do_a_turn(start_live: StartLive, emu: Emulator) -> None:
    sessions = [start_live() for _ in range(100)]

    def one(session: Any) -> str:
        with live_subscribe(session, PRINCIPAL) as events:
            _active(events)
            seen = _turn(session, events, f"hello {session.session_id}")
        return "".join(e.payload["text"] for e in seen if e.kind == "output_transcription")

    with ThreadPoolExecutor(20) as pool:
        texts = list(pool.map(one, sessions))
    assert all(s.session_id in t for s, t in zip(sessions, texts, strict=True))
    assert emu.live_connections() == 100


def test_the_api_key_reaches_only_the_handshake_never_status_events_or_logs(system: Any, emu: Emulator) -> None:
    key = "AIza" + uuid.uuid4().hex + "Lv"
    config = live_config(emu)
    config["api_key"] = key
    session = start_live_session(f"secret-{uuid.uuid4().hex[:8]}", PRINCIPAL, config, system=system)
    try:
        with live_subscribe(session, PRINCIPAL) as events:
            _active(events)
            seen = _turn(session, events, "hello")
        status = live_status(session, PRINCIPAL)
    finally:
        close_live_session(session, PRINCIPAL)
    assert key not in repr(status) and key not in repr([(e.kind, e.payload) for e in seen])
    assert PRINCIPAL not in repr(status)
    sink = system.log_sink.read_text(errors="replace") if system.log_sink.exists() else ""
    assert key not in sink and PRINCIPAL not in sink


def test_wss_verifies_the_emulators_certificate_and_never_connects_without_trust(system: Any, emu: Emulator) -> None:
    trusted = live_config(emu)
    trusted["endpoint"] = {"url": emu.live_tls_url, "cafile": emu.live_ca_file}
    session = start_live_session(f"tls-{uuid.uuid4().hex[:8]}", PRINCIPAL, trusted, system=system)
    try:
        with live_subscribe(session, PRINCIPAL) as events:
            _active(events)
            assert "tls" in "".join(
                e.payload["text"] for e in _turn(session, events, "over tls") if e.kind == "output_transcription"
            )
    finally:
        close_live_session(session, PRINCIPAL)
    setups = len([e for e in emu.live_log if e["kind"] == "setup"])
    untrusted = live_config(emu)
    untrusted["endpoint"] = {"url": emu.live_tls_url}  # the system trust store does not know the emulator's CA
    session = start_live_session(f"tls-{uuid.uuid4().hex[:8]}", PRINCIPAL, untrusted, system=system)
    try:
        with live_subscribe(session, PRINCIPAL) as events:
            last = _until(events, "terminal")[-1]
        assert last.payload == {"reason": "connection_lost", "error": "live_connect_failed"}
    except LiveError as err:
        assert err.reason == "live_session_not_found"  # it had already ended before the subscription
    wait_for(lambda: emu.live_connections() == 0)
    assert len([e for e in emu.live_log if e["kind"] == "setup"]) == setups  # nothing was ever sent


def test_close_and_unsubscribe_check_the_principal_too(start_live: StartLive) -> None:
    session = start_live()
    with pytest.raises(LiveError) as err:
        close_live_session(session, "intruder")
    assert err.value.reason == "principal_mismatch"
    assert live_status(session, PRINCIPAL)["state"] in ("connecting", "active")


def test_a_drop_before_any_resumption_handle_is_terminal(start_live: StartLive, emu: Emulator) -> None:
    session = start_live(session_resumption=True)
    with live_subscribe(session, PRINCIPAL) as events:
        _active(events)
        assert not live_status(session, PRINCIPAL)["resumable"]
        emu.live_drop_all()
        last = _until(events, "terminal")[-1]
    assert last.payload["reason"] == "connection_lost"
