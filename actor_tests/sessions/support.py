"""Helpers shared by the session tests, importable by child processes (spawn) too."""

from __future__ import annotations

import multiprocessing.synchronize
from typing import Any

from adk_actors.events import Event, EventActions
from adk_actors.sessions import SessionRef


def make_event(
    author: str = "user",
    *,
    delta: dict[str, Any] | None = None,
    partial: bool = False,
    is_final: bool = False,
    invocation_id: str = "inv-1",
    text: str | None = "hello",
    timestamp: float | None = None,
    event_id: str | None = None,
) -> Event:
    """A small event for tests."""
    return Event.new(
        invocation_id=invocation_id,
        author=author,
        content=text,
        partial=partial,
        is_final=is_final,
        actions=EventActions(state_delta=dict(delta or {})),
        timestamp=timestamp,
        id=event_id,
    )


START_TIMEOUT_S = 60.0
"""How long a worker waits for its start signal before giving up (a non-zero exit fails the test)."""


def append_worker(
    service: Any,
    ref: SessionRef,
    worker: int,
    count: int,
    start: multiprocessing.synchronize.Event,
    timeout: float = START_TIMEOUT_S,
) -> None:
    """Append ``count`` events (each with its own state key) once ``start`` is set.

    Raises:
        TimeoutError: ``start`` was not set within ``timeout`` seconds (the process then exits non-zero).
    """
    if not start.wait(timeout):
        service.close()
        raise TimeoutError(f"worker {worker}: no start signal within {timeout}s")
    for i in range(count):
        service.add_event(ref, make_event(f"w{worker}", delta={f"w{worker}_{i}": i}, event_id=f"w{worker}-{i}"))
    service.close()


def endless_writer(service: Any, ref: SessionRef, ready: multiprocessing.synchronize.Event, after: int) -> None:
    """Append events with user-, app- and session-scoped deltas forever; set ``ready`` after ``after`` appends."""
    i = 0
    while True:
        service.add_event(
            ref, make_event("writer", delta={f"k{i}": i, f"user:k{i}": i, f"app:k{i}": i}, event_id=f"e{i}")
        )
        i += 1
        if i == after:
            ready.set()


def close_only(service: Any) -> None:
    """Close an inherited service without using it (must not touch the parent's connections)."""
    service.close()
