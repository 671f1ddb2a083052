"""``AgentSpec``: the immutable, validated specification of one agent, and the pure agent-tree checks.

An agent's config is one strict dict shared with its provider: the provider validates its own keys
(``provider``, ``model``, ``api_key``, ``base_url``, ``instructions``, ``global_instruction``, ``generation_config``,
``builtin_tools``, ``tool_config``, ``request_timeout``, ``retry``, ...) and rejects unknown ones; the agent keys
(``input_schema``, ``output_schema``, ``output_key``, ``history_policy``, ``sub_agents``, ``callbacks``,
``callback_config``, ``description``) are checked here. Tools are compiled into a catalog at build time (schemas
normalized and compiled, names unique across tools and sub-agents) and travel to the agent as
:class:`ToolSpec` values: declaration data plus the tool object serialized by value, so the agent's host never
has to import user code to advertise it.

Agent names follow the portable grammar ``[A-Za-z_][A-Za-z0-9_]*`` (at most 64 characters); ``user`` is
reserved. :func:`check_tree` validates a tree of sub-agents (self-reference, cycles, duplicate ownership, more than
:data:`MAX_TREE_AGENTS` agents, depth above :data:`MAX_TREE_DEPTH`) without any actor: the facade gives it a
function that reads each agent's declared sub-agents. :func:`check_ancestry` is the same depth and cycle rule at
invocation time. Depth counts delegations: the root is at depth 0, its sub-agents at 1.

An ``output_schema`` requests structured output only from a provider whose ``capabilities()`` say
``structured_output``; with any other provider the output is still validated after the call.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from adk_actors.agents.callbacks import callback_entry, hooks_of
from adk_actors.agents.instructions import check_template
from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, AgentError, ConfigError, SchemaError, ToolError, ValidationError
from adk_actors.models import capabilities, validate_config
from adk_actors.runtime.callables import CallableRef, callable_ref
from adk_actors.schema import compile_schema
from adk_actors.secrets import Secret, prune_secrets
from adk_actors.tools import Tool, compile_catalog, is_inline, is_parallel_safe, tool_declaration
from adk_actors.tools.catalog import ToolCatalog, Toolset
from adk_actors.tools.remote import remote_binding

__all__ = [
    "AGENT_KEYS",
    "AGENT_TOOL_SCHEMA",
    "LEGACY_APP",
    "MAX_TOOL_ROUNDS",
    "MAX_TREE_AGENTS",
    "MAX_TREE_DEPTH",
    "RESERVED_NAMES",
    "AgentSpec",
    "SubAgent",
    "ToolSpec",
    "build_spec",
    "check_agent_name",
    "check_ancestry",
    "check_tree",
    "compile_spec_catalog",
]

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
RESERVED_NAMES = frozenset({"user"})
MAX_TREE_AGENTS = 256
MAX_TREE_DEPTH = 64
MAX_TOOL_ROUNDS = 16
"""Model/tool rounds one turn may take before it fails with ``max_tool_rounds``."""
MAX_DESCRIPTION_CHARS = 4096

AGENT_KEYS = frozenset(
    {
        "input_schema",
        "output_schema",
        "output_key",
        "history_policy",
        "sub_agents",
        "callbacks",
        "callback_config",
        "description",
        "name",
        "session_id",
        "session_service",
    }
)
"""Config keys that belong to the agent (everything else is the provider's and validated by it)."""
LOCAL_KEYS = frozenset({"session_id", "session_service"})
"""Agent keys the provider does not know (removed before the provider validates the rest)."""
LEGACY_APP = "adk_actors.agents"
"""The app name under which the ``session_id`` option saves compatibility conversations."""

HISTORY_POLICIES = ("include", "exclude")

AGENT_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "The request for the agent."}},
    "required": ["prompt"],
}
"""The argument schema of a sub-agent or ``AgentTool`` function declaration."""


def check_agent_name(name: Any, *, field_name: str = "name") -> str:
    """Check an agent name against ``[A-Za-z_][A-Za-z0-9_]*`` (at most 64 characters, ``user`` reserved).

    Raises:
        AgentError: reason ``invalid_agent_name`` or ``reserved_agent_name``.
    """
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise AgentError(
            "agent names match [A-Za-z_][A-Za-z0-9_]* (at most 64 characters)",
            reason="invalid_agent_name",
            details={"field": field_name},
        )
    if name in RESERVED_NAMES:
        raise AgentError(
            "this agent name is reserved", reason="reserved_agent_name", details={"field": field_name, "name": name}
        )
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class SubAgent:
    """A sub-agent as the coordinator advertises it: resolved by registered name at call time."""

    name: str
    """The sub-agent's registered agent name (also the function name the model calls)."""
    description: str = ""
    """What it does, for the model's routing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """One compiled tool as an agent carries it."""

    name: str
    """The function name."""
    description: str
    """What it does, for the model."""
    schema: Any
    """The normalized argument JSON Schema (object or boolean schema)."""
    payload: bytes = b""
    """The tool object serialized by value (cloudpickle); run in a worker (or inline) by the agent."""
    agent: str = ""
    """For an ``AgentTool``: the agent name to invoke (no payload is run)."""
    remote: Any = None
    """For a remote tool (an MCP tool): its :class:`~adk_actors.tools.remote.RemoteBinding` (no payload is run)."""
    parallel_safe: bool = False
    """Whether calls may run concurrently with neighbouring parallel-safe calls."""
    inline: bool = False
    """Whether the agent may run the tool in its own process instead of the worker pool."""
    confirmation: str = "never"
    """``never``, ``always`` (fails closed without a runner) or ``dynamic`` (the gate runs with the tool)."""
    source: str = "tool"
    """``"tool"`` or ``"toolset:<name>"`` (named in ``duplicate_tool_name`` errors)."""


class _Declared:
    """A ``Tool`` built from a ``ToolSpec`` (declaration only) for catalog compilation."""

    def __init__(self, spec: ToolSpec) -> None:
        self.name = spec.name
        self.description = spec.description
        self._schema = spec.schema

    def schema(self) -> Any:
        return self._schema

    def execute(self, args: dict[str, Any], context: Any) -> Any:  # pragma: no cover - never executed
        raise ToolError("declaration only", reason="not_executable")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """Everything an agent actor needs, validated and immutable (see :func:`build_spec`)."""

    name: str
    """The agent's registered name."""
    model_config: dict[str, Any] = field(repr=False)
    """The provider config (agent keys removed; the API key held as a ``Secret``)."""
    description: str = ""
    tools: tuple[ToolSpec, ...] = ()
    sub_agents: tuple[SubAgent, ...] = ()
    history_policy: str = "include"
    input_schema: Any = None
    """Normalized JSON Schema the input must satisfy (``None``: any input)."""
    output_schema: Any = None
    """Normalized JSON Schema the (JSON) output must satisfy (``None``: any output)."""
    output_key: str | None = None
    call_timeout_ms: int | None = 60000
    """Bound of one model call, tool call or sub-agent call (``None``: infinity)."""
    turn_timeout_ms: int | None = 60000
    """Bound of one whole turn (``None``: infinity)."""
    max_concurrent_invocations: int = 32
    max_tool_rounds: int = MAX_TOOL_ROUNDS
    callbacks: tuple[str | bytes, ...] = ()
    """Callbacks in order: importable names, or cloudpickled objects."""
    callback_hooks: tuple[str, ...] = ()
    """The hooks the callbacks define (found at spawn), so undefined hooks cost nothing."""
    callback_config: dict[str, Any] = field(default_factory=dict)
    """Callback application data (secret-pruned), passed to callbacks in their config view."""
    session_id: str | None = None
    """Persist the compatibility conversation under this key (the reference's agent ``session_id`` option)."""
    session_service: Any = field(default=None, repr=False)
    """The (picklable, shared) session service that stores it."""
    instruction_provider: CallableRef | None = None
    """A dynamic ``instructions`` provider (run in a worker each turn) instead of a template."""
    global_instruction_provider: CallableRef | None = None
    """A dynamic ``global_instruction`` provider."""

    def sub_agent_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sub_agents)


def compile_spec_catalog(spec: AgentSpec) -> tuple[ToolCatalog, list[dict[str, Any]]]:
    """The agent's compiled catalog and its full declaration list (tools, then sub-agents).

    Raises:
        ToolError: reason ``duplicate_tool_name`` and the other catalog reasons.
        SchemaError: a schema is invalid.
    """
    toolsets: dict[str, list[_Declared]] = {}
    for t in spec.tools:
        if t.source != "tool":
            toolsets.setdefault(t.source.removeprefix("toolset:"), []).append(_Declared(t))
    catalog = compile_catalog(
        [_Declared(t) for t in spec.tools if t.source == "tool"],
        [Toolset.of(name, members) for name, members in toolsets.items()],
        sub_agents=spec.sub_agent_names(),
    )
    declarations = catalog.declarations()
    for sub in spec.sub_agents:
        agent_tool = _Declared(ToolSpec(name=sub.name, description=sub.description, schema=AGENT_TOOL_SCHEMA))
        declarations.append(tool_declaration(agent_tool, source="sub_agent")[0])
    return catalog, declarations


def _config_error(message: str, reason: str, key: str) -> ConfigError:
    return ConfigError(message, reason=reason, details={"key": key})


def _timeout_ms(value: Any) -> int | None:
    if value is None or value == "infinity" or (isinstance(value, float) and value == float("inf")):
        return None
    return int(value)


def _tool_specs(item: Any) -> list[ToolSpec]:
    """A tool's spec, or one spec per tool of a toolset snapshot (its source named for collision errors)."""
    if not isinstance(item, Toolset):
        return [_tool_spec(item)]
    return [_tool_spec(t, source=f"toolset:{item.name}") for t in item.members()]


def _tool_spec(tool: Any, source: str = "tool") -> ToolSpec:
    from adk_actors.agents.agent_tool import AgentTool

    if not isinstance(tool, Tool):
        raise ToolError("not a tool", reason="invalid_tool", details={"type": type(tool).__name__})
    compiled = compile_schema(tool.schema())
    if isinstance(tool, AgentTool):
        return ToolSpec(
            name=tool.name,
            description=tool.description,
            schema=compiled.schema,
            agent=tool.agent,
            parallel_safe=True,
            source=source,
        )
    remote = remote_binding(tool)
    if remote is not None:
        return ToolSpec(
            name=tool.name,
            description=tool.description,
            schema=compiled.schema,
            remote=remote,
            parallel_safe=is_parallel_safe(tool),
            confirmation="always" if getattr(tool, "requires_confirmation", False) is True else "never",
            source=source,
        )
    static = getattr(tool, "requires_confirmation", False)
    gate = getattr(tool, "require_confirmation", None)
    own_gate = getattr(tool, "_gate", None)  # FunctionTool keeps a static flag here
    if isinstance(own_gate, bool):
        confirmation = "always" if own_gate else "never"
    elif callable(gate):
        confirmation = "dynamic"  # evaluated with the call, in the worker
    else:
        confirmation = "always" if static is True else "never"
    try:
        payload = cloudpickle.dumps(tool)
    except Exception:
        raise ToolError(
            "the tool cannot be sent to another process",
            reason="unpicklable_callable",
            details={"tool": str(tool.name)[:128]},
        ) from None
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        schema=compiled.schema,
        payload=payload,
        parallel_safe=is_parallel_safe(tool),
        inline=is_inline(tool),
        confirmation=confirmation,
        source=source,
    )


def _sub_agents(raw: Any) -> tuple[SubAgent, ...]:
    """``{"Alias": {"agent": AgentRef | name, "description": str}}`` or a list of agent refs / names."""
    out: list[SubAgent] = []
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        items: Iterable[tuple[Any, Any]] = raw.items()
    elif isinstance(raw, list | tuple):
        items = [(_agent_name(v, "sub_agents"), {"agent": v}) for v in raw]
    else:
        raise _config_error("sub_agents is a dict of alias to {agent, description}", "invalid_value", "sub_agents")
    for alias, entry in items:
        check_agent_name(alias, field_name="sub_agents")
        if not isinstance(entry, Mapping):
            entry = {"agent": entry}
        unknown = sorted(set(entry) - {"agent", "description"})
        if unknown:
            raise _config_error(
                f"unknown config key 'sub_agents.{alias}.{unknown[0]}'",
                "unknown_key",
                f"sub_agents.{alias}.{unknown[0]}",
            )
        target = _agent_name(entry.get("agent", alias), f"sub_agents.{alias}.agent")
        if target != alias:
            raise AgentError(
                "a sub-agent alias must equal the agent's registered name",
                reason="alias_mismatch",
                details={"alias": alias, "name": target},
            )
        description = entry.get("description", "")
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
            raise _config_error(
                "sub-agent descriptions are bounded str", "invalid_value", f"sub_agents.{alias}.description"
            )
        out.append(SubAgent(name=alias, description=description))
    return tuple(out)


def _agent_name(value: Any, key: str) -> str:
    name = getattr(value, "name", value)
    if not isinstance(name, str):
        raise _config_error("a sub-agent is an AgentRef or an agent name", "invalid_value", key)
    return check_agent_name(name, field_name=key)


def _schema(config: Mapping[str, Any], key: str) -> Any:
    if config.get(key) is None:
        return None
    try:
        return compile_schema(config[key]).schema
    except SchemaError as exc:
        raise SchemaError(exc.message, reason=exc.reason, details={**exc.details, "key": key}) from None


def _is_provider(value: Any) -> bool:
    return isinstance(value, CallableRef) or (callable(value) and not isinstance(value, str))


def _provider(value: Any) -> CallableRef:
    try:
        return callable_ref(value)
    except AdkError as exc:
        raise ConfigError(
            "the instruction provider cannot be sent to a worker",
            reason="invalid_value",
            details={"key": "instructions", "rule": exc.reason},
        ) from None


def _conversation_store(service: Any) -> Any:
    from adk_actors.sessions import InMemorySessionService

    if service is None:
        raise _config_error(
            "session_id needs a shared session store (session_service)", "session_backend_required", "session_id"
        )
    if isinstance(service, InMemorySessionService) or not callable(getattr(service, "save_conversation", None)):
        raise _config_error(
            "session_service must be a shared (SQL) session service", "invalid_value", "session_service"
        )
    try:
        pickle.dumps(service)
    except Exception:
        raise _config_error(
            "session_service must pickle (a service descriptor)", "invalid_value", "session_service"
        ) from None
    return service


def _structured_output(model_config: Mapping[str, Any]) -> bool:
    """Whether the config's provider says it honours a response schema (the reference requests structured output
    from a capable provider only)."""
    return capabilities(model_config).get("structured_output") is True


def build_spec(
    name: str,
    config: Mapping[str, Any],
    tools: Sequence[Any] = (),
    *,
    call_timeout_ms: Any = 60000,
    turn_timeout_ms: Any = 60000,
    max_concurrent_invocations: int = 32,
    session_service: Any = None,
) -> AgentSpec:
    """Validate an agent's name, config and tools into an :class:`AgentSpec`.

    ``session_id`` (config) persists the compatibility conversation through the session service's legacy
    ``save_conversation`` / ``load_conversation``; the service is ``config["session_service"]``, else
    ``session_service`` (the facade passes the node's shared store: the SQL descriptor, or the session store
    actor's client with the memory backend).

    Raises:
        AgentError: ``invalid_agent_name``, ``reserved_agent_name``, ``alias_mismatch``, ``self_reference``.
        ConfigError: ``unknown_key`` / ``invalid_value`` (agent keys or the provider's), ``invalid_callback``,
            ``session_backend_required`` (``session_id`` without a shared store),
            ``secret_state_key`` / ``invalid_artifact_placeholder`` (instruction templates).
        ToolError: ``duplicate_tool_name``, ``invalid_tool``, ``invalid_tool_name``, ``unpicklable_callable``.
        SchemaError: an invalid tool, input or output schema (``details["key"]`` / ``details["tool"]``).
    """
    check_agent_name(name)
    if not isinstance(config, Mapping) or not all(isinstance(k, str) for k in config):
        raise _config_error("an agent config is a dict with str keys", "invalid_value", "config")
    config = dict(config)
    providers = {
        key: _provider(config.pop(key))
        for key in ("instructions", "global_instruction")
        if key in config and _is_provider(config[key])
    }
    validate_config({k: v for k, v in config.items() if k not in LOCAL_KEYS})
    session_id = config.get("session_id")
    if session_id is not None and (not isinstance(session_id, str) or not session_id or len(session_id) > 255):
        raise _config_error("session_id is a non-empty str of at most 255 characters", "invalid_value", "session_id")
    service = config.get("session_service", session_service)
    if session_id is not None:
        service = _conversation_store(service)
    if config.get("name", name) != name:
        raise _config_error("config name differs from the agent name", "invalid_value", "name")
    description = config.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise _config_error("description is a bounded str", "invalid_value", "description")
    history_policy = config.get("history_policy", "include")
    if history_policy not in HISTORY_POLICIES:
        raise _config_error("history_policy is include or exclude", "invalid_value", "history_policy")
    output_key = config.get("output_key")
    if output_key is not None and (not isinstance(output_key, str) or not output_key or len(output_key) > 256):
        raise _config_error("output_key is a non-empty bounded str", "invalid_value", "output_key")
    raw_callbacks = config.get("callbacks") or []
    if not isinstance(raw_callbacks, list | tuple):
        raise _config_error("callbacks is a list of importable names", "invalid_value", "callbacks")
    callbacks = [callback_entry(c) for c in raw_callbacks]
    callback_config = config.get("callback_config") or {}
    if not isinstance(callback_config, Mapping):
        raise _config_error("callback_config is a JSON object", "invalid_value", "callback_config")
    try:
        callback_config = copy_json(prune_secrets(dict(callback_config)), field="callback_config")[0]
    except (ValidationError, TypeError):
        raise _config_error("callback_config is a JSON object", "invalid_value", "callback_config") from None
    callback_hooks = hooks_of(callbacks)
    check_template(config.get("instructions"), "instructions")
    check_template(config.get("global_instruction"), "global_instruction")
    input_schema = _schema(config, "input_schema")
    output_schema = _schema(config, "output_schema")
    sub_agents = _sub_agents(config.get("sub_agents"))
    if name in {s.name for s in sub_agents}:
        raise AgentError("an agent cannot be its own sub-agent", reason="self_reference", details={"name": name})
    model_config = {k: v for k, v in config.items() if k not in AGENT_KEYS}
    if isinstance(model_config.get("api_key"), str):
        model_config["api_key"] = Secret(model_config["api_key"])
    if output_schema is not None and _structured_output(model_config):
        generation = dict(model_config.get("generation_config") or {})
        if (
            "response_schema" not in generation
            and "response_json_schema" not in generation
            and "response_schema" not in model_config
        ):
            generation.setdefault("response_mime_type", "application/json")
            generation["response_json_schema"] = output_schema
            model_config["generation_config"] = generation
    specs = tuple(spec for item in tools for spec in _tool_specs(item))
    spec = AgentSpec(
        name=name,
        model_config=model_config,
        description=description,
        tools=specs,
        sub_agents=sub_agents,
        history_policy=history_policy,
        input_schema=input_schema,
        output_schema=output_schema,
        output_key=output_key,
        call_timeout_ms=_timeout_ms(call_timeout_ms),
        turn_timeout_ms=_timeout_ms(turn_timeout_ms),
        max_concurrent_invocations=int(max_concurrent_invocations),
        callbacks=tuple(callbacks),
        callback_hooks=callback_hooks,
        callback_config=callback_config,
        session_id=session_id,
        session_service=service if session_id is not None else None,
        instruction_provider=providers.get("instructions"),
        global_instruction_provider=providers.get("global_instruction"),
    )
    compile_spec_catalog(spec)
    return spec


def check_tree(
    root: str,
    children: Sequence[str],
    children_of: Callable[[str], Sequence[str]],
    *,
    max_agents: int = MAX_TREE_AGENTS,
    max_depth: int = MAX_TREE_DEPTH,
) -> int:
    """Validate the tree below a new agent ``root`` whose sub-agents are ``children``.

    ``children_of(name)`` returns the declared sub-agents of an existing agent (it may raise, for example
    ``AgentError(reason="tree_unresponsive")``).

    Returns:
        The number of agents in the tree, the root included.

    Raises:
        AgentError: ``self_reference``, ``agent_cycle``, ``duplicate_ownership``, ``too_many_agents``,
            ``tree_too_deep``.
    """
    owner: dict[str, str] = {}
    count = 1
    stack: list[tuple[str, tuple[str, ...], Sequence[str]]] = [(root, (root,), children)]
    while stack:
        parent, path, kids = stack.pop()
        for child in kids:
            if child == parent:
                raise AgentError(
                    "an agent cannot be its own sub-agent", reason="self_reference", details={"name": child}
                )
            if child in path:
                raise AgentError(
                    "the agent tree has a cycle", reason="agent_cycle", details={"name": child, "parent": parent}
                )
            if child in owner:
                raise AgentError(
                    "an agent has two parents in the tree",
                    reason="duplicate_ownership",
                    details={"name": child, "parent": parent, "first_parent": owner[child]},
                )
            owner[child] = parent
            count += 1
            if count > max_agents:
                raise AgentError(
                    "the agent tree has too many agents", reason="too_many_agents", details={"max": max_agents}
                )
            if len(path) > max_depth:
                raise AgentError("the agent tree is too deep", reason="tree_too_deep", details={"max": max_depth})
            stack.append((child, (*path, child), children_of(child)))
    return count


def check_ancestry(name: str, ancestry: Sequence[str], *, max_depth: int = MAX_TREE_DEPTH) -> None:
    """The invocation-time check of a delegation: ``ancestry`` names the agents that delegated to ``name``, root
    first, so ``name`` runs at depth ``len(ancestry)`` — the depth :func:`check_tree` measures at spawn.

    Raises:
        AgentError: ``agent_cycle`` (``name`` is already running in this invocation), ``tree_too_deep`` (depth
            above ``max_depth``).
    """
    if name in ancestry:
        raise AgentError(
            "the agent is already running in this invocation", reason="agent_cycle", details={"agent": name}
        )
    if len(ancestry) > max_depth:
        raise AgentError("delegation is too deep", reason="tree_too_deep", details={"max": max_depth})
