"""The observability sample runs as its own process (own collector, emulator and actor system) and prints the
trace it exported."""

from __future__ import annotations

from actor_tests.samples_runner import assert_lines, run_sample

EXPECTED = [
    "answer: The weather in Lisbon is sunny.",
    "spans in the caller's trace: 5, service.name: weather-bot",
    "POST /chat (the caller's span)",
    "└─ run Weather",
    "   └─ invoke_agent Weather",
    "      ├─ chat gemini-2.5-flash",
    "      ├─ execute_tool get_weather",
    "      └─ chat gemini-2.5-flash",
    "execute_tool: gen_ai.tool.name=get_weather, gen_ai.tool.call.id set: True",
    "content in attributes: none",
]


def test_otlp_export_sample_prints_one_trace_under_the_callers_span() -> None:
    result = run_sample("otlp_export.py")
    assert_lines(result, EXPECTED)
    assert result.stdout.splitlines() == EXPECTED  # the tree's lines, in order
