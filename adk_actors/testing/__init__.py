"""Public test helpers: ports, process checks, and probe actors, so users test their agents the way we do."""

from __future__ import annotations

import os
import random
import socket

from adk_actors.runtime.system import group_pids, port_listening

__all__ = ["free_port", "group_pids", "port_listening", "reserved_port"]

# Admin ports for tests come from a range below the kernel's ephemeral range (32768-60999 by default), so an
# outgoing connection can never be handed a port a test is about to listen on.
RESERVED_RANGE = (20000, 29999)


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
