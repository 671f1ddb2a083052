"""The Live sample runs as its own process (own emulator, own actor system) and prints the expected output."""

from __future__ import annotations

from actor_tests.samples_runner import assert_lines, run_sample


def test_live_session_sample_does_a_text_an_audio_and_a_tool_turn() -> None:
    result = run_sample("live_session.py")
    assert_lines(
        result,
        [
            "text turn: You said: Explain actors in one sentence.",
            "audio turn heard: a question by voice",
            "tool: get_weather ok=True",
            "tool turn: It is sunny in Paris.",
            "status: active, 13 inputs",
        ],
    )
