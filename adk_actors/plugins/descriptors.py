"""Plugin descriptors and the compiled pipeline: what a Runner's ``plugins=[...]`` option becomes.

:func:`compile_plugins` validates the descriptors once, in list order, when the Runner is built: the reference's
hard bounds (at most :data:`MAX_PLUGINS` plugins, ids of at most :data:`MAX_ID_BYTES` UTF-8 bytes, timeouts of at
most :data:`MAX_TIMEOUT_MS`, configurations of at most :data:`MAX_CONFIG_BYTES` of canonical JSON), duplicate ids,
unknown modes and policies, unknown keys and plugins that cannot be loaded are all rejected with a
:class:`~adk_actors.errors.ConfigError` whose details name the descriptor, never a value or an import error. Each
plugin is loaded there to find the hooks it defines, so the engine asks only the plugins that have something to
say (:meth:`PluginPipeline.for_hook`).
"""

from __future__ import annotations

import dataclasses
import importlib
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ConfigError, ValidationError
from adk_actors.plugins.hooks import ERROR_HOOK_PHASES, HOOKS, load_plugin, plugin_label
from adk_actors.secrets import prune_secrets

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "DESCRIPTOR_KEYS",
    "FAILURE_POLICIES",
    "MAX_CONFIG_BYTES",
    "MAX_ID_BYTES",
    "MAX_MEMORY_MB",
    "MAX_PLUGINS",
    "MAX_TIMEOUT_MS",
    "MODES",
    "PluginDescriptor",
    "PluginPipeline",
    "compile_plugins",
    "plugin_entry",
]

MAX_PLUGINS = 128
"""Most plugins one pipeline holds."""
MAX_ID_BYTES = 256
"""Longest plugin id (and instance name), UTF-8 bytes."""
DEFAULT_TIMEOUT_MS = 1000
"""A hook's deadline when the descriptor sets none."""
MAX_TIMEOUT_MS = 120_000
"""Longest hook deadline a descriptor may ask for."""
MAX_MEMORY_MB = 65_536
"""Largest per-hook address-space bound a descriptor may ask for, MiB."""
MAX_CONFIG_BYTES = 1024 * 1024
"""Largest plugin configuration, canonical JSON UTF-8 bytes."""
MODES = ("observe", "intervene")
"""``observe``: the plugin may only carry on; ``intervene``: it may amend, return or halt."""
FAILURE_POLICIES = ("open", "closed")
"""``open``: a failing plugin is recorded and skipped; ``closed``: it stops the run."""
DESCRIPTOR_KEYS = frozenset(
    {"id", "plugin", "mode", "failure_policy", "timeout_ms", "max_memory_mb", "config", "inline", "instance"}
)
"""The keys a descriptor mapping may have."""


def _error(message: str, reason: str, plugin_id: Any, **details: Any) -> ConfigError:
    ident = plugin_id if isinstance(plugin_id, str) and len(plugin_id) <= MAX_ID_BYTES else None
    return ConfigError(message, reason=reason, details={"plugin": ident, **details})


def importable_name(cls: type) -> str | None:
    """``"module:QualName"`` when another process can import ``cls`` under that name (not ``__main__``, not
    defined inside a function, found there as this very class), else ``None``."""
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        return None
    try:
        found: Any = importlib.import_module(cls.__module__)
        for part in cls.__qualname__.split("."):
            found = getattr(found, part)
    except Exception:
        return None
    return f"{cls.__module__}:{cls.__qualname__}" if found is cls else None


def is_bounded_name(value: Any, max_bytes: int = MAX_ID_BYTES) -> bool:
    """Whether ``value`` is a non-empty string of at most ``max_bytes`` UTF-8 bytes without control characters
    (the rule for plugin and exporter ids)."""
    if not isinstance(value, str) or not 0 < len(value) <= max_bytes:
        return False
    try:
        return len(value.encode("utf-8")) <= max_bytes and all(" " <= ch != "\x7f" for ch in value)
    except UnicodeEncodeError:
        return False


def _check_name(value: Any, key: str, plugin_id: Any, reason: str) -> str:
    """A non-empty id of at most :data:`MAX_ID_BYTES` UTF-8 bytes without control characters."""
    if not is_bounded_name(value):
        raise _error(
            f"{key} must be a non-empty name of at most {MAX_ID_BYTES} UTF-8 bytes", reason, plugin_id, key=key
        )
    return value


def _check_int(value: Any, key: str, plugin_id: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(f"{key} must be an integer", "invalid_value", plugin_id, key=key)
    if not low <= value <= high:
        raise _error(f"{key} must be between {low} and {high}", "limit_exceeded", plugin_id, key=key, max=high)
    return value


def _check_config(value: Any, plugin_id: Any) -> dict[str, Any]:
    """A private, secret-pruned JSON copy of the configuration (a mapping with str keys)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _error("config must be a JSON object", "invalid_value", plugin_id, key="config")
    try:
        copied, _ = copy_json(dict(value), field="config", max_bytes=MAX_CONFIG_BYTES)
    except ValidationError as exc:
        reason = "limit_exceeded" if exc.reason == "limit_exceeded" else "invalid_value"
        raise _error("config must be a JSON object of at most 1 MiB", reason, plugin_id, key="config") from None
    pruned: dict[str, Any] = prune_secrets(copied)
    return pruned


def plugin_entry(plugin: Any, plugin_id: Any = None) -> str | bytes:
    """How a plugin travels to a worker: its importable name, or (for a class, object or module defined in a
    script) its cloudpickled value.

    Raises:
        ConfigError: reason ``plugin_not_importable`` when it is neither a name nor picklable.
    """
    if isinstance(plugin, str | bytes):
        if not plugin:
            raise _error("plugin must not be empty", "plugin_not_importable", plugin_id, key="plugin")
        return plugin
    if isinstance(plugin, types.ModuleType) and plugin.__name__ != "__main__":
        return plugin.__name__
    if isinstance(plugin, type):
        name = importable_name(plugin)
        if name is not None:
            return name
    try:
        return bytes(cloudpickle.dumps(plugin))
    except Exception:
        raise _error(
            "the plugin cannot be sent to a worker",
            "plugin_not_importable",
            plugin_id,
            key="plugin",
            type=type(plugin).__name__,
        ) from None


def _hooks_of(plugin: str | bytes, plugin_id: Any, config: dict[str, Any]) -> tuple[str, ...]:
    """The hooks the plugin defines (in :data:`HOOKS` order); a class's optional ``check_config(config)`` runs
    here, so a malformed configuration fails when the Runner is built rather than on the first hook, and its
    optional ``hooks_for(config)`` narrows the hooks the engine asks it for."""
    try:
        obj = load_plugin(plugin)
    except ConfigError:
        raise _error("the plugin cannot be loaded", "plugin_not_importable", plugin_id, key="plugin") from None
    hooks = tuple(h for h in HOOKS if callable(getattr(obj, h, None)))
    if not hooks:
        raise _error("the plugin defines none of the plugin hooks", "invalid_value", plugin_id, key="plugin", hooks=0)
    check = getattr(obj, "check_config", None) if isinstance(obj, type) else None
    if callable(check):
        try:
            check(config)
        except ConfigError as err:
            raise ConfigError(
                err.message, reason=err.reason, details={**err.details, "plugin": plugin_id, "key": "config"}
            ) from None
        except Exception:
            raise _error("the plugin rejected its config", "invalid_value", plugin_id, key="config") from None
    narrow = getattr(obj, "hooks_for", None) if isinstance(obj, type) else None
    if callable(narrow):  # a class may serve fewer hooks for some configurations (the metadata logger's detail)
        wanted = set(narrow(config))
        hooks = tuple(h for h in hooks if h in wanted)
    return hooks


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginDescriptor:
    """One compiled plugin of a Runner's pipeline (build it with :func:`compile_plugins`)."""

    id: str
    """The plugin's id: non-empty, at most 256 UTF-8 bytes, unique in its pipeline."""
    plugin: str | bytes
    """The plugin: an importable name (``"pkg.mod:Class"``, ``"pkg.mod"``) or a cloudpickled class, object or
    module."""
    mode: str
    """``"observe"`` or ``"intervene"``."""
    failure_policy: str
    """``"open"`` or ``"closed"``."""
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    """Each hook's deadline, 1..120000 ms."""
    max_memory_mb: int | None = None
    """Address-space bound of each hook job in MiB, or ``None`` for the worker pool's default."""
    config: dict[str, Any] = field(default_factory=dict)
    """JSON-safe, secret-pruned configuration (at most 1 MiB); a class plugin is built with it."""
    inline: bool = False
    """Run the hooks in the agent's own process instead of the worker pool (opt-in, as for tools): no deadline
    or memory bound is enforced there."""
    hooks: tuple[str, ...] = ()
    """The hooks the plugin defines, found by :func:`compile_plugins`."""
    instance: str | None = None
    """The registered name of a stateful plugin instance that serves this plugin's hooks, or ``None``."""
    metadata_only: bool = False
    """The plugin reads metadata only (its class says ``metadata_only = True``): its hook contexts carry ids, names
    and reason tags but no history, request, response, arguments, results, outputs or event content — cheaper to
    build, prune and send, and nothing it could leak."""

    def __post_init__(self) -> None:
        _check_name(self.id, "id", self.id, "invalid_plugin_id")
        if not isinstance(self.plugin, str | bytes) or not self.plugin:
            raise _error("plugin must be an importable name or a pickled value", "invalid_value", self.id, key="plugin")
        if self.mode not in MODES:
            raise _error("mode must be observe or intervene", "invalid_plugin_mode", self.id, key="mode")
        if self.failure_policy not in FAILURE_POLICIES:
            raise _error(
                "failure_policy must be open or closed", "invalid_failure_policy", self.id, key="failure_policy"
            )
        _check_int(self.timeout_ms, "timeout_ms", self.id, 1, MAX_TIMEOUT_MS)
        if self.max_memory_mb is not None:
            _check_int(self.max_memory_mb, "max_memory_mb", self.id, 1, MAX_MEMORY_MB)
        object.__setattr__(self, "config", _check_config(self.config, self.id))
        if not isinstance(self.inline, bool):
            raise _error("inline must be a bool", "invalid_value", self.id, key="inline")
        hooks = self.hooks
        if not isinstance(hooks, tuple | list) or any(h not in HOOKS for h in hooks):
            raise _error("hooks must name plugin hooks", "invalid_value", self.id, key="hooks")
        object.__setattr__(self, "hooks", tuple(h for h in HOOKS if h in hooks))
        if self.instance is not None:
            _check_name(self.instance, "instance", self.id, "invalid_value")

    @property
    def label(self) -> str:
        """The plugin's name for logs and status (``"<by-value>"`` for a pickled one; never code)."""
        return plugin_label(self.plugin)

    def handles(self, hook: str) -> bool:
        """Whether the engine asks this plugin for ``hook``: it defines it, or it is a phase error hook and the
        plugin defines the legacy ``on_error``."""
        return hook in self.hooks or (hook in ERROR_HOOK_PHASES and "on_error" in self.hooks)


@dataclass(frozen=True, slots=True)
class PluginPipeline:
    """The compiled, ordered plugins of a Runner (picklable; empty when the Runner has none)."""

    plugins: tuple[PluginDescriptor, ...] = ()
    """The descriptors, in the order given."""
    _by_hook: dict[str, tuple[PluginDescriptor, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plugins = tuple(self.plugins)
        object.__setattr__(self, "plugins", plugins)
        object.__setattr__(self, "_by_hook", {h: tuple(d for d in plugins if d.handles(h)) for h in HOOKS})

    def for_hook(self, hook: str) -> tuple[PluginDescriptor, ...]:
        """The plugins to ask for ``hook``, in pipeline order (precomputed; ``()`` for an unknown hook)."""
        return self._by_hook.get(hook, ())

    @property
    def empty(self) -> bool:
        """Whether there are no plugins."""
        return not self.plugins


def _descriptor(entry: Any, index: int) -> PluginDescriptor:
    plugin_id: Any
    fields: dict[str, Any]
    if isinstance(entry, PluginDescriptor):
        plugin_id, fields = entry.id, {f.name: getattr(entry, f.name) for f in dataclasses.fields(entry)}
    elif isinstance(entry, Mapping):
        fields = dict(entry)
        plugin_id = fields.get("id")
        unknown = [k for k in fields if k not in DESCRIPTOR_KEYS]
        if unknown:
            raise _error(
                "a plugin descriptor has an unknown key", "unknown_key", plugin_id, index=index, count=len(unknown)
            )
    else:
        raise _error("a plugin descriptor is a mapping", "invalid_value", None, index=index, type=type(entry).__name__)
    _check_name(plugin_id, "id", plugin_id, "invalid_plugin_id")
    if "plugin" not in fields:
        raise _error("a plugin descriptor names its plugin", "invalid_value", plugin_id, key="plugin")
    fields["plugin"] = plugin_entry(fields["plugin"], plugin_id)
    fields.pop("hooks", None)
    for key in ("mode", "failure_policy"):  # required: a missing one is refused like a wrong one
        fields.setdefault(key, None)
    fields.pop("metadata_only", None)  # the plugin's own declaration, read below
    descriptor = PluginDescriptor(**fields)
    hooks = _hooks_of(descriptor.plugin, plugin_id, descriptor.config)
    metadata_only = getattr(load_plugin(descriptor.plugin), "metadata_only", False) is True
    return dataclasses.replace(descriptor, hooks=hooks, metadata_only=metadata_only)


def compile_plugins(entries: Sequence[Any] | None) -> PluginPipeline:
    """Validate a Runner's plugin descriptors, in order, into a :class:`PluginPipeline`.

    Args:
        entries: Mappings with the keys of :data:`DESCRIPTOR_KEYS` (``id``, ``plugin``, ``mode`` and
            ``failure_policy`` required; ``plugin`` may be an importable name, a class, an object or a module) or
            :class:`PluginDescriptor` values; ``None`` or ``[]`` for no plugins.

    Raises:
        ConfigError: reason ``too_many_plugins``, ``invalid_plugin_id``, ``duplicate_plugin_id``,
            ``invalid_plugin_mode``, ``invalid_failure_policy``, ``invalid_value`` (``details["key"]`` names the
            field), ``unknown_key``, ``plugin_not_importable`` (never the import error) or ``limit_exceeded``.
    """
    if entries is None:
        return PluginPipeline(())
    if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Sequence):
        raise ConfigError("plugins is a list of descriptors", reason="invalid_value", details={"key": "plugins"})
    if len(entries) > MAX_PLUGINS:
        raise ConfigError(
            f"at most {MAX_PLUGINS} plugins",
            reason="too_many_plugins",
            details={"max": MAX_PLUGINS, "size": len(entries)},
        )
    compiled: list[PluginDescriptor] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        try:
            descriptor = _descriptor(entry, index)
        except AdkError as err:
            if isinstance(err, ConfigError):
                raise
            raise _error("a plugin descriptor is invalid", "invalid_value", None, index=index) from None
        if descriptor.id in seen:
            raise _error("plugin ids must be unique", "duplicate_plugin_id", descriptor.id, index=index)
        seen.add(descriptor.id)
        compiled.append(descriptor)
    return PluginPipeline(tuple(compiled))
