"""Runner options: validated strictly once, when the Runner is built, and sent with every invocation (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.context import ContextPolicy
from adk_actors.context.cache import CacheOptions, context_cache_options
from adk_actors.errors import ConfigError
from adk_actors.observability.exporters import exporter_plugins
from adk_actors.plugins.descriptors import PluginPipeline, compile_plugins
from adk_actors.policy import RuntimePolicy

__all__ = [
    "DEFAULT_MAX_STREAM_OUTPUT_BYTES",
    "MAX_RUN_TIMEOUT_MS",
    "MAX_STREAM_OUTPUT_BYTES",
    "RunnerOptions",
    "runner_options",
]

DEFAULT_MAX_STREAM_OUTPUT_BYTES = 16 * 1024 * 1024
MAX_STREAM_OUTPUT_BYTES = 64 * 1024 * 1024
MAX_RUN_TIMEOUT_MS = 365 * 86400 * 1000
"""A year: any larger ``run_timeout`` is a typo, and an unbounded int overflows deadline arithmetic."""
_STREAMING_MODES = ("none", "text", "content")
_TOOL_EXECUTION_KEYS = frozenset({"mode", "max_concurrency", "tool_timeout"})
_ADMISSION_KEYS = frozenset({"overflow", "queue_timeout"})
_OBSERVABILITY_KEYS = frozenset({"attributes", "capture_content", "exporters", "delivery", "failure_policy"})
_MAX_SPAN_ATTRIBUTES = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerOptions:
    """Validated Runner options (see :func:`runner_options`); picklable, sent with every invocation."""

    run_timeout_ms: int | None = None
    """The whole invocation's deadline (``None``: the node's ``agent_turn_timeout``)."""
    max_llm_calls: int = 32
    max_tool_rounds: int = 16
    streaming_mode: str = "none"
    max_stream_output_bytes: int = DEFAULT_MAX_STREAM_OUTPUT_BYTES
    tool_mode: str = "parallel"
    """``parallel``: ``parallel_safe`` neighbours run together (at most ``max_concurrency``); ``serial``: one at
    a time."""
    max_concurrency: int = 8
    tool_timeout_ms: int | None = None
    context_policy: ContextPolicy = field(default_factory=ContextPolicy)
    admission: dict[str, Any] | None = None
    """``{"overflow": "reject"|"queue", "queue_timeout": ms}`` (either key optional) or ``None`` (no admission)."""
    runtime_policy: RuntimePolicy | None = None
    plugins: PluginPipeline | None = None
    """The Runner's plugins, compiled once (:func:`~adk_actors.plugins.descriptors.compile_plugins`)."""
    observability: bool = True
    """Spans and metrics for this Runner's invocations (metadata only); ``False``: ``observability="disabled"``."""
    span_attributes: dict[str, Any] = field(default_factory=dict)
    """Extra attributes on this Runner's spans (``observability={"attributes": {...}}``; names and scalars only)."""
    artifact_svc: Any = None
    """The artifact service tools reach through their context (``tool_context.save_artifact`` ...), or ``None``;
    it travels to the tools' worker processes, so it must pickle (``FileArtifactService`` does)."""
    memory_svc: Any = None
    """The memory service ``tool_context.search_memory`` (the ``load_memory`` tool) and ``memory_retrieval``
    search, or ``None``; it must pickle (``SqlMemoryService`` does)."""
    memory_retrieval: dict[str, Any] | None = None
    """Preload: ``{"limit", "filter", "max_hit_bytes", "max_total_bytes", "on_error"}`` (validated), or ``None``."""
    memory_ingestion: str | None = None
    """``"on_success"``: after the final event, the invocation's input and answer are added to the user's memory
    (idempotently, without waiting); ``"durable"``: they are enqueued in ``memory_outbox`` (the turn waits for the
    commit) and its drainer adds them; ``None``: nothing is ingested."""
    memory_outbox: Any = None
    """``memory_ingestion="durable"``: the :class:`~adk_actors.memory.drain.DrainerSpec` (outbox, service, knobs)."""
    context_cache: CacheOptions | None = None
    """The provider prefix cache (``context_cache={"cache": ContextCache, ...}``, docs/CONTEXT.md) or ``None``."""


def _int(value: Any, key: str, *, minimum: int = 1, maximum: int | None = None, none: bool = False) -> Any:
    if value is None and none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        raise ConfigError(
            f"runner option {key} must be an integer in range",
            reason="invalid_value",
            details={"key": key, "min": minimum, **({"max": maximum} if maximum else {})},
        )
    return value


def _strict(value: Any, key: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"runner option {key} must be a mapping", reason="invalid_value", details={"key": key})
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ConfigError(f"unknown {key} key", reason="unknown_key", details={"key": f"{key}.{unknown[0]}"})
    return value


def runner_options(**options: Any) -> RunnerOptions:
    """Validate Runner keyword options strictly.

    Keys: ``run_timeout`` (ms or ``None``), ``max_llm_calls`` (32), ``max_tool_rounds`` (16), ``streaming_mode``
    (``none``/``text``/``content``), ``max_stream_output_bytes`` (16 MiB, at most 64 MiB), ``tool_execution``
    (``{"mode": "serial"|"parallel", "max_concurrency": n, "tool_timeout": ms}``), ``context_policy`` (see
    :class:`~adk_actors.agents.context.ContextPolicy`), ``admission_control`` (``{"overflow", "queue_timeout"}``),
    ``runtime_policy`` (see :class:`~adk_actors.policy.RuntimePolicy`), ``plugins`` (plugin descriptors, see
    docs/PLUGINS.md), ``observability`` (``"disabled"`` or ``{"attributes": {...}}``, see docs/OBSERVABILITY.md),
    ``artifact_svc`` (an artifact service that pickles, see docs/ARTIFACTS.md), ``memory_svc`` and
    ``memory_retrieval`` (see docs/MEMORY.md), ``context_cache`` (see docs/CONTEXT.md).

    Raises:
        ConfigError: ``unknown_key`` or ``invalid_value`` with ``details["key"]`` (``"compressor"``: overflow
            ``"compress"`` without a compressor, or the reverse); the plugin descriptor reasons
            (``duplicate_plugin_id``, ``invalid_plugin_mode``...).
    """
    known = {
        "run_timeout",
        "max_llm_calls",
        "max_tool_rounds",
        "streaming_mode",
        "max_stream_output_bytes",
        "tool_execution",
        "context_policy",
        "admission_control",
        "runtime_policy",
        "plugins",
        "observability",
        "artifact_svc",
        "memory_svc",
        "memory_retrieval",
        "memory_ingestion",
        "context_cache",
    }
    unknown = sorted(k for k in options if k not in known)
    if unknown:
        raise ConfigError("unknown Runner option", reason="unknown_key", details={"key": unknown[0]})
    mode = options.get("streaming_mode", "none")
    if mode not in _STREAMING_MODES:
        raise ConfigError(
            "streaming_mode must be none, text or content", reason="invalid_value", details={"key": "streaming_mode"}
        )
    tool_execution = options.get("tool_execution")
    tools = _strict({} if tool_execution is None else tool_execution, "tool_execution", _TOOL_EXECUTION_KEYS)
    tool_mode = tools.get("mode", "parallel")
    if tool_mode not in ("serial", "parallel"):
        raise ConfigError(
            "tool_execution.mode must be serial or parallel",
            reason="invalid_value",
            details={"key": "tool_execution.mode"},
        )
    admission = options.get("admission_control")
    if admission is not None:
        admission = dict(_strict(admission, "admission_control", _ADMISSION_KEYS))
        if admission.get("overflow", "reject") not in ("reject", "queue"):
            raise ConfigError(
                "admission_control.overflow must be reject or queue",
                reason="invalid_value",
                details={"key": "admission_control.overflow"},
            )
        _int(admission.get("queue_timeout", 0), "admission_control.queue_timeout", minimum=0)
    policy = options.get("runtime_policy")
    if policy is not None and not isinstance(policy, RuntimePolicy):
        policy = RuntimePolicy.from_config(policy)
    plugins = options.get("plugins")
    if plugins is not None and not isinstance(plugins, PluginPipeline):
        plugins = compile_plugins(plugins)
    observability, attributes, exporters = _observability(options.get("observability"))
    if exporters:  # after the Runner's own plugins: they observe what the plugins decided
        plugins = compile_plugins([*(plugins.plugins if plugins is not None else ()), *exporters])
    context = options.get("context_policy")
    if not isinstance(context, ContextPolicy):
        context = ContextPolicy.from_config(context)
    artifacts = _shareable(options.get("artifact_svc"), "artifact_svc", _ARTIFACT_METHODS, "FileArtifactService")
    memory = _shareable(options.get("memory_svc"), "memory_svc", _MEMORY_METHODS, "SqlMemoryService")
    retrieval = _retrieval(options.get("memory_retrieval"), memory)
    ingestion, outbox = _ingestion(options.get("memory_ingestion"), memory)
    return RunnerOptions(
        run_timeout_ms=_int(options.get("run_timeout"), "run_timeout", none=True, maximum=MAX_RUN_TIMEOUT_MS),
        max_llm_calls=_int(options.get("max_llm_calls", 32), "max_llm_calls"),
        max_tool_rounds=_int(options.get("max_tool_rounds", 16), "max_tool_rounds", minimum=0),
        streaming_mode=mode,
        max_stream_output_bytes=_int(
            options.get("max_stream_output_bytes", DEFAULT_MAX_STREAM_OUTPUT_BYTES),
            "max_stream_output_bytes",
            maximum=MAX_STREAM_OUTPUT_BYTES,
        ),
        tool_mode=tool_mode,
        max_concurrency=_int(tools.get("max_concurrency", 8), "tool_execution.max_concurrency"),
        tool_timeout_ms=_int(
            tools.get("tool_timeout"), "tool_execution.tool_timeout", none=True, maximum=MAX_RUN_TIMEOUT_MS
        ),
        context_policy=context,
        admission=admission,
        runtime_policy=policy,
        plugins=plugins if plugins is not None and plugins.plugins else None,
        observability=observability,
        span_attributes=attributes,
        artifact_svc=artifacts,
        memory_svc=memory,
        memory_retrieval=retrieval,
        memory_ingestion=ingestion,
        memory_outbox=outbox,
        context_cache=context_cache_options(options.get("context_cache")),
    )


_ARTIFACT_METHODS = ("put", "get", "list_names", "list_versions", "delete")
_MEMORY_METHODS = ("add", "search", "get", "delete_entry", "erase_session", "erase_user")
_RETRIEVAL_KEYS = frozenset({"limit", "filter", "max_hit_bytes", "max_total_bytes", "on_error"})


def _shareable(service: Any, key: str, methods: tuple[str, ...], example: str) -> Any:
    """A service option: ``None``, or an object with ``methods`` that pickles, since the tools and jobs that use it
    run in worker processes."""
    if service is None:
        return None
    if not all(callable(getattr(service, m, None)) for m in methods):
        raise ConfigError(f"{key} is not a service of the expected kind", reason="invalid_value", details={"key": key})
    import pickle

    try:
        pickle.dumps(service)
    except Exception:
        raise ConfigError(
            f"{key} must pickle (tools and jobs use it from worker processes): use {example}",
            reason="service_not_shareable",
            details={"key": key, "type": type(service).__name__},
        ) from None
    return service


_DURABLE_KEYS = frozenset({"mode", "outbox", "lease_ms", "batch", "concurrency"})


def _ingestion(value: Any, memory: Any) -> tuple[str | None, Any]:
    """``memory_ingestion``: ``None``, ``"on_success"`` or ``{"mode": "durable", "outbox": <MemoryOutbox or SQL URL>,
    "lease_ms", "batch", "concurrency"}`` (all need ``memory_svc``). The durable outbox is opened (and migrated)
    here, so a Runner is never built on an outbox it cannot reach. Returns ``(mode, drainer spec or None)``."""
    if value is None:
        return None, None
    if isinstance(value, Mapping) and value.get("mode") == "durable":
        return "durable", _durable(value, memory)
    if value != "on_success":
        raise ConfigError(
            "memory_ingestion is on_success or {mode: durable, ...}",
            reason="invalid_value",
            details={"key": "memory_ingestion"},
        )
    if memory is None:
        raise ConfigError(
            "memory_ingestion needs memory_svc", reason="invalid_value", details={"key": "memory_ingestion"}
        )
    return "on_success", None


def _durable(value: Mapping[str, Any], memory: Any) -> Any:
    from adk_actors.errors import AdkError
    from adk_actors.memory.drain import DrainerSpec
    from adk_actors.memory.outbox import MemoryOutbox

    outbox = value.get("outbox")
    if outbox is None:
        raise ConfigError(
            "durable memory ingestion needs an outbox (a MemoryOutbox or its SQL URL)",
            reason="durable_ingestion_unavailable",
            details={"key": "memory_ingestion.outbox"},
        )
    spec = dict(_strict(value, "memory_ingestion", _DURABLE_KEYS))
    if memory is None:
        raise ConfigError(
            "memory_ingestion needs memory_svc", reason="invalid_value", details={"key": "memory_ingestion"}
        )
    if isinstance(outbox, str):
        outbox = MemoryOutbox(outbox)
    knobs = {k: spec[k] for k in ("lease_ms", "batch", "concurrency") if k in spec}
    try:
        drainer = DrainerSpec(outbox=outbox, memory=memory, **knobs).check()
    except ConfigError as err:
        key = (err.details or {}).get("key", "")
        raise ConfigError(
            f"memory_ingestion.{key} is invalid", reason=err.reason, details={"key": f"memory_ingestion.{key}"}
        ) from None
    try:
        outbox.open()
    except AdkError as err:
        raise ConfigError(
            "the durable memory outbox is unavailable",
            reason="durable_ingestion_unavailable",
            details={"key": "memory_ingestion.outbox", "error": err.reason},
        ) from None
    return drainer


def _retrieval(value: Any, memory: Any) -> dict[str, Any] | None:
    """``memory_retrieval``, checked: it needs ``memory_svc``."""
    if value is None:
        return None
    spec = dict(_strict(value, "memory_retrieval", _RETRIEVAL_KEYS))
    if memory is None:
        raise ConfigError(
            "memory_retrieval needs memory_svc", reason="invalid_value", details={"key": "memory_retrieval"}
        )
    filter_ = spec.get("filter") or {}
    if not isinstance(filter_, Mapping):
        raise ConfigError("memory_retrieval.filter is a map", reason="invalid_value", details={"key": "filter"})
    on_error = spec.get("on_error", "fail")
    if on_error not in ("fail", "skip"):
        raise ConfigError(
            "memory_retrieval.on_error is fail or skip", reason="invalid_value", details={"key": "on_error"}
        )
    return {
        "limit": _int(spec.get("limit", 5), "memory_retrieval.limit", maximum=100),
        "filter": dict(filter_),
        "max_hit_bytes": _int(spec.get("max_hit_bytes", 16384), "memory_retrieval.max_hit_bytes", maximum=1 << 20),
        "max_total_bytes": _int(
            spec.get("max_total_bytes", 65536), "memory_retrieval.max_total_bytes", maximum=1 << 22
        ),
        "on_error": on_error,
    }


def _observability(value: Any) -> tuple[bool, dict[str, Any], tuple[Any, ...]]:
    """``None`` (on, metadata only), ``"disabled"``, or ``{"attributes": {name: scalar}, "exporters": [...],
    "delivery": "sync"|"async", "failure_policy": "open"|"closed", "capture_content": False}``: whether spans are
    on, their extra attributes, and the observation plugins the exporters become
    (:func:`~adk_actors.observability.exporters.exporter_plugins`). ``capture_content=True`` puts content in the
    exporters' envelopes only; spans and metrics never carry it."""
    if value is None:
        return True, {}, ()
    if value == "disabled":
        return False, {}, ()
    config = _strict(value, "observability", _OBSERVABILITY_KEYS)
    capture = config.get("capture_content", False)
    if not isinstance(capture, bool):
        raise ConfigError(
            "observability.capture_content is a bool",
            reason="invalid_value",
            details={"key": "observability.capture_content"},
        )
    attributes = config.get("attributes", {})
    if (
        not isinstance(attributes, Mapping)
        or len(attributes) > _MAX_SPAN_ATTRIBUTES
        or not all(
            isinstance(k, str)
            and 0 < len(k) <= 128
            and isinstance(v, str | int | float | bool)
            and (not isinstance(v, str) or len(v) <= 256)
            for k, v in attributes.items()
        )
    ):
        raise ConfigError(
            "observability.attributes maps up to 32 names to short scalars",
            reason="invalid_value",
            details={"key": "observability.attributes"},
        )
    delivery = config.get("delivery", "sync")
    exporters = config.get("exporters")
    if capture and delivery == "sync" and not exporters:
        raise ConfigError(
            "capture_content applies to exporter envelopes only: name exporters or use delivery=async",
            reason="invalid_value",
            details={"key": "observability.capture_content"},
        )
    plugins: tuple[Any, ...] = ()
    if exporters or delivery != "sync":
        plugins = exporter_plugins(
            exporters,
            delivery=delivery,
            capture_content=capture,
            attributes=attributes,
            failure_policy=config.get("failure_policy", "open"),
        )
    return True, dict(attributes), plugins
