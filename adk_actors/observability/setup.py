"""Per-process span export setup: :func:`configure` (explicit), :func:`configure_from_settings` (a node's
settings), and the inherited environment that configures every process of a node.

Every process that emits spans needs its own pipeline (a batch queue and an export thread cannot cross a
``fork``). A node's actor processes are forked from its boot process and inherit its environment, so the node's
settings reach them as one variable, :data:`NODE_ENV` (:func:`node_environment` builds it; the boot process sets
it before the actor system forks). A process configures itself from it lazily, the first time it exports a span:
processes that never emit spans never start a thread. An explicit :func:`configure` in a process wins over the
environment.

We never touch OpenTelemetry's global tracer provider: the caller's own OpenTelemetry setup stays theirs (its
current span still becomes our parent, see :func:`~adk_actors.observability.trace.current`).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from adk_actors.errors import ConfigError
from adk_actors.logs import get_logger
from adk_actors.observability import spans
from adk_actors.settings import MAX_OTEL_QUEUE, Settings, check_otel_endpoint

__all__ = [
    "EXIT_FLUSH_S",
    "NODE_ENV",
    "configure",
    "configure_from_environment",
    "configure_from_settings",
    "configured",
    "flush",
    "node_environment",
    "shutdown",
]

NODE_ENV = "ADKACTORS_OTEL"
"""The environment variable carrying a node's export settings (JSON) to its processes; empty means off."""
EXIT_FLUSH_S = 1.0
"""At interpreter exit, queued spans get this long to reach the collector before they are dropped."""

_lock = threading.RLock()
_active: Any = None
"""The installed ``_otlp.Pipeline`` (typed ``Any``: its module needs OpenTelemetry, imported on demand)."""
_exit_hook = False


def _bad(key: str, why: str) -> ConfigError:
    return ConfigError(f"observability {key}: {why}", reason="invalid_value", details={"key": key})


def _positive_int(key: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise _bad(key, f"expected an integer from 1 to {high}")
    return value


def configure(
    *,
    endpoint: str | None,
    service_name: str = "adk_actors",
    resource_attributes: Mapping[str, Any] | None = None,
    sample_ratio: float = 1.0,
    max_queue: int = 2048,
    batch_size: int = 256,
    export_timeout_ms: int = 3000,
    schedule_delay_ms: int = 1000,
) -> bool:
    """Set up (or turn off, ``endpoint=None``) span export for this process; returns whether export is on.

    Idempotent: the same arguments again change nothing. Different arguments replace the pipeline (the old one
    gets up to ``export_timeout_ms`` to send what it holds). With OpenTelemetry not installed, export stays off
    (a warning is logged once) and :func:`~adk_actors.observability.spans.export_spans` remains a no-op.

    Raises:
        ConfigError: ``invalid_value`` — an endpoint that :func:`~adk_actors.settings.check_otel_endpoint`
            refuses, or a bound out of range.
    """
    global _active
    if endpoint is None or endpoint == "":
        shutdown()
        return False
    check_otel_endpoint(endpoint)
    if not isinstance(service_name, str) or not service_name.strip():
        raise _bad("service_name", "expected a non-empty string")
    attributes = dict(resource_attributes or {})
    if not all(isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in attributes.items()):
        raise _bad("resource_attributes", "expected string names and string, number or boolean values")
    if isinstance(sample_ratio, bool) or not isinstance(sample_ratio, int | float) or not 0 <= sample_ratio <= 1:
        raise _bad("sample_ratio", "expected a number from 0 to 1")
    try:
        from adk_actors.observability._otlp import ExportConfig, Pipeline
    except ImportError:
        get_logger("adk_actors.observability").warning(
            "span export is configured but OpenTelemetry is not installed (pip install 'adk_actors[otel]')"
        )
        shutdown()
        return False
    config = ExportConfig(
        endpoint=endpoint,
        service_name=service_name,
        resource_attributes=tuple(sorted(attributes.items())),
        sample_ratio=float(sample_ratio),
        max_queue=_positive_int("max_queue", max_queue, MAX_OTEL_QUEUE),
        batch_size=_positive_int("batch_size", batch_size, MAX_OTEL_QUEUE),
        export_timeout_ms=_positive_int("export_timeout_ms", export_timeout_ms, 120_000),
        schedule_delay_ms=_positive_int("schedule_delay_ms", schedule_delay_ms, 60_000),
    )
    global _exit_hook
    with _lock:
        old = _active
        if old is not None and old.config == config:
            spans.install(old)
            return True
        _active = Pipeline(config)
        spans.install(_active)
        if not _exit_hook:
            atexit.register(_at_exit)
            _exit_hook = True
    if old is not None:
        old.close(old.config.export_timeout_ms / 1000)
    return True


def _settings_config(settings: Settings) -> dict[str, Any]:
    return {
        "endpoint": settings.otel_endpoint or None,
        "service_name": settings.otel_service_name,
        "resource_attributes": dict(settings.otel_resource_attributes),
        "sample_ratio": settings.otel_sample_ratio,
        "max_queue": settings.otel_max_queue,
    }


def configure_from_settings(settings: Settings) -> bool:
    """:func:`configure` from a node's settings (``otel_*``); returns whether export is on.

    Raises:
        ConfigError: as :func:`configure`.
    """
    return configure(**_settings_config(settings))


def node_environment(settings: Settings) -> dict[str, str]:
    """``{NODE_ENV: ...}``: the environment entry that makes every process started with it export like
    ``settings`` say (an empty value turns export off, also when the starter's own environment had one)."""
    config = _settings_config(settings)
    return {NODE_ENV: json.dumps(config, sort_keys=True) if config["endpoint"] else ""}


def configure_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """:func:`configure` from :data:`NODE_ENV` (absent or empty: nothing changes, export stays off).

    Raises:
        ConfigError: the variable is not a JSON object of :func:`configure`'s arguments, or they are invalid.
    """
    raw = (os.environ if environ is None else environ).get(NODE_ENV, "")
    if not raw:
        return False
    try:
        values = json.loads(raw)
    except ValueError:
        raise _bad(NODE_ENV, "not JSON") from None
    if not isinstance(values, dict):
        raise _bad(NODE_ENV, "not a JSON object")
    try:
        return configure(**values)
    except TypeError:
        raise _bad(NODE_ENV, "unknown argument") from None


def configured() -> bool:
    """Whether this process exports spans now."""
    return _active is not None


def flush(timeout_s: float = 5.0) -> bool:
    """Send what this process has queued now (blocking the caller); ``False`` when export is off."""
    pipeline = _active
    return bool(pipeline.flush(timeout_s)) if pipeline is not None else False


def shutdown(timeout_s: float = 5.0) -> None:
    """Turn export off in this process: queued spans get ``timeout_s`` to be sent, the export thread stops, and
    whatever is left is counted as dropped (``shutdown``)."""
    global _active
    with _lock:
        pipeline, _active = _active, None
        spans.install(None)
    if pipeline is not None:
        pipeline.close(timeout_s)


def _at_exit() -> None:
    try:
        shutdown(EXIT_FLUSH_S)
    except Exception:  # the interpreter is going away; nothing useful can be done with the error
        pass


def _autoconfigure() -> None:
    configure_from_environment()


def _after_fork_in_child() -> None:
    # The parent's pipeline has no thread here; forget it (spans.py forgets its side too).
    global _active
    _active = None


spans._autoconfigure = _autoconfigure
os.register_at_fork(after_in_child=_after_fork_in_child)
