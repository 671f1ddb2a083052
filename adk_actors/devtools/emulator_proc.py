"""The Gemini emulator in a process of its own, for benchmarks whose CPU figures must exclude the model side.

``with emulator_process(script, latency_ms) as emu:`` starts ``python -m adk_actors.emulator`` on a free loopback
port, waits for its health endpoint, and stops it on exit. ``emu.base_url`` and ``emu.requests`` (read through the
emulator's control endpoint) mirror the in-process :class:`~adk_actors.emulator.Emulator`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import requests

__all__ = ["EmulatorProcess", "emulator_process"]


class EmulatorProcess:
    def __init__(self, port: int, proc: subprocess.Popen[bytes], live_port: int = 0) -> None:
        self.port = port
        self.proc = proc
        self.base_url = f"http://127.0.0.1:{port}"
        self.live_url = (
            f"ws://127.0.0.1:{live_port}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
            if live_port
            else ""
        )
        """The Live endpoint (plain ``ws://``) when started with ``live=True``, else empty."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def requests(self) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.base_url}/_emulator/requests", timeout=10)
        resp.raise_for_status()
        return list(resp.json()["requests"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def emulator_process(
    script: dict[str, Any] | None = None, latency_ms: int = 0, start_timeout_s: float = 30.0, *, live: bool = False
) -> Iterator[EmulatorProcess]:
    """Run the emulator in a child process for the duration of the block.

    Raises:
        RuntimeError: the emulator did not answer its health check in time.
    """
    with tempfile.TemporaryDirectory(prefix="adk-emu-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "adk_actors.emulator",
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port()),
            "--latency-ms",
            str(latency_ms),
        ]
        if script is not None:
            path = os.path.join(tmp, "script.json")
            with open(path, "w") as fh:
                json.dump(script, fh)
            argv += ["--script", path]
        live_port = _free_port() if live else 0
        argv += ["--live-port", str(live_port)] if live else ["--no-live"]
        port = int(argv[argv.index("--port") + 1])
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True
        )
        emu = EmulatorProcess(port, proc, live_port)
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                try:
                    if requests.get(f"{emu.base_url}/_emulator/health", timeout=1).ok:
                        break
                except requests.RequestException:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the emulator process did not start")
                time.sleep(0.05)
            yield emu
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
