"""Pauses of Runner invocations, kept in the session itself so a pause survives every process (pure).

The pause event sets the session-state key ``adk_pause:<continuation_id>`` to ``"open"``; the resume claims it by
appending its first event with ``add_event_if_state(expected={key: "open"})`` and the delta ``{key: "consumed"}``.
A replayed or concurrent second resume therefore finds ``"consumed"`` and fails with ``no_paused_invocation``;
long-running progress updates use the same condition, so they are ordered atomically against the terminal resume.
Also here: the other events a turn writes besides model and tool content (audit and error boundaries).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, RunError, ValidationError
from adk_actors.events import ErrorInfo, Event, EventActions, Pause
from adk_actors.tools.suspension import TERMINAL_STATUSES, state_digest

__all__ = [
    "CONSUMED",
    "OPEN",
    "PAUSE_PREFIX",
    "OpenPause",
    "RoundState",
    "action_id",
    "audit_event",
    "check_resume_response",
    "claim_delta",
    "error_event",
    "open_pauses",
    "pause_event",
    "pause_key",
    "round_state",
    "select_pause",
]

PAUSE_PREFIX = "adk_pause:"
OPEN, CONSUMED = "open", "consumed"


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
    ``operation_id`` matches and whose ``status`` is terminal (``completed``, ``failed``, ``cancelled``); a
    credential request exactly ``{"flow_ref", "correlation_id"}`` (the flow reference of the pause and the
    flow's state, checked against the pause's digest; the state is not kept) or ``{"cancelled": true}``.

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
    if pause.reason == "credential":
        if not isinstance(response, Mapping):
            raise bad("not_a_mapping")
        if set(response) == {"cancelled"} and response["cancelled"] is True:
            return {"cancelled": True}
        if set(response) != {"flow_ref", "correlation_id"}:
            raise bad("credential_shape")
        ref, state = response["flow_ref"], response["correlation_id"]
        if not isinstance(ref, str) or not secrets.compare_digest(ref, str(pause.details.get("flow_ref"))):
            raise bad("flow_ref")
        if not isinstance(state, str) or len(state) > 256:
            raise bad("correlation_id")
        if not secrets.compare_digest(state_digest(state), str(pause.details.get("state_digest", ""))):
            raise bad("correlation_id")
        return {"flow_ref": ref, "correlation_id": state}
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
