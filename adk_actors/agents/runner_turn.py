"""Runner invocations as data and pure logic: options, messages, the events a turn writes, and pause bookkeeping.

The agent actor runs a Runner invocation in the session queue of ``(app_name, user_id, session_id)`` (shared
with ``invoke``); everything here is the pure part of it, tested without actors.

Pause bookkeeping lives in the session itself, so a pause survives every process: the pause event sets the
session-state key ``adk_pause:<continuation_id>`` to ``"open"``; the resume claims it by appending its first event
with ``add_event_if_state(expected={key: "open"})`` and the delta ``{key: "consumed"}``. A replayed or concurrent
second resume therefore finds ``"consumed"`` and fails with ``no_paused_invocation``; long-running progress
updates use the same condition, so they are ordered atomically against the terminal resume.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adk_actors.agents.context import ContextPolicy
from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ConfigError, RunError, ValidationError
from adk_actors.events import ErrorInfo, Event, EventActions, Pause
from adk_actors.policy import RuntimePolicy
from adk_actors.tools.suspension import TERMINAL_STATUSES

__all__ = [
    "DEFAULT_MAX_STREAM_OUTPUT_BYTES",
    "MAX_STREAM_OUTPUT_BYTES",
    "PAUSE_PREFIX",
    "CancelTurn",
    "OpenPause",
    "ResumeSpec",
    "RoundState",
    "RunnerOptions",
    "RunnerTurn",
    "TurnAccepted",
    "TurnEvent",
    "TurnLost",
    "TurnResult",
    "action_id",
    "audit_event",
    "check_resume_response",
    "open_pauses",
    "pause_event",
    "round_state",
    "runner_options",
    "select_pause",
]

DEFAULT_MAX_STREAM_OUTPUT_BYTES = 16 * 1024 * 1024
MAX_STREAM_OUTPUT_BYTES = 64 * 1024 * 1024
MAX_RUN_TIMEOUT_MS = 365 * 86400 * 1000
"""A year: any larger ``run_timeout`` is a typo, and an unbounded int overflows deadline arithmetic."""
PAUSE_PREFIX = "adk_pause:"
OPEN, CONSUMED = "open", "consumed"
_STREAMING_MODES = ("none", "text", "content")
_TOOL_EXECUTION_KEYS = frozenset({"mode", "max_concurrency", "tool_timeout"})
_ADMISSION_KEYS = frozenset({"overflow", "queue_timeout"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerOptions:
    """Validated Runner options (see :func:`runner_options`); picklable, sent with every invocation."""

    run_timeout_ms: int | None = None
    """The whole invocation's deadline (``None``: the node's ``agent_turn_timeout``)."""
    max_llm_calls: int = 32
    max_tool_rounds: int = 16
    streaming_mode: str = "none"
    max_stream_output_bytes: int = DEFAULT_MAX_STREAM_OUTPUT_BYTES
    tool_mode: str = "parallel"
    """``parallel``: ``parallel_safe`` neighbours run together (at most ``max_concurrency``); ``serial``: one at
    a time."""
    max_concurrency: int = 8
    tool_timeout_ms: int | None = None
    context_policy: ContextPolicy = field(default_factory=ContextPolicy)
    admission: dict[str, Any] | None = None
    """``{"overflow": "reject"|"queue", "queue_timeout": ms}`` (either key optional) or ``None`` (no admission)."""
    runtime_policy: RuntimePolicy | None = None


def _int(value: Any, key: str, *, minimum: int = 1, maximum: int | None = None, none: bool = False) -> Any:
    if value is None and none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        raise ConfigError(
            f"runner option {key} must be an integer in range",
            reason="invalid_value",
            details={"key": key, "min": minimum, **({"max": maximum} if maximum else {})},
        )
    return value


def _strict(value: Any, key: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"runner option {key} must be a mapping", reason="invalid_value", details={"key": key})
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ConfigError(f"unknown {key} key", reason="unknown_key", details={"key": f"{key}.{unknown[0]}"})
    return value


def runner_options(**options: Any) -> RunnerOptions:
    """Validate Runner keyword options strictly.

    Keys: ``run_timeout`` (ms or ``None``), ``max_llm_calls`` (32), ``max_tool_rounds`` (16), ``streaming_mode``
    (``none``/``text``/``content``), ``max_stream_output_bytes`` (16 MiB, at most 64 MiB), ``tool_execution``
    (``{"mode": "serial"|"parallel", "max_concurrency": n, "tool_timeout": ms}``), ``context_policy`` (see
    :class:`~adk_actors.agents.context.ContextPolicy`), ``admission_control`` (``{"overflow", "queue_timeout"}``),
    ``runtime_policy`` (see :class:`~adk_actors.policy.RuntimePolicy`).

    Raises:
        ConfigError: ``unknown_key`` or ``invalid_value`` with ``details["key"]``; ``context_compress_unsupported``.
    """
    known = {
        "run_timeout",
        "max_llm_calls",
        "max_tool_rounds",
        "streaming_mode",
        "max_stream_output_bytes",
        "tool_execution",
        "context_policy",
        "admission_control",
        "runtime_policy",
    }
    unknown = sorted(k for k in options if k not in known)
    if unknown:
        raise ConfigError("unknown Runner option", reason="unknown_key", details={"key": unknown[0]})
    mode = options.get("streaming_mode", "none")
    if mode not in _STREAMING_MODES:
        raise ConfigError(
            "streaming_mode must be none, text or content", reason="invalid_value", details={"key": "streaming_mode"}
        )
    tool_execution = options.get("tool_execution")
    tools = _strict({} if tool_execution is None else tool_execution, "tool_execution", _TOOL_EXECUTION_KEYS)
    tool_mode = tools.get("mode", "parallel")
    if tool_mode not in ("serial", "parallel"):
        raise ConfigError(
            "tool_execution.mode must be serial or parallel",
            reason="invalid_value",
            details={"key": "tool_execution.mode"},
        )
    admission = options.get("admission_control")
    if admission is not None:
        admission = dict(_strict(admission, "admission_control", _ADMISSION_KEYS))
        if admission.get("overflow", "reject") not in ("reject", "queue"):
            raise ConfigError(
                "admission_control.overflow must be reject or queue",
                reason="invalid_value",
                details={"key": "admission_control.overflow"},
            )
        _int(admission.get("queue_timeout", 0), "admission_control.queue_timeout", minimum=0)
    policy = options.get("runtime_policy")
    if policy is not None and not isinstance(policy, RuntimePolicy):
        policy = RuntimePolicy.from_config(policy)
    context = options.get("context_policy")
    if not isinstance(context, ContextPolicy):
        context = ContextPolicy.from_config(context)
    return RunnerOptions(
        run_timeout_ms=_int(options.get("run_timeout"), "run_timeout", none=True, maximum=MAX_RUN_TIMEOUT_MS),
        max_llm_calls=_int(options.get("max_llm_calls", 32), "max_llm_calls"),
        max_tool_rounds=_int(options.get("max_tool_rounds", 16), "max_tool_rounds", minimum=0),
        streaming_mode=mode,
        max_stream_output_bytes=_int(
            options.get("max_stream_output_bytes", DEFAULT_MAX_STREAM_OUTPUT_BYTES),
            "max_stream_output_bytes",
            maximum=MAX_STREAM_OUTPUT_BYTES,
        ),
        tool_mode=tool_mode,
        max_concurrency=_int(tools.get("max_concurrency", 8), "tool_execution.max_concurrency"),
        tool_timeout_ms=_int(
            tools.get("tool_timeout"), "tool_execution.tool_timeout", none=True, maximum=MAX_RUN_TIMEOUT_MS
        ),
        context_policy=context,
        admission=admission,
        runtime_policy=policy,
    )


# ---- messages -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeSpec:
    """Resume a paused invocation: ``key`` is its continuation id or invocation id (``""``: the only one)."""

    key: str
    response: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerTurn:
    """One Runner invocation (new input, or a resume) in the queue of its session."""

    app_name: str
    user_id: str
    session_id: str
    session_service: Any
    options: RunnerOptions
    input: Any = None
    resume: ResumeSpec | None = None
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sink: Any = None
    """Where each persisted event goes as a :class:`TurnEvent` (a run actor), or ``None``."""
    run_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent:
    """One event the invocation persisted, in session order (``index`` counts from 1 per turn)."""

    turn_id: str
    index: int
    event: Event


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAccepted:
    """Sent to the sink when the agent took the invocation: ``pid`` is the agent's process (the run watches it)."""

    turn_id: str
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnLost:
    """Delivered to the run (by the run index) when the agent's process died with the invocation in it."""

    turn_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelTurn:
    """Cancel a Runner invocation (tell): in-flight provider and tool work is cancelled, the permit released."""

    turn_id: str
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """A Runner invocation's answer: ``completed`` with ``output`` or ``paused`` with the pause ``event``;
    ``events`` is how many :class:`TurnEvent` messages preceded it."""

    kind: str
    output: Any = None
    event: Event | None = None
    events: int = 0
    invocation_id: str = ""


# ---- pauses ---------------------------------------------------------------------------------------------------


def pause_key(continuation_id: str) -> str:
    return PAUSE_PREFIX + continuation_id


def action_id(invocation_id: str, name: str, call_id: str | None, args: Mapping[str, Any]) -> str:
    """The opaque id of one gated action: a digest, so it carries no raw arguments."""
    material = canonical_dumps({"i": invocation_id, "n": name, "c": call_id or "", "a": dict(args)})
    return "act_" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:40]


def pause_event(*, invocation_id: str, author: str, reason: str, details: Mapping[str, Any]) -> Event:
    """The event that pauses an invocation (``actions.pause`` with a fresh continuation id; opens its key)."""
    continuation_id = "cont_" + uuid.uuid4().hex
    return Event.new(
        invocation_id=invocation_id,
        author=author,
        actions=EventActions(
            state_delta={pause_key(continuation_id): OPEN},
            pause=Pause(continuation_id=continuation_id, reason=reason, details=dict(details)),
        ),
    )


def claim_delta(continuation_id: str) -> dict[str, str]:
    return {pause_key(continuation_id): CONSUMED}


def audit_event(*, invocation_id: str, record: Mapping[str, Any]) -> Event:
    """The immutable ``system`` event recording a runtime-policy denial (no arguments or content)."""
    return Event.new(
        invocation_id=invocation_id, author="system", actions=EventActions(runtime_policy_decision=dict(record))
    )


def error_event(*, invocation_id: str, author: str, error: BaseException) -> Event:
    """The error boundary of an invocation: a structural description only."""
    return Event.new(invocation_id=invocation_id, author=author, error=ErrorInfo.from_exception(error))


@dataclass(frozen=True, slots=True)
class OpenPause:
    continuation_id: str
    invocation_id: str
    event: Event


def open_pauses(events: Sequence[Event], state: Mapping[str, Any]) -> list[OpenPause]:
    """The session's resumable pauses, oldest first (their key is still ``"open"``)."""
    found = []
    for event in events:
        pause = event.actions.pause
        if pause is not None and state.get(pause_key(pause.continuation_id)) == OPEN:
            found.append(OpenPause(pause.continuation_id, event.invocation_id, event))
    return found


def select_pause(pauses: Sequence[OpenPause], key: str) -> OpenPause:
    """The pause a resume addresses: by continuation id or invocation id, or the only one when ``key`` is empty.

    Raises:
        RunError: ``no_paused_invocation``; ``ambiguous_paused_invocation`` (``details["invocation_ids"]``).
    """
    matching = [p for p in pauses if key in (p.continuation_id, p.invocation_id)] if key else list(pauses)
    if not matching:
        raise RunError("no paused invocation to resume", reason="no_paused_invocation")
    if len(matching) > 1:
        raise RunError(
            "more than one paused invocation; name one",
            reason="ambiguous_paused_invocation",
            details={"invocation_ids": sorted({p.invocation_id for p in matching})[:16]},
        )
    return matching[0]


def check_resume_response(pause: Pause, response: Any) -> Any:
    """Validate a resume response for ``pause`` before anything is claimed (an invalid one consumes nothing).

    A confirmation takes exactly ``{"confirmed": true|false}``; a long-running operation a mapping whose
    ``operation_id`` matches and whose ``status`` is terminal (``completed``, ``failed``, ``cancelled``).

    Raises:
        ValidationError: ``invalid_resume_response`` (``details["rule"]``).
    """

    def bad(rule: str) -> ValidationError:
        return ValidationError(
            "the resume response does not fit the pause",
            reason="invalid_resume_response",
            details={"rule": rule, "pause": pause.reason},
        )

    if pause.reason == "tool_confirmation":
        if (
            not isinstance(response, Mapping)
            or set(response) != {"confirmed"}
            or not isinstance(response["confirmed"], bool)
        ):
            raise bad("confirmation_shape")
        return {"confirmed": response["confirmed"]}
    if pause.reason == "long_running":
        if not isinstance(response, Mapping):
            raise bad("not_a_mapping")
        if response.get("operation_id") != pause.details.get("operation_id"):
            raise bad("operation_id")
        if response.get("status") not in TERMINAL_STATUSES:
            raise bad("terminal_status")
        try:
            return copy_json(dict(response))[0]
        except AdkError:
            raise bad("not_json") from None
    raise bad("unknown_pause")


@dataclass(slots=True)
class RoundState:
    """Where a paused invocation stands, rebuilt from its session events."""

    calls: list[dict[str, Any]]
    """The function calls of the invocation's last model event."""
    answered: dict[int, dict[str, Any]]
    """Call index → function-response part already recorded."""
    llm_calls: int
    rounds: int


def round_state(events: Sequence[Event], invocation_id: str) -> RoundState:
    """Rebuild the open tool round of ``invocation_id`` from the session's events.

    Raises:
        RunError: ``no_paused_invocation`` when the invocation has no model turn with function calls.
    """
    llm_calls = rounds = 0
    calls: list[dict[str, Any]] = []
    responses: dict[str, dict[str, Any]] = {}
    by_name: list[dict[str, Any]] = []
    for event in events:
        if event.invocation_id != invocation_id or event.partial or event.content is None:
            continue
        parts = event.content.to_dict()["parts"]
        fcalls = [p for p in parts if p["type"] == "function_call"]
        if event.author not in ("user", "system") and not any(p["type"] == "function_response" for p in parts):
            llm_calls += 1
            if fcalls:
                rounds += 1
                calls, responses, by_name = [dict(c) for c in fcalls], {}, []
            continue
        for part in parts:
            if part["type"] == "function_response":
                if part.get("id"):
                    responses[part["id"]] = part
                else:
                    by_name.append(part)
    if not calls:
        raise RunError("the paused invocation has no open tool round", reason="no_paused_invocation")
    answered: dict[int, dict[str, Any]] = {}
    for index, call in enumerate(calls):
        if call.get("id") and call["id"] in responses:
            answered[index] = responses[call["id"]]
        elif not call.get("id"):
            match = next((p for p in by_name if p["name"] == call["name"]), None)
            if match is not None:
                by_name.remove(match)
                answered[index] = match
    return RoundState(calls=calls, answered=answered, llm_calls=llm_calls, rounds=rounds)
