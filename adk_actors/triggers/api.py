"""The trigger facade: register a Runner once, then submit deliveries into its bounded queue.

Each registered trigger is one supervised tier-2 actor (``adk_actors.triggers.actor``), registered
``trigger:<name>`` and placed by ``blake2b`` on a host; these functions are asks to it with a deadline. A ref
(``"<trigger>/<event id>"``) is stable: it names the trigger, so any process can await, inspect or cancel it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from adk_actors.content.validation import check_timeout
from adk_actors.errors import ActorCrashed, AdkError, NameNotFound, TriggerError
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.triggers.actor import TriggerArgs
from adk_actors.triggers.messages import (
    TRIGGER_ACTOR,
    AwaitEvent,
    CancelEvent,
    EventOutcome,
    EventStatus,
    StopTrigger,
    SubmitEvent,
    Submitted,
    TriggerStatus,
    trigger_local_id,
)
from adk_actors.triggers.options import (
    MAX_TRIGGER_NAME,
    TriggerOptions,
    check_delivery,
    check_trigger_name,
    trigger_options,
)

__all__ = [
    "EventOutcome",
    "Submitted",
    "await_event",
    "cancel",
    "list_triggers",
    "register_trigger",
    "status",
    "submit",
    "trigger_status",
    "unregister_trigger",
]

MAX_LISTED = 1000
"""The most triggers ``list_triggers`` reports."""
_RESTART_POLL_S = 0.05


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _ref(handle: ActorSystemHandle, name: str) -> LocalRef:
    local_id = trigger_local_id(name)
    return LocalRef(place(local_id, handle.settings.hosts), local_id)


def _ask(handle: ActorSystemHandle, name: str, request: Any, timeout: float | None, *, follow: bool = False) -> Any:
    """Ask trigger ``name``; a trigger that does not run is ``unknown_trigger``. With ``follow``, a trigger whose
    host died is asked again until the deadline: its supervisor restarts the host, and the host the trigger."""
    deadline = time.monotonic() + (handle.settings.ask_timeout_s if timeout is None else timeout)
    host_died = False
    while True:
        try:
            return handle.ask(_ref(handle, name), request, max(0.0, deadline - time.monotonic()))
        except (ActorCrashed, NameNotFound) as err:
            missing = isinstance(err, ActorCrashed) and "actor" in err.details  # the host runs, the trigger not
            host_died = host_died or not missing
            if follow and host_died and time.monotonic() + _RESTART_POLL_S < deadline:
                time.sleep(_RESTART_POLL_S)  # the restart is under way: ask its new incarnation
                continue
            raise TriggerError("no such trigger", reason="unknown_trigger", details={"trigger": name}) from None


def _split(ref: Any) -> tuple[str, str]:
    if not isinstance(ref, str) or "/" not in ref or len(ref) > MAX_TRIGGER_NAME + 80:
        raise TriggerError(
            "a ref is '<trigger>/<event id>'", reason="invalid_ref", details={"type": type(ref).__name__}
        )
    name, event_id = ref.split("/", 1)
    check_trigger_name(name)
    if not event_id or len(event_id) > 64 or not event_id.replace("-", "").isalnum() or not event_id.isascii():
        raise TriggerError("a ref is '<trigger>/<event id>'", reason="invalid_ref", details={"type": "str"})
    return name, event_id


def register_trigger(
    name: str,
    runner: Any,
    options: Mapping[str, Any] | TriggerOptions | None = None,
    *,
    system: ActorSystemHandle | None = None,
) -> None:
    """Register ``runner`` under ``name``: start the trigger's actor with its bounded queue.

    Raises:
        TriggerError: ``trigger_exists``; ``invalid_trigger_name``; ``invalid_runner``.
        ConfigError: invalid options (``details["key"]`` names it).
    """
    check_trigger_name(name)
    checked = trigger_options(options)
    if not callable(getattr(runner, "run_body", None)) or not hasattr(runner, "options"):
        raise TriggerError("a trigger runs a Runner", reason="invalid_runner", details={"type": type(runner).__name__})
    handle = _system(system)
    store = checked.durable
    if store is not None and not isinstance(store, str):
        store = store.url  # the actor opens its own engine: an engine does not cross processes
    local_id = trigger_local_id(name)
    args = TriggerArgs(
        name=name,
        runner=runner,
        options=TriggerOptions(**{**_fields(checked), "durable": store}),
        hosts=handle.settings.hosts,
        store=store,
    )
    try:
        handle.spawn(TRIGGER_ACTOR, args, id=local_id, name=local_id, restart="permanent")
    except AdkError as err:
        if err.reason == "already_started":
            raise TriggerError(
                "a trigger of that name runs", reason="trigger_exists", details={"trigger": name}
            ) from None
        raise


def _fields(options: TriggerOptions) -> dict[str, Any]:
    return {f: getattr(options, f) for f in options.__dataclass_fields__}


def unregister_trigger(name: str, *, system: ActorSystemHandle | None = None, timeout: float | None = None) -> None:
    """Stop trigger ``name``: cancel its queued and active events (their awaiters get ``cancelled``), then stop.

    Raises:
        TriggerError: ``unknown_trigger``.
    """
    check_trigger_name(name)
    check_timeout(timeout)
    handle = _system(system)
    _ask(handle, name, StopTrigger(), timeout)
    try:
        handle.stop_inner(_ref(handle, name), timeout)
    except AdkError as err:
        if err.reason != "not_found":  # a concurrent unregister stopped it first
            raise


def submit(
    name: str, delivery: Mapping[str, Any], *, system: ActorSystemHandle | None = None, timeout: float | None = None
) -> Submitted:
    """Submit one delivery; returns at once with its stable ref (``duplicate=True`` for a known key).

    Raises:
        TriggerError: ``trigger_queue_full``, ``unknown_trigger``, ``invalid_delivery`` (``details["key"]``),
            ``event_too_large``, ``trigger_stopping``.
    """
    check_trigger_name(name)
    checked = check_delivery(delivery)
    handle = _system(system)
    submitted: Submitted = _ask(handle, name, SubmitEvent(delivery=checked), timeout)
    return submitted


def await_event(ref: str, timeout: float | None = None, *, system: ActorSystemHandle | None = None) -> EventOutcome:
    """Block until the event is terminal; returns its :class:`EventOutcome` (never raises it).

    A memory-mode trigger whose host died answers for its lost events ``failed`` / ``trigger_restarted``.

    Raises:
        AskTimeout: not terminal before ``timeout``.
        TriggerError: ``unknown_trigger``, ``unknown_event`` (or past its retention), ``invalid_ref``.
    """
    name, event_id = _split(ref)
    check_timeout(timeout)
    outcome: EventOutcome = _ask(_system(system), name, AwaitEvent(event_id=event_id), timeout, follow=True)
    return outcome


def status(ref: str, *, system: ActorSystemHandle | None = None, timeout: float | None = None) -> dict[str, Any]:
    """The event's state: ``queued``, ``running``, ``retrying`` or ``terminal``, with attempts and outcome.

    Raises:
        TriggerError: ``unknown_trigger``, ``unknown_event``, ``invalid_ref``.
    """
    name, event_id = _split(ref)
    check_timeout(timeout)
    return dict(_ask(_system(system), name, EventStatus(event_id=event_id), timeout))


def cancel(ref: str, *, system: ActorSystemHandle | None = None, timeout: float | None = None) -> bool:
    """Cancel a queued or active event; ``True`` if it was. Its terminal ``cancelled`` is published only after
    its run finished and released its admission permit.

    Raises:
        TriggerError: ``unknown_trigger``, ``unknown_event``, ``invalid_ref``.
    """
    name, event_id = _split(ref)
    check_timeout(timeout)
    return bool(_ask(_system(system), name, CancelEvent(event_id=event_id), timeout))


def trigger_status(
    name: str, *, system: ActorSystemHandle | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """The trigger's mode, queue depth, active count, counters and its 20 most recent outcomes.

    Raises:
        TriggerError: ``unknown_trigger``.
    """
    check_trigger_name(name)
    check_timeout(timeout)
    return dict(_ask(_system(system), name, TriggerStatus(), timeout))


def list_triggers(*, system: ActorSystemHandle | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
    """``trigger_status`` of every registered trigger of the node, sorted by name (at most ``MAX_LISTED``)."""
    from adk_actors.runtime.host import FindInner
    from adk_actors.runtime.refs import host_name

    check_timeout(timeout)
    handle = _system(system)
    names: set[str] = set()
    for host_id in range(handle.settings.hosts):
        ids: list[str] = handle.ask(host_name(host_id), FindInner(actor=TRIGGER_ACTOR, limit=MAX_LISTED), timeout)
        names.update(i.split(":", 1)[1] for i in ids if i.startswith("trigger:"))
    found = []
    for name in sorted(names)[:MAX_LISTED]:
        try:
            found.append(trigger_status(name, system=handle, timeout=timeout))
        except TriggerError:
            continue  # unregistered meanwhile
    return found
