"""Bounded blocking-I/O threads inside an actor process, completing through a self-pipe.

The owning actor (a host) watches :attr:`IOPool.read_fd` with ``ThespianWatch``; a finished call writes one byte
to the pipe, so the actor wakes within a fraction of a millisecond without polling (``self.send`` from a thread
would lose messages). Each call gets a :class:`~adk_actors.runtime.cancel.CancelToken`; cancelling it shuts the
call's sockets down so even a call waiting for response headers returns promptly and frees its thread.
The pool never forks: its owner must not create process actors once threads exist.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError, ProviderError
from adk_actors.runtime.cancel import CancelToken
from adk_actors.runtime.httpcancel import use_token

__all__ = ["Completion", "IOPool", "IoResult"]


@dataclass(frozen=True, slots=True)
class IoResult:
    io_id: int
    value: Any
    error: AdkError | None
    progress: bool = False
    """An intermediate value reported with ``token.report(value)``; the final result follows later."""


@dataclass(slots=True)
class _Job:
    io_id: int
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    token: CancelToken


class Completion:
    """Marks a call that needs no pool thread: ``start(token, complete, *args)`` runs at once on the submitting
    thread, must not block, and arranges for ``complete(value, error)`` to be called exactly once later from any
    thread (an event loop's done callback, for example). Cancelling the token must make it complete soon."""

    __slots__ = ("start",)

    def __init__(self, start: Callable[..., None]) -> None:
        self.start = start


class IOPool:
    """At most ``max_threads`` concurrent blocking calls; further calls wait in FIFO order."""

    def __init__(self, max_threads: int) -> None:
        self.max_threads = max(1, max_threads)
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._lock = threading.Lock()
        self._waiting: deque[_Job] = deque()
        self._tokens: dict[int, CancelToken] = {}
        self._work: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[IoResult] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._closed = False

    # ---- owner side (the actor's thread) --------------------------------------------------------------------
    def submit(self, io_id: int, fn: Callable[..., Any], *args: Any) -> CancelToken:
        """Run ``fn(token, *args)`` on a pool thread; its result arrives through :meth:`drain`, preceded by any
        values ``fn`` reported with ``token.report(value)`` (in order)."""
        token = CancelToken()
        token.progress = lambda value: self._finish(IoResult(io_id, value, None, progress=True))
        if isinstance(fn, Completion):
            with self._lock:
                self._tokens[io_id] = token
            self._start_external(io_id, fn, args, token)
            return token
        job = _Job(io_id, fn, args, token)
        with self._lock:
            self._tokens[io_id] = token
            if self._busy < self.max_threads:
                self._busy += 1
                self._ensure_thread()
                self._work.put(job)
            else:
                self._waiting.append(job)
        return token

    def _start_external(self, io_id: int, fn: Completion, args: tuple[Any, ...], token: CancelToken) -> None:
        done = threading.Lock()

        def complete(value: Any, error: AdkError | None) -> None:
            if not done.acquire(blocking=False):
                return  # exactly once
            with self._lock:
                self._tokens.pop(io_id, None)
            self._finish(IoResult(io_id, value, error))

        try:
            fn.start(token, complete, *args)
        except AdkError as err:
            complete(None, err)
        except Exception as exc:
            complete(
                None,
                ProviderError(
                    f"blocking call failed ({type(exc).__name__})",
                    reason="io_failed",
                    details={"exception_type": type(exc).__name__},
                ),
            )

    def cancel(self, io_id: int) -> bool:
        """Cancel a queued or running call (its result, a ``cancelled`` error, still arrives via drain)."""
        with self._lock:
            token = self._tokens.get(io_id)
            for job in list(self._waiting):
                if job.io_id == io_id:
                    self._waiting.remove(job)
                    self._tokens.pop(io_id, None)
                    self._finish(IoResult(io_id, None, ProviderError("cancelled", reason="cancelled")))
                    return True
        if token is None:
            return False
        token.cancel()
        return True

    def drain(self) -> list[IoResult]:
        """Collect finished calls (call after the read fd became readable)."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.read_fd, 4096):
                pass
        results = []
        while True:
            try:
                results.append(self._done.get_nowait())
            except queue.Empty:
                return results

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "threads": len(self._threads),
                "max_threads": self.max_threads,
                "busy": self._busy,
                "queued": len(self._waiting),
            }

    def close(self) -> None:
        """Cancel everything and stop the threads (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tokens = list(self._tokens.values())
            self._waiting.clear()
        for token in tokens:
            token.cancel()
        for _ in self._threads:
            self._work.put(None)
        for fd in (self.read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    # ---- pool threads ---------------------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if len(self._threads) < self.max_threads and len(self._threads) < self._busy:
            thread = threading.Thread(target=self._loop, name=f"adk-io-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _loop(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            self._run(job)

    def _run(self, job: _Job) -> None:
        try:
            if job.token.cancelled:
                raise ProviderError("cancelled", reason="cancelled")
            with use_token(job.token):
                value = job.fn(job.token, *job.args)
            result = IoResult(job.io_id, value, None)
        except AdkError as err:
            result = IoResult(job.io_id, None, err)
        except Exception as exc:
            reason = "cancelled" if job.token.cancelled else "io_failed"
            result = IoResult(
                job.io_id,
                None,
                ProviderError(
                    f"blocking call failed ({type(exc).__name__})",
                    reason=reason,
                    details={"exception_type": type(exc).__name__},
                ),
            )
        with self._lock:
            self._tokens.pop(job.io_id, None)
            next_job = self._waiting.popleft() if self._waiting and not self._closed else None
            if next_job is not None:
                self._work.put(next_job)
            else:
                self._busy -= 1
            self._finish(result)

    def _finish(self, result: IoResult) -> None:
        self._done.put(result)
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"x")
