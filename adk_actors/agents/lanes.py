"""Admission of an agent's turns: FIFO lanes with a bound on how many lanes run at once (pure, no actors).

A lane is the compatibility conversation (every ``prompt``/``delegate`` of one agent) or one
``(app_name, user_id, session_id)`` invocation scope. One turn per lane runs at a time, in arrival order; at most
``limit`` lanes run at once; lanes waiting for a slot are admitted in the order they started waiting, and a lane
that still has turns after one finishes goes to the back of that queue (fair between lanes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["Lanes"]

T = TypeVar("T")


class Lanes(Generic[T]):
    """FIFO lanes with at most ``limit`` of them active."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.queues: dict[str, deque[T]] = {}
        self.waiting: deque[str] = deque()
        self.active: dict[str, T] = {}

    def add(self, lane: str, item: T) -> None:
        """Queue ``item`` at the end of ``lane``."""
        new = lane not in self.queues
        self.queues.setdefault(lane, deque()).append(item)
        if new and lane not in self.active:
            self.waiting.append(lane)

    def next(self) -> tuple[str, T] | None:
        """Admit the next item when a slot is free (it becomes its lane's active item), else ``None``."""
        if not self.waiting or len(self.active) >= self.limit:
            return None
        lane = self.waiting.popleft()
        queue = self.queues[lane]
        item = queue.popleft()
        if not queue:
            del self.queues[lane]
        self.active[lane] = item
        return lane, item

    def release(self, lane: str, item: T) -> None:
        """``item`` (the lane's active item) finished; the lane queues for a slot again if it has more."""
        if self.active.get(lane) is item:
            del self.active[lane]
            if lane in self.queues:
                self.waiting.append(lane)

    def queued(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def drain(self) -> Iterator[T]:
        """Remove and yield every active and queued item (the agent is exiting)."""
        items = [*self.active.values(), *(i for q in self.queues.values() for i in q)]
        self.active.clear()
        self.queues.clear()
        self.waiting.clear()
        yield from items
