"""The workflow engine: a deterministic interpreter of a ``CompiledWorkflow`` with no I/O and no user code.

The engine never calls a user callable. It hands out :class:`Task` values (run this callable with this state
snapshot and context; prompt this agent; call this tool) and is fed their results; a coordinator actor runs the
tasks in worker processes with timeouts and retries::

    engine = Engine(compiled, {"count": 0})
    launch(engine.start())
    # for each finished task:  launch(engine.on_result(task.id, result))
    # until engine.outcome is Completed | Paused | Cancelled | Failed

Commit boundaries. The engine commits — and only then changes :meth:`Engine.checkpoint` and
:attr:`Engine.commit_seq` — when a node's result is merged into the state, a fork branch's result is recorded,
a fork's deltas are merged, a pause is recorded, a nested workflow commits, or the workflow completes. A
checkpoint is JSON-safe and carries the state, the cursor (the next node, the fork's committed branches, the loop
iteration), the remaining budgets and committed visit counts, ``completed`` and ``output``, and ``paused``.
Resuming from it never replays a committed node and never replenishes a consumed budget; a task that was in
flight at the checkpoint runs again (at-least-once), with the same ``context["step_id"]`` to use as an
idempotency key.

Nested ``workflow`` nodes run inside the engine as child engines: their tasks are the parent's tasks (ids
prefixed ``<node>#<visit>>``), their commits are the parent's commits, and a pause inside them pauses the parent
and resumes the child.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeAlias

from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.errors import (
    MAX_REASON_CHARS,
    SchemaError,
    ValidationError,
    WorkflowError,
    bounded_reason,
    json_safe,
)
from adk_actors.runtime.callables import CallableRef
from adk_actors.workflows.results import (
    ActionFailed,
    Complete,
    Ok,
    Output,
    Pause,
    Result,
    Route,
    Stop,
    Transfer,
    normalize_result,
)
from adk_actors.workflows.spec import END_NODE, CompiledWorkflow, Fn, Merge, Node, Retry

__all__ = [
    "CHECKPOINT_FORMAT",
    "Cancelled",
    "Completed",
    "Engine",
    "Failed",
    "Outcome",
    "Paused",
    "Task",
    "TaskKind",
    "merge_deltas",
    "state_delta",
]

CHECKPOINT_FORMAT: Final = 1
"""The ``format`` field of checkpoints this engine writes and reads."""
MAX_CANCEL_REASON_CHARS: Final = MAX_REASON_CHARS

TaskKind = Literal["action", "route", "until", "select", "done", "decision", "prompt", "args", "agent", "tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One unit of work for the coordinator.

    ``fn`` tasks (every kind but ``agent`` and ``tool``): call ``fn.resolve()(state)`` when ``arity`` is 1, else
    ``(state, context)`` — :func:`adk_actors.workflows.results.run_callable` does exactly that in a worker —
    and feed ``normalize_result(...)`` of the JSON it returns. ``action`` and ``decision`` callables return
    action results; ``route``, ``until``, ``select``, ``done``, ``prompt`` and ``args`` return plain values,
    fed as ``Output(value, {})``. ``agent`` tasks: prompt the registered agent ``agent`` with ``prompt`` and feed
    ``Output(reply, {})``. ``tool`` tasks: call ``tool.resolve()`` (a ``Tool``, or a plain callable taking
    ``**args``) with ``args`` and feed ``Output(result, {})``. A failure after the retries is fed as
    ``ActionFailed`` (:meth:`ActionFailed.from_error`).
    """

    id: str
    """Unique within the engine and deterministic: ``<node>#<visit>/<kind>`` (nested: ``<outer>><inner>``)."""
    node: str
    """The node (step, branch, member) the task belongs to."""
    kind: TaskKind
    fn: CallableRef | None
    arity: int
    """1 or 2 for ``fn`` tasks; 0 for ``agent`` and ``tool`` tasks."""
    state: dict[str, Any]
    """A private copy of the state the task sees."""
    context: dict[str, Any]
    """``input``, ``node``, ``step``, ``attempt`` (1; the coordinator sets each attempt's number),
    ``workflow_id``, ``invocation_id``, ``step_id`` (stable across retries and resumes: an idempotency key),
    plus ``iteration`` (loop bodies), ``fork`` (fork branches), ``output`` (agent decisions)."""
    timeout_ms: int | None = None
    """Per-attempt timeout; ``None``: only the workflow deadline applies."""
    retry: Retry | None = None
    """How often to attempt the task; ``None``: once."""
    agent: str | None = None
    """``agent`` tasks: the registered agent name, resolved at dispatch."""
    prompt: str | None = None
    """``agent`` tasks: the prompt text."""
    tool: CallableRef | None = None
    """``tool`` tasks: resolves to the ``Tool`` (or callable) to run."""
    tool_name: str | None = None
    args: dict[str, Any] | None = None
    """``tool`` tasks: the validated arguments."""


@dataclass(frozen=True, slots=True)
class Completed:
    """The workflow finished; the checkpoint has ``completed: true`` and ``output``."""

    state: dict[str, Any]
    checkpoint: dict[str, Any]

    @property
    def output(self) -> Any:
        """The workflow's output (``checkpoint["output"]``)."""
        return self.checkpoint.get("output")


@dataclass(frozen=True, slots=True)
class Paused:
    """The workflow paused; resume with ``Engine(compiled, {}, checkpoint=..., resume_input=...)``."""

    details: dict[str, Any]
    """``reason``, ``summary``, ``node``; plus ``fork`` (a fork branch paused) and ``nested`` (the child's
    details, when a nested workflow paused)."""
    state: dict[str, Any]
    checkpoint: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The workflow was cancelled; ``checkpoint`` is the last commit."""

    reason: str
    checkpoint: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Failed:
    """The workflow failed; ``checkpoint`` is the last commit (resuming from it retries from there).

    ``reason`` and ``details`` are bounded on construction (``adk_actors.errors.bounded_reason`` and
    ``json_safe``), so a failure is the same small structural value in ``wait_workflow``, status and the ledger.
    """

    reason: str
    details: dict[str, Any]
    checkpoint: dict[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", bounded_reason(self.reason))
        object.__setattr__(self, "details", json_safe(dict(self.details)))


Outcome: TypeAlias = Completed | Paused | Cancelled | Failed

_Role = Literal["main", "branch", "body", "select", "route", "done"]
_STEP_ROLES: Final = frozenset({"main", "branch", "body"})


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``1``, ``1.0`` and ``True`` differ)."""
    return a is b or canonical_dumps(a) == canonical_dumps(b)


def _copy(value: Any) -> Any:
    """A private deep copy of an already-validated JSON value."""
    return json.loads(json.dumps(value))


def merge_deltas(deltas: Sequence[tuple[str, Mapping[str, Any]]], merge: Merge = "reject_conflicts") -> dict[str, Any]:
    """Merge branch deltas in the given (declared) order.

    Args:
        deltas: ``(branch_id, delta)`` pairs in declared branch order — never completion order.
        merge: ``reject_conflicts`` fails on two unequal writes to one key (equal writes are fine);
            ``ordered_last_wins`` lets the later branch win.

    Returns:
        The merged delta.

    Raises:
        WorkflowError: reason ``merge_conflict`` with ``details`` ``{"key", "branches": [first, second]}``.
    """
    merged: dict[str, Any] = {}
    writer: dict[str, str] = {}
    for branch, delta in deltas:
        for key, value in delta.items():
            if merge == "reject_conflicts" and key in merged and not _same(merged[key], value):
                raise WorkflowError(
                    "branches wrote different values to one key",
                    reason="merge_conflict",
                    details={"key": key, "branches": [writer[key], branch]},
                )
            merged[key] = value
            writer[key] = branch
    return merged


def state_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The delta that turns ``before`` into ``after`` (keys added or changed; workflows never delete keys)."""
    return {k: v for k, v in after.items() if k not in before or not _same(before[k], v)}


@dataclass(slots=True)
class _Unit:
    """One execution at one position: a node producing one action result (main, fork branch, loop body) or a
    routing decision (select, route, done)."""

    key: str
    """``<node>#<visit>``: the prefix of its task ids."""
    node: Node
    role: _Role
    input: Any
    snapshot: dict[str, Any]
    step: int
    extra: dict[str, Any] = field(default_factory=dict)
    """Context entries of its tasks: ``iteration`` (loop bodies), ``fork`` (fork branches)."""
    child: Engine | None = None
    """A nested workflow's engine."""
    child_seq: int = 0
    child_events: int = 0
    counted: bool = False
    """Whether the unit reserved a step (every action; not a join without ``run`` nor a decision)."""


def _with(details: Mapping[str, Any], **keys: Any) -> dict[str, Any]:
    """The engine's structural ``keys`` first, then the rest of ``details``: the keys win over the action's own,
    and survive the bounds ``json_safe`` applies to a failure (it keeps the first entries while its size budget
    lasts)."""
    return {**keys, **{k: v for k, v in details.items() if k not in keys}}


def _need(condition: bool, what: str) -> None:
    if not condition:
        raise WorkflowError("the checkpoint is malformed", reason="invalid_checkpoint", details={"field": what})


def _nonneg(value: Any, what: str) -> int:
    _need(isinstance(value, int) and not isinstance(value, bool) and value >= 0, what)
    return int(value)


class Engine:
    """A deterministic interpreter of one workflow invocation (see the module docstring).

    Attributes:
        outcome: ``None`` while running, then ``Completed``, ``Paused``, ``Cancelled`` or ``Failed``. Once it is
            set, every task still in :attr:`in_flight` must be cancelled; results fed later are ignored.
        events: Appended in order: ``{"type": "transfer_to_agent", "from", "to", "step", "workflow"}`` per
            accepted transfer (nested workflows' events included).
        in_flight: Tasks handed out and not yet answered, by id.
    """

    def __init__(
        self,
        compiled: CompiledWorkflow,
        state: Mapping[str, Any],
        *,
        checkpoint: Mapping[str, Any] | None = None,
        resume_input: Any = None,
        invocation_id: str = "",
        max_steps: int | None = None,
        max_transfers: int | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        """Prepare a fresh run (``state`` is the input) or a resume (``checkpoint``; ``state`` is ignored).

        Args:
            compiled: The workflow; a resume needs the same ``id``, ``version`` and ``kind`` as the checkpoint.
            state: The initial JSON-safe state, validated against the ``input_schema``.
            checkpoint: A checkpoint from :meth:`checkpoint` or an outcome, to resume from.
            resume_input: For a paused checkpoint: the JSON-safe value that replaces the paused node's output.
            invocation_id: Put in every task's context (with ``step_id``, an idempotency key).
            max_steps: Runtime bound on executed actions (on a resume it can only lower what is left).
            max_transfers: Runtime bound on accepted transfers (likewise).
            max_concurrency: Runtime bound on concurrently running fork branches.

        Raises:
            WorkflowError: ``invalid_input`` (schema), ``invalid_state``, ``invalid_value`` (an override),
                ``invalid_resume_input``, ``invalid_checkpoint``, ``checkpoint_mismatch``.
        """
        if not isinstance(compiled, CompiledWorkflow):
            raise WorkflowError(
                "Engine needs a CompiledWorkflow", reason="invalid_value", details={"field": "compiled"}
            )
        for name, value, minimum in (
            ("max_steps", max_steps, 1),
            ("max_transfers", max_transfers, 0),
            ("max_concurrency", max_concurrency, 1),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
                raise WorkflowError(
                    f"{name} must be an integer >= {minimum}", reason="invalid_value", details={"field": name}
                )
        if not isinstance(invocation_id, str):
            raise WorkflowError(
                "invocation_id must be a string", reason="invalid_value", details={"field": "invocation_id"}
            )
        self._compiled = compiled
        self._invocation_id = invocation_id
        self._max_concurrency = max_concurrency
        self.outcome: Outcome | None = None
        self.events: list[dict[str, Any]] = []
        self.in_flight: dict[str, Task] = {}
        self._started = False
        self._main: _Unit | None = None
        self._branches: dict[str, _Unit] = {}
        self._task_units: dict[str, _Unit] = {}
        self._reserved = 0
        self._new: list[Task] = []
        self._resume_inputs: dict[str, Any] = {}
        self._completed = False
        self._output: Any = None
        self._paused: dict[str, Any] | None = None
        if checkpoint is None:
            self._fresh(state, max_steps, max_transfers)
        else:
            self._load(checkpoint, resume_input, max_steps, max_transfers)

    # -- public API -----------------------------------------------------------------------------------------

    @property
    def compiled(self) -> CompiledWorkflow:
        """The workflow being run."""
        return self._compiled

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the committed state."""
        return _copy(self._state)

    @property
    def commit_seq(self) -> int:
        """Grows by one at every commit: persist :meth:`checkpoint` whenever it changed."""
        return self._seq

    def checkpoint(self) -> dict[str, Any]:
        """A copy of the last committed checkpoint (JSON-safe)."""
        return _copy(self._checkpoint)

    def start(self) -> list[Task]:
        """Begin (or resume): return the tasks to launch now.

        Raises:
            WorkflowError: ``already_started``.
        """
        if self._started:
            raise WorkflowError("the engine was already started", reason="already_started")
        self._started = True
        return self._drive(self._advance)

    def on_result(self, task_id: str, result: Result | Mapping[str, Any]) -> list[Task]:
        """Feed one finished task's result (after the coordinator's retries); return the tasks to launch now.

        Args:
            task_id: A task id from :attr:`in_flight`.
            result: A result dataclass or its JSON form (normalized here); ``ActionFailed`` for a failure.

        Raises:
            WorkflowError: ``unknown_task`` for an id that is not in flight while the engine runs (after an
                outcome, any result is ignored).
        """
        task = self.in_flight.pop(task_id, None)
        if self.outcome is not None:
            return []
        if task is None:
            raise WorkflowError("no such task in flight", reason="unknown_task")
        unit = self._task_units.pop(task_id)
        return self._drive(lambda: self._feed(unit, task, result))

    def cancel(self, reason: str) -> None:
        """Stop the workflow: ``outcome`` becomes ``Cancelled(reason, last checkpoint)`` unless it already ended.

        Raises:
            WorkflowError: ``invalid_value`` when ``reason`` is not a short string.
        """
        if not isinstance(reason, str) or not reason or len(reason) > MAX_CANCEL_REASON_CHARS:
            raise WorkflowError(
                "a cancel reason is a short string", reason="invalid_value", details={"field": "reason"}
            )
        if self.outcome is None:
            self.outcome = Cancelled(reason, self.checkpoint())

    # -- construction ---------------------------------------------------------------------------------------

    def _fresh(self, state: Mapping[str, Any], max_steps: int | None, max_transfers: int | None) -> None:
        if not isinstance(state, Mapping):
            raise WorkflowError(
                "the workflow state is a mapping", reason="invalid_state", details={"type": type(state).__name__}
            )
        try:
            copied, _ = copy_json(dict(state), field="state")
        except ValidationError as exc:
            raise WorkflowError(
                "the workflow state is not JSON-safe",
                reason="invalid_state",
                details={"rule": exc.reason, "path": exc.details.get("path", "$")},
            ) from None
        if self._compiled.input_schema is not None:
            try:
                self._compiled.input_schema.validate(copied, field="input")
            except SchemaError as exc:
                raise WorkflowError(
                    "the workflow input does not match its input_schema",
                    reason="invalid_input",
                    details={"path": exc.details.get("path"), "rule": exc.details.get("rule")},
                ) from None
        self._state: dict[str, Any] = copied
        self._cursor: dict[str, Any] = {"at": "node", "node": self._compiled.entry, "input": None}
        self._steps_left = self._compiled.max_steps if max_steps is None else max_steps
        self._transfers_left = self._compiled.max_transfers if max_transfers is None else max_transfers
        self._steps_used = 0
        self._transfers_used = 0
        self._visits: dict[str, int] = {}
        self._seq = -1
        self._commit()

    def _load(
        self, checkpoint: Mapping[str, Any], resume_input: Any, max_steps: int | None, max_transfers: int | None
    ) -> None:
        try:
            data, _ = copy_json(dict(checkpoint) if isinstance(checkpoint, Mapping) else checkpoint, field="checkpoint")
            resume, _ = copy_json(resume_input, field="resume_input")
        except ValidationError as exc:
            reason = "invalid_resume_input" if exc.details.get("field") == "resume_input" else "invalid_checkpoint"
            raise WorkflowError("not JSON-safe", reason=reason, details={"rule": exc.reason}) from None
        _need(isinstance(data, dict) and data.get("format") == CHECKPOINT_FORMAT, "format")
        wf = data.get("workflow")
        _need(isinstance(wf, dict), "workflow")
        for name in ("id", "version", "kind"):
            if wf.get(name) != getattr(self._compiled, name):
                raise WorkflowError(
                    "the checkpoint belongs to another workflow", reason="checkpoint_mismatch", details={"field": name}
                )
        _need(isinstance(data.get("state"), dict), "state")
        budgets, used = data.get("budgets"), data.get("used")
        _need(isinstance(budgets, dict) and isinstance(used, dict), "budgets")
        visits = data.get("visits")
        _need(isinstance(visits, dict) and all(k in self._compiled for k in visits), "visits")
        _need(isinstance(data.get("completed"), bool), "completed")
        paused = data.get("paused")
        _need(paused is None or isinstance(paused, dict), "paused")
        self._state = data["state"]
        self._steps_used = _nonneg(used.get("steps"), "used.steps")
        self._transfers_used = _nonneg(used.get("transfers"), "used.transfers")
        self._steps_left = _nonneg(budgets.get("steps"), "budgets.steps")
        self._transfers_left = _nonneg(budgets.get("transfers"), "budgets.transfers")
        if max_steps is not None:
            self._steps_left = min(self._steps_left, max(0, max_steps - self._steps_used))
        if max_transfers is not None:
            self._transfers_left = min(self._transfers_left, max(0, max_transfers - self._transfers_used))
        self._visits = {k: _nonneg(v, "visits") for k, v in visits.items()}
        self._completed = data["completed"]
        self._output = data.get("output")
        self._cursor = self._check_cursor(data.get("cursor"))
        self._seq = _nonneg(data.get("seq"), "seq")
        self._paused = paused
        if paused is not None:
            self._apply_resume(resume)
            self._paused = None
            self._commit()
        else:
            self._checkpoint = self._snapshot()

    def _check_cursor(self, cursor: Any) -> dict[str, Any]:
        _need(isinstance(cursor, dict), "cursor")
        at = cursor.get("at")
        if at == "end":
            return cursor
        _need(at in ("node", "edge", "fork", "loop") and cursor.get("node") in self._compiled, "cursor.node")
        node = self._compiled.node(cursor["node"])
        if at == "edge":
            _need(node.id in self._compiled.edges, "cursor.node")
        if at == "fork":
            _need(node.type == "fork" and "input" in cursor, "cursor.node")
            for key in ("done", "paused", "nested"):
                _need(isinstance(cursor.get(key), dict) and set(cursor[key]) <= set(node.branches), f"cursor.{key}")
            _need(
                all(isinstance(r, dict) and isinstance(r.get("delta"), dict) for r in cursor["done"].values()),
                "cursor.done",
            )
        if at == "loop":
            _need(node.type == "loop" and cursor.get("next") in ("body", "done"), "cursor.next")
            _nonneg(cursor.get("iteration"), "cursor.iteration")
        if "nested" in cursor and at == "node":
            _need(isinstance(cursor["nested"], dict) and node.type == "workflow", "cursor.nested")
        return cursor

    def _apply_resume(self, resume: Any) -> None:
        """Feed the resume input to whatever paused: a node's router, a fork branch, or a nested workflow."""
        cursor = self._cursor
        if cursor["at"] == "edge":
            cursor["output"] = resume
        elif cursor["at"] == "node" and "nested" in cursor:
            self._resume_inputs[cursor["node"]] = resume
        elif cursor["at"] == "fork":
            for branch, record in list(cursor["paused"].items()):
                if isinstance(record.get("nested"), dict):
                    cursor["nested"][branch] = record["nested"]
                    self._resume_inputs[branch] = resume
                else:
                    _need(isinstance(record.get("delta"), dict), "cursor.paused")
                    cursor["done"][branch] = {"output": resume, "delta": record["delta"]}
            cursor["paused"] = {}
        else:
            _need(False, "paused")

    # -- commits and outcomes -------------------------------------------------------------------------------

    def _snapshot(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "workflow": {
                "id": self._compiled.id,
                "version": self._compiled.version,
                "kind": self._compiled.kind,
                "fingerprint": self._compiled.fingerprint,
            },
            "seq": self._seq,
            "state": self._state,
            "cursor": self._cursor,
            "budgets": {"steps": self._steps_left, "transfers": self._transfers_left},
            "used": {"steps": self._steps_used, "transfers": self._transfers_used},
            "visits": self._visits,
            "completed": self._completed,
            "paused": self._paused,
        }
        if self._completed:
            document["output"] = self._output
        return _copy(document)

    def _commit(self) -> None:
        self._seq += 1
        self._checkpoint = self._snapshot()

    def _fail(self, reason: str, details: Mapping[str, Any]) -> None:
        if self.outcome is None:
            self.outcome = Failed(reason, dict(details), self.checkpoint())

    def _drive(self, step: Callable[[], None]) -> list[Task]:
        """Run ``step`` then advance; return the new tasks (none once an outcome is reached)."""
        self._new = []
        step()
        if self.outcome is None:
            self._advance()
        new, self._new = self._new, []
        if self.outcome is not None:
            for task in new:  # never launched
                self.in_flight.pop(task.id, None)
            return []
        return new

    # -- the cursor -----------------------------------------------------------------------------------------

    def _advance(self) -> None:
        """Move the cursor until work is in flight or an outcome is reached."""
        while self.outcome is None:
            cursor = self._cursor
            at = cursor["at"]
            if at == "fork":
                if not self._fork():
                    return
            elif self._main is not None:
                return
            elif at == "end":
                self._finish(cursor.get("output"))
            elif at == "node":
                self._enter(cursor["node"], cursor.get("input"))
            elif at == "edge":
                self._edge(cursor["node"], cursor.get("output"))
            else:
                self._loop()

    def _finish(self, output: Any) -> None:
        schema = self._compiled.output_schema
        if schema is not None:
            try:
                schema.validate(output, field="output")
            except SchemaError as exc:
                self._fail("invalid_output", {"path": exc.details.get("path"), "rule": exc.details.get("rule")})
                return
        if not self._completed:
            self._completed, self._output = True, output
            self._cursor = {"at": "end", "output": output}
            self._commit()
        self.outcome = Completed(self.state, self.checkpoint())

    def _enter(self, node_id: str, value: Any) -> None:
        node = self._compiled.node(node_id)
        if node.type == "fork":
            self._cursor = {"at": "fork", "node": node_id, "input": value, "done": {}, "paused": {}, "nested": {}}
        elif node.type == "loop":
            self._cursor = {
                "at": "loop",
                "node": node_id,
                "input": value,
                "iteration": 0,
                "output": None,
                "next": "body",
            }
        elif node.type in ("branch", "dynamic"):
            visit = self._visits.get(node_id, 0) + 1
            self._visits[node_id] = visit
            self._main = self._unit(node, "select", value, visit=visit)
            self._start(self._main)
        elif node.type == "join" and node.run is None:
            self._main = self._unit(node, "main", value, visit=self._visits.get(node_id, 0) + 1)
            self._done(self._main, Output(value, {}))
        else:
            unit = self._step_unit(node, "main", value)
            if unit is not None:
                self._main = unit
                self._start(unit, nested=self._cursor.get("nested"))

    def _edge(self, node_id: str, output: Any) -> None:
        edge = self._compiled.edges[node_id]
        if edge.route is None:
            assert edge.target is not None
            self._goto(edge.target, output)
        else:
            self._main = self._unit(self._compiled.node(node_id), "route", output, visit=self._visits.get(node_id, 0))
            self._start(self._main)

    def _goto(self, target: str, value: Any) -> None:
        self._cursor = (
            {"at": "end", "output": value} if target == END_NODE else {"at": "node", "node": target, "input": value}
        )

    def _loop(self) -> None:
        cursor = self._cursor
        node = self._compiled.node(cursor["node"])
        assert node.max_iterations is not None
        iteration = cursor["iteration"]
        if cursor["next"] == "body":
            value = cursor["input"] if iteration == 0 else cursor["output"]
            unit = self._step_unit(node, "body", value, extra={"iteration": iteration + 1})
            if unit is not None:
                self._main = unit
                self._start(unit)
        elif iteration >= node.max_iterations:
            self._cursor = {"at": "edge", "node": node.id, "output": cursor["output"]}
        else:
            self._main = self._unit(
                node, "done", cursor["output"], visit=self._visits.get(node.id, 0), extra={"iteration": iteration}
            )
            self._start(self._main)

    def _fork(self) -> bool:
        """Launch pending branches up to the bound; merge once all committed. True when the cursor moved."""
        cursor = self._cursor
        fork = self._compiled.node(cursor["node"])
        limit = min(
            x
            for x in (fork.max_concurrency, self._compiled.max_concurrency, self._max_concurrency, len(fork.branches))
            if x is not None
        )
        while self.outcome is None:
            pending = [
                b
                for b in fork.branches
                if b not in cursor["done"] and b not in cursor["paused"] and b not in self._branches
            ]
            if not pending or len(self._branches) >= limit:
                break
            branch = pending[0]
            unit = self._step_unit(self._compiled.node(branch), "branch", cursor["input"], extra={"fork": fork.id})
            if unit is None:
                return False
            self._branches[branch] = unit
            self._start(unit, nested=cursor["nested"].get(branch))
        if self.outcome is not None or self._branches or len(cursor["done"]) < len(fork.branches):
            return False
        assert fork.join is not None
        try:
            merged = merge_deltas([(b, cursor["done"][b]["delta"]) for b in fork.branches], fork.merge)
        except WorkflowError as exc:
            self._fail(exc.reason, _with(exc.details, node=fork.id))
            return False
        self._state.update(merged)
        self._cursor = {
            "at": "node",
            "node": fork.join,
            "input": {b: cursor["done"][b]["output"] for b in fork.branches},
        }
        self._commit()
        return True

    # -- units and tasks ------------------------------------------------------------------------------------

    def _unit(self, node: Node, role: _Role, value: Any, *, visit: int, extra: dict[str, Any] | None = None) -> _Unit:
        return _Unit(
            key=f"{node.id}#{visit}",
            node=node,
            role=role,
            input=value,
            snapshot=_copy(self._state),
            step=self._steps_used + self._reserved,
            extra=extra or {},
        )

    def _step_unit(self, node: Node, role: _Role, value: Any, *, extra: dict[str, Any] | None = None) -> _Unit | None:
        """A unit that executes an action: reserve a step (or fail with ``max_steps``)."""
        if self._steps_left - self._reserved <= 0:
            self._fail("max_steps", {"max_steps": self._steps_used + self._steps_left, "node": node.id})
            return None
        self._reserved += 1
        unit = self._unit(node, role, value, visit=self._visits.get(node.id, 0) + 1, extra=extra)
        unit.counted = True
        return unit

    def _task(
        self,
        unit: _Unit,
        kind: TaskKind,
        fn: Fn | None = None,
        *,
        context: dict[str, Any] | None = None,
        **payload: Any,
    ) -> None:
        task_id = f"{unit.key}/{kind}"
        decision = kind in ("route", "select", "done", "until")
        node = unit.node
        task = Task(
            id=task_id,
            node=node.id,
            kind=kind,
            fn=None if fn is None else fn.ref,
            arity=0 if fn is None else fn.arity,
            state=_copy(unit.snapshot),
            context={
                "input": _copy(unit.input),
                "node": node.id,
                "step": unit.step,
                "attempt": 1,
                "workflow_id": self._compiled.id,
                "invocation_id": self._invocation_id,
                "step_id": task_id,
                **unit.extra,
                **(context or {}),
            },
            timeout_ms=None if kind == "route" else node.timeout,
            retry=None if decision else node.retry,
            **payload,
        )
        self._emit(unit, task)

    def _emit(self, unit: _Unit, task: Task) -> None:
        self.in_flight[task.id] = task
        self._task_units[task.id] = unit
        self._new.append(task)

    def _start(self, unit: _Unit, *, nested: dict[str, Any] | None = None) -> None:
        node = unit.node
        if unit.role == "select":
            self._task(unit, "select", node.select)
        elif unit.role == "route":
            self._task(unit, "route", self._compiled.edges[node.id].route)
        elif unit.role == "done":
            self._task(unit, node.done_kind, node.done)
        elif unit.role == "body":
            self._task(unit, "action", node.body)
        elif node.type in ("action", "join"):
            assert node.run is not None
            self._task(unit, "action", node.run)
        elif node.type == "agent":
            assert node.agent is not None
            if isinstance(node.agent.prompt, Fn):
                self._task(unit, "prompt", node.agent.prompt)
            else:
                self._agent_task(unit, node.agent.prompt)
        elif node.type == "tool":
            assert node.tool is not None
            if node.tool.args is None:
                self._tool_task(unit, {})
            else:
                self._task(unit, "args", node.tool.args)
        else:
            self._start_child(unit, nested)

    def _agent_task(self, unit: _Unit, prompt: str) -> None:
        assert unit.node.agent is not None
        self._task(unit, "agent", agent=unit.node.agent.name, prompt=prompt)

    def _tool_task(self, unit: _Unit, args: dict[str, Any]) -> None:
        assert unit.node.tool is not None
        self._task(unit, "tool", tool=unit.node.tool.tool, tool_name=unit.node.tool.name, args=args)

    def _feed(self, unit: _Unit, task: Task, raw: Result | Mapping[str, Any]) -> None:
        if unit.child is not None:
            child_id = task.id[len(unit.key) + 1 :]
            self._child_progress(unit, unit.child.on_result(child_id, raw))
            return
        result = normalize_result(raw)
        kind = task.kind
        if kind in ("action", "decision"):
            self._done(unit, result)
            return
        if isinstance(result, ActionFailed):
            self._done(unit, result)
            return
        if not isinstance(result, Output):
            self._done(unit, ActionFailed("invalid_action_result", {"type": type(result).__name__}))
            return
        value = result.value
        if kind == "prompt":
            if not isinstance(value, str):
                self._done(unit, ActionFailed("invalid_prompt", {"type": type(value).__name__}))
            else:
                self._agent_task(unit, value)
        elif kind == "agent":
            agent = unit.node.agent
            assert agent is not None
            if agent.decision is None:
                self._done(unit, Output(value, {}))
            else:
                self._task(unit, "decision", agent.decision, context={"output": _copy(value)})
        elif kind == "args":
            if not isinstance(value, dict):
                self._done(unit, ActionFailed("invalid_tool_args", {"type": type(value).__name__}))
            else:
                self._tool_task(unit, value)
        elif kind == "tool":
            self._done(unit, Output(value, {}))
        else:
            self._decided(unit, value)

    # -- nested workflows -----------------------------------------------------------------------------------

    def _start_child(self, unit: _Unit, nested: dict[str, Any] | None) -> None:
        compiled = unit.node.workflow
        assert compiled is not None
        resume = self._resume_inputs.pop(unit.node.id, None)
        try:
            child = Engine(
                compiled, unit.snapshot, checkpoint=nested, resume_input=resume, invocation_id=self._invocation_id
            )
        except WorkflowError as exc:
            self._done(unit, ActionFailed(exc.reason, _with(exc.details, workflow=compiled.id)))
            return
        unit.child, unit.child_seq = child, child.commit_seq
        self._child_progress(unit, child.start())

    def _child_progress(self, unit: _Unit, tasks: list[Task]) -> None:
        child = unit.child
        assert child is not None
        self.events.extend(_copy(child.events[unit.child_events :]))
        unit.child_events = len(child.events)
        for task in tasks:
            task_id = f"{unit.key}>{task.id}"
            self._emit(unit, replace(task, id=task_id, context={**task.context, "step_id": task_id}))
        outcome = child.outcome
        if outcome is None:
            if child.commit_seq != unit.child_seq:
                unit.child_seq = child.commit_seq
                self._nested_checkpoint(unit, child.checkpoint())
                self._commit()
        elif isinstance(outcome, Completed):
            self._done(unit, Output(outcome.output, state_delta(unit.snapshot, outcome.state)))
        elif isinstance(outcome, Failed):
            self._done(unit, ActionFailed(outcome.reason, {"workflow": child.compiled.id, "nested": outcome.details}))
        elif isinstance(outcome, Paused):
            self._child_paused(unit, outcome)
        else:
            self._done(unit, ActionFailed("cancelled", {"workflow": child.compiled.id}))

    def _nested_checkpoint(self, unit: _Unit, checkpoint: dict[str, Any]) -> None:
        """Record a running child's last commit in the cursor, so a resume continues it instead of restarting."""
        if unit.role == "branch":
            self._cursor["nested"][unit.node.id] = checkpoint
        else:
            self._cursor["nested"] = checkpoint

    def _child_paused(self, unit: _Unit, paused: Paused) -> None:
        details = {
            "reason": paused.details.get("reason"),
            "summary": paused.details.get("summary"),
            "node": unit.node.id,
            "nested": paused.details,
        }
        if unit.counted:
            self._reserved -= 1  # the node is not committed: it continues after the resume
        if unit.role == "branch":
            details["fork"] = self._cursor["node"]
            self._branches.pop(unit.node.id, None)
            self._cursor["nested"].pop(unit.node.id, None)
            self._cursor["paused"][unit.node.id] = {"nested": paused.checkpoint}
        else:
            self._main = None
            self._state.update(state_delta(unit.snapshot, paused.state))  # commit the child's changes first
            self._cursor["nested"] = paused.checkpoint
        self._pause(details)

    def _pause(self, details: dict[str, Any]) -> None:
        self._paused = details
        self._commit()
        self.outcome = Paused(_copy(details), self.state, self.checkpoint())

    # -- results --------------------------------------------------------------------------------------------

    def _done(self, unit: _Unit, result: Result) -> None:
        if unit.role == "branch":
            self._branches.pop(unit.node.id, None)
            self._branch_done(unit, result)
            return
        self._main = None
        if unit.role == "main":
            self._main_done(unit, result)
        elif unit.role == "body":
            self._body_done(unit, result)
        elif isinstance(result, ActionFailed):  # a routing decision failed
            self._fail(result.reason, _with(result.details, node=unit.node.id))
        else:
            self._fail("invalid_action_result", {"node": unit.node.id, "type": type(result).__name__})

    def _unit_failed(self, unit: _Unit, result: Result) -> bool:
        """Fail on ``ActionFailed`` or a result this position does not accept; True when the workflow failed."""
        kind = self._compiled.kind
        node = unit.node.id
        if isinstance(result, ActionFailed):
            self._fail(result.reason, _with(result.details, node=node))
        elif isinstance(result, Pause) and not (
            (kind == "sequential" and unit.role == "main") or (kind == "graph" and unit.role in ("main", "branch"))
        ):
            self._fail("unresumable_pause", {"node": node})
        elif isinstance(result, Route) and not (kind == "graph" and unit.role == "main"):
            self._fail("unsupported_result", {"node": node, "result": "route"})
        elif isinstance(result, Transfer) and not (kind == "transfer" and unit.role == "main"):
            self._fail("unsupported_result", {"node": node, "result": "transfer"})
        else:
            return False
        return True

    def _consume(self, unit: _Unit, delta: Mapping[str, Any] | None) -> None:
        """Commit bookkeeping of a unit (the caller commits): merge its delta, count its step and its visit."""
        if delta:
            self._state.update(delta)
        if unit.counted:
            self._reserved -= 1
            self._steps_left -= 1
            self._steps_used += 1
        self._visits[unit.node.id] = self._visits.get(unit.node.id, 0) + 1

    def _main_done(self, unit: _Unit, result: Result) -> None:
        if self._unit_failed(unit, result):
            return
        node = unit.node.id
        if isinstance(result, Route):
            if result.node not in self._compiled:
                self._fail("undeclared_route", {"node": node})
                return
            self._consume(unit, result.delta)
            self._cursor = {"at": "node", "node": result.node, "input": None}
        elif isinstance(result, Transfer):
            if result.member not in self._compiled:
                self._fail("undeclared_member", {"node": node})
                return
            if self._transfers_left <= 0:
                self._fail(
                    "max_transfers", {"max_transfers": self._transfers_used + self._transfers_left, "node": node}
                )
                return
            self._consume(unit, result.delta)
            self._transfers_left -= 1
            self._transfers_used += 1
            self.events.append(
                {
                    "type": "transfer_to_agent",
                    "from": node,
                    "to": result.member,
                    "step": unit.step,
                    "workflow": self._compiled.id,
                }
            )
            self._cursor = {"at": "node", "node": result.member, "input": result.input}
        elif isinstance(result, Pause):
            self._consume(unit, result.delta)
            self._cursor = {"at": "edge", "node": node, "output": None}
            self._pause({"reason": result.reason, "summary": result.summary, "node": node})
            return
        elif isinstance(result, Stop | Complete):
            self._consume(unit, result.delta)
            self._cursor = {"at": "end", "output": result.value}
        else:
            assert isinstance(result, Ok | Output)
            self._consume(unit, result.delta)
            self._cursor = {"at": "edge", "node": node, "output": result.value if isinstance(result, Output) else None}
        self._commit()

    def _branch_done(self, unit: _Unit, result: Result) -> None:
        if self._unit_failed(unit, result):
            return
        cursor = self._cursor
        branch = unit.node.id
        cursor["nested"].pop(branch, None)
        if isinstance(result, Pause):
            self._consume(unit, None)
            cursor["paused"][branch] = {"delta": result.delta}
            self._pause({"reason": result.reason, "summary": result.summary, "node": branch, "fork": cursor["node"]})
            return
        assert isinstance(result, Ok | Output | Stop | Complete)
        self._consume(unit, None)
        cursor["done"][branch] = {"output": None if isinstance(result, Ok) else result.value, "delta": result.delta}
        self._commit()

    def _body_done(self, unit: _Unit, result: Result) -> None:
        if self._unit_failed(unit, result):
            return
        cursor = self._cursor
        assert isinstance(result, Ok | Output | Stop | Complete)
        self._consume(unit, result.delta)
        if isinstance(result, Stop | Complete):
            self._cursor = {"at": "end", "output": result.value}
        else:
            cursor["iteration"] += 1
            cursor["output"] = result.value if isinstance(result, Output) else None
            cursor["next"] = "done"
        self._commit()

    def _decided(self, unit: _Unit, value: Any) -> None:
        """A select, route, done or until value arrived (no commit: re-deciding after a resume is harmless)."""
        self._main = None
        node = unit.node
        if unit.role == "select":
            if not isinstance(value, str) or value not in node.targets:
                self._fail("undeclared_route", {"node": node.id})
            else:
                self._cursor = {"at": "node", "node": value, "input": unit.input}
        elif unit.role == "route":
            if not isinstance(value, str) or (value != END_NODE and value not in self._compiled):
                self._fail("undeclared_route", {"node": node.id})
            else:
                self._goto(value, unit.input)
        elif not isinstance(value, bool):
            self._fail("invalid_value", {"node": node.id, "task": node.done_kind, "type": type(value).__name__})
        elif value:
            self._cursor = {"at": "edge", "node": node.id, "output": self._cursor["output"]}
        else:
            self._cursor["next"] = "body"
