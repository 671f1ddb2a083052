"""The workflow facade: compile, start/run/wait, status, checkpoint, cancel, resume, and durable invocations.

A started workflow is a :class:`~adk_actors.workflows.coordinator.WorkflowActor` (tier 2) on the host chosen by
``blake2b(ref id)``; like a stable run it is not owned by the caller. Outcomes are values, never raised:
``Completed(state, checkpoint)``, ``Paused(details, state, checkpoint)``, ``Cancelled(reason, checkpoint)``,
``Failed(reason, details, checkpoint)``.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from adk_actors.content.validation import (
    check_id,
    check_int,
    check_json,
    check_json_object,
    check_optional_id,
    check_text,
    check_timeout,
)
from adk_actors.errors import ActorCrashed, AdkError, WorkflowError
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.workflows.coordinator import (
    CancelWorkflow,
    DurableArgs,
    WaitWorkflow,
    WorkflowArgs,
    WorkflowCheckpoint,
    WorkflowStatus,
)
from adk_actors.workflows.engine import Engine, Outcome
from adk_actors.workflows.spec import CompiledWorkflow, compile_workflow

__all__ = [
    "WorkflowRef",
    "cancel_workflow",
    "compile_workflow",
    "delete_workflow_invocation",
    "resume_workflow",
    "resume_workflow_invocation",
    "run_workflow",
    "start_workflow",
    "start_workflow_invocation",
    "wait_workflow",
    "workflow_checkpoint",
    "workflow_invocation_status",
    "workflow_status",
]

_COORDINATOR = "adk_actors.workflows.coordinator.WorkflowActor"
_DEFAULT_LEASE_MS = 30_000
MAX_REASON_BYTES = 1024
"""Longest cancel reason (UTF-8 bytes): it is kept in the outcome."""


@dataclass(frozen=True, slots=True)
class WorkflowRef:
    """A started workflow: its coordinator's id (and, for a durable one, the invocation id)."""

    ref_id: str
    invocation_id: str | None = None


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _target(handle: ActorSystemHandle, ref: WorkflowRef) -> LocalRef:
    if not isinstance(ref, WorkflowRef):
        raise WorkflowError("expected a WorkflowRef", reason="invalid_value", details={"type": type(ref).__name__})
    check_id(ref.ref_id, "ref.ref_id", error=WorkflowError)
    return LocalRef(place(ref.ref_id, handle.settings.hosts), ref.ref_id)


def _check_compiled(compiled: Any) -> CompiledWorkflow:
    if not isinstance(compiled, CompiledWorkflow):
        raise WorkflowError(
            "compile the workflow first (compile_workflow)",
            reason="invalid_value",
            details={"type": type(compiled).__name__},
        )
    return compiled


def _launch(handle: ActorSystemHandle, args: WorkflowArgs, timeout: float | None) -> WorkflowRef:
    args = _replace(args, hosts=handle.settings.hosts)
    # Validate here, in the caller, exactly as the coordinator will (a bad input or checkpoint raises now).
    Engine(
        args.compiled,
        args.state,
        checkpoint=args.checkpoint,
        resume_input=args.resume_input,
        max_steps=args.max_steps,
        max_transfers=args.max_transfers,
        max_concurrency=args.max_concurrency,
    )
    handle.spawn(_COORDINATOR, args, id=args.workflow_ref, restart="temporary", timeout=timeout)
    return WorkflowRef(args.workflow_ref, args.durable.invocation_id if args.durable else None)


def _args(compiled: CompiledWorkflow, state: Any, options: dict[str, Any], **extra: Any) -> WorkflowArgs:
    unknown = sorted(
        set(options) - {"timeout_ms", "deadline", "max_steps", "max_transfers", "max_concurrency", "retention_ms"}
    )
    if unknown:
        raise WorkflowError("unknown workflow option", reason="unknown_key", details={"key": unknown[0]})
    retention = options.get("retention_ms")
    if retention is None:
        retention = compiled.retention_ms if compiled.retention_ms is not None else 60000
    check_int(retention, "retention_ms", minimum=0, error=WorkflowError)
    deadline = options.get("deadline")
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, int | float) or not math.isfinite(deadline)
    ):
        raise WorkflowError(
            "deadline is absolute time.monotonic() seconds", reason="invalid_value", details={"key": "deadline"}
        )
    return WorkflowArgs(
        workflow_ref="wf-" + uuid.uuid4().hex,
        compiled=compiled,
        state=check_json_object(state or {}, "state", error=WorkflowError),
        timeout_ms=options.get("timeout_ms"),
        deadline=None if deadline is None else float(deadline),
        max_steps=options.get("max_steps"),
        max_transfers=options.get("max_transfers"),
        max_concurrency=options.get("max_concurrency"),
        retention_ms=int(retention),
        **extra,
    )


def start_workflow(
    compiled: CompiledWorkflow,
    state: Any = None,
    *,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
    **options: Any,
) -> WorkflowRef:
    """Start a workflow; returns its ref at once.

    Options: ``timeout_ms`` (one absolute deadline for the whole workflow; default the spec's ``timeout``),
    ``deadline`` (an absolute ``time.monotonic()`` deadline in seconds; with a timeout too, the earlier applies),
    ``max_steps``, ``max_transfers``, ``max_concurrency`` (runtime bounds), ``retention_ms``.

    Raises:
        WorkflowError: ``invalid_input`` (input schema), ``invalid_value``, ``unknown_key``.
    """
    check_timeout(timeout, error=WorkflowError)
    handle = _system(system)
    return _launch(handle, _args(_check_compiled(compiled), state, options), timeout)


def wait_workflow(
    ref: WorkflowRef, timeout: float | None = None, *, system: ActorSystemHandle | None = None
) -> Outcome:
    """Block until the workflow's outcome.

    Raises:
        AskTimeout: no outcome before ``timeout``.
        WorkflowError: ``not_found`` (unknown, past its retention, or its host died).
    """
    check_timeout(timeout, error=WorkflowError)
    handle = _system(system)
    try:
        outcome: Outcome = handle.ask(_target(handle, ref), WaitWorkflow(), timeout)
    except ActorCrashed:
        raise WorkflowError("the workflow is not reachable", reason="not_found", details={"ref": ref.ref_id}) from None
    return outcome


def run_workflow(
    compiled: CompiledWorkflow,
    state: Any = None,
    *,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
    **options: Any,
) -> Outcome:
    """Start a workflow and wait for its outcome (``timeout`` in seconds bounds the wait; default: the workflow's
    own deadline plus a little, or the node's ask timeout)."""
    check_timeout(timeout, error=WorkflowError)
    handle = _system(system)
    ref = start_workflow(compiled, state, system=handle, **options)
    deadline_ms = options.get("timeout_ms", _check_compiled(compiled).timeout)
    bounds = [deadline_ms / 1000.0] if deadline_ms is not None else []
    if options.get("deadline") is not None:
        bounds.append(max(0.0, float(options["deadline"]) - time.monotonic()))
    wait = (
        timeout if timeout is not None else (min(bounds) + 5.0 if bounds else max(handle.settings.ask_timeout_s, 300.0))
    )
    return wait_workflow(ref, wait, system=handle)


def _ask(ref: WorkflowRef, request: Any, system: ActorSystemHandle | None, timeout: float | None) -> Any:
    check_timeout(timeout, error=WorkflowError)
    handle = _system(system)
    try:
        return handle.ask(_target(handle, ref), request, timeout)
    except ActorCrashed:
        raise WorkflowError("the workflow is not reachable", reason="not_found", details={"ref": ref.ref_id}) from None


def workflow_status(
    ref: WorkflowRef, *, system: ActorSystemHandle | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """``{"state": "running"|"completed"|"paused"|"cancelled"|"failed", "workflow_id", "in_flight", ...}``."""
    return dict(_ask(ref, WorkflowStatus(), system, timeout))


def workflow_checkpoint(
    ref: WorkflowRef, *, system: ActorSystemHandle | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """The last committed checkpoint (JSON-safe): resume from it with :func:`resume_workflow`."""
    return dict(_ask(ref, WorkflowCheckpoint(), system, timeout))


def cancel_workflow(
    ref: WorkflowRef,
    reason: str = "cancelled",
    *,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> None:
    """Cancel: active workers are killed; the outcome becomes ``Cancelled(reason, last checkpoint)``."""
    check_text(reason, "reason", error=WorkflowError, max_bytes=MAX_REASON_BYTES)
    _ask(ref, CancelWorkflow(reason=reason), system, timeout)


def resume_workflow(
    compiled: CompiledWorkflow,
    checkpoint: Any,
    *,
    resume_input: Any = None,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
    **options: Any,
) -> WorkflowRef:
    """Continue from a checkpoint (of a paused, cancelled or failed workflow) in a new coordinator; committed
    steps are never replayed and consumed budgets are not replenished.

    Raises:
        WorkflowError: ``invalid_checkpoint``, ``checkpoint_mismatch``, ``invalid_resume_input``.
    """
    check_timeout(timeout, error=WorkflowError)
    checkpoint = check_json_object(checkpoint, "checkpoint", error=WorkflowError) if checkpoint else None
    resume_input = check_json(resume_input, "resume_input", error=WorkflowError, reason="invalid_resume_input")
    handle = _system(system)
    args = _args(_check_compiled(compiled), {}, options, checkpoint=checkpoint, resume_input=resume_input)
    return _launch(handle, args, timeout)


# ---- durable invocations ---------------------------------------------------------------------------------------


def start_workflow_invocation(
    compiled: CompiledWorkflow,
    state: Any = None,
    *,
    ledger: Any,
    invocation_id: str | None = None,
    lease_ms: int = _DEFAULT_LEASE_MS,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
    **options: Any,
) -> tuple[str, WorkflowRef]:
    """Start a durable invocation recorded in ``ledger`` (a ``SqlInvocationLedger``); returns its id and ref.

    The coordinator checkpoints before every new action and holds a fenced lease while it works; after a crash or
    a whole-system restart, :func:`resume_workflow_invocation` continues it from the last commit.

    Raises:
        WorkflowError: ``already_exists`` and the validation errors of :func:`start_workflow`.
    """
    check_timeout(timeout, error=WorkflowError)
    check_optional_id(invocation_id, "invocation_id", error=WorkflowError)
    check_int(lease_ms, "lease_ms", minimum=1, error=WorkflowError)
    handle = _system(system)
    compiled = _check_compiled(compiled)
    invocation_id = invocation_id or "inv-" + uuid.uuid4().hex
    args = _args(compiled, state, options)
    Engine(
        compiled,
        args.state,
        max_steps=args.max_steps,
        max_transfers=args.max_transfers,
        max_concurrency=args.max_concurrency,
    )
    owner = f"coordinator:{args.workflow_ref}"
    lease = ledger.start_workflow_invocation(
        invocation_id, compiled.id, str(compiled.version), compiled.kind, args.state, owner, lease_ms
    )
    durable = DurableArgs(ledger=ledger, invocation_id=invocation_id, lease=lease, lease_ms=lease_ms, seq=0)
    try:
        ref = _launch(handle, _replace(args, durable=durable), timeout)
    except AdkError:
        ledger.release(lease)  # nothing runs it: leave it resumable at once
        raise
    return invocation_id, ref


def workflow_invocation_status(invocation_id: str, *, ledger: Any) -> dict[str, Any]:
    """The ledger's view: ``{"state" (phase), "owned", "checkpoint_seq", "workflow_id", "version", "kind", ...}``."""
    check_id(invocation_id, "invocation_id", error=WorkflowError)
    status = ledger.workflow_invocation_status(invocation_id)
    return {
        "invocation_id": status.invocation_id,
        "workflow_id": status.workflow_id,
        "version": status.version,
        "kind": status.kind,
        "state": status.state,
        "phase": status.state,
        "owned": status.owned,
        "checkpoint_seq": status.checkpoint_seq,
        "result": status.result,
        "updated_at": status.updated_at,
    }


def resume_workflow_invocation(
    invocation_id: str,
    compiled: CompiledWorkflow,
    *,
    ledger: Any,
    resume_input: Any = None,
    lease_ms: int = _DEFAULT_LEASE_MS,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
    **options: Any,
) -> WorkflowRef:
    """Take over a paused or abandoned durable invocation (also after the whole actor system restarted) with the
    workflow reconstructed by the same id, version and kind, and continue it from its last checkpoint.

    Raises:
        WorkflowError: ``not_found``, ``not_resumable``, ``workflow_mismatch``.
        ConcurrencyConflict: ``lease_held`` while another coordinator holds a live lease.
    """
    check_id(invocation_id, "invocation_id", error=WorkflowError)
    check_timeout(timeout, error=WorkflowError)
    check_int(lease_ms, "lease_ms", minimum=1, error=WorkflowError)
    resume_input = check_json(resume_input, "resume_input", error=WorkflowError, reason="invalid_resume_input")
    handle = _system(system)
    compiled = _check_compiled(compiled)
    args = _args(compiled, {}, options)
    owner = f"coordinator:{args.workflow_ref}"
    lease, status = ledger.resume_workflow_invocation(
        invocation_id, owner, lease_ms, workflow_id=compiled.id, version=str(compiled.version), kind=compiled.kind
    )
    checkpoint = status.checkpoint
    durable = DurableArgs(
        ledger=ledger, invocation_id=invocation_id, lease=lease, lease_ms=lease_ms, seq=status.checkpoint_seq
    )
    resumed = _replace(
        args,
        state=dict(status.input or {}) if checkpoint is None else {},
        checkpoint=checkpoint,
        resume_input=resume_input if status.state == "paused" else None,
        durable=durable,
    )
    try:
        return _launch(handle, resumed, timeout)
    except AdkError:
        ledger.release(lease)
        raise


def delete_workflow_invocation(invocation_id: str, *, ledger: Any, force: bool = False) -> bool:
    """Remove a finished (or, with ``force``, any) invocation from the ledger; returns whether it existed."""
    check_id(invocation_id, "invocation_id", error=WorkflowError)
    deleted: bool = ledger.delete_workflow_invocation(invocation_id, force=force)
    return deleted


def _replace(args: WorkflowArgs, **changes: Any) -> WorkflowArgs:
    import dataclasses

    return dataclasses.replace(args, **changes)
