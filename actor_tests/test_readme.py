"""The README's Python blocks run as written (in a subprocess, so the system they start is their own), offline: the
model is the emulator (``GEMINI_BASE_URL``) and the node gets a free admin port (``ADK_ADMIN_PORT``); see
:mod:`actor_tests.docs_env`."""

from __future__ import annotations

from pathlib import Path

import pytest

from actor_tests.docs_env import ROOT, DocBlock, python_blocks, run_block

BLOCKS = [block for block in python_blocks(ROOT / "README.md") if not block.illustrative]


def test_the_readme_has_python_blocks_to_run() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.id)
def test_readme_python_block_runs(block: DocBlock, tmp_path: Path) -> None:
    result = run_block(block.code, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
