"""The README's Python blocks run as written (in a subprocess, so the system they start is their own), offline: the
model is the emulator (``GEMINI_BASE_URL``) and the node gets a free admin port (``ADK_ADMIN_PORT``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks(ROOT / "README.md"))))
def test_readme_python_block_runs(index: int, tmp_path: Path) -> None:
    code = _python_blocks(ROOT / "README.md")[index]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_")}
    with Emulator() as emu:
        env.update(GEMINI_BASE_URL=emu.base_url, GEMINI_API_KEY="readme-key", ADK_ADMIN_PORT=str(reserved_port()),
                   ADK_DATA_DIR=str(tmp_path / "data"))
        result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120, stdin=subprocess.DEVNULL, check=False, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
