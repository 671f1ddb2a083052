"""Benchmark actors: time hops from *inside* the actor system (no facade in the measured path).

:class:`BenchLoop` runs ``n`` sequential asynchronous operations (an actor→actor call, or a job in the worker pool
or inline) and answers with the per-operation wall times in seconds, measured with ``time.perf_counter()`` in the
process it lives in. Started as an inner (tier-2) actor it measures hops from a host; the same class also runs at
tier 1. Used by ``python -m adk_actors.devtools.bench`` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["BenchLoop", "CallLoop", "JobLoop"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallLoop:
    """``n`` sequential ``call(target, request)``; each waits for the previous reply."""

    target: Any
    request: Any
    n: int
    timeout: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobLoop:
    """``n`` sequential ``run_job(fn)`` (in the worker pool, or inline in this process)."""

    fn: Any
    n: int
    inline: bool = False
    timeout: float = 10.0


class BenchLoop(GenServer):
    """See the module docstring. Answers ``CallLoop`` / ``JobLoop`` with ``list[float]`` (seconds per op)."""

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, CallLoop):
            self._loop(
                ctx,
                request.n,
                lambda done: self.call(request.target, request.request, time.monotonic() + request.timeout, done),
            )
            return DEFERRED
        if isinstance(request, JobLoop):
            self._loop(
                ctx,
                request.n,
                lambda done: self.run_job(
                    request.fn, (), time.monotonic() + request.timeout, done, inline=request.inline
                ),
            )
            return DEFERRED
        return super().handle_call(request, ctx)

    def _loop(self, ctx: CallCtx, n: int, issue: Callable[[Callable[[Any, AdkError | None], None]], Any]) -> None:
        samples: list[float] = []
        started = [0.0]

        def step() -> None:
            started[0] = time.perf_counter()
            issue(done)

        def done(value: Any, error: AdkError | None) -> None:
            samples.append(time.perf_counter() - started[0])
            if error is not None:
                self.fail(ctx, error)
            elif len(samples) >= n:
                self.reply(ctx, samples)
            else:
                step()

        step()

    def status(self) -> dict[str, Any]:
        return {"kind": "bench_loop"}
