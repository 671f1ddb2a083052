"""The workflow coordinator: a tier-2 actor that drives one :class:`~adk_actors.workflows.engine.Engine`.

The engine is pure; the coordinator does the effects. Every task the engine hands out runs off the coordinator's
thread: callables (actions, routers, ``until``/``select``/``done`` functions, agent prompts and decisions, tool
args) and tools in the worker-process pool (``inline`` never: workflow code is user code), agent tasks as calls
to the agent registered under that name (after checking, by ``Describe``, that the name resolves to the agent
that reports it: ``agent_identity_mismatch`` otherwise). Each attempt is bounded by the task's ``timeout`` and by
the workflow's one absolute deadline; a failed attempt is retried after ``backoff_ms`` up to ``max_attempts``
(retry counts live here, so they restart when a node is rebuilt from a checkpoint). When the engine reaches an
outcome, or a task it no longer wants is still running (a cancelled fork sibling), the job is cancelled: its
worker is killed.

Durable invocations (``DurableArgs``): before the coordinator lets the engine start any new task it commits the
engine's newest checkpoint to the ledger with its fenced lease (so a committed step is never replayed), renews
the lease every third of ``lease_ms`` while work is active, and records the outcome with ``finish`` (``paused``
stays resumable). Ledger writes go one at a time, in order (a due renewal first, then the newest checkpoint), and
each sequence number is used once: it advances only when its write landed. The outcome is announced only after
the final write — ``finish``, carrying the last checkpoint when it is newer than the ledger's, in one
transaction — landed behind any write still in flight, so ``wait_workflow`` never reports an outcome the ledger
does not hold. A refused or failed ledger write (``lease_lost`` when another owner took over after expiry, or a
storage error) stops the coordinator at once with ``Failed(<its reason>, {"operation": ...})``, logged, writing
nothing more; the invocation stays resumable.

Accepts (calls): ``WaitWorkflow`` (deferred until the outcome is announced), ``WorkflowStatus``,
``WorkflowCheckpoint``, ``CancelWorkflow``. After the announcement the actor stays for ``retention_ms``, then
exits.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.api import agent_ref
from adk_actors.agents.messages import Describe, Invoke
from adk_actors.errors import AdkError, WorkflowError
from adk_actors.events import Event, EventActions
from adk_actors.observability import semconv
from adk_actors.observability.spans import OpenSpan, export_spans, span_start
from adk_actors.observability.spans import enabled as spans_enabled
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.runtime.workers import CancelJob
from adk_actors.workflows.engine import Cancelled, Completed, Engine, Failed, Outcome, Paused, Task
from adk_actors.workflows.results import ActionFailed, Output, normalize_result
from adk_actors.workflows.spec import CompiledWorkflow

__all__ = [
    "CancelWorkflow",
    "DurableArgs",
    "WaitWorkflow",
    "WorkflowActor",
    "WorkflowArgs",
    "WorkflowCheckpoint",
    "WorkflowStatus",
]

_RUN_CALLABLE = CallableRef.by_name("adk_actors.workflows.results.run_callable")
_RUN_TOOL = CallableRef.by_name("adk_actors.workflows.coordinator.run_tool")
_MAX_WAIT_S = 24 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DurableArgs:
    """A durable invocation: the ledger descriptor, the invocation id and the lease this coordinator holds."""

    ledger: Any
    invocation_id: str
    lease: Any
    lease_ms: int
    seq: int = 0
    """The ledger's last checkpoint sequence number (the next commit is ``seq + 1``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowArgs:
    workflow_ref: str
    compiled: CompiledWorkflow
    state: dict[str, Any] = field(default_factory=dict)
    checkpoint: dict[str, Any] | None = None
    resume_input: Any = None
    timeout_ms: int | None = None
    deadline: float | None = None
    """An absolute ``time.monotonic()`` deadline; with a timeout too, the earlier one applies."""
    max_steps: int | None = None
    max_transfers: int | None = None
    max_concurrency: int | None = None
    retention_ms: int = 60000
    durable: DurableArgs | None = None
    hosts: int = 0
    """The node's host count, to address agents by their inner-actor ref (an unknown agent then fails at once
    with ``noproc`` instead of waiting in the registry); 0: by registered name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitWorkflow:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowStatus:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowCheckpoint:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelWorkflow:
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True)
class _Start:
    pass


@dataclass(frozen=True, slots=True)
class _Deadline:
    pass


@dataclass(frozen=True, slots=True)
class _Retry:
    task_id: str


@dataclass(frozen=True, slots=True)
class _Renew:
    pass


@dataclass(frozen=True, slots=True)
class _Retire:
    pass


def run_tool(tool: CallableRef, args: dict[str, Any], context: dict[str, Any]) -> Any:
    """A tool task in a worker: a ``Tool`` runs with its schema-validated arguments and a tool context naming the
    workflow invocation and step, failing closed where it would need a Runner (``tool_gate``); a plain callable
    is called with ``**args``. Returns the JSON-safe result."""
    from adk_actors.schema import compile_schema
    from adk_actors.tools.context import ToolContext
    from adk_actors.workflows.tool_gate import invoke_without_runner

    target: Any = tool.resolve()
    if callable(getattr(target, "execute", None)) and callable(getattr(target, "schema", None)):
        validated = compile_schema(target.schema()).validate(dict(args), field="args")
        ctx = ToolContext(
            invocation_id=str(context.get("invocation_id") or "workflow"),
            agent_name=str(context.get("workflow_id") or "workflow"),
            function_call_id=str(context.get("step_id") or "") or None,
        )
        return invoke_without_runner(target, validated, ctx)
    return target(**args)


def _ms(value: int | None) -> float:
    return float("inf") if value is None else value / 1000.0


class WorkflowActor(GenServer):
    """One workflow invocation; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args: WorkflowArgs | None = None
        self.engine: Engine | None = None
        self.outcome: Outcome | None = None
        self.waiters: list[CallCtx] = []
        self.deadline = 0.0
        self.attempts: dict[str, int] = {}
        self.jobs: dict[str, str] = {}
        self.pending: list[Task] = []
        self.committed_seq = -1
        """The engine ``commit_seq`` of the newest checkpoint the ledger holds."""
        self.ledger_seq = 0
        """The ledger's checkpoint seq: the next write uses ``ledger_seq + 1``."""
        self.writing: str | None = None
        """The ledger write in flight (``checkpoint``, ``renew``, ``finish``), at most one."""
        self.renew_due = False
        self.lease: Any = None
        self.started_at = time.time()
        self.finished = False
        self.run_span: OpenSpan | None = None
        """The workflow's span, where this process exports spans; each task attempt is a child span."""
        self.task_spans: dict[str, OpenSpan] = {}

    # ---- lifecycle ----------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, WorkflowArgs):
            raise WorkflowError("a workflow coordinator needs WorkflowArgs", reason="invalid_value")
        self.args = args
        durable = args.durable
        self.engine = Engine(
            args.compiled,
            args.state,
            checkpoint=args.checkpoint,
            resume_input=args.resume_input,
            invocation_id=durable.invocation_id if durable else args.workflow_ref,
            max_steps=args.max_steps,
            max_transfers=args.max_transfers,
            max_concurrency=args.max_concurrency,
        )
        timeout_ms = args.timeout_ms if args.timeout_ms is not None else args.compiled.timeout
        now = time.monotonic()
        self.deadline = min(now + _ms(timeout_ms), math.inf if args.deadline is None else args.deadline)
        if self.deadline < math.inf:
            self.start_timer(max(0.0, self.deadline - now), _Deadline())
        if durable is not None:
            self.lease = durable.lease
            self.ledger_seq = durable.seq
            self.start_timer(durable.lease_ms / 3000.0, _Renew())
        if spans_enabled():
            name = args.compiled.id
            attributes = {semconv.ADK_OPERATION: "workflow", semconv.ADK_WORKFLOW_NAME: name[:128]}
            self.run_span = span_start(f"workflow {name[:128]}", None, attributes)
        self.start_timer(0.0, _Start())
        return None

    def terminate(self, reason: str) -> None:
        self._kill_jobs(list(self.jobs))
        if self.finished or self.engine is None:
            return
        args = self.args
        if args is not None and args.durable is not None and self.lease is not None and self.writing != "finish":
            # A durable invocation outlives its coordinator: give the lease back (so another coordinator can take
            # over at once) instead of recording a terminal outcome. The exit path may block briefly.
            try:
                args.durable.ledger.release(self.lease)
            except AdkError as err:
                self.log.warning("lease not released at exit", reason=err.reason)
        self.lease = None
        self.outcome = Failed("coordinator_exited", {"why": reason}, self.engine.checkpoint())
        self._announce()

    def status(self) -> dict[str, Any]:
        return {"kind": "workflow", **self._status()}

    # ---- calls --------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        engine = self.engine
        assert engine is not None
        if isinstance(request, WaitWorkflow):
            if self.finished:
                return self.outcome
            self.waiters.append(ctx)
            return DEFERRED
        if isinstance(request, WorkflowStatus):
            return self._status()
        if isinstance(request, WorkflowCheckpoint):
            return engine.checkpoint()
        if isinstance(request, CancelWorkflow):
            if self.outcome is None:
                engine.cancel(request.reason)
                self._after([])
            return None
        return super().handle_call(request, ctx)

    def _status(self) -> dict[str, Any]:
        assert self.args is not None and self.engine is not None
        # "running" until the outcome is announced (for a durable invocation: recorded by the ledger).
        state = type(self.outcome).__name__.lower() if self.finished else "running"
        return {
            "workflow_ref": self.args.workflow_ref,
            "workflow_id": self.args.compiled.id,
            "events": self._events(),
            "version": self.args.compiled.version,
            "kind": self.args.compiled.kind,
            "state": state,
            "in_flight": len(self.engine.in_flight),
            "commit_seq": self.engine.commit_seq,
            "started_at": self.started_at,
            "invocation_id": self.args.durable.invocation_id if self.args.durable else None,
        }

    def _events(self) -> list[dict[str, Any]]:
        """The engine's handoffs as events whose ``actions.transfer_to_agent`` names the new owner (newest 256)."""
        assert self.engine is not None and self.args is not None
        invocation = self.args.durable.invocation_id if self.args.durable else self.args.workflow_ref
        out = []
        for item in self.engine.events[-256:]:
            if item.get("type") == "transfer_to_agent":
                event = Event.new(
                    invocation_id=invocation,
                    author=str(item.get("from") or "workflow"),
                    actions=EventActions(transfer_to_agent=str(item.get("to"))),
                    timestamp=self.started_at,
                )
                out.append(event.to_dict())
        return out

    # ---- timers -------------------------------------------------------------------------------------------
    def handle_timer(self, message: Any) -> None:
        engine = self.engine
        assert engine is not None
        if isinstance(message, _Start):
            try:
                tasks = engine.start()
            except WorkflowError as err:
                self._conclude(Failed(err.reason, dict(err.details), engine.checkpoint()))
                return
            self._after(tasks)
        elif isinstance(message, _Deadline):
            if self.outcome is None:
                self._conclude(Failed("deadline_exceeded", {}, engine.checkpoint()))
        elif isinstance(message, _Retry):
            task = engine.in_flight.get(message.task_id)
            if task is not None and self.outcome is None:
                self._attempt(task)
        elif isinstance(message, _Renew):
            self.renew_due = True
            self._ledger_next()
        elif isinstance(message, _Retire):
            self.stop("normal")
        else:
            super().handle_timer(message)

    # ---- driving the engine ------------------------------------------------------------------------------
    def _after(self, tasks: list[Task]) -> None:
        """New tasks from the engine: commit the checkpoint first (durable), then launch them."""
        engine = self.engine
        assert engine is not None
        self.pending.extend(tasks)
        self._kill_jobs([t for t in self.jobs if t not in engine.in_flight])
        if engine.outcome is not None:
            self.pending.clear()
            self._conclude(engine.outcome)
            return
        if self.args is not None and self.args.durable is not None and engine.commit_seq != self.committed_seq:
            self._ledger_next()  # the pending tasks start once this checkpoint landed
            return
        self._launch_pending()

    def _launch_pending(self) -> None:
        engine = self.engine
        assert engine is not None
        pending, self.pending = self.pending, []
        for task in pending:
            if task.id in engine.in_flight and self.outcome is None:
                self.attempts[task.id] = 1
                self._attempt(task)

    def _attempt(self, task: Task) -> None:
        now = time.monotonic()
        deadline = min(self.deadline, now + _ms(task.timeout_ms), now + _MAX_WAIT_S)
        attempt = self.attempts.get(task.id, 1)
        context = {**task.context, "attempt": attempt}
        if self.run_span is not None:
            assert self.args is not None
            name, attributes = semconv.workflow_node(self.args.compiled.id, task.node)
            self.task_spans[task.id] = span_start(name, self.run_span.context, {**attributes, "adk.attempt": attempt})

        def done(value: Any, error: AdkError | None) -> None:
            self._answered(task, value, error)

        if task.kind == "agent":
            self._agent(task, deadline, done)
            return
        if task.kind == "tool":
            assert task.tool is not None
            job = self.run_job(
                _RUN_TOOL,
                (task.tool, task.args or {}, context),
                deadline,
                lambda v, e: done(None if e else {"output": v, "delta": {}}, e),
            )
        else:
            assert task.fn is not None
            job = self.run_job(_RUN_CALLABLE, (task.fn, task.arity, task.kind, task.state, context), deadline, done)
        if job:
            self.jobs[task.id] = job

    def _agent(self, task: Task, deadline: float, done: Any) -> None:
        name = task.agent or ""
        assert self.args is not None
        target: Any = name
        if self.args.hosts > 0:
            target = agent_ref(name, self.args.hosts)

        def described(value: Any, error: AdkError | None) -> None:
            if error is not None:
                done(None, error)
                return
            if not isinstance(value, dict) or value.get("name") != name:
                done(
                    None,
                    WorkflowError(
                        "the agent name resolves to a different agent",
                        reason="agent_identity_mismatch",
                        details={"agent": name[:64]},
                    ),
                )
                return
            span = self.task_spans.get(task.id)
            self.call(
                target,
                Invoke(input=task.prompt or "", trace=span.context.traceparent if span is not None else ""),
                deadline,
                lambda v, e: done(None if e else {"output": v, "delta": {}}, e),
            )

        self.call(target, Describe(), deadline, described)

    def _answered(self, task: Task, value: Any, error: AdkError | None) -> None:
        engine = self.engine
        assert engine is not None and self.args is not None
        self.jobs.pop(task.id, None)
        span = self.task_spans.pop(task.id, None)
        if span is not None:
            export_spans([span.end(error_type=error.reason[:64] if error is not None else None)])
        if self.outcome is not None or task.id not in engine.in_flight:
            return
        if time.monotonic() >= self.deadline:
            # The workflow's one deadline has passed: an attempt bounded by it answers job_timeout (or an agent
            # call AskTimeout) at that same moment, and whichever arrives first, the deadline is the reason.
            self._conclude(Failed("deadline_exceeded", {}, engine.checkpoint()))
            return
        result: Any
        if error is None:
            try:
                result = normalize_result(value)
            except AdkError as err:
                result = ActionFailed.from_error(err)
        else:
            result = ActionFailed.from_error(error)
        if isinstance(result, ActionFailed) and task.retry is not None:
            attempt = self.attempts.get(task.id, 1)
            backoff_s = task.retry.backoff_ms / 1000.0
            if attempt < task.retry.max_attempts and time.monotonic() + backoff_s < self.deadline:
                self.attempts[task.id] = attempt + 1
                self.start_timer(backoff_s, _Retry(task.id))
                return
        if isinstance(result, Output) and task.kind == "agent":
            result = Output(result.value, {})
        try:
            tasks = engine.on_result(task.id, result)
        except WorkflowError as err:
            self._conclude(Failed(err.reason, dict(err.details), engine.checkpoint()))
            return
        self._after(tasks)

    def _kill_jobs(self, task_ids: list[str]) -> None:
        for task_id in task_ids:
            job = self.jobs.pop(task_id, None)
            if job:
                self.send_to("workers", CancelJob(call_id=job))

    # ---- durability --------------------------------------------------------------------------------------
    def _ledger_next(self) -> None:
        """Start the next ledger write unless one is in flight: the final write once the outcome is decided,
        else a due renewal, else the engine's newest checkpoint."""
        args, engine = self.args, self.engine
        if (
            args is None
            or args.durable is None
            or engine is None
            or self.lease is None
            or self.finished
            or self.writing is not None
        ):
            return
        if self.outcome is not None:
            self._write_finish(args.durable, engine, self.outcome)
        elif self.renew_due:
            self._write_renew(args.durable)
        elif engine.commit_seq != self.committed_seq:
            self._write_checkpoint(args.durable, engine)

    def _ledger_settled(self) -> None:
        """A write landed: let the engine go on (launch what waited for this checkpoint), then write the next."""
        if self.outcome is None:
            self._after([])
        self._ledger_next()

    def _write_checkpoint(self, durable: DurableArgs, engine: Engine) -> None:
        engine_seq, seq = engine.commit_seq, self.ledger_seq + 1

        def written(_value: Any, error: AdkError | None) -> None:
            self.writing = None
            if error is not None:
                self._ledger_failed("checkpoint", error)
                return
            self.committed_seq, self.ledger_seq = engine_seq, seq
            self._ledger_settled()

        self.writing = "checkpoint"
        self.io_call(
            _checkpoint, (durable.ledger, self.lease, engine.checkpoint(), seq), time.monotonic() + 30.0, written
        )

    def _write_renew(self, durable: DurableArgs) -> None:
        self.renew_due = False

        def renewed(lease: Any, error: AdkError | None) -> None:
            self.writing = None
            if error is not None:
                self._ledger_failed("renew", error)
                return
            self.lease = lease
            if self.outcome is None:
                self.start_timer(durable.lease_ms / 3000.0, _Renew())
            self._ledger_settled()

        self.writing = "renew"
        self.io_call(_renew_lease, (durable.ledger, self.lease, durable.lease_ms), time.monotonic() + 30.0, renewed)

    def _write_finish(self, durable: DurableArgs, engine: Engine, outcome: Outcome) -> None:
        state = type(outcome).__name__.lower()
        fresh = engine.commit_seq != self.committed_seq
        seq = self.ledger_seq + 1 if fresh else None

        def finished(_value: Any, error: AdkError | None) -> None:
            self.writing = None
            if error is not None:
                self._ledger_failed("finish", error)
                return
            self.lease = None
            if seq is not None:
                self.ledger_seq = seq
            self._announce()

        self.writing = "finish"
        self.io_call(
            _finish,
            (durable.ledger, self.lease, state, _ledger_result(outcome), outcome.checkpoint if fresh else None, seq),
            time.monotonic() + 30.0,
            finished,
        )

    def _ledger_failed(self, operation: str, error: AdkError) -> None:
        """The ledger refused or failed a write: another owner may hold the invocation now, or the database is
        gone. Stop without writing anything more; the outcome says so (the invocation stays resumable)."""
        engine = self.engine
        assert engine is not None and self.args is not None and self.args.durable is not None
        if self.finished:
            return
        self.lease = None
        decided = self.outcome
        details: dict[str, Any] = {"operation": operation}
        if decided is not None:
            details["outcome"] = type(decided).__name__.lower()
        if isinstance(error.details.get("why"), str):
            details["why"] = error.details["why"]
        self.log.warning(
            "ledger write failed; the coordinator stops",
            operation=operation,
            reason=error.reason,
            invocation_id=self.args.durable.invocation_id,
            outcome=details.get("outcome"),
        )
        failed = Failed(error.reason, details, decided.checkpoint if decided is not None else engine.checkpoint())
        if decided is None:
            self._conclude(failed)
        else:
            self.outcome = failed
            self._announce()

    def _conclude(self, outcome: Outcome) -> None:
        if self.outcome is not None:
            return
        self.outcome = outcome
        self._kill_jobs(list(self.jobs))
        if self.run_span is not None:
            reason = outcome.reason[:64] if isinstance(outcome, Failed | Cancelled) else None
            records = [span.end(error_type="cancelled") for span in self.task_spans.values()]
            records.append(self.run_span.end(error_type=reason))
            self.task_spans.clear()
            self.run_span = None
            export_spans(records)
        args = self.args
        if args is not None and args.durable is not None and self.lease is not None:
            self._ledger_next()  # the final write, after any write in flight landed
            return
        self._announce()

    def _announce(self) -> None:
        self.finished = True
        for ctx in self.waiters:
            self.reply(ctx, self.outcome)
        self.waiters.clear()
        retention = self.args.retention_ms if self.args is not None else 0
        self.start_timer(retention / 1000.0, _Retire())


def _ledger_result(outcome: Outcome) -> Any:
    if isinstance(outcome, Completed):
        return {"output": outcome.output, "state": outcome.state}
    if isinstance(outcome, Paused):
        return {"details": outcome.details, "state": outcome.state}
    if isinstance(outcome, Cancelled):
        return {"reason": outcome.reason}
    return {"reason": outcome.reason, "details": outcome.details}


# ---- ledger I/O (the host's I/O threads) ----------------------------------------------------------------------


def _checkpoint(token: Any, ledger: Any, lease: Any, checkpoint: Any, seq: int) -> None:
    ledger.checkpoint(lease, checkpoint, seq)


def _renew_lease(token: Any, ledger: Any, lease: Any, lease_ms: int) -> Any:
    return ledger.renew(lease, lease_ms)


def _finish(token: Any, ledger: Any, lease: Any, state: str, result: Any, checkpoint: Any, seq: int | None) -> None:
    ledger.finish(lease, state, result, checkpoint=checkpoint, seq=seq)
