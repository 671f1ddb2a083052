"""The built-in plugins: ordinary plugin classes, named in a descriptor like any other.

* :class:`GlobalInstruction` (``adk_actors.plugins.builtins:GlobalInstruction``, mode ``intervene``): adds one
  bounded instruction to every model request.
* :class:`ContextFilter` (``intervene``): keeps the model history to some roles and the last messages,
  deterministically, never splitting a function call from its response.
* :class:`ReflectRetry` (``intervene``): turns a failed tool call into model-visible retry guidance, a bounded
  number of times per tool and invocation, without the raw failure.
* :class:`MetadataLogger` (``observe``): one content-free structlog record per hook.

Hook contexts (every value read-only and secret-pruned). Every hook gets::

    {"hook", "plugin_id", "run_id", "invocation_id", "app_name", "user_id", "session_id", "agent"}

plus, per hook:

=====================================================  ================================================================
``on_user_message``                                    ``user_content`` (the user's message: ``str`` or content map)
``after_run``, ``after_agent``                         ``output`` (``str`` or content map)
``before_model``                                       ``request``: ``{"history", "instructions", "tools": [names],
                                                       "model"}``; ``history`` is ``[{"role": "user"|"model",
                                                       "content": <content map>}, ...]``
``after_model``                                        ``response``: ``{"text", "content", "function_calls",
                                                       "finish_reason"}``
``on_model_error``, ``on_agent_error``,                ``error``: ``{"reason", "type"}`` (structural, never text)
``on_run_error``
``before_tool``                                        ``tool``, ``call_id``, ``args``
``after_tool``                                         ``tool``, ``call_id``, ``args``, ``result`` (the function-
                                                       response object), ``tool_failures``
``on_tool_error``                                      ``tool``, ``call_id``, ``args``, ``error``, ``tool_failures``
``on_event``                                           ``event`` (``Event.to_dict()``)
=====================================================  ================================================================

``tool_failures`` is the number of earlier failures of that tool in the invocation. The legacy ``on_error`` gets
the phase hook's context plus ``phase`` (``model``, ``tool``, ``agent``, ``run``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.errors import ConfigError
from adk_actors.logs import get_logger
from adk_actors.plugins.hooks import HOOKS, thaw

__all__ = ["ContextFilter", "GlobalInstruction", "MetadataLogger", "ReflectRetry"]

MAX_INSTRUCTION_BYTES = 64 * 1024
"""Longest global instruction, UTF-8 bytes."""
MAX_RETRIES = 100
"""Largest ``max_retries`` of :class:`ReflectRetry`."""

_TAG_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _invalid(message: str, key: str) -> ConfigError:
    return ConfigError(message, reason="invalid_value", details={"key": key})


def _only(config: Mapping[str, Any], keys: frozenset[str]) -> None:
    unknown = [k for k in config if k not in keys]
    if unknown:
        raise ConfigError("unknown plugin config key", reason="unknown_key", details={"count": len(unknown)})


class GlobalInstruction:
    """Adds ``instruction`` before (``position="prepend"``, the default) or after (``"append"``) the request's
    own instructions, on every model call: ``before_model`` amends ``{"instructions": ...}``.

    Config: ``instruction`` (a non-empty ``str`` of at most 64 KiB), ``position``.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.check_config(config)
        self.instruction: str = config["instruction"]
        self.position: str = config.get("position", "prepend")

    @staticmethod
    def check_config(config: Mapping[str, Any]) -> None:
        """Raises ``ConfigError`` (``invalid_value`` / ``unknown_key``) for a malformed config."""
        _only(config, frozenset({"instruction", "position"}))
        text = config.get("instruction")
        if not isinstance(text, str) or not text or len(text.encode("utf-8", "replace")) > MAX_INSTRUCTION_BYTES:
            raise _invalid("instruction must be a non-empty string of at most 64 KiB", "instruction")
        if config.get("position", "prepend") not in ("prepend", "append"):
            raise _invalid("position must be prepend or append", "position")

    def before_model(self, context: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        current = context["request"].get("instructions") or ""
        if not isinstance(current, str) or not current:
            return ("amend", {"instructions": self.instruction})
        parts = [self.instruction, current] if self.position == "prepend" else [current, self.instruction]
        return ("amend", {"instructions": "\n\n".join(parts)})


def _has(entry: Mapping[str, Any], part_type: str) -> bool:
    content = entry.get("content")
    parts = content.get("parts", ()) if isinstance(content, Mapping) else ()
    return any(isinstance(p, Mapping) and p.get("type") == part_type for p in parts)


def _units(history: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """Indices of ``history`` grouped so a function call and its responses are one unit: an entry holding
    function responses joins the entry before it when that one holds function calls."""
    units: list[list[int]] = []
    for index, entry in enumerate(history):
        if units and _has(entry, "function_response") and _has(history[units[-1][-1]], "function_call"):
            units[-1].append(index)
        else:
            units.append([index])
    return units


class ContextFilter:
    """Keeps the model history to ``roles`` (default both) and to its newest ``max_messages`` entries (default
    all): ``before_model`` amends ``{"history": ...}``.

    Deterministic, and never splits a tool exchange: a function call and the entry answering it are kept or
    dropped together (only when every role in them is kept). The history is then cut into exchanges (a user
    message and everything up to the next one) and the newest exchanges that fit in ``max_messages`` entries are
    kept, always at least the newest one, whose tool calls the model is in the middle of. The kept history
    starts with a user message. When nothing would change, or nothing would be left, the request goes on
    unchanged.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.check_config(config)
        self.roles = frozenset(config.get("roles") or ("user", "model"))
        self.max_messages: int | None = config.get("max_messages")

    @staticmethod
    def check_config(config: Mapping[str, Any]) -> None:
        """Raises ``ConfigError`` (``invalid_value`` / ``unknown_key``) for a malformed config."""
        _only(config, frozenset({"roles", "max_messages"}))
        roles = config.get("roles", ("user", "model"))
        if not isinstance(roles, list | tuple) or not roles or any(r not in ("user", "model") for r in roles):
            raise _invalid("roles is a non-empty list of user / model", "roles")
        limit = config.get("max_messages")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise _invalid("max_messages is a positive integer", "max_messages")

    def select(self, history: Sequence[Mapping[str, Any]]) -> list[int]:
        """The indices of ``history`` to keep, in order."""
        exchanges: list[list[int]] = []
        for unit in _units(history):
            if not all(history[i].get("role") in self.roles for i in unit):
                continue
            if history[unit[0]].get("role") == "user":
                exchanges.append(list(unit))
            elif exchanges:  # a model turn before the first user message is dropped
                exchanges[-1].extend(unit)
        if self.max_messages is not None:
            kept: list[list[int]] = []
            total = 0
            for exchange in reversed(exchanges):
                if kept and total + len(exchange) > self.max_messages:
                    break
                kept.append(exchange)
                total += len(exchange)
            exchanges = kept[::-1]
        return [i for exchange in exchanges for i in exchange]

    def before_model(self, context: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        history = context["request"].get("history") or ()
        keep = self.select(history)
        if not keep or len(keep) == len(history):
            return None
        return ("amend", {"history": [thaw(history[i]) for i in keep]})


def _failure_reason(value: Any) -> str | None:
    """The reason tag of a failed function response ``{"error": {"reason": ...}}``, else ``None``."""
    if not isinstance(value, Mapping):
        return None
    error = value.get("error")
    if not isinstance(error, Mapping):
        return None
    reason = error.get("reason")
    return reason if isinstance(reason, str) and _TAG_RE.fullmatch(reason) else "tool_error"


class ReflectRetry:
    """Turns a failed tool call into guidance the model can act on: ``after_tool`` (when the result is a failed
    function response ``{"error": {...}}``) and ``on_tool_error`` return ``{"error": {"reason": <tag>},
    "guidance": "The tool call failed (<tag>); check the arguments and try again."}`` — the reason tag only,
    never the raw failure. After ``max_retries`` (default 2) earlier failures of the same tool in the invocation
    (``context["tool_failures"]``) it steps aside and the failure goes to the model as it is.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.check_config(config)
        self.max_retries: int = config.get("max_retries", 2)

    @staticmethod
    def check_config(config: Mapping[str, Any]) -> None:
        """Raises ``ConfigError`` (``invalid_value`` / ``unknown_key``) for a malformed config."""
        _only(config, frozenset({"max_retries"}))
        value = config.get("max_retries", 2)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
            raise _invalid(f"max_retries is an integer from 0 to {MAX_RETRIES}", "max_retries")

    def _guide(self, reason: str | None, context: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        failures = context.get("tool_failures", 0)
        if reason is None or not isinstance(failures, int) or failures >= self.max_retries:
            return None
        guidance = f"The tool call failed ({reason}); check the arguments and try again."
        return ("return", {"error": {"reason": reason}, "guidance": guidance})

    def after_tool(self, context: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        return self._guide(_failure_reason(context.get("result")), context)

    def on_tool_error(self, context: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        error = context.get("error")
        return self._guide(_failure_reason({"error": error}) if isinstance(error, Mapping) else "tool_error", context)


_METADATA_IDS = ("plugin_id", "run_id", "invocation_id", "agent", "call_id")


def _tag_of(value: Any) -> str | None:
    return value if isinstance(value, str) and _TAG_RE.fullmatch(value) else None


class MetadataLogger:
    """Logs structlog records ``adk_actors.plugins.metadata`` with content-free metadata: the hook, the run,
    invocation and agent ids, the plugin id, the tool name and call id, reason tags (an error's reason, a model
    answer's finish reason) and, for ``on_event``, the event's id and flags. Never content, arguments, results,
    instructions or configuration. Use it with ``mode="observe"``. It declares ``metadata_only``, so the Runner
    hands it metadata-only contexts (cheap: no history or content is copied for it).

    ``config={"detail": "run"}`` (the default) logs the run's lifecycle: one record when it starts, one when it
    ends (``after_run`` or ``on_run_error``) and one per model, tool or agent error. ``"hooks"`` logs every hook
    (about a dozen records per text turn: each costs a log write, see docs/PERFORMANCE.md).
    """

    metadata_only = True
    DETAILS = ("run", "hooks")
    RUN_HOOKS = ("before_run", "after_run", "on_model_error", "on_tool_error", "on_agent_error", "on_run_error")
    """The hooks of ``detail="run"``."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.log = get_logger("adk_actors.plugins.metadata")

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> None:
        if config.get("detail", "run") not in cls.DETAILS or set(config) - {"detail"}:
            raise ConfigError("the metadata logger's config is {'detail': 'run' | 'hooks'}", reason="invalid_value")

    @classmethod
    def hooks_for(cls, config: Mapping[str, Any]) -> tuple[str, ...]:
        return HOOKS if config.get("detail", "run") == "hooks" else cls.RUN_HOOKS

    def _record(self, context: Mapping[str, Any]) -> None:
        fields: dict[str, Any] = {"hook": context.get("hook")}
        fields.update({key: context[key] for key in _METADATA_IDS if isinstance(context.get(key), str)})
        if isinstance(context.get("tool"), str):
            fields["tool"] = context["tool"]
        error = context.get("error")
        if isinstance(error, Mapping) and _tag_of(error.get("reason")):
            fields["reason"] = error["reason"]
        response = context.get("response")
        if isinstance(response, Mapping) and _tag_of(response.get("finish_reason")):
            fields["finish_reason"] = response["finish_reason"]
        event = context.get("event")
        if isinstance(event, Mapping):
            fields.update(
                event_id=event.get("id"), partial=bool(event.get("partial")), is_final=bool(event.get("is_final"))
            )
        self.log.info("adk_actors.plugins.metadata", **fields)

    on_user_message = _record
    before_run = _record
    after_run = _record
    before_agent = _record
    after_agent = _record
    before_model = _record
    after_model = _record
    on_model_error = _record
    before_tool = _record
    after_tool = _record
    on_tool_error = _record
    on_event = _record
    on_agent_error = _record
    on_run_error = _record
    on_error = _record
