"""Signals between a test and the workflow actions it runs in worker processes, with no sleeps.

* :class:`Channel` — a FIFO the actions write one JSON line to (``post``); the test reads it with ``select()`` and
  a deadline. The test keeps a writer of its own open, so the FIFO never reads as EOF between two actions.
* :class:`Gate` — a one-shot FIFO an action blocks on (``hold``) until the test opens it; an action that is never
  released gives up after its own bound, so nothing outlives a failed test for long.
* :func:`wait_exit` — block on a pidfd until a process (a killed worker) has exited.

Everything an action calls is a module-level function, so the closures that call it pickle by reference to here.
"""

from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path
from typing import Any

from actor_tests.runtime.helpers import wait_exit as _wait_exit

WAIT_S = 30.0
"""How long a test waits for a signal or a process exit before failing."""
HOLD_S = 60.0
"""How long an action waits at a gate that is never opened (its worker is normally killed long before)."""


class Channel:
    """Test side of a FIFO that actions post JSON lines to."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = str(path)
        self._read = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._hold = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # no EOF while no action writes
        self._buffer = b""

    def next(self, timeout: float = WAIT_S) -> dict[str, Any]:
        """The next posted line (a dict), waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: nothing was posted in time.
        """
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no signal on {self.path} within {timeout}s")
            ready, _, _ = select.select([self._read], [], [], remaining)
            if ready:
                self._buffer += os.read(self._read, 65536)
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def expect(self, event: str, timeout: float = WAIT_S, **fields: Any) -> dict[str, Any]:
        """The next line, asserted to be ``event`` with ``fields``."""
        message = self.next(timeout)
        assert message.get("event") == event and all(message.get(k) == v for k, v in fields.items()), message
        return message

    def pending(self) -> bytes:
        """Whatever was posted and not read yet (without waiting)."""
        ready, _, _ = select.select([self._read], [], [], 0)
        if ready:
            self._buffer += os.read(self._read, 65536)
        return self._buffer

    def close(self) -> None:
        os.close(self._read)
        os.close(self._hold)


class Gate:
    """Test side of a one-shot FIFO an action waits on."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            os.mkfifo(path)
        self.path = str(path)

    def open(self) -> None:
        """Release the action waiting at this gate (it must have posted that it waits: it is reading the FIFO)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"go")
        finally:
            os.close(fd)


def post(channel: str, **fields: Any) -> None:
    """Action side: post one JSON line (a single atomic write); dropped when no test reads any more."""
    try:
        fd = os.open(channel, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.write(fd, (json.dumps(fields) + "\n").encode())
    finally:
        os.close(fd)


def hold(gate: str, channel: str, timeout: float = HOLD_S, **fields: Any) -> bool:
    """Action side: start reading ``gate``, post ``{"event": "waiting", "pid": ..., **fields}``, then block until
    the test opens the gate (``True``) or ``timeout`` passes (``False``)."""
    fd = os.open(gate, os.O_RDONLY | os.O_NONBLOCK)
    try:
        post(channel, event="waiting", pid=os.getpid(), **fields)
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready) and os.read(fd, 16) == b"go"
    finally:
        os.close(fd)


def wait_exit(pid: int, timeout: float = WAIT_S) -> bool:
    """Block on a pidfd until ``pid`` has exited (``True``), or ``timeout`` passes (``False``)."""
    return _wait_exit(pid, timeout)
