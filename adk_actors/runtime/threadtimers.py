"""One timer thread per process for callbacks due on other threads (request deadlines, stream batch flushes).

A ``threading.Timer`` starts a thread for every timer; provider requests and stream batches arm one per call, so
they share this heap instead: ``key = thread_timers.add(delay_s, callback)``, ``thread_timers.cancel(key)``. The
callback runs on the timer thread and must be quick and thread-safe. A callback that raises is logged as a crash
report (exception type, scrubbed message and stack trace) and the thread goes on with the next timer: an error
here is never swallowed silently. A forked child starts with no thread and an empty heap.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable

from adk_actors.logs import log_crash

__all__ = ["ThreadTimers", "thread_timers"]


class ThreadTimers:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, delay_s: float, callback: Callable[[], None]) -> int:
        key = next(self._ids)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay_s, key, callback))
            self._live.add(key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="adk-thread-timers", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == key:
                self._cond.notify_all()
        return key

    def cancel(self, key: int) -> None:
        with self._cond:
            self._live.discard(key)
            if len(self._heap) > 64 and len(self._live) * 2 < len(self._heap):
                self._heap = [entry for entry in self._heap if entry[1] in self._live]
                heapq.heapify(self._heap)

    def pending(self) -> int:
        with self._cond:
            return len(self._live)

    def stop_if_idle(self) -> None:
        """Stop the thread when no timer is pending (the next ``add`` starts a new one)."""
        with self._cond:
            if self._live:
                return
            thread, self._thread = self._thread, None
            self._heap.clear()
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._thread is not threading.current_thread():
                    return  # stopped (or replaced)
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                due, key, callback = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(key)
            try:
                callback()
            except Exception as exc:  # logged, and the thread lives on for the other timers
                log_crash(
                    "adk_actors.thread_timers",
                    "timer callback raised",
                    exc,
                    callback=getattr(callback, "__qualname__", type(callback).__name__),
                )


thread_timers = ThreadTimers()
os.register_at_fork(after_in_child=thread_timers.reset)
