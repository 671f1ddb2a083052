"""``make bench`` part for context compaction (issue 23): one compaction pass over a large session.

The session holds ``Sizes.session_events`` stored events (finished question/answer invocations, every tenth with a
tool round trip) and the current invocation's user event, in each backend of ``Sizes.session_backends`` except
PostgreSQL (in-memory and a SQLite temp file). One pass is what the turn engine does around its compressor:
``get_session`` (the read whose version the checkpoint is written at),
:func:`~adk_actors.agents.context.plan_compaction` (selection under a 32 KiB history budget), ``compact_events``
(the checkpoint replaces the folded events in one transaction) and
:func:`~adk_actors.agents.context.history_from_events` over the compacted session (the rebuild). The compressor
itself is a constant in-process function: its cost is the model's or the user's, not the pass's.

Wall time per phase comes from one timed pass; the peak is Python's allocation peak (``tracemalloc``) over a second
pass on a fresh copy of the session, so tracing does not slow the timed one.

Run alone: ``python -m adk_actors.devtools.bench --only compaction``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["bench_compaction"]

_APP, _USER = "bench", "u"
_BUDGET = 32 * 1024
_SUMMARY = "A constant summary of the folded invocations."


def _events(n: int) -> list[Any]:
    from adk_actors.events import Event

    events: list[Any] = []
    i = 0
    while len(events) < n:
        inv = f"inv-{i:06d}"
        events.append(Event.new(invocation_id=inv, author="user", content=f"question {i} about the plan"))
        if i % 10 == 0 and len(events) + 3 <= n:
            call = {"type": "function_call", "name": "lookup", "args": {"item": i}, "id": f"c{i}"}
            reply = {"type": "function_response", "name": "lookup", "id": f"c{i}", "response": {"ok": True}}
            events.append(Event.new(invocation_id=inv, author="Bench", content={"schema_version": 1, "parts": [call]}))
            events.append(Event.new(invocation_id=inv, author="Bench", content={"schema_version": 1, "parts": [reply]}))
        if len(events) < n:
            events.append(Event.new(invocation_id=inv, author="Bench", content=f"answer {i}: noted", is_final=True))
        i += 1
    events.append(Event.new(invocation_id="current", author="user", content="and now?"))
    return events


@contextmanager
def _store(backend: str) -> Iterator[Any]:
    from adk_actors.sessions import InMemorySessionService, SqlSessionService

    if backend == "memory":
        yield InMemorySessionService()
        return
    tmp = Path(tempfile.mkdtemp(prefix="adk-bench-context-"))
    svc = SqlSessionService(f"sqlite:///{tmp / 'sessions.db'}").open()
    try:
        yield svc
    finally:
        svc.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _one_pass(svc: Any, session_id: str, policy: Any) -> dict[str, Any]:
    """One compaction pass; the seconds of each phase and what it folded."""
    from adk_actors.agents.context import COMPACTION, history_from_events, plan_compaction
    from adk_actors.events import Event, EventActions
    from adk_actors.sessions import SessionRef

    ref = SessionRef(app_name=_APP, user_id=_USER, session_id=session_id)
    t0 = time.perf_counter()
    stored = svc.get_session(ref)
    t1 = time.perf_counter()
    plan = plan_compaction(stored.events, stored.event_seqs, current_invocation_id="current", policy=policy)
    t2 = time.perf_counter()
    if plan is None:
        raise RuntimeError("the benchmark session has nothing to fold")
    record = {"type": COMPACTION, "through_seq": plan.through_seq, "folded_events": plan.folded_events}
    event = Event.new(
        invocation_id="checkpoint", author="Bench", content=_SUMMARY, actions=EventActions(context_effects=(record,))
    )
    svc.compact_events(ref, through_seq=plan.through_seq, compaction_event=event, expected_version=stored.version)
    t3 = time.perf_counter()
    after = svc.get_session(ref)
    _, stats = history_from_events(after.events, current_invocation_id="current", policy=policy)
    t4 = time.perf_counter()
    return {
        "read_s": t1 - t0,
        "select_s": t2 - t1,
        "write_s": t3 - t2,
        "rebuild_s": t4 - t3,
        "total_s": t4 - t0,
        "folded": plan.folded_events,
        "events_after": len(after.events),
        "history_bytes": stats["bytes"],
    }


def bench_compaction(ctx: Any) -> dict[str, Any]:
    """One compaction pass over a ``Sizes.session_events``-event session per backend (see the module docs)."""
    from adk_actors.agents.context import ContextPolicy

    n = ctx.sizes.session_events
    backends = [b for b in ctx.sizes.session_backends if b != "postgresql"]
    policy = ContextPolicy.from_config(
        {
            "max_bytes": _BUDGET,
            "overflow": "compress",
            "compressor": {"function": "json:dumps", "max_events": max(n, 1), "max_summary_bytes": 1024},
        }
    )
    events = _events(n)
    rows, data = [], {}
    for backend in backends:
        with _store(backend) as svc:
            svc.create_session(app_name=_APP, user_id=_USER, session_id="timed", events=events)
            svc.create_session(app_name=_APP, user_id=_USER, session_id="traced", events=events)
            res = _one_pass(svc, "timed", policy)
            tracemalloc.start()
            try:
                _one_pass(svc, "traced", policy)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        res["peak_mb"] = round(peak / 2**20, 1)
        data[backend] = res
        rows.append(
            [
                backend,
                len(events),
                res["folded"],
                round(res["read_s"] * 1000, 1),
                round(res["select_s"] * 1000, 1),
                round(res["write_s"] * 1000, 1),
                round(res["rebuild_s"] * 1000, 1),
                round(res["total_s"] * 1000, 1),
                res["peak_mb"],
            ]
        )
    return {
        "title": "Context compaction",
        "params": {"events": len(events), "max_bytes": _BUDGET},
        "columns": [
            "backend",
            "events",
            "folded",
            "read ms",
            "select ms",
            "checkpoint ms",
            "rebuild ms",
            "pass ms",
            "peak MB",
        ],
        "rows": rows,
        "notes": [
            f"One pass over {len(events):,} stored events (a {_BUDGET // 1024} KiB history budget): get_session, "
            "plan_compaction, compact_events at the version read, and the history rebuilt from the compacted "
            "session; the compressor is a constant in-process function. Peak: tracemalloc over a second pass."
        ],
        "data": data,
    }
