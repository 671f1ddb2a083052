"""The reference's content-streaming Runner ("Gemini streaming"): ``streaming_mode="content"`` through a stable run.

A multimodal prompt (text and an inline PNG) goes to an agent whose Runner streams canonical content deltas. The
run is awaited, its output validated as content, then replayed by a late subscriber: the stored events (the
user event, the partial content deltas, the one final event) followed by the same terminal outcome. Closing the
subscription is the reference's ``adk_run:unsubscribe``.

Run: ``.venv/bin/python samples/runner_content_streaming.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors import content, runs
from adk_actors.emulator import Emulator
from adk_actors.events import Event
from adk_actors.testing import reserved_port

DESCRIPTION = "A single red pixel on a transparent background, the smallest possible picture."
SCRIPT = {"rules": [
    {"when": {"user_text_contains": "describe", "stream": True}, "respond": {"text": DESCRIPTION, "chunks": 40}},
]}
PIXEL_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
             "rkJggg==")  # a 1x1 red PNG, base64
MULTIMODAL_PROMPT = {"schema_version": 1, "parts": [
    {"type": "text", "text": "Describe this image."},
    {"type": "inline_data", "mime_type": "image/png", "data": PIXEL_PNG},
]}


def kinds(events: list[Event]) -> str:
    """The replay as its kinds in order, repeated partials shown once (their count depends on timing)."""
    shown: list[str] = []
    for event in events:
        kind = "final" if event.is_final else "partial" if event.partial else event.author
        if not shown or shown[-1] != kind:
            shown.append(kind)
    return " -> ".join(shown)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "model": "gemini-3.1-flash-lite",
                  "instructions": "Describe supplied media concisely.", "base_url": emu.base_url,
                  "api_key": "test-key"}
        agent = adk.spawn_agent("ContentRunnerAgent", config)
        runner = adk.Runner(agent, "readme_app", adk.session_service(settings), streaming_mode="content",
                            max_stream_output_bytes=16 * 1024 * 1024, run_timeout=120000)

        run_id = runs.start(runner, "user-1", "multimodal-session", MULTIMODAL_PROMPT)
        outcome = runs.wait(run_id, 120)
        assert isinstance(outcome, runs.Completed)
        final = content.validate(outcome.output)
        print(f"completed: {final.visible_text()}")

        replay = runs.subscribe(run_id, idle_timeout=120)
        events: list[Event] = []
        try:
            for item in replay:
                if item.terminal:
                    print(f"replay terminal is the awaited outcome: {item.item == outcome}")
                else:
                    events.append(item.item)
        finally:
            replay.close()  # unsubscribe (reaching the terminal outcome did it already)
        partial_text = "".join(e.text() or "" for e in events if e.partial)
        print(f"replayed: {kinds(events)}")
        user = events[0].content
        print(f"user event has the image: {user is not None and any(p.type == 'inline_data' for p in user.parts)}")
        print(f"partials join to the final: {partial_text == final.visible_text()}")
        print(f"subscribers after unsubscribe: {runs.status(run_id)['subscribers']}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
