"""What observability costs a Runner text turn, for ``make bench`` (``observability``).

The same ``Runner.run`` text turn on four nodes, one after the other:

* (a) no plugins, span export off (no ``otel_endpoint``);
* spans only: every span exported over OTLP/HTTP to a local collector;
* metadata logger only: ``adk_actors.plugins.builtins:MetadataLogger`` (``mode="observe"``, ``inline=True``, its
  default ``detail="run"``: a record when the run starts and one when it ends);
* (b) both.

Each case runs in two rounds (the second in reverse order; a case's figures are the mean of its rounds), with one
agent name in every node so the agent sits on the same host in each. The four run at
``log_level="warning"`` (the metadata logger's records are filtered, as in the ``runner``
benchmark) and at the node's default ``log_level="info"`` (every record is written, by the agent's process
straight to the node's sink file: :class:`~adk_actors.logs.AppendSink`). The target is (b) ≤ (a) +
0.5 ms CPU per turn; the two middle cases say where the difference comes from.

The Gemini emulator and the collector (:func:`otlp_sink`: decodes each request and counts its spans) run in
processes of their own, so their CPU is not counted; CPU is every process of the node plus the caller, as in
:mod:`~adk_actors.devtools.bench_runner`. ``python -m adk_actors.devtools.bench_observability --sink PORT`` is
the collector process.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

__all__ = ["METADATA_LOGGER", "OtlpSink", "bench_observability", "otlp_sink"]

METADATA_LOGGER = {
    "id": "metadata",
    "plugin": "adk_actors.plugins.builtins:MetadataLogger",
    "mode": "observe",
    "failure_policy": "open",
    "inline": True,
}
"""The metadata logger's plugin descriptor."""
_SPANS_PER_TURN = 2
"""A ``Runner.run`` text turn exports ``invoke_agent`` and one ``chat`` span."""
_OFF = "(a) no plugins, observability off"
_ON = "(b) metadata logger + spans"
_CASES = ((_OFF, False, False), ("spans only", False, True), ("metadata logger only", True, False), (_ON, True, True))
"""(label, metadata logger, span export)."""
_LEVELS = ("warning", "info")
_SCRIPT = {"rules": [{"when": {}, "respond": {"text": "You said: {user_text}"}}]}


class OtlpSink:
    """A running collector process: ``url`` for ``otel_endpoint``, :meth:`spans` for what it has received."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.proc = proc

    def spans(self) -> int:
        import requests

        resp = requests.get(f"{self.url}/count", timeout=10)
        resp.raise_for_status()
        return int(resp.json()["spans"])

    def wait_spans(self, count: int, timeout_s: float = 15.0) -> int:
        """The span count once it reaches ``count`` or ``timeout_s`` passes (node processes send every second)."""
        deadline = time.monotonic() + timeout_s
        while (received := self.spans()) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return received


@contextlib.contextmanager
def otlp_sink(start_timeout_s: float = 30.0) -> Iterator[OtlpSink]:
    """Run the collector in a child process for the duration of the block.

    Raises:
        RuntimeError: it did not start listening in time.
    """
    from adk_actors.runtime.system import port_listening
    from adk_actors.testing import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "adk_actors.devtools.bench_observability", "--sink", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )
    try:
        deadline = time.monotonic() + start_timeout_s
        while not port_listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the OTLP sink did not start")
            time.sleep(0.05)
        yield OtlpSink(port, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _SinkHandler(BaseHTTPRequestHandler):
    server: _Sink

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.spans += sum(len(s.spans) for rs in request.resource_spans for s in rs.scope_spans)
        self._answer("application/x-protobuf", b"")

    def do_GET(self) -> None:
        self._answer("application/json", json.dumps({"spans": self.server.spans}).encode())

    def _answer(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Sink(HTTPServer):
    # One request at a time (the count needs no lock): each node process sends one batch a second.
    spans = 0


def _serve_sink(port: int) -> None:
    _Sink(("127.0.0.1", port), _SinkHandler).serve_forever()


def _case(ctx: Any, emu: Any, sink: OtlpSink, *, logger: bool, spans: bool, log_level: str) -> dict[str, Any]:
    """One node running ``ctx.sizes.runner_runs`` text turns, with the metadata logger and span export or not."""
    from adk_actors.devtools.bench_runner import _measure, _node, _runner

    runs = ctx.sizes.runner_runs
    settings: dict[str, Any] = {"log_level": log_level, **({"otel_endpoint": sink.url} if spans else {})}
    with _node(**settings) as handle:
        before = sink.spans()
        options: dict[str, Any] = {"plugins": [METADATA_LOGGER]} if logger else {}
        # One agent name in every node: the agent lands on the same host in each case (placement is by name), so the
        # cases differ only by what they measure (a random name moved it between hosts: ±1 ms of noise).
        runner = _runner(handle, emu, "BenchObs", [], **options)

        def call(i: int) -> Any:
            out = runner.run("u", f"s{i}-{uuid.uuid4().hex[:6]}", "hello")
            assert isinstance(out, str)
            return out

        measured = _measure(ctx, handle, call, runs, 1)
        if spans:  # every turn's spans reached the collector (the warm-up turns' too)
            expected = _SPANS_PER_TURN * (runs + min(10, runs))
            measured["spans_received"] = sink.wait_spans(before + expected) - before
            measured["spans_expected"] = expected
    return measured


def _mean(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One case's rounds as one: turns and spans summed, times and CPU averaged, the rounds' CPU kept."""
    out = dict(rounds[0])
    for key in ("p50_ms", "p99_ms", "cpu_ms_per_run", "system_cpu_ms_per_run", "runs_per_s"):
        if key in out:
            out[key] = round(sum(r[key] for r in rounds) / len(rounds), 3)
    for key in ("n", "spans_received", "spans_expected"):
        if key in out:
            out[key] = sum(r[key] for r in rounds)
    out["rounds_cpu_ms_per_run"] = [r["cpu_ms_per_run"] for r in rounds]
    return out


def bench_observability(ctx: Any) -> dict[str, Any]:
    """Runner text turn: (a) no plugins, observability off vs (b) metadata logger + spans to a local collector."""
    from adk_actors.devtools.bench import TARGETS
    from adk_actors.devtools.emulator_proc import emulator_process

    if not _otel_installed():
        raise RuntimeError("the observability benchmark needs the otel extra (pip install 'adk_actors[otel]')")
    target = TARGETS["observability_overhead_cpu_ms"]
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    with emulator_process(script=_SCRIPT) as emu, otlp_sink() as sink:
        for level in _LEVELS:
            # Two rounds, the second in reverse order, so a drift of the machine during the run falls on every case
            # alike; a case's figures are the mean of its rounds.
            rounds: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in _CASES}
            for order in (_CASES, tuple(reversed(_CASES)))[: max(1, ctx.sizes.observability_rounds)]:
                for label, logger, spans in order:
                    rounds[label].append(_case(ctx, emu, sink, logger=logger, spans=spans, log_level=level))
            base = 0.0
            for label, _logger, spans in _CASES:
                m = _mean(rounds[label])
                data[f"{label} [{level}]"] = m
                cpu = m["cpu_ms_per_run"]
                base = cpu if label == _OFF else base
                received = f"{m['spans_received']} / {m['spans_expected']}" if spans else "-"
                rows.append([label, level, m["n"], m["p50_ms"], m["p99_ms"], cpu, f"{cpu - base:+.3f}", received])
    deltas = {
        level: round(data[f"{_ON} [{level}]"]["cpu_ms_per_run"] - data[f"{_OFF} [{level}]"]["cpu_ms_per_run"], 3)
        for level in _LEVELS
    }
    data["delta_cpu_ms"] = deltas
    return {
        "title": "Observability cost of a Runner text turn (local emulator and collector)",
        "params": {"n": ctx.sizes.runner_runs},
        "targets": [
            [
                f"(b) metadata logger + spans ≤ (a) + {target:g} ms CPU per turn (log_level {level})",
                f"{deltas[level]:+.3f} ms",
                deltas[level] <= target,
            ]
            for level in _LEVELS
        ],
        "columns": [
            "case",
            "node log_level",
            "n",
            "p50 ms",
            "p99 ms",
            "CPU ms/turn (system + caller)",
            "CPU vs (a)",
            "spans received",
        ],
        "rows": rows,
        "notes": [
            "Each case starts its own node (2 hosts, 2 workers). Span export goes to a collector process on "
            "127.0.0.1 that decodes each request and counts its spans: 'spans received' is what it got of what "
            "the turns (and the 10 warm-up turns) made.",
            "The metadata logger runs inline in the agent's host with its default detail='run' (a record when the "
            "run starts, one when it ends); at log_level warning its records are filtered, at info (the node "
            "default) each one is written by the agent's process straight to the node's sink file.",
            "CPU = every process of the node plus the caller; the emulator and the collector run in processes "
            "of their own and are not counted. Span export's own thread (batching, protobuf, HTTP) is counted.",
        ],
        "data": data,
    }


def _otel_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("opentelemetry.sdk", "opentelemetry.exporter"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adk_actors.devtools.bench_observability")
    parser.add_argument("--sink", type=int, metavar="PORT", required=True, help="run the OTLP collector on PORT")
    args = parser.parse_args(argv)
    _serve_sink(args.sink)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
