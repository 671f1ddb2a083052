"""The owner-bound voice bridge on a real node against the emulator's Live endpoint (no browser: the adapter is
this test, speaking the v1 binary frames)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from actor_tests.live.conftest import PRINCIPAL, StartLive, speech_then_silence, wait_for
from adk_actors.emulator import Emulator
from adk_actors.errors import LiveError
from adk_actors.live import VoiceBridge, live_status, live_subscribe, start_live_voice_bridge
from adk_actors.live import voice_protocol as vp


def _active_session(start_live: StartLive, **config: Any) -> Any:
    session = start_live(input_audio_transcription=True, **config)
    with live_subscribe(session, PRINCIPAL) as events:
        if events.state != "active":
            while (event := events.next(20.0)) is not None and event.kind != "ready":
                events.ack(event.seq)
    return session


def _collect(bridge: VoiceBridge, until_code: int, *, ack: bool = True, timeout: float = 20.0) -> list[bytes]:
    frames = []
    while True:
        frame = bridge.receive(timeout)
        assert frame is not None, f"no lifecycle {until_code}; closed: {bridge.closed_reason}"
        frames.append(frame)
        if ack:
            bridge.frame(vp.encode_ack(struct.unpack(">Q", frame[2:10])[0]))
        if frame[1] == vp.S_LIFECYCLE and frame[10] == until_code:
            return frames


def test_audio_goes_up_and_transcriptions_and_audio_come_back(start_live: StartLive, emu: Emulator) -> None:
    session = _active_session(start_live)
    bridge = start_live_voice_bridge(session, PRINCIPAL)
    try:
        for seq, chunk in enumerate(speech_then_silence(speech_ms=400, silence_ms=700), start=1):
            assert bridge.frame(vp.encode_audio(seq, chunk))["input_seq"] >= 1
        frames = _collect(bridge, vp.LIFECYCLE["turn_complete"])
    finally:
        bridge.stop()
    types = {f[1] for f in frames}
    assert {vp.S_AUDIO, vp.S_TRANSCRIPTION, vp.S_LIFECYCLE} <= types
    directions = {f[10] for f in frames if f[1] == vp.S_TRANSCRIPTION}
    assert directions == {1, 2}  # input and output transcription
    audio = [f for f in frames if f[1] == vp.S_AUDIO]
    assert all(struct.unpack(">IB", f[10:15]) == (24000, 1) and len(f[15:]) % 2 == 0 for f in audio)
    assert live_status(session, PRINCIPAL)["state"] == "active"  # stopping the bridge leaves the session


def test_one_bridge_per_session_and_strict_frames(start_live: StartLive) -> None:
    session = _active_session(start_live)
    bridge = start_live_voice_bridge(session, PRINCIPAL)
    try:
        with pytest.raises(LiveError) as err:
            start_live_voice_bridge(session, PRINCIPAL)
        assert err.value.reason == "voice_bridge_exists"
        for bad, why in (
            (vp.encode_audio(2, b"\0\0"), "seq"),  # must start at 1
            (vp.encode_audio(1, b"\0\0\0"), "odd_pcm"),
            (bytes([1, 9]), "type"),
            (vp.encode_audio(1, b"\0" * 70_000), "too_large"),
        ):
            with pytest.raises(LiveError) as err:
                bridge.frame(bad)
            assert err.value.reason == "invalid_voice_frame" and err.value.details["why"] == why
        assert bridge.frame(vp.encode_audio(1, b"\0\0"))["input_seq"] >= 1
        with pytest.raises(LiveError) as err:
            bridge.frame(vp.encode_audio(1, b"\0\0"))  # a duplicate
        assert err.value.details["why"] == "seq"
    finally:
        bridge.stop()
    start_live_voice_bridge(session, PRINCIPAL).stop()  # the lease was released


def test_a_bridge_needs_an_active_session_and_the_exact_principal(start_live: StartLive) -> None:
    session = _active_session(start_live)
    with pytest.raises(LiveError) as err:
        start_live_voice_bridge(session, "not-the-owner")
    assert err.value.reason == "principal_mismatch"
    start_live_voice_bridge(session, PRINCIPAL).stop()


def test_a_reconnect_invalidates_the_bridge(start_live: StartLive, emu: Emulator) -> None:
    session = _active_session(start_live, session_resumption=True)
    bridge = start_live_voice_bridge(session, PRINCIPAL)
    try:
        for seq, chunk in enumerate(speech_then_silence(speech_ms=300, silence_ms=700), start=1):
            bridge.frame(vp.encode_audio(seq, chunk))
        _collect(bridge, vp.LIFECYCLE["turn_complete"])
        wait_for(lambda: live_status(session, PRINCIPAL)["resumable"])
        emu.live_drop_all()
        frames = _collect(bridge, vp.LIFECYCLE["reconnect_required"], ack=False)
        assert frames[-1][10] == vp.LIFECYCLE["reconnect_required"]
        assert bridge.receive(5.0) is None and bridge.closed_reason == "live_voice_reconnect_required"
        with pytest.raises(LiveError) as err:
            bridge.frame(vp.encode_audio(99, b"\0\0"))
        assert err.value.reason == "voice_bridge_closed"
    finally:
        bridge.stop()
    wait_for(lambda: live_status(session, PRINCIPAL)["state"] == "active")
    start_live_voice_bridge(session, PRINCIPAL).stop()  # a fresh bridge once the session is active again
