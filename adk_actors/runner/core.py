"""``Runner`` and the run body that drives one Runner invocation inside a stable run."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.agent import Agent
from adk_actors.agents.api import AgentLike, AgentRef, _input, _ref, _system, agent_ref, ensure_agent, local_id
from adk_actors.agents.messages import (
    CancelTurn,
    ResumeSpec,
    RunnerTurn,
    TurnAccepted,
    TurnEvent,
    TurnLost,
    TurnResult,
)
from adk_actors.agents.spec import check_agent_name
from adk_actors.agents.turn.options import RunnerOptions, runner_options
from adk_actors.agents.turn.pauses import check_resume_response, open_pauses, pause_key, select_pause
from adk_actors.content.json_values import copy_json
from adk_actors.content.validation import check_id, check_json, check_optional_id, check_timeout
from adk_actors.errors import AdkError, ConcurrencyConflict, ConfigError, RunError, ValidationError
from adk_actors.events import Event
from adk_actors.observability import semconv
from adk_actors.observability.spans import enabled as span_export_enabled
from adk_actors.observability.spans import export_spans, span_start
from adk_actors.observability.trace import TraceContext, parse_traceparent
from adk_actors.observability.trace import current as current_trace
from adk_actors.runs import api as runs_api
from adk_actors.runs.body import RunContext
from adk_actors.runs.logic import Cancelled, Completed, Failed, Paused, ReplayGap
from adk_actors.runs.messages import INDEX_NAME, OnHostLost, OnProcessLost
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.model import SessionRef, validate_name
from adk_actors.tools.suspension import TERMINAL_STATUSES

__all__ = ["Runner", "RunnerBody"]

_SLACK_S = 5.0
_STREAM_BUFFER = 4096


class Runner:
    """Runs an agent against one session per call; see the package docstring and ``docs/RUNNER.md``.

    Args:
        agent: The agent (``AgentRef`` or name), or an ``Agent`` value: when no agent of that name runs, the
            Runner spawns it now (as ``spawn_agent(agent)``, so a running system is needed); when one runs, the
            Runner uses it as it is (the value is not compared with it).
        app_name: The application the sessions belong to.
        session_service: A session service (``adk_actors.session_service()`` or a ``SqlSessionService``).
        system: The actor system (default: the current one); not part of the pickled value.
        **options: ``run_timeout`` (ms), ``max_llm_calls``, ``max_tool_rounds``, ``streaming_mode``,
            ``max_stream_output_bytes``, ``tool_execution``, ``context_policy``, ``admission_control``,
            ``runtime_policy`` (see :func:`~adk_actors.agents.turn.options.runner_options`).

    Raises:
        ConfigError: ``unknown_key`` / ``invalid_value`` naming the option.
        ValidationError: an invalid ``app_name``.
        AdkError: as ``spawn_agent`` for an ``Agent`` value that had to be spawned.
    """

    def __init__(
        self,
        agent: AgentLike,
        app_name: str,
        session_service: Any,
        *,
        system: ActorSystemHandle | None = None,
        **options: Any,
    ) -> None:
        self.app_name = validate_name(app_name, "app_name")
        if isinstance(agent, Agent):
            self.agent_name = agent.name
        else:
            self.agent_name = str(agent) if isinstance(agent, AgentRef) else check_agent_name(agent, field_name="agent")
        self.session_service = session_service
        self.options: RunnerOptions = runner_options(**options)
        self._system = system
        if isinstance(agent, Agent):  # every argument is valid: only now start anything
            ensure_agent(agent, system=system)
        if self.options.memory_outbox is not None:
            _start_drainer(self.options.memory_outbox, system)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "app_name": self.app_name,
            "agent_name": self.agent_name,
            "session_service": self.session_service,
            "options": self.options,
            "_system": None,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"Runner(agent={self.agent_name!r}, app_name={self.app_name!r})"

    # ---- helpers ------------------------------------------------------------------------------------------------
    def _handle(self) -> ActorSystemHandle:
        return _system(self._system)

    def _timeout(self, handle: ActorSystemHandle, timeout: float | None) -> float:
        timeout = check_timeout(timeout)
        if timeout is not None:
            return timeout
        limit = self.options.run_timeout_ms
        if limit is None:
            node = handle.settings.agent_turn_timeout_ms
            limit = 3_600_000 if node == "infinity" else int(node)
        return limit / 1000.0 + _SLACK_S

    def turn(
        self,
        user_id: str,
        session_id: str,
        *,
        input: Any = None,
        resume: ResumeSpec | None = None,
        sink: Any = None,
        run_id: str = "",
        trace: str | None = None,
    ) -> RunnerTurn:
        """The agent message of one invocation (used by :meth:`run` and by stable runs). ``trace``: the
        ``traceparent`` its spans nest under; ``None``: the caller's current OpenTelemetry span, if any."""
        return RunnerTurn(
            app_name=self.app_name,
            user_id=validate_name(user_id, "user_id"),
            session_id=validate_name(session_id, "session_id"),
            session_service=self.session_service,
            options=self.options,
            input=input,
            resume=resume,
            sink=sink,
            run_id=run_id,
            trace=_caller_trace() if trace is None else trace,
        )

    def _ask(self, request: RunnerTurn, timeout: float | None) -> Any:
        handle = self._handle()
        result: TurnResult = handle.ask(_ref(self.agent_name, handle).ref, request, self._timeout(handle, timeout))
        return Paused(result.event) if result.kind == "paused" else result.output

    # ---- the API -------------------------------------------------------------------------------------------------
    def run(self, user_id: str, session_id: str, input: Any, *, timeout: float | None = None) -> Any:
        """One invocation; returns the output (text or content) or ``runs.Paused(event)``.

        Raises:
            PolicyDenied: admission (``busy``, ``admission_timeout``) or runtime policy denials.
            BudgetExceeded: ``max_llm_calls``, ``max_tool_rounds``, ``max_stream_output_bytes``,
                ``context_budget_exceeded``.
            BudgetExceeded: also ``request_context_budget_exceeded`` (before any provider I/O).
            AdkError: provider, schema and timeout errors as for ``invoke``.
        """
        check_timeout(timeout)
        return self._ask(self.turn(user_id, session_id, input=_input(input)), timeout)

    def resume(
        self,
        user_id: str,
        session_id: str,
        continuation_or_invocation_id: str | None,
        response: Any,
        *,
        timeout: float | None = None,
    ) -> Any:
        """Resume a paused invocation (by continuation id or invocation id; ``None`` when the session has exactly
        one pause) with ``response``; returns like :meth:`run`.

        Raises:
            RunError: ``no_paused_invocation`` (none, or already resumed), ``ambiguous_paused_invocation``.
            ValidationError: ``invalid_resume_response`` (the continuation stays resumable).
        """
        check_timeout(timeout)
        check_optional_id(continuation_or_invocation_id or None, "continuation_or_invocation_id")
        response = check_json(response, "response", reason="invalid_resume_response")
        spec = ResumeSpec(key=continuation_or_invocation_id or "", response=response)
        return self._ask(self.turn(user_id, session_id, resume=spec), timeout)

    def stream(self, user_id: str, session_id: str, input: Any, *, timeout: float | None = None) -> Iterator[Event]:
        """One invocation as a stable run, yielding each stored event (partials, model and tool events, the final
        or pause event). A paused invocation ends the iteration after its pause event.

        Raises:
            RunError: reason of a failed run (``details["type"]`` names the error class), ``cancelled``.
        """
        check_timeout(timeout)
        handle = self._handle()
        run_id = runs_api.start(
            self, user_id, session_id, _input(input), max_buffered_events=_STREAM_BUFFER, system=handle
        )
        yield from events_of(run_id, handle, self._timeout(handle, timeout))

    def update_long_running(
        self, user_id: str, session_id: str, invocation_id: str, operation_id: str, update: Mapping[str, Any]
    ) -> Event:
        """Record a non-terminal progress update of a paused long-running call (a partial function-response
        event), atomically ordered against the terminal resume.

        ``operation_id`` and ``update["operation_id"]`` must both name the paused operation; nothing is stored
        when either does not.

        Raises:
            RunError: ``no_paused_invocation`` (none open, or resumed meanwhile).
            ValidationError: ``invalid_resume_response`` with ``details["rule"]``: ``operation_id`` (the argument
                or the update names another operation), ``not_a_mapping``, ``terminal_status`` (a terminal status
                belongs to :meth:`resume`), ``not_json``.
        """
        ref = SessionRef(app_name=self.app_name, user_id=user_id, session_id=session_id)
        check_id(invocation_id, "invocation_id")
        try:
            check_id(operation_id, "operation_id")
        except ValidationError as exc:  # still the documented rule (no paused operation has such an id)
            raise _bad_update("operation_id", exc.reason) from None
        session = self.session_service.get_session(ref)
        found = select_pause(
            [
                p
                for p in open_pauses(session.events, session.state)
                if p.event.actions.pause is not None and p.event.actions.pause.reason == "long_running"
            ],
            invocation_id,
        )
        pause = found.event.actions.pause
        assert pause is not None
        response = _progress_update(pause.details.get("operation_id"), operation_id, update)
        part = {
            "type": "function_response",
            "name": pause.details["function_name"],
            "id": pause.details.get("call_id") or None,
            "response": response,
        }
        event = Event.new(
            invocation_id=found.invocation_id,
            author=found.event.author,
            content={"schema_version": 1, "parts": [part]},
            partial=True,
        )
        try:
            self.session_service.add_event_if_state(ref, event, {pause_key(found.continuation_id): "open"})
        except ConcurrencyConflict:
            raise RunError("the paused invocation was already resumed", reason="no_paused_invocation") from None
        return event

    def run_body(self, user_id: Any, session_id: Any, input: Any) -> RunnerBody:
        """The stable-run body of one invocation (what ``runs.start(runner, user_id, session_id, input)`` runs)."""
        if not isinstance(user_id, str) or not isinstance(session_id, str):
            raise RunError(
                "a Runner run needs user_id and session_id", reason="invalid_run_options", details={"key": "user_id"}
            )
        self.turn(user_id, session_id)  # validates the names now, in the caller
        return RunnerBody(
            runner=self,
            user_id=user_id,
            session_id=session_id,
            input=_input(input),
            hosts=self._handle().settings.hosts,
            trace=_caller_trace(),
        )


def _parent_of(traceparent: str) -> TraceContext | None:
    try:
        return parse_traceparent(traceparent) if traceparent else None
    except AdkError:
        return None


def _caller_trace() -> str:
    """The caller's current OpenTelemetry span as a ``traceparent`` (``""`` without one, or without OpenTelemetry)."""
    context = current_trace()
    return context.traceparent if context is not None else ""


def events_of(run_id: str, handle: ActorSystemHandle, idle_timeout: float) -> Iterator[Event]:
    """The events of a Runner run until its terminal outcome (raised as ``RunError`` unless completed/paused)."""
    for item in runs_api.subscribe(run_id, idle_timeout=idle_timeout, system=handle):
        if isinstance(item.item, ReplayGap):
            raise RunError(
                "stream events were dropped",
                reason="replay_gap",
                details={"from_seq": item.item.from_seq, "resumes_at": item.item.resumes_at},
            )
        if not item.terminal:
            yield item.item
            continue
        outcome = item.item
        if isinstance(outcome, Completed | Paused):
            return
        if isinstance(outcome, Cancelled):
            raise RunError("the run was cancelled", reason="cancelled", details={"cause": outcome.reason})
        if isinstance(outcome, Failed):
            raise RunError("the run failed", reason=outcome.reason, details=dict(outcome.details))
        return


@dataclass
class RunnerBody:
    """The body of a stable run executing one Runner invocation (new input or a resume)."""

    runner: Runner
    user_id: str
    session_id: str
    input: Any = None
    resume: ResumeSpec | None = None
    turn_id: str = ""
    received: int = 0
    result: TurnResult | None = None
    pending: dict[int, Event] = field(default_factory=dict)
    hosts: int = 0
    """The node's host count: the agent is addressed by its inner-actor ref, so a missing agent fails at once."""
    trace: str = ""
    """The ``traceparent`` of the span that started the run (the caller's), or ``""``."""
    span: Any = field(default=None, repr=False)
    """The run's span while its invocation runs (in the run's process; never pickled with a value)."""

    def placement_key(self) -> str:
        """The agent's inner-actor id: stable runs of this body are placed on the agent's host (``runs.start``)."""
        return local_id(self.runner.agent_name)

    def _agent(self) -> Any:
        if self.hosts <= 0:
            return self.runner.agent_name
        return agent_ref(self.runner.agent_name, self.hosts)

    def start(self, run: RunContext) -> None:
        trace = self.trace
        if span_export_enabled() and self.runner.options.observability:
            name, attributes = semconv.run(self.runner.agent_name, run.run_id)
            attributes = {**attributes, **self.runner.options.span_attributes}
            self.span = span_start(name, _parent_of(self.trace), attributes, "internal")
            trace = self.span.context.traceparent
        request = self.runner.turn(
            self.user_id,
            self.session_id,
            input=self.input,
            resume=self.resume,
            sink=run.ref,
            run_id=run.run_id,
            trace=trace,
        )
        self.turn_id = request.turn_id
        # If this run's host dies, the index stops the invocation (and so frees its admission permit).
        run.send_to(
            INDEX_NAME,
            OnHostLost(
                run_id=run.run_id,
                target=self.runner.agent_name,
                message=CancelTurn(turn_id=self.turn_id, reason="host_lost"),
            ),
        )
        limit = self.runner.options.run_timeout_ms
        seconds = 3600.0 if limit is None else limit / 1000.0
        run.call(self._agent(), request, time.monotonic() + seconds + _SLACK_S, lambda v, e: self._answered(run, v, e))

    def on_message(self, run: RunContext, message: Any) -> None:
        if getattr(message, "turn_id", None) != self.turn_id or run.done:
            return
        if isinstance(message, TurnAccepted):
            run.send_to(
                INDEX_NAME,
                OnProcessLost(
                    run_id=run.run_id, pid=message.pid, target=run.ref, message=TurnLost(turn_id=self.turn_id)
                ),
            )
            return
        if isinstance(message, TurnLost):
            run.fail("agent_lost", {"agent": self.runner.agent_name})
            return
        if not isinstance(message, TurnEvent):
            return
        self.pending[message.index] = message.event
        while self.received + 1 in self.pending:  # events leave in the agent's order
            self.received += 1
            run.emit(self.pending.pop(self.received))
        self._settle(run)

    def _answered(self, run: RunContext, value: Any, error: AdkError | None) -> None:
        if self.span is not None:  # the run's span: from the start of the invocation to its answer
            export_spans([self.span.end(error_type=error.reason[:64] if error is not None else None)])
            self.span = None
        if run.done:
            return
        if error is not None:
            run.fail(error.reason, {"type": type(error).__name__, **_structural(error.details)})
            return
        self.result = value
        self._settle(run)

    def _settle(self, run: RunContext) -> None:
        result = self.result
        if result is None or self.received < result.events or run.done:
            return
        if result.kind == "paused":
            run.pause(result.event)
        else:
            run.complete(result.output)

    def cancel(self, run: RunContext, reason: str) -> None:
        if self.turn_id:
            run.send_to(self._agent(), CancelTurn(turn_id=self.turn_id, reason=reason))

    def resumed(self, pause_event: Any, response: Any) -> RunnerBody:
        """The body of the run that resumes this paused one with ``response`` (validated by the agent)."""
        pause = getattr(getattr(pause_event, "actions", None), "pause", None)
        if pause is None:
            raise RunError("the paused run has no pause event", reason="not_resumable")
        response = check_resume_response(pause, response)  # an invalid response claims nothing
        return RunnerBody(
            runner=self.runner,
            user_id=self.user_id,
            session_id=self.session_id,
            resume=ResumeSpec(key=pause.continuation_id, response=response),
            hosts=self.hosts,
            trace=_caller_trace(),
        )


def _bad_update(rule: str, cause: str | None = None) -> ValidationError:
    return ValidationError(
        "a progress update names the paused operation and is not terminal",
        reason="invalid_resume_response",
        details={"rule": rule, "pause": "long_running", **({"cause": cause} if cause else {})},
    )


def _progress_update(paused_operation: Any, operation_id: Any, update: Any) -> dict[str, Any]:
    """The JSON copy of a valid progress update of ``paused_operation``.

    Raises:
        ValidationError: ``invalid_resume_response`` (``details["rule"]``).
    """
    if not isinstance(operation_id, str) or operation_id != paused_operation:
        raise _bad_update("operation_id")
    if not isinstance(update, Mapping):
        raise _bad_update("not_a_mapping")
    if update.get("operation_id") != operation_id:
        raise _bad_update("operation_id")
    if update.get("status") in TERMINAL_STATUSES:
        raise _bad_update("terminal_status")
    try:
        copied: dict[str, Any] = copy_json(dict(update))[0]
    except AdkError:
        raise _bad_update("not_json") from None
    return copied


def _structural(details: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in details.items() if isinstance(v, str | int | float | bool) and len(str(v)) <= 256}


__all__ += ["events_of"]


def _start_drainer(spec: Any, system: ActorSystemHandle | None) -> None:
    """Durable ingestion: start (or kick) the outbox's drainer now, so what a previous process accepted and did not
    apply yet is drained as soon as the application builds its Runner again, not only at the next answered turn.

    Raises:
        ConfigError: ``durable_ingestion_unavailable`` when no node runs the drainer (``details["type"]``: why).
    """
    from adk_actors.memory.drain import ensure_drainer

    try:
        ensure_drainer(spec, system=system)
    except AdkError as err:
        raise ConfigError(
            "durable memory ingestion needs a running node for its drainer",
            reason="durable_ingestion_unavailable",
            details={"key": "memory_ingestion", "type": err.reason},
        ) from None
