"""Agent callbacks: ``before_model`` / ``after_model`` / ``before_tool`` / ``after_tool`` hooks by importable name.

A callback is a module (or any object) named in the agent config's ``callbacks`` list (``"pkg.mod"`` or
``"pkg.mod:obj"``; a class or object itself is accepted too and travels by value, like a closure tool) that
defines any of::

    before_model(config, history, tools)          -> None | "ok" | "continue" | ("halt", output) | ("replace", history)
    after_model(config, result)                   -> None | ... | ("replace", output)
    before_tool(tool_name, args, context)         -> None | ... | ("halt", result) | ("replace", args)
    after_tool(tool_name, args, context, result)  -> None | ... | ("replace", result)
    on_error(config, error)                       -> ignored (an agent-level error hook)

``config`` is a least-privilege projection (``agent``, ``provider``, ``model``, ``generation_config`` and the
secret-pruned ``callback_config``; never the API key), ``history`` the model request's history entries, ``tools``
the function declarations, ``error`` a failed turn's structural description ``{"reason", "type", "agent",
"invocation_id", "kind"}`` (never the exception text, a traceback, a provider body or the config), ``result`` the
model answer as ``{"text", "content", "function_calls",
"finish_reason"}`` or the tool's function-response object, ``context`` the tool context fields. ``output`` is a
``str`` or a content dict. Callbacks run in order; a ``replace`` flows into the next callback, a ``halt`` skips the
rest and the operation. Hooks run in the worker-process pool (tool hooks in the same job as the tool); a hook that
raises, returns something else or misses its deadline is skipped, never crashing the agent, and leaves only a
bounded structural tag.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Sequence
from typing import Any

import cloudpickle

from adk_actors.errors import ConfigError

__all__ = ["HOOKS", "callback_entry", "hooks_of", "load_callback", "run_hook"]

HOOKS = ("before_model", "after_model", "before_tool", "after_tool", "on_error")
_BEFORE = ("before_model", "before_tool")


def callback_entry(callback: Any) -> str | bytes:
    """How a callback travels: its importable name, or (for a class or object defined in a script) its
    cloudpickled value.

    Raises:
        ConfigError: reason ``invalid_callback`` when it is neither a name nor a picklable object.
    """
    if isinstance(callback, str):
        return callback
    if isinstance(callback, types.ModuleType) and callback.__name__ != "__main__":
        return callback.__name__
    try:
        return bytes(cloudpickle.dumps(callback))
    except Exception:
        raise ConfigError(
            "the callback cannot be sent to a worker",
            reason="invalid_callback",
            details={"callback": type(callback).__name__},
        ) from None


def _label(entry: str | bytes) -> str:
    return entry[:256] if isinstance(entry, str) else "<by-value>"


def load_callback(name: str | bytes) -> Any:
    """Load a callback: ``"pkg.mod"`` (a module), ``"pkg.mod:attr"``, or a cloudpickled object.

    Raises:
        ConfigError: reason ``invalid_callback`` (``details["callback"]`` is the name, never the import error).
    """
    if isinstance(name, bytes):
        try:
            return cloudpickle.loads(name)
        except Exception:
            raise ConfigError(
                "the callback cannot be loaded", reason="invalid_callback", details={"callback": "<by-value>"}
            ) from None
    module_name, _, attr = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
    except Exception:
        raise ConfigError(
            "the callback cannot be imported", reason="invalid_callback", details={"callback": name[:256]}
        ) from None
    return obj


def hooks_of(names: Sequence[str | bytes]) -> tuple[str, ...]:
    """The hooks any of the named callbacks define (in :data:`HOOKS` order).

    Raises:
        ConfigError: reason ``invalid_callback``.
    """
    found: set[str] = set()
    for name in names:
        obj = load_callback(name)
        found.update(h for h in HOOKS if callable(getattr(obj, h, None)))
    return tuple(h for h in HOOKS if h in found)


def _decision(result: Any, hook: str) -> tuple[str, Any]:
    if result is None or result in ("ok", "continue"):
        return "continue", None
    if isinstance(result, tuple | list) and len(result) == 2 and result[0] in ("halt", "replace"):
        action = str(result[0])
        if action == "halt" and hook not in _BEFORE:
            return "invalid", None
        return action, result[1]
    return "invalid", None


def run_hook(names: Sequence[str | bytes], hook: str, args: list[Any]) -> dict[str, Any]:
    """Run ``hook`` of every named callback in order (in a worker process).

    The replaceable argument is the last one for ``after_*`` hooks (the result), ``history`` for ``before_model``
    and ``args`` for ``before_tool``.

    Returns:
        ``{"action": "continue" | "replace" | "halt", "value": ..., "errors": [{"callback", "type"}...]}``.
    """
    args = list(args)
    slot = {"before_model": 1, "before_tool": 1}.get(hook, len(args) - 1)
    action, errors = "continue", []
    for name in names:
        try:
            fn = getattr(load_callback(name), hook, None)
            if not callable(fn):
                continue
            kind, value = _decision(fn(*args), hook)
        except Exception as exc:
            errors.append({"callback": _label(name), "type": type(exc).__name__[:128]})
            continue
        if kind == "invalid":
            errors.append({"callback": _label(name), "type": "invalid_callback_result"})
        elif kind == "halt":
            return {"action": "halt", "value": value, "errors": errors}
        elif kind == "replace":
            args[slot] = value
            action = "replace"
    return {"action": action, "value": args[slot] if action == "replace" else None, "errors": errors}
