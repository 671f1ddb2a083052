"""Gemini Live: a server-owned session, a credit-based subscription, text and audio turns, an allowlisted tool.

The session is an actor of the node, not of this script: the script subscribes with a credit window, ACKs each
event by its sequence, sends a text turn and an audio turn (a tone followed by silence: the emulator's voice
activity detection ends the turn), lets the session run an allowlisted tool in the worker pool, and closes it.

Runs offline against the Gemini emulator's Live endpoint. Run: ``.venv/bin/python samples/live_session.py``
"""

from __future__ import annotations

import math
import struct
import tempfile

import adk_actors as adk
from adk_actors import live
from adk_actors.emulator import LIVE_MODEL, Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools.function_tool import FunctionTool

SCRIPT = {
    "rules": [
        {"when": {"has_function_response": True}, "respond": {"text": "It is {response.forecast}."}},
        {
            "when": {"user_text_contains": "weather"},
            "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]},
        },
        {"when": {}, "respond": {"text": "You said: {user_text}", "input_transcription": "a question by voice"}},
    ]
}
PRINCIPAL = "sample-user"


def get_weather(city: str) -> dict[str, str]:
    """Return the weather for one city.

    Args:
        city: the city.
    """
    return {"forecast": f"sunny in {city}"}


def tone_then_silence() -> list[bytes]:
    """400 ms of a 440 Hz tone and 700 ms of silence, 16 kHz s16le mono, in 100 ms chunks."""
    tone = [int(8000 * math.sin(2 * math.pi * 440 * i / 16000)) for i in range(6400)]
    pcm = struct.pack(f"<{len(tone)}h", *tone) + b"\0\0" * 11200
    return [pcm[i : i + 3200] for i in range(0, len(pcm), 3200)]


def turn(events: live.LiveSubscription) -> dict[str, str]:
    """Collect one turn's transcriptions (ACKing every event) until ``turn_complete``."""
    said = {"input": "", "output": "", "tool": ""}
    while (event := events.next(30.0)) is not None:
        events.ack(event.seq)
        if event.kind == "output_transcription":
            said["output"] += event.payload["text"]
        elif event.kind == "input_transcription":
            said["input"] += event.payload["text"]
        elif event.kind == "tool_result":
            said["tool"] = f"{event.payload['name']} ok={event.payload['ok']}"
        elif event.kind in ("turn_complete", "terminal"):
            break
    return said


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
        with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
            config = {
                "provider": "gemini",
                "api_key": "test-key",
                "endpoint": {"url": emu.live_url, "allow_insecure_loopback": True},  # the emulator, plain ws://
                "provider_config": {
                    "model": LIVE_MODEL,
                    "output_audio_transcription": True,
                    "input_audio_transcription": True,
                    "tools": [
                        {
                            "type": "function",
                            "name": "get_weather",
                            "description": "Return the weather for one city",
                            "parameters": {
                                "type": "object",
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                            },
                        }
                    ],
                },
                "tool_execution": {
                    "enabled": True,
                    "allowed_tools": ["get_weather"],
                    "tools": [FunctionTool(get_weather)],
                },
            }
            session = live.start_live_session("sample-call", PRINCIPAL, config)
            with live.live_subscribe(session, PRINCIPAL, messages=16) as events:
                while events.state != "active" and (event := events.next(30.0)) is not None:
                    events.ack(event.seq)
                    if event.kind == "ready":
                        break
                live.live_send_text(session, PRINCIPAL, "Explain actors in one sentence.")
                print("text turn:", turn(events)["output"])
                for chunk in tone_then_silence():
                    live.live_send_audio(session, PRINCIPAL, chunk)
                heard = turn(events)
                print("audio turn heard:", heard["input"])
                live.live_send_text(session, PRINCIPAL, "What is the weather?")
                said = turn(events)
                print("tool:", said["tool"])
                print("tool turn:", said["output"])
            status = live.live_status(session, PRINCIPAL)
            print(f"status: {status['state']}, {status['input_seq']} inputs")
            live.close_live_session(session, PRINCIPAL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
