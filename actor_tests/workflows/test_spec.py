"""compile_workflow: the reference's spec shapes, callables as CallableRefs, fingerprints, and every validator.

Pure: no actor system, no processes.
"""

from __future__ import annotations

import copy
import pickle
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import WorkflowError
from adk_actors.runtime.callables import CallableRef, callable_ref
from adk_actors.workflows.results import Ok, Output
from adk_actors.workflows.spec import (
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TRANSFERS,
    END_NODE,
    CompiledWorkflow,
    Fn,
    compile_workflow,
)

# -- module-level callables (referenced by importable name) ---------------------------------------------------


def one_arg(state: dict[str, Any]) -> Ok:
    return Ok({})


def two_args(state: dict[str, Any], context: dict[str, Any]) -> Ok:
    return Ok({})


def optional_context(state: dict[str, Any], context: dict[str, Any] | None = None) -> Ok:
    return Ok({})


def star_args(*args: Any) -> Ok:
    return Ok({})


def three_args(state: dict[str, Any], context: dict[str, Any], extra: Any) -> Ok:
    return Ok({})


def no_args() -> Ok:
    return Ok({})


def required_keyword(state: dict[str, Any], *, flag: bool) -> Ok:
    return Ok({})


class CallableObject:
    def __call__(self, state: dict[str, Any], context: dict[str, Any]) -> Ok:
        return Ok({})


class EchoTool:
    """A minimal Tool: name, description, schema, execute."""

    name = "echo"
    description = "Echo the arguments."

    def schema(self) -> dict[str, Any]:
        return {"type": "object"}

    def execute(self, args: dict[str, Any], context: Any) -> Any:
        return args


# -- the reference's specs ---------------------------------------------------------------------------------------


def sequential_spec() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "readme-sequential-v1",
        "kind": "sequential",
        "max_steps": 4,
        "input_schema": {"type": "object", "required": ["count"]},
        "output_schema": {"type": "string"},
        "steps": [{"id": "increment", "run": two_args}, {"id": "finish", "run": two_args}],
    }


def parallel_spec() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "readme-parallel-v1",
        "kind": "parallel",
        "max_concurrency": 2,
        "merge": "reject_conflicts",
        "branches": [{"id": "left", "run": one_arg}, {"id": "right", "run": one_arg}],
    }


def loop_spec() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "readme-loop-v1",
        "kind": "loop",
        "max_iterations": 3,
        "body": one_arg,
        "until": one_arg,
    }


def transfer_spec() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "readme-transfer-v1",
        "kind": "transfer",
        "entry": "triage",
        "max_transfers": 1,
        "members": {"triage": {"run": two_args}, "specialist": {"run": two_args}},
    }


def graph_spec() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "readme-graph-v1",
        "kind": "graph",
        "entry": "counter",
        "max_steps": 5,
        "nodes": [{"id": "counter", "run": one_arg}],
        "edges": {"counter": {"route": two_args}},
    }


def fork_join_spec() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "readme-fork-join-v1",
        "kind": "graph",
        "entry": "fork",
        "max_steps": 6,
        "nodes": [
            {
                "id": "fork",
                "type": "fork",
                "branches": ["left", "right"],
                "join": "join",
                "merge": "reject_conflicts",
                "max_concurrency": 2,
            },
            {"id": "left", "run": one_arg},
            {"id": "right", "run": one_arg},
            {"id": "join", "type": "join", "run": two_args},
        ],
        "edges": {"left": "join", "right": "join", "join": "end_node"},
    }


def typed_graph_spec() -> dict[str, Any]:
    """Every node type once."""
    return {
        "version": 3,
        "id": "typed",
        "kind": "graph",
        "entry": "pick",
        "nodes": [
            {"id": "pick", "type": "branch", "targets": ["fork", "ask"], "select": two_args},
            {"id": "fork", "type": "fork", "branches": ["a", "use_tool"], "join": "join"},
            {
                "id": "a",
                "type": "action",
                "run": one_arg,
                "timeout": 500,
                "retry": {"max_attempts": 3, "backoff_ms": 10},
            },
            {"id": "use_tool", "type": "tool", "tool": {"tool": EchoTool(), "args": one_arg}},
            {"id": "join", "type": "join"},
            {"id": "ask", "type": "agent", "agent": {"name": "helper", "prompt": "hi", "decision": two_args}},
            {"id": "again", "type": "loop", "body": one_arg, "done": two_args, "max_iterations": 2},
            {"id": "choose", "type": "dynamic", "targets": ["again", "nested"], "select": one_arg},
            {"id": "nested", "type": "workflow", "workflow": compile_workflow(loop_spec())},
        ],
        "edges": {"join": "choose", "ask": "choose", "again": "end_node", "nested": "end_node"},
    }


ALL_SPECS: list[Callable[[], dict[str, Any]]] = [
    sequential_spec,
    parallel_spec,
    loop_spec,
    transfer_spec,
    graph_spec,
    fork_join_spec,
    typed_graph_spec,
]


def reject(spec: Mapping[str, Any], reason: str, **details: Any) -> WorkflowError:
    with pytest.raises(WorkflowError) as info:
        compile_workflow(spec)
    assert info.value.reason == reason, info.value.to_dict()
    for key, value in details.items():
        assert info.value.details.get(key) == value, info.value.to_dict()
    return info.value


# -- compiling ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", ALL_SPECS, ids=lambda f: f.__name__)
def test_every_reference_shape_compiles_to_a_frozen_picklable_workflow(make: Callable[[], dict[str, Any]]) -> None:
    spec = make()
    compiled = compile_workflow(spec)
    assert (compiled.id, compiled.version, compiled.kind) == (spec["id"], spec["version"], spec["kind"])
    clone = pickle.loads(pickle.dumps(compiled))
    assert clone == compiled
    assert clone.fingerprint == compiled.fingerprint
    assert [n.id for n in clone.nodes] == [n.id for n in compiled.nodes]
    with pytest.raises(AttributeError):
        compiled.id = "other"  # type: ignore[misc]


def test_kinds_compile_to_graphs_with_internal_nodes_and_edges() -> None:
    sequential = compile_workflow(sequential_spec())
    assert sequential.entry == "increment"
    assert sequential.edges["increment"].target == "finish"
    assert sequential.edges["finish"].target == END_NODE
    parallel = compile_workflow(parallel_spec())
    assert parallel.node(parallel.entry).type == "fork"
    assert parallel.node(parallel.entry).branches == ("left", "right")
    assert parallel.node(parallel.entry).max_concurrency == 2
    loop = compile_workflow(loop_spec())
    assert loop.node(loop.entry).done_kind == "until"
    assert loop.node(loop.entry).max_iterations == 3
    transfer = compile_workflow(transfer_spec())
    assert transfer.entry == "triage" and {"triage", "specialist"} <= set(transfer.index)
    assert all(n.id.startswith("$") for c in (parallel, loop) for n in c.nodes if n.id not in ("left", "right"))


def test_defaults_and_common_options() -> None:
    compiled = compile_workflow({**graph_spec(), "max_steps": None})
    assert compiled.max_steps == DEFAULT_MAX_STEPS and compiled.max_transfers == DEFAULT_MAX_TRANSFERS
    assert compiled.max_concurrency is None and compiled.timeout is None
    compiled = compile_workflow(
        {**graph_spec(), "timeout": 120_000, "retention_ms": 0, "max_transfers": 0, "max_concurrency": 3}
    )
    assert (compiled.timeout, compiled.retention_ms, compiled.max_transfers, compiled.max_concurrency) == (
        120_000,
        0,
        0,
        3,
    )


def test_schemas_are_compiled_once_at_compile_time() -> None:
    compiled = compile_workflow(sequential_spec())
    assert compiled.input_schema is not None and compiled.output_schema is not None
    assert compiled.input_schema.is_valid({"count": 0}) and not compiled.input_schema.is_valid({})
    reject({**sequential_spec(), "output_schema": {"type": 7}}, "invalid_schema", key="output_schema")
    reject({**sequential_spec(), "input_schema": "object"}, "invalid_schema", key="input_schema")


def test_node_options_are_compiled() -> None:
    compiled = compile_workflow(typed_graph_spec())
    a = compiled.node("a")
    assert a.timeout == 500 and a.retry is not None and a.retry.to_dict() == {"max_attempts": 3, "backoff_ms": 10}
    tool = compiled.node("use_tool").tool
    assert tool is not None and tool.name == "echo" and isinstance(tool.tool, CallableRef)
    assert isinstance(tool.tool.resolve(), EchoTool)  # the Tool object itself crosses processes by value
    agent = compiled.node("ask").agent
    assert agent is not None and agent.name == "helper" and agent.prompt == "hi" and agent.decision is not None
    nested = compiled.node("nested").workflow
    assert nested is not None and nested.id == "readme-loop-v1"
    # A fork branch without an edge gets the implicit edge to its join.
    assert compiled.edges["a"].target == "join" and compiled.edges["use_tool"].target == "join"
    with pytest.raises(WorkflowError) as info:
        compiled.node("missing")
    assert info.value.reason == "undeclared_node"
    assert "a" in compiled and "missing" not in compiled


# -- callables ---------------------------------------------------------------------------------------------------


def _run_fn(spec_run: Any) -> Fn:
    compiled = compile_workflow(
        {"version": 1, "id": "w", "kind": "sequential", "steps": [{"id": "s", "run": spec_run}]}
    )
    fn = compiled.node("s").run
    assert fn is not None
    return fn


@pytest.mark.parametrize(
    ("fn", "arity"),
    [
        (one_arg, 1),
        (two_args, 2),
        (optional_context, 2),
        (star_args, 2),
        (CallableObject(), 2),
        (lambda state: None, 1),
        (lambda state, context: None, 2),
    ],
)
def test_arity_is_decided_at_compile_time(fn: Any, arity: int) -> None:
    assert _run_fn(fn).arity == arity


def test_module_functions_go_by_name_and_closures_by_value() -> None:
    named = _run_fn(one_arg)
    assert named.ref.name == f"{__name__}:one_arg" and not named.ref.payload
    assert named.identity() == f"name:{__name__}:one_arg/1"
    captured = {"n": 1}
    closure = _run_fn(lambda state: Output(captured["n"], {}))
    assert closure.ref.payload and not closure.ref.name
    assert closure.ref.resolve()({}) == Output(1, {})  # a copy of the closure, with its captured values
    assert closure.identity().startswith("value:")


def test_a_callable_ref_is_accepted_and_resolved_for_its_arity() -> None:
    assert _run_fn(callable_ref(two_args)).arity == 2
    assert _run_fn(CallableRef.by_name(f"{__name__}.one_arg")).arity == 1
    with pytest.raises(WorkflowError) as info:
        _run_fn(CallableRef.by_name("no_such_module_xyz.fn"))
    assert info.value.reason == "invalid_callable"


@pytest.mark.parametrize("bad", ["pkg.mod:fn", 42, None, no_args, three_args, required_keyword, CallableObject])
def test_a_run_that_cannot_be_called_with_state_is_rejected(bad: Any) -> None:
    err = reject(
        {"version": 1, "id": "w", "kind": "sequential", "steps": [{"id": "s", "run": bad}]},
        "invalid_callable",
        key="run",
        node="s",
    )
    assert "pkg.mod" not in str(err.details)


def test_an_unpicklable_closure_is_rejected_with_its_attribute_path() -> None:
    lock = threading.Lock()
    err = reject(
        {"version": 1, "id": "w", "kind": "sequential", "steps": [{"id": "s", "run": lambda state: lock.locked()}]},
        "unpicklable_callable",
        key="run",
        node="s",
    )
    assert err.details["path"] == "fn.<closure>.lock"


@pytest.mark.parametrize("key", ["until", "body"])
def test_loop_callables_are_validated(key: str) -> None:
    reject({**loop_spec(), key: "not callable"}, "invalid_callable", key=key)


# -- fingerprints --------------------------------------------------------------------------------------------------


def test_the_fingerprint_is_stable_and_tracks_structure() -> None:
    base = compile_workflow(fork_join_spec()).fingerprint
    assert compile_workflow(fork_join_spec()).fingerprint == base
    assert len(base) == 64 and int(base, 16) >= 0
    changes: list[Callable[[dict[str, Any]], None]] = [
        lambda s: s.update(max_steps=7),
        lambda s: s.update(version=2),
        lambda s: s["nodes"][1].update(run=two_args),
        lambda s: s["nodes"][0].update(merge="ordered_last_wins"),
        lambda s: s["edges"].update(join={"route": two_args}),
        lambda s: s["nodes"][3].update(retry={"max_attempts": 2}),
        lambda s: s.update(output_schema={"type": "object"}),
    ]
    for change in changes:
        spec = fork_join_spec()
        change(spec)
        assert compile_workflow(spec).fingerprint != base


def test_by_value_callables_are_fingerprinted_by_label_so_a_rebuilt_workflow_matches() -> None:
    def build() -> CompiledWorkflow:
        return compile_workflow(
            {"version": 1, "id": "w", "kind": "sequential", "steps": [{"id": "s", "run": lambda state: Ok({"x": 1})}]}
        )

    assert build().fingerprint == build().fingerprint


# -- validation ----------------------------------------------------------------------------------------------------


def test_specs_that_are_not_mappings_are_rejected() -> None:
    reject([], "invalid_spec")  # type: ignore[arg-type]
    reject({1: "x", "kind": "graph"}, "invalid_value")  # type: ignore[dict-item]


@pytest.mark.parametrize("make", ALL_SPECS, ids=lambda f: f.__name__)
def test_unknown_top_level_keys_are_rejected(make: Callable[[], dict[str, Any]]) -> None:
    reject({**make(), "stpes": []}, "unknown_key", key="stpes")


def test_kind_specific_keys_are_unknown_elsewhere() -> None:
    reject({**sequential_spec(), "branches": []}, "unknown_key", key="branches")
    reject({**graph_spec(), "members": {}}, "unknown_key", key="members")
    reject({**loop_spec(), "edges": {}}, "unknown_key", key="edges")
    reject({**parallel_spec(), "until": one_arg}, "unknown_key", key="until")


def test_unknown_keys_are_rejected_at_every_level() -> None:
    spec = sequential_spec()
    spec["steps"][0]["when"] = 1
    reject(spec, "unknown_key", key="when", node="increment")
    spec = sequential_spec()
    spec["steps"][0]["retry"] = {"max_attempts": 2, "jitter": True}
    reject(spec, "unknown_key", key="retry.jitter", node="increment")
    spec = fork_join_spec()
    spec["nodes"][0]["run"] = one_arg  # a fork runs nothing itself
    reject(spec, "unknown_key", key="run", node="fork")
    spec = typed_graph_spec()
    spec["nodes"][5]["agent"]["model"] = "x"
    reject(spec, "unknown_key", key="agent.model", node="ask")
    spec = typed_graph_spec()
    spec["nodes"][3]["tool"]["timeout"] = 3
    reject(spec, "unknown_key", key="tool.timeout", node="use_tool")
    spec = transfer_spec()
    spec["members"]["triage"]["next"] = "x"
    reject(spec, "unknown_key", key="next", node="triage")


def test_unknown_keys_that_are_not_identifiers_are_named_by_position() -> None:
    err = reject({**graph_spec(), "sk-secret value": 1}, "unknown_key")
    assert "secret" not in str(err.details) and err.details["key"].startswith("<key#")


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (sequential_spec, "steps"),
        (sequential_spec, "id"),
        (sequential_spec, "version"),
        (sequential_spec, "kind"),
        (parallel_spec, "branches"),
        (loop_spec, "body"),
        (loop_spec, "until"),
        (loop_spec, "max_iterations"),
        (transfer_spec, "entry"),
        (transfer_spec, "members"),
        (graph_spec, "entry"),
        (graph_spec, "nodes"),
    ],
)
def test_missing_required_keys_are_named(make: Callable[[], dict[str, Any]], key: str) -> None:
    spec = make()
    del spec[key]
    reject(spec, "missing_key", key=key)


def test_missing_node_keys_are_named() -> None:
    spec = sequential_spec()
    del spec["steps"][1]["run"]
    reject(spec, "missing_key", key="run", node="finish")
    spec = sequential_spec()
    del spec["steps"][1]["id"]
    reject(spec, "missing_key", key="id", index=1)
    spec = fork_join_spec()
    del spec["nodes"][1]["run"]
    reject(spec, "missing_key", key="run", node="left")
    for key in ("body", "done", "max_iterations"):
        spec = typed_graph_spec()
        del spec["nodes"][6][key]
        reject(spec, "missing_key", key=key, node="again")
    spec = typed_graph_spec()
    del spec["nodes"][0]["select"]
    reject(spec, "missing_key", key="select", node="pick")
    spec = typed_graph_spec()
    del spec["nodes"][5]["agent"]["prompt"]
    reject(spec, "missing_key", key="agent.prompt", node="ask")


def test_duplicate_ids_are_rejected() -> None:
    spec = sequential_spec()
    spec["steps"][1]["id"] = "increment"
    reject(spec, "duplicate_id", node="increment")
    spec = fork_join_spec()
    spec["nodes"][2]["id"] = "left"
    reject(spec, "duplicate_id", node="left")
    spec = fork_join_spec()
    spec["nodes"][0]["branches"] = ["left", "left"]
    reject(spec, "duplicate_id", key="branches", node="fork")


@pytest.mark.parametrize("bad_id", ["", "end_node", "$fork", "a#1", "a>b", "a/b", "tab\there", "x" * 129, 7])
def test_reserved_or_malformed_ids_are_rejected(bad_id: Any) -> None:
    spec = graph_spec()
    spec["nodes"][0]["id"] = bad_id
    reject(spec, "invalid_id", key="id")


def test_workflow_ids_and_versions_are_validated() -> None:
    reject({**graph_spec(), "id": ""}, "invalid_id", key="id")
    reject({**graph_spec(), "id": "a\nb"}, "invalid_id", key="id")
    reject({**graph_spec(), "version": "1"}, "invalid_value", key="version")
    reject({**graph_spec(), "version": True}, "invalid_value", key="version")
    reject({**graph_spec(), "kind": "dag"}, "invalid_value", key="kind")


def test_undeclared_references_are_rejected() -> None:
    reject({**graph_spec(), "entry": "nowhere"}, "undeclared_node", key="entry")
    reject({**transfer_spec(), "entry": "nobody"}, "undeclared_node", key="entry")
    spec = graph_spec()
    spec["edges"] = {"counter": "nowhere"}
    reject(spec, "undeclared_node", key="edges", node="counter")
    spec = graph_spec()
    spec["edges"]["ghost"] = "end_node"
    reject(spec, "undeclared_node", key="edges", node="ghost")
    spec = fork_join_spec()
    spec["nodes"][0]["branches"] = ["left", "middle"]
    reject(spec, "undeclared_node", key="branches", node="fork")
    spec = fork_join_spec()
    spec["nodes"][0]["join"] = "merge_here"
    reject(spec, "undeclared_node", key="join", node="fork")
    spec = typed_graph_spec()
    spec["nodes"][0]["targets"] = ["fork", "elsewhere"]
    reject(spec, "undeclared_node", key="targets", node="pick")


def test_fork_and_join_shapes_are_checked() -> None:
    spec = fork_join_spec()
    spec["nodes"][0]["join"] = "left"
    reject(spec, "invalid_join", key="join", node="fork")
    spec = fork_join_spec()
    spec["nodes"].append({"id": "orphan", "type": "join"})
    spec["edges"]["orphan"] = "end_node"
    reject(spec, "unreachable_join", node="orphan")
    spec = fork_join_spec()
    spec["edges"]["left"] = "end_node"
    reject(spec, "unreachable_join", node="left", fork="fork")
    spec = fork_join_spec()
    spec["nodes"][0]["branches"] = ["left", "join"]
    reject(spec, "invalid_fork_branch", key="branches", node="fork")
    spec = fork_join_spec()
    spec["nodes"][0]["merge"] = "union"
    reject(spec, "invalid_merge", key="merge", node="fork")
    reject({**parallel_spec(), "merge": "first_wins"}, "invalid_merge", key="merge")
    spec = fork_join_spec()
    spec["nodes"].append({"id": "fork2", "type": "fork", "branches": ["left"], "join": "join"})
    reject(spec, "invalid_fork_branch", branch="left")


def test_edges_are_checked() -> None:
    spec = fork_join_spec()
    del spec["edges"]["join"]
    reject(spec, "missing_edge", node="join")
    spec = fork_join_spec()
    spec["edges"]["fork"] = "join"
    reject(spec, "invalid_edge", node="fork")
    spec = graph_spec()
    spec["edges"]["counter"] = {"route": two_args, "default": "end_node"}
    reject(spec, "invalid_edge", node="counter")
    spec = graph_spec()
    spec["edges"]["counter"] = {"route": "not callable"}
    reject(spec, "invalid_callable", key="route", node="counter")
    spec = graph_spec()
    spec["edges"]["counter"] = ["end_node"]
    reject(spec, "invalid_edge", node="counter")


def test_joins_without_run_cannot_chain_into_each_other() -> None:
    spec = {
        "version": 1,
        "id": "spin",
        "kind": "graph",
        "entry": "f",
        "nodes": [
            {"id": "f", "type": "fork", "branches": ["a"], "join": "j"},
            {"id": "a", "run": one_arg},
            {"id": "j", "type": "join"},
        ],
        "edges": {"j": "j"},
    }
    reject(spec, "invalid_edge", node="j")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_steps", 0),
        ("max_steps", -1),
        ("max_steps", True),
        ("max_steps", 1.5),
        ("max_transfers", -1),
        ("max_concurrency", 0),
        ("timeout", 0),
        ("retention_ms", -5),
    ],
)
def test_budgets_and_timeouts_are_validated(key: str, value: Any) -> None:
    reject({**graph_spec(), key: value}, "invalid_value", key=key)


def test_kind_specific_budgets_are_validated() -> None:
    reject({**loop_spec(), "max_iterations": 0}, "invalid_value", key="max_iterations")
    spec = typed_graph_spec()
    spec["nodes"][6]["max_iterations"] = "2"
    reject(spec, "invalid_value", key="max_iterations", node="again")
    spec = fork_join_spec()
    spec["nodes"][0]["max_concurrency"] = 0
    reject(spec, "invalid_value", key="max_concurrency", node="fork")
    spec = sequential_spec()
    spec["steps"][0]["retry"] = {"max_attempts": 0}
    reject(spec, "invalid_value", key="retry.max_attempts", node="increment")
    spec = sequential_spec()
    spec["steps"][0]["timeout"] = -1
    reject(spec, "invalid_value", key="timeout", node="increment")


def test_lists_and_maps_must_not_be_empty() -> None:
    reject({**sequential_spec(), "steps": []}, "invalid_value", key="steps")
    reject({**parallel_spec(), "branches": ()}, "invalid_value", key="branches")
    reject({**transfer_spec(), "members": {}}, "invalid_value", key="members")
    reject({**graph_spec(), "nodes": []}, "invalid_value", key="nodes")


def test_typed_node_descriptors_are_validated() -> None:
    spec = typed_graph_spec()
    spec["nodes"][5]["agent"]["name"] = ""
    reject(spec, "invalid_value", key="agent.name", node="ask")
    spec = typed_graph_spec()
    spec["nodes"][5]["agent"]["prompt"] = 3
    reject(spec, "invalid_callable", key="agent.prompt", node="ask")
    spec = typed_graph_spec()
    spec["nodes"][3]["tool"]["tool"] = "echo"
    reject(spec, "invalid_callable", key="tool.tool", node="use_tool")
    spec = typed_graph_spec()
    spec["nodes"][8]["workflow"] = "readme-loop-v1"
    reject(spec, "invalid_value", key="workflow", node="nested")
    spec = typed_graph_spec()
    spec["nodes"][8]["workflow"] = loop_spec()  # a nested spec mapping is compiled in place
    assert compile_workflow(spec).node("nested").workflow == compile_workflow(loop_spec())
    spec = typed_graph_spec()
    spec["nodes"][0]["type"] = "switch"
    reject(spec, "invalid_value", key="type", node="pick")


def test_a_tool_may_be_a_plain_callable_or_a_callable_ref() -> None:
    for tool in (one_arg, callable_ref(one_arg)):
        spec = typed_graph_spec()
        spec["nodes"][3]["tool"] = {"tool": tool}
        call = compile_workflow(spec).node("use_tool").tool
        assert call is not None and call.args is None and call.tool.resolve() is one_arg


# -- properties ----------------------------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_junk = _json | st.sampled_from([one_arg, two_args, object(), float("nan"), b"bytes", ()])


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a mapping or list inside a spec (callables and compiled workflows excluded)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict | list):
                found += _paths(item, (*prefix, index))
    return found


def _at(spec: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        spec = spec[part]
    return spec


@settings(max_examples=300, deadline=None)
@given(make=st.sampled_from(ALL_SPECS), data=st.data())
def test_replacing_any_value_with_junk_raises_only_workflow_errors(
    make: Callable[[], dict[str, Any]], data: st.DataObject
) -> None:
    spec = make()
    container = _at(spec, data.draw(st.sampled_from(_paths(spec))))
    if isinstance(container, dict) and container:
        container[data.draw(st.sampled_from(sorted(container)))] = data.draw(_junk)
    elif isinstance(container, list) and container:
        container[data.draw(st.integers(0, len(container) - 1))] = data.draw(_junk)
    try:
        compiled = compile_workflow(spec)
    except WorkflowError as exc:
        assert exc.reason in {
            "invalid_spec",
            "unknown_key",
            "missing_key",
            "invalid_value",
            "invalid_id",
            "duplicate_id",
            "undeclared_node",
            "invalid_callable",
            "unpicklable_callable",
            "invalid_merge",
            "invalid_join",
            "unreachable_join",
            "invalid_fork_branch",
            "missing_edge",
            "invalid_edge",
            "invalid_schema",
            "limit_exceeded",
        }
        assert isinstance(exc.details, dict)
    else:
        assert pickle.loads(pickle.dumps(compiled)).fingerprint == compiled.fingerprint


_FORMAT_KEYS = {
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
    "steps",
    "branches",
    "merge",
    "body",
    "until",
    "max_iterations",
    "entry",
    "members",
    "nodes",
    "edges",
    "type",
    "run",
    "retry",
    "join",
    "targets",
    "select",
    "done",
    "agent",
    "tool",
    "workflow",
    "name",
    "prompt",
    "decision",
    "args",
    "max_attempts",
    "backoff_ms",
}


@settings(max_examples=200, deadline=None)
@given(
    make=st.sampled_from(ALL_SPECS),
    data=st.data(),
    key=st.text(min_size=1, max_size=12).filter(lambda k: k.isidentifier() and k not in _FORMAT_KEYS),
)
def test_an_added_key_anywhere_in_a_spec_map_is_rejected_as_unknown(
    make: Callable[[], dict[str, Any]], data: st.DataObject, key: str
) -> None:
    spec = make()
    # Format maps only: edges and members are keyed by node names, and a JSON Schema may carry any keyword.
    maps = [
        p
        for p in _paths(spec)
        if isinstance(_at(spec, p), dict)
        and not {"edges", "input_schema", "output_schema"} & set(p)
        and p != ("members",)
    ]
    _at(spec, data.draw(st.sampled_from(maps)))[key] = 1
    with pytest.raises(WorkflowError) as info:
        compile_workflow(spec)
    assert info.value.reason == "unknown_key"
    assert info.value.details["key"].endswith(key)


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=6))
def test_sequential_step_ids_compile_iff_valid_and_unique(ids: list[str]) -> None:
    spec = {"version": 1, "id": "w", "kind": "sequential", "steps": [{"id": i, "run": one_arg} for i in ids]}
    valid = all(
        i != "end_node"
        and not i.startswith("$")
        and not any(c in i for c in "#>/")
        and all(ord(c) >= 0x20 and ord(c) != 0x7F for c in i)
        for i in ids
    )
    try:
        compiled = compile_workflow(spec)
    except WorkflowError as exc:
        assert not valid or len(set(ids)) != len(ids)
        assert exc.reason in ("invalid_id", "duplicate_id")
    else:
        assert valid and len(set(ids)) == len(ids)
        assert [n.id for n in compiled.nodes] == ids
        assert compiled.edges[ids[-1]].target == END_NODE


@settings(max_examples=100, deadline=None)
@given(steps=st.integers(1, 50), version=st.integers(0, 10**6))
def test_the_fingerprint_is_a_pure_function_of_the_spec(steps: int, version: int) -> None:
    spec = {
        "version": version,
        "id": "w",
        "kind": "sequential",
        "steps": [{"id": f"s{i}", "run": one_arg if i % 2 else two_args} for i in range(steps)],
    }
    assert compile_workflow(spec).fingerprint == compile_workflow(copy.deepcopy(spec)).fingerprint


def test_the_public_surface_is_explicit_and_sorted() -> None:
    from adk_actors.workflows import spec

    assert list(spec.__all__) == sorted(spec.__all__, key=_isort)
    assert all(hasattr(spec, name) for name in spec.__all__)


def _isort(name: str) -> tuple[int, str]:
    """Ruff's ``__all__`` order: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)
