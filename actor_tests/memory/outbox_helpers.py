"""Memory services for the outbox tests that run inside node processes (importable by name there).

* :class:`CountingMemory` counts its ``add_batch`` calls in a :class:`~adk_actors.testing.CrossProcessCounter`
  (adapter mutations attempted, whatever process made them).
* :class:`BlockingMemory` also counts, and after its ``block_after``-th committed ``add_batch`` tells the test
  through a Unix socket and then holds the drain pass forever, so the test can SIGKILL the node mid-ingestion.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from typing import Any

from adk_actors.memory import MemoryEntry, MemoryScope, NewMemory, SqlMemoryService
from adk_actors.testing import CrossProcessCounter


class CountingMemory(SqlMemoryService):
    def __init__(self, url: str, *, counter: str, **options: Any) -> None:
        self._counter = counter
        super().__init__(url, **options)

    def _descriptor(self) -> dict[str, Any]:
        return {**super()._descriptor(), "counter": self._counter}

    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        result = super().add_batch(scope, items)
        CrossProcessCounter(self._counter).incr()
        return result


class BlockingMemory(CountingMemory):
    def __init__(self, url: str, *, counter: str, notify: str, block_after: int = 1, **options: Any) -> None:
        self._notify = notify
        self._block_after = block_after
        super().__init__(url, counter=counter, **options)

    def _descriptor(self) -> dict[str, Any]:
        return {**super()._descriptor(), "notify": self._notify, "block_after": self._block_after}

    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        result = super().add_batch(scope, items)  # committed to memory; the outbox rows are not marked done yet
        if CrossProcessCounter(self._counter).value >= self._block_after:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(self._notify)
                sock.sendall(b"x")
            threading.Event().wait()  # hold the claim until the node is SIGKILLed
        return result
