"""The worker-process side of planning: load a trusted adapter module and run one of its callbacks.

The planning loop sends these functions to the worker pool by importable name, with the module name taken from
the caller's validated :class:`~adk_actors.planning.spec.AdapterRef` — never from plan data. Adapter contract:

* planner module: ``plan(goal, context, config, history) -> plan`` and optionally
  ``replan(goal, context, config, history, failure) -> plan`` (without it, ``plan`` is asked again, with the
  failure in ``history``);
* executor module: ``ACTIONS`` (a tuple of action words) and ``execute(step, state, context, config) -> result``.
  To fail a step, raise (an ``AdkError`` keeps its reason tag; anything else is reported as ``function_failed``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from adk_actors.errors import ConfigError
from adk_actors.planning.plan import check_actions
from adk_actors.planning.spec import MODULE_RE

__all__ = ["executor_actions", "run_execute", "run_plan", "run_replan"]


def _load(module: str) -> ModuleType:
    if not isinstance(module, str) or not MODULE_RE.fullmatch(module):
        raise ConfigError("not an importable module name", reason="invalid_value", details={"key": "module"})
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            "the adapter module does not import", reason="unknown_module", details={"module": module}
        ) from None


def _callback(module: ModuleType, name: str) -> Any:
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(
            "the adapter module lacks a callback",
            reason="missing_callback",
            details={"module": module.__name__, "callback": name},
        )
    return fn


def executor_actions(module: str) -> list[str]:
    """The executor's declared vocabulary, sorted.

    Raises:
        ConfigError: ``unknown_module``.
        ValidationError: ``invalid_actions``.
    """
    return sorted(check_actions(getattr(_load(module), "ACTIONS", None)))


def run_plan(
    module: str, goal: Any, context: dict[str, Any], config: dict[str, Any], history: list[dict[str, Any]]
) -> Any:
    """``module.plan(goal, context, config, history)``."""
    return _callback(_load(module), "plan")(goal, context, config, history)


def run_replan(
    module: str,
    goal: Any,
    context: dict[str, Any],
    config: dict[str, Any],
    history: list[dict[str, Any]],
    failure: dict[str, Any],
) -> Any:
    """``module.replan(goal, context, config, history, failure)``, or ``module.plan(...)`` when it has none."""
    loaded = _load(module)
    if callable(getattr(loaded, "replan", None)):
        return loaded.replan(goal, context, config, history, failure)
    return _callback(loaded, "plan")(goal, context, config, history)


def run_execute(
    module: str, step: dict[str, Any], state: dict[str, Any], context: dict[str, Any], config: dict[str, Any]
) -> Any:
    """``module.execute(step, state, context, config)``."""
    return _callback(_load(module), "execute")(step, state, context, config)
