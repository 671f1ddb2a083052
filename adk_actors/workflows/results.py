"""The workflow action-result contract: what an action returns, its JSON form, and its normalization.

An action is called ``fn(state)`` or ``fn(state, context)`` and returns one of::

    Ok(delta)                          continue; no output (the next input is None)
    Output(value, delta)               continue; ``value`` becomes the next step's / successor's context input
    Stop(value, delta)                 finish the workflow with ``value`` (explicit terminal)
    Complete(value, delta)             legacy terminal, same as Stop
    Route(node, delta)                 graph only: go to a declared node next
    Transfer(member, input, delta)     transfer only: hand ownership to another member with ``input``
    Pause(reason, summary, delta)      graph and sequential: commit ``delta``, then wait for a resume input
    ActionFailed(reason, details)      the action failed ({error, Reason} in the reference)

Every delta is a JSON-safe dict merged into the workflow state (top-level keys, last write wins); values are
JSON-safe. Results cross processes in their JSON form (:meth:`Output.to_dict` and friends)::

    {"ok": delta}
    {"output": value, "delta": delta}          {"stop": ...} / {"complete": ...} alike
    {"route": node, "delta": delta}
    {"transfer": member, "input": value, "delta": delta}
    {"pause": reason, "summary": text, "delta": delta}
    {"error": reason, "details": {...}}

In a dict form ``delta`` (default ``{}``), ``input`` (default ``None``), ``summary`` (default ``""``) and
``details`` (default ``{}``) may be omitted; any other key makes the dict an invalid result.

The worker pool projects a returned dataclass onto a dict of its fields, which would lose the tag, so a
coordinator runs actions through :func:`run_callable` in the worker: it calls the user function and returns the
tagged JSON form, which :func:`normalize_result` turns back into a dataclass on the coordinator's side.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from adk_actors.content.json_values import copy_json
from adk_actors.errors import MAX_REASON_CHARS as _MAX_REASON_CHARS
from adk_actors.errors import AdkError, ValidationError, WorkflowError, bounded_reason, json_safe
from adk_actors.runtime.callables import CallableRef

__all__ = [
    "ACTION_KINDS",
    "MAX_REASON_CHARS",
    "MAX_SUMMARY_CHARS",
    "MAX_VALUE_BYTES",
    "VALUE_KINDS",
    "ActionFailed",
    "ActionResult",
    "Complete",
    "Ok",
    "Output",
    "Pause",
    "Result",
    "Route",
    "Stop",
    "Transfer",
    "normalize_result",
    "run_callable",
]

MAX_VALUE_BYTES: Final = 16 * 1024 * 1024
"""Bound on one delta or value in canonical JSON bytes (a checkpoint holds the whole state)."""
MAX_REASON_CHARS: Final = _MAX_REASON_CHARS
"""Bound on a pause or failure reason tag (``adk_actors.errors.MAX_REASON_CHARS``)."""
MAX_SUMMARY_CHARS: Final = 4096
"""Bound on a pause summary."""
ACTION_KINDS: Final = frozenset({"action", "decision"})
"""Task kinds whose callable returns an action result."""
VALUE_KINDS: Final = frozenset({"route", "until", "select", "done", "prompt", "args"})
"""Task kinds whose callable returns a plain JSON value (fed back as ``Output(value, {})``)."""


@dataclass(frozen=True, slots=True)
class Ok:
    """Continue without an output."""

    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"ok": delta}``."""
        return {"ok": self.delta}


@dataclass(frozen=True, slots=True)
class Output:
    """Continue; ``value`` becomes the next step's (or successor's, or join's) ``context["input"]``."""

    value: Any
    """The output, JSON-safe."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"output": value, "delta": delta}``."""
        return {"output": self.value, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class Stop:
    """Finish the workflow with ``value`` (inside a parallel or fork branch: the branch's output)."""

    value: Any
    """The workflow's output, JSON-safe."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"stop": value, "delta": delta}``."""
        return {"stop": self.value, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class Complete:
    """Legacy terminal result, handled exactly like :class:`Stop`."""

    value: Any
    """The workflow's output, JSON-safe."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"complete": value, "delta": delta}``."""
        return {"complete": self.value, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class Route:
    """Graph workflows only: continue at the declared node ``node`` (its input is ``None``)."""

    node: str
    """A node id declared by the graph; anything else fails the workflow with ``undeclared_route``."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"route": node, "delta": delta}``."""
        return {"route": self.node, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class Transfer:
    """Transfer workflows only: hand ownership to ``member`` with ``input`` as its context input."""

    member: str
    """A declared member name; anything else fails the workflow with ``undeclared_member``."""
    input: Any = None
    """The next member's ``context["input"]``, JSON-safe."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"transfer": member, "input": input, "delta": delta}``."""
        return {"transfer": self.member, "input": self.input, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class Pause:
    """Commit ``delta`` and pause until resumed; the resume input replaces this node's output."""

    reason: str
    """A short tag such as ``"human_approval"``."""
    summary: str = ""
    """What the person resuming the workflow is asked, bounded."""
    delta: dict[str, Any] = field(default_factory=dict)
    """State changes (top-level keys), committed before the pause."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"pause": reason, "summary": summary, "delta": delta}``."""
        return {"pause": self.reason, "summary": self.summary, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class ActionFailed:
    """An action failed (after the coordinator's retries), or returned something that is not a result."""

    reason: str
    """A bounded reason tag (``"invalid_action_result"``, ``"invalid_delta"``, ``"timeout"``, ...)."""
    details: dict[str, Any] = field(default_factory=dict)
    """JSON-safe structural context (never a raw value)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"error": reason, "details": details}``."""
        return {"error": self.reason, "details": self.details}

    @classmethod
    def from_error(cls, error: BaseException) -> ActionFailed:
        """The failure of an attempt that raised: an ``AdkError`` keeps its reason and details; any other
        exception becomes ``function_failed`` with its type name (never its text). Both are bounded again
        (``bounded_reason``, ``json_safe``): an error rebuilt from a pickle is not re-validated."""
        if isinstance(error, AdkError):
            return cls(bounded_reason(error.reason), json_safe(dict(error.details)))
        return cls("function_failed", {"exception_type": type(error).__name__})


ActionResult: TypeAlias = Ok | Output | Stop | Complete | Route | Transfer | Pause
"""What an action may return."""
Result: TypeAlias = ActionResult | ActionFailed
"""What the engine accepts for a finished task."""

_RESULT_TYPES: Final = (Ok, Output, Stop, Complete, Route, Transfer, Pause, ActionFailed)
_FORMS: Final[dict[str, frozenset[str]]] = {
    "ok": frozenset({"ok"}),
    "output": frozenset({"output", "delta"}),
    "stop": frozenset({"stop", "delta"}),
    "complete": frozenset({"complete", "delta"}),
    "route": frozenset({"route", "delta"}),
    "transfer": frozenset({"transfer", "input", "delta"}),
    "pause": frozenset({"pause", "summary", "delta"}),
    "error": frozenset({"error", "details"}),
}


class _Invalid(Exception):
    """Internal: the result is rejected with this ActionFailed."""

    def __init__(self, failure: ActionFailed) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def _invalid(what: str, **details: Any) -> _Invalid:
    return _Invalid(ActionFailed("invalid_action_result", {"field": what, **details}))


def _delta(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(ActionFailed("invalid_delta", {"type": type(value).__name__}))
    try:
        copied, _ = copy_json(dict(value), field="delta", max_bytes=MAX_VALUE_BYTES)
    except ValidationError as exc:
        raise _Invalid(
            ActionFailed("invalid_delta", {"rule": exc.reason, "path": exc.details.get("path", "$")})
        ) from None
    return copied


def _value(value: Any, what: str) -> Any:
    try:
        copied, _ = copy_json(value, field=what, max_bytes=MAX_VALUE_BYTES)
    except ValidationError as exc:
        raise _Invalid(
            ActionFailed("invalid_value", {"field": what, "rule": exc.reason, "path": exc.details.get("path", "$")})
        ) from None
    return copied


def _tag(value: Any, what: str, limit: int, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty) or len(value) > limit:
        raise _invalid(what, type=type(value).__name__)
    _value(value, what)  # rejects NUL characters and lone surrogates
    return value


def _from_dict(data: Mapping[Any, Any]) -> Result:
    tags = [key for key in data if key in _FORMS]
    if len(tags) != 1:
        raise _invalid("tag")
    tag = tags[0]
    if not set(data) <= _FORMS[tag]:
        raise _invalid("keys", tag=tag)
    delta = _delta(data.get("delta", {}) if tag != "ok" else data["ok"])
    if tag == "ok":
        return Ok(delta)
    if tag in ("output", "stop", "complete"):
        value = _value(data[tag], tag)
        return (
            Output(value, delta) if tag == "output" else Stop(value, delta) if tag == "stop" else Complete(value, delta)
        )
    if tag == "route":
        return Route(_tag(data["route"], "route", MAX_REASON_CHARS), delta)
    if tag == "transfer":
        return Transfer(_tag(data["transfer"], "transfer", MAX_REASON_CHARS), _value(data.get("input"), "input"), delta)
    if tag == "pause":
        return Pause(
            _tag(data["pause"], "pause", MAX_REASON_CHARS),
            _tag(data.get("summary", ""), "summary", MAX_SUMMARY_CHARS, empty=True),
            delta,
        )
    details = data.get("details", {})
    if not isinstance(details, Mapping):
        raise _invalid("details", type=type(details).__name__)
    return ActionFailed(_tag(data["error"], "error", MAX_REASON_CHARS), json_safe(dict(details)))


def normalize_result(value: Any) -> Result:
    """Validate an action's return value and return a private, JSON-safe copy of it as a result dataclass.

    Accepts the result dataclasses and their JSON forms (see the module docstring). Never raises: anything that
    is not a result becomes ``ActionFailed("invalid_action_result")``, a delta that is not a JSON-safe dict
    ``ActionFailed("invalid_delta")``, an output or transfer input that is not JSON-safe
    ``ActionFailed("invalid_value")``. ``details`` name the offending field or type, never the value.
    """
    try:
        if isinstance(value, _RESULT_TYPES):
            return _from_dict(value.to_dict())
        if isinstance(value, Mapping):
            return _from_dict(value)
    except _Invalid as exc:
        return exc.failure
    return ActionFailed("invalid_action_result", {"type": type(value).__name__})


def _call(fn: CallableRef, arity: int, state: dict[str, Any], context: dict[str, Any]) -> Any:
    function = fn.resolve()
    raw = function(state, context) if arity == 2 else function(state)
    if inspect.isawaitable(raw):
        raw = asyncio.run(_await(raw))
    return raw


async def _await(awaitable: Any) -> Any:
    return await awaitable


def run_callable(
    fn: CallableRef, arity: int, kind: str, state: dict[str, Any], context: dict[str, Any]
) -> dict[str, Any]:
    """Run one task's callable (in a worker process) and return its result in JSON form.

    ``fn`` is called as ``fn(state)`` when ``arity`` is 1, else ``fn(state, context)``; an awaitable result is
    awaited. For ``kind`` in :data:`ACTION_KINDS` the return value is normalized as an action result; for
    :data:`VALUE_KINDS` it must be JSON-safe and is wrapped as ``Output(value, {})``. Feed the returned dict to
    ``Engine.on_result(task.id, normalize_result(value))``.

    Raises:
        WorkflowError: the action returned ``ActionFailed`` (its reason and details), was not a valid result,
            or a value task returned a non-JSON value (``invalid_value``) — raised so the coordinator's retry
            policy covers returned failures exactly like raised ones.
        Exception: whatever the callable raises.
    """
    raw = _call(fn, arity, state, context)
    if kind in ACTION_KINDS:
        result = normalize_result(raw)
    else:
        try:
            result = Output(_value(raw, "value"), {})
        except _Invalid as exc:
            result = exc.failure
    if isinstance(result, ActionFailed):
        # The structural key first: it wins over the action's own and survives json_safe's bounds.
        details = {"callable": fn.label, **{k: v for k, v in result.details.items() if k != "callable"}}
        raise WorkflowError("the workflow action failed", reason=result.reason, details=details)
    return result.to_dict()
