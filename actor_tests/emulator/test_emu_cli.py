"""``python -m adk_actors.emulator`` as a subprocess: serves, and exits cleanly on SIGTERM / SIGINT."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from adk_actors.emulator.cli import main

from .helpers import GEN, post, user


def _spawn(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "adk_actors.emulator", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("Gemini emulator listening on http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
    return proc, line.rsplit(" ", 1)[1].strip()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_serves_and_stops_on_signal(sig: signal.Signals, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"when": {}, "respond": {"text": "from the cli"}}]}))
    proc, url = _spawn("--script", str(script), "--api-key", "cli-key")
    try:
        resp = post(url, GEN, {"contents": [user("x")]}, key="cli-key")
        assert resp.json()["candidates"][0]["content"]["parts"][0]["text"] == "from the cli"
        assert post(url, GEN, {"contents": [user("x")]}, key="bad").status_code == 400
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Gemini emulator stopped" in out
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_cli_argument_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--record", "x.jsonl"]) == 2
    assert "--record and --upstream" in capsys.readouterr().err
    assert main(["--port", "0", "--script", "/nonexistent/script.json"]) == 1
