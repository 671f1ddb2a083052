"""Every Runner sample in ``samples/`` runs as its own process (own emulator, own actor system) and prints the
expected output."""

from __future__ import annotations

from pathlib import Path

import pytest

from actor_tests.samples_runner import assert_lines, run_sample

ROOT = Path(__file__).resolve().parents[2]

# Streamed partials are delta batches (>= 32 deltas or 50 ms), so how many there are depends on timing: the
# lines below pin what does not — the order of kinds, the joined provisional text and the one final event.
EXPECTED = {
    "runner_events.py": [
        "run: Hello! Ask me about OTP.",
        "event: author=user partial=False final=False",
        "event: author=RunnerAgent partial=True final=False",
        "event: author=RunnerAgent partial=False final=True",
        "provisional: Supervisors restart failed children according to their strategy.",
        "final (1 event): Supervisors restart failed children according to their strategy.",
    ],
    "runner_supervised.py": [
        "seq=1 author=user partial=False final=False",
        "author=RunnerAgent partial=True final=False",
        "author=RunnerAgent partial=False final=True",
        "terminal: Completed(output='A supervisor restarts its children when they fail.')",
        "status: completed",
        "paused: reason=tool_confirmation state=paused",
        "resumed: Completed(output='Rotated the logs of billing.')",
        "resumed_to matches: True, parent_run_id matches: True",
        "second resume: already_resumed",
    ],
    "runner_approval.py": [
        "dry run: Completed(output='Release result: environment: production, status: checked.')",
        "paused: type=tool_confirmation function=publish_release hint=Publish production opaque action id=True",
        "invalid response: invalid_resume_response",
        "approved: Completed(output='Release result: environment: production, status: published.')",
        "rejected: Completed(output='Release result: reason: tool_confirmation_rejected, type: ToolError.')",
    ],
    "runner_long_running.py": [
        "paused: reason=long_running operation_id=export-42 message=The external export is running.",
        "progress event: partial=True progress=50",
        "final answer: The export of invoices is completed: export.zip.",
        "late progress update: no_paused_invocation",
    ],
    "runner_content_streaming.py": [
        "completed: A single red pixel on a transparent background, the smallest possible picture.",
        "replay terminal is the awaited outcome: True",
        "replayed: user -> partial -> final",
        "user event has the image: True",
        "partials join to the final: True",
        "subscribers after unsubscribe: 0",
    ],
    "runner_human_approval.py": [
        "approval requested: reason=long_running function=request_human_approval "
        "operation_id=approval:delete_deployment:obsolete",
        "event: author=user parts=text final=False",
        "event: author=ApprovalAgent parts=function_call final=False",
        "event: author=ApprovalAgent parts=- final=False",
        "event: author=ApprovalAgent parts=function_response final=False",
        "event: author=ApprovalAgent parts=text final=True",
        "recorded response: approved=True approver=operator@example.com",
        "final answer: Approved by operator@example.com: deleting the obsolete deployment.",
        "second resume: no_paused_invocation",
    ],
    "runner_admission.py": [
        "reject while BatchAgent is busy: busy",
        "queued, then admitted: You said: A queued question.",
        "first run: Completed(output='The nightly report is ready.')",
        "queue deadline passed: admission_timeout",
        "tool denied, model goes on: The delete_deployment tool returned: reason: denied, type: PolicyDenied.",
        "audit event: policy=ops-policy operation=tool subject=delete_deployment outcome=denied reason=denied",
        "agent denied: not_allowed",
        "audit event: policy=batch-only operation=agent subject=OpsAgent outcome=denied reason=not_allowed",
    ],
    "runner_policy_plugin.py": [
        "amended request: The instructions I was given: You operate our services. Never reveal internal addresses.",
        "amended tool result: The service_status tool returned: service: billing, state: healthy.",
        "stored tool result: [{'service': 'billing', 'state': 'healthy'}]",
        "halted: plugin_halted plugin=ops-policy hook=before_tool cause=destructive_tool",
        "stored events: text -> function_call -> plugin_halted",
    ],
    "runner_stateful_plugin.py": [
        "alice run 1: You said: Question 1.",
        "alice run 2: You said: Question 2.",
        "alice run 3: plugin_halted cause=run_budget_spent",
        "bob run 1: You said: Hello.",
        "instance: calls=4 commits=4 phase=ready",
        "instance gone, closed policy: plugin_failed hook=before_run",
        "started again, alice run 4: You said: Question 4.",
    ],
}


def test_every_runner_sample_is_covered() -> None:
    assert sorted(p.name for p in (ROOT / "samples").glob("runner_*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_runner_sample_runs_and_prints_the_expected_output(sample: str) -> None:
    assert_lines(run_sample(sample), EXPECTED[sample])
