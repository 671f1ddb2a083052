"""OTLP export: one Runner run, with a tool call, as one trace under the caller's OpenTelemetry span.

The node exports the spans its processes make to ``otel_endpoint`` over OTLP/HTTP. Here that is a tiny collector
this sample starts on 127.0.0.1 (it decodes the protobuf bodies with ``opentelemetry-proto``); in production it is
an OpenTelemetry Collector or a vendor's endpoint. The caller has its own OpenTelemetry SDK: the span it has open
when it starts the run becomes the parent of the run's spans. Attributes are names, ids and counts, never content.

Needs the ``otel`` extra (``pip install 'adk_actors[otel]'``).

Run: ``.venv/bin/python samples/otlp_export.py``
"""

from __future__ import annotations

import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import TracerProvider

import adk_actors as adk
from adk_actors import runs
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"has_function_response": False},
     "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Lisbon"}}]}},
    {"when": {"has_function_response": True},
     "respond": {"text": "The weather in {args.city} is {response.forecast}."}},
]}


def get_weather(city: str) -> dict:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    return {"forecast": "sunny"}


class Collector(ThreadingHTTPServer):
    """The smallest OTLP/HTTP trace collector: ``POST /v1/traces`` with a protobuf body; keeps each span."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[dict] = []
        self.changed = threading.Condition()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def wait_for(self, trace_id: str, count: int, timeout: float = 30.0) -> list[dict]:
        """The spans of ``trace_id``, once ``count`` arrived (each process of the node sends a batch a second)."""
        def mine() -> list[dict]:
            return [s for s in self.spans if s["trace_id"] == trace_id]
        with self.changed:
            if not self.changed.wait_for(lambda: len(mine()) >= count, timeout):
                raise TimeoutError(f"{len(mine())} of {count} spans arrived")
            return mine()


def _value(value: AnyValue) -> object:
    """An OTLP attribute value as Python (arrays as lists)."""
    kind = value.WhichOneof("value")
    return [_value(v) for v in value.array_value.values] if kind == "array_value" else getattr(value, kind)


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        spans = [
            {"name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
             "parent": span.parent_span_id.hex(), "start": span.start_time_unix_nano,
             "attributes": {a.key: _value(a.value) for a in span.attributes},
             "service": next(a.value.string_value for a in rs.resource.attributes if a.key == "service.name")}
            for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans
        ]
        with self.server.changed:
            self.server.spans.extend(spans)
            self.server.changed.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def print_tree(spans: list[dict], parent: str, indent: str = "") -> None:
    children = sorted((s for s in spans if s["parent"] == parent), key=lambda s: s["start"])
    for i, span in enumerate(children):
        last = i == len(children) - 1
        print(f"{indent}{'└─' if last else '├─'} {span['name']}")
        print_tree(spans, span["span_id"], indent + ("   " if last else "│  "))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    collector = Collector()
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data,
                                 otel_endpoint=collector.url, otel_service_name="weather-bot")
    tracer = TracerProvider().get_tracer("weather-web")  # the caller's own OpenTelemetry SDK
    try:
        with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
            config = {"provider": "gemini", "model": "gemini-2.5-flash", "base_url": emu.base_url,
                      "api_key": "test-key"}
            agent = adk.spawn_agent("Weather", config, [FunctionTool(get_weather)])
            runner = adk.Runner(agent, "weather_app", adk.session_service(settings))

            with tracer.start_as_current_span("POST /chat") as handler:  # e.g. the web request being served
                run_id = runs.start(runner, "user-1", "session-1", "What is the weather in Lisbon?")
            print(f"answer: {runs.wait(run_id, 60).output}")

            caller = handler.get_span_context()
            trace_id, caller_id = f"{caller.trace_id:032x}", f"{caller.span_id:016x}"
            spans = collector.wait_for(trace_id, 5)  # run, invoke_agent, two chat spans, execute_tool
            print(f"spans in the caller's trace: {len(spans)}, service.name: {spans[0]['service']}")
            print("POST /chat (the caller's span)")
            print_tree(spans, caller_id)
            tool = next(s for s in spans if s["name"] == "execute_tool get_weather")
            print(f"execute_tool: gen_ai.tool.name={tool['attributes']['gen_ai.tool.name']}, "
                  f"gen_ai.tool.call.id set: {bool(tool['attributes']['gen_ai.tool.call.id'])}")
            content = [word for word in ("Lisbon", "sunny") if word in json.dumps([s["attributes"] for s in spans])]
            print(f"content in attributes: {content or 'none'}")
            assert not content and {s["parent"] for s in spans} <= {caller_id} | {s["span_id"] for s in spans}
            adk.stop_agent(agent)
    finally:
        collector.shutdown()
        collector.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
