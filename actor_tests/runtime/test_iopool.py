"""The I/O pool on its own (no actors): results, progress values in order before the result, cancellation."""

from __future__ import annotations

import select
from typing import Any

from adk_actors.runtime.iopool import IOPool, IoResult


def _collect(pool: IOPool, io_id: int, timeout: float = 10.0) -> list[IoResult]:
    """Drain until the final (non-progress) result of ``io_id`` arrived; wait on the pool's pipe, never sleep."""
    out: list[IoResult] = []
    while not any(r.io_id == io_id and not r.progress for r in out):
        ready, _, _ = select.select([pool.read_fd], [], [], timeout)
        assert ready, "the pool never signalled its pipe"
        out.extend(pool.drain())
    return out


def _reporting(token: Any, n: int) -> str:
    for i in range(n):
        token.report(i)
    return "done"


def _cancellable(token: Any) -> str:
    token.report("started")
    token.wait(30)
    token.raise_if_cancelled()
    return "not cancelled"


def test_progress_values_arrive_in_order_before_the_result() -> None:
    pool = IOPool(2)
    try:
        pool.submit(1, _reporting, 50)
        results = _collect(pool, 1)
        assert [r.value for r in results if r.progress] == list(range(50))
        assert results[-1] == IoResult(1, "done", None)
    finally:
        pool.close()


def test_a_cancelled_call_reports_then_fails_cancelled() -> None:
    pool = IOPool(1)
    try:
        pool.submit(7, _cancellable)
        ready, _, _ = select.select([pool.read_fd], [], [], 10)
        assert ready
        first = pool.drain()
        assert first[0].progress and first[0].value == "started"
        pool.cancel(7)
        final = [r for r in _collect(pool, 7) if not r.progress]
        assert final[0].error is not None and final[0].error.reason == "cancelled"
    finally:
        pool.close()
