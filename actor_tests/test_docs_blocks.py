"""Every ```` ```python ```` block of ``docs/*.md`` runs as written or is marked ``<!-- illustrative -->`` (R8).

Each runnable block is its own subprocess in the README's offline environment (:mod:`actor_tests.docs_env`): the
emulator's built-in script answers the model calls, the node gets a free admin port and a data dir of its own.
``docs/WORKFLOWS.md`` is checked by ``actor_tests/workflows/test_samples.py`` instead (its blocks are excerpts of
the samples, which run there). Shell, JSON, TOML and plain blocks are not executed (see ``docs/TESTING.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actor_tests.docs_env import ILLUSTRATIVE, ROOT, DocBlock, fenced_blocks, python_blocks, run_block

CHECKED_ELSEWHERE = {"WORKFLOWS.md": "actor_tests/workflows/test_samples.py"}
"""Pages whose blocks another test module checks."""

PAGES = sorted(path for path in (ROOT / "docs").glob("*.md") if path.name not in CHECKED_ELSEWHERE)
BLOCKS = [block for page in PAGES for block in python_blocks(page)]
RUNNABLE = [block for block in BLOCKS if not block.illustrative]


def test_the_docs_have_python_blocks_to_run() -> None:
    assert RUNNABLE
    assert any(block.path.name == "GUIDE.md" for block in RUNNABLE)


def test_every_illustrative_marker_sits_above_a_code_block() -> None:
    """A marker above prose exempts nothing: it is a mistake (a marker above a shell block is allowed)."""
    for page in PAGES:
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
        f"{block.id} failed; make it runnable offline or mark it {ILLUSTRATIVE}\n{result.stderr[-2000:]}")
