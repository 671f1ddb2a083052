"""One agent turn as a sans-I/O state machine: results in, effects out.

A :class:`Turn` is every path an agent answers: a compatibility ``prompt``/``delegate`` turn, an ``invoke`` (a
sub-agent call, an ``AgentTool``, a transfer), and a Runner invocation against a session (with admission, events,
budgets, runtime policy, streaming, pauses and resumes). It never does I/O and never runs user code: it hands out
:mod:`effects <adk_actors.agents.turn.effects>` and is fed their results::

    turn = Turn(plan, input="hi", caller_deadline=deadline)
    execute(turn.start())
    # for each result:  execute(turn.on(effect.id, value, error))
    # until a Reply or Fail effect came out (turn.answered)

The states and the effects each one hands out (ARCHITECTURE.md has the picture)::

    queued ─start─▶ [admit]──▶ [load session | load conversation] ─▶ input checked ─▶ [instructions]
        ─▶ model: before_model hook? ─▶ CallModel ─▶ after_model hook? ─▶ answer
             answer with calls ─▶ round: RunTool / CheckGate / CallAgent per group ─▶ (tool event) ─▶ model
             answer without calls ─▶ (final event) ─▶ done
             a tool transferred ─▶ CallAgent(target) ─▶ (final event) ─▶ done
             a gated or long-running call ─▶ (pause event) ─▶ done(paused)
        done ─▶ [error event, temp cleared] ─▶ [permit released] ─▶ [conversation saved] ─▶ Reply | Fail

Bracketed steps exist only on some paths: admission, the session and its events only for a Runner invocation;
the conversation only for compatibility turns of an agent with a ``session_id``. A Runner invocation's events are
written one at a time, in order (each a :class:`~adk_actors.agents.turn.effects.SessionCall`), and each stored
event is sent to the invocation's sink.

Once the turn is done, results of effects still in flight are ignored, except those the end itself needs (the
admission answer, so a late permit is released; session writes; the conversation save).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from adk_actors.agents.context import (
    COMPACTION,
    CompactionPlan,
    check_request_envelope,
    history_from_events,
    plan_compaction,
)
from adk_actors.agents.instructions import artifact_names, render_template
from adk_actors.agents.messages import Delegated, Invoke, PromptOutcome, RunnerTurn, TurnEvent, TurnResult
from adk_actors.agents.spec import AgentSpec, ToolSpec, compile_spec_catalog
from adk_actors.agents.toolexec import ACTIONS_KEY, CONFIRMATION_REASON, STATE_DELTA_KEY
from adk_actors.agents.turn.effects import (
    AcquirePermit,
    CallAgent,
    CallModel,
    CallRemoteTool,
    Cancel,
    CheckGate,
    Compress,
    Effect,
    Fail,
    Ingest,
    LoadConversation,
    Log,
    Notify,
    ReleasePermit,
    Reply,
    ResolveInstructions,
    RunHook,
    RunPlugin,
    RunTool,
    SaveConversation,
    SessionCall,
    Spans,
    Telemetry,
)
from adk_actors.agents.turn.pauses import (
    OPEN,
    action_id,
    audit_event,
    check_resume_response,
    claim_delta,
    error_event,
    open_pauses,
    pause_event,
    pause_key,
    round_state,
    select_pause,
)
from adk_actors.artifacts.tool import take_request_parts, with_request_parts
from adk_actors.content.json_values import copy_json
from adk_actors.content.parts import FunctionCallPart, FunctionResponsePart
from adk_actors.context.cache import CacheCall, CacheOptions, scope_fingerprint
from adk_actors.errors import (
    AdkError,
    AgentError,
    AskTimeout,
    BudgetExceeded,
    ConcurrencyConflict,
    ContentError,
    PolicyDenied,
    ProviderError,
    ProviderHttpError,
    RunError,
    SchemaError,
    SessionNotFound,
    ToolError,
    ValidationError,
)
from adk_actors.events import Event, EventActions
from adk_actors.models import ModelResponse, as_response
from adk_actors.models.results import check_response
from adk_actors.observability import semconv
from adk_actors.observability.spans import OpenSpan, SpanRecord, span_start
from adk_actors.observability.trace import TraceContext, parse_traceparent
from adk_actors.plugins.descriptors import PluginPipeline
from adk_actors.plugins.pipeline import interpret
from adk_actors.policy import Decision
from adk_actors.runtime.callables import CallableRef
from adk_actors.schema import compile_schema
from adk_actors.secrets import prune_secrets, scrub_text
from adk_actors.sessions.messages import SessionOp
from adk_actors.sessions.model import SessionRef
from adk_actors.telemetry import TelemetryEvent
from adk_actors.telemetry import event as telemetry_event
from adk_actors.tools import failed_function_response, tool_result_response

__all__ = ["HORIZON_S", "AgentPlan", "Conversation", "Turn", "structural_failure"]

HORIZON_S = 30 * 86400.0
"""How far an ``infinity`` setting reaches: timers and job deadlines need a finite instant."""
_AFTERWORK_S = 60.0
"""The bound of the work a finished turn leaves behind (its ``on_error`` hook, the conversation save) when
``agent_call_timeout`` is ``infinity``: that work has no caller waiting on it, so nothing else would end it."""
_WRITE_TIMEOUT_S = 30.0
_PROVIDER_TAGS = frozenset(
    {
        "status",
        "google_status",
        "error_reason",
        "retry_delay_s",
        "midstream",
        "cause",
        "block_reason",
        "request_timeout_ms",
        "frames",
        "frame",
        "limit",
        "bytes",
        "line_bytes",
        "type",
    }
)
_TAG_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

_NOT_FOR_SUMMARIES = frozenset(
    {
        "instructions",
        "global_instruction",
        "builtin_tools",
        "tool_config",
        "generation_config",
        "thinking_config",
        "response_mime_type",
        "response_schema",
        "cached_content",
        "input_schema",
        "output_schema",
        "output_key",
        "sub_agents",
        "callbacks",
        "callback_config",
    }
)
"""Agent config keys a model compressor's request leaves out: it summarizes, with no tools, schema or cache."""
_SUMMARIZE_INSTRUCTIONS = (
    "You compress a conversation for your own later reference. Write a factual summary of the conversation so "
    "far: the user's goals and questions, the facts, names, numbers and decisions established, tool results that "
    "matter, and what is still open. Plain text, at most {limit} bytes, no preamble."
)
_SUMMARIZE_ASK = "Summarize the conversation above now, as instructed."

OnResult = Callable[[Any, AdkError | None], None]


def ms(value: int | None) -> float:
    """A millisecond setting in seconds (``None``: infinity), clamped at the horizon so a huge integer
    (``run_timeout=10**5000``) cannot overflow float division."""
    return float("inf") if value is None else min(value, HORIZON_S * 1000) / 1000.0


def _is_tag(value: Any) -> bool:
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and _TAG_RE.fullmatch(value) is not None


def structural_failure(error: AdkError) -> AdkError:
    """A provider failure as callers, hooks, logs and the model may see it: the same class and reason with bounded
    structural tags only (HTTP status, the provider's status code and error reason, retry delay), never the
    provider's error text or body. Other errors are returned as they are."""
    if not isinstance(error, ProviderError):
        return error
    details = {k: v for k, v in error.details.items() if k in _PROVIDER_TAGS and _is_tag(v)}
    status = details.get("status")
    message = (
        f"the model provider answered HTTP {status}"
        if isinstance(error, ProviderHttpError) and isinstance(status, int)
        else "the model provider call failed"
    )
    return type(error)(message, reason=error.reason[:64], details=details)


def _action(decision: Any, error: AdkError | None) -> tuple[str, Any]:
    """A callback job's decision; a failed job or a malformed answer means ``continue``."""
    if error is not None or not isinstance(decision, dict):
        return "continue", None
    return str(decision.get("action", "continue")), decision.get("value")


def _as_response(value: str | dict[str, Any]) -> ModelResponse:
    try:
        return as_response(value)
    except (TypeError, AdkError):
        return as_response("")


def _conform(schema: Any, value: Any, field: str, agent: str) -> None:
    """Check an agent's input or output (JSON text, or an already-decoded value) against its ``input_schema`` /
    ``output_schema``: ``SchemaError(reason="invalid_input" | "invalid_output")``, naming only the agent."""
    try:
        compile_schema(schema).validate(json.loads(value) if isinstance(value, str) else value, field=field)
    except (ValueError, SchemaError):
        raise SchemaError(
            f"the {field} does not satisfy the agent's {field}_schema",
            reason=f"invalid_{field}",
            details={"agent": agent},
        ) from None


def _tool_failure(value: Any, error: AdkError | None) -> str | None:
    """The reason a tool job failed (its error, or the reason of a failed function response), for its span."""
    if error is not None:
        return error.reason
    response = value.get("response") if isinstance(value, dict) else None
    failure = response.get("error") if isinstance(response, dict) and set(response) == {"error"} else None
    return str(failure.get("reason", "tool_error"))[:64] if isinstance(failure, dict) else None


def _parent(traceparent: str) -> TraceContext | None:
    """The parent span of a turn: a well-formed ``traceparent``, else none (the turn starts a trace)."""
    if not traceparent:
        return None
    try:
        return parse_traceparent(traceparent)
    except AdkError:
        return None


_METADATA_KEYS = frozenset({"tool", "call_id", "tool_failures", "error"})


def _metadata_view(extra: Mapping[str, Any]) -> dict[str, Any]:
    """A hook context's extras as a ``metadata_only`` plugin gets them: names, ids and reason tags, never content
    (a response keeps its finish reason, an event its id and flags)."""
    view = {k: v for k, v in extra.items() if k in _METADATA_KEYS}
    response = extra.get("response")
    if isinstance(response, Mapping):
        view["response"] = {"finish_reason": response.get("finish_reason")}
    event = extra.get("event")
    if isinstance(event, Mapping):
        view["event"] = {k: event.get(k) for k in ("id", "partial", "is_final")}
    return view


def _amended(hook: str, current: Any, amendment: Any) -> Any:
    """What the next plugin of a chain sees after an amendment, in the same shape as the first one saw: a partial
    ``before_model`` request merges into the request; an ``after_model`` answer becomes a response view again."""
    if hook == "before_model" and isinstance(current, dict) and isinstance(amendment, dict):
        return {**current, **amendment}
    if hook == "after_model":
        return _response_view(_as_response(amendment))
    return amendment


def _content_of(output: Any) -> Any:
    """An output as event content: text becomes one text part; a content dict is itself."""
    return {"schema_version": 1, "parts": [{"type": "text", "text": output}]} if isinstance(output, str) else output


def _response_view(response: ModelResponse) -> dict[str, Any]:
    """A model answer as hooks see it."""
    return {
        "text": response.text,
        "content": response.content,
        "function_calls": [dict(c) for c in response.function_calls],
        "finish_reason": response.finish_reason,
    }


def _denied(decision: Decision) -> PolicyDenied:
    return PolicyDenied(
        "the runtime policy denied the operation",
        reason=decision.reason,
        details={"operation": decision.operation, "subject": decision.subject, "policy_id": decision.policy_id},
    )


class AgentPlan:
    """What every turn of one agent shares, compiled once from its :class:`AgentSpec`: the tool catalog, the
    declarations the model sees, the tools by name, the sub-agent names and the callback projection."""

    __slots__ = ("catalog", "declarations", "spec", "sub_names", "tool_hooks", "tools")

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.catalog, self.declarations = compile_spec_catalog(spec)
        self.tools: dict[str, ToolSpec] = {t.name: t for t in spec.tools}
        self.sub_names = frozenset(spec.sub_agent_names())
        self.tool_hooks = any(h.endswith("_tool") for h in spec.callback_hooks)

    def callback_view(self) -> dict[str, Any]:
        """What callbacks see of the agent config: model metadata and the pruned ``callback_config`` only (a fresh
        copy per hook; built only when a hook runs, so a provider object in the config costs nothing otherwise)."""
        spec = self.spec
        config = spec.model_config
        view = {
            "agent": spec.name,
            "provider": config.get("provider", "gemini"),
            "model": config.get("model"),
            "generation_config": config.get("generation_config", {}),
            "callback_config": spec.callback_config,
        }
        copied: dict[str, Any] = copy_json(prune_secrets(view))[0]
        return copied


@dataclass(slots=True)
class Conversation:
    """The agent's compatibility conversation, shared by its ``prompt`` turns (one at a time: one queue)."""

    history: list[dict[str, Any]] = field(default_factory=list)
    loaded: bool = True


@dataclass(slots=True)
class _Write:
    event: Event
    expected: Mapping[str, Any] | None
    then: Callable[[], None]
    always: bool
    boundary: bool


@dataclass(slots=True)
class _Session:
    """The Runner part of a turn: its session, permit, events and budgets."""

    request: RunnerTurn
    permit: Any = None
    started: bool = False
    """The invocation touched the session (its user event or its resume claim is stored)."""
    ending: bool = False
    write_failed: bool = False
    events: list[Event] = field(default_factory=list)
    writes: deque[_Write] = field(default_factory=deque)
    temp_cleared: bool = False
    writing: bool = False
    sent: int = 0
    llm_calls: int = 0
    persisted: set[int] = field(default_factory=set)
    approved: set[int] = field(default_factory=set)
    state_delta: dict[str, Any] = field(default_factory=dict)
    """State the round's tools wrote (``tool_context.actions``), stored with the round's tool event."""
    streamed: list[str] = field(default_factory=list)
    """Text streamed by the current model call (checked against the policy's content budget as it arrives)."""
    control: dict[str, Any] = field(default_factory=dict)
    """Control actions the round's tools recorded (``escalate``, ``transfer_to_agent``), for its tool event."""

    @property
    def ref(self) -> SessionRef:
        r = self.request
        return SessionRef(app_name=r.app_name, user_id=r.user_id, session_id=r.session_id)


class Turn:
    """One turn of one agent; see the module docstring.

    Args:
        plan: the agent's compiled plan.
        input: the turn's input (``str`` or a content dict; ignored by a resume).
        scope: ``{"app_name", "user_id", "session_id"}`` of an ``invoke`` or Runner invocation (empty otherwise).
        conversation: the agent's compatibility conversation: this is a ``prompt`` turn.
        runner: the Runner invocation this turn runs.
        ancestry, state, root_global, commit: an ``invoke`` (see :class:`~adk_actors.agents.messages.Invoke`).
        outcome: answer a :class:`~adk_actors.agents.messages.PromptOutcome`.
        trace: the ``traceparent`` of the caller's span (a Runner invocation's own comes with it).
        tracing: record spans (``Spans`` effects) for this turn.
        plugins, run_id: an ``invoke`` below a Runner: the Runner's plugins and run id (see ``Invoke``).
        clock: the monotonic clock deadlines are computed with.
    """

    def __init__(
        self,
        plan: AgentPlan,
        *,
        input: Any = None,
        scope: Mapping[str, str] | None = None,
        conversation: Conversation | None = None,
        runner: RunnerTurn | None = None,
        ancestry: tuple[str, ...] = (),
        state: Mapping[str, Any] | None = None,
        root_global: Any = None,
        commit: bool = False,
        outcome: bool = False,
        trace: str = "",
        tracing: bool = False,
        plugins: PluginPipeline | None = None,
        run_id: str = "",
        observability: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.input = input
        self.memory_block = ""
        """The Runner's memory preload for this invocation (reference data for its model calls only)."""
        self.scope: dict[str, str] = dict(scope or {})
        self.conversation = conversation
        self.session = _Session(runner) if runner is not None else None
        self.ancestry = ancestry
        self.state: dict[str, Any] = dict(state or {})
        self.root_global = root_global
        self.commit = commit
        self.outcome = outcome
        self.clock = clock
        self.plugins = runner.options.plugins if runner is not None else plugins
        """The Runner's plugins: its own invocation's, or inherited by an agent it delegated to."""
        self.run_id = runner.run_id if runner is not None else run_id
        self.parent_trace = trace or (runner.trace if runner is not None else "")
        """The ``traceparent`` this turn's spans nest under (``""``: the turn starts a trace)."""
        self.observability = runner.options.observability if runner is not None else observability
        """Spans for this turn's Runner (``observability="disabled"`` holds for the agents it delegates to too)."""
        self.tracing = tracing and self.observability
        """Record spans (the runner's process exports them, and a Runner's ``observability`` is not disabled)."""
        self.span: OpenSpan | None = None
        """The turn's ``invoke_agent`` span while it runs."""
        self.open_spans: dict[Any, OpenSpan] = {}
        self.spans: list[SpanRecord] = []
        self.invocation_id = uuid.uuid4().hex
        self.config: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []
        self.deadline = 0.0
        self.rounds = 0
        self.done = False
        """The turn has its outcome (later results of its effects are ignored); its end may still be running."""
        self.answered = False
        """A Reply or Fail came out."""
        self.calls: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any] | None] = []
        self.groups: deque[list[int]] = deque()
        self.outstanding = 0
        self.dispatching = False
        self.started = 0.0
        self.model_started = 0.0
        self.tokens: dict[str, int] | None = None
        """The turn's provider token counts so far (summed over its model calls), reported at its end."""
        self.tool_started: dict[int, float] = {}
        self.request_config: dict[str, Any] = {}
        """What ``before_model`` plugins changed in the config of the next model call (that call only)."""
        self.call_args: dict[int, dict[str, Any]] = {}
        """The validated arguments each call of the round ran with (for the plugins' ``after_tool`` context)."""
        self.tool_failures: dict[str, int] = {}
        """Failed calls per tool name in this invocation (``on_tool_error`` contexts' ``tool_failures``)."""
        self.telemetry: list[TelemetryEvent] = []
        self.delta: dict[str, Any] = {}
        """State written below a ``commit`` turn (its sub-agents' ``output_key`` values, its tools' state writes),
        passed up to the caller with the turn's own ``output_key`` value."""
        self.after_config: Callable[[], None] | None = None
        self.escalate = False
        self.transfer: str | None = None
        """The sub-agent a tool of the current round handed the turn to (taken once the round is answered)."""
        self.request_parts: list[dict[str, Any]] = []
        """Content the round's tools (``load_artifacts``) gave the next model request only (never stored)."""
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[OnResult, bool]] = {}
        self._progress: dict[int, Callable[[Any], None]] = {}
        self._cancellable: set[int] = set()
        self._out: list[Effect] = []

    @property
    def kind(self) -> str:
        return "runner" if self.session is not None else "prompt" if self.conversation is not None else "invoke"

    @property
    def _runner(self) -> _Session:
        """The Runner part of the turn, on a path only a Runner invocation takes."""
        if self.session is None:
            raise AssertionError("a Runner step of a turn that is not a Runner invocation")
        return self.session

    @property
    def turn_id(self) -> str | None:
        """The Runner invocation's turn id (``None`` off a Runner)."""
        return self.session.request.turn_id if self.session is not None else None

    # ---- the driver's interface ---------------------------------------------------------------------------------
    def start(self, caller_deadline: float = float("inf")) -> list[Effect]:
        """Begin the turn (its session queue admitted it); ``caller_deadline`` is when its asker gives up."""
        spec = self.spec
        now = self.clock()
        limit = spec.turn_timeout_ms
        if self.session is not None and self.session.request.options.run_timeout_ms is not None:
            limit = self.session.request.options.run_timeout_ms
        self.deadline = min(caller_deadline, now + ms(limit), now + HORIZON_S)
        self.started = now
        if self.tracing:
            name, attributes = semconv.agent_invocation(spec.name, conversation_id=self.scope.get("session_id") or None)
            if self.session is not None:
                attributes = {**attributes, **self.session.request.options.span_attributes}
            self.span = span_start(name, _parent(self.parent_trace), attributes, "internal")
        self._emit("agent.prompt.start", {})
        if self.session is not None:
            self._admit()
        elif self.conversation is not None and not self.conversation.loaded:
            self._load_conversation()
        elif self._has("before_agent"):  # an agent a Runner delegated to: the Runner's plugins see it too
            self._hook("before_agent", {}, None, self._delegated_start)
        else:
            self._begin()
        return self._drain()

    def _delegated_start(self, kind: str, value: Any) -> None:
        if kind == "return":
            self._finish(Delegated(output=value, state_delta=dict(self.delta)) if self.commit else value, None)
        else:
            self._begin()

    def on(self, effect_id: int, value: Any, error: AdkError | None) -> list[Effect]:
        """The result of effect ``effect_id``: ``value``, or ``error``."""
        waiting = self._waiting.pop(effect_id, None)
        self._progress.pop(effect_id, None)
        self._cancellable.discard(effect_id)
        if waiting is not None and (waiting[1] or not self.done):
            waiting[0](value, error)
        return self._drain()

    def progress(self, effect_id: int, value: Any) -> list[Effect]:
        """A partial result of a streaming effect (a batch of a model stream)."""
        on_progress = self._progress.get(effect_id)
        if on_progress is not None and not self.done:
            on_progress(value)
        return self._drain()

    def cancel(self, error: AdkError) -> list[Effect]:
        """End the turn now with ``error`` (a cancelled Runner invocation); a finished turn is left alone."""
        if not self.done:
            self._finish(None, error)
        return self._drain()

    def abort(self, error: AdkError) -> list[Effect]:
        """The agent is exiting: release the permit and answer ``error`` unless answered; nothing else runs."""
        self.done = True
        if self.session is not None:
            self._release_permit()
        if not self.answered:
            self._answer(None, error)
        return self._drain()

    def in_flight(self) -> int:
        """How many of this turn's effects still await a result."""
        return len(self._waiting)

    # ---- effects ------------------------------------------------------------------------------------------------
    def _drain(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def _id(self, on_result: OnResult, *, always: bool = False, cancellable: bool = False) -> int:
        effect_id = next(self._ids)
        self._waiting[effect_id] = (on_result, always)
        if cancellable:
            self._cancellable.add(effect_id)
        return effect_id

    def _emit(self, name: str, measurements: dict[str, Any], **metadata: Any) -> None:
        """Record a telemetry event of this turn (structural metadata only; handed over once, at the end)."""
        self.telemetry.append(
            telemetry_event(
                name,
                measurements,
                agent=self.spec.name,
                kind="prompt" if self.conversation is not None else "invoke",
                invocation_id=self.invocation_id,
                **metadata,
            )
        )

    @property
    def trace(self) -> str:
        """The ``traceparent`` of the turn's span (what its model calls and sub-agents nest under); without spans, the
        caller's, so the trace still travels (``""``: none)."""
        return self.span.context.traceparent if self.span is not None else self.parent_trace

    def _child_span(self, key: Any, name: str, attributes: dict[str, Any], kind: str = "internal") -> None:
        if self.span is not None:
            self.open_spans[key] = span_start(name, self.span.context, attributes, kind)

    def _end_span(self, key: Any, error: str | None = None) -> None:
        span = self.open_spans.pop(key, None)
        if span is not None:
            self.spans.append(span.end(status="error" if error else "ok", error_type=error))

    def _bounded(self) -> float | None:
        """The deadline of the next step, or ``None`` (after failing the turn) when the turn's time is up."""
        now = self.clock()
        if now >= self.deadline:
            self._finish(None, self._turn_timeout())
            return None
        return min(self.deadline, now + ms(self.spec.call_timeout_ms))

    def _turn_timeout(self) -> AskTimeout:
        return AskTimeout(
            "the agent turn passed its deadline", reason="agent_turn_timeout", details={"agent": self.spec.name}
        )

    def _afterwork_deadline(self) -> float:
        """The (finite) deadline of work a finished turn leaves behind: ``agent_call_timeout``, or
        :data:`_AFTERWORK_S` when that is ``infinity``."""
        timeout = self.spec.call_timeout_ms
        return self.clock() + (_AFTERWORK_S if timeout is None else timeout / 1000.0)

    def _memory_preload(self) -> tuple[Any, str, dict[str, Any] | None]:
        """``(access, query, spec)`` of the Runner's memory preload for this invocation's input, or ``(None, "",
        None)`` (no retrieval configured, a resume, or no text to search with)."""
        session = self.session
        if session is None or session.request.resume is not None:
            return None, "", None
        spec = session.request.options.memory_retrieval
        access = self._memory_access()
        query = _text_of(self.input)[:1024].strip()
        if spec is None or access is None or not query:
            return None, "", None
        return access, query, spec

    def _memory_access(self) -> Any:
        """The Runner's memory service bound to this invocation's app and user, or ``None``."""
        if self.session is None or self.session.request.options.memory_svc is None:
            return None
        from adk_actors.memory.access import MemoryAccess

        return MemoryAccess(self.session.request.options.memory_svc, self.scope["app_name"], self.scope["user_id"])

    def _artifact_access(self) -> Any:
        """The Runner's artifact service bound to this invocation's session, or ``None``."""
        if self.session is None or self.session.request.options.artifact_svc is None:
            return None
        from adk_actors.artifacts.access import ArtifactAccess

        ids = self.scope
        return ArtifactAccess(
            self.session.request.options.artifact_svc, ids["app_name"], ids["user_id"], ids["session_id"]
        )

    def _context(self, span: Any = None) -> dict[str, Any]:
        """A tool call's context (``ToolContext`` fields); ``span``: the call's own span, the trace it continues."""
        context: dict[str, Any] = {
            "invocation_id": self.invocation_id,
            "agent_name": self.spec.name,
            **self.scope,
            "state": self.state,
            "ancestry": (*self.ancestry, self.spec.name),
        }
        access = self._artifact_access()
        if access is not None:
            context["artifacts"] = access
        memory = self._memory_access()
        if memory is not None:
            context["memory"] = memory
        trace = self.open_spans[span].context.traceparent if span in self.open_spans else self.trace
        if trace:
            context["traceparent"] = trace
        return context

    # ---- start: admission, session, conversation, input ---------------------------------------------------------
    def _admit(self) -> None:
        session = self._runner
        admission = session.request.options.admission
        if admission is None:
            self._pre_run()
            return

        asked = self.clock()

        def granted(permit: Any, error: AdkError | None) -> None:
            self._end_span("admission", error.reason if error is not None else None)
            self._emit(
                "runner.admission.wait",
                {"wait_ms": round((self.clock() - asked) * 1000, 3)},
                outcome="granted" if error is None else error.reason[:64],
            )
            if error is not None:
                if self.done:
                    return
                # The admission queue holds a request no longer than its caller waits: past the invocation's
                # deadline, the run timed out (whichever of the two answers arrived first).
                if (
                    isinstance(error, AskTimeout) or error.reason == "admission_timeout"
                ) and self.clock() >= self.deadline:
                    error = self._turn_timeout()
                self._finish(None, error)
                return
            session.permit = permit
            if self.done:  # cancelled while queued for admission
                self._release_permit()
                return
            self._pre_run()

        self._child_span("admission", *semconv.admission_wait(self.spec.name))
        self._out.append(
            AcquirePermit(
                id=self._id(granted, always=True),
                agent=self.spec.name,
                overflow=admission.get("overflow", ""),
                queue_timeout_ms=int(admission.get("queue_timeout", -1)),
                deadline=self.deadline,
            )
        )

    def _release_permit(self) -> None:
        if self.session is not None and self.session.permit is not None:
            self._out.append(ReleasePermit(permit_id=self.session.permit.permit_id))
            self.session.permit = None

    def _load_conversation(self) -> None:
        """Load the persisted conversation (``session_id``) before the first compatibility turn runs."""
        spec = self.spec
        assert spec.session_id is not None

        def loaded(value: Any, error: AdkError | None) -> None:
            if error is not None and not isinstance(error, SessionNotFound):
                self._finish(None, error)  # the next turn tries again
                return
            assert self.conversation is not None
            self.conversation.loaded = True
            self.conversation.history = [] if error is not None else list(value)
            self._begin()

        self._out.append(
            LoadConversation(
                id=self._id(loaded),
                service=spec.session_service,
                agent=spec.name,
                key=spec.session_id,
                deadline=min(self.deadline, self.clock() + ms(spec.call_timeout_ms)),
            )
        )

    def _begin(self) -> None:
        try:
            user_content = self._check_input(self.input)
        except AdkError as err:
            self._finish(None, err)
            return
        conversation = self.conversation
        prior = conversation.history if conversation is not None and self.spec.history_policy == "include" else []
        self.history = [*prior, {"role": "user", "content": user_content}]
        self._resolve_instructions()

    def _check_input(self, value: Any) -> Any:
        spec = self.spec
        if not isinstance(value, str | dict):
            raise ValidationError(
                "agent input is a str or a content dict", reason="invalid_input", details={"type": type(value).__name__}
            )
        if spec.input_schema is not None:
            _conform(spec.input_schema, value, "input", spec.name)
        return value

    def _session_call(
        self, ops: list[SessionOp], on_done: Callable[[Any, AdkError | None], None], deadline: float | None = None
    ) -> None:
        """Session-service calls of this invocation, in order, as one step (never cancelled half-way)."""
        session = self._runner
        self._out.append(
            SessionCall(
                id=self._id(on_done, always=True),
                service=session.request.session_service,
                ops=tuple(ops),
                deadline=deadline if deadline is not None else self.clock() + _WRITE_TIMEOUT_S,
            )
        )

    def _load_session(self) -> None:
        """Read the session (creating it), storing the user event in the same step after the input checks."""
        session = self._runner
        ref = session.ref
        load = SessionOp(
            method="create_session",
            kwargs={"app_name": ref.app_name, "user_id": ref.user_id, "session_id": ref.session_id},
        )
        user: Event | None = None
        denial: Decision | None = None
        if session.request.resume is None:
            policy = session.request.options.runtime_policy
            if policy is not None:
                denial = next(
                    (
                        d
                        for d in (
                            policy.check_agent(self.spec.name),
                            policy.check_content("input_content", self.spec.name, self.input),
                        )
                        if not d.allowed
                    ),
                    None,
                )
            if denial is None:
                try:
                    self._check_input(self.input)
                    user = Event.new(invocation_id=self.invocation_id, author="user", content=self.input).redacted()
                except AdkError as err:
                    self._finish(None, err)  # nothing stored: the session is not even read
                    return

        def loaded(results: list[Any], error: AdkError | None) -> None:
            if error is not None:
                if not self.done:
                    self._finish(None, error)
                return
            stored = results[0]
            session.events = list(stored.events)
            self.state = dict(stored.state)
            if user is not None:  # the user event went in with the load: the invocation has started
                session.started = True
                self._stored(user)
                self.state = dict(results[1].state)
            if self.done:
                return
            if session.request.resume is not None:
                self._resume()
            elif denial is not None:
                self._deny(denial, partial(self._finish, None, _denied(denial)))
            else:
                self._resolve_instructions()

        def issue(event: Event | None) -> None:
            nonlocal user
            if user is not None and event is None:
                return  # an on_event plugin halted the turn before anything was stored
            user = event
            ops = [load] if user is None else [load, SessionOp(method="add_event", args=(ref, user))]
            self._session_call(ops, loaded, deadline=min(self.deadline, self.clock() + _WRITE_TIMEOUT_S))

        if user is None:
            issue(None)
        else:
            self._event_hook(user, issue)

    # ---- resume -------------------------------------------------------------------------------------------------
    def _resume(self) -> None:
        session = self._runner
        resume = session.request.resume
        assert resume is not None
        try:
            found = select_pause(open_pauses(session.events, self.state), resume.key)
            pause = found.event.actions.pause
            assert pause is not None
            response = check_resume_response(pause, resume.response)
            state = round_state(session.events, found.invocation_id)
            call_id = pause.details.get("call_id") or None
            name = pause.details.get("function_name")
            gated = next(
                (
                    i
                    for i, c in enumerate(state.calls)
                    if i not in state.answered and c.get("name") == name and (c.get("id") or None) == call_id
                ),
                None,
            )
            if gated is None:
                raise RunError("the paused call is no longer open", reason="no_paused_invocation")
        except AdkError as err:
            self._finish(None, err)  # nothing claimed: the continuation stays resumable
            return
        self.invocation_id = found.invocation_id
        self.calls = state.calls
        self.responses = [state.answered.get(i) for i in range(len(state.calls))]
        self.rounds = state.rounds
        session.llm_calls = state.llm_calls
        session.persisted = set(state.answered)
        call = state.calls[gated]
        expected = {pause_key(found.continuation_id): OPEN}
        delta = claim_delta(found.continuation_id)
        if pause.reason == "long_running":
            # The terminal response is recorded against the original call: its invocation, its call id and
            # (a function-response part has no field for it) its thought signature in the event's own field.
            part = FunctionResponsePart(name=call["name"], id=call.get("id"), response=response).to_dict()
            signature = call.get("thought_signature")
            claim = Event.new(
                invocation_id=self.invocation_id,
                author=self.spec.name,
                content={"schema_version": 1, "parts": [part]},
                actions=EventActions(state_delta=delta),
                thought_signature=signature or None,
            )
            self.responses[gated] = part
            session.persisted.add(gated)
        elif pause.reason == "credential":
            # The flow completed (or was given up): the call runs again and finds the stored credential.
            claim = Event.new(invocation_id=self.invocation_id, author="user", actions=EventActions(state_delta=delta))
            if response.get("cancelled"):
                self.responses[gated] = failed_function_response(
                    call["name"],
                    call.get("id"),
                    ToolError("the user gave up the sign-in", reason="credential_request_cancelled"),
                ).to_dict()
            else:
                session.approved.add(gated)
        else:
            claim = Event.new(invocation_id=self.invocation_id, author="user", actions=EventActions(state_delta=delta))
            if response["confirmed"]:
                session.approved.add(gated)
            else:
                self.responses[gated] = failed_function_response(
                    call["name"],
                    call.get("id"),
                    ToolError("the user rejected the call", reason="tool_confirmation_rejected"),
                ).to_dict()

        def claimed() -> None:
            session.started = True
            rest = [i for i in range(len(self.calls)) if self.responses[i] is None]
            self.groups = self._group([i for i in rest if i != gated])
            if gated in rest:
                self.groups.appendleft([gated])
            self.after_config = self._next_group
            self._resolve_instructions()

        self._persist(claim, claimed, expected=expected)

    # ---- events: one write at a time, in order ------------------------------------------------------------------
    def _persist(
        self,
        event: Event,
        then: Callable[[], None],
        *,
        expected: Mapping[str, Any] | None = None,
        always: bool = False,
        boundary: bool = False,
    ) -> None:
        """Store ``event`` after every earlier write of this turn, send it to the sink, then call ``then``
        (skipped once the turn is done unless ``always``). ``boundary``: the invocation's final or error event —
        the ``temp:`` state is cleared in the same step."""
        session = self._runner
        session.writes.append(_Write(event.redacted(), expected, then, always, boundary))
        self._pump()

    def _stored(self, event: Event) -> None:
        """``event`` is in the session: keep it for the history and send it to the sink."""
        session = self._runner
        session.events.append(event)
        session.sent += 1
        if session.request.sink is not None:
            self._out.append(
                Notify(
                    target=session.request.sink,
                    message=TurnEvent(turn_id=session.request.turn_id, index=session.sent, event=event),
                )
            )

    def _pump(self) -> None:
        session = self._runner
        if session.writing or not session.writes:
            return
        write = session.writes.popleft()
        session.writing = True
        self._event_hook(write.event, partial(self._write, write))

    def _write(self, write: _Write, event: Event | None) -> None:
        """Store one event (``None``: an ``on_event`` plugin halted the turn, the event is not stored)."""
        session = self._runner
        if event is None:
            session.writing = False
            self._pump()
            return
        write.event = event

        def written(_seq: Any, error: AdkError | None) -> None:
            session.writing = False
            if error is not None:
                # Nothing after a failed write is stored; the boundary's continuations still run.
                owed = [w.then for w in session.writes if w.always] + ([write.then] if write.always else [])
                session.writes.clear()
                session.write_failed = True
                if isinstance(error, ConcurrencyConflict) and write.expected is not None:
                    error = RunError("the paused invocation was already resumed", reason="no_paused_invocation")
                if not self.done:
                    self._finish(None, error)
                for continuation in owed:
                    continuation()
                return
            self._stored(write.event)
            session.temp_cleared = session.temp_cleared or write.boundary
            if write.always or not self.done:
                write.then()
            self._pump()

        ref = session.ref
        ops = [
            SessionOp(method="add_event", args=(ref, write.event))
            if write.expected is None
            else SessionOp(method="add_event_if_state", args=(ref, write.event, write.expected))
        ]
        if write.boundary:
            ops.append(SessionOp(method="clear_temp_state", args=(ref,)))
        self._session_call(ops, written)

    def _deny(self, decision: Decision, then: Callable[[], None]) -> None:
        """Append the denial's audit event (before the invocation started it is still recorded) and go on."""
        session = self._runner
        record = decision.record(
            invocation_id=self.invocation_id,
            agent=self.spec.name,
            **({"run_id": session.request.run_id} if session.request.run_id else {}),
        )
        self._emit("policy.denied", {}, policy=str(decision.policy_id)[:128], reason=decision.reason[:64])
        self._persist(audit_event(invocation_id=self.invocation_id, record=record), then)

    # ---- Runner plugins -----------------------------------------------------------------------------------------
    def _has(self, hook: str) -> bool:
        """Whether a plugin of the Runner this turn runs under defines ``hook`` (a Runner invocation, or an agent
        it delegated to; direct turns have no plugins)."""
        return self.plugins is not None and bool(self.plugins.for_hook(hook))

    def _hook_context(self, hook: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        context = {
            "hook": hook,
            "run_id": self.run_id,
            "invocation_id": self.invocation_id,
            **self.scope,
            "agent": self.spec.name,
            **extra,
        }
        trace = self.trace  # correlation for plugins and exporters: the turn's span (or the caller's)
        if trace:
            context["traceparent"] = trace
        return context

    def _hook(
        self,
        hook: str,
        extra: Mapping[str, Any],
        slot: str | None,
        then: Callable[[str, Any], None],
        *,
        always: bool = False,
    ) -> None:
        """Run the Runner's plugins for ``hook`` in order, then ``then(kind, value)``: ``"continue"`` (nothing
        changed; ``value`` is the slot's value), ``"amend"`` (``value``: the slot's amended value, validated) or
        ``"return"`` (a plugin returned ``value``: later plugins and the agent's own callback are skipped). A halt,
        or a failure under ``failure_policy="closed"``, fails the turn with a structural ``PluginError``; a failure
        under ``"open"`` is counted (``plugin.failed``) and the next plugin runs.

        ``always``: a chain the turn's own end must not strand (the ``on_event`` hooks of the write pipeline): no turn
        deadline check, results taken after the turn is done (the rest of the chain is then skipped), and a halt
        reaches ``then("halt", None)`` after failing the turn."""
        chain = self.plugins.for_hook(hook) if self.plugins is not None else ()
        self._next_plugin(hook, chain, 0, dict(extra), slot, then, False, always)

    def _next_plugin(
        self,
        hook: str,
        chain: tuple[Any, ...],
        index: int,
        extra: dict[str, Any],
        slot: str | None,
        then: Callable[[str, Any], None],
        amended: bool,
        always: bool,
    ) -> None:
        if index == len(chain) or (always and self.done):
            then("amend" if amended else "continue", extra.get(slot) if slot else None)
            return
        plugin = chain[index]
        if always:
            deadline: float | None = self._afterwork_deadline()
        else:
            deadline = self._bounded()
            if deadline is None:
                return

        def done(value: Any, error: AdkError | None) -> None:
            step = interpret(plugin, hook, value, error, event=extra.get("event") if hook == "on_event" else None)
            if step.failure is not None:
                self._emit("plugin.failed", {}, plugin=plugin.id, hook=hook, reason=str(step.failure.get("reason", "")))
            if step.kind == "halt":
                self._finish(None, step.error)
                if always:
                    then("halt", None)
            elif step.kind == "return":
                then("return", step.value)
            elif step.kind == "amend" and slot is not None:
                value = _amended(hook, extra.get(slot), step.value)
                self._next_plugin(hook, chain, index + 1, {**extra, slot: value}, slot, then, True, always)
            else:
                self._next_plugin(hook, chain, index + 1, extra, slot, then, amended, always)

        assert deadline is not None
        deadline = min(deadline, self.clock() + plugin.timeout_ms / 1000)
        self._out.append(self._plugin_effect(plugin, hook, extra, deadline, self._id(done, always=always)))

    def _event_hook(self, event: Event, then: Callable[[Event | None], None]) -> None:
        """The ``on_event`` plugins see ``event`` before it is stored; an amendment may change only what
        :func:`~adk_actors.plugins.pipeline.amend_event` allows (an invalid one is a plugin failure, and the
        original is stored). ``then(None)``: a plugin halted the turn."""
        if self.done or not self._has("on_event"):
            then(event)
            return
        original = event.to_dict()

        def decided(kind: str, value: Any) -> None:
            if kind == "halt":
                then(None)
                return
            if kind == "continue":
                then(event)
                return
            try:
                amended = Event.from_dict(value)  # interpret() applied amend_event's rules already
            except AdkError as err:
                self._emit("plugin.failed", {}, hook="on_event", reason=err.reason[:64])
                then(event)
                return
            then(amended)

        self._hook("on_event", {"event": original}, "event", decided, always=True)

    def _plugin_effect(
        self, plugin: Any, hook: str, extra: Mapping[str, Any], deadline: float, effect_id: int
    ) -> RunPlugin:
        return RunPlugin(
            id=effect_id,
            plugin_id=plugin.id,
            hook=hook,
            plugin=plugin.plugin,
            config=plugin.config,
            context={
                **self._hook_context(hook, _metadata_view(extra) if plugin.metadata_only else extra),
                "plugin_id": plugin.id,
            },
            deadline=deadline,
            inline=plugin.inline,
            instance=plugin.instance,
            max_memory_mb=plugin.max_memory_mb,
        )

    def _notify_plugins(self, hook: str, extra: Mapping[str, Any]) -> None:
        """Best-effort notification hooks (``after_run``, ``on_agent_error``, ``on_run_error``): fire and forget,
        their results ignored."""
        for plugin in self.plugins.for_hook(hook) if self.plugins is not None else ():
            deadline = min(self._afterwork_deadline(), self.clock() + plugin.timeout_ms / 1000)
            self._out.append(self._plugin_effect(plugin, hook, extra, deadline, 0))

    def _pre_run(self) -> None:
        """Plugins before the session is touched: ``on_user_message`` (may amend the input), ``before_run`` and
        ``before_agent``; a plugin that returns ends the invocation with that output, nothing stored."""
        session = self._runner
        if session.request.resume is None and self._has("on_user_message"):
            self._hook("on_user_message", {"user_content": self.input}, "user_content", self._user_message)
            return
        self._user_message("continue", None)

    def _user_message(self, kind: str, value: Any) -> None:
        if kind == "return":
            self._finish(TurnResult(kind="completed", output=value), None)
            return
        if kind == "amend":
            self.input = value
        self._hook("before_run", {}, None, self._run_decided)

    def _run_decided(self, kind: str, value: Any) -> None:
        if kind == "return":
            self._finish(TurnResult(kind="completed", output=value), None)
            return
        self._hook("before_agent", {}, None, self._agent_decided)

    def _agent_decided(self, kind: str, value: Any) -> None:
        if kind == "return":
            self._finish(TurnResult(kind="completed", output=value), None)
            return
        self._load_session()

    # ---- instructions -------------------------------------------------------------------------------------------
    def _instruction_sources(self) -> tuple[Any, Any]:
        """This turn's local and global instruction: a template ``str``, a provider ``CallableRef`` or ``None``.
        Below a root, the root's global instruction replaces this agent's own."""
        spec = self.spec
        local = spec.instruction_provider or spec.model_config.get("instructions")
        own_global = spec.global_instruction_provider or spec.model_config.get("global_instruction")
        global_ = own_global if self.root_global is None else (self.root_global or None)
        return local, global_

    def _resolve_instructions(self) -> None:
        """Render or resolve the turn's instructions, then go on with ``after_config`` (or the model)."""
        local, global_ = self._instruction_sources()
        names = artifact_names(local, global_)
        access = self._artifact_access() if names else None
        if names and access is None:
            self._finish(
                None,
                AgentError(
                    "the instructions read artifacts, and this invocation has no artifact service",
                    reason="no_artifact_service",
                ),
            )
            return
        memory, query, spec = self._memory_preload()
        if not isinstance(local, CallableRef) and not isinstance(global_, CallableRef) and not names and not memory:
            self._configured({})
            return
        deadline = self._bounded()
        if deadline is None:
            return

        def resolved(value: Any, error: AdkError | None) -> None:
            answer = value if error is None and isinstance(value, dict) else {"error": "instruction_provider_failed"}
            if "error" in answer:
                details = {k: v for k, v in answer.items() if k in ("key", "type")}
                self._finish(
                    None,
                    AgentError("the instructions could not be resolved", reason=str(answer["error"]), details=details),
                )
                return
            self._configured(value)

        scope = {"agent": self.spec.name, **self.scope, "state": copy_json(prune_secrets(self.state))[0]}
        self._out.append(
            ResolveInstructions(
                id=self._id(resolved),
                local=local if isinstance(local, CallableRef) else None,
                global_=global_ if isinstance(global_, CallableRef) else None,
                scope=scope,
                deadline=deadline,
                artifacts=access,
                artifact_names=names,
                memory=memory,
                memory_query=query,
                memory_spec=spec,
            )
        )

    def _configured(self, resolved: dict[str, Any]) -> None:
        """The provider config of this turn: templates rendered against the invocation's state, providers' texts
        (``resolved``) used as they are."""
        config = dict(self.spec.model_config)
        if "memory" in resolved:
            self.memory_block = str(resolved["memory"])
        try:
            for key, source in zip(("instructions", "global_instruction"), self._instruction_sources(), strict=True):
                if isinstance(source, CallableRef):
                    config[key] = resolved.get(key, "")
                elif isinstance(source, str) and source:
                    texts = resolved.get("artifacts") or {}
                    config[key] = render_template(source, {**self.state, **texts} if texts else self.state)
                else:
                    config.pop(key, None)
        except AdkError as err:
            self._finish(None, err)
            return
        self.config = config
        if self.after_config is not None:
            self.after_config()
        else:
            self._call_model()

    def _root_global(self) -> Any:
        """The global instruction (template ``str`` or provider ``CallableRef``) delegated agents run under."""
        if self.root_global is not None:
            return self.root_global
        own = self.spec.global_instruction_provider or self.spec.model_config.get("global_instruction")
        return own if isinstance(own, str | CallableRef) else ""

    # ---- the model ----------------------------------------------------------------------------------------------
    def _call_model(self) -> None:
        if self.transfer is not None:  # the round handed the turn over: the sub-agent answers instead of the model
            self._transfer()
            return
        if self.session is not None and not self._prepare_session_call():
            return
        self._model_request()

    def _model_request(self) -> None:
        """The model call's hooks, then the provider (the history is built)."""
        if self._has("before_model"):
            request = {
                "history": self.history,
                "instructions": self.config.get("instructions", ""),
                "tools": [d.get("name", "") for d in self.plan.declarations],
                "model": str(self.config.get("model", "")),
            }
            self._hook("before_model", {"request": request}, "request", self._plugin_request)
            return
        self._local_before_model()

    def _plugin_request(self, kind: str, value: Any) -> None:
        """The plugins' ``before_model`` answered: a returned answer skips the model and the agent's callback; an
        amended request (``history``, ``instructions``) is what the agent's callback and the model get."""
        if kind == "return":
            self._on_model(_as_response(value), None, checked=False)
            return
        if kind == "amend" and isinstance(value, dict):
            if isinstance(value.get("history"), list) and value["history"]:
                self.history = value["history"]
            if isinstance(value.get("instructions"), str):
                self.request_config = {"instructions": value["instructions"]}
        self._local_before_model()

    def _local_before_model(self) -> None:
        """The agent's own ``before_model`` callbacks (if any), then the provider."""
        deadline = self._bounded()
        if deadline is None:
            return
        spec = self.spec
        if "before_model" not in spec.callback_hooks:
            self._provider(self.history, deadline)
            return

        def decided(decision: Any, error: AdkError | None) -> None:
            action, value = _action(decision, error)
            if action == "halt" and isinstance(value, str | dict):
                self._on_model(_as_response(value), None, checked=False)
                return
            history = value if action == "replace" and isinstance(value, list) and value else self.history
            deadline = self._bounded()
            if deadline is not None:
                self._provider(history, deadline)

        args = [self.plan.callback_view(), copy_json(self.history)[0], copy_json(self.plan.declarations)[0]]
        self._out.append(
            RunHook(id=self._id(decided), hook="before_model", callbacks=spec.callbacks, args=args, deadline=deadline)
        )

    def _prepare_session_call(self) -> bool:
        """Budgets and the model's history (from the session's events) for the next call of a Runner invocation;
        False when refused (after failing the turn) or when a compaction pass runs first (it goes on with the
        model request once the checkpoint is stored)."""
        session = self._runner
        options = session.request.options
        session.llm_calls += 1
        if session.llm_calls > options.max_llm_calls:
            self._finish(
                None,
                BudgetExceeded(
                    "the invocation used up max_llm_calls",
                    reason="max_llm_calls",
                    details={"max": options.max_llm_calls},
                ),
            )
            return False
        return self._session_history(compacted=False)

    def _session_history(self, *, compacted: bool) -> bool:
        """Build the model's history from the session's events; over budget under overflow ``"compress"`` (and
        not yet compacted for this call), start a compaction pass instead."""
        session = self._runner
        options = session.request.options
        policy = options.context_policy
        events = session.events
        if self.spec.history_policy == "exclude":  # earlier turns are removed; this invocation's input stays
            events = [e for e in events if e.invocation_id == self.invocation_id]
        try:
            history, stats = history_from_events(events, current_invocation_id=self.invocation_id, policy=policy)
            envelope = check_request_envelope(self.config, history, list(self.plan.declarations), policy)
        except BudgetExceeded as err:
            if (
                policy.overflow == "compress"
                and err.reason == "context_budget_exceeded"
                and not compacted
                and self.spec.history_policy != "exclude"
            ):
                self._compact(err, retried=False)
            else:
                self._finish(None, err)
            return False
        except AdkError as err:
            self._finish(None, err)
            return False
        self._emit(
            "agent.context.build",
            {"selected": stats["selected"], "dropped": stats["dropped"], "bytes": stats["bytes"]},
            fingerprint=stats["fingerprint"],
        )
        self._emit(
            "agent.context.envelope",
            {"bytes": envelope["bytes"], "tokens_estimate": envelope["tokens_estimate"]},
            fingerprint=envelope["fingerprint"],
        )
        if self.memory_block:
            history = _with_reference(history, self.memory_block)
        history, self.request_parts = with_request_parts(history, self.request_parts), []
        self.history = history
        return True

    # ---- compaction ---------------------------------------------------------------------------------------------
    def _compact(self, over: BudgetExceeded, *, retried: bool) -> None:
        """One compaction pass: read the session (its sequence numbers and version), fold its oldest whole
        invocations (:func:`~adk_actors.agents.context.plan_compaction`) with the compressor, store the checkpoint
        with ``compact_events`` at the version read, then build the history again. Rules: nothing foldable ->
        ``over`` (as under ``"error"``); a stale version (a write landed meanwhile) -> read and fold once more;
        any other failure -> ``context_compaction_failed``."""
        session = self._runner
        started = self.clock()

        def read(results: list[Any], error: AdkError | None) -> None:
            if self.done:
                return
            if error is not None:
                self._compaction_failed("session_read", error)
                return
            stored = results[0]
            pinned = {p.invocation_id for p in open_pauses(stored.events, stored.state)}
            try:
                plan = plan_compaction(
                    stored.events,
                    stored.event_seqs,
                    current_invocation_id=self.invocation_id,
                    policy=session.request.options.context_policy,
                    pinned_invocations=pinned,
                )
            except AdkError as err:
                self._finish(None, err)
                return
            if plan is None:
                self._finish(None, over)
                return
            self._summarize(plan, stored, over, retried=retried, started=started)

        deadline = self._bounded()
        if deadline is not None:
            self._session_call([SessionOp(method="get_session", args=(session.ref,))], read, deadline=deadline)

    def _summarize(
        self, plan: CompactionPlan, stored: Any, over: BudgetExceeded, *, retried: bool, started: float
    ) -> None:
        """Run the compressor over the plan's history (nothing to read: an empty summary, no run)."""
        compressor = self._runner.request.options.context_policy.compressor
        assert compressor is not None
        if not plan.history:
            self._checkpoint(plan, stored, "", over, retried=retried, started=started)
            return
        deadline = self._bounded()
        if deadline is None:
            return
        deadline = min(deadline, self.clock() + compressor.timeout_ms / 1000.0)
        limit = compressor.max_summary_bytes

        def summarized(value: Any, error: AdkError | None) -> None:
            if error is not None:
                self._compaction_failed("compressor", error)
                return
            summary = value.text if isinstance(value, ModelResponse) else value
            if not isinstance(summary, str) or not summary.strip():
                self._compaction_failed("invalid_summary", None, {"type": type(summary).__name__})
                return
            size = len(summary.encode("utf-8", "replace"))
            if size > limit:
                self._compaction_failed("summary_too_large", None, {"summary_bytes": size, "max_summary_bytes": limit})
                return
            self._checkpoint(plan, stored, summary, over, retried=retried, started=started)

        effect_id = self._id(summarized, cancellable=True)
        if compressor.function is not None:
            request = {"history": plan.history, "folded_events": plan.folded_events, "max_summary_bytes": limit}
            self._out.append(
                Compress(
                    id=effect_id,
                    config={},
                    history=[],
                    function=compressor.function,
                    request=request,
                    max_memory_mb=compressor.max_memory_mb,
                    deadline=deadline,
                )
            )
            return
        config = {k: v for k, v in self.config.items() if k not in _NOT_FOR_SUMMARIES}
        config["instructions"] = compressor.instructions or _SUMMARIZE_INSTRUCTIONS.format(limit=limit)
        if compressor.model is not None:
            config["model"] = compressor.model
        ask = {"role": "user", "content": {"schema_version": 1, "parts": [{"type": "text", "text": _SUMMARIZE_ASK}]}}
        self._out.append(
            Compress(id=effect_id, config=config, history=[*plan.history, ask], deadline=deadline, trace=self.trace)
        )

    def _checkpoint(
        self, plan: CompactionPlan, stored: Any, summary: str, over: BudgetExceeded, *, retried: bool, started: float
    ) -> None:
        """Store the checkpoint in place of the folded events, at the version read."""
        session = self._runner
        compressor = session.request.options.context_policy.compressor
        assert compressor is not None
        summary_bytes = len(summary.encode("utf-8", "replace"))
        record = {
            "type": COMPACTION,
            "through_seq": plan.through_seq,
            "folded_events": plan.folded_events,
            "summary_bytes": summary_bytes,
            "fingerprint": hashlib.sha256(summary.encode("utf-8", "replace")).hexdigest()[:32],
            "compressor": compressor.kind,
        }
        event = Event.new(
            invocation_id=uuid.uuid4().hex,
            author=self.spec.name,
            content={"schema_version": 1, "parts": [{"type": "text", "text": summary}]} if summary else None,
            actions=EventActions(context_effects=(record,)),
        ).redacted()

        def written(_results: Any, error: AdkError | None) -> None:
            if self.done:
                return
            if isinstance(error, ConcurrencyConflict) and error.reason == "stale_session" and not retried:
                self._compact(over, retried=True)
                return
            if error is not None:
                self._compaction_failed("checkpoint_write", error)
                return
            folded = {e.id for e in stored.events[: plan.folded_events]}
            known = {e.id for e in stored.events}
            kept = list(stored.events[plan.folded_events :])
            # Events this turn stored after the read (none, unless a write was in flight) stay, in their order.
            session.events = [event, *kept, *(e for e in session.events if e.id not in known and e.id not in folded)]
            self._emit(
                "agent.context.compact",
                {
                    "folded_events": plan.folded_events,
                    "summary_bytes": summary_bytes,
                    "remaining_bytes": plan.remaining_bytes,
                    "duration_ms": int((self.clock() - started) * 1000),
                },
                fingerprint=record["fingerprint"],
                compressor=compressor.kind,
            )
            if self._session_history(compacted=True):
                self._model_request()

        op = SessionOp(
            method="compact_events",
            args=(session.ref,),
            kwargs={"through_seq": plan.through_seq, "compaction_event": event, "expected_version": stored.version},
        )
        self._session_call([op], written)

    def _compaction_failed(self, stage: str, error: AdkError | None, details: Mapping[str, Any] | None = None) -> None:
        """Fail the turn: the pass could not produce or store its checkpoint (nothing was replaced)."""
        info: dict[str, Any] = {"stage": stage, **(details or {})}
        if error is not None:
            info["cause"] = structural_failure(error).reason[:64]
        self._finish(
            None, AgentError("the context could not be compacted", reason="context_compaction_failed", details=info)
        )

    def _provider(self, history: list[dict[str, Any]], deadline: float) -> None:
        config = {**self.config, **self.request_config} if self.request_config else self.config
        self.request_config = {}
        self.model_started = self.clock()
        self._emit("agent.model.start", {}, model=str(self.config.get("model", "")))
        after = "after_model" in self.spec.callback_hooks

        def answered(value: Any, error: AdkError | None) -> None:
            if error is None and self._has("after_model"):
                self._hook(
                    "after_model", {"response": _response_view(value)}, "response", partial(self._plugin_answer, value)
                )
            elif error is not None and self._has("on_model_error"):
                failure = structural_failure(error)
                self._hook(
                    "on_model_error",
                    {"error": {"reason": failure.reason, "type": type(failure).__name__}},
                    "recovery",
                    lambda kind, recovered: (
                        self._on_model(_as_response(recovered), None, checked=False)
                        if kind != "continue"
                        else self._on_model(None, error)
                    ),
                )
            elif after and error is None:
                self._after_model(value)
            else:
                self._on_model(value, error)

        session = self.session
        effect_id = self._id(answered, cancellable=True)
        streaming, max_bytes = "none", 0
        cache: CacheCall | None = None
        if session is not None:
            options = session.request.options
            session.streamed = []
            streaming, max_bytes = options.streaming_mode, options.max_stream_output_bytes
            if streaming != "none":
                self._progress[effect_id] = self._on_delta
            if options.context_cache is not None:
                cache = self._cache_call(options.context_cache, config)
        self._out.append(
            CallModel(
                id=effect_id,
                config=config,
                history=list(history),
                tools=self.plan.declarations,
                deadline=deadline,
                streaming=streaming,
                max_stream_bytes=max_bytes,
                trace=self.trace,
                span=self.span is not None,
                cache=cache,
            )
        )

    def _cache_call(self, options: CacheOptions, config: dict[str, Any]) -> CacheCall:
        """The prefix-cache scope of this call: provider, app, user, model and the option's policy."""
        provider = config.get("provider", "gemini")
        scope = scope_fingerprint(
            self.scope.get("app_name", ""),
            self.scope.get("user_id", ""),
            str(config.get("model", "")),
            options.policy,
            provider=provider if isinstance(provider, str) else "custom",
        )
        return CacheCall(options=options, scope=scope)

    def _plugin_answer(self, original: ModelResponse, kind: str, value: Any) -> None:
        """The plugins' ``after_model`` answered: a return skips the agent's ``after_model`` callback; an amendment
        flows into it. A plugin's answer is validated like a callback's."""
        if kind == "continue":
            response = original
        elif kind == "amend":  # the chain's value is a response view
            response = _as_response(value["content"] if isinstance(value, dict) and "content" in value else value)
        else:
            response = _as_response(value)
        checked = kind == "continue"
        if kind != "return" and "after_model" in self.spec.callback_hooks:
            self._after_model(response, checked=checked)
        else:
            self._on_model(response, None, checked=checked)

    def _on_delta(self, batch: tuple[dict[str, Any], dict[str, Any] | None]) -> None:
        """One batch of a stream: a partial event, with the grounding envelope a frame of the batch carried."""
        content, grounding = batch
        session = self._runner
        policy = session.request.options.runtime_policy
        if policy is not None:
            # A batch that takes the stream past the content budget is never stored: the output is denied here.
            session.streamed.extend(p.get("text", "") for p in content.get("parts", []) if p.get("type") == "text")
            decision = policy.check_content("output_content", self.spec.name, "".join(session.streamed))
            if not decision.allowed:
                self._deny(decision, partial(self._finish, None, _denied(decision)))
                self._cancel_in_flight()
                return
        try:
            event = Event.new(
                invocation_id=self.invocation_id,
                author=self.spec.name,
                content=content,
                partial=True,
                provider_metadata=grounding,
            )
        except AdkError as err:
            self._finish(None, err)
            return
        self._persist(event, lambda: None)

    def _after_model(self, response: ModelResponse, *, checked: bool = True) -> None:
        deadline = self._bounded()
        if deadline is None:
            return
        result = {
            "text": response.text,
            "content": response.content,
            "function_calls": [dict(c) for c in response.function_calls],
            "finish_reason": response.finish_reason,
        }

        def decided(decision: Any, error: AdkError | None) -> None:
            action, value = _action(decision, error)
            if action == "replace" and isinstance(value, str | dict):
                self._on_model(_as_response(value), None, checked=False)
            else:
                self._on_model(response, None, checked=checked)

        self._out.append(
            RunHook(
                id=self._id(decided),
                hook="after_model",
                callbacks=self.spec.callbacks,
                args=[self.plan.callback_view(), result],
                deadline=deadline,
            )
        )

    def _on_model(self, response: ModelResponse | None, error: AdkError | None, *, checked: bool = True) -> None:
        """A model answer (or its error). ``checked``: the answer came from ``adk_actors.models``, which validated
        it; an answer a callback made is validated here."""
        measurements: dict[str, Any] = {"duration_ms": round((self.clock() - self.model_started) * 1000, 3)}
        usage = response.usage if response is not None and error is None else None
        if usage:
            for key, name in (
                ("prompt_token_count", "input_tokens"),
                ("candidates_token_count", "output_tokens"),
                ("cached_content_token_count", "cached_tokens"),
                ("total_token_count", "total_tokens"),
            ):
                if isinstance(usage.get(key), int) and not isinstance(usage.get(key), bool):
                    measurements[name] = usage[key]
                    totals = self.tokens if self.tokens is not None else {}
                    totals[name] = totals.get(name, 0) + usage[key]
                    self.tokens = totals
        self._emit("agent.model.stop", measurements, outcome="ok" if error is None else error.reason)
        if error is not None or response is None:
            if error is not None:
                error = structural_failure(error)
            if isinstance(error, AskTimeout):
                error = (
                    self._turn_timeout()
                    if self.clock() >= self.deadline
                    else AskTimeout(
                        "the model call passed its deadline",
                        reason="agent_call_timeout",
                        details={"agent": self.spec.name},
                    )
                )
            self._finish(None, error or AgentError("no model response", reason="empty_response"))
            return
        if not checked:  # a callback's answer: whatever reaches history and events is validated
            try:
                response = check_response(response)
            except AdkError as err:
                self._finish(None, err)
                return
        if self.session is not None:
            self._session_answer(response)
            return
        self.history.append({"role": "model", "content": response.content})
        if response.function_calls:
            self._dispatch_calls(response)
            return
        try:
            output = self._output(response)
        except AdkError as err:
            self._finish(None, err)
            return
        if self._has("after_agent"):
            self._hook("after_agent", {"output": output}, "output", partial(self._delegated_answer, response, output))
            return
        self._delegated_answer(response, output, "continue", None)

    def _delegated_answer(self, response: ModelResponse, output: Any, kind: str, value: Any) -> None:
        """A direct or delegated turn's output (an ``after_agent`` plugin of the Runner above may replace it)."""
        if kind != "continue":
            output = value
            delta = {self.spec.output_key: value} if self.spec.output_key and self.spec.output_schema is None else {}
        else:
            delta = self._output_delta(response, output)
        if self.commit:
            output = Delegated(output=output, state_delta={**self.delta, **delta})
        self._finish(output, None)

    def _session_answer(self, response: ModelResponse) -> None:
        """A Runner invocation's model answer: its event, then its calls or its final event."""
        session = self._runner
        name = self.spec.name
        if response.function_calls:
            session.approved.clear()  # an approval covers one call of one round, never a later one
            try:
                event = Event.new(
                    invocation_id=self.invocation_id,
                    author=name,
                    content=response.content,
                    provider_metadata=response.provider_metadata,
                )
            except AdkError as err:  # an answer the event model refuses fails the turn
                self._finish(None, err)
                return
            self._persist(event, lambda: self._dispatch_calls(response))
            return
        try:
            output = self._output(response)
        except AdkError as err:
            self._finish(None, err)
            return
        self._final(name, output, response.content, self._output_delta(response, output), response.provider_metadata)

    def _final(
        self, author: str, output: Any, content: Any, delta: dict[str, Any], metadata: dict[str, Any] | None = None
    ) -> None:
        """A Runner invocation's final answer (of this agent, or of the agent a tool transferred to): the
        ``after_agent`` plugins (which may amend or replace the output), the output policy, then the final event,
        then the result."""
        if not self._has("after_agent"):
            self._final_checked(author, output, content, delta, metadata)
            return

        def decided(kind: str, value: Any) -> None:
            if kind == "continue":
                self._final_checked(author, output, content, delta, metadata)
                return
            changed = dict(delta)
            if self.spec.output_key and author == self.spec.name and self.spec.output_schema is None:
                changed[self.spec.output_key] = value
            self._final_checked(author, value, _content_of(value), changed, None)

        self._hook("after_agent", {"output": output}, "output", decided)

    def _final_checked(
        self, author: str, output: Any, content: Any, delta: dict[str, Any], metadata: dict[str, Any] | None
    ) -> None:
        session = self._runner
        policy = session.request.options.runtime_policy
        if policy is not None:
            decision = policy.check_content("output_content", author, output)
            if not decision.allowed:
                self._deny(decision, partial(self._finish, None, _denied(decision)))
                return
        try:
            final = Event.new(
                invocation_id=self.invocation_id,
                author=author,
                content=content,
                is_final=True,
                actions=EventActions(state_delta=delta),
                provider_metadata=metadata,
            )
        except AdkError as err:
            self._finish(None, err)
            return

        def persisted() -> None:
            result = TurnResult(kind="completed", output=output)

            def committed(error: AdkError | None) -> None:
                if error is None:
                    self._finish(result, None)
                    return
                self._finish(
                    None,
                    AgentError(
                        "the answer is stored but its texts could not be committed to the memory outbox",
                        reason="memory_ingestion_failed",
                        details={"type": str(error.reason)},
                    ),
                )

            if not self._ingest(committed):
                self._finish(result, None)

        self._persist(final, persisted, boundary=True)

    def _ingest(self, then: Callable[[AdkError | None], None]) -> bool:
        """``memory_ingestion="on_success"``: hand the invocation's input and answer (their text, scrubbed of
        configured secret values) to a worker job that adds them to the user's memory; nobody waits for it.
        ``"durable"``: the job enqueues them in the outbox and the turn ends (``then``) once it has answered, so an
        answered turn's texts are committed; a failed enqueue fails the invocation with ``memory_ingestion_failed``
        (its answer is stored: a retry of the enqueue is idempotent per event). Returns whether ``then`` will be
        called."""
        session = self._runner
        options = session.request.options
        if options.memory_ingestion not in ("on_success", "durable"):
            return False
        access = self._memory_access()
        if access is None:
            return False
        items = []
        for event in session.events:
            if event.invocation_id != self.invocation_id or event.partial or event.content is None:
                continue
            if event.author != "user" and not event.is_final:
                continue
            text = scrub_text(_text_of(event.content.to_dict()))
            if text.strip():
                cut = text.encode("utf-8")[:65536].decode("utf-8", "ignore")  # memory's bound is in bytes
                items.append({"event_id": event.id, "author": event.author, "text": cut})
        if not items:
            return False
        deadline = self.clock() + 60.0
        durable = options.memory_ingestion == "durable"
        self._out.append(
            Ingest(
                memory=access,
                session_id=self.scope["session_id"],
                items=tuple(items),
                deadline=self.clock() + 30.0 if durable else deadline,
                outbox=options.memory_outbox if durable else None,
                id=self._id(lambda _value, error: then(error)) if durable else 0,
            )
        )
        return durable

    def _output(self, response: ModelResponse) -> Any:
        spec = self.spec
        parts = response.content.get("parts", [])
        output: Any = response.text if all(p.get("type") == "text" for p in parts) else copy_json(response.content)[0]
        if spec.output_schema is not None:
            _conform(spec.output_schema, response.text, "output", spec.name)
        return output

    def _output_delta(self, response: ModelResponse, output: Any) -> dict[str, Any]:
        """The state delta of ``output_key`` for a final answer (the parsed object under an ``output_schema``)."""
        key = self.spec.output_key
        if not key:
            return {}
        return {key: json.loads(response.text) if self.spec.output_schema is not None else output}

    # ---- a round of calls ---------------------------------------------------------------------------------------
    def _dispatch_calls(self, response: ModelResponse) -> None:
        """Check a model answer's function calls as a batch, group them and start the first group."""
        self.rounds += 1
        limit = self.spec.max_tool_rounds if self.session is None else self.session.request.options.max_tool_rounds
        if self.rounds > limit:
            self._finish(
                None,
                BudgetExceeded(
                    "too many tool rounds in one turn",
                    reason="max_tool_rounds",
                    details={"agent": self.spec.name, "max": limit},
                ),
            )
            return
        try:  # the whole batch is checked structurally before anything runs
            parts = [
                FunctionCallPart(name=c["name"], args=c.get("args") or {}, id=c.get("id"))
                for c in response.function_calls
            ]
        except (ContentError, KeyError, TypeError):
            self._finish(None, ToolError("the model returned a malformed function call", reason="invalid_call"))
            return
        ids = [p.id for p in parts if p.id is not None]
        if len(ids) != len(set(ids)):
            self._finish(None, ToolError("duplicate function call id", reason="duplicate_call_id"))
            return
        self.calls = [dict(c) for c in response.function_calls]
        self.responses = [None] * len(self.calls)
        if self.session is not None:  # indices are per round: a new round has stored none of its answers yet
            self.session.persisted.clear()
        self.groups = self._group(range(len(self.calls)))
        self._next_group()

    def _group(self, indices: Iterable[int]) -> deque[list[int]]:
        """Consecutive parallel-safe calls form one concurrent group (at most ``max_concurrency`` under a Runner);
        any other call runs alone. A confirmation-gated call is a serial barrier."""
        groups: deque[list[int]] = deque()
        width = self.session.request.options.max_concurrency if self.session is not None else 1 << 30
        previous = False
        for index in indices:
            safe = self._parallel_safe(self.calls[index]["name"])
            if safe and previous and len(groups[-1]) < width:
                groups[-1].append(index)
            else:
                groups.append([index])
            previous = safe
        return groups

    def _parallel_safe(self, name: str) -> bool:
        tool = self.plan.tools.get(name)
        if self.session is not None and (
            self.session.request.options.tool_mode == "serial" or (tool is not None and tool.confirmation != "never")
        ):
            return False
        return name in self.plan.sub_names or (tool is not None and (tool.parallel_safe or tool.agent != ""))

    def _next_group(self) -> None:
        """Start the next group of calls; groups answered synchronously are passed in a loop, not recursively."""
        while not self.done:
            if not self.groups:
                self._round_end()
                return
            group = self.groups.popleft()
            self.outstanding = len(group)
            self.dispatching = True
            try:
                for index in group:
                    self._run_call(index)
                    if self.done:
                        return
            finally:
                self.dispatching = False
            if self.outstanding > 0:
                return

    def _round_end(self) -> None:
        """Every call of the round is answered: the answers go to the model (a Runner stores its tool event)."""
        if self.session is None:
            parts = [r for r in self.responses if r is not None]
            self.history.append({"role": "user", "content": {"schema_version": 1, "parts": parts}})
            self._call_model()
            return
        parts = self._unpersisted_parts()
        if not parts:
            self._call_model()
            return
        self._persist(self._tool_event(parts), self._call_model)

    def _respond(self, index: int, part: dict[str, Any]) -> None:
        if self.done or self.responses[index] is not None:
            return
        self.responses[index] = part
        self.outstanding -= 1
        if self.outstanding == 0 and not self.dispatching:
            self._next_group()

    def _failed(self, index: int, error: BaseException) -> None:
        call = self.calls[index]
        self._respond(index, failed_function_response(call["name"], call.get("id"), error).to_dict())

    def _check(self, index: int, decisions: list[Decision]) -> bool:
        """Apply policy decisions to one call: the first denial is audited and answered to the model."""
        for decision in decisions:
            if not decision.allowed:
                self._deny(decision, partial(self._failed, index, _denied(decision)))
                return False
        return True

    def _run_call(self, index: int) -> None:
        call = self.calls[index]
        name, args = call["name"], call.get("args") or {}
        deadline = self._bounded()
        if deadline is None:
            return
        policy = self.session.request.options.runtime_policy if self.session is not None else None
        if name in self.plan.sub_names:
            if policy is None or self._check(index, [policy.check_agent(name)]):
                self._call_agent(index, name, args, deadline)
            return
        entry = self.plan.catalog.get(name)
        tool = self.plan.tools.get(name)
        if entry is None or tool is None:
            self._failed(index, ToolError("no such tool", reason="tool_not_found"))
            return
        try:
            validated = entry.validate_args(args)
        except SchemaError as err:
            self._failed(index, err)
            return
        if policy is not None and not self._check(
            index, [policy.check_tool(name), policy.check_arguments(name, validated)]
        ):
            return
        if self._has("before_tool"):
            context = {"tool": name, "call_id": call.get("id") or "", "args": validated}
            self._hook("before_tool", context, "args", partial(self._plugin_args, index, tool, entry))
            return
        self._tool_path(index, tool, validated, deadline)

    def _plugin_args(self, index: int, tool: ToolSpec, entry: Any, kind: str, value: Any) -> None:
        """The plugins' ``before_tool`` answered: a returned result answers the call without running the tool; amended
        arguments are validated against the tool's schema again."""
        call = self.calls[index]
        if kind == "return":
            self._respond(index, tool_result_response(call["name"], call.get("id"), value).to_dict())
            return
        try:
            args = entry.validate_args(value) if kind == "amend" else value
        except SchemaError as err:
            self._failed(index, err)
            return
        deadline = self._bounded()
        if deadline is not None:
            self._tool_path(index, tool, args, deadline)

    def _tool_path(self, index: int, tool: ToolSpec, validated: dict[str, Any], deadline: float) -> None:
        """A validated call: an ``AgentTool``, or the tool (behind its confirmation under a Runner)."""
        if tool.agent:
            self._call_agent(index, tool.agent, validated, deadline)
            return
        if self.session is None:
            if tool.confirmation == "always":
                self._failed(
                    index, ToolError("the tool needs confirmation, which needs a runner", reason=CONFIRMATION_REASON)
                )
                return
            self._execute(index, tool, validated, deadline)
            return
        tool_timeout = self.session.request.options.tool_timeout_ms
        if tool_timeout is not None:
            deadline = min(deadline, self.clock() + tool_timeout / 1000.0)
        if index in self.session.approved or tool.confirmation == "never":
            self._execute(index, tool, validated, deadline)
        elif tool.confirmation == "always":
            self._confirm(index, validated, "")
        else:
            self._gate(index, tool, validated, deadline)

    def _gate(self, index: int, tool: ToolSpec, args: dict[str, Any], deadline: float) -> None:
        """Evaluate an argument-dependent confirmation gate (a job); a broken gate fails the call closed."""

        def gated(value: Any, error: AdkError | None) -> None:
            if error is not None or not isinstance(value, dict) or "error" in value:
                reason = (
                    "confirmation_failed" if error is not None or not isinstance(value, dict) else str(value["error"])
                )
                self._failed(index, ToolError("the confirmation gate failed", reason=reason))
            elif value.get("required"):
                self._confirm(index, args, str(value.get("hint", "")))
            else:
                self._execute(index, tool, args, deadline)

        call = self.calls[index]
        self._out.append(
            CheckGate(
                id=self._id(gated, cancellable=True),
                index=index,
                payload=tool.payload,
                args=args,
                call_id=call.get("id"),
                context=self._context(),
                deadline=deadline,
                inline=tool.inline,
            )
        )

    def _execute(self, index: int, tool: ToolSpec, args: dict[str, Any], deadline: float) -> None:
        call = self.calls[index]
        self.call_args[index] = args
        self._child_span(("tool", index), *semconv.tool_call(call["name"], call.get("id") or ""))
        name, call_id = call["name"], call.get("id")
        self.tool_started[index] = self.clock()
        self._emit("agent.tool.start", {}, tool=name, call_id=str(call_id or ""))
        if tool.remote is not None:
            self._out.append(
                CallRemoteTool(
                    id=self._id(partial(self._on_tool, index), cancellable=True),
                    target=tool.remote.target,
                    request=tool.remote.request(name, args, call_id),
                    deadline=deadline,
                )
            )
            return
        hooks = self.plan.tool_hooks
        self._out.append(
            RunTool(
                id=self._id(partial(self._on_tool, index), cancellable=True),
                index=index,
                name=name,
                payload=tool.payload,
                args=args,
                call_id=call_id,
                context=self._context(("tool", index)),
                callbacks=self.spec.callbacks if hooks else (),
                runner=self.session is not None,
                deadline=deadline,
                inline=tool.inline and not hooks,
            )
        )

    def _on_tool(self, index: int, value: Any, error: AdkError | None) -> None:
        call = self.calls[index]
        started = self.tool_started.pop(index, self.clock())
        self._emit(
            "agent.tool.stop",
            {"duration_ms": round((self.clock() - started) * 1000, 3)},
            tool=call["name"],
            call_id=str(call.get("id") or ""),
            outcome="ok" if error is None else error.reason,
        )
        self._end_span(("tool", index), _tool_failure(value, error))
        if error is not None:
            if error.reason == "tool_catalog_changed":  # a remote catalog moved on: the turn fails until refresh()
                self._finish(None, error)
                return
            if isinstance(error, AskTimeout) or error.reason == "job_timeout":
                error = ToolError("the tool passed its deadline", reason="tool_timeout")
            self._tool_result(index, failed_function_response(call["name"], call.get("id"), error).to_dict())
            return
        if isinstance(value, dict) and STATE_DELTA_KEY in value:
            value = dict(value)
            delta = value.pop(STATE_DELTA_KEY)
            if isinstance(delta, dict) and (self.session is not None or self.commit):
                (self.session.state_delta if self.session is not None else self.delta).update(delta)
                self.state.update(delta)
        if isinstance(value, dict) and ACTIONS_KEY in value:
            value = dict(value)
            if not self._tool_actions(index, value.pop(ACTIONS_KEY)):
                return
        if self.session is not None and isinstance(value, dict) and value.get("type") == "suspension":
            self._suspend(index, value)
            return
        if not isinstance(value, dict) or value.get("type") != "function_response":
            error = ToolError("the tool result is malformed", reason="invalid_tool_result")
            self._tool_result(index, failed_function_response(call["name"], call.get("id"), error).to_dict())
            return
        policy = self.session.request.options.runtime_policy if self.session is not None else None
        if policy is not None and not self._check(
            index, [policy.check_content("tool_result", call["name"], value.get("response", {}))]
        ):
            return
        self._tool_result(index, value)

    def _tool_result(self, index: int, part: dict[str, Any]) -> None:
        """A tool call's function response on its way to the model: through the Runner's ``after_tool`` plugins (or
        ``on_tool_error`` for a failed call, which may return a recovery result)."""
        call = self.calls[index]
        name = call["name"]
        response = part.get("response")
        failed = isinstance(response, dict) and set(response) == {"error"}
        hook = "on_tool_error" if failed else "after_tool"
        if not self._has(hook):
            self._respond(index, part)
            return
        extra: dict[str, Any] = {"tool": name, "call_id": call.get("id") or "", "args": self.call_args.get(index, {})}
        if failed:
            assert isinstance(response, dict)
            extra.update(error=response["error"], tool_failures=self.tool_failures.get(name, 0))
            self.tool_failures[name] = self.tool_failures.get(name, 0) + 1
        else:
            extra["result"] = response

        def decided(kind: str, value: Any) -> None:
            if kind == "continue":
                self._respond(index, part)
                return
            try:
                self._respond(index, tool_result_response(name, call.get("id"), value).to_dict())
            except AdkError as err:
                self._failed(index, err)

        self._hook(hook, extra, "recovery" if failed else "result", decided)

    def _tool_actions(self, index: int, control: Any) -> bool:
        """Take a tool's control actions (``escalate``, ``transfer_to_agent``); False when the call was failed
        instead (a transfer to an agent that is not a sub-agent)."""
        if not isinstance(control, dict):
            return True
        target = control.get("transfer_to_agent")
        if target is not None and target not in self.plan.sub_names:
            self._failed(
                index, ToolError("transfer_to_agent names no sub-agent of this agent", reason="invalid_transfer_target")
            )
            return False
        if control.get("escalate") is True:
            self.escalate = True
        if target is not None:
            self.transfer = target
        if self.session is not None:
            self.session.control.update({k: v for k, v in control.items() if k in ("escalate", "transfer_to_agent")})
            effects = control.get("context_effects")
            if isinstance(effects, list):
                self.session.control.setdefault("context_effects", []).extend(e for e in effects if isinstance(e, dict))
            self.request_parts = take_request_parts(self.request_parts, control)
        return True

    # ---- other agents -------------------------------------------------------------------------------------------
    def _invoke(self, input: Any) -> Invoke:
        return Invoke(
            input=input,
            ancestry=(*self.ancestry, self.spec.name),
            state=self.state,
            root_global_instruction=self._root_global(),
            commit=self.session is not None or self.commit,
            trace=self.trace,
            plugins=self.plugins,
            run_id=self.run_id,
            observability=self.observability,
            **self.scope,
        )

    def _call_agent(self, index: int, target: str, args: dict[str, Any], deadline: float) -> None:
        prompt = args.get("prompt") if isinstance(args, dict) else None
        if not isinstance(prompt, str):
            self._failed(index, SchemaError("the agent call needs a prompt string", reason="invalid_arguments"))
            return
        self._out.append(
            CallAgent(
                id=self._id(partial(self._on_agent, index)),
                target=target,
                request=self._invoke(prompt),
                deadline=deadline,
            )
        )

    def _on_agent(self, index: int, value: Any, error: AdkError | None) -> None:
        call = self.calls[index]
        if error is not None:
            if isinstance(error, AskTimeout) and error.reason != "agent_turn_timeout":
                error = AgentError("the sub-agent call passed its deadline", reason="agent_call_timeout")
            self._failed(index, error)
            return
        if isinstance(value, Delegated):  # the child's output_key goes into this invocation's session
            (self.session.state_delta if self.session is not None else self.delta).update(value.state_delta)
            self.state.update(value.state_delta)
            value = value.output
        try:
            part = tool_result_response(call["name"], call.get("id"), {"result": value}).to_dict()
        except ToolError as err:
            self._failed(index, err)
            return
        self._respond(index, part)

    def _transfer(self) -> None:
        """Hand the turn to ``transfer``: it answers the turn's input under this invocation's ancestry, and its
        output is the turn's."""
        target, self.transfer = self.transfer, None
        deadline = self._bounded()
        if deadline is None or target is None:
            return

        def answered(value: Any, error: AdkError | None) -> None:
            if error is not None:
                self._finish(None, error)
                return
            delta: dict[str, Any] = {}
            if isinstance(value, Delegated):
                delta, value = dict(value.state_delta), value.output
            content = _content_of(value)
            if self.session is not None:
                self._final(target, value, content, delta)
                return
            self.history.append({"role": "model", "content": content})
            self.delta.update(delta)
            self._finish(Delegated(output=value, state_delta=dict(self.delta)) if self.commit else value, None)

        self._out.append(
            CallAgent(id=self._id(answered), target=target, request=self._invoke(self.input), deadline=deadline)
        )

    # ---- pauses -------------------------------------------------------------------------------------------------
    def _confirm(self, index: int, args: dict[str, Any], hint: str) -> None:
        call = self.calls[index]
        details = {
            "type": "tool_confirmation",
            "function_name": call["name"],
            "call_id": call.get("id") or "",
            "action_id": action_id(self.invocation_id, call["name"], call.get("id"), args),
        }
        if hint:
            details["hint"] = hint
        self._pause("tool_confirmation", details)

    def _suspend(self, index: int, value: dict[str, Any]) -> None:
        call = self.calls[index]
        if value.get("kind") == "credential":
            fields = ("flow_ref", "provider", "scopes", "expires_at", "pkce_method", "state_digest")
            self._pause(
                "credential",
                {
                    "type": "credential_request",
                    "function_name": call["name"],
                    "call_id": call.get("id") or "",
                    **{k: value[k] for k in fields},
                },
            )
            return
        self._pause(
            "long_running",
            {
                "type": "long_running",
                "function_name": call["name"],
                "call_id": call.get("id") or "",
                "operation_id": str(value.get("operation_id", "")),
                "message": str(value.get("message", "")),
            },
        )

    def _unpersisted_parts(self) -> list[dict[str, Any]]:
        session = self._runner
        parts = []
        for index, part in enumerate(self.responses):
            if part is not None and index not in session.persisted:
                session.persisted.add(index)
                parts.append(part)
        return parts

    def _tool_event(self, parts: list[dict[str, Any]]) -> Event:
        session = self._runner
        delta, session.state_delta = session.state_delta, {}
        control, session.control = session.control, {}
        return Event.new(
            invocation_id=self.invocation_id,
            author=self.spec.name,
            content={"schema_version": 1, "parts": parts},
            actions=EventActions(
                state_delta=delta,
                escalate=control.get("escalate", False),
                transfer_to_agent=control.get("transfer_to_agent"),
                context_effects=tuple(control.get("context_effects", ())),
            ),
        )

    def _pause(self, reason: str, details: dict[str, Any]) -> None:
        """Store the round's answers so far and the pause event; the invocation ends paused (temp state kept)."""
        session = self._runner
        self.groups.clear()
        parts = self._unpersisted_parts()
        if parts:
            self._persist(self._tool_event(parts), lambda: None)
        event = pause_event(invocation_id=self.invocation_id, author=self.spec.name, reason=reason, details=details)
        self._persist(event, lambda: self._finish(TurnResult(kind="paused", event=session.events[-1]), None))

    # ---- the end ------------------------------------------------------------------------------------------------
    def _cancel_in_flight(self) -> None:
        if self._cancellable:
            self._out.append(Cancel(ids=tuple(sorted(self._cancellable))))
            self._cancellable.clear()

    def _finish(self, value: Any, error: AdkError | None) -> None:
        if self.done:
            return
        self.done = True
        if self.session is not None:
            self._session_end(value, error)  # boundary events, temp state and permit, then _complete
            return
        if self.outcome and error is None:
            value = PromptOutcome(output=value, escalate=self.escalate)
        self._complete(value, error)

    def _session_end(self, value: Any, error: AdkError | None) -> None:
        """Cancel in-flight work; error event and temp clearing at the boundary; release the permit; answer."""
        session = self._runner
        if session.ending:
            return
        session.ending = True
        self._cancel_in_flight()
        paused = error is None and isinstance(value, TurnResult) and value.kind == "paused"

        def answer() -> None:
            self._release_permit()
            outcome = error.reason[:64] if error is not None else "paused" if paused else "completed"
            self._emit(
                "runner.run.stop", {"duration_ms": round((self.clock() - self.started) * 1000, 3)}, outcome=outcome
            )
            if error is None and not paused:
                self._notify_plugins("after_run", {"output": value.output if isinstance(value, TurnResult) else None})
            elif error is not None:
                info = {"error": {"reason": error.reason[:128], "type": type(error).__name__[:128]}}
                self._notify_plugins("on_agent_error", info)
                self._notify_plugins("on_run_error", info)
            result = value
            if isinstance(value, TurnResult):
                result = TurnResult(
                    kind=value.kind,
                    output=value.output,
                    event=value.event,
                    events=session.sent,
                    invocation_id=self.invocation_id,
                )
            self._complete(result, error)

        def clear() -> None:
            if not session.started or paused or session.write_failed or session.temp_cleared:
                answer()
                return
            self._session_call([SessionOp(method="clear_temp_state", args=(session.ref,))], lambda _v, _e: answer())

        if error is not None and session.started and not session.write_failed:
            session.writes.clear()
            self._persist(
                error_event(invocation_id=self.invocation_id, author=self.spec.name, error=error),
                clear,
                always=True,
                boundary=True,
            )
            return
        clear()

    def _complete(self, value: Any, error: AdkError | None) -> None:
        """The turn's end: telemetry, the ``on_error`` hook, the compatibility conversation, the answer."""
        duration = {"duration_ms": round((self.clock() - self.started) * 1000, 3)} if self.started else {}
        if self.tokens:  # the provider's usage over every model call of the turn
            duration.update(self.tokens)
        for key in list(self.open_spans):
            self._end_span(key, "cancelled")
        if self.span is not None:
            self.spans.append(
                self.span.end(
                    status="ok" if error is None else "error", error_type=None if error is None else error.reason
                )
            )
            self.span = None
        if self.spans:
            self._out.append(Spans(records=tuple(self.spans)))
            self.spans = []
        if error is None:
            self._emit("agent.prompt.stop", duration)
        else:
            self._emit("agent.prompt.exception", duration, reason=error.reason, error_type=type(error).__name__)
            self._error_hook(error)
        if self.telemetry:
            self._out.append(Telemetry(events=tuple(self.telemetry)))
            self.telemetry = []
        spec = self.spec
        conversation = self.conversation
        if error is None and conversation is not None and spec.history_policy == "include":
            before, conversation.history = conversation.history, self.history
            if spec.session_id is not None:
                # The answer goes out once the conversation is saved (saves stay in turn order). A failed save
                # fails the turn and takes it out of the conversation again, so the agent and its store agree.
                def saved(_value: Any, save_error: AdkError | None) -> None:
                    if self.answered:
                        return
                    if save_error is not None:
                        conversation.history = before
                        self._out.append(
                            Log(
                                level="warning",
                                message="conversation not saved",
                                fields={"agent": spec.name, "reason": save_error.reason},
                            )
                        )
                    self._answer(value, save_error)

                self._out.append(
                    SaveConversation(
                        id=self._id(saved, always=True),
                        service=spec.session_service,
                        agent=spec.name,
                        key=spec.session_id,
                        history=copy_json(conversation.history)[0],
                        deadline=self._afterwork_deadline(),
                    )
                )
                return
        self._answer(value, error)

    def _error_hook(self, error: AdkError) -> None:
        """Tell the callbacks' ``on_error`` hooks about a failed turn (fire and forget, structural tags only)."""
        spec = self.spec
        if "on_error" not in spec.callback_hooks:
            return
        info = {
            "reason": error.reason[:128],
            "type": type(error).__name__[:128],
            "agent": spec.name,
            "invocation_id": self.invocation_id,
            "kind": self.kind,
        }
        self._out.append(
            RunHook(
                id=0,
                hook="on_error",
                callbacks=spec.callbacks,
                args=[self.plan.callback_view(), info],
                deadline=self._afterwork_deadline(),
            )
        )

    def _answer(self, value: Any, error: AdkError | None) -> None:
        self.answered = True
        self._out.append(Reply(value=value) if error is None else Fail(error=error))


def _text_of(value: Any) -> str:
    """The text of an input (a ``str``, or content's text parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        parts = value.get("parts")
        if isinstance(parts, list):
            return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def _with_reference(history: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """``history`` with the memory preload as its own user-role entry just before the latest user input (this
    request only: nothing is stored)."""
    index = len(history)
    for i in range(len(history) - 1, -1, -1):
        entry = history[i]
        if entry.get("role") == "user" and not _is_tool_response(entry.get("content")):
            index = i
            break
    return [*history[:index], {"role": "user", "content": block}, *history[index:]]


def _is_tool_response(content: Any) -> bool:
    if not isinstance(content, Mapping):
        return False
    parts = content.get("parts")
    return isinstance(parts, list) and any(
        isinstance(p, Mapping) and p.get("type") == "function_response" for p in parts
    )
