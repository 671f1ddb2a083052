"""Every workflow sample in ``samples/`` (and ``samples/retry.py``) runs as its own process (own actor system, own
temporary directory) and prints the expected lines; every Python block of ``docs/WORKFLOWS.md`` is an excerpt of a
sample or is marked illustrative."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from actor_tests.samples_runner import run_sample

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "workflow_basics.py": [
        "sequential: Completed state={'count': 1, 'done': True} completed=True output='ready'",
        "sequential: rejected before it started: invalid_input {'path': '$', 'rule': 'required'}",
        "parallel: state={'left': 1, 'right': 2} output={'left': 'left-output', 'right': 'right-output'}",
        "parallel: Failed reason=merge_conflict details={'node': '$fork', 'key': 'winner', "
        "'branches': ['left', 'right']}",
        "retry: state={'retried': True} output='recovered' attempts=2",
        "loop: state={'attempt': 2} output=2",
        "transfer: state={'triaged': True, 'resolved': True} output='resolved' transfers=1",
        "graph: state={'count': 3} output=3 steps=3",
        "failed: reason=job_timeout node=step",
        "failed: reason=deadline_exceeded node=None",
        "failed: reason=function_failed node=step",
        "failed: reason=invalid_action_result node=step",
        "failed: reason=max_steps node=again",
        "not compiled: unpicklable_callable path=fn.<closure>.lock",
    ],
    "workflow_fork_approval.py": [
        "fork/join: state={'left': 1, 'right': 2, 'joined': True} "
        "output={'left': 'left-output', 'right': 'right-output'}",
        "approval: Paused details={'reason': 'human_approval', 'summary': 'Approve this action', "
        "'node': 'approval'} state={'approval_requested': True}",
        "approval: approved -> Completed state={'approval_requested': True, 'accepted': True} steps=2",
        "approval: rejected -> Completed state={'approval_requested': True}",
        "typed nodes: size=3 path=['classify', 'settle', 'small'] state={'size': 3, 'paid': 10} output={'price': 6}",
        "typed nodes: size=12 path=['classify', 'large', 'settle'] state={'size': 12, 'reviewed': True, "
        "'paid': 40} output={'price': 36}",
        "agent node: state={'doc': 'd-7', 'reviewed': True} output='You said: Review d-7'",
    ],
    "workflow_cancel_resume.py": [
        "status: state=running in_flight=1",
        "checkpoint: seq=1 state={'prepared': True} committed=['prepare'] steps_left=2",
        "cancelled: reason=revise_later same_checkpoint=True",
        "first worker killed: True",
        "second worker is a new process: True",
        "same idempotency key: wait#1/action == wait#1/action",
        "resumed: Completed state={'prepared': True, 'released': True} steps_used=2",
        "prepare ran 1 time(s)",
    ],
    "workflow_durable.py": [
        "first system: Paused details={'reason': 'human_approval', 'summary': 'Approve this action', "
        "'node': 'approval'}",
        "ledger: phase=paused owned=False checkpoint_seq=2",
        "second system: Completed state={'approval_requested': True, 'accepted': True}",
        "ledger: phase=completed owned=False result={'output': None, "
        "'state': {'accepted': True, 'approval_requested': True}}",
        "deleted: True",
        "after delete: not_found",
    ],
    "retry.py": [
        "result=recovered attempts=3",
        "retry_exhausted: attempts=3 last_error=function_failed ran=3",
    ],
}

TESTED_ELSEWHERE = {
    "workflow_legacy_graph.py": "actor_tests/workflows/test_graph.py::test_the_legacy_graph_sample_runs",
}
"""Workflow samples whose run is pinned by another test module."""

ILLUSTRATIVE = "<!-- illustrative -->"


def test_every_workflow_sample_is_covered() -> None:
    samples = sorted(p.name for p in (ROOT / "samples").glob("workflow_*.py"))
    assert samples == sorted([name for name in EXPECTED if name.startswith("workflow_")] + list(TESTED_ELSEWHERE))


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_sample_runs_and_prints_the_expected_lines(sample: str) -> None:
    result = run_sample(sample)
    assert result.stdout.splitlines() == EXPECTED[sample], result.stdout


def _doc_blocks(path: Path) -> list[tuple[str, bool]]:
    """``(code, illustrative)`` for every ```` ```python ```` block of a Markdown file."""
    blocks = []
    for match in re.finditer(
        r"(?:^(<!-- illustrative -->)\n)?```python\n(.*?)```", path.read_text(), flags=re.S | re.M
    ):
        blocks.append((match.group(2), match.group(1) == ILLUSTRATIVE))
    return blocks


def _is_excerpt(block: str, source: str) -> bool:
    """Whether ``block`` equals consecutive lines of ``source`` once both are dedented."""
    wanted = textwrap.dedent(block).rstrip("\n").splitlines()
    lines = source.splitlines()
    for start in range(len(lines) - len(wanted) + 1):
        window = "\n".join(lines[start : start + len(wanted)])
        if textwrap.dedent(window).splitlines() == wanted:
            return True
    return False


def test_every_workflows_doc_block_is_a_sample_excerpt_or_marked_illustrative() -> None:
    sources = {p.name: p.read_text() for p in (ROOT / "samples").glob("*.py")}
    blocks = _doc_blocks(ROOT / "docs" / "WORKFLOWS.md")
    assert blocks
    for code, illustrative in blocks:
        if not illustrative:
            assert any(_is_excerpt(code, source) for source in sources.values()), code
