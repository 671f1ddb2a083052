"""A stateful plugin instance: one supervised tier-2 actor per instance, serving one hook call at a time.

Accepts (calls):

* :class:`~adk_actors.plugins.messages.InvokeInstance` — run one hook against the current state; answered with
  the normalized hook result, the shape :func:`~adk_actors.plugins.hooks.run_plugin_hook` answers
  (``{"action": "continue" | "amend" | "return" | "halt" | "failed", "value"?, "reason"?}``). One call is in
  flight at a time; at most ``max_queue`` wait behind it (in arrival order); one more is refused with
  ``PolicyDenied(reason="busy")``.
* :class:`~adk_actors.plugins.messages.AwaitReady` — answered once ``init_state`` has committed the first state.
* ``GetStatus``, ``Ping``.

Emits: ``RunJob`` calls to the worker pool (``init_state`` once, then one job per hook call) and ``CancelJob``
when the instance stops with a job in flight.

The plugin is user code, so it never runs here: ``init_state(config)`` and each hook
``hook(state, context) -> (result, new_state)`` run as worker-pool jobs (:func:`init_state_job`,
:func:`hook_job`) with their deadlines. The plugin is loaded as the plugin core loads it (a class is
instantiated per job: with its configuration when it has a constructor of its own, bare otherwise). A hook gets
a private copy of the committed state (the canonical JSON text, parsed in the worker): changing it changes
nothing unless it is returned and committed. The context is a deep read-only, secret-pruned view, as for
stateless plugins. The new state is committed only when all of these hold:

* the job answered before its deadline (``invocation_timeout_ms``, or the caller's own deadline when sooner);
  an answer that arrives later is dropped;
* the hook returned a valid result (not ``failed``) and a JSON-safe state of at most ``max_state_bytes``;
* the owner is alive. *Alive* means: on the instance's machine, the process ``owner_pid`` still runs and is the
  same process as when the call was admitted (its start time in ``/proc`` is unchanged, so a reused pid does not
  count, and a zombie is dead). An owner on another machine cannot be checked by pid: there the caller's
  deadline stands for its liveness (a caller that gave up no longer gets a commit, see the first point).

The actor is started ``temporary``: if it crashes, or the host it lives in dies, the instance is gone and calls
to it fail (``ActorCrashed``, reason ``noproc``); it is never restarted behind its callers' backs with an empty
state. Whoever needs the instance again starts it again, explicitly.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from adk_actors.content.canonical import canonical_dumps, canonical_loads
from adk_actors.errors import (
    ActorCrashed,
    AdkError,
    AskTimeout,
    ConfigError,
    PolicyDenied,
    ValidationError,
    WorkerError,
)
from adk_actors.logs import log_crash
from adk_actors.plugins.hooks import (
    HOOKS,
    build_plugin,
    call_hook,
    freeze,
    hook_of,
    normalize_result,
    plugin_label,
    thaw,
)
from adk_actors.plugins.messages import AwaitReady, InstanceSpec, InvokeInstance
from adk_actors.runtime.callables import CallableRef
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer, OnReply
from adk_actors.runtime.workers import CancelJob
from adk_actors.secrets import prune_secrets

__all__ = ["JOB_CLASS", "PluginInstance", "hook_job", "init_state_job", "process_identity"]

JOB_CLASS = "plugin"
"""The worker-pool job class of plugin code (its ``RLIMIT_AS`` is the ``default`` class's unless configured)."""

_INIT_JOB = CallableRef.by_name("adk_actors.plugins.instance:init_state_job")
_HOOK_JOB = CallableRef.by_name("adk_actors.plugins.instance:hook_job")


def _failed(reason: str, **extra: Any) -> dict[str, Any]:
    return {"action": "failed", "reason": reason, **extra}


def _state_text(state: Any, max_state_bytes: int) -> tuple[str | None, str]:
    """``(canonical JSON text, "")`` for a committable state, else ``(None, reason)``."""
    try:
        text = canonical_dumps(thaw(state))
        size = len(text.encode("utf-8"))
    except (ValidationError, TypeError, ValueError, RecursionError, UnicodeEncodeError):
        return None, "invalid_plugin_state"
    if size > max_state_bytes:
        return None, "plugin_state_too_large"
    return text, ""


# ---- the worker side ------------------------------------------------------------------------------------------------
def init_state_job(entry: str | bytes, config: Any, max_state_bytes: int) -> str:
    """Run ``init_state(config)`` (in a worker) and return the first state as canonical JSON text; a plugin
    without ``init_state`` starts with ``{}``.

    Raises:
        ValidationError: reason ``invalid_plugin_state`` (not JSON-safe) or ``plugin_state_too_large``.
        ConfigError: reason ``plugin_not_importable`` when the plugin does not load.
    """
    plugin = build_plugin(entry, config)
    init = getattr(plugin, "init_state", None)
    state = call_hook(init, freeze(config)) if callable(init) else {}
    text, problem = _state_text(state, max_state_bytes)
    if text is None:
        raise ValidationError(
            "init_state returned a state that cannot be committed",
            reason=problem,
            details={"max_state_bytes": max_state_bytes},
        )
    return text


def hook_job(
    entry: str | bytes, config: Any, hook: str, state_text: str, context: Any, max_state_bytes: int
) -> dict[str, Any]:
    """Run ``hook(state, context) -> (result, new_state)`` (in a worker) against a private copy of the state.

    Like ``run_plugin_hook`` it never raises for the plugin's own failure (the exception goes to the log only) and
    falls back from a phase error hook to the legacy ``on_error`` (with ``context["phase"]``).

    Returns:
        ``{"result": <normalized result>, "state": <canonical JSON text of the new state> | None}``; ``state`` is
        ``None`` when nothing may be committed. Failed reasons: ``plugin_raised`` (with ``type``),
        ``plugin_not_importable``, ``memory_limit``, ``invalid_plugin_result``, ``plugin_result_too_large``,
        ``invalid_plugin_state``, ``plugin_state_too_large``.
    """
    try:
        plugin = build_plugin(entry, config)  # per job: the instance's state is its JSON state, never attributes
        fn, view = hook_of(plugin, hook, {"hook": hook, **context})
        if fn is None:
            return {"result": {"action": "continue"}, "state": None}
        answer = call_hook(fn, canonical_loads(state_text), freeze(prune_secrets(thaw(view))))
    except ConfigError as err:
        if err.reason == "plugin_not_importable":
            return {"result": _failed("plugin_not_importable"), "state": None}
        return _raised(err, entry, hook)
    except MemoryError:
        return {"result": _failed("memory_limit"), "state": None}
    except Exception as exc:
        return _raised(exc, entry, hook)
    if not (isinstance(answer, tuple | list) and len(answer) == 2):
        return {"result": _failed("invalid_plugin_result"), "state": None}
    result = normalize_result(answer[0])
    if result["action"] == "failed":
        return {"result": result, "state": None}
    text, problem = _state_text(answer[1], max_state_bytes)
    if text is None:
        return {"result": _failed(problem), "state": None}
    return {"result": result, "state": text}


def _raised(exc: Exception, entry: str | bytes, hook: str) -> dict[str, Any]:
    log_crash("adk_actors.plugins", "stateful plugin hook raised", exc, plugin=plugin_label(entry), hook=hook)
    return {"result": _failed("plugin_raised", type=type(exc).__name__[:128]), "state": None}


# ---- owners ---------------------------------------------------------------------------------------------------------
def process_identity(pid: int) -> int | None:
    """An identity of the running process ``pid`` that a later process reusing the pid does not share: its start
    time in clock ticks since boot (``/proc/<pid>/stat`` field 22). ``None`` when it does not run or is a zombie.
    Where ``/proc`` is unreadable, ``0`` for any process that exists (``os.kill(pid, 0)``)."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X"):
            return None
        return int(fields[19])
    except FileNotFoundError:
        return None
    except (OSError, IndexError, ValueError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return 0
    return 0


@dataclass(frozen=True, slots=True)
class _Owner:
    """A call's owner as admitted: checkable by pid only on this machine."""

    pid: int
    local: bool
    identity: int | None

    def alive(self) -> bool:
        if not self.local:
            return True  # another machine: the caller's deadline is the only liveness we can see
        return self.identity is not None and process_identity(self.pid) == self.identity


@dataclass(slots=True)
class _Pending:
    ctx: CallCtx
    hook: str
    context: Any
    owner: _Owner
    job: str | None = None
    """The worker-pool call id while the hook runs (what ``CancelJob`` names)."""
    deadline: float = 0.0
    """The job's absolute deadline: an answer after it is not committed."""


class PluginInstance(GenServer):
    """One stateful plugin instance; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec: InstanceSpec | None = None
        self.phase = "starting"
        self.state_text = "{}"
        self.state_bytes = 2
        self.queue: deque[_Pending] = deque()
        self.running: _Pending | None = None
        self.waiters: list[CallCtx] = []
        self.init_job: str | None = None
        self.hostname = socket.gethostname()
        self.calls = 0
        self.commits = 0
        self.discarded = 0
        self.refused = 0

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        if not isinstance(args, InstanceSpec):
            raise ConfigError("a plugin instance needs an InstanceSpec", reason="invalid_instance_spec")
        self.spec = args
        deadline = time.monotonic() + args.init_timeout_ms / 1000.0
        self.init_job = self.run_job(
            _INIT_JOB,
            (args.plugin, args.config, args.max_state_bytes),
            deadline,
            lambda value, error: self._init_done(value, error, deadline),
            job_class=JOB_CLASS,
        )
        return DEFERRED

    def _init_done(self, value: Any, error: AdkError | None, deadline: float) -> None:
        self.init_job = None
        if self._exiting:
            return
        spec = self.spec
        assert spec is not None
        if error is None and time.monotonic() > deadline:
            error = WorkerError("init_state missed its deadline", reason="job_timeout")
        if error is None and not isinstance(value, str):
            error = ValidationError("init_state returned no state", reason="invalid_plugin_state")
        if error is not None:
            self.phase = "failed"
            for ctx in [*self.waiters, *(pending.ctx for pending in self.queue)]:
                self.fail(ctx, error)
            self.waiters, self.queue = [], deque()
            self.log.warning("plugin instance failed to initialise", instance=spec.id, reason=error.reason)
            self.stop("init_failed")
            return
        assert isinstance(value, str)
        self._commit(value)
        self.phase = "ready"
        for ctx in self.waiters:
            self.reply(ctx, "ready")
        self.waiters = []
        self.ready()
        self._next()

    def terminate(self, reason: str) -> None:
        """Answer every waiting and running call (the instance is going away) and cancel a running job."""
        spec_id = self.spec.id if self.spec is not None else "?"
        error = ActorCrashed(
            "the plugin instance exited", reason="instance_exited", details={"instance": spec_id, "why": reason[:64]}
        )
        running, self.running = self.running, None
        queued, self.queue = list(self.queue), deque()
        waiters, self.waiters = self.waiters, []
        for job in (running.job if running else None, self.init_job):
            if job is not None:
                self.send_to("workers", CancelJob(call_id=job))
        for ctx in [*(p.ctx for p in ([running] if running else [])), *(p.ctx for p in queued), *waiters]:
            self.fail(ctx, error)

    def status(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "kind": "plugin_instance",
            "instance": spec.id if spec is not None else None,
            "plugin": spec.label if spec is not None else None,
            "phase": self.phase,
            "running": self.running is not None,
            "queued": len(self.queue),
            "max_queue": spec.max_queue if spec is not None else 0,
            "calls": self.calls,
            "commits": self.commits,
            "discarded": self.discarded,
            "refused": self.refused,
            "state_bytes": self.state_bytes,
        }

    # ---- calls --------------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        spec = self.spec
        assert spec is not None
        if isinstance(request, InvokeInstance):
            if not isinstance(request.hook, str) or request.hook not in HOOKS:
                raise ValidationError("unknown plugin hook", reason="unknown_hook", details={"instance": spec.id})
            if isinstance(request.owner_pid, bool) or not isinstance(request.owner_pid, int):
                raise ValidationError("owner_pid is a process id", reason="invalid_value", details={"key": "owner_pid"})
            waiting = len(self.queue) + (1 if self.running is not None or self.phase != "ready" else 0)
            if waiting > spec.max_queue:
                self.refused += 1
                raise PolicyDenied(
                    "the plugin instance's queue is full",
                    reason="busy",
                    details={"instance": spec.id, "max_queue": spec.max_queue},
                )
            local = request.owner_host == self.hostname
            owner = _Owner(request.owner_pid, local, process_identity(request.owner_pid) if local else 0)
            self.queue.append(_Pending(ctx, request.hook, request.context, owner))
            self._next()
            return DEFERRED
        if isinstance(request, AwaitReady):
            if self.phase == "ready":
                return "ready"
            self.waiters.append(ctx)
            return DEFERRED
        return super().handle_call(request, ctx)

    def _next(self) -> None:
        """Start the next queued call, if none runs: skip those whose caller gave up or whose owner died."""
        spec = self.spec
        assert spec is not None
        while self.running is None and self.phase == "ready" and self.queue:
            pending = self.queue.popleft()
            now = time.monotonic()
            if now > pending.ctx.deadline or not pending.owner.alive():
                self.discarded += 1
                self.reply(pending.ctx, _failed("owner_down"))  # dropped when the caller has given up
                continue
            pending.deadline = min(now + spec.invocation_timeout_ms / 1000.0, pending.ctx.deadline)
            self.running = pending
            self.calls += 1
            pending.job = self.run_job(
                _HOOK_JOB,
                (spec.plugin, spec.config, pending.hook, self.state_text, pending.context, spec.max_state_bytes),
                pending.deadline,
                self._on_done(pending),
                job_class=JOB_CLASS,
            )

    def _commit(self, text: str) -> None:
        self.state_text = text
        self.state_bytes = len(text.encode("utf-8"))

    def _on_done(self, pending: _Pending) -> OnReply:
        return lambda value, error: self._done(pending, value, error)

    def _done(self, pending: _Pending, value: Any, error: AdkError | None) -> None:
        if self._exiting or self.running is not pending:
            return
        self.running = None
        in_time = time.monotonic() <= pending.deadline
        result: dict[str, Any]
        if error is not None:
            result = _failed(_failure_reason(error))
        elif not in_time:
            result = _failed("plugin_timeout")
        elif not isinstance(value, dict) or not isinstance(value.get("result"), dict):
            result = _failed("invalid_plugin_result")
        else:
            result = value["result"]
            state = value.get("state")
            if isinstance(state, str) and result.get("action") != "failed":
                if pending.owner.alive():
                    self._commit(state)
                    self.commits += 1
                else:
                    self.discarded += 1
        self.reply(pending.ctx, result)
        self._next()


def _failure_reason(error: AdkError) -> str:
    """The ``failed`` reason for a job that answered with an error, as the pipeline names job errors: a tag, never
    the error's text."""
    if isinstance(error, AskTimeout) or error.reason == "job_timeout":
        return "plugin_timeout"
    if error.reason == "memory_limit":
        return "memory_limit"
    return "plugin_failed"
