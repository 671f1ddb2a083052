"""The agent actor: a tier-2 ``GenServer`` that runs turns of the model/tool loop without ever blocking.

Accepts (calls):

* :class:`~adk_actors.agents.messages.Prompt` — a compatibility-conversation turn (history kept here; all prompts
  of an agent form one FIFO session queue); answered with the output (``str``, or a content dict for non-text
  answers).
* :class:`~adk_actors.agents.messages.Invoke` — a turn with fresh history in the FIFO session queue of its
  ``(app_name, user_id, session_id)`` scope; different sessions overlap up to ``max_concurrent_invocations``.
  Answered with the output, or (``commit``: a delegation below a Runner) a
  :class:`~adk_actors.agents.messages.Delegated` whose state delta the caller stores in its session.
* :class:`~adk_actors.agents.messages.Describe`, :class:`~adk_actors.agents.messages.GetHistory`, ``Ping``,
  ``GetStatus``.

Emits: ``Call(Invoke)`` to sub-agents and ``AgentTool`` targets (by registered name, so a restarted one is found),
``RunJob`` calls to the worker pool (tools with their tool callbacks, model callbacks, dynamic instruction
providers), blocking calls on the host's I/O threads (the provider; the ``session_id`` conversation load/save).

One turn: model call → if the answer holds function calls, each call is resolved and its arguments validated
(failures become failed function responses the model sees), tools run in workers (``parallel_safe`` neighbours
concurrently, others one at a time), sub-agents are invoked → the function responses go back to the model; at
most ``max_tool_rounds`` rounds. The model's content is appended to history verbatim (thought signatures and call
ids echoed). Each model/tool/sub-agent call is bounded by ``agent_call_timeout``, the whole turn by
``agent_turn_timeout``. A tool's failure never fails the turn; a provider failure does. When the agent exits
(stopped or crashed), every running and queued turn is answered with ``ActorCrashed(reason="agent_exited")``.
Admission is :class:`~adk_actors.agents.queues.SessionQueues`; the turn's steps are the ``_on_*`` continuations
below.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adk_actors.admission.messages import Release
from adk_actors.agents.instructions import render_template
from adk_actors.agents.messages import Delegated, Describe, GetHistory, Invoke, Prompt, PromptOutcome
from adk_actors.agents.queues import SessionQueues
from adk_actors.agents.runner_exec import RunnerMixin, RunnerState
from adk_actors.agents.runner_turn import CancelTurn, RunnerTurn, TurnAccepted
from adk_actors.agents.spec import LEGACY_APP, AgentSpec, check_ancestry, compile_spec_catalog
from adk_actors.agents.toolexec import ACTIONS_KEY, CONFIRMATION_REASON, STATE_DELTA_KEY
from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.content.parts import FunctionCallPart
from adk_actors.errors import (
    ActorCrashed,
    AdkError,
    AgentError,
    AskTimeout,
    BudgetExceeded,
    ConfigError,
    ContentError,
    ProviderError,
    ProviderHttpError,
    RunError,
    SchemaError,
    SessionNotFound,
    ToolError,
    ValidationError,
)
from adk_actors.models import ModelResponse, as_response, generate_response
from adk_actors.models.results import check_response
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.schema import compile_schema
from adk_actors.secrets import prune_secrets
from adk_actors.telemetry import TELEMETRY_NAME, Emit, TelemetryEvent
from adk_actors.telemetry import event as telemetry_event
from adk_actors.tools import failed_function_response, tool_result_response

__all__ = ["AgentActor"]

_EXECUTE_TOOL = CallableRef.by_name("adk_actors.agents.toolexec.execute_tool")
_RUN_HOOK = CallableRef.by_name("adk_actors.agents.callbacks.run_hook")
_RESOLVE = CallableRef.by_name("adk_actors.agents.instructions.resolve_instructions")
_COMPAT_QUEUE = "prompt"


def _generate(
    token: Any, config: dict[str, Any], history: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> ModelResponse:
    """The blocking provider call (runs on an I/O thread of the host)."""
    return generate_response(config, history, tools, cancel=token)


@dataclass(slots=True)
class _Turn:
    ctx: CallCtx
    queue: str
    compat: bool
    input: Any
    ancestry: tuple[str, ...]
    scope: dict[str, str]
    state: dict[str, Any] = field(default_factory=dict)
    root_global: Any = None
    config: dict[str, Any] = field(default_factory=dict)
    invocation_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    history: list[dict[str, Any]] = field(default_factory=list)
    deadline: float = 0.0
    rounds: int = 0
    done: bool = False
    answered: bool = False
    dispatching: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any] | None] = field(default_factory=list)
    groups: deque[list[int]] = field(default_factory=deque)
    outstanding: int = 0
    started: float = 0.0
    model_started: float = 0.0
    tool_started: dict[int, float] = field(default_factory=dict)
    telemetry: list[TelemetryEvent] = field(default_factory=list)
    runner: RunnerState | None = None
    """Set for a Runner invocation: its session, permit, events and budgets (see ``runner_exec.py``)."""
    commit: bool = False
    """An invocation below a Runner: the answer is a :class:`Delegated` carrying the ``output_key`` deltas that the
    caller commits through its session."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State written below a ``commit`` turn (its sub-agents' ``output_key`` values, its tools' state writes),
    passed up to the caller with the turn's own ``output_key`` value."""
    after_config: Callable[[], None] | None = None
    """What runs once the turn's config is resolved (default: the first model call)."""
    outcome: bool = False
    """Answer a :class:`PromptOutcome` (the caller is an orchestration watching for escalation)."""
    escalate: bool = False
    """A tool of this turn escalated."""
    transfer: str | None = None
    """The sub-agent a tool of the current round handed the turn to (taken once the round is answered)."""


def _load(token: Any, service: Any, agent: str, key: str) -> list[Any]:
    """Load a saved compatibility conversation (an I/O thread); nothing saved yet is an empty history."""
    try:
        return list(service.load_conversation(LEGACY_APP, agent, key))
    except SessionNotFound:
        return []


def _save(token: Any, service: Any, agent: str, key: str, history: list[Any]) -> None:
    service.save_conversation(LEGACY_APP, agent, key, history)


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


def _replaced(response: ModelResponse, decision: Any, error: AdkError | None) -> ModelResponse:
    action, value = _action(decision, error)
    if action == "replace" and isinstance(value, str | dict):
        return _as_response(value)
    return response


_TELEMETRY_BATCH_S = 0.02


@dataclass(frozen=True, slots=True)
class _SendTelemetry:
    pass


def _ms(value: int | None) -> float:
    # Clamped at the horizon: a huge integer (run_timeout=10**5000) must not overflow float division in a handler.
    return float("inf") if value is None else min(value, _HORIZON_S * 1000) / 1000.0


_HORIZON_S = 30 * 86400.0
"""How far an ``infinity`` setting reaches: timers and job deadlines need a finite instant."""
_AFTERWORK_S = 60.0
"""The bound of the work a finished turn leaves behind (its ``on_error`` hook, the conversation save) when
``agent_call_timeout`` is ``infinity``: that work has no caller waiting on it, so nothing else would end it."""
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


def _is_tag(value: Any) -> bool:
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and _TAG_RE.fullmatch(value) is not None


def _structural_failure(error: AdkError) -> AdkError:
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


class AgentActor(RunnerMixin, GenServer):
    """One agent; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec: AgentSpec | None = None
        self.declarations: list[dict[str, Any]] = []
        self.tools: dict[str, Any] = {}
        self.sub_names: frozenset[str] = frozenset()
        self.history: list[dict[str, Any]] = []
        self.queues: SessionQueues[_Turn] = SessionQueues(32)
        self.turns_done = 0
        self.loaded = True
        self.admitting = False
        self.telemetry_queue: list[TelemetryEvent] = []

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, AgentSpec):
            raise ConfigError("an agent actor needs an AgentSpec", reason="invalid_agent_spec")
        self.spec = args
        self.catalog, self.declarations = compile_spec_catalog(args)
        self.tools = {t.name: t for t in args.tools}
        self.sub_names = frozenset(args.sub_agent_names())
        self.loaded = args.session_id is None
        self.queues = SessionQueues(args.max_concurrent_invocations)
        return None

    def terminate(self, reason: str) -> None:
        """Answer every running and queued turn: the agent is exiting (stopped or crashed)."""
        self._send_telemetry()
        for turn in list(self.queues.drain()):
            turn.done = True
            if turn.runner is not None and turn.runner.permit is not None:
                self.send_to("admission", Release(permit_id=turn.runner.permit.permit_id))
                turn.runner.permit = None
            if not turn.answered:
                self._answer(
                    turn,
                    None,
                    ActorCrashed(
                        "the agent exited during the turn",
                        reason="agent_exited",
                        details={"agent": self.spec.name if self.spec else "?", "why": reason},
                    ),
                )

    def status(self) -> dict[str, Any]:
        return {
            "kind": "agent",
            "agent": self.spec.name if self.spec else None,
            "active": len(self.queues.active),
            "queued": self.queues.queued(),
            "turns_done": self.turns_done,
            "history_entries": len(self.history),
        }

    # ---- calls ----------------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        spec = self.spec
        assert spec is not None
        if isinstance(request, Prompt):
            self._enqueue(
                _Turn(
                    ctx=ctx,
                    queue=_COMPAT_QUEUE,
                    compat=True,
                    input=request.input,
                    ancestry=(),
                    scope={},
                    outcome=request.outcome,
                )
            )
            return DEFERRED
        if isinstance(request, Invoke):
            check_ancestry(spec.name, request.ancestry)
            scope = {"app_name": request.app_name, "user_id": request.user_id, "session_id": request.session_id}
            queue = (
                canonical_dumps([request.app_name, request.user_id, request.session_id])
                if request.session_id
                else f"invoke:{uuid.uuid4().hex}"
            )
            self._enqueue(
                _Turn(
                    ctx=ctx,
                    queue=queue,
                    compat=False,
                    input=request.input,
                    ancestry=tuple(request.ancestry),
                    scope=scope,
                    state=dict(request.state),
                    root_global=request.root_global_instruction,
                    commit=request.commit,
                )
            )
            return DEFERRED
        if isinstance(request, RunnerTurn):
            if request.sink is not None:  # the run watches this process: if it dies, the run fails at once
                self.send_to(request.sink, TurnAccepted(turn_id=request.turn_id, pid=os.getpid()))
            scope = {"app_name": request.app_name, "user_id": request.user_id, "session_id": request.session_id}
            self._enqueue(
                _Turn(
                    ctx=ctx,
                    queue=canonical_dumps([request.app_name, request.user_id, request.session_id]),
                    compat=False,
                    input=request.input,
                    ancestry=(),
                    scope=scope,
                    runner=RunnerState(request),
                )
            )
            return DEFERRED
        if isinstance(request, Describe):
            return {
                "name": spec.name,
                "description": spec.description,
                "sub_agents": list(spec.sub_agent_names()),
                "tools": [t.name for t in spec.tools],
            }
        if isinstance(request, GetHistory):
            return copy_json(self.history)[0]
        return super().handle_call(request, ctx)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, CancelTurn):
            self._cancel_turn(message)
            return
        super().handle_info(message, sender)

    def _cancel_turn(self, message: CancelTurn) -> None:
        """Cancel a Runner invocation, running or queued (a finished one is left alone)."""
        for turn in [*self.queues.active.values(), *(t for q in self.queues.pending.values() for t in q)]:
            if turn.runner is not None and turn.runner.request.turn_id == message.turn_id and not turn.done:
                self._finish(
                    turn,
                    None,
                    RunError(
                        "the invocation was cancelled", reason="cancelled", details={"cause": message.reason[:64]}
                    ),
                )

    # ---- session queues and admission ---------------------------------------------------------------------------
    def _enqueue(self, turn: _Turn) -> None:
        self.queues.add(turn.queue, turn)
        self._admit()

    def _admit(self) -> None:
        if self.admitting:  # a turn finished while being started: the outer loop goes on
            return
        self.admitting = True
        try:
            while (admitted := self.queues.next()) is not None:
                self._start(admitted[1])
        finally:
            self.admitting = False

    def _release(self, turn: _Turn) -> None:
        self.queues.release(turn.queue, turn)
        self._admit()

    # ---- the turn -------------------------------------------------------------------------------------------------
    def _start(self, turn: _Turn) -> None:
        spec = self.spec
        assert spec is not None
        now = time.monotonic()
        if turn.done or now > turn.ctx.deadline:  # cancelled, or the asker gave up while the turn was queued
            turn.done = turn.answered = True
            self._release(turn)
            return
        limit = spec.turn_timeout_ms
        if turn.runner is not None and turn.runner.request.options.run_timeout_ms is not None:
            limit = turn.runner.request.options.run_timeout_ms
        turn.deadline = min(turn.ctx.deadline, now + _ms(limit), now + _HORIZON_S)
        turn.started = now
        self._emit(turn, "agent.prompt.start", {})
        if turn.runner is not None:
            self._runner_admit(turn)
            return
        if turn.compat and not self.loaded:
            self._load_conversation(turn)
            return
        self._begin(turn)

    def _load_conversation(self, turn: _Turn) -> None:
        """Load the persisted conversation (``session_id``) before the first compatibility turn runs."""
        spec = self.spec
        assert spec is not None
        self.io_call(
            _load,
            (spec.session_service, spec.name, spec.session_id),
            min(turn.deadline, time.monotonic() + _ms(spec.call_timeout_ms)),
            lambda value, error: self._on_loaded(turn, value, error),
        )

    def _on_loaded(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        if turn.done:
            return
        if error is not None:
            self._finish(turn, None, error)  # the next turn tries again
            return
        self.loaded = True
        self.history = list(value)
        self._begin(turn)

    def _begin(self, turn: _Turn) -> None:
        spec = self.spec
        assert spec is not None
        try:
            user_content = self._check_input(turn.input)
        except AdkError as err:
            self._finish(turn, None, err)
            return
        prior = self.history if turn.compat and spec.history_policy == "include" else []
        turn.history = [*prior, {"role": "user", "content": user_content}]
        self._resolve_instructions(turn)

    def _resolve_instructions(self, turn: _Turn) -> None:
        """Render or resolve the turn's instructions, then go on with ``turn.after_config`` (or the model)."""
        spec = self.spec
        assert spec is not None
        local, global_ = self._instruction_sources(turn)
        if isinstance(local, CallableRef) or isinstance(global_, CallableRef):
            deadline = self._bounded(turn)
            if deadline is None:
                return
            scope = {"agent": spec.name, **turn.scope, "state": copy_json(prune_secrets(turn.state))[0]}
            self.run_job(
                _RESOLVE,
                (
                    local if isinstance(local, CallableRef) else None,
                    global_ if isinstance(global_, CallableRef) else None,
                    scope,
                ),
                deadline,
                lambda value, error: self._on_instructions(turn, value, error),
            )
            return
        self._configured(turn, {})

    def _on_instructions(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        """Dynamic instruction providers answered (from a worker)."""
        if turn.done:
            return
        answer = value if error is None and isinstance(value, dict) else {"error": "instruction_provider_failed"}
        if "error" in answer:
            details = {k: v for k, v in answer.items() if k in ("key", "type")}
            self._finish(
                turn, None, AgentError("the instruction provider failed", reason=str(answer["error"]), details=details)
            )
            return
        self._configured(turn, value)

    def _configured(self, turn: _Turn, resolved: dict[str, Any]) -> None:
        try:
            turn.config = self._turn_config(turn, resolved)
        except AdkError as err:
            self._finish(turn, None, err)
            return
        if turn.after_config is not None:
            turn.after_config()
        else:
            self._call_model(turn)

    def _instruction_sources(self, turn: _Turn) -> tuple[Any, Any]:
        """This turn's local and global instruction: a template ``str``, a provider ``CallableRef`` or ``None``.
        Below a root, the root's global instruction replaces this agent's own."""
        spec = self.spec
        assert spec is not None
        local = spec.instruction_provider or spec.model_config.get("instructions")
        own_global = spec.global_instruction_provider or spec.model_config.get("global_instruction")
        global_ = own_global if turn.root_global is None else (turn.root_global or None)
        return local, global_

    def _turn_config(self, turn: _Turn, resolved: dict[str, Any]) -> dict[str, Any]:
        """The provider config of one turn: templates rendered against the invocation's state, providers' texts
        (``resolved``) used as they are."""
        spec = self.spec
        assert spec is not None
        config = dict(spec.model_config)
        for key, source in zip(("instructions", "global_instruction"), self._instruction_sources(turn), strict=True):
            if isinstance(source, CallableRef):
                config[key] = resolved.get(key, "")
            elif isinstance(source, str) and source:
                config[key] = render_template(source, turn.state)
            else:
                config.pop(key, None)
        return config

    def _root_global(self, turn: _Turn) -> Any:
        """The global instruction (template ``str`` or provider ``CallableRef``) delegated agents run under."""
        assert self.spec is not None
        if turn.root_global is not None:
            return turn.root_global
        own = self.spec.global_instruction_provider or self.spec.model_config.get("global_instruction")
        return own if isinstance(own, str | CallableRef) else ""

    def _check_input(self, value: Any) -> Any:
        spec = self.spec
        assert spec is not None
        if not isinstance(value, str | dict):
            raise ValidationError(
                "agent input is a str or a content dict", reason="invalid_input", details={"type": type(value).__name__}
            )
        if spec.input_schema is not None:
            try:
                data = json.loads(value) if isinstance(value, str) else value
                compile_schema(spec.input_schema).validate(data, field="input")
            except (ValueError, SchemaError):
                raise SchemaError(
                    "the input does not satisfy the agent's input_schema",
                    reason="invalid_input",
                    details={"agent": spec.name},
                ) from None
        return value

    def _bounded(self, turn: _Turn) -> float | None:
        """The deadline of the next step, or ``None`` (after failing the turn) when the turn's time is up."""
        assert self.spec is not None
        now = time.monotonic()
        if now >= turn.deadline:
            self._finish(turn, None, self._turn_timeout())
            return None
        return min(turn.deadline, now + _ms(self.spec.call_timeout_ms))

    def _turn_timeout(self) -> AskTimeout:
        assert self.spec is not None
        return AskTimeout(
            "the agent turn passed its deadline", reason="agent_turn_timeout", details={"agent": self.spec.name}
        )

    def _call_model(self, turn: _Turn) -> None:
        if turn.transfer is not None:  # the round handed the turn over: the sub-agent answers instead of the model
            self._transfer(turn)
            return
        if turn.runner is not None and not self._runner_prepare_call(turn):
            return
        deadline = self._bounded(turn)
        if deadline is None:
            return
        assert self.spec is not None
        if "before_model" not in self.spec.callback_hooks:
            self._provider(turn, turn.history, deadline)
            return
        args = [self._callback_view(), copy_json(turn.history)[0], copy_json(self.declarations)[0]]
        self.run_job(
            _RUN_HOOK,
            (list(self.spec.callbacks), "before_model", args),
            deadline,
            lambda value, error: self._after_before_model(turn, value, error),
        )

    def _after_before_model(self, turn: _Turn, decision: Any, error: AdkError | None) -> None:
        if turn.done:
            return
        action, value = _action(decision, error)
        if action == "halt" and isinstance(value, str | dict):
            self._on_model(turn, _as_response(value), None, checked=False)
            return
        history = value if action == "replace" and isinstance(value, list) and value else turn.history
        deadline = self._bounded(turn)
        if deadline is not None:
            self._provider(turn, history, deadline)

    def _emit(self, turn: _Turn, name: str, measurements: dict[str, Any], **metadata: Any) -> None:
        """Record a telemetry event of this turn (structural metadata only; flushed once, at the turn's end)."""
        assert self.spec is not None
        turn.telemetry.append(
            telemetry_event(
                name,
                measurements,
                agent=self.spec.name,
                kind="prompt" if turn.compat else "invoke",
                invocation_id=turn.invocation_id,
                **metadata,
            )
        )

    def _flush_telemetry(self, turn: _Turn) -> None:
        """Queue the turn's telemetry; the queue goes to the hub in one message at most every 20 ms (one message
        per turn was a seventh of a Runner turn's sends)."""
        if turn.telemetry:
            if not self.telemetry_queue:
                self.start_timer(_TELEMETRY_BATCH_S, _SendTelemetry())
            self.telemetry_queue.extend(turn.telemetry)
            turn.telemetry = []

    def _send_telemetry(self) -> None:
        if self.telemetry_queue:
            self.send_to(TELEMETRY_NAME, Emit(events=tuple(self.telemetry_queue)))
            self.telemetry_queue = []

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _SendTelemetry):
            self._send_telemetry()
            return
        super().handle_timer(message)

    def _provider(self, turn: _Turn, history: list[dict[str, Any]], deadline: float) -> None:
        assert self.spec is not None
        turn.model_started = time.monotonic()
        self._emit(turn, "agent.model.start", {}, model=str(turn.config.get("model", "")))
        after = "after_model" in self.spec.callback_hooks

        def done(value: Any, error: AdkError | None) -> None:
            if after and error is None:
                self._after_model(turn, value, error)
            else:
                self._on_model(turn, value, error)

        if turn.runner is not None:
            self._runner_provider(turn, history, deadline, done)
            return
        self.io_call(_generate, (turn.config, list(history), self.declarations), deadline, done)

    def _after_model(self, turn: _Turn, response: ModelResponse, error: AdkError | None) -> None:
        if turn.done:
            return
        assert self.spec is not None
        deadline = self._bounded(turn)
        if deadline is None:
            return
        result = {
            "text": response.text,
            "content": response.content,
            "function_calls": [dict(c) for c in response.function_calls],
            "finish_reason": response.finish_reason,
        }
        self.run_job(
            _RUN_HOOK,
            (list(self.spec.callbacks), "after_model", [self._callback_view(), result]),
            deadline,
            lambda value, err: self._on_replaced(turn, response, _replaced(response, value, err)),
        )

    def _on_replaced(self, turn: _Turn, original: ModelResponse, response: ModelResponse) -> None:
        self._on_model(turn, response, None, checked=response is original)

    def _callback_view(self) -> dict[str, Any]:
        """What callbacks see of the agent config: model metadata and the pruned ``callback_config`` only."""
        assert self.spec is not None
        config = self.spec.model_config
        view = {
            "agent": self.spec.name,
            "provider": config.get("provider", "gemini"),
            "model": config.get("model"),
            "generation_config": config.get("generation_config", {}),
            "callback_config": self.spec.callback_config,
        }
        copied: dict[str, Any] = copy_json(prune_secrets(view))[0]
        return copied

    def _on_model(
        self, turn: _Turn, response: ModelResponse | None, error: AdkError | None, *, checked: bool = True
    ) -> None:
        """A model answer (or its error). ``checked``: the answer came from ``adk_actors.models``, which validated
        it; an answer a callback made is validated here."""
        if turn.done:
            return
        assert self.spec is not None
        self._emit(
            turn,
            "agent.model.stop",
            {"duration_ms": round((time.monotonic() - turn.model_started) * 1000, 3)},
            outcome="ok" if error is None else error.reason,
        )
        if error is not None or response is None:
            if error is not None:
                error = _structural_failure(error)
            if isinstance(error, AskTimeout):
                error = (
                    self._turn_timeout()
                    if time.monotonic() >= turn.deadline
                    else AskTimeout(
                        "the model call passed its deadline",
                        reason="agent_call_timeout",
                        details={"agent": self.spec.name},
                    )
                )
            self._finish(turn, None, error or AgentError("no model response", reason="empty_response"))
            return
        if not checked:  # a callback's answer: whatever reaches history and events is validated
            try:
                response = check_response(response)
            except AdkError as err:
                self._finish(turn, None, err)
                return
        if turn.runner is not None:
            self._runner_on_model(turn, response)
            return
        turn.history.append({"role": "model", "content": response.content})
        if not response.function_calls:
            try:
                output = self._output(response)
            except AdkError as err:
                self._finish(turn, None, err)
                return
            self._finish(turn, self._delegated(turn, response, output) if turn.commit else output, None)
            return
        self._dispatch_calls(turn, response)

    def _output_delta(self, response: ModelResponse, output: Any) -> dict[str, Any]:
        """The state delta of ``output_key`` for a final answer (the parsed object under an ``output_schema``)."""
        assert self.spec is not None
        if not self.spec.output_key:
            return {}
        return {self.spec.output_key: json.loads(response.text) if self.spec.output_schema is not None else output}

    def _delegated(self, turn: _Turn, response: ModelResponse, output: Any) -> Delegated:
        return Delegated(output=output, state_delta={**turn.delta, **self._output_delta(response, output)})

    def _dispatch_calls(self, turn: _Turn, response: ModelResponse) -> None:
        """Check a model answer's function calls as a batch, group them and start the first group."""
        assert self.spec is not None
        turn.rounds += 1
        limit = self.spec.max_tool_rounds if turn.runner is None else turn.runner.request.options.max_tool_rounds
        if turn.rounds > limit:
            self._finish(
                turn,
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
            self._finish(turn, None, ToolError("the model returned a malformed function call", reason="invalid_call"))
            return
        ids = [p.id for p in parts if p.id is not None]
        if len(ids) != len(set(ids)):
            self._finish(turn, None, ToolError("duplicate function call id", reason="duplicate_call_id"))
            return
        turn.calls = [dict(c) for c in response.function_calls]
        turn.responses = [None] * len(turn.calls)
        turn.groups = self._group(turn, range(len(turn.calls)))
        self._next_group(turn)

    def _group(self, turn: _Turn, indices: Any) -> deque[list[int]]:
        """Consecutive parallel-safe calls form one concurrent group (at most ``max_concurrency`` under a Runner);
        any other call runs alone. A confirmation-gated call is a serial barrier."""
        groups: deque[list[int]] = deque()
        width = turn.runner.request.options.max_concurrency if turn.runner is not None else 1 << 30
        previous = False
        for index in indices:
            safe = self._parallel_safe(turn, turn.calls[index]["name"])
            if safe and previous and len(groups[-1]) < width:
                groups[-1].append(index)
            else:
                groups.append([index])
            previous = safe
        return groups

    def _parallel_safe(self, turn: _Turn, name: str) -> bool:
        tool = self.tools.get(name)
        if turn.runner is not None and (
            turn.runner.request.options.tool_mode == "serial" or (tool is not None and tool.confirmation != "never")
        ):
            return False
        return name in self.sub_names or (tool is not None and (tool.parallel_safe or tool.agent != ""))

    def _next_group(self, turn: _Turn) -> None:
        """Start the next group of calls; groups answered synchronously are passed in a loop, not recursively."""
        while not turn.done:
            if not turn.groups:
                if turn.runner is not None:
                    self._runner_round_end(turn)
                    return
                parts = [r for r in turn.responses if r is not None]
                turn.history.append({"role": "user", "content": {"schema_version": 1, "parts": parts}})
                self._call_model(turn)
                return
            group = turn.groups.popleft()
            turn.outstanding = len(group)
            turn.dispatching = True
            try:
                for index in group:
                    self._run_call(turn, index)
                    if turn.done:
                        return
            finally:
                turn.dispatching = False
            if turn.outstanding > 0:
                return

    def _respond(self, turn: _Turn, index: int, part: dict[str, Any]) -> None:
        if turn.done or turn.responses[index] is not None:
            return
        turn.responses[index] = part
        turn.outstanding -= 1
        if turn.outstanding == 0 and not turn.dispatching:
            self._next_group(turn)

    def _failed(self, turn: _Turn, index: int, error: BaseException) -> None:
        call = turn.calls[index]
        self._respond(turn, index, failed_function_response(call["name"], call.get("id"), error).to_dict())

    def _run_call(self, turn: _Turn, index: int) -> None:
        spec = self.spec
        assert spec is not None
        call = turn.calls[index]
        name, args, call_id = call["name"], call.get("args") or {}, call.get("id")
        deadline = self._bounded(turn)
        if deadline is None:
            return
        if name in self.sub_names:
            if turn.runner is not None and not self._runner_allows_agent(turn, index, name):
                return
            self._call_agent(turn, index, name, args, deadline)
            return
        entry = self.catalog.get(name)
        tool = self.tools.get(name)
        if entry is None or tool is None:
            self._failed(turn, index, ToolError("no such tool", reason="tool_not_found"))
            return
        try:
            validated = entry.validate_args(args)
        except SchemaError as err:
            self._failed(turn, index, err)
            return
        if turn.runner is not None:
            self._runner_call_tool(turn, index, tool, validated, deadline)
            return
        if tool.agent:
            self._call_agent(turn, index, tool.agent, validated, deadline)
            return
        if tool.confirmation == "always":
            self._failed(
                turn, index, ToolError("the tool needs confirmation, which needs a runner", reason=CONFIRMATION_REASON)
            )
            return
        context = {
            "invocation_id": turn.invocation_id,
            "agent_name": spec.name,
            **turn.scope,
            "state": turn.state,
            "ancestry": (*turn.ancestry, spec.name),
        }
        hooks = tuple(h for h in spec.callback_hooks if h.endswith("_tool"))
        turn.tool_started[index] = time.monotonic()
        self._emit(turn, "agent.tool.start", {}, tool=name, call_id=str(call_id or ""))
        self.run_job(
            _EXECUTE_TOOL,
            (tool.payload, name, validated, call_id, context, list(spec.callbacks) if hooks else []),
            deadline,
            lambda value, error: self._on_tool(turn, index, value, error),
            inline=tool.inline and not hooks,
        )

    def _on_tool(self, turn: _Turn, index: int, value: Any, error: AdkError | None) -> None:
        if turn.done:
            return
        call = turn.calls[index]
        started = turn.tool_started.pop(index, time.monotonic())
        self._emit(
            turn,
            "agent.tool.stop",
            {"duration_ms": round((time.monotonic() - started) * 1000, 3)},
            tool=call["name"],
            call_id=str(call.get("id") or ""),
            outcome="ok" if error is None else error.reason,
        )
        if error is not None:
            if isinstance(error, AskTimeout) or error.reason == "job_timeout":
                error = ToolError("the tool passed its deadline", reason="tool_timeout")
            self._failed(turn, index, error)
            return
        if isinstance(value, dict) and STATE_DELTA_KEY in value:
            value = dict(value)
            delta = value.pop(STATE_DELTA_KEY)
            if isinstance(delta, dict) and (turn.runner is not None or turn.commit):
                (turn.runner.state_delta if turn.runner is not None else turn.delta).update(delta)
                turn.state.update(delta)
        if isinstance(value, dict) and ACTIONS_KEY in value:
            value = dict(value)
            if not self._tool_actions(turn, index, value.pop(ACTIONS_KEY)):
                return
        if turn.runner is not None and isinstance(value, dict) and value.get("type") == "suspension":
            self._runner_suspend(turn, index, value)
            return
        if not isinstance(value, dict) or value.get("type") != "function_response":
            self._failed(turn, index, ToolError("the tool result is malformed", reason="invalid_tool_result"))
            return
        if turn.runner is not None and not self._runner_allows_result(turn, index, value):
            return
        self._respond(turn, index, value)

    def _call_agent(self, turn: _Turn, index: int, target: str, args: dict[str, Any], deadline: float) -> None:
        assert self.spec is not None
        prompt = args.get("prompt") if isinstance(args, dict) else None
        if not isinstance(prompt, str):
            self._failed(turn, index, SchemaError("the agent call needs a prompt string", reason="invalid_arguments"))
            return
        request = Invoke(
            input=prompt,
            ancestry=(*turn.ancestry, self.spec.name),
            state=turn.state,
            root_global_instruction=self._root_global(turn),
            commit=turn.runner is not None or turn.commit,
            **turn.scope,
        )
        self.call(target, request, deadline, lambda value, error: self._on_agent(turn, index, value, error))

    def _on_agent(self, turn: _Turn, index: int, value: Any, error: AdkError | None) -> None:
        if turn.done:
            return
        call = turn.calls[index]
        if error is not None:
            if isinstance(error, AskTimeout) and error.reason != "agent_turn_timeout":
                error = AgentError("the sub-agent call passed its deadline", reason="agent_call_timeout")
            self._failed(turn, index, error)
            return
        if isinstance(value, Delegated):  # the child's output_key goes into this invocation's session
            if turn.runner is not None:
                turn.runner.state_delta.update(value.state_delta)
            else:
                turn.delta.update(value.state_delta)
            turn.state.update(value.state_delta)
            value = value.output
        try:
            part = tool_result_response(call["name"], call.get("id"), {"result": value}).to_dict()
        except ToolError as err:
            self._failed(turn, index, err)
            return
        self._respond(turn, index, part)

    def _output(self, response: ModelResponse) -> Any:
        spec = self.spec
        assert spec is not None
        parts = response.content.get("parts", [])
        output: Any = response.text if all(p.get("type") == "text" for p in parts) else copy_json(response.content)[0]
        if spec.output_schema is not None:
            try:
                compile_schema(spec.output_schema).validate(json.loads(response.text), field="output")
            except (ValueError, SchemaError):
                raise SchemaError(
                    "the output does not satisfy the agent's output_schema",
                    reason="invalid_output",
                    details={"agent": spec.name},
                ) from None
        return output

    def _finish(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        if turn.done:
            return
        turn.done = True
        if turn.runner is not None:
            self._runner_end(turn, value, error)  # boundary events, temp state and permit, then _complete
            return
        if turn.outcome and error is None:
            value = PromptOutcome(output=value, escalate=turn.escalate)
        self._complete(turn, value, error)

    # ---- tool control actions -------------------------------------------------------------------------------------
    def _tool_actions(self, turn: _Turn, index: int, control: Any) -> bool:
        """Take a tool's control actions (``escalate``, ``transfer_to_agent``); False when the call was failed
        instead (a transfer to an agent that is not a sub-agent)."""
        if not isinstance(control, dict):
            return True
        target = control.get("transfer_to_agent")
        if target is not None and target not in self.sub_names:
            self._failed(
                turn,
                index,
                ToolError("transfer_to_agent names no sub-agent of this agent", reason="invalid_transfer_target"),
            )
            return False
        if control.get("escalate") is True:
            turn.escalate = True
        if target is not None:
            turn.transfer = target
        if turn.runner is not None:
            turn.runner.control.update({k: v for k, v in control.items() if k in ("escalate", "transfer_to_agent")})
        return True

    def _transfer(self, turn: _Turn) -> None:
        """Hand the turn to ``turn.transfer``: it answers the turn's input under this invocation's ancestry, and its
        output is the turn's."""
        assert self.spec is not None
        target, turn.transfer = turn.transfer, None
        deadline = self._bounded(turn)
        if deadline is None or target is None:
            return
        request = Invoke(
            input=turn.input,
            ancestry=(*turn.ancestry, self.spec.name),
            state=turn.state,
            root_global_instruction=self._root_global(turn),
            commit=turn.runner is not None or turn.commit,
            **turn.scope,
        )
        self.call(target, request, deadline, lambda value, error: self._on_transfer(turn, target, value, error))

    def _on_transfer(self, turn: _Turn, target: str, value: Any, error: AdkError | None) -> None:
        if turn.done:
            return
        if error is not None:
            self._finish(turn, None, error)
            return
        delta: dict[str, Any] = {}
        if isinstance(value, Delegated):
            delta, value = dict(value.state_delta), value.output
        content = {"schema_version": 1, "parts": [{"type": "text", "text": value}]} if isinstance(value, str) else value
        if turn.runner is not None:
            self._runner_transferred(turn, target, value, content, delta)
            return
        turn.history.append({"role": "model", "content": content})
        turn.delta.update(delta)
        self._finish(turn, Delegated(output=value, state_delta=dict(turn.delta)) if turn.commit else value, None)

    def _complete(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        """The turn's end: telemetry, the compatibility conversation, the answer, the session queue."""
        self.turns_done += 1
        duration = {"duration_ms": round((time.monotonic() - turn.started) * 1000, 3)} if turn.started else {}
        if error is None:
            self._emit(turn, "agent.prompt.stop", duration)
        else:
            self._emit(turn, "agent.prompt.exception", duration, reason=error.reason, error_type=type(error).__name__)
            self._error_hook(turn, error)
        self._flush_telemetry(turn)
        spec = self.spec
        if error is None and turn.compat and spec is not None and spec.history_policy == "include":
            self.history = turn.history
            if spec.session_id is not None:
                # The answer goes out once the conversation is saved (saves stay in turn order).
                self.io_call(
                    _save,
                    (spec.session_service, spec.name, spec.session_id, copy_json(self.history)[0]),
                    self._afterwork_deadline(),
                    lambda _v, err: self._saved(turn, value, err),
                )
                return
        self._answer(turn, value, error)
        self._release(turn)

    def _error_hook(self, turn: _Turn, error: AdkError) -> None:
        """Tell the callbacks' ``on_error`` hooks about a failed turn (fire and forget, structural tags only)."""
        spec = self.spec
        if spec is None or "on_error" not in spec.callback_hooks:
            return
        info = {
            "reason": error.reason[:128],
            "type": type(error).__name__[:128],
            "agent": spec.name,
            "invocation_id": turn.invocation_id,
            "kind": "runner" if turn.runner is not None else "prompt" if turn.compat else "invoke",
        }
        self.run_job(
            _RUN_HOOK,
            (list(spec.callbacks), "on_error", [self._callback_view(), info]),
            self._afterwork_deadline(),
            lambda _v, _e: None,
        )

    def _afterwork_deadline(self) -> float:
        """The (finite) deadline of work a finished turn leaves behind: ``agent_call_timeout``, or
        :data:`_AFTERWORK_S` when that is ``infinity``."""
        assert self.spec is not None
        timeout = self.spec.call_timeout_ms
        return time.monotonic() + (_AFTERWORK_S if timeout is None else timeout / 1000.0)

    def _saved(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        if turn.answered:
            return
        if error is not None:
            self.log.warning("conversation not saved", agent=self.spec.name if self.spec else "?", reason=error.reason)
        self._answer(turn, value, error)
        self._release(turn)

    def _answer(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        turn.answered = True
        if error is None:
            self.reply(turn.ctx, value)
        else:
            self.fail(turn.ctx, error)
