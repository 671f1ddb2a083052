"""The agent actor: a tier-2 ``GenServer`` that runs an agent's turns by executing their effects.

Accepts (calls):

* :class:`~adk_actors.agents.messages.Prompt` — a compatibility-conversation turn (history kept here; all prompts
  of an agent form one FIFO session queue); answered with the output (``str``, or a content dict for non-text
  answers).
* :class:`~adk_actors.agents.messages.Invoke` — a turn with fresh history in the FIFO session queue of its
  ``(app_name, user_id, session_id)`` scope; different sessions overlap up to ``max_concurrent_invocations``.
  Answered with the output, or (``commit``: a delegation below a Runner) a
  :class:`~adk_actors.agents.messages.Delegated` whose state delta the caller stores in its session.
* :class:`~adk_actors.agents.messages.RunnerTurn` — a Runner invocation in the queue of its session (answered with
  a :class:`~adk_actors.agents.messages.TurnResult`; its events go to its sink as they are stored).
* :class:`~adk_actors.agents.messages.Describe`, :class:`~adk_actors.agents.messages.GetHistory`, ``Ping``,
  ``GetStatus``. Tell: :class:`~adk_actors.agents.messages.CancelTurn`.

What a turn does is decided by :class:`~adk_actors.agents.turn.engine.Turn`, which does no I/O; this actor only
admits turns through :class:`~adk_actors.agents.queues.SessionQueues` and executes the effects they hand out:
provider and session calls on the host's I/O threads (``agents/blocking.py``), tools, gates, callback hooks,
instruction providers and compaction functions as jobs in the worker pool (or inline), calls to sub-agents (by
registered name, so a restarted one is found), to the node's ``admission`` actor and session store, and sends to
a run's sink. Each result goes back to its turn, and what the turn hands out next is executed in turn. When the
agent exits (stopped or crashed), every running and queued turn is answered with
``ActorCrashed(reason="agent_exited")``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from adk_actors.admission.messages import Acquire, Release
from adk_actors.agents import blocking
from adk_actors.agents.messages import (
    CancelTurn,
    Describe,
    GetHistory,
    Invoke,
    Prompt,
    RunnerTurn,
    TurnAccepted,
)
from adk_actors.agents.queues import SessionQueues
from adk_actors.agents.spec import AgentSpec, check_ancestry
from adk_actors.agents.turn import effects as fx
from adk_actors.agents.turn.engine import AgentPlan, Conversation, Turn
from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.context.cache import (
    Acquire as CacheAcquire,
)
from adk_actors.context.cache import (
    CacheCall,
    CacheDecision,
    Invalidate,
    prefix_fingerprint,
    prefix_tokens,
)
from adk_actors.errors import ActorCrashed, AdkError, AgentError, AskTimeout, ConfigError, RunError
from adk_actors.models.gemini.caches import cache_prefix, is_cache_not_found
from adk_actors.observability.bus import take_bus_dropped
from adk_actors.observability.spans import enabled as tracing
from adk_actors.observability.spans import export_spans, take_dropped
from adk_actors.plugins.hooks import run_plugin_hook
from adk_actors.plugins.messages import InvokeInstance
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer, OnReply
from adk_actors.runtime.workers import CancelJob
from adk_actors.sessions.client import STORE_NAME, ActorSessionService
from adk_actors.sessions.messages import SessionBatch
from adk_actors.telemetry import TELEMETRY_NAME, Emit, TelemetryEvent
from adk_actors.telemetry import event as telemetry_event
from adk_actors.tools.remote import CancelRemoteCall

__all__ = ["AgentActor"]

_EXECUTE_TOOL = CallableRef.by_name("adk_actors.agents.toolexec.execute_tool")
_CHECK_GATE = CallableRef.by_name("adk_actors.agents.toolexec.check_gate")
_RUN_HOOK = CallableRef.by_name("adk_actors.agents.callbacks.run_hook")
_RESOLVE = CallableRef.by_name("adk_actors.agents.instructions.resolve_instructions")
_RUN_PLUGIN = CallableRef.by_name("adk_actors.plugins.hooks.run_plugin_hook")
_INGEST = CallableRef.by_name("adk_actors.memory.access.ingest_events")
_ENQUEUE = CallableRef.by_name("adk_actors.memory.drain.enqueue_events")
_COMPAT_QUEUE = "prompt"
_TELEMETRY_BATCH_S = 0.02


@dataclass(slots=True)
class _Slot:
    """A turn in a session queue: its asker, its queue and the handles of its in-flight effects."""

    ctx: CallCtx
    queue: str
    turn: Turn
    handles: dict[int, tuple[str, Any]] = field(default_factory=dict)
    """Effect id → ``("io", io_id)`` or ``("job", call_id)``: what a ``Cancel`` effect cancels."""


@dataclass(frozen=True, slots=True)
class _SendTelemetry:
    pass


def _ignore(_value: Any, _error: AdkError | None) -> None:
    return None


def _message(error: AdkError) -> str:
    message = error.details.get("message", "")
    return message.lower() if isinstance(message, str) else ""


class AgentActor(GenServer):
    """One agent; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan: AgentPlan | None = None
        self.conversation = Conversation()
        self.queues: SessionQueues[_Slot] = SessionQueues(32)
        self.turns_done = 0
        self.admitting = False
        self.telemetry_queue: list[TelemetryEvent] = []
        self.effects: deque[tuple[_Slot, fx.Effect]] = deque()
        self.running = False

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, AgentSpec):
            raise ConfigError("an agent actor needs an AgentSpec", reason="invalid_agent_spec")
        self.plan = AgentPlan(args)
        self.conversation = Conversation(loaded=args.session_id is None)
        self.queues = SessionQueues(args.max_concurrent_invocations)
        return None

    def terminate(self, reason: str) -> None:
        """Answer every running and queued turn: the agent is exiting (stopped or crashed)."""
        self._send_telemetry()
        name = self.plan.spec.name if self.plan is not None else "?"
        error = ActorCrashed(
            "the agent exited during the turn", reason="agent_exited", details={"agent": name, "why": reason}
        )
        for slot in list(self.queues.drain()):
            self._run(slot, slot.turn.abort(error))

    def status(self) -> dict[str, Any]:
        return {
            "kind": "agent",
            "agent": self.plan.spec.name if self.plan is not None else None,
            "active": len(self.queues.active),
            "queued": self.queues.queued(),
            "turns_done": self.turns_done,
            "history_entries": len(self.conversation.history),
        }

    # ---- calls and tells ----------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        plan = self.plan
        assert plan is not None
        if isinstance(request, Prompt):
            turn = Turn(
                plan, input=request.input, conversation=self.conversation, outcome=request.outcome, tracing=tracing()
            )
            self._enqueue(_Slot(ctx, _COMPAT_QUEUE, turn))
            return DEFERRED
        if isinstance(request, Invoke):
            check_ancestry(plan.spec.name, request.ancestry)
            scope = {"app_name": request.app_name, "user_id": request.user_id, "session_id": request.session_id}
            queue = (
                canonical_dumps([request.app_name, request.user_id, request.session_id])
                if request.session_id
                else f"invoke:{uuid.uuid4().hex}"
            )
            turn = Turn(
                plan,
                input=request.input,
                scope=scope,
                ancestry=tuple(request.ancestry),
                state=request.state,
                root_global=request.root_global_instruction,
                commit=request.commit,
                trace=request.trace,
                tracing=tracing(),
                plugins=request.plugins,
                run_id=request.run_id,
                observability=request.observability,
            )
            self._enqueue(_Slot(ctx, queue, turn))
            return DEFERRED
        if isinstance(request, RunnerTurn):
            if request.sink is not None:  # the run watches this process: if it dies, the run fails at once
                self.send_to(request.sink, TurnAccepted(turn_id=request.turn_id, pid=os.getpid()))
            scope = {"app_name": request.app_name, "user_id": request.user_id, "session_id": request.session_id}
            turn = Turn(plan, input=request.input, scope=scope, runner=request, tracing=tracing())
            self._enqueue(_Slot(ctx, canonical_dumps([request.app_name, request.user_id, request.session_id]), turn))
            return DEFERRED
        if isinstance(request, Describe):
            spec = plan.spec
            return {
                "name": spec.name,
                "description": spec.description,
                "sub_agents": list(spec.sub_agent_names()),
                "tools": [t.name for t in spec.tools],
            }
        if isinstance(request, GetHistory):
            return copy_json(self.conversation.history)[0]
        return super().handle_call(request, ctx)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, CancelTurn):
            error = RunError("the invocation was cancelled", reason="cancelled", details={"cause": message.reason[:64]})
            for slot in [*self.queues.active.values(), *(s for q in self.queues.pending.values() for s in q)]:
                if slot.turn.turn_id == message.turn_id:
                    self._run(slot, slot.turn.cancel(error))
            return
        super().handle_info(message, sender)

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _SendTelemetry):
            self._send_telemetry()
            return
        super().handle_timer(message)

    # ---- session queues -----------------------------------------------------------------------------------------
    def _enqueue(self, slot: _Slot) -> None:
        self.queues.add(slot.queue, slot)
        self._admit()

    def _admit(self) -> None:
        if self.admitting:  # a turn finished while being started: the outer loop goes on
            return
        self.admitting = True
        try:
            while (admitted := self.queues.next()) is not None:
                slot = admitted[1]
                if slot.turn.done or slot.ctx.deadline < time.monotonic():  # cancelled, or the asker gave up queued
                    self.queues.release(slot.queue, slot)
                    continue
                self._run(slot, slot.turn.start(slot.ctx.deadline))
        finally:
            self.admitting = False

    # ---- effects ------------------------------------------------------------------------------------------------
    def _run(self, slot: _Slot, effects: list[fx.Effect]) -> None:
        """Execute effects in the order turns hand them out (one FIFO, also for effects that an effect executed
        synchronously — an inline plugin — produced)."""
        self.effects.extend((slot, effect) for effect in effects)
        if self.running:
            return
        self.running = True
        try:
            while self.effects:
                slot, effect = self.effects.popleft()
                _EXECUTORS[type(effect)](self, slot, effect)
        finally:
            self.running = False

    def _back(self, slot: _Slot, effect_id: int) -> OnReply:
        """The callback that feeds effect ``effect_id``'s result back to its turn."""

        def done(value: Any, error: AdkError | None) -> None:
            slot.handles.pop(effect_id, None)
            self._run(slot, slot.turn.on(effect_id, value, error))

        return done

    def _progress(self, slot: _Slot, effect_id: int) -> Callable[[Any], None]:
        return lambda value: self._run(slot, slot.turn.progress(effect_id, value))

    def _io(self, slot: _Slot, effect_id: int, fn: Any, args: tuple[Any, ...], deadline: float, **kw: Any) -> None:
        slot.handles[effect_id] = ("io", self.io_call(fn, args, deadline, self._back(slot, effect_id), **kw))

    def _job(
        self, slot: _Slot, effect_id: int, fn: CallableRef, args: tuple[Any, ...], deadline: float, **kw: Any
    ) -> None:
        on_done = self._back(slot, effect_id) if effect_id else _ignore
        job = self.run_job(fn, args, deadline, on_done, **kw)
        if job and effect_id:
            slot.handles[effect_id] = ("job", job)

    def _call_model(self, slot: _Slot, e: fx.CallModel) -> None:
        if e.cache is not None:
            self._cached_model_call(slot, e, e.cache)
            return
        if e.streaming == "none":
            self._io(slot, e.id, blocking.generate, (e.config, e.history, e.tools, e.trace, e.span), e.deadline)
            return
        args = (e.config, e.history, e.tools, e.streaming, e.max_stream_bytes, e.trace, e.span)
        self._io(slot, e.id, blocking.stream_model, args, e.deadline, on_progress=self._progress(slot, e.id))

    # ---- the provider prefix cache (docs/CONTEXT.md) --------------------------------------------------------------
    def _model_io(self, slot: _Slot, e: fx.CallModel, config: dict[str, Any], on_done: OnReply) -> None:
        """The provider call of ``e`` with ``config``; its result goes to ``on_done`` (not straight to the turn)."""
        if e.streaming == "none":
            args: tuple[Any, ...] = (config, e.history, e.tools, e.trace, e.span)
            io_id = self.io_call(blocking.generate, args, e.deadline, on_done)
        else:
            args = (config, e.history, e.tools, e.streaming, e.max_stream_bytes, e.trace, e.span)
            io_id = self.io_call(blocking.stream_model, args, e.deadline, on_done, self._progress(slot, e.id))
        slot.handles[e.id] = ("io", io_id)

    def _cached_model_call(self, slot: _Slot, e: fx.CallModel, cache: CacheCall) -> None:
        """Acquire a cached prefix, then call the model with ``cachedContent`` and without the prefix. A prefix
        below ``min_prefix_tokens`` (or a provider without caches) goes uncached; a failure goes uncached
        (``bypass``) or fails the turn (``fail``); a cache the provider no longer knows is forgotten and the call
        retried once uncached (``bypass``)."""
        options = cache.options
        back = self._back(slot, e.id)
        plain = partial(self._model_io, slot, e, e.config, back)
        if e.config.get("provider", "gemini") != "gemini":
            plain()
            return
        try:
            prefix = cache_prefix(e.config, e.history, e.tools)
        except AdkError:
            plain()  # the provider refuses the same request with the precise error
            return
        if not prefix or prefix_tokens(prefix) < options.min_prefix_tokens:
            plain()
            return
        connection: dict[str, Any] = {
            k: e.config[k] for k in ("model", "api_key", "base_url", "request_timeout") if k in e.config
        }
        request = CacheAcquire(
            scope=cache.scope,
            prefix=prefix,
            prefix_key=prefix_fingerprint(prefix),
            config=connection,
            ttl_ms=options.ttl_ms,
        )

        name = ""

        def failed(reason: str, details: dict[str, Any]) -> None:
            self._cache_event(slot, "bypass" if options.failure_mode == "bypass" else "failed", reason)
            if options.failure_mode == "bypass":
                plain()
                return
            error = AgentError(
                "the provider prefix cache failed",
                reason="context_cache_failed",
                details={
                    "cause": reason[:64],
                    **({"status": details["status"]} if isinstance(details.get("status"), int) else {}),
                    **({"provider_reason": details["cause"]} if isinstance(details.get("cause"), str) else {}),
                },
            )
            back(None, error)

        def answered(value: Any, error: AdkError | None) -> None:
            if error is not None and is_cache_not_found(error) and "cachedcontent" in _message(error):
                self.call(options.cache.name, Invalidate(scope=cache.scope, name=name), e.deadline, _ignore)
                failed("cache_not_found", {"status": getattr(error, "status", 0)})
                return
            back(value, error)

        def acquired(decision: Any, error: AdkError | None) -> None:
            nonlocal name
            if slot.turn.done:
                return
            if error is not None:
                failed("acquire_timeout" if isinstance(error, AskTimeout) else "cache_unavailable", {})
                return
            if not isinstance(decision, CacheDecision) or decision.outcome == "bypass":
                reason = decision.reason if isinstance(decision, CacheDecision) else "cache_unavailable"
                failed(reason or "bypass", decision.details if isinstance(decision, CacheDecision) else {})
                return
            name = decision.name
            self._cache_event(slot, decision.outcome, "")
            self._model_io(slot, e, {**e.config, "cached_content": name}, answered)

        deadline = min(e.deadline, time.monotonic() + options.acquire_timeout_ms / 1000)
        self.call(options.cache.name, request, deadline, acquired)

    def _cache_event(self, slot: _Slot, outcome: str, reason: str) -> None:
        """``agent.context.cache``: how the prefix cache served one model call (structural only)."""
        metadata: dict[str, Any] = {"agent": slot.turn.spec.name, "outcome": outcome}
        if reason:
            metadata["reason"] = reason
        self._telemetry(slot, fx.Telemetry(events=(telemetry_event("agent.context.cache", {}, **metadata),)))

    def _run_tool(self, slot: _Slot, e: fx.RunTool) -> None:
        args = (e.payload, e.name, e.args, e.call_id, e.context, list(e.callbacks), e.runner)
        self._job(slot, e.id, _EXECUTE_TOOL, args, e.deadline, inline=e.inline)

    def _check_gate(self, slot: _Slot, e: fx.CheckGate) -> None:
        self._job(slot, e.id, _CHECK_GATE, (e.payload, e.args, e.call_id, e.context), e.deadline, inline=e.inline)

    def _run_hook(self, slot: _Slot, e: fx.RunHook) -> None:
        self._job(slot, e.id, _RUN_HOOK, (list(e.callbacks), e.hook, e.args), e.deadline)

    def _run_plugin(self, slot: _Slot, e: fx.RunPlugin) -> None:
        """A plugin hook: a call to its stateful instance, inline here (opt-in, trusted code: its result goes back
        at once), or a job in the worker pool."""
        if e.instance is not None:
            request = InvokeInstance(hook=e.hook, context=e.context, owner_pid=os.getpid())
            self.call(e.instance, request, e.deadline, self._back(slot, e.id) if e.id else _ignore)
        elif e.inline:
            result = run_plugin_hook(e.plugin, e.config, e.hook, e.context)
            if e.id:
                self._run(slot, slot.turn.on(e.id, result, None))
        else:
            args = (e.plugin, e.config, e.hook, e.context)
            self._job(slot, e.id, _RUN_PLUGIN, args, e.deadline, job_class="plugin", max_memory_mb=e.max_memory_mb)

    def _spans(self, slot: _Slot, e: fx.Spans) -> None:
        export_spans(e.records)

    def _resolve(self, slot: _Slot, e: fx.ResolveInstructions) -> None:
        memory = (e.memory, e.memory_query, e.memory_spec) if e.memory is not None else None
        args = (e.local, e.global_, e.scope, e.artifacts, e.artifact_names, memory)
        self._job(slot, e.id, _RESOLVE, args, e.deadline)

    def _compress(self, slot: _Slot, e: fx.Compress) -> None:
        """A compaction's summary: the user's function in the worker pool (its own job class and memory bound),
        or one provider call on an I/O thread."""
        if e.function is not None:
            self._job(
                slot, e.id, e.function, (e.request,), e.deadline, job_class="compressor", max_memory_mb=e.max_memory_mb
            )
            return
        self._io(slot, e.id, blocking.generate, (e.config, e.history, [], e.trace, False), e.deadline)

    def _ingest(self, slot: _Slot, e: fx.Ingest) -> None:
        back = self._back(slot, e.id) if e.id else None

        def done(value: Any, error: AdkError | None) -> None:
            if error is not None:
                self.log.warning("memory ingestion failed", reason=error.reason, session_id=e.session_id)
            if back is not None:
                back(value, error)

        if e.outbox is not None:  # durable: enqueue (the turn waits for the commit), the drainer adds
            args = (e.outbox, e.memory.app, e.memory.user, e.session_id, list(e.items))
            self.run_job(_ENQUEUE, args, e.deadline, done)
        else:
            self.run_job(_INGEST, (e.memory, e.session_id, list(e.items)), e.deadline, done)

    def _call_agent(self, slot: _Slot, e: fx.CallAgent) -> None:
        self.call(e.target, e.request, e.deadline, self._back(slot, e.id))

    def _call_remote(self, slot: _Slot, e: fx.CallRemoteTool) -> None:
        call_id = self.call(e.target, e.request, e.deadline, self._back(slot, e.id))
        slot.handles[e.id] = ("remote", (e.target, call_id))

    def _acquire(self, slot: _Slot, e: fx.AcquirePermit) -> None:
        request = Acquire(
            agent=e.agent, owner_pid=os.getpid(), overflow=e.overflow, queue_timeout_ms=e.queue_timeout_ms
        )
        self.call("admission", request, e.deadline, self._back(slot, e.id))

    def _release_permit(self, slot: _Slot, e: fx.ReleasePermit) -> None:
        self.send_to("admission", Release(permit_id=e.permit_id))

    def _session_call(self, slot: _Slot, e: fx.SessionCall) -> None:
        """The in-memory backend is the node's store actor (a message, no thread); others block an I/O thread."""
        if isinstance(e.service, ActorSessionService):
            self.call(STORE_NAME, SessionBatch(ops=e.ops), e.deadline, self._back(slot, e.id))
            return
        self._io(slot, e.id, blocking.session_calls, (e.service, e.ops), e.deadline)

    def _load(self, slot: _Slot, e: fx.LoadConversation) -> None:
        self._io(slot, e.id, blocking.load_conversation, (e.service, e.agent, e.key), e.deadline)

    def _save(self, slot: _Slot, e: fx.SaveConversation) -> None:
        self._io(slot, e.id, blocking.save_conversation, (e.service, e.agent, e.key, e.history), e.deadline)

    def _notify(self, slot: _Slot, e: fx.Notify) -> None:
        self.send_to(e.target, e.message)

    def _cancel(self, slot: _Slot, e: fx.Cancel) -> None:
        for effect_id in e.ids:
            kind, handle = slot.handles.pop(effect_id, ("", None))
            if kind == "io":
                self.cancel_io(handle)
            elif kind == "job":
                self.send_to("workers", CancelJob(call_id=handle))
            elif kind == "remote":
                target, call_id = handle
                self.send_to(target, CancelRemoteCall(call_id))

    def _telemetry(self, slot: _Slot, e: fx.Telemetry) -> None:
        """Queue a turn's telemetry; the queue goes to the hub in one message at most every 20 ms (one message
        per turn was a seventh of a Runner turn's sends)."""
        if not self.telemetry_queue:
            self.start_timer(_TELEMETRY_BATCH_S, _SendTelemetry())
        self.telemetry_queue.extend(e.events)

    def _send_telemetry(self) -> None:
        for reason, count in take_dropped().items():  # span export drops of this process, as metrics see them
            self.telemetry_queue.append(telemetry_event("observability.dropped", {"count": count}, reason=reason))
        for reason, count in take_bus_dropped().items():  # envelopes the bus of this process dropped
            self.telemetry_queue.append(
                telemetry_event("observability.dropped", {"count": count}, reason=f"bus.{reason}")
            )
        if self.telemetry_queue:
            self.send_to(TELEMETRY_NAME, Emit(events=tuple(self.telemetry_queue)))
            self.telemetry_queue = []

    def _log(self, slot: _Slot, e: fx.Log) -> None:
        getattr(self.log, e.level)(e.message, **e.fields)

    def _reply(self, slot: _Slot, e: fx.Reply) -> None:
        self.reply(slot.ctx, e.value)
        self._ended(slot)

    def _fail(self, slot: _Slot, e: fx.Fail) -> None:
        self.fail(slot.ctx, e.error)
        self._ended(slot)

    def _ended(self, slot: _Slot) -> None:
        self.turns_done += 1
        self.queues.release(slot.queue, slot)
        self._admit()


_EXECUTORS: dict[type, Callable[[AgentActor, _Slot, Any], None]] = {
    fx.CallModel: AgentActor._call_model,
    fx.RunTool: AgentActor._run_tool,
    fx.CheckGate: AgentActor._check_gate,
    fx.RunHook: AgentActor._run_hook,
    fx.ResolveInstructions: AgentActor._resolve,
    fx.Compress: AgentActor._compress,
    fx.Ingest: AgentActor._ingest,
    fx.RunPlugin: AgentActor._run_plugin,
    fx.Spans: AgentActor._spans,
    fx.CallAgent: AgentActor._call_agent,
    fx.CallRemoteTool: AgentActor._call_remote,
    fx.AcquirePermit: AgentActor._acquire,
    fx.ReleasePermit: AgentActor._release_permit,
    fx.SessionCall: AgentActor._session_call,
    fx.LoadConversation: AgentActor._load,
    fx.SaveConversation: AgentActor._save,
    fx.Notify: AgentActor._notify,
    fx.Cancel: AgentActor._cancel,
    fx.Telemetry: AgentActor._telemetry,
    fx.Log: AgentActor._log,
    fx.Reply: AgentActor._reply,
    fx.Fail: AgentActor._fail,
}
"""How each effect is executed."""
