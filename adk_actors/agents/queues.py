"""Admission of an agent's turns: one FIFO queue per session, with a bound on how many queues run at once (pure).

A session queue holds the turns of one conversation: the compatibility conversation (every ``prompt``/``delegate``
of one agent) or one ``(app_name, user_id, session_id)`` invocation scope. One turn per queue runs at a time, in
arrival order; at most ``limit`` queues run at once; queues waiting for a slot are admitted in the order they
started waiting, and a queue that still has turns after one finishes goes to the back of that line (fair between
sessions). No actors here: the agent actor owns one :class:`SessionQueues`.

(Not to be confused with the runtime's *lanes*, ``runtime/lane.py``: the Unix-socket transport between a node's
processes.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["SessionQueues"]

T = TypeVar("T")


class SessionQueues(Generic[T]):
    """FIFO queues keyed by session, with at most ``limit`` of them active."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.pending: dict[str, deque[T]] = {}
        self.waiting: deque[str] = deque()
        self.active: dict[str, T] = {}

    def add(self, key: str, item: T) -> None:
        """Queue ``item`` at the end of the queue ``key``."""
        new = key not in self.pending
        self.pending.setdefault(key, deque()).append(item)
        if new and key not in self.active:
            self.waiting.append(key)

    def next(self) -> tuple[str, T] | None:
        """Admit the next item when a slot is free (it becomes its queue's active item), else ``None``."""
        if not self.waiting or len(self.active) >= self.limit:
            return None
        key = self.waiting.popleft()
        queue = self.pending[key]
        item = queue.popleft()
        if not queue:
            del self.pending[key]
        self.active[key] = item
        return key, item

    def release(self, key: str, item: T) -> None:
        """``item`` (the queue's active item) finished; the queue waits for a slot again if it has more."""
        if self.active.get(key) is item:
            del self.active[key]
            if key in self.pending:
                self.waiting.append(key)

    def queued(self) -> int:
        return sum(len(q) for q in self.pending.values())

    def drain(self) -> Iterator[T]:
        """Remove and yield every active and queued item (the agent is exiting)."""
        items = [*self.active.values(), *(i for q in self.pending.values() for i in q)]
        self.active.clear()
        self.pending.clear()
        self.waiting.clear()
        yield from items
