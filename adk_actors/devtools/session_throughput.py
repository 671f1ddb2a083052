"""Session-store throughput: ``run(backend, url, n)`` measures ``add_event`` and ``get_session``.

Called by ``make bench``; never asserted by tests. Works on a fresh session in a fresh app name, and deletes it
afterwards, so it can run against a shared database.

The ``"memory"`` row measures the bare :class:`~adk_actors.sessions.memory.InMemorySessionService` class in the
calling process; ``run("actor", handle=...)`` measures what a node's code actually pays: the
:class:`~adk_actors.sessions.client.ActorSessionService` client, every call an ask to the node's ``sessions`` actor.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from adk_actors.errors import ConfigError
from adk_actors.events import Event, EventActions
from adk_actors.sessions.base import BaseSessionService
from adk_actors.sessions.factory import session_service_from_settings
from adk_actors.sessions.model import SessionRef

__all__ = ["run"]


def _service(backend: str, url: str, data_dir: str, handle: Any, timeout: float | None) -> BaseSessionService:
    if backend != "actor":
        return session_service_from_settings(backend, url, data_dir)
    if handle is None:
        raise ConfigError(
            "the actor session bench needs a running node's handle", reason="invalid_value", details={"key": "handle"}
        )
    from adk_actors.sessions.client import ActorSessionService  # the runtime is only needed for this variant

    return ActorSessionService(timeout=timeout, system=handle)


def run(
    backend: str,
    url: str = "",
    n: int = 10_000,
    *,
    data_dir: str = "var/adk",
    reads: int | None = None,
    handle: Any = None,
    timeout: float | None = 60.0,
) -> dict[str, Any]:
    """Append ``n`` events to one session, then read it back ``reads`` times (default ``max(1, n // 100)``).

    Args:
        backend: ``"memory"`` (the bare class, in this process), ``"sql"``, or ``"actor"`` (the
            ``ActorSessionService`` client of the running node ``handle``, whose ``session_backend`` is memory).
        url: SQLAlchemy URL for ``"sql"`` (empty: SQLite under ``data_dir``).
        n: Number of events to append.
        data_dir: Data directory for the default SQLite file.
        reads: Number of full ``get_session`` reads.
        handle: The running node (``adk_actors.start(...)``'s ``ActorSystemHandle``); only for ``"actor"``.
        timeout: Per-ask timeout in seconds for ``"actor"``.

    Returns:
        A JSON-safe dict: backend, events, ``add_event_per_s``, ``add_event_p50_ms``, ``add_event_p99_ms``,
        ``get_session_per_s``, ``events_read_per_s``.

    Raises:
        ConfigError: unknown backend, or ``"actor"`` without a handle.
        StorageError: the store cannot be opened.
        RuntimeFailure: (``"actor"``) the node's ``sessions`` actor cannot be reached.
    """
    service: BaseSessionService = _service(backend, url, data_dir, handle, timeout)
    ref = SessionRef(app_name=f"bench-{uuid.uuid4().hex[:8]}", user_id="bench", session_id="bench")
    reads = max(1, n // 100) if reads is None else reads
    try:
        service.create_session(app_name=ref.app_name, user_id=ref.user_id, session_id=ref.session_id)
        events = [
            Event.new(
                invocation_id=f"inv-{i // 10}",
                author="user" if i % 2 == 0 else "agent",
                content=f"message {i}",
                actions=EventActions(state_delta={"counter": i}),
            )
            for i in range(n)
        ]
        latencies: list[float] = []
        started = time.perf_counter()
        for event in events:
            t0 = time.perf_counter()
            service.add_event(ref, event)
            latencies.append(time.perf_counter() - t0)
        append_s = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(reads):
            service.get_session(ref)
        read_s = time.perf_counter() - started
        latencies.sort()
        return {
            "backend": backend if backend in ("memory", "actor") else getattr(service, "dialect", backend),
            "events": n,
            "add_event_per_s": round(n / append_s, 1) if append_s else None,
            "add_event_p50_ms": round(latencies[len(latencies) // 2] * 1000, 3) if latencies else None,
            "add_event_p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3) if latencies else None,
            "get_session_reads": reads,
            "get_session_per_s": round(reads / read_s, 2) if read_s else None,
            "events_read_per_s": round(reads * n / read_s, 1) if read_s else None,
        }
    finally:
        service.delete_session(ref)
        service.close()
