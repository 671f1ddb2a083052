"""``Agent``: an agent's specification as a frozen value, in google-adk's vocabulary.

::

    import adk_actors as adk

    helper = adk.Agent(name="Helper", description="Answers questions.", instruction="Be concise.")
    root = adk.Agent(name="Root", model="gemini-3.1-flash-lite", instruction="Route the request.",
                     tools=[adk.FunctionTool(get_weather)], sub_agents=[helper], output_key="answer",
                     provider_config={"api_key": "...", "base_url": "http://127.0.0.1:8765"})
    ref = adk.spawn_agent(root)                          # spawns Helper, then Root
    runner = adk.Runner(root, "app", adk.session_service())

The value is the reference's dict config spelled as fields: :meth:`Agent.config` is that dict, ``tools`` the tool
list, and both go through :func:`~adk_actors.agents.spec.build_spec` -- at construction (so a bad value fails
where it is written) and again at spawn (with the node's timeouts and session store). There is no second
validator: the only checks of this module are the shapes of the fields themselves (a list where a list belongs,
provider settings in ``provider_config`` only). Errors name the value's fields (``instruction``,
``generate_content_config.temperature``, ``provider_config.api_key``), not the dict keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from adk_actors.agents.spec import build_spec, check_tree
from adk_actors.errors import AdkError, ConfigError

__all__ = ["INCLUDE_CONTENTS", "Agent"]

INCLUDE_CONTENTS = {"default": "include", "none": "exclude"}
"""google-adk's ``include_contents`` values and the ``history_policy`` each one is."""

_KEY_OF_FIELD = {
    "instruction": "instructions",
    "generate_content_config": "generation_config",
    "include_contents": "history_policy",
}
_FIELD_OF_KEY = {key: name for name, key in _KEY_OF_FIELD.items()}
_FIELD_KEYS = frozenset(
    {
        "name",
        "model",
        "instructions",
        "global_instruction",
        "description",
        "sub_agents",
        "output_key",
        "input_schema",
        "output_schema",
        "generation_config",
        "history_policy",
        "callbacks",
        "callback_config",
    }
)
"""Dict-config keys an ``Agent`` field sets (``provider_config`` may not hold them)."""
_DICT_ONLY_KEYS = frozenset({"session_id", "session_service"})
"""Dict-config keys an ``Agent`` value does not offer (the compatibility conversation's persistence)."""


class _FrozenDict(dict[str, Any]):
    """A read-only dict (still a ``dict`` to the validators it is given to, and picklable)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("an Agent value is immutable")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (_FrozenDict, (dict(self),))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _FrozenDict({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _field_path(key: str, provider_keys: frozenset[str]) -> str:
    """The field an error's dict-config ``key`` (possibly dotted) comes from."""
    head, dot, rest = key.partition(".")
    if head in _FIELD_OF_KEY:
        return _FIELD_OF_KEY[head] + dot + rest
    if head in provider_keys:
        return f"provider_config.{key}"
    return key


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """An agent's specification: google-adk's ``LlmAgent`` fields over the reference's strict dict config.

    ``spawn_agent(agent)`` starts it (its ``Agent``-valued sub-agents first); ``Runner(agent, ...)`` starts it
    unless an agent of that name runs. Lists are stored as tuples and dicts as read-only copies.

    Raises:
        ConfigError: ``invalid_value`` (a field of the wrong shape: ``tools``, ``sub_agents`` or ``callbacks``
            not a list, ``include_contents`` not ``"default"`` / ``"none"``), ``misplaced_key`` (a key in
            ``provider_config`` that a field sets, ``details["use"]`` names it) and every reason of the dict
            config, with ``details["key"]`` naming the field.
        AgentError, ToolError, SchemaError: as :func:`~adk_actors.agents.spawn_agent` (names, tools, schemas,
            the tree of ``Agent`` values: ``self_reference``, ``duplicate_ownership``, ``tree_too_deep``...).
    """

    name: str
    """The agent name (``[A-Za-z_][A-Za-z0-9_]*``, at most 64 characters, not ``user``); unique per system."""
    model: str | None = None
    """The model id (``None``: the provider's default)."""
    instruction: Any = None
    """The instruction template (``{key}`` placeholders read scoped state), or a callable provider of it."""
    global_instruction: Any = None
    """An instruction sent before ``instruction`` (template or callable provider)."""
    description: str = ""
    """What the agent does; a coordinator shows it to its model to route to this agent."""
    tools: Sequence[Any] = ()
    """Tools: ``FunctionTool``, ``AgentTool``, toolsets, any ``Tool``."""
    sub_agents: Sequence[Any] = ()
    """``Agent`` values (spawned with this one), or ``AgentRef``s / names of running agents."""
    output_key: str | None = None
    """Under a Runner, the session-state key the output is committed to."""
    input_schema: Any = None
    """JSON Schema the input must satisfy (a pydantic model: pass ``Model.model_json_schema()``)."""
    output_schema: Any = None
    """JSON Schema the (JSON) output must satisfy; also requests structured output from a capable provider."""
    generate_content_config: Mapping[str, Any] | None = None
    """Generation settings (``temperature``, ``max_output_tokens``, ``thinking_config``...): ``generation_config``."""
    include_contents: str = "default"
    """``"default"`` sends the earlier turns, ``"none"`` only the current input (``history_policy``)."""
    callbacks: Sequence[Any] = ()
    """Callbacks (importable names or objects with hook methods), as in the dict config."""
    callback_config: Mapping[str, Any] | None = None
    """Application data passed to callbacks."""
    provider_config: Mapping[str, Any] | None = field(default=None, repr=False)
    """The provider's other settings: ``provider``, ``api_key``, ``base_url``, ``request_timeout``, ``retry``,
    ``builtin_tools``, ``tool_config``... (never shown by ``repr``)."""

    def __post_init__(self) -> None:
        for name in ("tools", "sub_agents", "callbacks"):
            value = getattr(self, name)
            if not isinstance(value, list | tuple):
                raise ConfigError(f"{name} is a list", reason="invalid_value", details={"key": name})
            object.__setattr__(self, name, tuple(value))
        for name in ("generate_content_config", "callback_config", "provider_config", "input_schema", "output_schema"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))
        if self.include_contents not in INCLUDE_CONTENTS:
            raise ConfigError(
                "include_contents is 'default' or 'none'", reason="invalid_value", details={"key": "include_contents"}
            )
        if self.provider_config is not None and not isinstance(self.provider_config, Mapping):
            raise ConfigError("provider_config is a dict", reason="invalid_value", details={"key": "provider_config"})
        for key in self.provider_config or {}:
            if key in _FIELD_KEYS or key in _DICT_ONLY_KEYS:
                use = _FIELD_OF_KEY.get(key, key) if key in _FIELD_KEYS else None
                raise ConfigError(
                    "an agent setting in provider_config",
                    reason="misplaced_key",
                    details={"key": f"provider_config.{key}", **({"use": use} if use else {})},
                )
        try:
            build_spec(self.name, self.config(), self.tools)
        except AdkError as err:
            provider_keys = frozenset(self.provider_config or ())
            for slot in ("key", "field"):
                if isinstance(err.details.get(slot), str):
                    err.details[slot] = _field_path(err.details[slot], provider_keys)
            raise
        values = {sub.name: sub for sub in _values(self)}
        check_tree(
            self.name,
            [_name_of(s) for s in self.sub_agents],
            lambda child: [_name_of(s) for s in values[child].sub_agents] if child in values else [],
        )

    def config(self) -> dict[str, Any]:
        """The reference's dict config of this agent (a fresh copy; sub-agent values appear by name, with their
        descriptions)."""
        config: dict[str, Any] = _thaw(self.provider_config) or {}
        for key, value in (
            ("model", self.model),
            ("instructions", self.instruction),
            ("global_instruction", self.global_instruction),
            ("output_key", self.output_key),
            ("input_schema", self.input_schema),
            ("output_schema", self.output_schema),
            ("generation_config", self.generate_content_config),
            ("callback_config", self.callback_config),
        ):
            if value is not None:
                config[key] = _thaw(value)
        if self.description is not None and self.description != "":  # a non-str one reaches build_spec's check
            config["description"] = self.description
        if self.include_contents != "default":
            config["history_policy"] = INCLUDE_CONTENTS.get(self.include_contents, self.include_contents)
        if self.callbacks:
            config["callbacks"] = list(self.callbacks)
        if self.sub_agents:
            config["sub_agents"] = _sub_agents(self.sub_agents)
        return config


def _name_of(sub: Any) -> str:
    return str(getattr(sub, "name", sub))


def _values(agent: Agent) -> list[Agent]:
    """Every ``Agent`` value below ``agent`` (each was validated when it was made)."""
    out: list[Agent] = []
    stack = [s for s in agent.sub_agents if isinstance(s, Agent)]
    while stack:
        sub = stack.pop()
        out.append(sub)
        stack.extend(s for s in sub.sub_agents if isinstance(s, Agent))
    return out


def _sub_agents(subs: Sequence[Any]) -> Any:
    """The dict config's ``sub_agents``: the list of refs/names as given, or (when it holds ``Agent`` values, whose
    descriptions route) the alias form; an entry of any other type is left for ``build_spec`` to refuse."""
    from adk_actors.agents.api import AgentRef

    if not any(isinstance(s, Agent) for s in subs) or not all(isinstance(s, Agent | AgentRef | str) for s in subs):
        return [s.name if isinstance(s, Agent) else s for s in subs]
    out: dict[str, Any] = {}
    for sub in subs:
        if isinstance(sub, Agent):
            out[sub.name] = {"agent": sub.name, "description": sub.description}
        else:
            out[_name_of(sub)] = {"agent": sub}
    return out
