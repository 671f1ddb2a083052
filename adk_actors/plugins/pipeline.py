"""What one plugin's hook result means for the turn: pure decisions, on the engine's side.

The engine runs a hook's plugins in pipeline order (:meth:`~adk_actors.plugins.descriptors.PluginPipeline.for_hook`)
and turns each answer into a :class:`PluginStep` with :func:`interpret`:

* ``continue``: go on with the next plugin (``failure`` records a plugin that failed under the ``open`` policy);
* ``amend``: go on with ``value`` (already validated by :func:`check_value`) in place of the hook's subject: later
  plugins and the agent's own callback see the amended value;
* ``return``: stop the phase with ``value`` as its result; later plugins and the agent's callback are skipped;
* ``halt``: stop the run with ``error``, a :class:`~adk_actors.errors.PluginError` (``plugin_halted``, or the
  failure's reason under the ``closed`` policy) carrying structural details only.

Rules: an ``observe`` plugin may only carry on (anything else is the failure ``observe_only``); the notification
hooks (:data:`~adk_actors.plugins.hooks.NOTIFY_ONLY`) are best-effort, so their intervention results are ignored
and their failures never stop anything; an amended or returned value that does not fit the hook is the failure
``invalid_plugin_result``. A failure follows the plugin's ``failure_policy``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.content.model import Content
from adk_actors.content.validation import check_text
from adk_actors.errors import AdkError, AskTimeout, PluginError, ValidationError
from adk_actors.events.event import EVENT_KEYS, Event
from adk_actors.plugins.descriptors import PluginDescriptor
from adk_actors.plugins.hooks import NOTIFY_ONLY

__all__ = [
    "EVENT_KEYS",
    "PluginStep",
    "amend_event",
    "check_value",
    "interpret",
    "policy_failure",
]

"""The keys of an event dict (``Event.to_dict()``); an ``on_event`` amendment may name no other."""

_TAG_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_ROLES = ("user", "model")


@dataclass(frozen=True)
class PluginStep:
    """What the engine does after one plugin's hook."""

    kind: str
    """``"continue"``, ``"amend"``, ``"return"`` or ``"halt"``."""
    value: Any = None
    """The validated amended or returned value (``amend`` / ``return``)."""
    failure: dict[str, Any] | None = None
    """``{"plugin", "hook", "reason"}`` when the plugin failed (under either policy), for metrics and the log."""
    error: AdkError | None = None
    """The error that stops the run (``halt``)."""


_CONTINUE = PluginStep("continue")


def _reason(value: Any, default: str) -> str:
    return value if isinstance(value, str) and _TAG_RE.fullmatch(value) else default


def _job_reason(error: AdkError) -> str:
    if isinstance(error, AskTimeout) or error.reason == "job_timeout":
        return "plugin_timeout"
    if error.reason == "memory_limit":
        return "memory_limit"
    return "plugin_failed"


def policy_failure(descriptor: PluginDescriptor, hook: str, reason: str) -> PluginStep:
    """The step for a failed plugin: ``continue`` with the failure recorded under ``open`` (and on the notification
    hooks), ``halt`` with ``PluginError(reason)`` under ``closed``.

    The engine calls this itself for a failure it finds after :func:`interpret` (for example an ``on_event``
    amendment that :func:`amend_event` refuses).
    """
    record = {"plugin": descriptor.id, "hook": hook, "reason": reason}
    if descriptor.failure_policy == "open" or hook in NOTIFY_ONLY:
        return PluginStep("continue", failure=record)
    error = PluginError("a plugin failed", reason=reason, details={"plugin": descriptor.id, "hook": hook})
    return PluginStep("halt", failure=record, error=error)


def interpret(
    descriptor: PluginDescriptor,
    hook: str,
    result: Any,
    error: AdkError | None,
    *,
    event: dict[str, Any] | None = None,
) -> PluginStep:
    """Decide what one plugin's answer to ``hook`` means.

    Args:
        descriptor: The plugin.
        hook: The hook that ran.
        result: The job's value: :func:`~adk_actors.plugins.hooks.run_plugin_hook`'s normalized dict.
        error: The job's error instead (``AskTimeout`` / ``job_timeout`` → ``plugin_timeout``,
            ``memory_limit``, anything else → ``plugin_failed``).
        event: For ``on_event``, the original event dict: an amendment is then applied with :func:`amend_event`
            and the step's value is the whole amended event. Without it only the amendment's shape is checked.
    """
    if error is not None:
        return policy_failure(descriptor, hook, _job_reason(error))
    action = result.get("action") if isinstance(result, Mapping) else None
    if action == "continue":
        return _CONTINUE
    if action == "failed":
        return policy_failure(descriptor, hook, _reason(result.get("reason"), "plugin_failed"))
    if action not in ("amend", "return", "halt"):
        return policy_failure(descriptor, hook, "invalid_plugin_result")
    if descriptor.mode == "observe":
        return policy_failure(descriptor, hook, "observe_only")
    if hook in NOTIFY_ONLY:
        return _CONTINUE
    if action == "halt":
        cause = _reason(result.get("reason"), "unspecified")
        details = {"plugin": descriptor.id, "hook": hook, "cause": cause}
        return PluginStep("halt", error=PluginError("a plugin halted the run", reason="plugin_halted", details=details))
    try:
        value = check_value(hook, action, result.get("value"))
        if hook == "on_event" and event is not None:
            value = amend_event(event, value)
    except ValidationError:
        return policy_failure(descriptor, hook, "invalid_plugin_result")
    return PluginStep(action, value=value)


def _invalid(message: str, hook: str, kind: str, **details: Any) -> ValidationError:
    return ValidationError(message, reason="invalid_plugin_result", details={"hook": hook, "kind": kind, **details})


def _content(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError("content must be a content map", reason="invalid_content")
    return Content.from_dict(value).to_dict()


def _output(value: Any, hook: str, kind: str) -> str | dict[str, Any]:
    """A ``str`` or a content map (an agent's output, a model answer, a user message)."""
    if isinstance(value, str):
        return check_text(value, "value")
    return _content(value)


def _object(value: Any, hook: str, kind: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid("the value must be a JSON object", hook, kind)
    copied: dict[str, Any] = copy_json(value, field="value")[0]
    return copied


def _history(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise ValidationError("history must be a non-empty list of entries", reason="invalid_value")
    entries = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or set(entry) != {"role", "content"} or entry["role"] not in _ROLES:
            raise ValidationError(
                "a history entry is {role: user|model, content}", reason="invalid_value", details={"entry": index}
            )
        entries.append({"role": entry["role"], "content": _content(entry["content"])})
    return entries


def _model_request(value: Any, hook: str, kind: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not set(value) <= {"history", "instructions"}:
        raise _invalid("a before_model amendment is {history?, instructions?}", hook, kind)
    out: dict[str, Any] = {}
    if "history" in value:
        out["history"] = _history(value["history"])
    if "instructions" in value:
        out["instructions"] = check_text(value["instructions"], "instructions")
    return out


_Check = Callable[[Any, str, str], Any]


def _event_amendment(value: Any, hook: str, kind: str) -> dict[str, Any]:
    """The shape of an ``on_event`` amendment (event keys only, valid content); :func:`amend_event` checks it
    against the original."""
    if not isinstance(value, dict) or not set(value) <= EVENT_KEYS:
        raise _invalid("an event amendment is an event map", hook, kind)
    copied = _object(value, hook, kind)
    if copied.get("content") is not None:
        copied["content"] = _content(copied["content"])
    return copied


_CHECKS: dict[tuple[str, str], _Check] = {
    ("on_user_message", "amend"): _output,
    ("before_run", "return"): _output,
    ("before_agent", "return"): _output,
    ("after_agent", "amend"): _output,
    ("after_agent", "return"): _output,
    ("before_model", "amend"): _model_request,
    ("before_model", "return"): _output,
    ("after_model", "amend"): _output,
    ("after_model", "return"): _output,
    ("on_model_error", "return"): _output,
    ("before_tool", "amend"): _object,
    ("before_tool", "return"): _object,
    ("after_tool", "amend"): _object,
    ("after_tool", "return"): _object,
    ("on_tool_error", "return"): _object,
    ("on_event", "amend"): _event_amendment,
}
"""What each hook accepts: ``(hook, kind)`` → validator; a pair not listed is refused."""


def check_value(hook: str, kind: str, value: Any) -> Any:
    """Validate an amended (``kind="amend"``) or returned (``"return"``) value for ``hook`` and return a fresh copy.

    ``before_model`` amend: ``{"history"?: [{"role": "user"|"model", "content": <content map>}, ...],
    "instructions"?: str}``; a model answer (``before_model`` / ``after_model`` / ``on_model_error`` return,
    ``after_model`` amend), a user message (``on_user_message`` amend) and an agent's output (``before_run`` /
    ``before_agent`` return, ``after_agent`` amend / return): a ``str`` or a content map; ``before_tool`` amend: the
    arguments object; a tool result (``before_tool`` / ``after_tool`` / ``on_tool_error`` return, ``after_tool``
    amend): a JSON object; ``on_event`` amend: an event map (checked against the original by :func:`amend_event`).

    Raises:
        ValidationError: the hook does not take that kind of value, or the value does not fit (reasons
            ``invalid_plugin_result``, ``invalid_value``, content reasons).
    """
    if (hook, kind) not in _CHECKS:
        raise _invalid("this hook does not take that result", hook, kind)
    return _CHECKS[(hook, kind)](value, hook, kind)


def amend_event(original: dict[str, Any], amended: Any) -> dict[str, Any]:
    """Apply an ``on_event`` amendment: only the content of a partial (streaming) event may change.

    ``amended`` is the whole event map or a part of it; every key it names other than ``content`` must keep the
    original's value, and so must ``content`` unless the original is partial and not final. Identity (``id``,
    ``invocation_id``, ``author``, ``timestamp``, ``branch``), ``actions`` (state, pauses, continuations,
    transfers), ``partial`` / ``is_final``, ``error`` and provider metadata always stay. The event model has no
    free metadata map, so there is nothing else a plugin may change.

    Returns:
        The amended event map, validated by :meth:`Event.from_dict`.

    Raises:
        ValidationError: the amendment touches a kept field (reason ``event_field_locked``, ``details["field"]``)
            or the result is not a valid event.
    """
    value = _event_amendment(amended, "on_event", "amend")
    open_content = original.get("partial") is True and original.get("is_final") is not True
    for key, item in value.items():
        if key == "content" and open_content and item is not None:
            continue
        if key not in original or original[key] != item:
            raise ValidationError(
                "an event amendment may change only a partial event's content",
                reason="event_field_locked",
                details={"field": key},
            )
    merged = {**original, **({"content": value["content"]} if "content" in value else {})}
    return Event.from_dict(merged).to_dict()
