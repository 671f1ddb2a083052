"""What a turn asks its runner to do: effects out of :class:`~adk_actors.agents.turn.engine.Turn`, results back in.

An effect with an ``id`` expects exactly one result, fed back with ``turn.on(id, value, error)`` (a streaming
model call may also feed ``turn.progress(id, batch)`` first); an effect without one is fire and forget. Effects
are plain frozen values: the agent actor executes them with its I/O threads, worker pool, calls and sends
(``agents/agent_actor.py``), and :mod:`adk_actors.testing.turns` executes them in process with a scripted model.

Deadlines are absolute ``time.monotonic()`` instants computed by the turn; a runner that cannot meet one answers
the effect with an ``AskTimeout`` (the turn maps it to the reason the caller sees).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from adk_actors.context.cache import CacheCall
from adk_actors.errors import AdkError
from adk_actors.telemetry import TelemetryEvent

__all__ = [
    "AcquirePermit",
    "CallAgent",
    "CallModel",
    "CallRemoteTool",
    "Cancel",
    "CheckGate",
    "Compress",
    "Effect",
    "Fail",
    "Ingest",
    "LoadConversation",
    "Log",
    "Notify",
    "ReleasePermit",
    "Reply",
    "ResolveInstructions",
    "RunHook",
    "RunPlugin",
    "RunTool",
    "SaveConversation",
    "SessionCall",
    "Spans",
    "Telemetry",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallModel:
    """Call the model provider (an I/O thread). ``streaming`` ``"text"``/``"content"``: partial batches are fed
    back with ``turn.progress(id, (content, grounding))`` before the result; the result is a ``ModelResponse``."""

    id: int
    config: dict[str, Any] = field(repr=False)
    history: list[dict[str, Any]] = field(repr=False)
    tools: list[dict[str, Any]] = field(repr=False)
    deadline: float
    streaming: str = "none"
    max_stream_bytes: int = 0
    trace: str = ""
    """The ``traceparent`` of the turn's span: the model call's span (at the HTTP boundary) nests under it and the
    request carries it."""
    span: bool = False
    """Record the model call's span (the turn records spans); otherwise the request only carries ``trace``."""
    cache: CacheCall | None = None
    """The Runner's prefix cache for this call (``context_cache``): the executor acquires a cached prefix first and
    sends the request without it (docs/CONTEXT.md); ``None``: a plain call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTool:
    """Run one validated tool call (``adk_actors.agents.toolexec.execute_tool``) in the worker pool, or in the
    agent's own process when ``inline``; the result is the function-response dict (plus recorded actions)."""

    id: int
    index: int
    """The call's position in the model's batch of calls."""
    name: str
    payload: bytes = field(repr=False)
    args: dict[str, Any] = field(repr=False)
    call_id: str | None
    context: dict[str, Any] = field(repr=False)
    callbacks: tuple[str | bytes, ...]
    """The agent's callbacks when some define tool hooks (they run in the same job), else empty."""
    runner: bool
    deadline: float
    inline: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckGate:
    """Evaluate a tool's confirmation gate (``adk_actors.agents.toolexec.check_gate``); the result is
    ``{"required", "hint"}`` or ``{"error"}``."""

    id: int
    index: int
    payload: bytes = field(repr=False)
    args: dict[str, Any] = field(repr=False)
    call_id: str | None
    context: dict[str, Any] = field(repr=False)
    deadline: float
    inline: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHook:
    """Run one callback hook of the agent's callbacks (``adk_actors.agents.callbacks.run_hook``) in a worker; the
    result is the hook's decision. ``id`` 0: fire and forget (``on_error``)."""

    id: int
    hook: str
    callbacks: tuple[str | bytes, ...]
    args: list[Any] = field(repr=False)
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlugin:
    """Run one Runner plugin's hook (``adk_actors.plugins.hooks.run_plugin_hook``): in the worker pool, in the
    agent's own process when ``inline``, or as a call to the stateful plugin ``instance`` (its registered name).
    The result is the normalized hook result (``{"action", "value"?, "reason"?}``). ``id`` 0: a notification,
    fire and forget."""

    id: int
    plugin_id: str
    hook: str
    plugin: str | bytes = field(repr=False)
    config: dict[str, Any] = field(repr=False)
    context: dict[str, Any] = field(repr=False)
    deadline: float
    inline: bool = False
    instance: str | None = None
    max_memory_mb: int | None = None
    """The plugin's memory bound for its worker job (``None``: the pool's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveInstructions:
    """Run the dynamic instruction providers (``adk_actors.agents.instructions.resolve_instructions``) in a
    worker; the result is ``{"instructions"?, "global_instruction"?}`` or ``{"error", ...}``."""

    id: int
    local: Any
    global_: Any
    scope: dict[str, Any] = field(repr=False)
    deadline: float
    artifacts: Any = None
    """The session-bound artifact access the ``{artifact.NAME}`` placeholders are read through."""
    artifact_names: tuple[str, ...] = ()
    """The artifact names the templates' placeholders name (their latest versions are read)."""
    memory: Any = None
    """The app- and user-bound memory access the Runner's preload retrieval searches, or ``None``."""
    memory_query: str = field(default="", repr=False)
    memory_spec: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compress:
    """Summarize folded history for a compaction checkpoint: ``function`` set, a job in the worker pool
    (``function(request)``, ``request`` being ``{"history", "folded_events", "max_summary_bytes"}``, answering
    the summary ``str``); otherwise a provider call (an I/O thread) with ``config`` and ``history``, answering a
    ``ModelResponse``."""

    id: int
    config: dict[str, Any] = field(repr=False)
    """The summarizing provider config (model compressor)."""
    history: list[dict[str, Any]] = field(repr=False)
    """The provider history of the summarization request (model compressor)."""
    function: Any = None
    """The user function's ``CallableRef`` (function compressor)."""
    request: dict[str, Any] = field(default_factory=dict, repr=False)
    """The function compressor's argument."""
    max_memory_mb: int | None = None
    """The function's memory bound for its worker job (``None``: the pool's)."""
    deadline: float
    trace: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ingest:
    """Add an invocation's texts to the user's memory: ``memory_ingestion="on_success"``, a worker job nobody
    waits for (its outcome is only logged); ``"durable"`` (``outbox`` set), a worker job that enqueues them in the
    outbox and kicks its drainer, whose result goes back to the turn as effect ``id``."""

    memory: Any
    session_id: str
    items: tuple[dict[str, str], ...] = field(repr=False)
    deadline: float
    outbox: Any = None
    """Durable mode: the :class:`~adk_actors.memory.drain.DrainerSpec`."""
    id: int = 0
    """Durable mode: the effect id the enqueue's outcome is reported to (the turn waits for the commit)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAgent:
    """Ask another agent (by registered name) for one turn: a sub-agent call, an ``AgentTool`` or a transfer."""

    id: int
    target: str
    request: Any = field(repr=False)
    """An :class:`~adk_actors.agents.messages.Invoke`."""
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRemoteTool:
    """Send a remote tool's call (an MCP tool) to the actor that runs it; the result is the function-response
    part (a dict). Cancelling it sends ``CancelRemoteCall`` to ``target``."""

    id: int
    target: Any
    request: Any = field(repr=False)
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AcquirePermit:
    """Ask the node's ``admission`` actor for a permit (owned by the runner's process); the result is the permit."""

    id: int
    agent: str
    overflow: str
    queue_timeout_ms: int
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleasePermit:
    permit_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionCall:
    """Session-service calls in order, as one step (the node's store actor for the in-memory backend, an I/O
    thread otherwise); the result is the list of their results."""

    id: int
    service: Any = field(repr=False)
    ops: tuple[Any, ...] = field(repr=False)
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadConversation:
    """Load the agent's saved compatibility conversation (a list of history entries; nothing saved: ``[]``)."""

    id: int
    service: Any = field(repr=False)
    agent: str
    key: str
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SaveConversation:
    id: int
    service: Any = field(repr=False)
    agent: str
    key: str
    history: list[Any] = field(repr=False)
    deadline: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Notify:
    """Send ``message`` to ``target`` (an event to the run that watches the invocation)."""

    target: Any
    message: Any = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    """Cancel the in-flight effects ``ids`` (provider calls, tool and gate jobs); their results are ignored."""

    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Telemetry:
    """The turn's telemetry events, handed over once at its end."""

    events: tuple[TelemetryEvent, ...] = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Spans:
    """Finished spans of the turn (:class:`~adk_actors.observability.spans.SpanRecord`), for this process's
    exporter (a no-op when export is off)."""

    records: tuple[Any, ...] = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Log:
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """The turn's answer; the turn is over (its session queue may start the next one)."""

    value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Fail:
    """The turn failed with ``error`` (structural); the turn is over."""

    error: AdkError


Effect: TypeAlias = (
    CallModel
    | RunTool
    | CheckGate
    | RunHook
    | RunPlugin
    | ResolveInstructions
    | Compress
    | Ingest
    | CallAgent
    | CallRemoteTool
    | AcquirePermit
    | ReleasePermit
    | SessionCall
    | LoadConversation
    | SaveConversation
    | Notify
    | Cancel
    | Telemetry
    | Spans
    | Log
    | Reply
    | Fail
)
