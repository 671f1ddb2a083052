"""The blocking calls an agent's turn makes, run on the host's I/O threads (each takes the cancel token first).

:func:`generate` and :func:`stream_model` call the model provider; :func:`session_calls` runs session-service
calls in order; :func:`load_conversation` / :func:`save_conversation` keep an agent's compatibility conversation.
The agent actor submits them for the turn's :mod:`effects <adk_actors.agents.turn.effects>`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from adk_actors.agents.spec import LEGACY_APP
from adk_actors.errors import AdkError, BudgetExceeded, SessionNotFound
from adk_actors.models import ModelResponse, generate_response, stream_content
from adk_actors.models import stream as stream_text
from adk_actors.models.gemini.config import DEFAULT_MODEL
from adk_actors.models.outbound import TRACEPARENT
from adk_actors.observability import semconv
from adk_actors.observability.spans import enabled, export_spans, span_start
from adk_actors.observability.trace import parse_traceparent
from adk_actors.runtime.threadtimers import thread_timers
from adk_actors.sessions.messages import SessionOp

__all__ = ["Batcher", "generate", "load_conversation", "save_conversation", "session_calls", "stream_model"]

_BATCH_DELTAS = 32
_BATCH_SECONDS = 0.05


def generate(
    token: Any,
    config: dict[str, Any],
    history: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    trace: str = "",
    span: bool = False,
) -> ModelResponse:
    """One provider call; with ``span``, in its model-call span under ``trace`` (the turn's span)."""
    return _traced(trace, span, config, False, lambda: generate_response(config, history, tools, cancel=token))


def _traced(
    trace: str, span_wanted: bool, config: dict[str, Any], streaming: bool, call: Callable[[], ModelResponse]
) -> ModelResponse:
    """Run a provider call inside a ``chat {model}`` span (GenAI attributes, token usage, no content) whose
    ``traceparent`` the HTTP request carries; the span goes to this process's exporter when the call ends. Without
    a span (the turn records none), the request still carries ``trace``."""
    parent = _parent(trace)
    if parent is None:
        return call()
    if not span_wanted or not enabled():
        marker = TRACEPARENT.set(parent.traceparent)
        try:
            return call()
        finally:
            TRACEPARENT.reset(marker)
    model = config.get("model") or DEFAULT_MODEL
    name, attributes = semconv.model_call(_provider(config), str(model), streaming=streaming)
    span = span_start(name, parent, attributes, "client")
    marker = TRACEPARENT.set(span.context.traceparent)
    try:
        response = call()
    except AdkError as err:
        export_spans([span.end(status="error", error_type=err.reason[:64])])
        raise
    except BaseException as exc:
        export_spans([span.end(status="error", error_type=type(exc).__name__)])
        raise
    finally:
        TRACEPARENT.reset(marker)
    usage = response.usage or {}
    _, measured = semconv.model_call(
        _provider(config),
        str(model),
        streaming=streaming,
        input_tokens=usage.get("prompt_token_count"),
        output_tokens=usage.get("candidates_token_count"),
        finish_reason=response.finish_reason,
    )
    export_spans([span.end(status="ok", **measured)])
    return response


def _provider(config: dict[str, Any]) -> str:
    provider = config.get("provider", "gemini")
    return provider if isinstance(provider, str) else "custom"


def _parent(trace: str) -> Any:
    if not trace:
        return None
    try:
        return parse_traceparent(trace)
    except AdkError:
        return None


def session_calls(token: Any, service: Any, ops: tuple[SessionOp, ...]) -> list[Any]:
    return [getattr(service, op.method)(*op.args, **op.kwargs) for op in ops]


def load_conversation(token: Any, service: Any, agent: str, key: str) -> list[Any]:
    """A saved compatibility conversation; nothing saved yet is an empty history."""
    try:
        return list(service.load_conversation(LEGACY_APP, agent, key))
    except SessionNotFound:
        return []


def save_conversation(token: Any, service: Any, agent: str, key: str, history: list[Any]) -> None:
    service.save_conversation(LEGACY_APP, agent, key, history)


class Batcher:
    """Stream deltas grouped into batches (>= 32 deltas or 50 ms): one batch is one partial event.

    A batch is flushed by the delta that completes it or, when the model pauses, by a timer 50 ms after the batch's
    first delta (on the process's timer thread), so a partial never waits for the next chunk."""

    def __init__(self, token: Any, mode: str, max_bytes: int) -> None:
        self.token, self.mode, self.max_bytes = token, mode, max_bytes
        self.parts: list[dict[str, Any]] = []
        self.count = 0
        self.total = 0
        self.first = 0.0
        self.lock = threading.Lock()
        self.timer: int | None = None
        self.grounding: dict[str, Any] | None = None
        """The grounding envelope a frame of the current batch brought (accumulated over the stream so far)."""
        self.reported: dict[str, Any] | None = None

    def text(self, delta: str) -> None:
        self._add({"type": "text", "text": delta}, len(delta.encode("utf-8")))

    def frame(self, frame: Any) -> None:
        parts = [p for p in frame.content.get("parts", []) if p.get("type") != "function_call"]
        if frame.provider_metadata is not None and frame.provider_metadata != self.reported:
            with self.lock:  # rides on the batch it arrived with (or the next one that has parts)
                self.grounding = frame.provider_metadata
        if parts:
            self._add_many(parts, len(json.dumps(parts).encode("utf-8")))

    def _add(self, part: dict[str, Any], size: int) -> None:
        self._add_many([part], size)

    def _add_many(self, parts: list[dict[str, Any]], size: int) -> None:
        self.total += size
        if self.total > self.max_bytes:
            raise BudgetExceeded(
                "the model's streamed output passed max_stream_output_bytes",
                reason="max_stream_output_bytes",
                details={"max": self.max_bytes},
            )
        with self.lock:
            if not self.parts:
                self.first = time.monotonic()
                self.timer = thread_timers.add(_BATCH_SECONDS, self._flush_due)
            for part in parts:
                last = self.parts[-1] if self.parts else None
                if (
                    last is not None
                    and part.get("type") == "text"
                    and last.get("type") == "text"
                    and set(part) == {"type", "text"}
                    and set(last) == {"type", "text"}
                ):
                    last["text"] += part["text"]
                else:
                    self.parts.append(dict(part))
            self.count += 1
            if self.count >= _BATCH_DELTAS or time.monotonic() - self.first >= _BATCH_SECONDS:
                self._flush()

    def _flush_due(self) -> None:
        with self.lock:
            self.timer = None
            self._flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if self.timer is not None:
            thread_timers.cancel(self.timer)
            self.timer = None
        if self.parts:
            self.token.report(({"schema_version": 1, "parts": self.parts}, self.grounding))
            if self.grounding is not None:
                self.reported, self.grounding = self.grounding, None
            self.parts, self.count = [], 0


def stream_model(
    token: Any,
    config: dict[str, Any],
    history: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    mode: str,
    max_bytes: int,
    trace: str = "",
    span: bool = False,
) -> ModelResponse:
    """One streamed provider call (batches reported on ``token``), in its model-call span as :func:`generate`."""
    return _traced(trace, span, config, True, lambda: _stream(token, config, history, tools, mode, max_bytes))


def _stream(
    token: Any,
    config: dict[str, Any],
    history: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    mode: str,
    max_bytes: int,
) -> ModelResponse:
    batcher = Batcher(token, mode, max_bytes)
    try:
        if mode == "text":
            response = stream_text(config, history, tools, batcher.text, cancel=token)
        else:
            response = stream_content(config, history, tools, batcher.frame, cancel=token)
        batcher.flush()
    finally:
        with batcher.lock:  # a failed stream reports nothing more (its partial events end with the error)
            if batcher.timer is not None:
                thread_timers.cancel(batcher.timer)
                batcher.timer = None
            batcher.parts = []
    return response
