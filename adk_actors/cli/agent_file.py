"""Agent config files: checked JSON shared by ``adk config validate``, ``adk run`` and ``adk console``.

A file holds one agent config exactly as :func:`adk_actors.spawn_agent` takes it (``docs/AGENTS.md``) plus a
required ``name``, an optional ``tools`` list and an optional ``runner_options`` object.

``tools`` names the agent's tools by importable name, ``"pkg.module:attr"`` (or ``"pkg.module.attr"``): a tool
object (a :class:`~adk_actors.tools.FunctionTool`, with its confirmation gate...) or a plain function, wrapped as
``FunctionTool(function)``. The module must import in the command's process and in the node's (installed, or on
``PYTHONPATH``); a name that does not import fails with ``ConfigError(reason="invalid_tool")``.

``runner_options`` holds the keyword options of the
:class:`~adk_actors.runner.Runner` the command runs the agent with (``max_llm_calls``, ``max_tool_rounds``,
``run_timeout``, ``tool_execution``...), checked by the Runner's own
:func:`~adk_actors.agents.turn.options.runner_options` (a bad one fails with its reason, the key prefixed
``runner_options.``). ``streaming_mode`` is the command's choice and is not accepted there.

The agent config is validated by the same code as a Python config (:func:`~adk_actors.agents.spec.build_spec`,
which runs the provider's ``validate_config``), after one rule of its own: **no secrets in the file**. A
secret-named key anywhere outside a JSON Schema (``api_key``, ``token``, ``client_secret``...), a string shaped
like a Google API key, or the value of a key variable of the environment fails with
``ConfigError(reason="secret_in_config", details={"key": <dotted path>})`` — the value itself is never reported.
Keep ``GEMINI_API_KEY`` in the environment.

Safety categories may be spelled as the Gemini API and the reference's ``examples/agent.json`` spell them
(``HARM_CATEGORY_DANGEROUS_CONTENT``, ``BLOCK_MEDIUM_AND_ABOVE``) or by the short names of ``docs/MODELS.md``
(``dangerous_content``, ``block_medium_and_above``); the file's ``HARM_CATEGORY_`` prefix is dropped before the
provider validates it.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adk_actors.agents.spec import build_spec
from adk_actors.agents.turn.options import runner_options
from adk_actors.errors import AdkError, ConfigError
from adk_actors.logs import SECRET_ENV_VARS
from adk_actors.secrets import is_secret_key
from adk_actors.tools import FunctionTool, Tool

__all__ = [
    "MAX_FILE_BYTES",
    "RUNNER_OPTIONS_KEY",
    "TOOLS_KEY",
    "AgentFile",
    "check_agent_config",
    "check_runner_options",
    "find_secret",
    "load_agent_file",
    "load_tools",
    "read_agent_file",
]

MAX_FILE_BYTES = 1024 * 1024
"""Largest agent file read (a config, not a data set)."""

# Keys whose values are JSON Schemas: their property names describe data, not credentials.
_SCHEMA_PATHS = frozenset(
    {
        "input_schema",
        "output_schema",
        "response_schema",
        "generation_config.response_schema",
        "generation_config.response_json_schema",
    }
)
# Top-level agent keys that look secret-named to the generic rule but are not ("output_key" names a state key).
_NOT_SECRET = frozenset({"output_key"})
_GOOGLE_KEY = re.compile(r"AIza[0-9A-Za-z\-_]{35}")
_MIN_ENV_SECRET = 6
RUNNER_OPTIONS_KEY = "runner_options"
"""The file's key for the Runner's keyword options (not an agent key)."""
TOOLS_KEY = "tools"
"""The file's key for the agent's tools, by importable name (``spawn_agent``'s third argument)."""
_MAX_NAME = 256
# Runner options each command sets itself (the console streams text, ``run --json`` streams events).
_COMMAND_OPTIONS = frozenset({"streaming_mode"})
_HARM_PREFIX = "harm_category_"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFile:
    """A validated agent file: what ``spawn_agent`` and the ``Runner`` get."""

    name: str
    """The agent's name."""
    config: dict[str, Any]
    """The agent config, as ``spawn_agent`` takes it (without ``tools`` and ``runner_options``)."""
    tools: tuple[Any, ...] = ()
    """The tools the file names, loaded."""
    runner_options: dict[str, Any] = field(default_factory=dict)
    """The Runner's keyword options (already checked by the Runner's own validation)."""


def read_agent_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an agent file as a JSON object (nothing validated yet).

    Raises:
        ConfigError: ``config_not_found``, ``file_too_large``, ``invalid_json`` (``details``: ``line``,
            ``column``), ``invalid_value`` (not a JSON object).
    """
    where = {"path": str(path)}
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("agent file not found", reason="config_not_found", details=where) from None
    except OSError as exc:
        raise ConfigError(
            "agent file cannot be read", reason="config_not_found", details={**where, "error": type(exc).__name__}
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(
            "agent file is too large", reason="file_too_large", details={**where, "max_bytes": MAX_FILE_BYTES}
        )
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("agent file is not UTF-8", reason="invalid_json", details=where) from None
    except json.JSONDecodeError as exc:
        # The position only: the decoder's message may quote the file's text.
        raise ConfigError(
            "agent file is not valid JSON",
            reason="invalid_json",
            details={**where, "line": exc.lineno, "column": exc.colno},
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "an agent file holds one JSON object", reason="invalid_value", details={**where, "key": "config"}
        )
    return data


def find_secret(config: Any, environ: Mapping[str, str] | None = None) -> str | None:
    """The dotted path of the first secret in ``config``, or ``None``.

    A secret is a secret-named key (outside JSON Schemas), a string shaped like a Google API key, or a string
    holding the value of one of the environment's key variables (``GEMINI_API_KEY``...).
    """
    env = os.environ if environ is None else environ
    env_values = [v for v in (env.get(name, "") for name in SECRET_ENV_VARS) if len(v) >= _MIN_ENV_SECRET]
    return _walk(config, "", env_values, in_schema=False)


def _walk(value: Any, path: str, env_values: list[str], *, in_schema: bool) -> str | None:
    if isinstance(value, str):
        if _GOOGLE_KEY.search(value) or any(secret in value for secret in env_values):
            return path or "config"
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if (
                not in_schema
                and isinstance(key, str)
                and is_secret_key(key)
                and not (path == "" and key in _NOT_SECRET)
            ):
                return child
            found = _walk(item, child, env_values, in_schema=in_schema or child in _SCHEMA_PATHS)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _walk(item, f"{path}[{index}]", env_values, in_schema=in_schema)
            if found is not None:
                return found
    return None


def check_runner_options(value: Any) -> dict[str, Any]:
    """Check a file's ``runner_options`` with the Runner's own validation; return them as keyword options.

    Raises:
        ConfigError: ``invalid_value`` (not an object; ``streaming_mode``, which the command sets), and every
            reason of :func:`~adk_actors.agents.turn.options.runner_options` (``unknown_key``, ``invalid_value``...),
            with ``details["key"]`` prefixed ``runner_options.``.
    """
    if not isinstance(value, Mapping):
        raise ConfigError(
            "runner_options is an object of Runner options", reason="invalid_value", details={"key": RUNNER_OPTIONS_KEY}
        )
    options = dict(value)
    chosen = sorted(_COMMAND_OPTIONS & options.keys())
    if chosen:
        raise ConfigError(
            f"{chosen[0]} is chosen by the command, not by the agent file",
            reason="invalid_value",
            details={"key": f"{RUNNER_OPTIONS_KEY}.{chosen[0]}"},
        )
    try:
        runner_options(**options)
    except AdkError as err:
        details = dict(err.details)
        if isinstance(details.get("key"), str):
            details["key"] = f"{RUNNER_OPTIONS_KEY}.{details['key']}"
        raise type(err)(err.message, reason=err.reason, details=details) from None
    return options


def load_tools(value: Any) -> tuple[Any, ...]:
    """Import the tools a file's ``tools`` list names (see the module docstring).

    Raises:
        ConfigError: ``invalid_value`` (not a list of names), ``invalid_tool`` (``details``: ``key`` — the list
            position — and ``tool``, the name; never the import error's text).
        ToolError, SchemaError: a plain function that ``FunctionTool`` cannot wrap.
    """
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise ConfigError(
            "tools is a list of importable names (pkg.module:attr)", reason="invalid_value", details={"key": TOOLS_KEY}
        )
    tools = []
    for index, name in enumerate(value):
        where = {"key": f"{TOOLS_KEY}[{index}]", "tool": name[:_MAX_NAME]}
        module, colon, attr = name.partition(":")
        if not colon:
            module, _, attr = name.rpartition(".")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception:
            raise ConfigError("the tool cannot be imported", reason="invalid_tool", details=where) from None
        if isinstance(obj, Tool):
            tools.append(obj)
        elif callable(obj):
            tools.append(FunctionTool(obj))
        else:
            raise ConfigError("a tool name must name a tool or a function", reason="invalid_tool", details=where)
    return tuple(tools)


def _short_safety_names(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``HARM_CATEGORY_X`` safety categories spelled ``x`` (thresholds are case-insensitive)."""

    def fixed(settings: Any) -> Any:
        if not isinstance(settings, list):
            return settings
        out = []
        for item in settings:
            category = item.get("category") if isinstance(item, Mapping) else None
            if isinstance(category, str) and category.lower().startswith(_HARM_PREFIX):
                item = {**item, "category": category[len(_HARM_PREFIX) :].lower()}
            out.append(item)
        return out

    config = dict(config)
    if "safety_settings" in config:
        config["safety_settings"] = fixed(config["safety_settings"])
    generation = config.get("generation_config")
    if isinstance(generation, Mapping) and "safety_settings" in generation:
        config["generation_config"] = {**generation, "safety_settings": fixed(generation["safety_settings"])}
    return config


def check_agent_config(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> AgentFile:
    """Validate an agent file's object exactly as ``spawn_agent`` and the ``Runner`` would.

    Raises:
        ConfigError: ``secret_in_config`` (``details["key"]`` is the path), ``missing_key`` (no ``name``), every
            reason of :func:`~adk_actors.agents.spec.build_spec` (``unknown_key``, ``invalid_value``...), of
            :func:`load_tools` and :func:`check_runner_options`.
        AgentError: ``invalid_agent_name``, ``reserved_agent_name``...
        ToolError: ``duplicate_tool_name``...
        SchemaError: an invalid input, output or tool schema.
    """
    secret = find_secret(config, environ)
    if secret is not None:
        raise ConfigError(
            "secrets do not belong in an agent file; keep GEMINI_API_KEY in the environment",
            reason="secret_in_config",
            details={"key": secret},
        )
    if "name" not in config:
        raise ConfigError("an agent file names its agent", reason="missing_key", details={"key": "name"})
    name = config["name"]
    agent = _short_safety_names({k: v for k, v in config.items() if k not in (TOOLS_KEY, RUNNER_OPTIONS_KEY)})
    tools = load_tools(config[TOOLS_KEY]) if TOOLS_KEY in config else ()
    stand_in = None
    if agent.get("session_id") is not None:
        # The running node passes its own shared store; for validation any shared store stands in.
        from adk_actors.sessions.actor import ActorSessionService

        stand_in = ActorSessionService()
    build_spec(name, agent, tools, session_service=stand_in)
    options = check_runner_options(config[RUNNER_OPTIONS_KEY]) if RUNNER_OPTIONS_KEY in config else {}
    return AgentFile(name=name, config=agent, tools=tools, runner_options=options)


def load_agent_file(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> AgentFile:
    """Read and validate an agent file.

    Raises:
        ConfigError, AgentError, SchemaError: see :func:`read_agent_file` and :func:`check_agent_config`.
    """
    return check_agent_config(read_agent_file(Path(path)), environ)
