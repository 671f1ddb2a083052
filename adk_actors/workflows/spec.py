"""Workflow specifications: ``compile_workflow(spec)`` validates a declarative spec into a ``CompiledWorkflow``.

Five kinds share one compiled form. Every kind is compiled to a graph of nodes and edges that the engine
(:mod:`adk_actors.workflows.engine`) interprets; the original ``kind`` decides which results an action may return
(``Route`` only in graphs, ``Transfer`` only in transfers, ``Pause`` in graphs and sequences)::

    sequential   steps [s1, s2, ...]               s1 -> s2 -> ... -> end_node
    parallel     branches [b1, b2], merge          $fork(b1, b2) -> $join -> end_node
    loop         body, until, max_iterations       $loop -> end_node
    transfer     entry, members {name: {...}}      every member -> end_node; Transfer(...) moves between them
    graph        entry, nodes [...], edges {...}   as declared

Internal node ids start with ``$``, which a declared id cannot. Every callable (``run``, ``until``, ``select``,
``route``, ``done``, ``decision``, ``prompt``, ``args``) is stored as a :class:`Fn`: a
:class:`~adk_actors.runtime.callables.CallableRef` (by importable name, or cloudpickled by value so lambdas and
closures cross processes) plus its arity, so the coordinator calls ``fn(state)`` or ``fn(state, context)``.

Compilation is pure. It raises ``WorkflowError`` with a bounded reason and ``details`` naming the ``key`` and/or
``node``: ``invalid_spec``, ``unknown_key``, ``missing_key``, ``invalid_value``, ``invalid_id``,
``duplicate_id``, ``undeclared_node``, ``invalid_callable``, ``unpicklable_callable``, ``invalid_merge``,
``invalid_join``, ``unreachable_join``, ``invalid_fork_branch``, ``missing_edge``, ``invalid_edge``,
``invalid_schema``, ``limit_exceeded``.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import cloudpickle

from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import SchemaError, WorkerError, WorkflowError
from adk_actors.runtime.callables import CallableRef, callable_ref
from adk_actors.schema import CompiledSchema, compile_schema

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MAX_TRANSFERS",
    "END_NODE",
    "KINDS",
    "MAX_NODES",
    "MERGES",
    "NODE_TYPES",
    "AgentCall",
    "CompiledWorkflow",
    "Edge",
    "Fn",
    "Kind",
    "Merge",
    "Node",
    "NodeType",
    "Retry",
    "ToolCall",
    "compile_workflow",
]

Kind = Literal["sequential", "parallel", "loop", "transfer", "graph"]
NodeType = Literal["action", "fork", "join", "branch", "dynamic", "loop", "agent", "tool", "workflow"]
Merge = Literal["reject_conflicts", "ordered_last_wins"]

KINDS: Final = ("sequential", "parallel", "loop", "transfer", "graph")
NODE_TYPES: Final = ("action", "fork", "join", "branch", "dynamic", "loop", "agent", "tool", "workflow")
MERGES: Final = ("reject_conflicts", "ordered_last_wins")
END_NODE: Final = "end_node"
"""The edge target that finishes the workflow."""
DEFAULT_MAX_STEPS: Final = 1000
"""Executed actions allowed when the spec sets no ``max_steps``."""
DEFAULT_MAX_TRANSFERS: Final = 10
"""Accepted transfers allowed when the spec sets no ``max_transfers``."""
MAX_NODES: Final = 4096
"""Bound on the nodes (steps, branches, members) of one workflow."""
MAX_ID_CHARS: Final = 128
MAX_WORKFLOW_ID_CHARS: Final = 255
MAX_PROMPT_CHARS: Final = 1024 * 1024

PARALLEL_FORK: Final = "$fork"
PARALLEL_JOIN: Final = "$join"
LOOP_NODE: Final = "$loop"

# Declared ids: no control characters, no "#", ">" or "/" (the engine builds task ids from them), no leading "$".
# \Z, not $: "$" also matches before a trailing newline, which would let "id\n" through.
_ID = re.compile(rf"^[^\x00-\x1f\x7f#>/$][^\x00-\x1f\x7f#>/]{{0,{MAX_ID_CHARS - 1}}}\Z")
_WORKFLOW_ID = re.compile(rf"^[^\x00-\x1f\x7f]{{1,{MAX_WORKFLOW_ID_CHARS}}}\Z")

_COMMON: Final = frozenset(
    {
        "version",
        "id",
        "kind",
        "max_steps",
        "max_transfers",
        "max_concurrency",
        "timeout",
        "retention_ms",
        "input_schema",
        "output_schema",
    }
)
_KIND_KEYS: Final[dict[str, frozenset[str]]] = {
    "sequential": frozenset({"steps"}),
    "parallel": frozenset({"branches", "merge"}),
    "loop": frozenset({"body", "until", "max_iterations"}),
    "transfer": frozenset({"entry", "members"}),
    "graph": frozenset({"entry", "nodes", "edges"}),
}
_REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "sequential": ("steps",),
    "parallel": ("branches",),
    "loop": ("body", "until", "max_iterations"),
    "transfer": ("entry", "members"),
    "graph": ("entry", "nodes"),
}
_ACTION_KEYS: Final = frozenset({"id", "run", "timeout", "retry"})
_MEMBER_KEYS: Final = frozenset({"run", "timeout", "retry"})
_NODE_KEYS: Final[dict[str, frozenset[str]]] = {
    "action": frozenset({"id", "type", "run", "timeout", "retry"}),
    "fork": frozenset({"id", "type", "branches", "join", "merge", "max_concurrency"}),
    "join": frozenset({"id", "type", "run", "timeout", "retry"}),
    "branch": frozenset({"id", "type", "targets", "select", "timeout", "retry"}),
    "dynamic": frozenset({"id", "type", "targets", "select", "timeout", "retry"}),
    "loop": frozenset({"id", "type", "body", "done", "max_iterations", "timeout", "retry"}),
    "agent": frozenset({"id", "type", "agent", "timeout", "retry"}),
    "tool": frozenset({"id", "type", "tool", "timeout", "retry"}),
    "workflow": frozenset({"id", "type", "workflow"}),
}
_NODE_REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "action": ("run",),
    "fork": ("branches", "join"),
    "join": (),
    "branch": ("targets", "select"),
    "dynamic": ("targets", "select"),
    "loop": ("body", "done", "max_iterations"),
    "agent": ("agent",),
    "tool": ("tool",),
    "workflow": ("workflow",),
}
# Node types a fork may run as a branch: each produces exactly one action result.
UNIT_TYPES: Final = frozenset({"action", "agent", "tool", "workflow"})
# Node types whose successor is not an edge.
_NO_EDGE: Final = frozenset({"fork", "branch", "dynamic"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """How often the coordinator attempts one task, and the pause between attempts."""

    max_attempts: int
    """Attempts in total (1 = no retry)."""
    backoff_ms: int = 0
    """Delay between attempts in milliseconds."""

    def to_dict(self) -> dict[str, int]:
        """``{"max_attempts", "backoff_ms"}``."""
        return {"max_attempts": self.max_attempts, "backoff_ms": self.backoff_ms}


@dataclass(frozen=True, slots=True, kw_only=True)
class Fn:
    """A user callable ready to cross processes."""

    ref: CallableRef
    """The callable, by importable name or by value."""
    arity: Literal[1, 2]
    """1: called ``fn(state)``; 2: called ``fn(state, context)`` (decided at compile time)."""

    def identity(self) -> str:
        """A stable identity for fingerprints: the importable name, else the label of a by-value callable."""
        return f"name:{self.ref.name}/{self.arity}" if self.ref.name else f"value:{self.ref.label}/{self.arity}"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCall:
    """An ``agent`` node: prompt a registered agent by name, then optionally decide on its reply."""

    name: str
    """The agent's registered name, resolved by the coordinator at dispatch time."""
    prompt: str | Fn
    """The prompt text, or a callable ``(state[, context]) -> str``."""
    decision: Fn | None = None
    """``(state[, context])`` with ``context["output"]`` = the reply, returning an action result; without it
    the node's result is ``Output(reply, {})``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A ``tool`` node: compute arguments from the state, then call a tool with them."""

    tool: CallableRef
    """Resolves to a ``Tool`` object (``execute(args, context)``) or a plain callable (``fn(**args)``)."""
    name: str
    """The tool's name (for status and fingerprints)."""
    args: Fn | None = None
    """``(state[, context]) -> dict`` of arguments; ``None`` calls the tool with ``{}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One compiled node. Only the fields of its ``type`` are set."""

    id: str
    type: NodeType
    run: Fn | None = None
    """``action`` and ``join`` (optional for a join: without it the join outputs its input)."""
    timeout: int | None = None
    """Milliseconds per attempt of this node's tasks (``None``: only the workflow deadline applies)."""
    retry: Retry | None = None
    branches: tuple[str, ...] = ()
    """``fork``: branch node ids, in declared (merge) order."""
    join: str | None = None
    merge: Merge = "reject_conflicts"
    max_concurrency: int | None = None
    targets: tuple[str, ...] = ()
    """``branch`` / ``dynamic``: the ids ``select`` may return."""
    select: Fn | None = None
    body: Fn | None = None
    """``loop``: the action run each iteration."""
    done: Fn | None = None
    """``loop``: ``(state[, context]) -> bool`` after each iteration; ``True`` leaves the loop."""
    done_kind: Literal["done", "until"] = "done"
    """The task kind of ``done``: ``"until"`` for a loop-kind workflow."""
    max_iterations: int | None = None
    agent: AgentCall | None = None
    tool: ToolCall | None = None
    workflow: CompiledWorkflow | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """Where a node goes after it commits: a static ``target`` (a node id or ``END_NODE``) or a ``route``."""

    target: str | None = None
    route: Fn | None = None
    """``(state[, context]) -> node id | "end_node"`` with ``context["input"]`` = the node's output."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledWorkflow:
    """A validated workflow; frozen and picklable (callables travel as ``CallableRef``)."""

    id: str
    version: int
    kind: Kind
    entry: str
    """The first node."""
    nodes: tuple[Node, ...]
    edges: dict[str, Edge]
    """Successors by node id (fork, branch and dynamic nodes have none)."""
    max_steps: int
    max_transfers: int
    max_concurrency: int | None
    """Bound on concurrently running fork branches (``None``: all of a fork's branches)."""
    timeout: int | None
    """Milliseconds for the whole workflow (enforced by the coordinator)."""
    retention_ms: int | None
    input_schema: CompiledSchema | None
    output_schema: CompiledSchema | None
    fingerprint: str
    """SHA-256 of the canonical structure (callables by their ref identity), for the durable ledger."""
    index: dict[str, Node] = field(repr=False, compare=False)

    def node(self, node_id: str) -> Node:
        """The node with this id.

        Raises:
            WorkflowError: reason ``undeclared_node``.
        """
        try:
            return self.index[node_id]
        except KeyError:
            raise WorkflowError("no such node", reason="undeclared_node", details={"node": node_id}) from None

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and node_id in self.index


def _fail(reason: str, message: str, **details: Any) -> WorkflowError:
    return WorkflowError(message, reason=reason, details=details)


def _mapping(value: Any, what: str, **where: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail("invalid_value", f"{what} must be a mapping", key=what, type=type(value).__name__, **where)
    for key in value:
        if not isinstance(key, str):
            raise _fail("invalid_value", f"{what} keys must be strings", key=what, **where)
    return value


def _check_keys(
    spec: Mapping[str, Any], allowed: frozenset[str], required: tuple[str, ...], prefix: str = "", **where: Any
) -> None:
    for key in spec:
        if key not in allowed:
            # Only keys the format knows are echoed; an unknown one is named by position.
            name = key if len(key) <= MAX_ID_CHARS and key.isidentifier() else f"<key#{list(spec).index(key)}>"
            raise _fail("unknown_key", "unknown key", key=prefix + name, **where)
    for key in required:
        if key not in spec:
            raise _fail("missing_key", "missing key", key=prefix + key, **where)


def _int(value: Any, key: str, minimum: int, **where: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail("invalid_value", f"{key} must be an integer >= {minimum}", key=key, **where)
    return value


def _opt_int(spec: Mapping[str, Any], key: str, minimum: int, **where: Any) -> int | None:
    return None if spec.get(key) is None else _int(spec[key], key, minimum, **where)


def _node_id(value: Any, key: str, **where: Any) -> str:
    if not isinstance(value, str) or value == END_NODE or not _ID.match(value):
        raise _fail("invalid_id", "invalid id", key=key, **where)
    return value


def _arity(fn: Callable[..., Any]) -> int | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    positional, required = 0, 0
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            return 2 if required <= 2 else None
        if param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            positional += 1
            required += param.default is inspect.Parameter.empty
        elif param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is inspect.Parameter.empty:
            return None
    if required > 2 or positional == 0:
        return None
    return 2 if positional >= 2 else 1


def _fn(value: Any, key: str, **where: Any) -> Fn:
    """Compile a user callable: a function, callable object or ``CallableRef``."""
    if isinstance(value, CallableRef):
        try:
            target = value.resolve()
        except WorkerError:
            raise _fail("invalid_callable", "the callable could not be loaded", key=key, **where) from None
        ref = value
    elif callable(value) and not isinstance(value, type):
        target = value
        try:
            ref = callable_ref(value)
        except WorkerError as exc:
            raise _fail(
                "unpicklable_callable",
                "the callable cannot be sent to another process",
                key=key,
                path=exc.details.get("path", "fn"),
                **where,
            ) from None
    else:
        raise _fail("invalid_callable", f"{key} must be callable", key=key, type=type(value).__name__, **where)
    arity = _arity(target) if callable(target) else None
    if arity is None:
        raise _fail(
            "invalid_callable", f"{key} must accept (state) or (state, context)", key=key, rule="arity", **where
        )
    return Fn(ref=ref, arity=1 if arity == 1 else 2)


def _retry(value: Any, **where: Any) -> Retry | None:
    if value is None:
        return None
    spec = _mapping(value, "retry", **where)
    _check_keys(spec, frozenset({"max_attempts", "backoff_ms"}), ("max_attempts",), "retry.", **where)
    return Retry(
        max_attempts=_int(spec["max_attempts"], "retry.max_attempts", 1, **where),
        backoff_ms=_int(spec.get("backoff_ms", 0), "retry.backoff_ms", 0, **where),
    )


def _schema(value: Any, key: str) -> CompiledSchema | None:
    if value is None:
        return None
    try:
        return compile_schema(value)
    except SchemaError as exc:
        raise _fail("invalid_schema", f"{key} is not a valid JSON Schema", key=key, rule=exc.reason) from None


def _action(spec: Any, node_id: str, *, what: str = "steps") -> Node:
    """A sequential step, parallel branch or transfer member (already keyed by ``node_id``)."""
    where = {"node": node_id}
    step = _mapping(spec, what, **where)
    return Node(
        id=node_id,
        type="action",
        run=_fn(step["run"], "run", **where),
        timeout=_opt_int(step, "timeout", 1, **where),
        retry=_retry(step.get("retry"), **where),
    )


def _action_list(value: Any, key: str) -> list[Node]:
    if not isinstance(value, list | tuple) or not value:
        raise _fail("invalid_value", f"{key} must be a non-empty list", key=key)
    if len(value) > MAX_NODES:
        raise _fail("limit_exceeded", f"too many {key}", key=key, max=MAX_NODES)
    nodes: list[Node] = []
    seen: set[str] = set()
    for position, item in enumerate(value):
        step = _mapping(item, key, index=position)
        node_id = _node_id(step.get("id"), "id", index=position) if "id" in step else None
        if node_id is None:
            raise _fail("missing_key", "missing key", key="id", index=position)
        _check_keys(step, _ACTION_KEYS, ("id", "run"), node=node_id)
        if node_id in seen:
            raise _fail("duplicate_id", "duplicate id", node=node_id)
        seen.add(node_id)
        nodes.append(_action(step, node_id, what=key))
    return nodes


def _merge(value: Any, **where: Any) -> Merge:
    if value is None:
        return "reject_conflicts"
    if value not in MERGES:
        raise _fail("invalid_merge", "merge must be reject_conflicts or ordered_last_wins", key="merge", **where)
    return "reject_conflicts" if value == "reject_conflicts" else "ordered_last_wins"


def _tool(value: Any, **where: Any) -> ToolCall:
    spec = _mapping(value, "tool", **where)
    _check_keys(spec, frozenset({"tool", "args"}), ("tool",), "tool.", **where)
    tool = spec["tool"]
    args = None if spec.get("args") is None else _fn(spec["args"], "tool.args", **where)
    if isinstance(tool, CallableRef):
        return ToolCall(tool=tool, name=tool.label or tool.name, args=args)
    name, execute = getattr(tool, "name", None), getattr(tool, "execute", None)
    if isinstance(name, str) and name and callable(execute):
        try:
            payload = cloudpickle.dumps(tool)
        except Exception:
            raise _fail(
                "unpicklable_callable", "the tool cannot be sent to another process", key="tool.tool", **where
            ) from None
        return ToolCall(tool=CallableRef(payload=payload, label=f"tool:{name}"), name=name, args=args)
    if callable(tool) and not isinstance(tool, type):
        ref = _fn_ref(tool, "tool.tool", **where)
        return ToolCall(tool=ref, name=getattr(tool, "__name__", ref.label), args=args)
    raise _fail("invalid_callable", "tool must be a Tool, a callable or a CallableRef", key="tool.tool", **where)


def _fn_ref(value: Callable[..., Any], key: str, **where: Any) -> CallableRef:
    try:
        return callable_ref(value)
    except WorkerError as exc:
        raise _fail(
            "unpicklable_callable",
            "the callable cannot be sent to another process",
            key=key,
            path=exc.details.get("path", "fn"),
            **where,
        ) from None


def _agent(value: Any, **where: Any) -> AgentCall:
    spec = _mapping(value, "agent", **where)
    _check_keys(spec, frozenset({"name", "prompt", "decision"}), ("name", "prompt"), "agent.", **where)
    name = spec["name"]
    if not isinstance(name, str) or not _WORKFLOW_ID.match(name):
        raise _fail("invalid_value", "agent.name must be an agent name", key="agent.name", **where)
    prompt = spec["prompt"]
    if isinstance(prompt, str):
        if len(prompt) > MAX_PROMPT_CHARS or "\x00" in prompt:
            raise _fail("invalid_value", "agent.prompt is too long or contains NUL", key="agent.prompt", **where)
        compiled_prompt: str | Fn = prompt
    else:
        compiled_prompt = _fn(prompt, "agent.prompt", **where)
    decision = None if spec.get("decision") is None else _fn(spec["decision"], "agent.decision", **where)
    return AgentCall(name=name, prompt=compiled_prompt, decision=decision)


def _graph_node(spec: Any, position: int) -> Node:
    item = _mapping(spec, "nodes", index=position)
    if "id" not in item:
        raise _fail("missing_key", "missing key", key="id", index=position)
    node_id = _node_id(item["id"], "id", index=position)
    where = {"node": node_id}
    node_type = item.get("type", "action")
    if node_type not in NODE_TYPES:
        raise _fail("invalid_value", "unknown node type", key="type", **where)
    _check_keys(item, _NODE_KEYS[node_type], _NODE_REQUIRED[node_type], **where)
    timeout = _opt_int(item, "timeout", 1, **where)
    retry = _retry(item.get("retry"), **where)
    if node_type in ("action", "join"):
        run = None if item.get("run") is None else _fn(item["run"], "run", **where)
        if run is None and node_type == "action":
            raise _fail("missing_key", "missing key", key="run", **where)
        return Node(id=node_id, type=node_type, run=run, timeout=timeout, retry=retry)
    if node_type == "fork":
        branches = _id_list(item["branches"], "branches", **where)
        return Node(
            id=node_id,
            type="fork",
            branches=branches,
            join=_ref_id(item["join"], "join", **where),
            merge=_merge(item.get("merge"), **where),
            max_concurrency=_opt_int(item, "max_concurrency", 1, **where),
        )
    if node_type in ("branch", "dynamic"):
        return Node(
            id=node_id,
            type=node_type,
            targets=_id_list(item["targets"], "targets", **where),
            select=_fn(item["select"], "select", **where),
            timeout=timeout,
            retry=retry,
        )
    if node_type == "loop":
        return Node(
            id=node_id,
            type="loop",
            body=_fn(item["body"], "body", **where),
            done=_fn(item["done"], "done", **where),
            max_iterations=_int(item["max_iterations"], "max_iterations", 1, **where),
            timeout=timeout,
            retry=retry,
        )
    if node_type == "agent":
        return Node(id=node_id, type="agent", agent=_agent(item["agent"], **where), timeout=timeout, retry=retry)
    if node_type == "tool":
        return Node(id=node_id, type="tool", tool=_tool(item["tool"], **where), timeout=timeout, retry=retry)
    nested = item["workflow"]
    if isinstance(nested, Mapping):
        nested = compile_workflow(nested)
    if not isinstance(nested, CompiledWorkflow):
        raise _fail("invalid_value", "workflow must be a CompiledWorkflow", key="workflow", **where)
    return Node(id=node_id, type="workflow", workflow=nested)


def _ref_id(value: Any, key: str, **where: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _fail("invalid_value", f"{key} must be a node id", key=key, **where)
    return value


def _id_list(value: Any, key: str, **where: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise _fail("invalid_value", f"{key} must be a non-empty list of node ids", key=key, **where)
    ids = tuple(_ref_id(item, key, **where) for item in value)
    if len(set(ids)) != len(ids):
        raise _fail("duplicate_id", f"{key} repeats an id", key=key, **where)
    return ids


def _edges(value: Any, declared: Mapping[str, Node]) -> dict[str, Edge]:
    spec = _mapping(value, "edges")
    edges: dict[str, Edge] = {}
    for source, target in spec.items():
        if source not in declared:
            raise _fail("undeclared_node", "edge from an undeclared node", key="edges", node=source[:MAX_ID_CHARS])
        if declared[source].type in _NO_EDGE:
            raise _fail("invalid_edge", f"a {declared[source].type} node has no edge", key="edges", node=source)
        if isinstance(target, str):
            if target != END_NODE and target not in declared:
                raise _fail("undeclared_node", "edge to an undeclared node", key="edges", node=source)
            edges[source] = Edge(target=target)
        elif isinstance(target, Mapping) and set(target) == {"route"}:
            edges[source] = Edge(route=_fn(target["route"], "route", node=source))
        else:
            raise _fail(
                "invalid_edge", 'an edge is a node id, "end_node" or {"route": callable}', key="edges", node=source
            )
    return edges


def _check_graph(entry: str, nodes: Mapping[str, Node], edges: dict[str, Edge]) -> None:
    """Cross-node checks: declared references, fork/join shape, and an edge for every node that needs one.

    A fork branch without an edge gets the implicit edge to its join (added to ``edges``).
    """
    if entry not in nodes:
        raise _fail("undeclared_node", "entry is not a declared node", key="entry")
    joins_used: set[str] = set()
    branch_of: dict[str, str] = {}
    for node in nodes.values():
        where = {"node": node.id}
        if node.type == "fork":
            for branch in node.branches:
                if branch not in nodes:
                    raise _fail("undeclared_node", "fork branch is not declared", key="branches", **where)
                if nodes[branch].type not in UNIT_TYPES:
                    raise _fail(
                        "invalid_fork_branch",
                        "a fork branch is an action, agent, tool or workflow node",
                        key="branches",
                        branch=branch,
                        **where,
                    )
                if branch in branch_of:
                    raise _fail(
                        "invalid_fork_branch",
                        "a node is a branch of one fork only",
                        key="branches",
                        branch=branch,
                        **where,
                    )
                branch_of[branch] = node.id
            assert node.join is not None
            if node.join not in nodes:
                raise _fail("undeclared_node", "fork join is not declared", key="join", **where)
            if nodes[node.join].type != "join":
                raise _fail("invalid_join", "a fork's join must be a join node", key="join", **where)
            joins_used.add(node.join)
        elif node.type in ("branch", "dynamic"):
            for target in node.targets:
                if target not in nodes:
                    raise _fail("undeclared_node", "branch target is not declared", key="targets", **where)
    for node in nodes.values():
        if node.type == "join" and node.id not in joins_used:
            raise _fail("unreachable_join", "no fork joins at this node", node=node.id)
        if node.id in branch_of:
            fork = nodes[branch_of[node.id]]
            edge = edges.get(node.id)
            if edge is None:
                edges[node.id] = Edge(target=fork.join)  # a branch's successor is its join
            elif edge.target != fork.join:
                raise _fail(
                    "unreachable_join", "a fork branch's edge must lead to its join", node=node.id, fork=fork.id
                )
        elif node.type not in _NO_EDGE and node.id not in edges:
            raise _fail("missing_edge", "the node has no edge", key="edges", node=node.id)
    for source, edge in edges.items():
        # A join without run executes no task; two of them linked statically could cycle without progress.
        successor = nodes.get(edge.target or "")
        if _free(nodes[source]) and successor is not None and _free(successor):
            raise _fail(
                "invalid_edge", "a join without run cannot lead to another join without run", key="edges", node=source
            )


def _free(node: Node) -> bool:
    return node.type == "join" and node.run is None


def _structure(compiled: dict[str, Any], nodes: tuple[Node, ...], edges: dict[str, Edge]) -> str:
    def fn(value: Fn | None) -> str | None:
        return None if value is None else value.identity()

    def node_form(node: Node) -> dict[str, Any]:
        form: dict[str, Any] = {
            "id": node.id,
            "type": node.type,
            "run": fn(node.run),
            "timeout": node.timeout,
            "retry": None if node.retry is None else node.retry.to_dict(),
            "branches": list(node.branches),
            "join": node.join,
            "merge": node.merge,
            "max_concurrency": node.max_concurrency,
            "targets": list(node.targets),
            "select": fn(node.select),
            "body": fn(node.body),
            "done": fn(node.done),
            "done_kind": node.done_kind,
            "max_iterations": node.max_iterations,
        }
        if node.agent is not None:
            prompt = node.agent.prompt
            form["agent"] = {
                "name": node.agent.name,
                "decision": fn(node.agent.decision),
                "prompt": prompt if isinstance(prompt, str) else fn(prompt),
            }
        if node.tool is not None:
            form["tool"] = {"tool": node.tool.tool.name or node.tool.tool.label, "args": fn(node.tool.args)}
        if node.workflow is not None:
            form["workflow"] = node.workflow.fingerprint
        return form

    document = {
        **compiled,
        "nodes": [node_form(n) for n in nodes],
        "edges": {k: {"to": e.target} if e.route is None else {"route": fn(e.route)} for k, e in sorted(edges.items())},
    }
    return hashlib.sha256(canonical_dumps(document).encode("utf-8")).hexdigest()


def compile_workflow(spec: Mapping[str, Any]) -> CompiledWorkflow:
    """Validate a workflow spec and compile it (pure; callables are referenced, never called).

    Args:
        spec: ``version`` (int), ``id`` (str), ``kind`` and the kind's keys (see the module docstring), plus the
            optional ``max_steps``, ``max_transfers``, ``max_concurrency``, ``timeout`` (ms), ``retention_ms``,
            ``input_schema`` and ``output_schema``.

    Returns:
        The compiled workflow.

    Raises:
        WorkflowError: with a reason listed in the module docstring and ``details`` naming ``key``/``node``.
    """
    if not isinstance(spec, Mapping):
        raise _fail("invalid_spec", "a workflow spec is a mapping", type=type(spec).__name__)
    _mapping(spec, "spec")
    if "kind" not in spec:
        raise _fail("missing_key", "missing key", key="kind")
    kind = spec["kind"]
    if kind not in KINDS:
        raise _fail("invalid_value", "unknown workflow kind", key="kind")
    _check_keys(spec, _COMMON | _KIND_KEYS[kind], ("version", "id", *_REQUIRED[kind]))
    workflow_id = spec["id"]
    if not isinstance(workflow_id, str) or not _WORKFLOW_ID.match(workflow_id):
        raise _fail("invalid_id", "the workflow id is a non-empty string of at most 255 characters", key="id")
    version = _int(spec["version"], "version", 0)
    max_steps = _opt_int(spec, "max_steps", 1)
    max_transfers = _opt_int(spec, "max_transfers", 0)
    max_concurrency = _opt_int(spec, "max_concurrency", 1)
    timeout = _opt_int(spec, "timeout", 1)
    retention_ms = _opt_int(spec, "retention_ms", 0)
    input_schema = _schema(spec.get("input_schema"), "input_schema")
    output_schema = _schema(spec.get("output_schema"), "output_schema")

    nodes: list[Node]
    edges: dict[str, Edge]
    if kind == "sequential":
        nodes = _action_list(spec["steps"], "steps")
        entry = nodes[0].id
        edges = {n.id: Edge(target=nxt.id) for n, nxt in itertools.pairwise(nodes)}
        edges[nodes[-1].id] = Edge(target=END_NODE)
    elif kind == "parallel":
        branches = _action_list(spec["branches"], "branches")
        fork = Node(
            id=PARALLEL_FORK,
            type="fork",
            branches=tuple(b.id for b in branches),
            join=PARALLEL_JOIN,
            merge=_merge(spec.get("merge")),
            max_concurrency=max_concurrency,
        )
        nodes = [fork, *branches, Node(id=PARALLEL_JOIN, type="join")]
        entry = PARALLEL_FORK
        edges = {b.id: Edge(target=PARALLEL_JOIN) for b in branches}
        edges[PARALLEL_JOIN] = Edge(target=END_NODE)
    elif kind == "loop":
        where = {"node": LOOP_NODE}
        nodes = [
            Node(
                id=LOOP_NODE,
                type="loop",
                body=_fn(spec["body"], "body", **where),
                done=_fn(spec["until"], "until", **where),
                done_kind="until",
                max_iterations=_int(spec["max_iterations"], "max_iterations", 1),
            )
        ]
        entry = LOOP_NODE
        edges = {LOOP_NODE: Edge(target=END_NODE)}
    elif kind == "transfer":
        members = _mapping(spec["members"], "members")
        if not members:
            raise _fail("invalid_value", "members must not be empty", key="members")
        if len(members) > MAX_NODES:
            raise _fail("limit_exceeded", "too many members", key="members", max=MAX_NODES)
        nodes = []
        for name, member in members.items():
            member_id = _node_id(name, "members")
            _check_keys(_mapping(member, "members", node=member_id), _MEMBER_KEYS, ("run",), node=member_id)
            nodes.append(_action(member, member_id, what="members"))
        entry = _ref_id(spec["entry"], "entry")
        edges = {n.id: Edge(target=END_NODE) for n in nodes}
    else:
        raw_nodes = spec["nodes"]
        if not isinstance(raw_nodes, list | tuple) or not raw_nodes:
            raise _fail("invalid_value", "nodes must be a non-empty list", key="nodes")
        if len(raw_nodes) > MAX_NODES:
            raise _fail("limit_exceeded", "too many nodes", key="nodes", max=MAX_NODES)
        nodes = []
        seen: set[str] = set()
        for position, item in enumerate(raw_nodes):
            node = _graph_node(item, position)
            if node.id in seen:
                raise _fail("duplicate_id", "duplicate id", node=node.id)
            seen.add(node.id)
            nodes.append(node)
        entry = _ref_id(spec["entry"], "entry")
        edges = _edges(spec.get("edges", {}), {n.id: n for n in nodes})
    index = {n.id: n for n in nodes}
    _check_graph(entry, index, edges)
    resolved_steps = DEFAULT_MAX_STEPS if max_steps is None else max_steps
    resolved_transfers = DEFAULT_MAX_TRANSFERS if max_transfers is None else max_transfers
    fingerprint = _structure(
        {
            "format": 1,
            "id": workflow_id,
            "version": version,
            "kind": kind,
            "entry": entry,
            "max_steps": resolved_steps,
            "max_transfers": resolved_transfers,
            "max_concurrency": max_concurrency,
            "timeout": timeout,
            "retention_ms": retention_ms,
            "input_schema": None if input_schema is None else input_schema.digest,
            "output_schema": None if output_schema is None else output_schema.digest,
        },
        tuple(nodes),
        edges,
    )
    return CompiledWorkflow(
        id=workflow_id,
        version=version,
        kind=kind,
        entry=entry,
        nodes=tuple(nodes),
        edges=edges,
        max_steps=resolved_steps,
        max_transfers=resolved_transfers,
        max_concurrency=max_concurrency,
        timeout=timeout,
        retention_ms=retention_ms,
        input_schema=input_schema,
        output_schema=output_schema,
        fingerprint=fingerprint,
        index=index,
    )
