"""An inner actor for the node tests: exports one span from the host process it runs in (module level, so hosts
import it by name)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from adk_actors.observability import setup
from adk_actors.observability.spans import export_spans, span_start, stats
from adk_actors.observability.trace import TraceContext
from adk_actors.runtime.server import CallCtx, GenServer


@dataclass(frozen=True, slots=True, kw_only=True)
class EmitSpan:
    name: str
    parent: TraceContext


class SpanEmitter(GenServer):
    """Accepts ``EmitSpan``: exports a child span of ``parent``, flushes, and answers with this process's pid,
    the span id and the export counters."""

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, EmitSpan):
            record = span_start(request.name, request.parent).end()
            export_spans([record])
            flushed = setup.flush(10.0)
            return {"pid": os.getpid(), "span_id": record.span_id, "flushed": flushed, "stats": stats()}
        return super().handle_call(request, ctx)
