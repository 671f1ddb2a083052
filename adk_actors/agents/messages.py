"""Messages of the agent actor (frozen dataclasses; the facades in ``api.py`` and ``runner/`` build them, callers
never do): direct turns, and Runner invocations with the events and answers they produce."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.turn.options import RunnerOptions
from adk_actors.events import Event

__all__ = [
    "CancelTurn",
    "Delegated",
    "Describe",
    "GetHistory",
    "Invoke",
    "Prompt",
    "PromptOutcome",
    "ResumeSpec",
    "RunnerTurn",
    "TurnAccepted",
    "TurnEvent",
    "TurnLost",
    "TurnResult",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    """One turn of the agent's compatibility conversation (history kept by the agent, one FIFO)."""

    input: Any
    """The user's input: ``str`` or a content dict."""
    outcome: bool = False
    """Answer with a :class:`PromptOutcome` (the output and the turn's control actions) instead of the output;
    orchestrations (``loop``) use it to see an escalation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptOutcome:
    """The answer to a :class:`Prompt` with ``outcome``."""

    output: Any
    """The output, as a plain :class:`Prompt` answers it."""
    escalate: bool = False
    """A tool of the turn escalated (``tool_context.actions.escalate``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Invoke:
    """One invocation with fresh history, in the session queue of its ``(app_name, user_id, session_id)`` scope."""

    input: Any
    """The input: ``str`` or a content dict."""
    app_name: str = ""
    """Scope: the application ("" when unscoped)."""
    user_id: str = ""
    """Scope: the user ("" when unscoped)."""
    session_id: str = ""
    """Scope: the session ("" when unscoped; an unscoped invocation has a queue of its own)."""
    ancestry: tuple[str, ...] = ()
    """Names of the agents that delegated to this one, root first (cycle and depth protection)."""
    state: dict[str, Any] = field(default_factory=dict)
    """A read-only snapshot of the invocation's scoped state (``key``, ``user:key``, ``app:key``, ``temp:key``)."""
    root_global_instruction: Any = None
    """Set by a delegating agent: the root's ``global_instruction`` (a template ``str`` or a provider
    ``CallableRef``), used instead of this agent's own (``""`` when the root has none); ``None`` makes this agent
    the root of the invocation."""
    commit: bool = False
    """Set by a delegating agent that runs under a Runner (or below one): this agent's ``output_key`` (and its
    tools' and sub-agents' state writes) are committed by the caller, through the invocation's session, so the
    answer is a :class:`Delegated` instead of the bare output."""
    trace: str = ""
    """The ``traceparent`` of the calling agent's span (the sub-agent's spans nest under it), or ``""``."""
    plugins: Any = None
    """Below a Runner: its plugins (a ``PluginPipeline``), which see this agent's turn as well; ``None`` otherwise."""
    run_id: str = ""
    """Below a stable run: its id (plugin hook contexts carry it)."""
    observability: bool = True
    """``False`` below a Runner whose ``observability`` is ``"disabled"``: no spans for this turn either."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delegated:
    """The answer to an :class:`Invoke` with ``commit``: the output and the state the caller commits."""

    output: Any
    """The output (``str`` or a content dict), as an :class:`Invoke` without ``commit`` answers it."""
    state_delta: dict[str, Any] = field(default_factory=dict)
    """``output_key`` values and state written by tools, of this agent and of the agents it delegated to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Describe:
    """Ask an agent for its public shape: ``{"name", "description", "sub_agents", "tools"}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GetHistory:
    """Ask an agent for a copy of its compatibility conversation (a list of history entries)."""


# ---- Runner invocations ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeSpec:
    """Resume a paused invocation: ``key`` is its continuation id or invocation id (``""``: the only one)."""

    key: str
    response: Any = field(repr=False)
    """The validated answer (a credential answer carries the flow's state: never shown, never stored)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerTurn:
    """One Runner invocation (new input, or a resume) in the queue of its session."""

    app_name: str
    user_id: str
    session_id: str
    session_service: Any
    options: RunnerOptions
    input: Any = None
    resume: ResumeSpec | None = None
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sink: Any = None
    """Where each persisted event goes as a :class:`TurnEvent` (a run actor), or ``None``."""
    run_id: str = ""
    trace: str = ""
    """The W3C ``traceparent`` of the span this invocation's spans nest under (the caller's or the run's), or
    ``""`` (a new trace). Correlation only, never authorization."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent:
    """One event the invocation persisted, in session order (``index`` counts from 1 per turn)."""

    turn_id: str
    index: int
    event: Event


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAccepted:
    """Sent to the sink when the agent took the invocation: ``pid`` is the agent's process (the run watches it)."""

    turn_id: str
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnLost:
    """Delivered to the run (by the run index) when the agent's process died with the invocation in it."""

    turn_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelTurn:
    """Cancel a Runner invocation (tell): in-flight provider and tool work is cancelled, the permit released."""

    turn_id: str
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """A Runner invocation's answer: ``completed`` with ``output`` or ``paused`` with the pause ``event``;
    ``events`` is how many :class:`TurnEvent` messages preceded it."""

    kind: str
    output: Any = None
    event: Event | None = None
    events: int = 0
    invocation_id: str = ""
