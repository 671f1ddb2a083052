"""A real OTLP/HTTP trace receiver on 127.0.0.1 for tests: decodes ``ExportTraceServiceRequest`` protobuf bodies
with opentelemetry-proto and answers 200.

Anything malformed — another method or path, a content type other than ``application/x-protobuf``, a body that
does not decode, a span whose ids have the wrong length, an end before its start, an attribute without a value —
is answered 400 and recorded in :attr:`OtlpReceiver.failures`; the ``receiver`` fixture fails the test when that
list is not empty at the end.

``gate``: while set to a ``threading.Event``, each request waits on it (up to ``hold_s``) before answering — a
slow collector. The server thread is joined on :meth:`OtlpReceiver.close`.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["OtlpReceiver", "ReceivedSpan"]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        raise ValueError("attribute without a value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    if kind in ("kvlist_value", "bytes_value"):
        raise ValueError(f"unexpected attribute type {kind}")
    return getattr(value, kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedSpan:
    """One decoded span, ids as lowercase hex (``parent_span_id`` ``None`` for a root)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    kind: int
    status_code: int
    status_message: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope_name: str
    scope_schema_url: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: failures are recorded, not printed

    def do_GET(self) -> None:
        self._refuse("GET is not OTLP")

    def do_POST(self) -> None:
        receiver = self.server.receiver
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        gate = receiver.gate
        if gate is not None:
            gate.wait(receiver.hold_s)
        if self.path != "/v1/traces":
            return self._refuse(f"path {self.path}")
        if self.headers.get("Content-Type") != "application/x-protobuf":
            return self._refuse(f"content type {self.headers.get('Content-Type')}")
        try:
            encoding = self.headers.get("Content-Encoding")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans = receiver.decode(request)
        except Exception as exc:
            return self._refuse(f"malformed body: {type(exc).__name__}: {exc}")
        receiver.add(spans, dict(self.headers.items()))
        payload = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _refuse(self, why: str) -> None:
        self.server.receiver.failures.append(why)
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    # Request threads are tracked and joined by server_close(): none outlives the receiver.
    daemon_threads = False
    block_on_close = True
    receiver: OtlpReceiver


class OtlpReceiver:
    """See the module docstring. Use as a context manager (or call :meth:`close`)."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.headers: list[dict[str, str]] = []
        self.failures: list[str] = []
        self.gate: threading.Event | None = None
        self.hold_s = 5.0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.receiver = self
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    def decode(self, request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
        out: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if len(span.trace_id) != 16 or not any(span.trace_id):
                        raise ValueError("trace id is not 16 non-zero bytes")
                    if len(span.span_id) != 8 or not any(span.span_id):
                        raise ValueError("span id is not 8 non-zero bytes")
                    if span.parent_span_id and len(span.parent_span_id) != 8:
                        raise ValueError("parent span id is not 8 bytes")
                    if not span.name or span.end_time_unix_nano < span.start_time_unix_nano:
                        raise ValueError("no name, or the span ends before it starts")
                    out.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex() or None,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            kind=span.kind,
                            status_code=span.status.code,
                            status_message=span.status.message,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            scope_name=scope_spans.scope.name,
                            scope_schema_url=scope_spans.schema_url,
                        )
                    )
        return out

    def add(self, spans: list[ReceivedSpan], headers: dict[str, str]) -> None:
        with self._lock:
            self.spans.extend(spans)
            self.requests += 1
            self.headers.append(headers)

    def by_name(self) -> dict[str, ReceivedSpan]:
        with self._lock:
            return {s.name: s for s in self.spans}

    def close(self) -> None:
        if self.gate is not None:
            self.gate.set()  # release held requests so their threads end
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
