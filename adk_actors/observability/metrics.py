"""Bounded metrics: counters and histograms with label series, and the mapping from telemetry events to them.

A :class:`MetricsRegistry` holds at most ``max_instruments`` instruments and, per instrument, at most
``max_series`` label series. Past a cap nothing is lost silently: the value goes to one explicit overflow series
(labels :data:`OVERFLOW_LABELS`) — of the instrument when its series are full, of the reserved instrument
:data:`OVERFLOW_COUNTER` / :data:`OVERFLOW_HISTOGRAM` when the instruments are — and ``overflowed`` counts it.

Labels are reason tags and names (agent, tool, model, outcome, reason): every value is cut to
:data:`MAX_LABEL_CHARS` characters and a series has at most :data:`MAX_LABELS` labels. Metrics never carry
content; :func:`record_event` reads only the whitelisted metadata keys of :data:`LABEL_KEYS`.

The telemetry hub feeds one registry per node from the events agents emit (see the table in
docs/OBSERVABILITY.md and :data:`EVENT_METRICS`).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DURATION_BUCKETS_MS",
    "EVENT_METRICS",
    "LABEL_KEYS",
    "MAX_INSTRUMENTS",
    "MAX_LABELS",
    "MAX_LABEL_CHARS",
    "MAX_NAME_CHARS",
    "MAX_SERIES",
    "OVERFLOW_COUNTER",
    "OVERFLOW_HISTOGRAM",
    "OVERFLOW_LABELS",
    "Counter",
    "Histogram",
    "MetricsRegistry",
    "compact",
    "record_event",
]

MAX_INSTRUMENTS = 256
MAX_SERIES = 1000
MAX_LABELS = 8
MAX_LABEL_CHARS = 128
MAX_NAME_CHARS = 128
OVERFLOW_LABELS: dict[str, str] = {"otel.metric.overflow": "true"}
OVERFLOW_COUNTER = "adk.metrics.overflow.counter"
OVERFLOW_HISTOGRAM = "adk.metrics.overflow.histogram"
DURATION_BUCKETS_MS: tuple[float, ...] = (
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000,
)  # fmt: skip
"""Upper bounds (ms) of the duration histograms' buckets; one more bucket holds everything above."""

Labels = tuple[tuple[str, str], ...]
_OVERFLOW_KEY: Labels = tuple(OVERFLOW_LABELS.items())


class _Instrument:
    kind = ""

    def __init__(self, registry: MetricsRegistry, name: str, unit: str, description: str) -> None:
        self.registry = registry
        self.name = name
        self.unit = unit
        self.description = description
        self.series: dict[Labels, Any] = {}
        self.overflow_only = False
        """Set on the reserved overflow instruments: every value goes to the overflow series."""

    def _key(self, labels: Mapping[str, Any] | None) -> Labels:
        """The series of ``labels``, or the overflow series when this instrument has no room for a new one."""
        if self.overflow_only:
            return self._overflow()
        if not labels:
            key: Labels = ()
        elif len(labels) > MAX_LABELS:
            return self._overflow()
        else:
            key = tuple(sorted((str(k)[:MAX_LABEL_CHARS], str(v)[:MAX_LABEL_CHARS]) for k, v in labels.items()))
        if key in self.series or len(self.series) < self.registry.max_series:
            return key
        return self._overflow()

    def _overflow(self) -> Labels:
        self.registry.overflowed += 1
        return _OVERFLOW_KEY

    def snapshot(self) -> dict[str, Any]:
        raise NotImplementedError


class Counter(_Instrument):
    """A monotonic sum per label series."""

    kind = "counter"

    def add(self, value: float = 1, labels: Mapping[str, Any] | None = None) -> None:
        """Add ``value`` (non-negative, finite; anything else is ignored) to the series of ``labels``."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            return
        with self.registry.lock:
            key = self._key(labels)
            self.series[key] = self.series.get(key, 0) + value

    def snapshot(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "unit": self.unit,
            "series": [{"labels": dict(k), "value": v} for k, v in self.series.items()],
        }


class _Distribution:
    __slots__ = ("buckets", "count", "max", "min", "sum")

    def __init__(self, bounds: int) -> None:
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.buckets = [0] * (bounds + 1)


class Histogram(_Instrument):
    """Count, sum, min, max and fixed buckets per label series."""

    kind = "histogram"

    def __init__(
        self, registry: MetricsRegistry, name: str, unit: str, description: str, bounds: tuple[float, ...]
    ) -> None:
        super().__init__(registry, name, unit, description)
        self.bounds = bounds

    def record(self, value: float, labels: Mapping[str, Any] | None = None) -> None:
        """Record one finite value (anything else is ignored) in the series of ``labels``."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return
        with self.registry.lock:
            key = self._key(labels)
            dist = self.series.get(key)
            if dist is None:
                dist = self.series[key] = _Distribution(len(self.bounds))
            dist.count += 1
            dist.sum += value
            dist.min = min(dist.min, value)
            dist.max = max(dist.max, value)
            dist.buckets[bisect.bisect_left(self.bounds, value)] += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "unit": self.unit,
            "bounds": list(self.bounds),
            "series": [
                {
                    "labels": dict(k),
                    "count": d.count,
                    "sum": round(d.sum, 6),
                    "min": d.min,
                    "max": d.max,
                    "buckets": list(d.buckets),
                }
                for k, d in self.series.items()
            ],
        }


class MetricsRegistry:
    """A bounded set of instruments (see the module docstring). Thread-safe."""

    def __init__(self, *, max_instruments: int = MAX_INSTRUMENTS, max_series: int = MAX_SERIES) -> None:
        self.max_instruments = max_instruments
        self.max_series = max_series
        self.lock = threading.RLock()
        self.instruments: dict[str, _Instrument] = {}
        self.overflowed = 0
        """Values that went to an overflow series (instrument or series cap reached)."""
        # The overflow instruments are reserved outside the cap, so they always exist.
        self._overflow_counter = Counter(self, OVERFLOW_COUNTER, "1", "values of counters past the instrument cap")
        self._overflow_histogram = Histogram(
            self, OVERFLOW_HISTOGRAM, "1", "values of histograms past the instrument cap", ()
        )
        self._overflow_counter.overflow_only = self._overflow_histogram.overflow_only = True

    def counter(self, name: str, *, unit: str = "1", description: str = "") -> Counter:
        """The counter called ``name`` (created on first use). Past the instrument cap, or when ``name`` is a
        histogram's, the values go to the overflow series of :data:`OVERFLOW_COUNTER`."""
        found = self._get(name, Counter)
        return found if isinstance(found, Counter) else self._overflow_counter

    def histogram(
        self, name: str, *, unit: str = "ms", description: str = "", bounds: tuple[float, ...] = DURATION_BUCKETS_MS
    ) -> Histogram:
        """The histogram called ``name`` (created on first use with ``bounds``). Past the instrument cap, or when
        ``name`` is a counter's, the values go to the overflow series of :data:`OVERFLOW_HISTOGRAM`."""
        found = self._get(name, Histogram, unit, description, tuple(sorted(bounds)))
        return found if isinstance(found, Histogram) else self._overflow_histogram

    def _get(self, name: str, cls: type[_Instrument], *args: Any) -> _Instrument | None:
        name = str(name)[:MAX_NAME_CHARS]
        with self.lock:
            found = self.instruments.get(name)
            if found is not None:
                return found if isinstance(found, cls) else None
            if len(self.instruments) >= self.max_instruments or name in (OVERFLOW_COUNTER, OVERFLOW_HISTOGRAM):
                return None
            if cls is Histogram:
                unit, description, bounds = args
                created: _Instrument = Histogram(self, name, unit, description, bounds)
            else:
                created = Counter(self, name, "1", "")
            self.instruments[name] = created
            return created

    def snapshot(self) -> dict[str, Any]:
        """JSON-safe: ``{"instruments": {name: {...}}, "overflowed": n, "limits": {...}}``."""
        with self.lock:
            instruments = {name: inst.snapshot() for name, inst in sorted(self.instruments.items())}
            for reserved in (self._overflow_counter, self._overflow_histogram):
                if reserved.series:
                    instruments[reserved.name] = reserved.snapshot()
            for inst in instruments.values():
                for series in inst["series"]:
                    for key in ("min", "max"):
                        if key in series and not math.isfinite(series[key]):
                            series[key] = None
            return {
                "instruments": instruments,
                "overflowed": self.overflowed,
                "limits": {"max_instruments": self.max_instruments, "max_series": self.max_series},
            }


# ---- telemetry events → metrics ------------------------------------------------------------------------------

LABEL_KEYS = frozenset({"agent", "tool", "model", "outcome", "reason", "plugin", "hook", "policy", "kind"})
"""The only metadata keys that become labels: names and reason tags, never content or ids."""

EVENT_METRICS: dict[str, str] = {
    "agent.prompt.stop": "adk.turns{agent,outcome=ok} +1; adk.turn.duration{agent} ← duration_ms",
    "agent.prompt.exception": "adk.turns{agent,outcome=error} +1; adk.errors{source=agent,reason} +1; "
    "adk.turn.duration{agent} ← duration_ms",
    "agent.model.stop": "adk.model.calls{agent,model,outcome} +1; adk.model.duration{agent,model} ← duration_ms; "
    "adk.model.tokens{agent,model,token_type=input|output|cached} ← input_tokens/output_tokens/cached_tokens; "
    "adk.errors{source=model,reason=outcome} +1 unless ok",
    "agent.tool.stop": "adk.tool.calls{agent,tool,outcome} +1; adk.tool.duration{tool} ← duration_ms; "
    "adk.errors{source=tool,reason=outcome} +1 unless ok",
    "runner.run.stop": "adk.runs{agent,outcome} +1; adk.run.duration{agent} ← duration_ms",
    "runner.admission.wait": "adk.admission.waits{agent,outcome} +1; adk.admission.wait{agent} ← wait_ms "
    "(or duration_ms); adk.admission.queue_depth{agent} ← queue_depth",
    "policy.denied": "adk.policy.denials{agent,policy,reason} +1",
    "plugin.failed": "adk.plugin.failures{plugin,hook,reason} +1; adk.errors{source=plugin,reason} +1",
    "observability.dropped": "adk.observability.dropped{reason} ← count",
    "*.start": "(not counted)",
    "any other name": "adk.events{event} +1",
}
"""Which metrics each telemetry event feeds (the table of docs/OBSERVABILITY.md)."""


def _labels(metadata: Mapping[str, Any], *keys: str, **fixed: str) -> dict[str, str]:
    out = {k: str(metadata[k]) for k in keys if k in LABEL_KEYS and metadata.get(k) not in (None, "")}
    out.update(fixed)
    return out


def _number(measurements: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = measurements.get(key)
        if not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value):
            return float(value)
    return None


def record_event(
    registry: MetricsRegistry, name: str, measurements: Mapping[str, Any], metadata: Mapping[str, Any]
) -> None:
    """Feed one telemetry event into ``registry`` per :data:`EVENT_METRICS` (never raises on odd values)."""
    m, md = measurements, metadata
    duration = _number(m, "duration_ms")
    if name in ("agent.prompt.stop", "agent.prompt.exception"):
        ok = name == "agent.prompt.stop"
        registry.counter("adk.turns").add(1, _labels(md, "agent", outcome="ok" if ok else "error"))
        if not ok:
            registry.counter("adk.errors").add(1, _labels(md, "reason", source="agent"))
        if duration is not None:
            registry.histogram("adk.turn.duration").record(duration, _labels(md, "agent"))
    elif name == "agent.model.stop":
        registry.counter("adk.model.calls").add(1, _labels(md, "agent", "model", "outcome"))
        if duration is not None:
            registry.histogram("adk.model.duration").record(duration, _labels(md, "agent", "model"))
        for token_type in ("input", "output", "cached"):
            tokens = _number(m, f"{token_type}_tokens")
            if tokens is not None:
                registry.counter("adk.model.tokens").add(tokens, _labels(md, "agent", "model", token_type=token_type))
        if md.get("outcome") not in (None, "ok"):
            registry.counter("adk.errors").add(1, {"source": "model", "reason": str(md["outcome"])})
    elif name == "agent.tool.stop":
        registry.counter("adk.tool.calls").add(1, _labels(md, "agent", "tool", "outcome"))
        if duration is not None:
            registry.histogram("adk.tool.duration").record(duration, _labels(md, "tool"))
        if md.get("outcome") not in (None, "ok"):
            registry.counter("adk.errors").add(1, {"source": "tool", "reason": str(md["outcome"])})
    elif name == "runner.run.stop":
        registry.counter("adk.runs").add(1, _labels(md, "agent", "outcome"))
        if duration is not None:
            registry.histogram("adk.run.duration").record(duration, _labels(md, "agent"))
    elif name == "runner.admission.wait":
        registry.counter("adk.admission.waits").add(1, _labels(md, "agent", "outcome"))
        wait = _number(m, "wait_ms", "duration_ms")
        if wait is not None:
            registry.histogram("adk.admission.wait").record(wait, _labels(md, "agent"))
        depth = _number(m, "queue_depth")
        if depth is not None:
            registry.histogram("adk.admission.queue_depth", unit="1").record(depth, _labels(md, "agent"))
    elif name == "policy.denied":
        registry.counter("adk.policy.denials").add(1, _labels(md, "agent", "policy", "reason"))
    elif name == "plugin.failed":
        registry.counter("adk.plugin.failures").add(1, _labels(md, "plugin", "hook", "reason"))
        registry.counter("adk.errors").add(1, _labels(md, "reason", source="plugin"))
    elif name == "observability.dropped":
        count = _number(m, "count")
        registry.counter("adk.observability.dropped").add(1 if count is None else count, _labels(md, "reason"))
    elif not name.endswith(".start"):
        registry.counter("adk.events").add(1, {"event": name})


def compact(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A short view of a :meth:`MetricsRegistry.snapshot` for people (``adk status``): counters as
    ``{name: {"k=v,k=v": value}}``, histograms as ``{name: {"k=v": {"count", "sum", "max"}}}``."""
    out: dict[str, Any] = {}
    for name, inst in snapshot.get("instruments", {}).items():
        rows: dict[str, Any] = {}
        for series in inst.get("series", ()):
            key = ",".join(f"{k}={v}" for k, v in sorted(series.get("labels", {}).items())) or "-"
            if inst.get("kind") == "counter":
                rows[key] = series.get("value")
            else:
                rows[key] = {"count": series.get("count"), "sum": series.get("sum"), "max": series.get("max")}
        out[name] = rows
    out["overflowed"] = snapshot.get("overflowed", 0)
    return out
