"""Blocking facade calls from the edge's event loop, without blocking it.

The facade (``adk_actors.runs.start``, ``status``, ``subscribe``, session services) asks actors synchronously. An
edge handler awaits :meth:`Offload.call`, which runs the call on a bounded thread pool; more than ``max_pending``
calls outstanding (queued or running) is refused at once with ``edge_busy`` (503) instead of queueing without
bound. A blocking subscription is consumed with :meth:`Offload.iterate`: the iterator is created, advanced and
closed on one dedicated thread (a subscription keeps a per-thread endpoint and may block for long, so it must not
hold a pool worker), at most one item ahead of the consumer, and closed as soon as the async consumer stops.

Both copy the caller's ``contextvars`` into the thread, so trace context set by the handler reaches the facade.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

from adk_actors.errors import ConfigError, RuntimeFailure
from adk_actors.logs import log_crash

__all__ = ["BlockingIterator", "Offload"]

T = TypeVar("T")

_END = object()


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _check_count(value: Any, key: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ConfigError(
            f"{key} must be an integer in [1, {high}]",
            reason="invalid_value",
            details={"key": key, "minimum": 1, "maximum": high},
        )
    return value


class Offload:
    """A bounded thread pool for blocking facade calls, and the bridge for blocking iterators.

    Args:
        max_workers: threads running calls at once.
        max_pending: calls outstanding (running or queued) before :meth:`call` refuses with ``edge_busy``.
        max_iterators: iterators open at once before :meth:`iterate` refuses with ``edge_busy``.

    Raises:
        ConfigError: reason ``invalid_value`` for a bound outside ``[1, 10000]`` (``max_workers``: ``[1, 256]``).
    """

    def __init__(self, max_workers: int = 8, max_pending: int = 256, *, max_iterators: int = 256) -> None:
        self.max_workers = _check_count(max_workers, "max_workers", 256)
        self.max_pending = _check_count(max_pending, "max_pending", 10_000)
        self.max_iterators = _check_count(max_iterators, "max_iterators", 10_000)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="adk-edge")
        self._lock = threading.Lock()
        self._pending = 0
        self._iterators: set[BlockingIterator[Any]] = set()
        self._closed = False

    def stats(self) -> dict[str, int]:
        """``{"pending", "iterators"}``: calls outstanding and iterators open now."""
        with self._lock:
            return {"pending": self._pending, "iterators": len(self._iterators)}

    def _refuse(self, reason: str, **details: Any) -> RuntimeFailure:
        message = "the edge is shutting down" if reason == "edge_closed" else "the edge is busy; retry later"
        return RuntimeFailure(message, reason=reason, details=details)

    def _release(self, _future: object = None) -> None:
        with self._lock:
            self._pending -= 1

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the pool; the event loop keeps serving meanwhile.

        The call's exception is raised here. Cancelling the awaiting task cancels a call still queued; one already
        running finishes in its thread (a facade ask cannot be interrupted) and still counts until it does.

        Raises:
            RuntimeFailure: reason ``edge_busy`` (details: ``max_pending``) when ``max_pending`` calls are
                outstanding, ``edge_closed`` after :meth:`close`; both answer 503.
        """
        with self._lock:
            if self._closed:
                raise self._refuse("edge_closed")
            if self._pending >= self.max_pending:
                raise self._refuse("edge_busy", max_pending=self.max_pending)
            self._pending += 1
        context = contextvars.copy_context()
        try:
            future = self._pool.submit(context.run, functools.partial(fn, *args, **kwargs))
        except RuntimeError:  # the pool shut down between the check and the submit
            self._release()
            raise self._refuse("edge_closed") from None
        future.add_done_callback(self._release)
        return await asyncio.wrap_future(future)

    def iterate(self, factory: Callable[..., Iterator[T]], /, *args: Any, **kwargs: Any) -> BlockingIterator[T]:
        """An async iterator over ``factory(*args, **kwargs)``, a blocking iterator run on a thread of its own.

        Use it as ``async with offload.iterate(runs.subscribe, run_id) as items: async for item in items: ...``
        (or call :meth:`BlockingIterator.aclose`). Errors of ``factory`` or of the iterator are raised by the next
        ``__anext__``. Must be called from a running event loop.

        Raises:
            RuntimeFailure: reason ``edge_busy`` (details: ``max_iterators``) or ``edge_closed``, as :meth:`call`.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise self._refuse("edge_closed")
            if len(self._iterators) >= self.max_iterators:
                raise self._refuse("edge_busy", max_iterators=self.max_iterators)
            iterator: BlockingIterator[T] = BlockingIterator(self, loop, functools.partial(factory, *args, **kwargs))
            self._iterators.add(iterator)
        iterator._start()
        return iterator

    def _forget(self, iterator: BlockingIterator[Any]) -> None:
        with self._lock:
            self._iterators.discard(iterator)

    def close(self, timeout: float = 5.0) -> None:
        """Refuse new work, cancel queued calls, stop every iterator, and wait up to ``timeout`` seconds for the
        threads (a call or ``next()`` already blocking finishes first). Call it from outside the event loop, or at
        shutdown: it blocks."""
        with self._lock:
            self._closed = True
            iterators = list(self._iterators)
        for iterator in iterators:
            iterator._request_stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for iterator in iterators:
            iterator._thread.join(timeout)


class BlockingIterator(AsyncIterator[T], Generic[T]):
    """The async side of :meth:`Offload.iterate` (see there). The blocking iterator lives on :attr:`_thread`, which
    creates it, calls ``next()`` only when the consumer asks for an item, and closes it when told to stop."""

    def __init__(self, owner: Offload, loop: asyncio.AbstractEventLoop, factory: Callable[[], Iterator[T]]) -> None:
        self._owner = owner
        self._loop = loop
        self._factory = factory
        self._context = contextvars.copy_context()
        self._demand = threading.Semaphore(0)
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._waiter: asyncio.Future[Any] | None = None
        self._done = False
        self._thread = threading.Thread(target=self._run, name="adk-edge-iterate", daemon=True)

    @property
    def finished(self) -> bool:
        """Whether the thread has closed the blocking iterator and ended."""
        return self._finished.is_set()

    def _start(self) -> None:
        self._thread.start()

    def _post(self, value: Any) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._deliver, value)
            return True
        except RuntimeError:  # the loop is closed: nobody is listening any more
            return False

    def _deliver(self, value: Any) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(value)

    def _run(self) -> None:
        iterator: Iterator[T] | None = None
        try:
            try:
                iterator = self._context.run(self._factory)
            except Exception as exc:
                self._demand.acquire()
                if not self._stop.is_set():
                    self._post(_Failure(exc))
                return
            while True:
                self._demand.acquire()
                if self._stop.is_set():
                    return
                try:
                    item = self._context.run(next, iterator)
                except StopIteration:
                    self._post(_END)
                    return
                except Exception as exc:
                    self._post(_Failure(exc))
                    return
                if self._stop.is_set() or not self._post(item):
                    return
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    self._context.run(close)
                except Exception as exc:  # closing must not lose the thread's cleanup
                    log_crash("adk_actors.web", "edge_iterator_close_failed", exc)
            self._owner._forget(self)
            self._finished.set()

    def _request_stop(self) -> None:
        self._done = True
        self._stop.set()
        self._demand.release()

    def __aiter__(self) -> BlockingIterator[T]:
        return self

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        waiter = self._loop.create_future()
        self._waiter = waiter
        self._demand.release()
        try:
            result = await waiter
        except asyncio.CancelledError:
            self._request_stop()
            raise
        if result is _END:
            self._done = True
            raise StopAsyncIteration
        if isinstance(result, _Failure):
            self._done = True
            raise result.exc
        return result

    async def aclose(self) -> None:
        """Stop: the thread closes the blocking iterator as soon as its current ``next()`` (if any) returns."""
        self._request_stop()

    async def __aenter__(self) -> BlockingIterator[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
