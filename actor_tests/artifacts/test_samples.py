"""The artifacts sample runs as its own process (own emulator, own actor system) and prints the expected output."""

from __future__ import annotations

from actor_tests.samples_runner import assert_lines, run_sample


def test_artifacts_tool_sample() -> None:
    result = run_sample("artifacts_tool.py")
    assert_lines(
        result,
        [
            "stored: brief.md v2 sha256:",
            "answer: Loaded brief.md v2; missing: budget.xlsx.",
            "content in the request after the tool: True",
            "content in the first request: False",
            "content stored in the session: False",
        ],
    )
