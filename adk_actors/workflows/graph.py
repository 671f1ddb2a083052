"""Legacy graph helpers: a small, deterministic, in-process state-graph builder (the reference's ``adk_graph``).

::

    from adk_actors.workflows.graph import END, Graph

    def increment(state):
        return {"count": state.get("count", 0) + 1}

    graph = Graph()
    graph.add_node("counter", increment)
    graph.add_conditional_edge("counter", lambda state: "counter" if state["count"] < 3 else END)
    graph.set_entry_point("counter")
    compiled = graph.compile()
    compiled.run({"count": 0}, max_steps=10)            # -> {"count": 3}

A node is ``fn(state) -> dict``: the returned dict is merged into the state (return only the keys you change).
After a node, its conditional edge (``fn(state) -> node name | END``) or its one deterministic edge picks the next
node; a node with neither is terminal. :meth:`Graph.compile` validates the shape once; :meth:`CompiledGraph.run`
bounds execution by ``max_steps``.

This is the *legacy*, deterministic graph: it runs in the caller's process and thread, with no supervision,
checkpoints, deadlines or worker isolation. Node functions are trusted code. The supervised workflow engine
(``compile_workflow``) is what long-running or untrusted work should use. :func:`agent_node` is the exception
that reaches the actor system: it asks a spawned agent for one invocation, so the agent's own configured
instructions and model/tool callbacks apply.

Errors are :class:`~adk_actors.errors.WorkflowError` with these reason tags: at compile time ``no_entry_point``,
``unknown_node``, ``duplicate_node``, ``reserved_node``, ``invalid_node``, ``ambiguous_edge``,
``invalid_routes``; at run time ``invalid_state``, ``invalid_node_result``, ``undeclared_route``, ``max_steps``,
``node_failed`` (a node raised something other than an ``AdkError``, which propagates unchanged),
``missing_state_key``, ``tool_failed``, ``invalid_tool_result``, ``tool_confirmation_requires_runner``,
``long_running_requires_runner``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.agents import AgentRef, invoke
from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ConfigError, ValidationError, WorkflowError
from adk_actors.logs import log_crash
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.schema import compile_schema
from adk_actors.secrets import prune_secrets
from adk_actors.tools import Tool, ToolContext
from adk_actors.workflows.tool_gate import CONFIRMATION_REASON, LONG_RUNNING_REASON, invoke_without_runner

__all__ = [
    "DEFAULT_MAX_STEPS",
    "END",
    "CompiledGraph",
    "Graph",
    "NodeFn",
    "RouteFn",
    "agent_node",
    "function_node",
    "tool_node",
]

END = "end_node"
"""What a conditional edge returns (or a deterministic edge points at) to finish the run."""
DEFAULT_MAX_STEPS = 100
"""The cycle bound of :meth:`CompiledGraph.run` when the caller gives none."""
MAX_STEPS_LIMIT = 1_000_000

NodeFn = Callable[[dict[str, Any]], Mapping[str, Any]]
"""A node: receives a copy of the state, returns the keys to merge into it."""
RouteFn = Callable[[dict[str, Any]], str]
"""A conditional edge: receives a copy of the state after its node ran, returns the next node name or ``END``."""


@dataclass(frozen=True, slots=True)
class _Conditional:
    fn: RouteFn
    routes: tuple[Any, ...] | None


class Graph:
    """The builder. Each ``add_*`` call records one declaration and returns the graph (so calls chain);
    :meth:`compile` checks them all at once."""

    def __init__(self) -> None:
        self._nodes: list[tuple[str, Any]] = []
        self._edges: list[tuple[str, Any]] = []
        self._entry: str | None = None

    def add_node(self, name: str, fn: NodeFn) -> Graph:
        """Declare node ``name`` running ``fn(state) -> dict``."""
        self._nodes.append((name, fn))
        return self

    def add_edge(self, src: str, dst: str) -> Graph:
        """A deterministic edge: after ``src``, run ``dst`` (``END`` finishes)."""
        self._edges.append((src, dst))
        return self

    def add_conditional_edge(self, src: str, fn: RouteFn, routes: Iterable[str] | None = None) -> Graph:
        """A conditional edge: after ``src``, run the node ``fn(state)`` names (``END`` finishes).

        Args:
            src: The node the edge leaves.
            fn: ``fn(state) -> node name | END``.
            routes: Optionally the names ``fn`` may return (validated at compile time); otherwise any node.
        """
        self._edges.append((src, _Conditional(fn, None if routes is None else tuple(routes))))
        return self

    def set_entry_point(self, name: str) -> Graph:
        """The node the run starts at."""
        self._entry = name
        return self

    def compile(self) -> CompiledGraph:
        """Validate the graph and freeze it.

        Raises:
            WorkflowError: ``no_entry_point``, ``unknown_node`` (an edge or the entry point names a node that was
                not added), ``duplicate_node``, ``reserved_node`` (a node called ``END``), ``invalid_node`` (a
                non-str name or a non-callable function), ``ambiguous_edge`` (a node with more than one outgoing
                edge: execution must be deterministic), ``invalid_routes``.
        """
        nodes: dict[str, NodeFn] = {}
        for name, fn in self._nodes:
            if not isinstance(name, str) or not name:
                raise WorkflowError("node names are non-empty str", reason="invalid_node")
            if name == END:
                raise WorkflowError(f"{END!r} is reserved", reason="reserved_node", details={"node": name})
            if name in nodes:
                raise WorkflowError(f"node {name!r} is added twice", reason="duplicate_node", details={"node": name})
            if not callable(fn):
                raise WorkflowError(f"node {name!r} is not callable", reason="invalid_node", details={"node": name})
            nodes[name] = fn
        if self._entry is None:
            raise WorkflowError("the graph has no entry point", reason="no_entry_point")
        _known(nodes, self._entry, "entry_point")
        edges: dict[str, str | _Conditional] = {}
        for src, target in self._edges:
            _known(nodes, src, "edge_source")
            if src in edges:
                raise WorkflowError(
                    f"node {src!r} has more than one outgoing edge", reason="ambiguous_edge", details={"node": src}
                )
            if isinstance(target, _Conditional):
                if not callable(target.fn):
                    raise WorkflowError(
                        "a conditional edge needs a callable", reason="invalid_node", details={"node": src}
                    )
                for route in _route_names(target.routes or ()):
                    if route != END:
                        _known(nodes, route, "route")
            elif target != END:
                _known(nodes, target, "edge_target")
            edges[src] = target
        return CompiledGraph(entry=self._entry, nodes=dict(nodes), edges=edges)


def _route_names(routes: Iterable[Any]) -> list[str]:
    names = list(routes)
    if not all(isinstance(name, str) and name for name in names):
        raise WorkflowError("routes are non-empty str", reason="invalid_routes")
    return names


def _known(nodes: Mapping[str, Any], name: Any, role: str) -> None:
    if not isinstance(name, str) or name not in nodes:
        raise WorkflowError(
            "the graph names a node that was not added",
            reason="unknown_node",
            details={"node": name if isinstance(name, str) else type(name).__name__, "role": role},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledGraph:
    """A validated graph. Immutable; :meth:`run` may be called any number of times."""

    entry: str
    """The entry node."""
    nodes: Mapping[str, NodeFn]
    """Node name to function."""
    edges: Mapping[str, str | _Conditional]
    """Node name to its deterministic successor (a name or ``END``) or conditional edge; absent = terminal."""

    def run(self, state: Mapping[str, Any] | None = None, *, max_steps: int = DEFAULT_MAX_STEPS) -> dict[str, Any]:
        """Run from the entry point until a terminal node or ``END``; return the final state.

        Args:
            state: The initial state (shallow-copied: the caller's mapping itself is never modified).
            max_steps: The most node executions allowed (the cycle bound).

        Raises:
            ConfigError: ``invalid_value`` for ``max_steps`` outside ``1..1_000_000``.
            WorkflowError: ``invalid_state``, ``invalid_node_result``, ``undeclared_route``, ``max_steps``,
                ``node_failed``; an ``AdkError`` a node raised propagates unchanged.
        """
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 1 <= max_steps <= MAX_STEPS_LIMIT:
            raise ConfigError(
                "max_steps is an int in 1..1_000_000", reason="invalid_value", details={"key": "max_steps"}
            )
        if state is not None and not isinstance(state, Mapping):
            raise WorkflowError(
                "the graph state is a mapping", reason="invalid_state", details={"type": type(state).__name__}
            )
        current: dict[str, Any] = dict(state or {})
        node: str = self.entry
        steps = 0
        while True:
            if steps >= max_steps:
                raise WorkflowError(
                    "the graph exceeded max_steps", reason="max_steps", details={"max_steps": max_steps, "node": node}
                )
            steps += 1
            current = {**current, **_node_result(node, _call(node, self.nodes[node], current), steps)}
            edge = self.edges.get(node)
            if edge is None:
                return current
            following = _route(node, edge, current, self.nodes) if isinstance(edge, _Conditional) else edge
            if following == END:
                return current
            node = following


def _call(node: str, fn: Callable[[dict[str, Any]], Any], state: dict[str, Any]) -> Any:
    try:
        return fn(dict(state))
    except AdkError:
        raise
    except Exception as exc:
        log_crash("adk_actors.workflows", "graph node raised", exc, node=node)
        raise WorkflowError(
            f"node {node!r} raised {type(exc).__name__}",
            reason="node_failed",
            details={"node": node, "exception_type": type(exc).__name__},
        ) from exc


def _node_result(node: str, result: Any, steps: int) -> Mapping[str, Any]:
    if not isinstance(result, Mapping):
        raise WorkflowError(
            f"node {node!r} returned {type(result).__name__}, not a dict",
            reason="invalid_node_result",
            details={"node": node, "type": type(result).__name__, "step": steps},
        )
    return result


def _route(node: str, edge: _Conditional, state: dict[str, Any], nodes: Mapping[str, NodeFn]) -> str:
    target = _call(node, edge.fn, state)
    if target == END:
        return END
    declared = edge.routes if edge.routes is not None else nodes
    if not isinstance(target, str) or target not in declared:
        raise WorkflowError(
            f"the conditional edge of {node!r} chose an undeclared route",
            reason="undeclared_route",
            details={"node": node, **_route_detail(target)},
        )
    return target


def _route_detail(target: Any) -> dict[str, Any]:
    return (
        {"route": target} if isinstance(target, str) and len(target) <= 128 else {"route_type": type(target).__name__}
    )


# ---- node helpers ---------------------------------------------------------------------------------------------------


def function_node(fn: Callable[[dict[str, Any]], Any], *, output_key: str | None = None) -> NodeFn:
    """A node from a plain function.

    Without ``output_key`` the function returns the dict to merge (a node function as is); with it, the
    function's return value, whatever it is, is stored under ``output_key``.

    Raises:
        WorkflowError: ``invalid_node`` when ``fn`` is not callable.
    """
    if not callable(fn):
        raise WorkflowError("function_node needs a callable", reason="invalid_node")
    if output_key is None:
        return fn

    def node(state: dict[str, Any]) -> dict[str, Any]:
        return {output_key: fn(state)}

    return node


def tool_node(
    tool: Tool, *, args_key: str | None = None, output_key: str | None = None, invocation_id: str | None = None
) -> NodeFn:
    """A node calling a :class:`~adk_actors.tools.Tool` in the caller's process.

    The arguments are ``state[args_key]`` (a dict) when ``args_key`` is given, otherwise the state keys that the
    tool's schema declares as properties. They are validated against the tool's schema. The result, secret-pruned
    and JSON-checked, is stored under ``output_key`` (default: the tool's name); state changes the tool records in
    ``tool_context.actions.set_state`` are merged too. The tool sees the JSON-safe, secret-pruned part of the
    state as its read-only ``tool_context.state``.

    A tool that needs a Runner fails closed: one whose confirmation gate asks for approval never runs
    (``tool_confirmation_requires_runner``), one that suspends as long-running work is refused
    (``long_running_requires_runner``).

    Raises (when the node runs):
        WorkflowError: ``missing_state_key`` (no ``args_key``), ``tool_failed`` (validation or execution failed;
            ``details["tool_reason"]`` is the ``AdkError`` reason or ``tool_exception``), ``invalid_tool_result``,
            ``tool_confirmation_requires_runner``, ``long_running_requires_runner``.
    """
    name = tool.name
    key = output_key or name
    properties = _schema_properties(tool.schema())

    def node(state: dict[str, Any]) -> dict[str, Any]:
        if args_key is not None:
            if not isinstance(state.get(args_key), Mapping):
                raise WorkflowError(
                    "the tool arguments are missing from the state",
                    reason="missing_state_key",
                    details={"key": args_key, "tool": name},
                )
            raw_args = dict(state[args_key])
        else:
            raw_args = {k: state[k] for k in properties if k in state}
        context = ToolContext(
            invocation_id=invocation_id or f"graph-{uuid.uuid4().hex}", agent_name="graph", state=_json_part(state)
        )
        try:
            args = compile_schema(tool.schema()).validate(raw_args)
            result = invoke_without_runner(tool, args, context)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, AdkError) else "tool_exception"
            if reason in (CONFIRMATION_REASON, LONG_RUNNING_REASON):
                # A refusal, not a failure of the tool: it names what the caller must change (use a Runner).
                raise WorkflowError(f"tool {name!r} needs a runner", reason=reason, details={"tool": name}) from None
            if not isinstance(exc, AdkError):
                log_crash("adk_actors.workflows", "graph tool raised", exc, tool=name)
            raise WorkflowError(
                f"tool {name!r} failed",
                reason="tool_failed",
                details={"tool": name, "tool_reason": reason, "exception_type": type(exc).__name__},
            ) from exc
        try:
            value = copy_json(prune_secrets(result), field="result")[0]
        except ValidationError:
            raise WorkflowError(
                f"tool {name!r} returned a value that is not JSON-safe",
                reason="invalid_tool_result",
                details={"tool": name},
            ) from None
        return {**context.actions.state_delta, key: value}

    return node


def _schema_properties(schema: Any) -> list[str]:
    if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
        return [k for k in schema["properties"] if isinstance(k, str)]
    return []


def _json_part(state: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``state`` whose values are JSON-safe, secret-pruned (a tool's read-only view)."""
    view: dict[str, Any] = {}
    for k, v in state.items():
        if not isinstance(k, str):
            continue
        try:
            view[k] = copy_json(v)[0]
        except ValidationError:
            continue
    pruned: dict[str, Any] = prune_secrets(view)
    return pruned


def agent_node(
    agent: AgentRef | str,
    prompt_key: str = "input",
    output_key: str = "output",
    *,
    timeout: float | None = None,
    scope: Mapping[str, str] | None = None,
    pass_state: bool = False,
    system: ActorSystemHandle | None = None,
) -> NodeFn:
    """A node asking a spawned agent for one invocation (fresh history): ``state[prompt_key]`` in,
    the answer stored under ``output_key``.

    The agent's configured instructions, model and tool callbacks and tools all apply, because they live in the
    agent. With ``pass_state=True`` the JSON-safe part of the graph state is the invocation's read-only state
    snapshot (what instruction templates such as ``{topic}`` read).

    Raises (when the node runs):
        WorkflowError: ``missing_state_key`` when the state has no ``prompt_key``.
        AdkError: whatever :func:`adk_actors.agents.invoke` raises (``AskTimeout``, ``ProviderError``...).
    """

    def node(state: dict[str, Any]) -> dict[str, Any]:
        if prompt_key not in state:
            raise WorkflowError(
                "the agent prompt is missing from the state",
                reason="missing_state_key",
                details={"key": prompt_key, "agent": str(agent)},
            )
        snapshot = _json_part(state) if pass_state else None
        answer = invoke(agent, state[prompt_key], scope=scope, state=snapshot, timeout=timeout, system=system)
        return {output_key: answer}

    return node
