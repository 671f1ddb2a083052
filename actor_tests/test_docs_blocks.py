"""Every code block of ``README.md`` and ``docs/*.md`` runs in a test or is marked ``<!-- illustrative -->`` (R8).

Each runnable ```` ```python ```` block of ``docs/*.md`` is its own subprocess in the README's offline environment
(:mod:`actor_tests.docs_env`): the emulator's built-in script answers the model calls, the node gets a free admin
port and a data dir of its own. The README's Python blocks run in ``actor_tests/test_readme.py``, and
``docs/WORKFLOWS.md``'s in ``actor_tests/workflows/test_samples.py`` (its blocks are excerpts of the samples, which
run there). No test executes blocks of any other language (shell, JSON, TOML, diagrams, plain text), so each of
those must carry the marker: :func:`test_every_block_of_every_page_runs_or_is_marked_illustrative` fails on one that
does not (see ``docs/TESTING.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actor_tests.docs_env import ILLUSTRATIVE, ROOT, DocBlock, fenced_blocks, python_blocks, run_block

CHECKED_ELSEWHERE = {"WORKFLOWS.md": "actor_tests/workflows/test_samples.py"}
"""Pages whose Python blocks another test module checks."""
EXECUTED_LANGUAGES = frozenset({"python"})
"""Fence languages whose unmarked blocks some test runs (here, ``test_readme.py`` or ``test_samples.py``)."""

ALL_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = sorted(path for path in (ROOT / "docs").glob("*.md") if path.name not in CHECKED_ELSEWHERE)
BLOCKS = [block for page in PAGES for block in python_blocks(page)]
RUNNABLE = [block for block in BLOCKS if not block.illustrative]


def test_the_docs_have_python_blocks_to_run() -> None:
    assert RUNNABLE
    assert any(block.path.name == "GUIDE.md" for block in RUNNABLE)


def test_every_block_of_every_page_runs_or_is_marked_illustrative() -> None:
    """Only Python blocks are executed; a block of any other language (or none) needs the marker."""
    assert {page.name for page in ALL_PAGES} >= {"README.md", "GUIDE.md", "CLI.md", "WORKFLOWS.md"}
    unexecuted = [
        f"{block.id} ({block.language or 'no language'})"
        for page in ALL_PAGES
        for block in fenced_blocks(page)
        if block.language not in EXECUTED_LANGUAGES and not block.illustrative
    ]
    assert unexecuted == [], f"no test runs these blocks: run them in a test or mark them {ILLUSTRATIVE}"


def test_every_fence_starts_a_line() -> None:
    """The block finder reads backtick fences at the start of a line: an indented or ``~~~`` fence would hide a
    block from the checks above."""
    hidden = [
        f"{page.name}:{number}"
        for page in ALL_PAGES
        for number, text in enumerate(page.read_text().splitlines(), start=1)
        if re.match(r"\s+(```|~~~)|~~~", text)
    ]
    assert hidden == []


def test_every_illustrative_marker_sits_above_a_code_block() -> None:
    """A marker above prose exempts nothing: it is a mistake."""
    for page in ALL_PAGES:
        lines = page.read_text().splitlines()
        fences = {block.line for block in fenced_blocks(page)}
        for number, text in enumerate(lines, start=1):
            if text.strip() == ILLUSTRATIVE:
                below = next((n for n in range(number + 1, len(lines) + 1) if lines[n - 1].strip()), None)
                assert below in fences, f"{page.name}:{number}: {ILLUSTRATIVE} is not right above a code block"


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.id)
def test_docs_python_block_runs_or_is_marked_illustrative(block: DocBlock, tmp_path: Path) -> None:
    result = run_block(block.code, tmp_path)
    assert result.returncode == 0, (
        f"{block.id} failed; make it runnable offline or mark it {ILLUSTRATIVE}\n{result.stderr[-2000:]}"
    )
