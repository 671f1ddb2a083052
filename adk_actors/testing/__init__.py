"""Public test helpers: ports, process checks, probe actors, and agent turns in process with a scripted model
(:mod:`adk_actors.testing.turns`), so users test their agents the way we do."""

from __future__ import annotations

import os
import random
import socket

from adk_actors.runtime.system import group_pids, port_listening
from adk_actors.testing.turns import (
    AgentCall,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    TurnHarness,
    TurnOutcome,
    function_call,
    run_turn,
)

__all__ = [
    "AgentCall",
    "CrossProcessCounter",
    "ModelRequest",
    "ScriptedModel",
    "ToolCall",
    "TurnHarness",
    "TurnOutcome",
    "free_port",
    "function_call",
    "group_pids",
    "pids_with_cmdline",
    "port_listening",
    "reserved_port",
    "run_turn",
]

# Admin ports for tests come from a range below the kernel's ephemeral range (32768-60999 by default), so an
# outgoing connection can never be handed a port a test is about to listen on.
RESERVED_RANGE = (20000, 29999)


def pids_with_cmdline(marker: bytes) -> list[int]:
    """Live processes whose command line (arguments joined by NUL bytes) contains ``marker``: what a test checks
    to see that nothing it started survives."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def free_port() -> int:
    """An ephemeral port that is free right now (for servers that bind immediately, like the emulator)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reserved_port(rng: random.Random | None = None) -> int:
    """A free admin port from the reserved test range (outside the ephemeral range)."""
    rng = rng or random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "little"))
    low, high = RESERVED_RANGE
    for _ in range(200):
        port = rng.randint(low, high)
        if port_listening(port):
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port in the reserved test range")


class CrossProcessCounter:
    """A counter shared by every process on this machine through a locked file (picklable: it is its path).

    Closures run in worker processes *by value*, so a captured ``int`` cannot count attempts; this can.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def incr(self, by: int = 1) -> int:
        """Add ``by`` and return the new value (atomic across processes)."""
        import fcntl

        with open(self.path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            value = int(fh.read() or 0) + by
            fh.seek(0)
            fh.truncate()
            fh.write(str(value))
            return value

    @property
    def value(self) -> int:
        try:
            with open(self.path) as fh:
                return int(fh.read() or 0)
        except FileNotFoundError:
            return 0
