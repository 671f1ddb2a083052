"""The memory sample runs as its own process (own emulator, own actor system) and prints the expected output."""

from __future__ import annotations

from actor_tests.samples_runner import assert_lines, run_sample


def test_memory_recall_sample() -> None:
    result = run_sample("memory_recall.py")
    assert_lines(
        result,
        [
            "tool answer: From memory: OTP supervision trees restart failed children",
            "preload stored in the session: False",
            "another user's search: 0 hits",
        ],
    )
