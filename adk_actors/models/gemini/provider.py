"""The Gemini provider: ``generateContent`` and ``streamGenerateContent?alt=sse`` over kept urllib3 connections.

Calls are plain blocking functions meant for an I/O thread; each accepts a
:class:`~adk_actors.models.cancel.CancelToken` that another thread may cancel at any time (the in-flight socket is
shut down and the call raises ``ProviderError(reason="cancelled")`` promptly, even while waiting for headers).
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import urllib3.exceptions
from urllib3 import BaseHTTPResponse

from adk_actors.content.canonical import check_json_safe
from adk_actors.errors import ContentError, ProviderError, ProviderHttpError, StreamError, ValidationError
from adk_actors.models.cancel import CancelToken
from adk_actors.models.gemini.config import GeminiConfig, parse_config, resolve_api_key, resolve_base_url
from adk_actors.models.gemini.http_errors import RETRYABLE_STATUSES, error_from_body, error_from_payload
from adk_actors.models.gemini.response import StreamAssembler, parse_response
from adk_actors.models.gemini.sse import SseDecoder
from adk_actors.models.gemini.transport import DEFAULT_HEADERS, CallGuard, release, send
from adk_actors.models.gemini.wire import build_request
from adk_actors.models.outbound import TRACEPARENT
from adk_actors.models.results import ModelResponse, StreamFrame, checked_frame
from adk_actors.secrets import Secret

__all__ = ["CAPABILITIES", "MAX_RESPONSE_BYTES", "GeminiProvider"]

CAPABILITIES: dict[str, Any] = {
    "streaming": True,
    "function_calling": True,
    "structured_output": True,
    "multimodal": True,
    "thinking": True,
    "safety_settings": True,
    "google_search_grounding": True,
    "builtin_tools": ["google_search"],
    "content_schema_version": 1,
    "live": False,
}
_READ_SIZE = 64 * 1024
_MAX_ERROR_BODY = 1024 * 1024
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""Most bytes read from one answer (a unary body, or a whole SSE stream) before anything is parsed. The content
limits cap inline data at 15 MiB (20 MiB as base64); the rest leaves room for text, calls and metadata. A larger
body cannot become content the agent may hold, so it is refused before it costs memory."""
_BACKOFF_BASE_S = 0.5


def _model_path(model: str) -> str:
    return model if model.startswith("tunedModels/") else f"models/{model}"


def _encode(body: dict[str, Any]) -> bytes:
    """The request body as strict, compact UTF-8 JSON (NaN/Infinity/NUL rejected like canonical JSON).

    Keys are *not* sorted: the model may follow the key order of a user's JSON schema (property order of
    structured output), so the wire body keeps the order it was built in. Stored JSON stays canonical.

    Raises:
        ContentError: reason ``invalid_json`` (NaN/Infinity, a NUL character, a non-JSON value); ``details["path"]``
            says where. Raised before any HTTP.
    """
    try:
        check_json_safe(body)
    except ValidationError as exc:
        raise ContentError(
            "the request holds a value that is not valid JSON (NaN, Infinity, NUL or an object)",
            reason="invalid_json",
            details=exc.details,
        ) from None
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _strict_json(text: str | bytes) -> Any:
    def reject(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(text, parse_constant=reject)
    except RecursionError:  # a hostile body nested past the parser's stack: malformed, not a crash
        raise ValueError("nesting") from None


class _Prepared:
    """Everything a call needs, computed (and validated) before any HTTP."""

    __slots__ = ("api_key", "base_url", "body", "cfg", "headers", "model_path")

    def __init__(self, config: Mapping[str, Any], history: Sequence[Any], tools: Sequence[Any]) -> None:
        self.cfg: GeminiConfig = parse_config(config)
        self.body = _encode(build_request(self.cfg, history, tools))
        self.api_key: Secret = resolve_api_key(self.cfg)
        self.base_url = resolve_base_url(self.cfg)
        self.model_path = f"/v1beta/{_model_path(self.cfg.model)}"
        self.headers = {**DEFAULT_HEADERS, "Content-Type": "application/json", "x-goog-api-key": self.api_key.reveal()}
        traceparent = TRACEPARENT.get()
        if traceparent:  # correlation for the provider side of the trace; never authorization
            self.headers["traceparent"] = traceparent

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.api_key.reveal(),)


def _retry_delay(err: ProviderHttpError, attempt: int, prepared: _Prepared) -> float | None:
    """Seconds to wait before the next attempt, or ``None`` when ``err`` must be surfaced."""
    policy = prepared.cfg.retry
    if attempt >= policy.max_attempts or err.status not in RETRYABLE_STATUSES:
        return None
    if any("PerDay" in q for q in err.details.get("quota_ids", ())):
        return None  # a daily quota does not clear within a retry window
    delay = err.details.get("retry_delay_s")
    if not isinstance(delay, int | float):
        delay = _BACKOFF_BASE_S * 2 ** (attempt - 1)
        return min(delay, policy.max_delay_s)
    return delay if delay <= policy.max_delay_s else None


def _wait(token: CancelToken | None, seconds: float) -> None:
    if token is None:
        threading.Event().wait(seconds)
        return
    if token.wait(seconds):
        token.raise_if_cancelled()


def _transport_error(guard: CallGuard, exc: BaseException, *, streaming: bool, started: bool) -> ProviderError:
    """Classify a transport exception; cancellation and deadline take precedence over what the socket saw."""
    try:
        guard.check()
    except ProviderError as err:
        return err
    cause = type(exc).__name__
    # urllib3's NewConnectionError (refused, unreachable, no such host) subclasses its ConnectTimeoutError.
    if isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError) and not isinstance(
        exc, urllib3.exceptions.NewConnectionError
    ):
        return ProviderError("the Gemini request timed out", reason="timeout", details={"cause": cause})
    if streaming and started:
        return StreamError("the SSE stream broke off", reason="truncated_stream", details={"cause": cause})
    return ProviderError("could not reach Gemini", reason="connection_error", details={"cause": cause})


_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def _too_large(limit: int) -> ProviderError:
    return ProviderError(
        "the Gemini answer is larger than any content the agent may hold",
        reason="response_too_large",
        details={"max_bytes": limit},
    )


def _chunks(resp: BaseHTTPResponse, guard: CallGuard, *, streaming: bool) -> Iterator[bytes]:
    """The body's pieces as they arrive, each read under the call's guard (its deadline and cancel token).

    Raises:
        ProviderError: ``timeout``/``cancelled``/``connection_error`` from the transport.
    """
    while True:
        try:
            chunk = resp.read1(_READ_SIZE, decode_content=True)
        except _TRANSPORT_ERRORS as exc:
            raise _transport_error(guard, exc, streaming=streaming, started=streaming) from None
        guard.check()
        if not chunk:
            return
        yield chunk


def _read_capped(resp: BaseHTTPResponse, guard: CallGuard, limit: int, *, truncate: bool) -> bytes:
    """The body, read in pieces under the call's guard, refused (or, for an error body, cut) past ``limit``.

    Raises:
        ProviderError: ``response_too_large``; ``timeout``/``cancelled``/``connection_error`` from the transport.
    """
    chunks: list[bytes] = []
    size = 0
    for chunk in _chunks(resp, guard, streaming=False):
        size += len(chunk)
        chunks.append(chunk)
        if size > limit:
            if truncate:
                return b"".join(chunks)[:limit]
            raise _too_large(limit)
    return b"".join(chunks)


class GeminiProvider:
    """The ``"gemini"`` model provider (stateless; safe to share between threads)."""

    name = "gemini"

    def capabilities(self) -> dict[str, Any]:
        """What this provider implements."""
        return json.loads(json.dumps(CAPABILITIES))

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Validate ``config`` strictly without sending anything (no API key needed).

        Raises:
            ConfigError: ``unknown_key``, ``invalid_value``, ``conflicting_keys``, ``duplicate_safety_category``.
        """
        parse_config(config)

    # -- one-shot ------------------------------------------------------------------------------------------------

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any] = (),
        *,
        cancel: CancelToken | None = None,
    ) -> ModelResponse:
        """One ``generateContent`` call, retried per the config's ``retry`` policy.

        Raises:
            ConfigError: invalid config or tool declarations (before any HTTP).
            ContentError: malformed history (before any HTTP).
            ProviderError: ``missing_api_key`` (before any HTTP), ``cancelled``, ``timeout``, ``connection_error``,
                ``prompt_blocked``, ``empty_response``, ``malformed_response``, metadata errors.
            ProviderHttpError: a non-2xx answer (``RateLimited`` for 429).
        """
        prepared = _Prepared(config, history, tools)
        attempt = 0
        while True:
            attempt += 1
            if cancel is not None:
                cancel.raise_if_cancelled()
            try:
                return self._generate_once(prepared, cancel)
            except ProviderHttpError as err:
                delay = _retry_delay(err, attempt, prepared)
                if delay is None:
                    raise
            _wait(cancel, delay)

    def _generate_once(self, prepared: _Prepared, cancel: CancelToken | None) -> ModelResponse:
        guard = CallGuard(cancel, prepared.cfg.request_timeout_s)
        with guard.active():
            try:
                resp = send(
                    "POST",
                    prepared.base_url,
                    f"{prepared.model_path}:generateContent",
                    body=prepared.body,
                    headers=prepared.headers,
                    timeout_s=prepared.cfg.request_timeout_s,
                )
            except _TRANSPORT_ERRORS as exc:
                raise _transport_error(guard, exc, streaming=False, started=False) from None
            try:
                status = resp.status
                content = _read_capped(
                    resp, guard, MAX_RESPONSE_BYTES if status == 200 else _MAX_ERROR_BODY, truncate=status != 200
                )
            finally:
                release(resp)
        if status != 200:
            raise error_from_body(status, content[:_MAX_ERROR_BODY], prepared.secrets)
        try:
            payload = _strict_json(content)
        except ValueError:
            raise ProviderError("the Gemini response is not JSON", reason="malformed_response") from None
        if isinstance(payload, Mapping) and "error" in payload:
            raise error_from_payload(status, payload, prepared.secrets)
        return parse_response(payload)

    # -- streaming -----------------------------------------------------------------------------------------------

    def stream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any],
        on_frame: Callable[[StreamFrame], None],
        *,
        cancel: CancelToken | None = None,
    ) -> ModelResponse:
        """``streamGenerateContent``: ``on_frame`` once per decoded SSE frame; returns the assembled answer.

        The final frame carries the combined grounding envelope; no extra buffered frame is delivered at the end.
        A retry (per ``retry``) happens only while no frame has been delivered.

        Raises:
            StreamError: ``malformed_sse``, ``truncated_stream``, ``empty_stream``.
            ProviderHttpError: a non-2xx answer, or an in-stream error event (``details["midstream"]``).
            ProviderError, ConfigError, ContentError: as :meth:`generate`; whatever ``on_frame`` raises propagates.
        """
        prepared = _Prepared(config, history, tools)
        attempt = 0
        while True:
            attempt += 1
            if cancel is not None:
                cancel.raise_if_cancelled()
            delivered = [0]
            try:
                return self._stream_once(prepared, on_frame, cancel, delivered)
            except ProviderHttpError as err:
                delay = None if delivered[0] else _retry_delay(err, attempt, prepared)
                if delay is None:
                    raise
            _wait(cancel, delay)

    def _stream_once(
        self,
        prepared: _Prepared,
        on_frame: Callable[[StreamFrame], None],
        cancel: CancelToken | None,
        delivered: list[int],
    ) -> ModelResponse:
        guard = CallGuard(cancel, prepared.cfg.request_timeout_s)
        with guard.active():
            try:
                resp = send(
                    "POST",
                    prepared.base_url,
                    f"{prepared.model_path}:streamGenerateContent?alt=sse",
                    body=prepared.body,
                    headers=prepared.headers,
                    timeout_s=prepared.cfg.request_timeout_s,
                )
            except _TRANSPORT_ERRORS as exc:
                raise _transport_error(guard, exc, streaming=True, started=False) from None
            try:
                return self._read_stream(prepared, guard, resp, on_frame, delivered)
            finally:
                release(resp)

    def _read_stream(
        self,
        prepared: _Prepared,
        guard: CallGuard,
        resp: BaseHTTPResponse,
        on_frame: Callable[[StreamFrame], None],
        delivered: list[int],
    ) -> ModelResponse:
        if resp.status != 200:
            try:
                body = resp.read(_MAX_ERROR_BODY, decode_content=True)
            except _TRANSPORT_ERRORS as exc:
                raise _transport_error(guard, exc, streaming=True, started=False) from None
            raise error_from_body(resp.status, body, prepared.secrets)
        content_type = resp.headers.get("Content-Type", "")
        if not content_type.lower().startswith("text/event-stream"):
            raise StreamError(
                "the stream answer is not text/event-stream",
                reason="malformed_sse",
                details={"content_type": content_type[:64]},
            )
        decoder, assembler = SseDecoder(), StreamAssembler()

        def handle(events: list[str]) -> None:
            for data in events:
                try:
                    payload = _strict_json(data)
                except ValueError:
                    raise StreamError(
                        "an SSE event is not valid JSON", reason="malformed_sse", details={"frame": assembler.frames}
                    ) from None
                if isinstance(payload, Mapping) and "error" in payload:
                    raise error_from_payload(200, payload, prepared.secrets, midstream=True)
                frame = checked_frame(assembler.feed(payload))
                delivered[0] += 1
                on_frame(frame)

        received = 0
        for chunk in _chunks(resp, guard, streaming=True):
            received += len(chunk)
            if received > MAX_RESPONSE_BYTES:
                raise _too_large(MAX_RESPONSE_BYTES)
            handle(decoder.feed(chunk))
        handle(decoder.close())
        if decoder.pending:
            raise StreamError(
                "the SSE stream ended inside an event", reason="truncated_stream", details={"frames": assembler.frames}
            )
        if assembler.frames == 0:
            raise StreamError("the SSE stream ended without any event", reason="empty_stream")
        if not assembler.finished:
            raise StreamError(
                "the SSE stream ended before a finish reason",
                reason="truncated_stream",
                details={"frames": assembler.frames},
            )
        return assembler.result()

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any],
        on_delta: Callable[[str], None],
        *,
        cancel: CancelToken | None = None,
    ) -> ModelResponse:
        """Text streaming: ``on_delta`` once per non-empty visible text delta (thought summaries never included).

        Function calls are control data: they are returned in the assembled answer, not streamed as text.

        Raises:
            ProviderError: ``unsupported_text_stream_part`` (``details["type"]``) when a frame holds media, rather
                than dropping it; otherwise as :meth:`stream_content`.
        """

        def on_frame(frame: StreamFrame) -> None:
            for part in frame.content["parts"]:
                if part["type"] not in ("text", "function_call"):
                    raise ProviderError(
                        "the text stream cannot carry a non-text part; use stream_content",
                        reason="unsupported_text_stream_part",
                        details={"type": part["type"]},
                    )
            if frame.text:
                on_delta(frame.text)

        return self.stream_content(config, history, tools, on_frame, cancel=cancel)
