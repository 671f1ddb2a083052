"""Run bodies for tests and examples: scripted events, a blocking fetch, a worker job.

A run body is a picklable object with ``start(run)`` and optional ``on_timer(run, message)`` / ``cancel(run,
reason)``; it works only through the :class:`~adk_actors.runs.actor.RunContext` and never blocks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError
from adk_actors.runs.actor import RunContext

__all__ = ["FetchBody", "JobBody", "ScriptedBody"]


@dataclass(frozen=True, slots=True)
class ScriptedBody:
    """Emit ``events`` one every ``interval_s`` seconds, then complete with ``output`` (or fail with ``fail``)."""

    events: tuple[Any, ...] = ()
    interval_s: float = 0.0
    output: Any = "done"
    fail: str = ""

    def start(self, run: RunContext) -> None:
        run.start_timer(self.interval_s, 0)

    def on_timer(self, run: RunContext, index: Any) -> None:
        if index < len(self.events):
            run.emit(self.events[index])
            run.start_timer(self.interval_s, index + 1)
        elif self.fail:
            run.fail(self.fail)
        else:
            run.complete(self.output)


def _get(token: Any, url: str) -> int:
    from adk_actors.runtime.httpcancel import cancellable_session

    with cancellable_session() as session:
        return session.get(url, timeout=60).status_code


@dataclass
class FetchBody:
    """GET ``url`` on the host's I/O threads; a cancel of the run shuts the request's socket down."""

    url: str
    timeout_s: float = 30.0
    io_id: int = 0

    def start(self, run: RunContext) -> None:
        run.emit({"fetching": True})
        self.io_id = run.io_call(
            _get, (self.url,), time.monotonic() + self.timeout_s, lambda value, error: self._done(run, value, error)
        )

    def _done(self, run: RunContext, value: Any, error: AdkError | None) -> None:
        if run.done:
            return
        if error is not None:
            run.fail(error.reason)
        else:
            run.complete({"status": value})

    def cancel(self, run: RunContext, reason: str) -> None:
        run.cancel_io(self.io_id)


@dataclass
class JobBody:
    """Run ``fn(*args)`` in the worker pool and complete with its result."""

    fn: Any
    args: tuple[Any, ...] = ()
    timeout_s: float = 30.0

    def start(self, run: RunContext) -> None:
        run.run_job(
            self.fn,
            self.args,
            time.monotonic() + self.timeout_s,
            lambda value, error: run.fail(error.reason) if error else run.complete(value),
        )
