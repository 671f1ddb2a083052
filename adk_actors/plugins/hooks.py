"""Plugin hooks: their names, and the worker function that runs one hook of one plugin.

:func:`run_plugin_hook` runs in a worker process (or in the agent's process for an ``inline=True`` plugin). It
loads the plugin (a class is instantiated with its configuration, once per process and configuration), hands the
hook an immutable, secret-pruned view of its context and normalizes whatever the hook returns into one small dict
(:func:`normalize_result`). It never raises for the plugin's own failure: an exception, a malformed or oversized
result become ``{"action": "failed", "reason": <tag>}``; only the log gets the exception's text.

A plugin hook is ``hook(context)`` (a method of the plugin object, or a function of a plugin module) returning:

* ``None``, ``"ok"``, ``"continue"`` or ``"observe"``: carry on;
* ``("amend", value)``: carry on with ``value`` in place of the hook's subject;
* ``("return", value)`` (alias ``("replace", value)``): stop here with ``value`` as the phase's result;
* ``("halt", reason)``: stop the run; ``reason`` is reduced to a bounded tag.

The hook's context is documented with the hooks in ``docs/PLUGINS.md`` and in :mod:`adk_actors.plugins.builtins`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import threading
import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import cloudpickle

from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.errors import ConfigError, ValidationError
from adk_actors.logs import log_crash
from adk_actors.secrets import prune_secrets, scrub_text

__all__ = [
    "ERROR_HOOK_PHASES",
    "HOOKS",
    "MAX_RESULT_BYTES",
    "NOTIFY_ONLY",
    "build_plugin",
    "call_hook",
    "freeze",
    "hook_of",
    "load_plugin",
    "normalize_result",
    "plugin_label",
    "run_plugin_hook",
    "thaw",
]

HOOKS: tuple[str, ...] = (
    "on_user_message",
    "before_run",
    "after_run",
    "before_agent",
    "after_agent",
    "before_model",
    "after_model",
    "on_model_error",
    "before_tool",
    "after_tool",
    "on_tool_error",
    "on_event",
    "on_agent_error",
    "on_run_error",
    "on_error",
)
"""Every hook a plugin may define."""
NOTIFY_ONLY = frozenset({"after_run", "on_agent_error", "on_run_error", "on_error"})
"""Best-effort notifications: their intervention results are ignored."""
ERROR_HOOK_PHASES: dict[str, str] = {
    "on_model_error": "model",
    "on_tool_error": "tool",
    "on_agent_error": "agent",
    "on_run_error": "run",
}
"""The phase-specific error hooks that fall back to a plugin's legacy ``on_error`` (with ``context["phase"]``)."""
MAX_RESULT_BYTES = 1024 * 1024
"""Largest amended or returned value, canonical JSON UTF-8 bytes."""

_CONTINUE = frozenset({"ok", "continue", "observe"})
_KINDS = {"amend": "amend", "return": "return", "replace": "return"}
_TAG_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_UNSPECIFIED = "unspecified"
_CACHE_SIZE = 256
"""Loaded plugin objects kept per process (above the 128 plugins one pipeline may hold)."""

_cache: OrderedDict[tuple[str | bytes, str], Any] = OrderedDict()
_cache_lock = threading.Lock()


def plugin_label(plugin: str | bytes) -> str:
    """How a plugin is named in errors and logs: its importable name, or ``"<by-value>"`` (never code)."""
    return plugin[:256] if isinstance(plugin, str) else "<by-value>"


def load_plugin(plugin: str | bytes) -> Any:
    """Load a plugin: ``"pkg.mod"`` (a module), ``"pkg.mod:Attr"`` (a class or an object) or a cloudpickled value.

    Raises:
        ConfigError: reason ``plugin_not_importable``; ``details["plugin"]`` is the name, never the import error.
    """
    try:
        if isinstance(plugin, bytes):
            return cloudpickle.loads(plugin)
        module_name, _, attr = plugin.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        return obj
    except Exception:
        raise ConfigError(
            "the plugin cannot be loaded", reason="plugin_not_importable", details={"plugin": plugin_label(plugin)}
        ) from None


def freeze(value: Any) -> Any:
    """A deep read-only copy of a JSON-like value: mappings become ``MappingProxyType``, lists and tuples tuples."""
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON form of a :func:`freeze` view (mappings become dicts, tuples lists): what a plugin returns
    when it amends a piece of its context."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def build_plugin(plugin: str | bytes, config: Any) -> Any:
    """The object whose methods are the hooks: a class with a constructor of its own is built with the read-only
    configuration, one without (hooks as plain or static methods) bare; a module or object is used as is."""
    obj = load_plugin(plugin)
    if isinstance(obj, type):
        obj = obj() if getattr(obj, "__init__", None) is object.__init__ else obj(freeze(config))
    return obj


def call_hook(fn: Any, *args: Any) -> Any:
    """Call a hook; an ``async`` one is run to completion here."""
    raw = fn(*args)
    return asyncio.run(_await(raw)) if inspect.isawaitable(raw) else raw


def _instance(plugin: str | bytes, config: Mapping[str, Any]) -> Any:
    """The plugin object for ``(plugin, config)``, loaded (and a class instantiated) once per process."""
    key = (plugin, canonical_dumps(thaw(config)))
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    obj = build_plugin(plugin, config)
    with _cache_lock:
        _cache[key] = obj
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return obj


def _tag(reason: Any) -> str:
    """A halt reason as a bounded structural tag (free text, which may carry content, becomes ``unspecified``)."""
    if isinstance(reason, str) and _TAG_RE.fullmatch(reason) and scrub_text(reason) == reason:
        return reason
    return _UNSPECIFIED


def normalize_result(raw: Any) -> dict[str, Any]:
    """Normalize what a hook returned into ``{"action": "continue"}``, ``{"action": "amend" | "return",
    "value": <JSON copy, secret-pruned>}``, ``{"action": "halt", "reason": <tag>}`` or ``{"action": "failed",
    "reason": "invalid_plugin_result" | "plugin_result_too_large"}``.

    A value must be JSON-safe and at most :data:`MAX_RESULT_BYTES` of canonical JSON; a frozen context piece
    (mapping proxies, tuples) counts as its plain JSON form.
    """
    if raw is None or (isinstance(raw, str) and raw in _CONTINUE):
        return {"action": "continue"}
    if not isinstance(raw, tuple | list) or len(raw) != 2 or not isinstance(raw[0], str):
        return {"action": "failed", "reason": "invalid_plugin_result"}
    action, value = raw
    if action == "halt":
        return {"action": "halt", "reason": _tag(value)}
    kind = _KINDS.get(action)
    if kind is None:
        return {"action": "failed", "reason": "invalid_plugin_result"}
    try:
        copied, _ = copy_json(thaw(value), max_bytes=MAX_RESULT_BYTES, field="value")
    except ValidationError as exc:
        reason = "plugin_result_too_large" if exc.reason == "limit_exceeded" else "invalid_plugin_result"
        return {"action": "failed", "reason": reason}
    except RecursionError:  # thaw of a self-containing value: copy_json never got to bound it
        return {"action": "failed", "reason": "invalid_plugin_result"}
    return {"action": kind, "value": prune_secrets(copied)}


def hook_of(obj: Any, hook: str, context: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The callable to run for ``hook`` and its context: the phase hook, else the legacy ``on_error`` with
    ``context["phase"]``, else ``None``."""
    fn = getattr(obj, hook, None)
    if callable(fn):
        return fn, context
    phase = ERROR_HOOK_PHASES.get(hook)
    legacy = getattr(obj, "on_error", None) if phase else None
    if phase and callable(legacy):
        return legacy, {**context, "phase": phase}
    return None, context


async def _await(value: Any) -> Any:
    return await value


def run_plugin_hook(plugin: str | bytes, config: dict[str, Any], hook: str, context: dict[str, Any]) -> dict[str, Any]:
    """Run ``hook`` of one plugin (a worker job, or inline for ``inline=True`` plugins).

    Args:
        plugin: The descriptor's plugin: an importable name or a cloudpickled class, object or module.
        config: The descriptor's (JSON-safe, secret-pruned) configuration; a class plugin is built with it.
        hook: One of :data:`HOOKS`.
        context: The hook's context, built by the engine; the plugin sees a deep read-only, secret-pruned copy
            (``hook`` is filled in when absent).

    Returns:
        The normalized result (:func:`normalize_result`); ``{"action": "continue"}`` when the plugin does not define
        the hook; ``{"action": "failed", "reason": "plugin_raised", "type": <class name>}`` when loading, building
        or calling it raised (the exception is logged, never returned); reason ``plugin_not_importable`` when it
        cannot be loaded, ``memory_limit`` when it ran out of memory, ``unknown_hook`` for a hook not in
        :data:`HOOKS`.
    """
    if hook not in HOOKS:
        return {"action": "failed", "reason": "unknown_hook"}
    try:
        obj = _instance(plugin, config)
        fn, view = hook_of(obj, hook, {"hook": hook, **context})
        if fn is None:
            return {"action": "continue"}
        return normalize_result(call_hook(fn, freeze(prune_secrets(thaw(view)))))
    except ConfigError as err:
        if err.reason == "plugin_not_importable":
            return {"action": "failed", "reason": "plugin_not_importable"}
        return _raised(err, plugin, hook)
    except MemoryError:
        return {"action": "failed", "reason": "memory_limit"}
    except Exception as exc:
        return _raised(exc, plugin, hook)


def _raised(exc: Exception, plugin: str | bytes, hook: str) -> dict[str, Any]:
    log_crash("adk_actors.plugins", "plugin hook raised", exc, plugin=plugin_label(plugin), hook=hook)
    return {"action": "failed", "reason": "plugin_raised", "type": type(exc).__name__[:128]}
