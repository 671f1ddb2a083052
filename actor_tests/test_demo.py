"""``make demo`` (samples/quickstart.py) and the runtime tour (samples/demo.py) run offline and print what they say."""

from __future__ import annotations

from pathlib import Path

import pytest

from actor_tests.samples_runner import assert_lines, run_sample

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    "quickstart.py": ["user: What is the weather in Tokyo?", "agent: It is sunny in Tokyo.",
                      "final by WeatherAgent: Take sunglasses and some water: it stays sunny all day.",
                      "run outcome: Completed", "the session holds 8 events"],
    "demo.py": ["stopped; no actor process left"],
}


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_the_demo_samples_run_offline(sample: str) -> None:
    assert_lines(run_sample(sample), EXPECTED[sample])
