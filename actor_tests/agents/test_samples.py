"""Every agent sample in ``samples/`` runs as its own process (own emulator, own actor system) and prints the
expected output."""

from __future__ import annotations

from pathlib import Path

import pytest

from actor_tests.samples_runner import assert_lines, run_sample

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "agent_quickstart.py": ["The weather in Tokyo is city: Tokyo, forecast: sunny."],
    "agent_delegation.py": [
        "OTP is Erlang's toolkit of behaviours.",
        "['You said: note 0', 'You said: note 1', 'You said: note 2']",
    ],
    "agent_workflows.py": [
        "pipeline=In short: [fr] Erlang processes are lightweight. "
        "parallel=[('Translator', '[fr] Explain OTP.'), ('Summarizer', 'In short: Explain OTP.')]",
        "Processes spawn light, / supervisors mend the night.",
    ],
    "agent_sub_agents.py": [
        "Coordinator: Notes on 'Research supervision trees.': supervisors restart failed children.",
        "response=Notes on 'Explain rest_for_one.': supervisors restart failed children.",
    ],
    "agent_callbacks.py": [
        "0 tools",
        "after_model: You said: Say hello.",
        "events: agent.prompt.start agent.prompt.stop",
        "agent=TelemetryAgent duration_ms=",
    ],
    "agent_contracts.py": [
        "Supervisors restart children by strategy.",
        'user:last_answer = {"answer": "Supervisors restart children by strategy."}',
        "rejected before the provider: invalid_input",
    ],
}


def test_every_agent_sample_is_covered() -> None:
    assert sorted(p.name for p in (ROOT / "samples").glob("agent_*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_sample_runs_and_prints_the_expected_output(sample: str) -> None:
    assert_lines(run_sample(sample), EXPECTED[sample])
