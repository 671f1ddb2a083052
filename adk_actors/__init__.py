"""adk_actors: a Python agent development kit for Gemini-backed agents, built as an OTP-style actor system.

The facade: start or attach to a node's actor system and talk to it. Every call is an ask with a deadline and
a correlation id; see ``docs/ARCHITECTURE.md`` and ``docs/GUIDE.md``. ``__all__`` is the public API (listed in
``docs/GUIDE.md``, checked by ``actor_tests/test_public_api.py``); runtime internals such as ``LocalRef`` live in
their modules (``adk_actors.runtime.refs``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from adk_actors import live, runs, triggers
from adk_actors.agents import (
    Agent,
    AgentRef,
    AgentTool,
    delegate,
    invoke,
    loop,
    parallel,
    prompt,
    sequential,
    spawn_agent,
    stop_agent,
)
from adk_actors.errors import (
    A2aError,
    ActorCrashed,
    AdkError,
    AgentError,
    AskTimeout,
    AuthError,
    BudgetExceeded,
    ConcurrencyConflict,
    ConfigError,
    ContentError,
    EventError,
    LiveError,
    McpError,
    NameNotFound,
    PluginError,
    PolicyDenied,
    ProviderError,
    ProviderHttpError,
    RateLimited,
    RetryExhausted,
    RunError,
    RunNotFound,
    RuntimeFailure,
    SchemaError,
    SessionError,
    SessionNotFound,
    StorageError,
    StreamError,
    SystemNotRunning,
    ToolError,
    TriggerError,
    ValidationError,
    WorkerError,
    WorkflowError,
)
from adk_actors.events import Event
from adk_actors.node import open_actor_system, session_service, start
from adk_actors.runner import Runner
from adk_actors.runtime.system import ActorSystemHandle, attach, current_system, stop
from adk_actors.settings import Settings, load_settings
from adk_actors.tools import FunctionTool, long_running, request_credential

__all__ = [
    "A2aError",
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
    "LiveError",
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
    "ValidationError",
    "WorkerError",
    "WorkflowError",
    "__version__",
    "attach",
    "current_system",
    "delegate",
    "invoke",
    "live",
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
]
