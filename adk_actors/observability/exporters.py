"""Observation exporters: the reference's exporter descriptors, on our plugin pipeline.

A Runner's ``observability={"exporters": [...]}`` names user classes that receive *observation envelopes*: one
plain, JSON-safe dict per lifecycle point of a run (every plugin hook: the user message, before/after run, agent,
model and tool, each event, each error). An envelope carries the run's ids, the trace and span it happened in, the
Runner's attributes and reason tags — never content, unless the Runner says ``capture_content=True`` (then the
hook's secret-pruned request, response, arguments, results and event content ride along under ``"content"``).
Spans never carry content either way: content capture is for envelopes only, as in the reference.

Two deliveries:

* ``"sync"`` (default): each exporter is compiled into an observation plugin (:class:`EnvelopeExporter`), so it
  runs like one — in the worker pool under its ``timeout_ms`` and memory bound (or ``inline=True``), after the
  Runner's own plugins, with its ``failure_policy`` (``open``: a failing export is counted and the run goes on;
  ``closed``: it stops the run). Each call gets a batch of one envelope.
* ``"async"``: the envelopes go to the process's bus (:mod:`~adk_actors.observability.bus`), which batches them for
  the exporters configured on the bus (node setting ``observability_bus``); retries, queue and drop policy belong
  to the bus, so a Runner in this mode may not name exporters of its own.

An exporter class::

    class Exporter:
        def __init__(self, config): ...           # the descriptor's config, read-only
        def export(self, envelopes): ...          # a sequence of envelopes; raise to fail the batch
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.errors import ConfigError, RuntimeFailure
from adk_actors.plugins.descriptors import (
    DEFAULT_TIMEOUT_MS,
    FAILURE_POLICIES,
    PluginDescriptor,
    compile_plugins,
    plugin_entry,
)
from adk_actors.plugins.hooks import HOOKS, build_plugin, load_plugin, thaw

__all__ = [
    "DELIVERIES",
    "ENVELOPE_SCHEMA",
    "EXPORTER_KEYS",
    "MAX_EXPORTERS",
    "EnvelopeExporter",
    "build_envelope",
    "exporter_plugins",
]

ENVELOPE_SCHEMA = "adk.observation.v1"
"""The ``schema`` of every envelope."""
DELIVERIES = ("sync", "async")
MAX_EXPORTERS = 16
"""Most exporters one Runner names."""
EXPORTER_KEYS = frozenset({"id", "exporter", "failure_policy", "timeout_ms", "max_memory_mb", "config", "inline"})
"""The keys an exporter descriptor may have."""
_ID_PREFIX = "observability:"
"""Exporter plugins' ids in the pipeline (``observability:<exporter id>``, ``observability:bus``)."""

_IDS = ("run_id", "invocation_id", "app_name", "user_id", "session_id", "agent", "plugin_id", "tool", "call_id")
_METADATA = frozenset({"hook", "traceparent", *_IDS, "error", "response", "event", "tool_failures", "phase"})


def build_envelope(
    context: Mapping[str, Any], *, attributes: Mapping[str, Any], capture_content: bool
) -> dict[str, Any]:
    """The envelope for one hook context (read-only, secret-pruned, as the engine hands plugins): ids, trace,
    reason tags and the Runner's attributes; with ``capture_content``, the rest of the context under
    ``"content"``."""
    env: dict[str, Any] = {
        "schema": ENVELOPE_SCHEMA,
        "hook": context.get("hook"),
        "time_unix_nano": time.time_ns(),
        "content_captured": capture_content,
        "attributes": dict(attributes),
    }
    for key in _IDS:
        value = context.get(key)
        if isinstance(value, str) and value:
            env[key] = value
    trace = context.get("traceparent")
    if isinstance(trace, str) and trace.count("-") == 3:
        _, env["trace_id"], env["span_id"], _ = trace.split("-")
    error = context.get("error")
    if isinstance(error, Mapping) and isinstance(error.get("reason"), str):
        env["reason"] = error["reason"]
    response = context.get("response")
    if isinstance(response, Mapping) and isinstance(response.get("finish_reason"), str):
        env["finish_reason"] = response["finish_reason"]
    event = context.get("event")
    if isinstance(event, Mapping):
        env["event"] = {
            "id": event.get("id"),
            "partial": bool(event.get("partial")),
            "is_final": bool(event.get("is_final")),
        }
    if isinstance(context.get("phase"), str):
        env["phase"] = context["phase"]
    if capture_content:
        env["content"] = {k: thaw(v) for k, v in context.items() if k not in _METADATA or k in ("response", "event")}
    return env


class EnvelopeExporter:
    """The observation plugin one exporter (or the bus) becomes: every hook builds an envelope and delivers it.
    Observe-only; what it returns is always "carry on". A failing ``export`` raises, which the pipeline records
    under the descriptor's ``failure_policy``."""

    metadata_only = True
    """Without content capture, the engine hands it metadata-only contexts (nothing to copy or leak)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.capture_content = bool(config.get("capture_content", False))
        self.attributes = thaw(config.get("attributes", {}))
        self.delivery = config.get("delivery", "sync")
        self.exporter: Any = None
        if self.delivery == "sync":
            pickled = config.get("exporter_pickled")
            entry: str | bytes = base64.b64decode(pickled) if isinstance(pickled, str) else str(config["exporter"])
            self.exporter = build_plugin(entry, config.get("config", {}))
            if not callable(getattr(self.exporter, "export", None)):
                raise ConfigError("an exporter defines export(envelopes)", reason="invalid_value")

    def _deliver(self, context: Mapping[str, Any]) -> None:
        envelope = build_envelope(context, attributes=self.attributes, capture_content=self.capture_content)
        if self.exporter is not None:
            self.exporter.export([envelope])
            return
        from adk_actors.observability import bus

        if not bus.submit(envelope) and not bus.bus_configured():
            raise RuntimeFailure("no observability bus in this process", reason="observability_bus_unavailable")

    on_user_message = _deliver
    before_run = _deliver
    after_run = _deliver
    before_agent = _deliver
    after_agent = _deliver
    before_model = _deliver
    after_model = _deliver
    on_model_error = _deliver
    before_tool = _deliver
    after_tool = _deliver
    on_tool_error = _deliver
    on_event = _deliver
    on_agent_error = _deliver
    on_run_error = _deliver


class ContentEnvelopeExporter(EnvelopeExporter):
    """:class:`EnvelopeExporter` for ``capture_content=True``: it gets the full (secret-pruned) hook contexts."""

    metadata_only = False


assert all(callable(getattr(EnvelopeExporter, h, None)) for h in HOOKS if h != "on_error")


def _bad(message: str, key: str, reason: str = "invalid_value", **details: Any) -> ConfigError:
    return ConfigError(message, reason=reason, details={"key": f"observability.{key}", **details})


def exporter_plugins(
    exporters: Any,
    *,
    delivery: str,
    capture_content: bool,
    attributes: Mapping[str, Any],
    failure_policy: str,
) -> tuple[PluginDescriptor, ...]:
    """Compile a Runner's exporter descriptors (``delivery="sync"``) or its bus hand-off (``"async"``) into
    observation plugins, validated like plugin descriptors.

    Raises:
        ConfigError: ``exporters_in_async_mode`` (an async Runner names exporters), ``too_many_exporters``,
            ``unknown_key``, ``invalid_value`` and the plugin descriptor reasons (``duplicate_plugin_id``,
            ``plugin_not_importable``, ``limit_exceeded``...), with ``details["key"]``.
    """
    if delivery not in DELIVERIES:
        raise _bad("observability.delivery is sync or async", "delivery")
    if failure_policy not in FAILURE_POLICIES:
        raise _bad("observability.failure_policy is open or closed", "failure_policy")
    plugin = ContentEnvelopeExporter if capture_content else EnvelopeExporter
    shared = {"capture_content": capture_content, "attributes": dict(attributes), "delivery": delivery}
    if delivery == "async":
        if exporters:
            raise _bad(
                "an async Runner sends to the node's bus: exporters belong to the bus, not the Runner",
                "exporters",
                "exporters_in_async_mode",
            )
        descriptor = {
            "id": f"{_ID_PREFIX}bus",
            "plugin": plugin,
            "mode": "observe",
            "failure_policy": failure_policy,
            "inline": True,  # a non-blocking hand-off to this process's bus
            "config": shared,
        }
        return compile_plugins([descriptor]).plugins
    if exporters is None:
        return ()
    if isinstance(exporters, str | bytes | Mapping) or not isinstance(exporters, Sequence):
        raise _bad("observability.exporters is a list of exporter descriptors", "exporters")
    if len(exporters) > MAX_EXPORTERS:
        raise _bad(f"at most {MAX_EXPORTERS} exporters", "exporters", "too_many_exporters", max=MAX_EXPORTERS)
    descriptors = []
    for index, entry in enumerate(exporters):
        if not isinstance(entry, Mapping):
            raise _bad("an exporter descriptor is a mapping", "exporters", index=index)
        unknown = sorted(str(k) for k in entry if k not in EXPORTER_KEYS)
        if unknown:
            raise _bad("an exporter descriptor has an unknown key", f"exporters.{unknown[0]}", "unknown_key")
        if "exporter" not in entry or not isinstance(entry.get("id"), str):
            raise _bad("an exporter descriptor has an id and an exporter", "exporters", index=index)
        target = plugin_entry(entry["exporter"], entry["id"])
        where = {"exporter_pickled": base64.b64encode(target).decode()} if isinstance(target, bytes) else {}
        config = {**shared, **where, "exporter": target if isinstance(target, str) else None}
        config["config"] = dict(entry.get("config") or {}) if isinstance(entry.get("config") or {}, Mapping) else None
        if config["config"] is None:
            raise _bad("an exporter's config is a JSON object", "exporters.config", index=index)
        descriptors.append(
            {
                "id": f"{_ID_PREFIX}{entry['id']}",
                "plugin": plugin,
                "mode": "observe",
                "failure_policy": entry.get("failure_policy", "open"),
                "timeout_ms": entry.get("timeout_ms", DEFAULT_TIMEOUT_MS),
                "max_memory_mb": entry.get("max_memory_mb"),
                "inline": entry.get("inline", False),
                "config": config,
            }
        )
        try:
            exporter = load_plugin(target)
        except ConfigError:
            raise _bad("the exporter cannot be loaded", "exporters", "plugin_not_importable", index=index) from None
        if not callable(getattr(exporter, "export", None)):
            raise _bad("an exporter defines export(envelopes)", "exporters", exporter=entry["id"])
    return compile_plugins(descriptors).plugins
