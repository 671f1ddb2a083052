"""Agent turns in this process, for tests: a scripted model, and tools, callbacks and sub-agents run right here.

::

    import adk_actors as adk
    from adk_actors.testing import ScriptedModel, function_call, run_turn

    agent = adk.Agent(name="Weather", instruction="Be concise.", tools=[adk.FunctionTool(get_weather)])
    model = ScriptedModel([function_call("get_weather", city="Tokyo"), "Sunny in Tokyo."])
    outcome = run_turn(agent, "Weather in Tokyo?", model=model)
    assert outcome.output == "Sunny in Tokyo."
    assert outcome.tool_calls[0].response == {"city": "Tokyo", "forecast": "sunny"}

A turn here is the :class:`~adk_actors.agents.turn.engine.Turn` the agent actor runs, built from the same
:class:`~adk_actors.agents.spec.AgentSpec`; only the execution of its effects differs. The model call goes to a
:class:`ScriptedModel` (its answer is validated as a provider's is); tool jobs (``execute_tool``: argument copies,
confirmation gates, tool hooks, failed-function-response shaping), callback hooks, instruction providers, session
calls and conversation saves run the production functions in this process, each job's arguments copied through
pickle as a worker's are and its result projected as the pool projects it. A sub-agent, ``AgentTool`` or transfer
target is found by name among the agents given to the harness and runs as a nested turn, to its end, when it is
called. Admission always grants at once. No actor system, no HTTP, no worker processes.

Deadlines are those of the agent: every effect result is compared with its deadline on the harness's clock when it
comes back, and a late one is answered as the node answers it (``AskTimeout`` or ``job_timeout``), so a test moves
an injected clock to see a timeout. Nothing is interrupted: a tool that hangs hangs the test.

Misuse raises at once, never inside the turn's outcome: :class:`~adk_actors.errors.ConfigError`
``unknown_sub_agent`` (an agent called by name that the harness was not given), ``no_scripted_model``,
``unknown_agent`` (a ``models`` key naming no agent), ``duplicate_agent``, ``invalid_value`` (a script entry or
argument of the wrong shape); :class:`~adk_actors.errors.AgentError` ``script_exhausted`` (a model call with no
scripted answer left).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adk_actors.admission.logic import Permit
from adk_actors.agents import blocking
from adk_actors.agents.agent import Agent
from adk_actors.agents.api import _input
from adk_actors.agents.callbacks import run_hook
from adk_actors.agents.instructions import resolve_instructions
from adk_actors.agents.messages import Delegated, Invoke, ResumeSpec, RunnerTurn, TurnEvent, TurnResult
from adk_actors.agents.spec import AgentSpec, build_spec, check_ancestry, check_tree
from adk_actors.agents.toolexec import check_gate, execute_tool
from adk_actors.agents.turn import effects as fx
from adk_actors.agents.turn.engine import AgentPlan, Conversation, Turn
from adk_actors.agents.turn.options import RunnerOptions, runner_options
from adk_actors.content.validation import check_id, check_json, check_json_object, check_optional_id
from adk_actors.errors import (
    AdkError,
    AgentError,
    AskTimeout,
    BudgetExceeded,
    ConfigError,
    ProviderError,
    SessionNotFound,
    WorkerError,
)
from adk_actors.events import Event
from adk_actors.models import ModelResponse, ProviderResult, as_response
from adk_actors.models.results import check_response
from adk_actors.plugins.hooks import run_plugin_hook
from adk_actors.runtime.workers import normalize_result
from adk_actors.secrets import prune_secrets
from adk_actors.sessions.memory import InMemorySessionService
from adk_actors.sessions.model import SessionRef, validate_name
from adk_actors.telemetry import TelemetryEvent

__all__ = [
    "AgentCall",
    "ModelRequest",
    "ScriptedModel",
    "ToolCall",
    "TurnHarness",
    "TurnOutcome",
    "function_call",
    "run_turn",
]

_SINK = "adk_actors.testing.turns"
"""The sink of the harness's Runner invocations: their stored events come back as ``Notify`` effects to it."""
_log = logging.getLogger("adk_actors.testing.turns")


# ---- records ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One model call as the scripted model received it (copies: the turn going on does not change them)."""

    agent: str
    """The agent whose turn called the model."""
    history: list[dict[str, Any]]
    """The request's history entries ``{"role", "content"}``, oldest first."""
    tools: list[dict[str, Any]]
    """The function declarations offered to the model (tools, then sub-agents)."""
    config: dict[str, Any]
    """The provider config of the call: instructions rendered, secrets redacted, a provider object by its type name."""
    streaming: str = "none"
    """The Runner's ``streaming_mode`` for the call (``none`` off a Runner)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool job of the turn (sub-agent and ``AgentTool`` calls are :class:`AgentCall` records)."""

    agent: str
    """The agent whose model called the tool."""
    name: str
    args: dict[str, Any]
    """The arguments after validation against the tool's schema (what the tool was given)."""
    call_id: str | None
    response: Any
    """The function-response object the job answered (``{"error": {"reason", "type"}}`` for a failed call), or,
    for a long-running tool under a Runner, the suspension; ``None`` when the job itself failed (``error``)."""
    error: AdkError | None = None
    """Why the job failed (``job_timeout``...), as the agent was told."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCall:
    """One call of another agent by name: a sub-agent, an ``AgentTool`` or a transfer."""

    caller: str
    target: str
    input: Any
    """What the target was asked (the ``prompt`` argument, or the turn's input for a transfer)."""
    output: Any = None
    """The target's output (``None`` when it failed)."""
    error: AdkError | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutcome:
    """What one turn did: its answer and what it asked for on the way, in order (nested turns included)."""

    output: Any = None
    """The output (``str``, or a content dict for non-text answers); ``None`` when the turn failed or paused."""
    error: AdkError | None = None
    """The error the caller would see raised (structural, as the node reports it)."""
    paused: Event | None = None
    """A Runner invocation that paused: its pause event (resume with :meth:`TurnHarness.resume`)."""
    events: tuple[Event, ...] = ()
    """A Runner invocation's stored events in session order (partial events included); empty off a Runner."""
    state: dict[str, Any] | None = None
    """A Runner invocation: the session's state after it; ``None`` off a Runner."""
    model_calls: tuple[ModelRequest, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    agent_calls: tuple[AgentCall, ...] = ()
    telemetry: tuple[TelemetryEvent, ...] = ()
    """The telemetry events of the turn and of the turns it called, as the agents hand them to the hub."""
    plugin_calls: tuple[tuple[str, str], ...] = ()
    """``(plugin id, hook)`` of every Runner plugin hook that ran, in order (notifications included)."""

    def result(self) -> Any:
        """The output, as ``prompt`` / ``invoke`` return it (a paused Runner invocation returns its pause event).

        Raises:
            AdkError: the turn's error.
        """
        if self.error is not None:
            raise self.error
        return self.paused if self.paused is not None else self.output


# ---- the scripted model -----------------------------------------------------------------------------------------
def function_call(name: str, /, **args: Any) -> dict[str, Any]:
    """A scripted answer that calls one function: ``function_call("get_weather", city="Tokyo")``.

    Several calls in one answer: ``{"function_calls": [{"name": ..., "args": {...}, "id"?: ...}, ...]}``.
    """
    return {"function_calls": [{"name": name, "args": args}]}


def _invalid(message: str, key: str) -> ConfigError:
    return ConfigError(message, reason="invalid_value", details={"key": key})


def _calls_content(answer: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``{"function_calls": [...], "text"?: str}`` as the content dict a provider answers."""
    unknown = sorted(set(answer) - {"function_calls", "text"})
    calls = answer["function_calls"]
    text = answer.get("text", "")
    if unknown or not isinstance(calls, list | tuple) or not calls or not isinstance(text, str):
        raise _invalid("a function-call answer is {'function_calls': [...], 'text'?: str}", key)
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) or set(call) - {"name", "args", "id"}:
            raise _invalid("a scripted call is {'name': str, 'args'?: dict, 'id'?: str}", key)
        part = {"type": "function_call", "name": call["name"], "args": dict(call.get("args") or {})}
        if call.get("id") is not None:
            part["id"] = call["id"]
        parts.append(part)
    return {"schema_version": 1, "parts": parts}


def _is_exception(entry: Any) -> bool:
    return isinstance(entry, BaseException) or (isinstance(entry, type) and issubclass(entry, BaseException))


def _entry(entry: Any, key: str) -> Any:
    """A script entry in the form the model answers it with (function-call answers become content dicts)."""
    if isinstance(entry, Mapping) and "function_calls" in entry:
        return _calls_content(entry, key)
    if isinstance(entry, str | dict | ModelResponse | ProviderResult) or _is_exception(entry) or callable(entry):
        return entry
    raise _invalid(
        "a scripted answer is a str, a content dict, a function-call dict, a ModelResponse, an exception "
        "or a function of the request",
        key,
    )


class ScriptedModel:
    """A model that answers each call with the next scripted answer, and records every request it was given.

    An answer is what a provider may return (``str``, a content dict, a ``ModelResponse`` or ``ProviderResult``),
    a function-call dict (``{"function_calls": [...]}``, see :func:`function_call`), an exception to raise (an
    ``AdkError`` reaches the turn as the failed model call; any other exception as ``ProviderError`` reason
    ``io_failed``, as from the node's I/O threads), or a function of the :class:`ModelRequest` returning one of
    those. Answers are validated when the turn gets them, exactly as a provider's: a malformed one fails the turn
    with ``invalid_model_output``.

    One model may serve several agents (a sub-agent's turn runs to its end when it is called, so a shared script
    is consumed in call order), or each agent may have its own (``models=`` of :class:`TurnHarness`).

    Args:
        responses: The answers, in call order.

    Raises:
        ConfigError: reason ``invalid_value`` (``details["key"]`` is ``responses[i]``) for an entry of no known
            form.
    """

    def __init__(self, responses: Iterable[Any]) -> None:
        self._script: deque[Any] = deque(_entry(r, f"responses[{i}]") for i, r in enumerate(responses))
        self.requests: list[ModelRequest] = []
        """Every request so far, in order (across turns and agents)."""

    def __repr__(self) -> str:
        return f"ScriptedModel(remaining={self.remaining}, requests={len(self.requests)})"

    @property
    def remaining(self) -> int:
        """How many scripted answers are left."""
        return len(self._script)

    def _next(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        if not self._script:
            raise AgentError(
                "the scripted model has no answer left for this call",
                reason="script_exhausted",
                details={"agent": request.agent, "calls": len(self.requests)},
            )
        return self._script.popleft()


def _applied(entry: Any, request: ModelRequest) -> Any:
    """A function entry applied to the request (what it raises is its answer), in the form of a script entry.

    Raises:
        ConfigError: ``invalid_value`` when the function returned no known form.
    """
    if not callable(entry) or _is_exception(entry) or isinstance(entry, ModelResponse | ProviderResult):
        return entry
    try:
        answer = entry(request)
    except Exception as exc:
        answer = exc
    if callable(answer) and not _is_exception(answer) and not isinstance(answer, ModelResponse | ProviderResult):
        raise _invalid("a scripted function answers with a scripted answer, not another function", "responses")
    return _entry(answer, "responses")


def _resolve(entry: Any) -> ModelResponse:
    """The answer of a (function-applied) script entry; a scripted exception is raised."""
    if _is_exception(entry):
        raise entry
    return as_response(entry)


def _public_config(config: Mapping[str, Any]) -> dict[str, Any]:
    public = dict(prune_secrets(dict(config)))
    if "provider" in public and not isinstance(public["provider"], str):
        public["provider"] = type(public["provider"]).__name__
    return copy.deepcopy(public)


# ---- running effects in this process ----------------------------------------------------------------------------
Result = tuple[Any, AdkError | None]


def _job(fn: Callable[..., Any], *args: Any) -> Result:
    """A worker job run here: arguments copied through pickle as the pool's are, the result projected as the pool
    projects it, an exception reported by its type only."""
    try:
        return normalize_result(fn(*pickle.loads(pickle.dumps(args)))), None
    except AdkError as err:
        return None, err
    except Exception as exc:
        return None, AdkError(
            f"the function raised {type(exc).__name__}",
            reason="function_failed",
            details={"callable": getattr(fn, "__name__", "?"), "exception_type": type(exc).__name__},
        )


def _io(fn: Callable[..., Any], *args: Any) -> Result:
    """A blocking call run here, its failures reported as the node's I/O threads report them."""
    try:
        return fn(None, *args), None
    except AdkError as err:
        return None, err
    except Exception as exc:
        return None, _io_failure(exc)


def _io_failure(exc: BaseException) -> ProviderError:
    return ProviderError(
        f"blocking call failed ({type(exc).__name__})",
        reason="io_failed",
        details={"exception_type": type(exc).__name__},
    )


def _stream_batch(response: ModelResponse, mode: str, max_bytes: int) -> Any:
    """The one partial batch a streamed answer is reported in (``None``: nothing visible), as the node's batcher
    would group it.

    Raises:
        BudgetExceeded: ``max_stream_output_bytes``.
    """
    if mode == "text":
        parts = [{"type": "text", "text": response.text}] if response.text else []
        size, grounding = len(response.text.encode("utf-8")), None
    else:
        parts = [p for p in response.content.get("parts", []) if p.get("type") != "function_call"]
        size, grounding = len(json.dumps(parts).encode("utf-8")), response.provider_metadata
    if size > max_bytes:
        raise BudgetExceeded(
            "the model's streamed output passed max_stream_output_bytes",
            reason="max_stream_output_bytes",
            details={"max": max_bytes},
        )
    return ({"schema_version": 1, "parts": parts}, grounding) if parts else None


class _Driver:
    """Executes the effects of one outer turn and of the turns it calls, collecting what they did.

    Every effect of a batch is executed when the turn hands it out (as the actor starts them all), and the results
    are fed back one at a time in that order; a ``Cancel`` drops the results not yet fed."""

    def __init__(self, harness: TurnHarness) -> None:
        self.harness = harness
        self.clock = harness.clock
        self.model_calls: list[ModelRequest] = []
        self.tool_calls: list[ToolCall] = []
        self.agent_calls: list[AgentCall] = []
        self.telemetry: list[TelemetryEvent] = []
        self.events: list[Event] = []
        self.plugin_calls: list[tuple[str, str]] = []
        self.spans: list[Any] = []

    def drive(self, turn: Turn, caller_deadline: float) -> Result:
        """Run ``turn`` to its end; its answer.

        Raises:
            AgentError: ``script_exhausted``; ``turn_stalled`` when the turn stopped without answering.
        """
        pending: deque[tuple[int, str, Any]] = deque()
        answer: list[Result] = []
        name = turn.spec.name

        def take(batch: list[fx.Effect]) -> None:
            for effect in batch:
                if isinstance(effect, fx.Reply):
                    answer.append((effect.value, None))
                elif isinstance(effect, fx.Fail):
                    answer.append((None, effect.error))
                elif isinstance(effect, fx.Cancel):
                    kept = [p for p in pending if p[0] not in effect.ids]
                    pending.clear()
                    pending.extend(kept)
                else:
                    pending.extend(self._execute(name, effect))

        take(turn.start(caller_deadline))
        while pending:
            effect_id, kind, item = pending.popleft()
            take(turn.progress(effect_id, item) if kind == "progress" else turn.on(effect_id, *item))
        if not answer:
            raise AgentError("the turn stopped without an answer", reason="turn_stalled", details={"agent": name})
        return answer[0]

    def _late(self, deadline: float) -> bool:
        return self.clock() > deadline

    def _execute(self, agent: str, effect: Any) -> list[tuple[int, str, Any]]:
        """Run one effect now: the results to feed back, in order (``[]`` for fire-and-forget effects)."""
        if isinstance(effect, fx.CallModel):
            return self._model(agent, effect)
        if isinstance(effect, fx.Compress) and effect.function is None:  # a model compressor: the agent's script
            call = fx.CallModel(
                id=effect.id, config=effect.config, history=effect.history, tools=[], deadline=effect.deadline
            )
            return self._model(agent, call)
        if isinstance(effect, fx.Telemetry):
            self.telemetry.extend(effect.events)
        elif isinstance(effect, fx.Notify):
            if effect.target == _SINK and isinstance(effect.message, TurnEvent):
                self.events.append(effect.message.event)
        elif isinstance(effect, fx.Log):
            getattr(_log, effect.level, _log.warning)("%s %s", effect.message, effect.fields)
        elif isinstance(effect, fx.RunHook) and effect.id == 0:  # on_error: fire and forget
            _job(run_hook, list(effect.callbacks), effect.hook, effect.args)
        elif isinstance(effect, fx.RunPlugin) and effect.id == 0:  # a notification hook: fire and forget
            self._result(agent, effect)
        elif isinstance(effect, fx.Spans):
            self.spans.extend(effect.records)
        elif isinstance(effect, fx.Ingest):  # memory ingestion: fire and forget, run here at once
            from adk_actors.memory.access import ingest_events

            _job(ingest_events, effect.memory, effect.session_id, list(effect.items))
        elif not isinstance(effect, fx.ReleasePermit):
            result = self._result(agent, effect)
            deadline = getattr(effect, "deadline", float("inf"))
            if result[1] is None and self._late(deadline):
                result = (None, _timeout(effect))
            return [(effect.id, "result", result)]
        return []

    def _result(self, agent: str, e: Any) -> Result:
        if isinstance(e, fx.RunTool):
            result = _job(execute_tool, e.payload, e.name, e.args, e.call_id, e.context, list(e.callbacks), e.runner)
            self._record_tool(agent, e, result)
            return result
        if isinstance(e, fx.CheckGate):
            return _job(check_gate, e.payload, e.args, e.call_id, e.context)
        if isinstance(e, fx.RunHook):
            return _job(run_hook, list(e.callbacks), e.hook, e.args)
        if isinstance(e, fx.Compress):  # a function compressor: a worker job
            return _job(e.function.resolve(), e.request)
        if isinstance(e, fx.ResolveInstructions):
            memory = (e.memory, e.memory_query, e.memory_spec) if e.memory is not None else None
            return _job(resolve_instructions, e.local, e.global_, e.scope, e.artifacts, e.artifact_names, memory)
        if isinstance(e, fx.RunPlugin):
            if e.instance is not None:
                raise ConfigError(
                    "stateful plugin instances need a node",
                    reason="unsupported_in_process",
                    details={"plugin": e.plugin_id},
                )
            self.plugin_calls.append((e.plugin_id, e.hook))
            return _job(run_plugin_hook, e.plugin, e.config, e.hook, e.context)
        if isinstance(e, fx.CallAgent):
            return self._call_agent(agent, e)
        if isinstance(e, fx.AcquirePermit):
            return Permit(permit_id=uuid.uuid4().hex, agent=e.agent, owner=os.getpid()), None
        if isinstance(e, fx.SessionCall):
            return _io(blocking.session_calls, e.service, e.ops)
        if isinstance(e, fx.LoadConversation):
            return _io(blocking.load_conversation, e.service, e.agent, e.key)
        if isinstance(e, fx.SaveConversation):
            return _io(blocking.save_conversation, e.service, e.agent, e.key, e.history)
        raise AssertionError(f"the harness cannot execute {type(e).__name__}")

    def _record_tool(self, agent: str, e: fx.RunTool, result: Result) -> None:
        value, error = result
        response = value
        if isinstance(value, dict) and value.get("type") == "function_response":
            response = value.get("response")
        self.tool_calls.append(
            ToolCall(
                agent=agent, name=e.name, args=copy.deepcopy(e.args), call_id=e.call_id, response=response, error=error
            )
        )

    def _model(self, agent: str, e: fx.CallModel) -> list[tuple[int, str, Any]]:
        request = ModelRequest(
            agent=agent,
            history=copy.deepcopy(e.history),
            tools=copy.deepcopy(e.tools),
            config=_public_config(e.config),
            streaming=e.streaming,
        )
        self.model_calls.append(request)
        # Misuse (an exhausted script, a function answering nonsense) raises out of the harness.
        entry = _applied(self.harness._model_for(agent)._next(request), request)
        out: list[tuple[int, str, Any]] = []
        try:
            response = check_response(_resolve(entry))
            if e.streaming != "none":
                batch = _stream_batch(response, e.streaming, e.max_stream_bytes)
                if batch is not None:
                    out.append((e.id, "progress", batch))
            result: Result = (response, None)
        except AdkError as err:
            result = (None, err)
        except Exception as exc:
            result = (None, _io_failure(exc))
        if result[1] is None and self._late(e.deadline):
            result = (None, _timeout(e))
        out.append((e.id, "result", result))
        return out

    def _call_agent(self, caller: str, e: fx.CallAgent) -> Result:
        request: Invoke = pickle.loads(pickle.dumps(e.request))  # a message: the callee gets a copy
        try:
            check_ancestry(e.target, request.ancestry)
            plan = self.harness._plan(e.target)
        except AdkError as err:
            self.agent_calls.append(AgentCall(caller=caller, target=e.target, input=request.input, error=err))
            return None, err
        turn = Turn(
            plan,
            input=request.input,
            scope={"app_name": request.app_name, "user_id": request.user_id, "session_id": request.session_id},
            ancestry=tuple(request.ancestry),
            state=request.state,
            root_global=request.root_global_instruction,
            commit=request.commit,
            plugins=request.plugins,
            run_id=request.run_id,
            observability=request.observability,
            clock=self.clock,
        )
        value, error = self.drive(turn, e.deadline)
        output = value.output if isinstance(value, Delegated) else value
        self.agent_calls.append(
            AgentCall(caller=caller, target=e.target, input=request.input, output=output, error=error)
        )
        return value, error

    def outcome(self, value: Any, error: AdkError | None, state: dict[str, Any] | None = None) -> TurnOutcome:
        paused = None
        if isinstance(value, TurnResult):
            value, paused = (None, value.event) if value.kind == "paused" else (value.output, None)
        return TurnOutcome(
            output=value,
            error=error,
            paused=paused,
            events=tuple(self.events),
            state=state,
            model_calls=tuple(self.model_calls),
            tool_calls=tuple(self.tool_calls),
            agent_calls=tuple(self.agent_calls),
            telemetry=tuple(self.telemetry),
            plugin_calls=tuple(self.plugin_calls),
        )


def _timeout(effect: Any) -> AdkError:
    """What the node answers a result that came after its deadline: the pool's ``job_timeout`` for a job, the
    call's ``AskTimeout`` otherwise."""
    if isinstance(effect, fx.RunTool | fx.CheckGate | fx.RunHook | fx.ResolveInstructions | fx.RunPlugin | fx.Compress):
        return WorkerError("the job missed its deadline", reason="job_timeout")
    return AskTimeout("no answer before the deadline", details={"effect": type(effect).__name__})


# ---- the harness ------------------------------------------------------------------------------------------------
AgentDefinition = Agent | AgentSpec | Mapping[str, Any]
"""An agent as the harness takes it: an ``Agent`` value, a built ``AgentSpec``, or a dict config that names the
agent (``{"name": "Helper", ...}``; its tools as the ``tools`` argument for the root, an ``AgentSpec`` otherwise)."""


class TurnHarness:
    """An agent, and the agents it calls by name, run turn after turn in this process (see the module docstring).

    :meth:`prompt` turns share one compatibility conversation (as ``adk.prompt`` turns of a spawned agent do);
    :meth:`invoke` turns start fresh (``adk.invoke``); :meth:`run` and :meth:`resume` are Runner invocations
    against the harness's session service (``Runner.run`` / ``Runner.resume``).

    Args:
        agent: The agent (see :data:`AgentDefinition`).
        model: The scripted model of every agent without one in ``models``.
        models: Agent name → its own scripted model.
        sub_agents: The agents reached by name (sub-agents named as strings or refs, ``AgentTool`` targets); the
            ``Agent``-valued sub-agents of an ``Agent`` are found without being listed.
        tools: The tools of a dict-config ``agent``.
        runner_options: The Runner options of :meth:`run` (keyword options as ``Runner`` takes them, or
            ``RunnerOptions``; default: the Runner's defaults).
        session_service: The session service of Runner invocations (default: a new ``InMemorySessionService``).
        app_name: The Runner's application name.
        timeout: Seconds the caller waits for each turn (default: only the agent's own turn timeout bounds it).
        clock: The monotonic clock the turns and their deadlines use.

    Raises:
        ConfigError: ``unknown_sub_agent``, ``no_scripted_model``, ``unknown_agent``, ``duplicate_agent``,
            ``invalid_value``, and the config reasons of ``spawn_agent`` and ``Runner``.
        AgentError, ToolError, SchemaError: as ``spawn_agent`` (names, tools, schemas, the tree's shape).
    """

    def __init__(
        self,
        agent: AgentDefinition,
        *,
        model: ScriptedModel | None = None,
        models: Mapping[str, ScriptedModel] | None = None,
        sub_agents: Sequence[AgentDefinition] = (),
        tools: Sequence[Any] = (),
        runner_options: Mapping[str, Any] | RunnerOptions | None = None,
        session_service: Any = None,
        app_name: str = "app",
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if tools and not isinstance(agent, Mapping):
            raise _invalid("tools go with a dict config; an Agent or AgentSpec carries its own", "tools")
        if isinstance(sub_agents, str | bytes | Mapping) or not isinstance(sub_agents, Sequence):
            raise _invalid("sub_agents is a list of agents", "sub_agents")
        self._sources: dict[str, Any] = {}
        self._plans: dict[str, AgentPlan] = {}
        self.root = self._add(agent, tools)
        for sub in sub_agents:
            self._add(sub, ())
        self.model = model
        self.models = dict(models or {})
        self._check()
        if isinstance(runner_options, RunnerOptions):
            self.options = runner_options
        else:
            self.options = _runner_options(runner_options)
        self.session_service = session_service if session_service is not None else InMemorySessionService()
        self.app_name = validate_name(app_name, "app_name")
        self.timeout = timeout
        self.clock = clock
        self.conversation = Conversation(loaded=self._plans[self.root].spec.session_id is None)
        """The compatibility conversation of :meth:`prompt` turns."""

    # ---- building -----------------------------------------------------------------------------------------------
    def _add(self, agent: Any, tools: Sequence[Any]) -> str:
        if isinstance(agent, Agent):
            spec = build_spec(agent.name, agent.config(), agent.tools)
            for sub in agent.sub_agents:
                if isinstance(sub, Agent):
                    self._add(sub, ())
        elif isinstance(agent, AgentSpec):
            spec = agent
        elif isinstance(agent, Mapping):
            name = agent.get("name")
            if not isinstance(name, str):
                raise _invalid("a dict config given to the harness names its agent ('name')", "name")
            spec = build_spec(name, agent, tools)
        else:
            raise _invalid("an agent is an Agent, an AgentSpec or a dict config", "agent")
        known = self._sources.get(spec.name)
        if known is not None and known is not agent and known != agent:
            raise ConfigError("two agents of one name", reason="duplicate_agent", details={"name": spec.name})
        self._sources[spec.name] = agent
        self._plans[spec.name] = AgentPlan(spec)
        return spec.name

    def _check(self) -> None:
        """Every agent reachable from the root is known and has a model; the tree is a tree."""
        reached: list[str] = []
        stack = [self.root]
        while stack:
            name = stack.pop()
            if name in reached:
                continue
            reached.append(name)
            spec = self._plans[name].spec
            for target in [*spec.sub_agent_names(), *(t.agent for t in spec.tools if t.agent)]:
                if target not in self._plans:
                    raise ConfigError(
                        "an agent is called by a name the harness was not given (pass it in sub_agents)",
                        reason="unknown_sub_agent",
                        details={"agent": name, "name": target},
                    )
                stack.append(target)
        check_tree(
            self.root, self._plans[self.root].spec.sub_agent_names(), lambda n: self._plan(n).spec.sub_agent_names()
        )
        for name in sorted(self.models):
            if name not in self._plans:
                raise ConfigError(
                    "models names an agent the harness does not have",
                    reason="unknown_agent",
                    details={"name": str(name)[:64]},
                )
            if not isinstance(self.models[name], ScriptedModel):
                raise _invalid("models maps agent names to ScriptedModel", f"models.{name}")
        if self.model is not None and not isinstance(self.model, ScriptedModel):
            raise _invalid("model is a ScriptedModel", "model")
        for name in reached:
            if self.model is None and name not in self.models:
                raise ConfigError("an agent has no scripted model", reason="no_scripted_model", details={"agent": name})

    def _plan(self, name: str) -> AgentPlan:
        """The compiled plan of the agent called ``name``.

        Raises:
            ConfigError: ``unknown_sub_agent``.
        """
        plan = self._plans.get(name)
        if plan is None:
            raise ConfigError("no agent of that name", reason="unknown_sub_agent", details={"name": name[:64]})
        return plan

    def _model_for(self, agent: str) -> ScriptedModel:
        """The scripted model that answers ``agent``'s calls.

        Raises:
            ConfigError: ``no_scripted_model``.
        """
        model = self.models.get(agent, self.model)
        if model is None:
            raise ConfigError("an agent has no scripted model", reason="no_scripted_model", details={"agent": agent})
        return model

    # ---- turns --------------------------------------------------------------------------------------------------
    def _deadline(self) -> float:
        return float("inf") if self.timeout is None else self.clock() + self.timeout

    def _drive(self, turn: Turn) -> tuple[_Driver, Result]:
        driver = _Driver(self)
        return driver, driver.drive(turn, self._deadline())

    def prompt(self, input: Any) -> TurnOutcome:
        """One turn of the root's compatibility conversation (its history is kept for the next ``prompt``).

        Raises:
            AgentError: ``invalid_input`` (before the turn); ``script_exhausted``.
        """
        turn = Turn(self._plans[self.root], input=_input(input), conversation=self.conversation, clock=self.clock)
        driver, (value, error) = self._drive(turn)
        return driver.outcome(value, error)

    def invoke(
        self, input: Any, *, state: Mapping[str, Any] | None = None, scope: Mapping[str, str] | None = None
    ) -> TurnOutcome:
        """One turn with fresh history; ``state`` is its read-only state snapshot, ``scope`` its
        ``{"app_name", "user_id", "session_id"}`` (as ``adk.invoke``).

        Raises:
            ConfigError: ``unknown_key`` / ``invalid_value`` for ``scope`` or ``state``.
            AgentError: ``invalid_input``; ``script_exhausted``.
        """
        if scope is not None and not isinstance(scope, Mapping):
            raise _invalid("scope is a mapping", "scope")
        scope = dict(scope or {})
        unknown = sorted(set(scope) - {"app_name", "user_id", "session_id"})
        if unknown:
            raise ConfigError("unknown scope key", reason="unknown_key", details={"key": f"scope.{unknown[0]}"})
        for key, value in scope.items():
            check_id(value, f"scope.{key}", error=ConfigError)
        snapshot = check_json_object(state or {}, "state", error=ConfigError)
        turn = Turn(
            self._plans[self.root],
            input=_input(input),
            scope={k: scope.get(k, "") for k in ("app_name", "user_id", "session_id")},
            state=snapshot,
            clock=self.clock,
        )
        driver, (value, error) = self._drive(turn)
        return driver.outcome(value, error)

    def run(self, input: Any, *, user_id: str = "user", session_id: str = "session") -> TurnOutcome:
        """One Runner invocation of the root in the session ``(app_name, user_id, session_id)``.

        Raises:
            ValidationError: an invalid ``user_id`` / ``session_id``.
            AgentError: ``invalid_input``; ``script_exhausted``.
        """
        return self._runner(user_id, session_id, input=_input(input))

    def resume(
        self, response: Any, *, key: str | None = None, user_id: str = "user", session_id: str = "session"
    ) -> TurnOutcome:
        """Resume a paused Runner invocation (``key``: its continuation or invocation id; ``None`` when the session
        has one pause) with ``response`` (``{"confirmed": bool}`` for a confirmation).

        Raises:
            ValidationError: ``invalid_resume_response`` (not JSON), an invalid key or name.
            AgentError: ``script_exhausted``.
        """
        check_optional_id(key or None, "key")
        response = check_json(response, "response", reason="invalid_resume_response")
        return self._runner(user_id, session_id, resume=ResumeSpec(key=key or "", response=response))

    def _runner(self, user_id: str, session_id: str, **turn: Any) -> TurnOutcome:
        request = RunnerTurn(
            app_name=self.app_name,
            user_id=validate_name(user_id, "user_id"),
            session_id=validate_name(session_id, "session_id"),
            session_service=self.session_service,
            options=self.options,
            sink=_SINK,
            **turn,
        )
        scope = {"app_name": self.app_name, "user_id": user_id, "session_id": session_id}
        runner_turn = Turn(self._plans[self.root], input=request.input, scope=scope, runner=request, clock=self.clock)
        driver, (value, error) = self._drive(runner_turn)
        ref = SessionRef(app_name=self.app_name, user_id=user_id, session_id=session_id)
        try:
            state: dict[str, Any] | None = dict(self.session_service.get_session(ref).state)
        except SessionNotFound:
            state = None
        return driver.outcome(value, error, state)


def _runner_options(options: Mapping[str, Any] | None) -> RunnerOptions:
    """Runner keyword options, validated as ``Runner`` validates them.

    Raises:
        ConfigError: as :func:`~adk_actors.agents.turn.options.runner_options`.
    """
    if options is not None and not isinstance(options, Mapping):
        raise _invalid("runner_options is a mapping of Runner options", "runner_options")
    return runner_options(**dict(options or {}))


def run_turn(
    agent: AgentDefinition,
    input: Any,
    *,
    model: ScriptedModel | None = None,
    models: Mapping[str, ScriptedModel] | None = None,
    sub_agents: Sequence[AgentDefinition] = (),
    tools: Sequence[Any] = (),
    state: Mapping[str, Any] | None = None,
    runner_options: Mapping[str, Any] | RunnerOptions | None = None,
    session_service: Any = None,
    timeout: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TurnOutcome:
    """One turn of ``agent`` in this process (the arguments are :class:`TurnHarness`'s).

    Without ``runner_options`` the turn is an ``invoke`` (fresh history; ``state`` its read-only snapshot). With
    them (``{}`` for the defaults) it is a Runner invocation in the session ``("app", "user", "session")`` of
    ``session_service`` (default: a new in-memory one), created with ``state`` when it does not exist yet; the
    outcome then has the stored events and the session's state.

    Raises:
        ConfigError, AgentError: as :class:`TurnHarness` and :meth:`TurnHarness.invoke` / :meth:`TurnHarness.run`.
    """
    harness = TurnHarness(
        agent,
        model=model,
        models=models,
        sub_agents=sub_agents,
        tools=tools,
        runner_options=runner_options,
        session_service=session_service,
        timeout=timeout,
        clock=clock,
    )
    if runner_options is None:
        return harness.invoke(input, state=state)
    if state is not None:
        snapshot = check_json_object(state, "state", error=ConfigError)
        harness.session_service.create_session(
            app_name=harness.app_name, user_id="user", session_id="session", state=snapshot
        )
    return harness.run(input)
