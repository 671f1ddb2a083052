"""The stable-run facade: ``start``, ``status``, ``wait``, ``subscribe``, ``cancel``.

A run lives on the host chosen by ``blake2b(run_id) mod hosts`` and is addressed by id; it does not belong to the
process that started it. ``wait`` and ``subscribe`` monitor that host: if it dies, the run index answers with the
run's one terminal outcome, ``Failed(reason="host_lost")``, within moments — never a hang.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from adk_actors.content.validation import (
    check_id,
    check_int,
    check_json,
    check_optional_id,
    check_text,
    check_timeout,
)
from adk_actors.errors import ActorCrashed, AskTimeout, RunError, RunNotFound, ValidationError
from adk_actors.runs.actor import RunArgs
from adk_actors.runs.logic import Outcome, ReplayGap
from adk_actors.runs.messages import (
    INDEX_NAME,
    AckRun,
    CancelRun,
    IndexLookup,
    IndexWait,
    ResumeRun,
    RunMessage,
    RunOptions,
    RunStatus,
    SubscribeRun,
    UnsubscribeRun,
    WaitRun,
)
from adk_actors.runtime.procs import pid_alive
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.system import ActorSystemHandle, current_system

__all__ = ["RunItem", "cancel", "resume", "start", "status", "subscribe", "wait"]

_RUN_ACTOR = "adk_actors.runs.actor.RunActor"
_SLICE = 0.05
MAX_REASON_BYTES = 1024
"""Longest cancel reason (UTF-8 bytes): it is stored in the outcome and shown to every waiter."""


@dataclass(frozen=True, slots=True)
class RunItem:
    """One message of a subscription: an event (``seq``, ``event``), a ``ReplayGap``, or the terminal outcome."""

    seq: int
    item: Any
    terminal: bool = False


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _ref(handle: ActorSystemHandle, run_id: str) -> LocalRef:
    return LocalRef(place(run_id, handle.settings.hosts), run_id)


def start(
    body: Any,
    user_id: str | None = None,
    session_id: str | None = None,
    input: Any = None,
    *,
    run_id: str | None = None,
    retention_ms: int = 60000,
    max_buffered_events: int = 256,
    parent_run_id: str = "",
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> str:
    """Start a stable run; returns its id. The run is not owned by the caller: it survives the caller's exit.

    ``body`` is a :class:`~adk_actors.runner.Runner` (then ``user_id``, ``session_id`` and ``input`` say what to
    run: one Runner invocation whose events are the run's events) or any picklable run body.

    Raises:
        RunError: ``invalid_run_options``; ``already_started`` when ``run_id`` is live.
    """
    check_optional_id(run_id, "run_id", error=RunError)
    if parent_run_id:
        check_id(parent_run_id, "parent_run_id", error=RunError)
    check_timeout(timeout, error=RunError)
    as_body = getattr(body, "run_body", None)
    if callable(as_body):
        body = as_body(user_id, session_id, input)
    elif user_id is not None or session_id is not None or input is not None:
        raise RunError(
            "user_id, session_id and input go with a Runner", reason="invalid_run_options", details={"key": "body"}
        )
    if isinstance(retention_ms, bool) or not isinstance(retention_ms, int) or retention_ms < 0:
        raise RunError(
            "retention_ms must be a non-negative integer", reason="invalid_run_options", details={"key": "retention_ms"}
        )
    if isinstance(max_buffered_events, bool) or not isinstance(max_buffered_events, int) or max_buffered_events < 1:
        raise RunError(
            "max_buffered_events must be a positive integer",
            reason="invalid_run_options",
            details={"key": "max_buffered_events"},
        )
    handle = _system(system)
    run_id = run_id or _colocated_id(body, handle.settings.hosts)
    args = RunArgs(
        run_id=run_id,
        body=body,
        options=RunOptions(retention_ms=retention_ms, max_buffered_events=max_buffered_events),
        parent_run_id=parent_run_id,
    )
    handle.spawn(_RUN_ACTOR, args, id=run_id, restart="temporary", timeout=timeout)
    return run_id


def _colocated_id(body: Any, hosts: int) -> str:
    """A fresh run id; when the body names the actor it talks to (``placement_key()``, e.g. a Runner's agent), one
    that places the run on that actor's host, so their messages stay inside one host process."""
    key = getattr(body, "placement_key", None)
    run_id = uuid.uuid4().hex
    if not callable(key) or hosts < 2:
        return run_id
    target = place(str(key()), hosts)
    for _ in range(64):  # each try lands on the target with probability 1/hosts
        if place(run_id, hosts) == target:
            return run_id
        run_id = uuid.uuid4().hex
    return run_id


def resume(
    run_id: str,
    response: Any,
    *,
    retention_ms: int = 60000,
    max_buffered_events: int = 256,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> str:
    """Resume a paused run into a new run (returned); the paused run records ``resumed_to``, the new one
    ``parent_run_id``.

    Raises:
        RunError: ``not_paused``; ``already_resumed`` (``details["resumed_to"]``); ``not_resumable``;
            the body's validation of ``response`` (e.g. ``invalid_resume_response``), which consumes nothing.
        RunNotFound: no such run, or it is past its retention.
    """
    check_id(run_id, "run_id")
    check_timeout(timeout)
    response = check_json(response, "response", reason="invalid_resume_response")
    handle = _system(system)
    new_run_id = uuid.uuid4().hex
    try:
        body = _ask_run(handle, run_id, ResumeRun(new_run_id=new_run_id, response=response), timeout)
    except ActorCrashed:
        raise RunNotFound("the run is not reachable", details={"run_id": run_id}) from None
    return start(
        body,
        run_id=new_run_id,
        retention_ms=retention_ms,
        max_buffered_events=max_buffered_events,
        parent_run_id=run_id,
        system=handle,
        timeout=timeout,
    )


def _ask_run(handle: ActorSystemHandle, run_id: str, request: Any, timeout: float | None) -> Any:
    return handle.ask(_ref(handle, run_id), request, timeout)


def status(run_id: str, *, system: ActorSystemHandle | None = None, timeout: float | None = None) -> dict[str, Any]:
    """The run's state (``running``, ``completed``, ``paused``, ``cancelled``, ``failed``) and counters.

    Raises:
        RunNotFound: no such run, or it is past its retention.
    """
    check_id(run_id, "run_id")
    check_timeout(timeout)
    handle = _system(system)
    try:
        return dict(_ask_run(handle, run_id, RunStatus(), timeout))
    except ActorCrashed:
        return dict(handle.ask(INDEX_NAME, IndexLookup(run_id=run_id), timeout))


def wait(run_id: str, timeout: float | None = None, *, system: ActorSystemHandle | None = None) -> Outcome:
    """Block until the run's terminal outcome (``Completed`` / ``Paused`` / ``Cancelled`` / ``Failed``).

    Raises:
        AskTimeout: no outcome before ``timeout``.
        RunNotFound: no such run, or it is past its retention.
    """
    check_id(run_id, "run_id")
    check_timeout(timeout)
    handle = _system(system)
    deadline = time.monotonic() + (handle.settings.ask_timeout_s if timeout is None else timeout)
    try:
        outcome: Outcome = _ask_run(handle, run_id, WaitRun(), max(0.0, deadline - time.monotonic()))
        return outcome
    except ActorCrashed:  # the run's host died (or the run retired): the index knows the outcome
        index_outcome: Outcome = handle.ask(INDEX_NAME, IndexWait(run_id=run_id), max(0.0, deadline - time.monotonic()))
        return index_outcome


def cancel(
    run_id: str, reason: str = "cancelled", *, system: ActorSystemHandle | None = None, timeout: float | None = None
) -> Outcome:
    """Cancel a run (propagated to its body's in-flight work); returns its terminal outcome.

    Raises:
        RunNotFound: no such run, or it is past its retention.
    """
    check_id(run_id, "run_id")
    check_text(reason, "reason", max_bytes=MAX_REASON_BYTES)
    check_timeout(timeout)
    handle = _system(system)
    try:
        outcome: Outcome = _ask_run(handle, run_id, CancelRun(reason=reason), timeout)
        return outcome
    except ActorCrashed:
        entry = handle.ask(INDEX_NAME, IndexLookup(run_id=run_id), timeout)
        if entry["outcome"] is None:
            raise RunNotFound("the run is not reachable", details={"run_id": run_id}) from None
        index_outcome: Outcome = entry["outcome"]
        return index_outcome


def subscribe(
    run_id: str,
    *,
    after_seq: int = 0,
    credit: bool = False,
    idle_timeout: float | None = None,
    system: ActorSystemHandle | None = None,
) -> Generator[RunItem, None, None]:
    """Iterate over the run's messages after ``after_seq``: replay, then live events, then the terminal outcome.

    Closing the iterator (``close()``) unsubscribes, and so does reaching the terminal outcome; the run goes on.

    ``credit=True`` keeps at most one unacknowledged message in flight (each is acknowledged when the iterator
    moves past it); resume after a disconnect with ``after_seq`` = the last ``seq`` consumed. A dropped prefix
    arrives as a ``ReplayGap`` item, never silently. If the run's host dies, the last item is the index's
    ``Failed("host_lost")``.

    Raises:
        ValidationError: a malformed argument — raised by the call itself, before any iteration.
        SystemNotRunning: no system (``system`` omitted and none attached) — also at the call.
        AskTimeout: nothing arrived for ``idle_timeout`` seconds (default: the node's ask timeout).
        RunNotFound: no such run.
    """
    # Not a generator function itself, so that bad arguments fail here and not at the first next().
    check_id(run_id, "run_id")
    check_int(after_seq, "after_seq", minimum=0)
    if not isinstance(credit, bool):
        raise ValidationError(
            "credit must be a bool", reason="invalid_value", details={"key": "credit", "type": type(credit).__name__}
        )
    check_timeout(idle_timeout, "idle_timeout")
    handle = _system(system)
    idle = handle.settings.ask_timeout_s if idle_timeout is None else idle_timeout
    return _subscription(handle, run_id, after_seq, credit, idle)


def _subscription(
    handle: ActorSystemHandle, run_id: str, after_seq: int, credit: bool, idle: float
) -> Generator[RunItem, None, None]:
    ref = _ref(handle, run_id)
    sub_id = uuid.uuid4().hex
    endpoint = handle.open_endpoint()
    host_pid = 0
    try:
        try:
            host = handle.host_entry(ref.host_id)
            host_pid = host.pid
            endpoint.ask_inner(
                ref,
                SubscribeRun(subscriber=None, subscription_id=sub_id, after_seq=after_seq, credit=credit),
                time.monotonic() + idle,
            )
        except ActorCrashed:
            outcome = handle.ask(INDEX_NAME, IndexWait(run_id=run_id), idle)
            yield RunItem(0, outcome, terminal=True)
            return
        deadline = time.monotonic() + idle
        while True:
            message = endpoint.listen(min(_SLICE, max(0.0, deadline - time.monotonic())))
            if isinstance(message, RunMessage) and message.subscription_id == sub_id:
                deadline = time.monotonic() + idle
                yield RunItem(message.seq, message.item, message.terminal)
                if credit:
                    handle.cast(ref, AckRun(subscription_id=sub_id, seq=message.seq))
                if message.terminal:
                    return
                continue
            if message is None and host_pid and not pid_alive(host_pid):
                outcome = handle.ask(INDEX_NAME, IndexWait(run_id=run_id), idle)
                yield RunItem(0, outcome, terminal=True)
                return
            if time.monotonic() > deadline:
                raise AskTimeout("no run message before the idle timeout", details={"run_id": run_id})
    finally:
        try:
            handle.cast(ref, UnsubscribeRun(subscription_id=sub_id))
        except Exception:  # the system may be gone; the run drops subscribers of finished runs anyway
            pass
        endpoint.close()


__all__ += ["ReplayGap"]
