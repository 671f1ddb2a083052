"""Running ``samples/*.py`` in tests: each as its own process, offline, with no ``ADK_*`` or Gemini settings leaking
in from the environment that runs the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LEAKY = {"GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL"}


def sample_env() -> dict[str, str]:
    """The caller's environment without node settings or Gemini credentials."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ADK_") and k not in _LEAKY}


def run_sample(name: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``samples/<name>`` from the repository root; fails the test when it exits non-zero."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / name)],
        cwd=ROOT,
        env=sample_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def assert_lines(result: subprocess.CompletedProcess[str], expected: Iterable[str]) -> None:
    """Every expected text appears in some line of the sample's output."""
    lines = result.stdout.splitlines()
    for text in expected:
        assert any(text in line for line in lines), (text, result.stdout)
