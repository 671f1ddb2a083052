"""``python -m adk_actors`` is the ``adk`` command (same parser, same exit codes, same JSON errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from adk_actors import __version__
from adk_actors.testing import reserved_port

ROOT = Path(__file__).resolve().parents[2]


def _module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adk_actors", *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_python_dash_m_prints_the_version_and_the_adk_usage() -> None:
    version = _module("--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"adk_actors {__version__}")
    usage = _module()
    assert usage.returncode == 0 and usage.stdout.startswith("usage: adk ")


def test_python_dash_m_reports_a_command_failure_by_reason_and_exit_code() -> None:
    port = reserved_port()  # nothing listens there
    result = _module("status", "--port", str(port))
    assert result.returncode == 1
    error = json.loads(result.stderr)["error"]
    assert (error["reason"], error["details"]) == ("system_not_running", {"port": port})
