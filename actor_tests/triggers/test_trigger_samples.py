"""The triggers sample runs as its own process (own emulator, own actor system) and prints the expected output."""

from __future__ import annotations

from actor_tests.samples_runner import assert_lines, run_sample


def test_triggers_inbox_sample_submits_dedupes_awaits_and_schedules() -> None:
    result = run_sample("triggers_inbox.py")
    assert_lines(
        result,
        [
            "duplicate submit, same reference: True",
            "completed: Summary: Summarize message 42",
            "status: terminal after 1 attempt(s)",
            "schedule fired: Summary: Summarize the last hour",
            "schedule: schedule every 3600000 ms",
            "accepted 2, duplicates 1, completed 2",
        ],
    )
