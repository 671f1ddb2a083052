"""The public API: ``adk_actors.__all__`` is exactly the reviewed list of ``docs/GUIDE.md``, every name resolves,
every error class a caller catches is exported, and runtime internals are not."""

from __future__ import annotations

import importlib
import inspect
import re

import adk_actors
from actor_tests.docs_env import ROOT
from adk_actors import errors

PUBLIC = [
    "ActorCrashed",
    "ActorSystemHandle",
    "AdkError",
    "Agent",
    "AgentError",
    "AgentRef",
    "AgentTool",
    "AskTimeout",
    "AuthError",
    "BudgetExceeded",
    "ConcurrencyConflict",
    "ConfigError",
    "ContentError",
    "Event",
    "EventError",
    "FunctionTool",
    "A2aError",
    "McpError",
    "NameNotFound",
    "PluginError",
    "PolicyDenied",
    "ProviderError",
    "ProviderHttpError",
    "RateLimited",
    "RetryExhausted",
    "RunError",
    "RunNotFound",
    "Runner",
    "RuntimeFailure",
    "SchemaError",
    "SessionError",
    "SessionNotFound",
    "Settings",
    "StorageError",
    "StreamError",
    "SystemNotRunning",
    "ToolError",
    "TriggerError",
    "LiveError",
    "ValidationError",
    "WorkerError",
    "WorkflowError",
    "__version__",
    "attach",
    "current_system",
    "delegate",
    "invoke",
    "load_settings",
    "long_running",
    "loop",
    "open_actor_system",
    "parallel",
    "prompt",
    "request_credential",
    "runs",
    "sequential",
    "session_service",
    "spawn_agent",
    "start",
    "stop",
    "stop_agent",
    "triggers",
    "live",
]
"""The reviewed public API (a change here is an API change: update docs/GUIDE.md and docs/CHANGELOG.md)."""


def _documented() -> set[str]:
    """The names in backticks of the table of ``docs/GUIDE.md``'s "The public API" section."""
    text = (ROOT / "docs" / "GUIDE.md").read_text()
    section = text.split("\n## The public API\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[2] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {name for row in rows[1:] for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row)}


def test_all_is_exactly_the_reviewed_list_and_the_documented_one() -> None:
    assert sorted(adk_actors.__all__) == sorted(PUBLIC)
    assert len(set(adk_actors.__all__)) == len(adk_actors.__all__)
    assert _documented() == set(PUBLIC)


def test_every_public_name_resolves_and_star_import_gives_exactly_them() -> None:
    namespace: dict[str, object] = {}
    exec("from adk_actors import *", namespace)  # the star import a user writes
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(PUBLIC)
    for name in PUBLIC:
        value = getattr(adk_actors, name)
        if name == "__version__":
            assert isinstance(value, str)
        elif inspect.ismodule(value):
            assert value is importlib.import_module(f"adk_actors.{name}")
        else:
            assert value.__module__.startswith("adk_actors."), name
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_every_error_class_is_exported_under_its_own_name() -> None:
    classes = {
        name
        for name in errors.__all__
        if inspect.isclass(getattr(errors, name)) and issubclass(getattr(errors, name), errors.AdkError)
    }
    assert {"ProviderError", "RateLimited", "ToolError", "ValidationError", "RunError", "AgentError"} <= classes
    assert classes <= set(adk_actors.__all__)
    for name in classes:
        assert getattr(adk_actors, name) is getattr(errors, name)


def test_values_users_handle_are_exported() -> None:
    from adk_actors.agents.agent import Agent
    from adk_actors.events import Event

    assert adk_actors.Event is Event and adk_actors.Agent is Agent


def test_runtime_internals_are_not_exported_but_stay_importable() -> None:
    assert "LocalRef" not in adk_actors.__all__
    assert not hasattr(adk_actors, "LocalRef")
    from adk_actors.runtime.refs import LocalRef

    assert LocalRef(0, "agent.A").local_id == "agent.A"
    assert all(not name.startswith("_") or name == "__version__" for name in adk_actors.__all__)
