"""What an MCP server exposes and within which bounds: :class:`McpLimits`, :class:`McpResource`, :class:`McpPrompt`,
and the up-front validation of every descriptor :func:`~adk_actors.web.mcp_server.mcp_app` is given.

Every check raises :class:`~adk_actors.errors.ConfigError` with a reason tag and structural details (a kind, an
index, a key), never the value that failed.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from adk_actors.errors import ConfigError
from adk_actors.web.edge import check_limits

__all__ = [
    "AGENT_SCHEMA",
    "MAX_ITEMS",
    "MCP_LIMIT_BOUNDS",
    "McpLimits",
    "McpPrompt",
    "McpResource",
    "ToolEntry",
    "check_hosts",
    "check_items",
    "check_origins",
    "check_text",
    "config_error",
    "prompt_specs",
    "resource_specs",
    "tool_entries",
]

_KIB = 1024
_MIB = 1024 * 1024
MAX_ITEMS = 1000
"""Most tools (agents included), resources or prompts one server exposes."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_MIME = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(;.{0,256})?")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]{1,2040}")
AGENT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "minLength": 1, "description": "What to ask the agent."}},
    "required": ["prompt"],
    "additionalProperties": False,
}

MCP_LIMIT_BOUNDS: Mapping[str, tuple[float, float]] = {
    "max_sessions": (1, 10_000),
    "session_ttl_s": (1.0, 86_400.0),
    "max_inflight_per_session": (1, 256),
    "max_concurrent_calls": (1, 200),
    "max_body_bytes": (1 * _KIB, 64 * _MIB),
    "max_result_bytes": (1 * _KIB, 64 * _MIB),
    "call_timeout_s": (0.1, 86_400.0),
    "callback_timeout_s": (0.1, 600.0),
}
"""The inclusive ``(minimum, hard maximum)`` of every :class:`McpLimits` field."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpLimits:
    """The bounds of one MCP server (see the module docstring).

    Raises:
        ConfigError: reason ``invalid_value`` (details: ``key``, ``minimum``, ``maximum``) for a value that is not a
            number of the right kind or lies outside :data:`MCP_LIMIT_BOUNDS`.
    """

    max_sessions: int = 64
    """Sessions open at once; one more ``initialize`` is refused with 503."""
    session_ttl_s: float = 1800.0
    """Idle time (no request in flight) after which a session ends."""
    max_inflight_per_session: int = 8
    """Requests of one session being served at once; one more is answered 429."""
    max_concurrent_calls: int = 32
    """Tool calls (runs) in flight on the whole server; one more is answered ``isError`` ``server_busy``."""
    max_body_bytes: int = 1 * _MIB
    """Largest request body (one JSON-RPC message)."""
    max_result_bytes: int = 1 * _MIB
    """Largest tool or agent result, resource content or prompt (UTF-8 bytes of its text)."""
    call_timeout_s: float = 300.0
    """Longest tool call; the run is then cancelled and the call answered ``isError`` ``call_timeout``."""
    callback_timeout_s: float = 10.0
    """Longest resource read or prompt get (the callback runs on the edge's thread pool)."""

    def __post_init__(self) -> None:
        check_limits(self, MCP_LIMIT_BOUNDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpResource:
    """A resource the server lists and reads: ``read()`` returns its content (``str`` text or ``bytes``)."""

    uri: str
    """Its URI (any scheme, e.g. ``memo://otp``); unique on one server."""
    name: str
    """A short name."""
    read: Callable[[], str | bytes]
    """Called on the edge's thread pool for every ``resources/read``; must not block for long."""
    mime_type: str = "text/plain"
    description: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpPrompt:
    """A prompt template: ``get(arguments)`` returns its messages.

    ``get`` receives ``{argument name: str}`` (only declared arguments, every required one present) and returns a
    list of messages ``{"role": "user" | "assistant", "content": str | content block}`` or a mapping with
    ``"messages"`` (and optionally ``"description"``).
    """

    name: str
    get: Callable[[dict[str, str]], Any]
    arguments: tuple[Mapping[str, Any], ...] = ()
    """``{"name": str, "required": bool, "description": str}`` per argument (``required`` defaults to false)."""
    description: str = ""


# --- descriptors ----------------------------------------------------------------------------------------------


def config_error(message: str, reason: str, **details: Any) -> ConfigError:
    return ConfigError(message, reason=reason, details=details)


def check_text(value: Any, key: str, *, max_chars: int = 4096, allow_empty: bool = True) -> str:
    if not isinstance(value, str) or len(value) > max_chars or (not allow_empty and not value):
        raise config_error(f"{key} must be a string of at most {max_chars} characters", "invalid_value", key=key)
    return value


def _fields_of(item: Any, cls: type, kind: str, index: int) -> dict[str, Any]:
    """A descriptor given as the dataclass or as a mapping (the reference's style), as a plain dict of its fields."""
    if isinstance(item, cls):
        return {f.name: getattr(item, f.name) for f in fields(cls)}
    if not isinstance(item, Mapping):
        raise config_error(f"a {kind} is a {cls.__name__} or a mapping", "invalid_descriptor", kind=kind, index=index)
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(str(k) for k in item if k not in allowed)
    if unknown:
        raise config_error(f"unknown {kind} key", "unknown_key", kind=kind, index=index, key=unknown[0][:64])
    return dict(item)


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One MCP tool: a tool value run in the worker pool, or an agent run in a fresh session."""

    name: str
    description: str
    schema: dict[str, Any]
    tool: Any = None
    agent: str = ""


def tool_entries(tools: Iterable[Any], agents: Iterable[Any]) -> dict[str, ToolEntry]:
    from adk_actors.agents.api import AgentRef
    from adk_actors.schema import compile_schema

    entries: dict[str, ToolEntry] = {}

    def add(entry: ToolEntry, index: int, kind: str) -> None:
        if not _NAME.fullmatch(entry.name):
            raise config_error(
                "an MCP tool name is 1-128 of [A-Za-z0-9_.-]", "invalid_tool_name", kind=kind, index=index
            )
        if entry.name in entries:
            raise config_error("two MCP tools have the same name", "duplicate_name", kind=kind, name=entry.name)
        entries[entry.name] = entry

    for index, tool in enumerate(tools):
        name = getattr(tool, "name", None)
        schema_of = getattr(tool, "schema", None)
        if not isinstance(name, str) or not callable(schema_of) or not callable(getattr(tool, "execute", None)):
            raise config_error(
                "a tool has a name, schema() and execute()", "invalid_descriptor", kind="tool", index=index
            )
        try:
            schema = schema_of()
            compile_schema(schema)
        except Exception:
            raise config_error(
                "a tool's schema does not compile", "invalid_tool_schema", kind="tool", index=index
            ) from None
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise config_error(
                "a tool's schema is a JSON object schema", "invalid_tool_schema", kind="tool", index=index
            )
        try:
            pickle.dumps(tool)
        except Exception:
            # The call runs in a worker process: the tool travels there by value (its function by reference).
            raise config_error(
                "a tool must pickle (a module-level function)", "unpicklable_tool", index=index
            ) from None
        description = check_text(getattr(tool, "description", "") or "", "description")
        add(ToolEntry(name, description, schema, tool=tool), index, "tool")
    for index, agent in enumerate(agents):
        if isinstance(agent, AgentRef):
            agent = agent.name
        if not isinstance(agent, str):
            raise config_error(
                "an agent is its registered name or AgentRef", "invalid_descriptor", kind="agent", index=index
            )
        description = f"Ask the agent {agent}; returns its answer text."
        add(ToolEntry(agent, description, dict(AGENT_SCHEMA), agent=agent), index, "agent")
    return entries


def resource_specs(items: Iterable[Any]) -> dict[str, McpResource]:
    found: dict[str, McpResource] = {}
    for index, item in enumerate(items):
        spec = _fields_of(item, McpResource, "resource", index)
        uri = spec.get("uri")
        if not isinstance(uri, str) or not _URI.fullmatch(uri):
            raise config_error(
                "a resource uri is an absolute URI of at most 2048 characters", "invalid_uri", index=index
            )
        name = check_text(spec.get("name"), "name", max_chars=256, allow_empty=False)
        mime = spec.get("mime_type", "text/plain")
        if not isinstance(mime, str) or not _MIME.fullmatch(mime):
            raise config_error("a resource mime_type is type/subtype", "invalid_mime_type", index=index)
        if not callable(spec.get("read")):
            raise config_error("a resource needs a read() callable", "invalid_descriptor", kind="resource", index=index)
        if uri in found:
            raise config_error("two resources have the same uri", "duplicate_name", kind="resource", index=index)
        description = check_text(spec.get("description", ""), "description")
        found[uri] = McpResource(uri=uri, name=name, read=spec["read"], mime_type=mime, description=description)
    return found


def _prompt_arguments(raw: Any, index: int) -> tuple[Mapping[str, Any], ...]:
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise config_error("prompt arguments are a list", "invalid_descriptor", kind="prompt", index=index)
    out: list[Mapping[str, Any]] = []
    for arg in raw:
        if not isinstance(arg, Mapping) or not set(arg) <= {"name", "required", "description"}:
            raise config_error("a prompt argument is {name, required, description}", "invalid_descriptor", index=index)
        name = check_text(arg.get("name"), "arguments.name", max_chars=128, allow_empty=False)
        required = arg.get("required", False)
        if not isinstance(required, bool):
            raise config_error("a prompt argument's required is a bool", "invalid_value", key="arguments.required")
        if any(a["name"] == name for a in out):
            raise config_error("two prompt arguments have the same name", "duplicate_name", kind="prompt", index=index)
        description = check_text(arg.get("description", ""), "arguments.description")
        out.append({"name": name, "required": required, "description": description})
    return tuple(out)


def prompt_specs(items: Iterable[Any]) -> dict[str, McpPrompt]:
    found: dict[str, McpPrompt] = {}
    for index, item in enumerate(items):
        spec = _fields_of(item, McpPrompt, "prompt", index)
        name = spec.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise config_error("a prompt name is 1-128 of [A-Za-z0-9_.-]", "invalid_prompt_name", index=index)
        if not callable(spec.get("get")):
            raise config_error(
                "a prompt needs a get(arguments) callable", "invalid_descriptor", kind="prompt", index=index
            )
        if name in found:
            raise config_error("two prompts have the same name", "duplicate_name", kind="prompt", name=name)
        found[name] = McpPrompt(
            name=name,
            get=spec["get"],
            arguments=_prompt_arguments(spec.get("arguments", ()), index),
            description=check_text(spec.get("description", ""), "description"),
        )
    return found


def check_items(items: Any, key: str) -> list[Any]:
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise config_error(f"{key} is a list", "invalid_value", key=key)
    listed = list(items)
    if len(listed) > MAX_ITEMS:
        raise config_error(f"at most {MAX_ITEMS} {key}", "too_many", key=key, maximum=MAX_ITEMS)
    return listed


def check_origins(values: Any) -> frozenset[str]:
    out = set()
    for value in check_items(values, "allowed_origins"):
        if not isinstance(value, str) or not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]{1,260}", value):
            raise config_error("an allowed origin is scheme://host[:port]", "invalid_value", key="allowed_origins")
        out.add(value.lower())
    return frozenset(out)


def check_hosts(values: Any) -> frozenset[str]:
    out = set()
    for value in check_items(values, "allowed_hosts"):
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9.\-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]", value):
            raise config_error(
                "an allowed host is a host name or address, without port", "invalid_value", key="allowed_hosts"
            )
        out.add(value.lower())
    return frozenset(out)
