"""The A2A sample runs offline as its own process and prints what docs/A2A.md says it prints."""

from __future__ import annotations

from actor_tests.samples_runner import run_sample


def test_the_a2a_sample_serves_an_agent_streams_a_task_and_delegates_to_it_remotely() -> None:
    assert run_sample("a2a_server.py").stdout.splitlines() == [
        "card: Poet, A2A 1.0 at /a2a/v1",
        "task: TASK_STATE_COMPLETED: Supervisors restart; OTP endures.",
        "stream: ['task', 'statusUpdate', 'artifactUpdate', 'statusUpdate']",
        "coordinator: The remote poet wrote: Supervisors restart; actors endures.",
    ]
