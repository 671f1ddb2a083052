"""The Runner half of the agent actor: one invocation against a session, with events, budgets, policy and pauses.

:class:`RunnerMixin` is mixed into :class:`~adk_actors.agents.agent_actor.AgentActor`; a Runner invocation is a
turn of the agent's usual model/tool loop (same session queues, callbacks, tool execution and deadlines) with these
differences:

* admission: a permit from the node's ``admission`` actor (owned by this host's pid, so a dead host frees it) is
  held from before the session is read until the answer; released on completion, failure and cancellation;
* the session is the history: the invocation reads the session's events, appends its own — the user event, every
  model answer, one tool event per round, stream partials, the final event — one write at a time, in order, and
  sends each stored event to the invocation's sink (a run actor) as a ``TurnEvent``; the model's history is
  rebuilt from the events before every model call under the ``context_policy`` (``agents/context.py``);
* budgets: ``max_llm_calls``, ``max_tool_rounds``, the request envelope, ``max_stream_output_bytes``;
* runtime policy (fail-closed): the agent and the input before anything is stored, each tool after resolution and
  schema validation and before callbacks and confirmation, tool results and the final output; a denial appends an
  immutable ``system`` audit event and is never given the rejected value;
* pauses: a confirmation-gated call (a serial barrier) or a long-running suspension stores the round's answers so
  far and a pause event, answers ``TurnResult(kind="paused")`` and keeps ``temp:`` state; a resume claims the
  pause atomically (``runner_turn.py``) and finishes the round;
* boundaries: ``temp:`` state is cleared after the final event or after the error event of a failed invocation.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from adk_actors.admission.messages import Acquire, Release
from adk_actors.agents.context import check_request_envelope, history_from_events
from adk_actors.agents.runner_turn import (
    OPEN,
    RunnerTurn,
    TurnEvent,
    TurnResult,
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
from adk_actors.content.parts import FunctionResponsePart
from adk_actors.errors import (
    AdkError,
    AskTimeout,
    BudgetExceeded,
    ConcurrencyConflict,
    PolicyDenied,
    RunError,
    ToolError,
)
from adk_actors.events import Event, EventActions
from adk_actors.models import ModelResponse, stream_content
from adk_actors.models import stream as stream_text
from adk_actors.policy import Decision
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.threadtimers import thread_timers
from adk_actors.sessions.client import STORE_NAME, ActorSessionService
from adk_actors.sessions.messages import SessionBatch, SessionOp
from adk_actors.sessions.model import SessionRef
from adk_actors.tools import failed_function_response

if TYPE_CHECKING:
    from adk_actors.agents.agent_actor import _Turn

__all__ = ["RunnerMixin", "RunnerState"]

_EXECUTE_TOOL = CallableRef.by_name("adk_actors.agents.toolexec.execute_tool")
_CHECK_GATE = CallableRef.by_name("adk_actors.agents.toolexec.check_gate")
_BATCH_DELTAS = 32
_BATCH_SECONDS = 0.05
_WRITE_TIMEOUT_S = 30.0


@dataclass(slots=True)
class RunnerState:
    """The Runner part of one turn."""

    request: RunnerTurn
    permit: Any = None
    started: bool = False
    """The invocation touched the session (its user event or its resume claim is stored)."""
    ending: bool = False
    write_failed: bool = False
    events: list[Event] = field(default_factory=list)
    writes: deque[tuple[Event, Mapping[str, Any] | None, Callable[[], None], bool, bool]] = field(default_factory=deque)
    temp_cleared: bool = False
    writing: bool = False
    sent: int = 0
    llm_calls: int = 0
    persisted: set[int] = field(default_factory=set)
    approved: set[int] = field(default_factory=set)
    io_ids: set[int] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)
    paused: Event | None = None
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


# ---- blocking session and provider calls (I/O threads of the host) ---------------------------------------------


def _session_calls(token: Any, service: Any, ops: tuple[SessionOp, ...]) -> list[Any]:
    return [getattr(service, op.method)(*op.args, **op.kwargs) for op in ops]


class _Batcher:
    """Stream deltas grouped into batches (>= 32 deltas or 50 ms): one batch is one partial event.

    A batch is flushed by the delta that completes it or, when the model pauses, by a timer 50 ms after the batch's
    first delta (on the process's timer thread), so a partial never waits for the next chunk."""

    def __init__(self, token: Any, mode: str, max_bytes: int) -> None:
        self.token, self.mode, self.max_bytes = token, mode, max_bytes
        self.parts: list[dict[str, Any]] = []
        self.count = 0
        self.total = 0
        self.first = 0.0
        self.lock = threading.Lock()
        self.timer: int | None = None
        self.grounding: dict[str, Any] | None = None
        """The grounding envelope a frame of the current batch brought (accumulated over the stream so far)."""
        self.reported: dict[str, Any] | None = None

    def text(self, delta: str) -> None:
        self._add({"type": "text", "text": delta}, len(delta.encode("utf-8")))

    def frame(self, frame: Any) -> None:
        parts = [p for p in frame.content.get("parts", []) if p.get("type") != "function_call"]
        if frame.provider_metadata is not None and frame.provider_metadata != self.reported:
            with self.lock:  # rides on the batch it arrived with (or the next one that has parts)
                self.grounding = frame.provider_metadata
        if parts:
            self._add_many(parts, len(json.dumps(parts).encode("utf-8")))

    def _add(self, part: dict[str, Any], size: int) -> None:
        self._add_many([part], size)

    def _add_many(self, parts: list[dict[str, Any]], size: int) -> None:
        self.total += size
        if self.total > self.max_bytes:
            raise BudgetExceeded(
                "the model's streamed output passed max_stream_output_bytes",
                reason="max_stream_output_bytes",
                details={"max": self.max_bytes},
            )
        with self.lock:
            if not self.parts:
                self.first = time.monotonic()
                self.timer = thread_timers.add(_BATCH_SECONDS, self._flush_due)
            for part in parts:
                last = self.parts[-1] if self.parts else None
                if (
                    last is not None
                    and part.get("type") == "text"
                    and last.get("type") == "text"
                    and set(part) == {"type", "text"}
                    and set(last) == {"type", "text"}
                ):
                    last["text"] += part["text"]
                else:
                    self.parts.append(dict(part))
            self.count += 1
            if self.count >= _BATCH_DELTAS or time.monotonic() - self.first >= _BATCH_SECONDS:
                self._flush()

    def _flush_due(self) -> None:
        with self.lock:
            self.timer = None
            self._flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if self.timer is not None:
            thread_timers.cancel(self.timer)
            self.timer = None
        if self.parts:
            self.token.report(({"schema_version": 1, "parts": self.parts}, self.grounding))
            if self.grounding is not None:
                self.reported, self.grounding = self.grounding, None
            self.parts, self.count = [], 0


def _stream(
    token: Any,
    config: dict[str, Any],
    history: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    mode: str,
    max_bytes: int,
) -> ModelResponse:
    batcher = _Batcher(token, mode, max_bytes)
    try:
        if mode == "text":
            response = stream_text(config, history, tools, batcher.text, cancel=token)
        else:
            response = stream_content(config, history, tools, batcher.frame, cancel=token)
        batcher.flush()
    finally:
        with batcher.lock:  # a failed stream reports nothing more (its partial events end with the error)
            if batcher.timer is not None:
                thread_timers.cancel(batcher.timer)
                batcher.timer = None
            batcher.parts = []
    return response


class RunnerMixin:
    """Runner invocations inside the agent actor; see the module docstring."""

    if TYPE_CHECKING:  # provided by AgentActor / GenServer
        spec: Any
        tools: dict[str, Any]
        catalog: Any

        def _finish(self, turn: _Turn, value: Any, error: AdkError | None) -> None: ...
        def _complete(self, turn: _Turn, value: Any, error: AdkError | None) -> None: ...
        def _bounded(self, turn: _Turn) -> float | None: ...
        def _turn_timeout(self) -> AskTimeout: ...
        def _call_model(self, turn: _Turn) -> None: ...
        def _dispatch_calls(self, turn: _Turn, response: ModelResponse) -> None: ...
        def _output(self, response: ModelResponse) -> Any: ...
        def _check_input(self, value: Any) -> Any: ...
        def _resolve_instructions(self, turn: _Turn) -> None: ...
        def _respond(self, turn: _Turn, index: int, part: dict[str, Any]) -> None: ...
        def _failed(self, turn: _Turn, index: int, error: BaseException) -> None: ...
        def _next_group(self, turn: _Turn) -> None: ...
        def _group(self, turn: _Turn, indices: Any) -> deque[list[int]]: ...
        def _on_tool(self, turn: _Turn, index: int, value: Any, error: AdkError | None) -> None: ...
        def _call_agent(self, turn: _Turn, index: int, target: str, args: dict[str, Any], deadline: float) -> None: ...
        def _emit(self, turn: _Turn, name: str, measurements: dict[str, Any], **metadata: Any) -> None: ...
        def io_call(
            self, fn: Any, args: tuple[Any, ...], deadline: float, on_done: Any, on_progress: Any = None
        ) -> int: ...
        def cancel_io(self, io_id: int) -> None: ...
        def run_job(
            self,
            fn: Any,
            args: tuple[Any, ...],
            deadline: float,
            on_done: Any,
            *,
            inline: bool = False,
            job_class: str = "default",
        ) -> str | None: ...
        def call(self, ref: Any, request: Any, deadline: float, on_reply: Any) -> str: ...
        def send_to(self, ref: Any, message: Any) -> None: ...

    # ---- start: admission, session, input ---------------------------------------------------------------------
    def _runner_admit(self, turn: _Turn) -> None:
        runner = turn.runner
        assert runner is not None
        admission = runner.request.options.admission
        if admission is None:
            self._runner_load(turn)
            return
        request = Acquire(
            agent=self.spec.name,
            owner_pid=os.getpid(),
            overflow=admission.get("overflow", ""),
            queue_timeout_ms=int(admission.get("queue_timeout", -1)),
        )

        def granted(permit: Any, error: AdkError | None) -> None:
            if error is not None:
                # The admission queue holds a request no longer than its caller waits: past the invocation's
                # deadline, the run timed out (whichever of the two answers arrived first).
                if (
                    isinstance(error, AskTimeout) or error.reason == "admission_timeout"
                ) and time.monotonic() >= turn.deadline:
                    error = self._turn_timeout()
                self._finish(turn, None, error)
                return
            runner.permit = permit
            if turn.done:  # cancelled while queued for admission
                self._release_permit(runner)
                return
            self._runner_load(turn)

        self.call("admission", request, turn.deadline, granted)

    def _release_permit(self, runner: RunnerState) -> None:
        if runner.permit is not None:
            self.send_to("admission", Release(permit_id=runner.permit.permit_id))
            runner.permit = None

    def _runner_io(
        self,
        turn: _Turn,
        fn: Any,
        args: tuple[Any, ...],
        on_done: Any,
        on_progress: Any = None,
        deadline: float | None = None,
        cancellable: bool = False,
    ) -> None:
        """A blocking call of this invocation; ``cancellable`` ones (provider calls) are cancelled when the
        invocation ends early. Session writes are never cancelled half-way."""
        runner = turn.runner
        assert runner is not None
        holder: list[int] = []

        def done(value: Any, error: AdkError | None) -> None:
            if holder:
                runner.io_ids.discard(holder[0])
            on_done(value, error)

        io_id = self.io_call(
            fn, args, deadline if deadline is not None else time.monotonic() + _WRITE_TIMEOUT_S, done, on_progress
        )
        if cancellable:
            holder.append(io_id)
            runner.io_ids.add(io_id)

    def _session(
        self,
        turn: _Turn,
        ops: list[SessionOp],
        on_done: Callable[[list[Any], AdkError | None], None],
        deadline: float | None = None,
    ) -> None:
        """Session-service calls in order, as one step: a message to the node's store actor for the in-memory
        backend (no thread, no endpoint), blocking calls on the I/O threads for any other backend. ``on_done``
        gets the list of results."""
        runner = turn.runner
        assert runner is not None
        service = runner.request.session_service
        deadline = deadline if deadline is not None else time.monotonic() + _WRITE_TIMEOUT_S
        if isinstance(service, ActorSessionService):
            self.call(STORE_NAME, SessionBatch(ops=tuple(ops)), deadline, on_done)
            return
        self._runner_io(turn, _session_calls, (service, tuple(ops)), on_done, deadline=deadline)

    def _runner_load(self, turn: _Turn) -> None:
        runner = turn.runner
        assert runner is not None

        ref = runner.ref
        load = SessionOp(
            method="create_session",
            kwargs={"app_name": ref.app_name, "user_id": ref.user_id, "session_id": ref.session_id},
        )
        user: Event | None = None
        denial: Decision | None = None
        if runner.request.resume is None:
            policy = runner.request.options.runtime_policy
            if policy is not None:
                denial = next(
                    (
                        d
                        for d in (
                            policy.check_agent(self.spec.name),
                            policy.check_content("input_content", self.spec.name, turn.input),
                        )
                        if not d.allowed
                    ),
                    None,
                )
            if denial is None:
                try:
                    self._check_input(turn.input)
                    user = Event.new(invocation_id=turn.invocation_id, author="user", content=turn.input).redacted()
                except AdkError as err:
                    self._finish(turn, None, err)  # nothing stored: the session is not even read
                    return

        def loaded(results: list[Any], error: AdkError | None) -> None:
            if error is not None:
                if not turn.done:
                    self._finish(turn, None, error)
                return
            session = results[0]
            runner.events = list(session.events)
            turn.state = dict(session.state)
            if user is not None:  # the user event went in with the load: the invocation has started
                runner.started = True
                self._stored(turn, user)
                turn.state = dict(results[1].state)
            if turn.done:
                return
            if runner.request.resume is not None:
                self._runner_resume(turn)
            elif denial is not None:
                self._deny(turn, denial, partial(self._finish, turn, None, _denied(denial)))
            else:
                self._resolve_instructions(turn)

        ops = [load] if user is None else [load, SessionOp(method="add_event", args=(ref, user))]
        self._session(turn, ops, loaded, deadline=min(turn.deadline, time.monotonic() + _WRITE_TIMEOUT_S))

    # ---- resume -------------------------------------------------------------------------------------------------
    def _runner_resume(self, turn: _Turn) -> None:
        runner = turn.runner
        assert runner is not None and runner.request.resume is not None
        resume = runner.request.resume
        try:
            found = select_pause(open_pauses(runner.events, turn.state), resume.key)
            pause = found.event.actions.pause
            assert pause is not None
            response = check_resume_response(pause, resume.response)
            state = round_state(runner.events, found.invocation_id)
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
            self._finish(turn, None, err)  # nothing claimed: the continuation stays resumable
            return
        turn.invocation_id = found.invocation_id
        turn.calls = state.calls
        turn.responses = [state.answered.get(i) for i in range(len(state.calls))]
        turn.rounds = state.rounds
        runner.llm_calls = state.llm_calls
        runner.persisted = set(state.answered)
        call = state.calls[gated]
        expected = {pause_key(found.continuation_id): OPEN}
        delta = claim_delta(found.continuation_id)
        if pause.reason == "long_running":
            # The terminal response is recorded against the original call: its invocation, its call id and
            # (a function-response part has no field for it) its thought signature in the event's own field.
            part = FunctionResponsePart(name=call["name"], id=call.get("id"), response=response).to_dict()
            signature = call.get("thought_signature")
            claim = Event.new(
                invocation_id=turn.invocation_id,
                author=self.spec.name,
                content={"schema_version": 1, "parts": [part]},
                actions=EventActions(state_delta=delta),
                thought_signature=signature or None,
            )
            turn.responses[gated] = part
            runner.persisted.add(gated)
        else:
            claim = Event.new(invocation_id=turn.invocation_id, author="user", actions=EventActions(state_delta=delta))
            if response["confirmed"]:
                runner.approved.add(gated)
            else:
                turn.responses[gated] = failed_function_response(
                    call["name"],
                    call.get("id"),
                    ToolError("the user rejected the call", reason="tool_confirmation_rejected"),
                ).to_dict()

        def claimed() -> None:
            runner.started = True
            rest = [i for i in range(len(turn.calls)) if turn.responses[i] is None]
            turn.groups = self._group(turn, [i for i in rest if i != gated])
            if gated in rest:
                turn.groups.appendleft([gated])
            turn.after_config = lambda: self._next_group(turn)
            self._resolve_instructions(turn)

        self._persist(turn, claim, claimed, expected=expected)

    # ---- events: one write at a time, in order ----------------------------------------------------------------
    def _persist(
        self,
        turn: _Turn,
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
        runner = turn.runner
        assert runner is not None
        runner.writes.append((event.redacted(), expected, then, always, boundary))
        self._pump(turn)

    def _stored(self, turn: _Turn, event: Event) -> None:
        """``event`` is in the session: keep it for the history and send it to the sink."""
        runner = turn.runner
        assert runner is not None
        runner.events.append(event)
        runner.sent += 1
        if runner.request.sink is not None:
            self.send_to(runner.request.sink, TurnEvent(turn_id=runner.request.turn_id, index=runner.sent, event=event))

    def _pump(self, turn: _Turn) -> None:
        runner = turn.runner
        assert runner is not None
        if runner.writing or not runner.writes:
            return
        event, expected, then, always, boundary = runner.writes.popleft()
        runner.writing = True

        def written(_seq: Any, error: AdkError | None) -> None:
            runner.writing = False
            if error is not None:
                # Nothing after a failed write is stored; the boundary's continuations still run.
                owed = [w[2] for w in runner.writes if w[3]] + ([then] if always else [])
                runner.writes.clear()
                runner.write_failed = True
                if isinstance(error, ConcurrencyConflict) and expected is not None:
                    error = RunError("the paused invocation was already resumed", reason="no_paused_invocation")
                if not turn.done:
                    self._finish(turn, None, error)
                for continuation in owed:
                    continuation()
                return
            self._stored(turn, event)
            runner.temp_cleared = runner.temp_cleared or boundary
            if always or not turn.done:
                then()
            self._pump(turn)

        ops = [
            SessionOp(method="add_event", args=(runner.ref, event))
            if expected is None
            else SessionOp(method="add_event_if_state", args=(runner.ref, event, expected))
        ]
        if boundary:
            ops.append(SessionOp(method="clear_temp_state", args=(runner.ref,)))
        self._session(turn, ops, written)

    # ---- model calls --------------------------------------------------------------------------------------------
    def _runner_prepare_call(self, turn: _Turn) -> bool:
        """Budgets and the model's history for the next call; False (after failing the turn) when refused."""
        runner = turn.runner
        assert runner is not None
        options = runner.request.options
        runner.llm_calls += 1
        if runner.llm_calls > options.max_llm_calls:
            self._finish(
                turn,
                None,
                BudgetExceeded(
                    "the invocation used up max_llm_calls",
                    reason="max_llm_calls",
                    details={"max": options.max_llm_calls},
                ),
            )
            return False
        events = runner.events
        if self.spec.history_policy == "exclude":  # earlier turns are removed; this invocation's input stays
            events = [e for e in events if e.invocation_id == turn.invocation_id]
        try:
            history, stats = history_from_events(
                events, current_invocation_id=turn.invocation_id, policy=options.context_policy
            )
            envelope = check_request_envelope(turn.config, history, list(self._declarations()), options.context_policy)
        except AdkError as err:
            self._finish(turn, None, err)
            return False
        self._emit(
            turn,
            "agent.context.build",
            {"selected": stats["selected"], "dropped": stats["dropped"], "bytes": stats["bytes"]},
            fingerprint=stats["fingerprint"],
        )
        self._emit(
            turn,
            "agent.context.envelope",
            {"bytes": envelope["bytes"], "tokens_estimate": envelope["tokens_estimate"]},
            fingerprint=envelope["fingerprint"],
        )
        turn.history = history
        return True

    def _declarations(self) -> list[dict[str, Any]]:
        return list(getattr(self, "declarations", []))

    def _runner_provider(
        self, turn: _Turn, history: list[dict[str, Any]], deadline: float, done: Callable[[Any, AdkError | None], None]
    ) -> None:
        from adk_actors.agents.agent_actor import _generate

        options = turn.runner.request.options if turn.runner is not None else None
        assert options is not None and turn.runner is not None
        turn.runner.streamed = []
        if options.streaming_mode == "none":
            self._runner_io(
                turn,
                _generate,
                (turn.config, list(history), self._declarations()),
                done,
                deadline=deadline,
                cancellable=True,
            )
            return
        self._runner_io(
            turn,
            _stream,
            (turn.config, list(history), self._declarations(), options.streaming_mode, options.max_stream_output_bytes),
            done,
            on_progress=lambda batch: self._on_delta(turn, batch),
            deadline=deadline,
            cancellable=True,
        )

    def _on_delta(self, turn: _Turn, batch: tuple[dict[str, Any], dict[str, Any] | None]) -> None:
        """One batch of a stream: a partial event, with the grounding envelope a frame of the batch carried."""
        if turn.done:
            return
        content, grounding = batch
        runner = turn.runner
        assert runner is not None
        policy = runner.request.options.runtime_policy
        if policy is not None:
            # A batch that takes the stream past the content budget is never stored: the output is denied here.
            runner.streamed.extend(p.get("text", "") for p in content.get("parts", []) if p.get("type") == "text")
            decision = policy.check_content("output_content", self.spec.name, "".join(runner.streamed))
            if not decision.allowed:
                self._deny(turn, decision, partial(self._finish, turn, None, _denied(decision)))
                for io_id in list(runner.io_ids):
                    self.cancel_io(io_id)
                return
        try:
            event = Event.new(
                invocation_id=turn.invocation_id,
                author=self.spec.name,
                content=content,
                partial=True,
                provider_metadata=grounding,
            )
        except AdkError as err:
            self._finish(turn, None, err)
            return
        self._persist(turn, event, lambda: None)

    def _runner_on_model(self, turn: _Turn, response: ModelResponse) -> None:
        runner = turn.runner
        assert runner is not None
        name = self.spec.name
        if response.function_calls:
            runner.approved.clear()  # an approval covers one call of one round, never a later one
            try:
                event = Event.new(
                    invocation_id=turn.invocation_id,
                    author=name,
                    content=response.content,
                    provider_metadata=response.provider_metadata,
                )
            except AdkError as err:  # an answer the event model refuses fails the turn, never the actor
                self._finish(turn, None, err)
                return
            self._persist(turn, event, lambda: self._dispatch_calls(turn, response))
            return
        try:
            output = self._output(response)
        except AdkError as err:
            self._finish(turn, None, err)
            return
        policy = runner.request.options.runtime_policy
        if policy is not None:
            decision = policy.check_content("output_content", name, output)
            if not decision.allowed:
                self._deny(turn, decision, lambda: self._finish(turn, None, _denied(decision)))
                return
        delta: dict[str, Any] = {}
        if self.spec.output_key:
            delta[self.spec.output_key] = json.loads(response.text) if self.spec.output_schema is not None else output
        try:
            final = Event.new(
                invocation_id=turn.invocation_id,
                author=name,
                content=response.content,
                is_final=True,
                actions=EventActions(state_delta=delta),
                provider_metadata=response.provider_metadata,
            )
        except AdkError as err:
            self._finish(turn, None, err)
            return
        self._persist(
            turn, final, lambda: self._finish(turn, TurnResult(kind="completed", output=output), None), boundary=True
        )

    # ---- tools ----------------------------------------------------------------------------------------------------
    def _check(self, turn: _Turn, index: int, decisions: list[Decision]) -> bool:
        """Apply policy decisions to one call: the first denial is audited and answered to the model."""
        for decision in decisions:
            if not decision.allowed:
                self._deny(turn, decision, partial(self._failed, turn, index, _denied(decision)))
                return False
        return True

    def _runner_allows_agent(self, turn: _Turn, index: int, name: str) -> bool:
        policy = turn.runner.request.options.runtime_policy if turn.runner is not None else None
        return policy is None or self._check(turn, index, [policy.check_agent(name)])

    def _runner_allows_result(self, turn: _Turn, index: int, part: dict[str, Any]) -> bool:
        policy = turn.runner.request.options.runtime_policy if turn.runner is not None else None
        return policy is None or self._check(
            turn, index, [policy.check_content("tool_result", turn.calls[index]["name"], part.get("response", {}))]
        )

    def _runner_call_tool(self, turn: _Turn, index: int, tool: Any, args: dict[str, Any], deadline: float) -> None:
        runner = turn.runner
        assert runner is not None
        call = turn.calls[index]
        name = call["name"]
        policy = runner.request.options.runtime_policy
        if policy is not None and not self._check(
            turn, index, [policy.check_tool(name), policy.check_arguments(name, args)]
        ):
            return
        if tool.agent:
            self._call_agent(turn, index, tool.agent, args, deadline)
            return
        tool_timeout = runner.request.options.tool_timeout_ms
        if tool_timeout is not None:
            deadline = min(deadline, time.monotonic() + tool_timeout / 1000.0)
        context = {
            "invocation_id": turn.invocation_id,
            "agent_name": self.spec.name,
            **turn.scope,
            "state": turn.state,
            "ancestry": (*turn.ancestry, self.spec.name),
        }
        if index in runner.approved or tool.confirmation == "never":
            self._execute(turn, index, tool, args, context, deadline)
            return
        if tool.confirmation == "always":
            self._confirm(turn, index, args, "")
            return

        def gated(value: Any, error: AdkError | None) -> None:
            runner.jobs.discard(job or "")
            if turn.done:
                return
            if error is not None or not isinstance(value, dict) or "error" in value:
                reason = (
                    "confirmation_failed" if error is not None or not isinstance(value, dict) else str(value["error"])
                )
                self._failed(turn, index, ToolError("the confirmation gate failed", reason=reason))
            elif value.get("required"):
                self._confirm(turn, index, args, str(value.get("hint", "")))
            else:
                self._execute(turn, index, tool, args, context, deadline)

        job = self.run_job(
            _CHECK_GATE, (tool.payload, args, call.get("id"), context), deadline, gated, inline=tool.inline
        )
        if job:
            runner.jobs.add(job)

    def _execute(
        self, turn: _Turn, index: int, tool: Any, args: dict[str, Any], context: dict[str, Any], deadline: float
    ) -> None:
        runner = turn.runner
        assert runner is not None
        call = turn.calls[index]
        hooks = tuple(h for h in self.spec.callback_hooks if h.endswith("_tool"))
        turn.tool_started[index] = time.monotonic()
        self._emit(turn, "agent.tool.start", {}, tool=call["name"], call_id=str(call.get("id") or ""))

        def done(value: Any, error: AdkError | None) -> None:
            runner.jobs.discard(job or "")
            self._on_tool(turn, index, value, error)

        job = self.run_job(
            _EXECUTE_TOOL,
            (
                tool.payload,
                call["name"],
                args,
                call.get("id"),
                context,
                list(self.spec.callbacks) if hooks else [],
                True,
            ),
            deadline,
            done,
            inline=tool.inline and not hooks,
        )
        if job:
            runner.jobs.add(job)

    def _confirm(self, turn: _Turn, index: int, args: dict[str, Any], hint: str) -> None:
        call = turn.calls[index]
        details = {
            "type": "tool_confirmation",
            "function_name": call["name"],
            "call_id": call.get("id") or "",
            "action_id": action_id(turn.invocation_id, call["name"], call.get("id"), args),
        }
        if hint:
            details["hint"] = hint
        self._runner_pause(turn, "tool_confirmation", details)

    def _runner_suspend(self, turn: _Turn, index: int, value: dict[str, Any]) -> None:
        call = turn.calls[index]
        self._runner_pause(
            turn,
            "long_running",
            {
                "type": "long_running",
                "function_name": call["name"],
                "call_id": call.get("id") or "",
                "operation_id": str(value.get("operation_id", "")),
                "message": str(value.get("message", "")),
            },
        )

    def _unpersisted_parts(self, turn: _Turn) -> list[dict[str, Any]]:
        runner = turn.runner
        assert runner is not None
        parts = []
        for index, part in enumerate(turn.responses):
            if part is not None and index not in runner.persisted:
                runner.persisted.add(index)
                parts.append(part)
        return parts

    def _tool_event(self, turn: _Turn, parts: list[dict[str, Any]]) -> Event:
        runner = turn.runner
        assert runner is not None
        delta, runner.state_delta = runner.state_delta, {}
        control, runner.control = runner.control, {}
        return Event.new(
            invocation_id=turn.invocation_id,
            author=self.spec.name,
            content={"schema_version": 1, "parts": parts},
            actions=EventActions(
                state_delta=delta,
                escalate=control.get("escalate", False),
                transfer_to_agent=control.get("transfer_to_agent"),
            ),
        )

    def _runner_transferred(self, turn: _Turn, target: str, output: Any, content: Any, delta: dict[str, Any]) -> None:
        """The sub-agent a tool transferred to answered: its answer is the invocation's final event (its author),
        under the same output policy as an answer of this agent's own."""
        policy = turn.runner.request.options.runtime_policy if turn.runner is not None else None
        if policy is not None:
            decision = policy.check_content("output_content", target, output)
            if not decision.allowed:
                self._deny(turn, decision, lambda: self._finish(turn, None, _denied(decision)))
                return
        try:
            final = Event.new(
                invocation_id=turn.invocation_id,
                author=target,
                content=content,
                is_final=True,
                actions=EventActions(state_delta=delta),
            )
        except AdkError as err:
            self._finish(turn, None, err)
            return
        self._persist(
            turn, final, lambda: self._finish(turn, TurnResult(kind="completed", output=output), None), boundary=True
        )

    def _runner_round_end(self, turn: _Turn) -> None:
        parts = self._unpersisted_parts(turn)
        if not parts:
            self._call_model(turn)
            return
        self._persist(turn, self._tool_event(turn, parts), lambda: self._call_model(turn))

    def _runner_pause(self, turn: _Turn, reason: str, details: dict[str, Any]) -> None:
        """Store the round's answers so far and the pause event; the invocation ends paused (temp state kept)."""
        runner = turn.runner
        assert runner is not None
        turn.groups.clear()
        parts = self._unpersisted_parts(turn)
        if parts:
            self._persist(turn, self._tool_event(turn, parts), lambda: None)
        event = pause_event(invocation_id=turn.invocation_id, author=self.spec.name, reason=reason, details=details)
        runner.paused = event

        def stored() -> None:
            self._finish(turn, TurnResult(kind="paused", event=runner.events[-1]), None)

        self._persist(turn, event, stored)

    # ---- policy denials -------------------------------------------------------------------------------------------
    def _deny(self, turn: _Turn, decision: Decision, then: Callable[[], None]) -> None:
        """Append the denial's audit event (before the invocation started it is still recorded) and go on."""
        runner = turn.runner
        assert runner is not None
        record = decision.record(
            invocation_id=turn.invocation_id,
            agent=self.spec.name,
            **({"run_id": runner.request.run_id} if runner.request.run_id else {}),
        )
        self._persist(turn, audit_event(invocation_id=turn.invocation_id, record=record), then)

    # ---- the end --------------------------------------------------------------------------------------------------
    def _runner_end(self, turn: _Turn, value: Any, error: AdkError | None) -> None:
        """Cancel in-flight work; error event and temp clearing at the boundary; release the permit; answer."""
        runner = turn.runner
        assert runner is not None
        if runner.ending:
            return
        runner.ending = True
        for io_id in list(runner.io_ids):
            self.cancel_io(io_id)
        for job in list(runner.jobs):
            from adk_actors.runtime.workers import CancelJob

            self.send_to("workers", CancelJob(call_id=job))
        runner.jobs.clear()
        paused = error is None and isinstance(value, TurnResult) and value.kind == "paused"

        def answer() -> None:
            self._release_permit(runner)
            result = value
            if isinstance(value, TurnResult):
                result = TurnResult(
                    kind=value.kind,
                    output=value.output,
                    event=value.event,
                    events=runner.sent,
                    invocation_id=turn.invocation_id,
                )
            self._complete(turn, result, error)

        def clear() -> None:
            if not runner.started or paused or runner.write_failed or runner.temp_cleared:
                answer()
                return
            self._session(turn, [SessionOp(method="clear_temp_state", args=(runner.ref,))], lambda _v, _e: answer())

        if error is not None and runner.started and not runner.write_failed:
            runner.writes.clear()
            self._persist(
                turn,
                error_event(invocation_id=turn.invocation_id, author=self.spec.name, error=error),
                clear,
                always=True,
                boundary=True,
            )
            return
        clear()


def _denied(decision: Decision) -> PolicyDenied:
    return PolicyDenied(
        "the runtime policy denied the operation",
        reason=decision.reason,
        details={"operation": decision.operation, "subject": decision.subject, "policy_id": decision.policy_id},
    )
