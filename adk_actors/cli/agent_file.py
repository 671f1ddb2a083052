"""Agent config files: checked JSON shared by ``adk config validate``, ``adk run`` and ``adk console``.

A file holds one agent config exactly as :func:`adk_actors.spawn_agent` takes it (``docs/AGENTS.md``) plus a
required ``name``. It is validated by the same code as a Python config (:func:`~adk_actors.agents.spec.build_spec`,
which runs the provider's ``validate_config``), after one rule of its own: **no secrets in the file**. A
secret-named key anywhere outside a JSON Schema (``api_key``, ``token``, ``client_secret``...), a string shaped
like a Google API key, or the value of a key variable of the environment fails with
``ConfigError(reason="secret_in_config", details={"key": <dotted path>})`` — the value itself is never reported.
Keep ``GEMINI_API_KEY`` in the environment.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adk_actors.agents.spec import build_spec
from adk_actors.errors import ConfigError
from adk_actors.logs import SECRET_ENV_VARS
from adk_actors.secrets import is_secret_key

__all__ = ["MAX_FILE_BYTES", "check_agent_config", "find_secret", "load_agent_file", "read_agent_file"]

MAX_FILE_BYTES = 1024 * 1024
"""Largest agent file read (a config, not a data set)."""

# Keys whose values are JSON Schemas: their property names describe data, not credentials.
_SCHEMA_PATHS = frozenset({"input_schema", "output_schema", "response_schema", "generation_config.response_schema",
                           "generation_config.response_json_schema"})
# Top-level agent keys that look secret-named to the generic rule but are not ("output_key" names a state key).
_NOT_SECRET = frozenset({"output_key"})
_GOOGLE_KEY = re.compile(r"AIza[0-9A-Za-z\-_]{35}")
_MIN_ENV_SECRET = 6


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
        raise ConfigError("agent file cannot be read", reason="config_not_found",
                          details={**where, "error": type(exc).__name__}) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError("agent file is too large", reason="file_too_large",
                          details={**where, "max_bytes": MAX_FILE_BYTES})
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("agent file is not UTF-8", reason="invalid_json", details=where) from None
    except json.JSONDecodeError as exc:
        # The position only: the decoder's message may quote the file's text.
        raise ConfigError("agent file is not valid JSON", reason="invalid_json",
                          details={**where, "line": exc.lineno, "column": exc.colno}) from None
    if not isinstance(data, dict):
        raise ConfigError("an agent file holds one JSON object", reason="invalid_value",
                          details={**where, "key": "config"})
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
            if not in_schema and isinstance(key, str) and is_secret_key(key) \
                    and not (path == "" and key in _NOT_SECRET):
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


def check_agent_config(config: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                       ) -> tuple[str, dict[str, Any]]:
    """Validate an agent file's object exactly as ``spawn_agent`` would; return ``(name, config)``.

    Raises:
        ConfigError: ``secret_in_config`` (``details["key"]`` is the path), ``missing_key`` (no ``name``), and
            every reason of :func:`~adk_actors.agents.spec.build_spec` (``unknown_key``, ``invalid_value``...).
        AgentError: ``invalid_agent_name``, ``reserved_agent_name``...
        SchemaError: an invalid input or output schema.
    """
    secret = find_secret(config, environ)
    if secret is not None:
        raise ConfigError("secrets do not belong in an agent file; keep GEMINI_API_KEY in the environment",
                          reason="secret_in_config", details={"key": secret})
    if "name" not in config:
        raise ConfigError("an agent file names its agent", reason="missing_key", details={"key": "name"})
    name = config["name"]
    stand_in = None
    if config.get("session_id") is not None:
        # The running node passes its own shared store; for validation any shared store stands in.
        from adk_actors.sessions.actor import ActorSessionService

        stand_in = ActorSessionService()
    build_spec(name, config, session_service=stand_in)
    return name, dict(config)


def load_agent_file(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None,
                    ) -> tuple[str, dict[str, Any]]:
    """Read and validate an agent file; return ``(name, config)``.

    Raises:
        ConfigError, AgentError, SchemaError: see :func:`read_agent_file` and :func:`check_agent_config`.
    """
    return check_agent_config(read_agent_file(Path(path)), environ)
