"""The README's Python blocks run as written (in a subprocess, so the system they start is their own)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks(ROOT / "README.md"))))
def test_readme_python_block_runs(index: int, tmp_path: Path) -> None:
    code = _python_blocks(ROOT / "README.md")[index]
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
