"""OTP supervisors on Thespian: one_for_one, one_for_all, rest_for_one, simple_one_for_one.

Accepts: ``SupInit`` (args: :class:`SupervisorSpec`), ``ChildReady``, ``ChildExit``, ``ChildActorExited``,
calls ``StartChild`` / ``TerminateChild`` / ``GetStatus`` / ``Ping``, and ``Shutdown``.
Emits: ``SupInit`` to each child it creates, ``Down`` to the registry for registered children that exit,
``ChildReady`` / ``ChildExit`` to its own parent.

Children start in order (the next is created when the previous reports ``ChildReady``) and stop in reverse
order, each within its ``shutdown`` timeout or killed (``"brutal_kill"`` kills at once). Restart decisions and
the intensity window are the pure functions of ``runtime/restart.py``. Past the window the supervisor stops
its children in reverse order and exits with reason ``escalated``, which its own parent sees as a failure.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from adk_actors.errors import AdkError, ConfigError
from adk_actors.runtime.messages import (
    ChildExit,
    ChildReady,
    Down,
    GetStatus,
    Ping,
    Register,
    RegistryMoved,
    Shutdown,
    StartChild,
    SupInit,
    TerminateChild,
)
from adk_actors.runtime.procs import pid_alive
from adk_actors.runtime.restart import RestartType, Strategy, Window, restart_group, should_restart
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["ChildSpec", "Supervisor", "SupervisorSpec"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSpec:
    """How to start, restart and stop one child (frozen, picklable)."""

    id: str
    actor: str
    """Importable ``"package.module.Class"`` of a :class:`~adk_actors.runtime.server.GenServer` subclass."""
    args: Any = None
    restart: RestartType = "permanent"
    shutdown: float | Literal["brutal_kill", "infinity"] = 5.0
    """Seconds to wait for a graceful exit before SIGKILL; ``"brutal_kill"`` kills at once."""
    kind: Literal["worker", "supervisor"] = "worker"
    register_as: str | None = None
    """Registry name the child (re-)registers under after every start."""

    def __post_init__(self) -> None:
        if not self.id or "." not in self.actor:
            raise ConfigError(
                "child spec needs an id and an importable actor path",
                reason="invalid_child_spec",
                details={"id": self.id},
            )
        if self.restart not in ("permanent", "transient", "temporary"):
            raise ConfigError("unknown restart type", reason="invalid_child_spec", details={"id": self.id})


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorSpec:
    """A supervisor's strategy, intensity window and (static) children."""

    strategy: Strategy = "one_for_one"
    intensity: int = 3
    period: float = 5.0
    children: tuple[ChildSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.strategy not in ("one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one"):
            raise ConfigError(
                "unknown strategy", reason="invalid_supervisor_spec", details={"strategy": str(self.strategy)}
            )
        if self.intensity < 0 or self.period <= 0:
            raise ConfigError("intensity must be >= 0 and period > 0", reason="invalid_supervisor_spec")
        ids = [c.id for c in self.children]
        if len(ids) != len(set(ids)):
            raise ConfigError("duplicate child id", reason="invalid_supervisor_spec")


@dataclass(slots=True)
class _Child:
    spec: ChildSpec
    address: Any = None
    pid: int = 0
    state: str = "pending"  # pending | starting | running | stopping | stopped
    restarts: int = 0
    exit_reason: str | None = None
    waiters: list[CallCtx] = field(default_factory=list)
    kill_timer: int | None = None


@dataclass(frozen=True, slots=True)
class _KillChild:
    child_id: str
    address: Any


@dataclass(frozen=True, slots=True)
class _Recheck:
    pass


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    mod = __import__(module, fromlist=[name])
    return getattr(mod, name)


class Supervisor(GenServer):
    """A supervisor actor; configure it with a :class:`SupervisorSpec` in ``SupInit.args``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = SupervisorSpec()
        self.children: dict[str, _Child] = {}
        self.order: list[str] = []
        self.window = Window(3, 5.0)
        self.total_restarts = 0
        self._start_queue: list[str] = []
        self._stop_queue: list[str] = []
        self._after_stop: Any = None
        self._announced = False
        self._escalating = False

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    def init(self, args: Any) -> Any:
        spec = args if isinstance(args, SupervisorSpec) else SupervisorSpec()
        self.spec = spec
        self.window = Window(spec.intensity, spec.period)
        for child in spec.children:
            self.children[child.id] = _Child(child)
            self.order.append(child.id)
        self._start_queue = list(self.order)
        self._start_next()
        return DEFERRED

    def _announce(self) -> None:
        if not self._announced:
            self._announced = True
            self.ready()

    def _start_next(self) -> None:
        while self._start_queue:
            child = self.children.get(self._start_queue[0])
            if child is None or child.state in ("running",):
                self._start_queue.pop(0)
                continue
            if child.state == "starting":
                return
            self._create(child)
            return
        self._announce()

    def _create(self, child: _Child) -> None:
        child.state = "starting"
        child.exit_reason = None
        child.address = self.createActor(_import(child.spec.actor))
        self.send(
            child.address,
            SupInit(
                parent=self.myAddress,
                child_id=child.spec.id,
                args=child.spec.args,
                registry=self._registry_for(child),
                register_as=child.spec.register_as,
                system_port=self._system_port,
            ),
        )

    def _registry_for(self, child: _Child) -> Any:
        return self._registry

    # ---- messages -----------------------------------------------------------------------------------------------
    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildReady):
            child = self.children.get(message.child_id)
            if child is None or child.state != "starting":
                return
            child.state, child.pid = "running", message.pid
            for ctx in child.waiters:
                self.reply(ctx, child.address)
            child.waiters.clear()
            if self._start_queue and self._start_queue[0] == child.spec.id:
                self._start_queue.pop(0)
            self._start_next()
        elif isinstance(message, ChildExit):
            child = self.children.get(message.child_id)
            if child is not None:
                child.exit_reason = message.reason
        elif isinstance(message, RegistryMoved):
            self.registry_moved(message)
        else:
            super().handle_info(message, sender)

    def registry_moved(self, message: RegistryMoved) -> None:
        """Rebuild the restarted registry's table from what we know (a running child's name, address and pid), so
        lookups resolve at once instead of waiting for each child to restart, and pass the news down the tree."""
        self._registry = message.address
        for cid in self.order:
            child = self.children[cid]
            if child.state != "running" or child.address is None or child.address == message.address:
                continue
            if child.spec.register_as:
                self._port.send(
                    message.address,
                    Register.here(child.spec.register_as, child.address, child.pid, child.spec.actor),
                )
            self._port.send(child.address, message)

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, StartChild):
            return self._start_child(request.spec, ctx)
        if isinstance(request, TerminateChild):
            return self._terminate_child(request.child_id, ctx)
        if isinstance(request, GetStatus | Ping):
            return super().handle_call(request, ctx)
        return super().handle_call(request, ctx)

    def handle_info_shutdown(self, message: Shutdown) -> None:
        self._stop_all_then(lambda: self._exit(message.reason, None))

    def _dispatch(self, message: Any, sender: Any) -> None:
        if isinstance(message, Shutdown):
            self.handle_info_shutdown(message)
            return
        super()._dispatch(message, sender)

    def _start_child(self, spec: Any, ctx: CallCtx) -> Any:
        if not isinstance(spec, ChildSpec):
            raise ConfigError("StartChild needs a ChildSpec", reason="invalid_child_spec")
        if spec.id in self.children:
            raise AdkError("a child with that id exists", reason="already_started", details={"id": spec.id})
        if self._escalating:
            raise AdkError("supervisor is shutting down", reason="shutting_down")
        child = _Child(spec)
        child.waiters.append(ctx)
        self.children[spec.id] = child
        self.order.append(spec.id)
        self._create(child)
        return DEFERRED

    def _terminate_child(self, child_id: str, ctx: CallCtx) -> Any:
        child = self.children.get(child_id)
        if child is None:
            raise AdkError("no such child", reason="not_found", details={"id": child_id})
        if child.state in ("stopped", "pending"):
            self._remove(child_id)
            return "ok"
        child.waiters.append(ctx)
        self._stop_child(child)
        return DEFERRED

    def _remove(self, child_id: str) -> None:
        self.children.pop(child_id, None)
        if child_id in self.order:
            self.order.remove(child_id)

    # ---- exits and restarts ---------------------------------------------------------------------------------------
    def _find(self, address: Any) -> _Child | None:
        for child in self.children.values():
            if child.address is not None and child.address == address:
                return child
        return None

    def handle_child_exited(self, address: Any) -> None:
        child = self._find(address)
        if child is not None:
            self._child_gone(child, address)
        self._reap_dead(states=("stopping",))
        # Running children found dead are reaped a little later, after any ChildExit they sent is handled.
        self.start_timer(0.05, _Recheck())

    def _reap_dead(self, states: tuple[str, ...] = ("running", "stopping")) -> None:
        """Thespian may report a child under an address that does not compare equal to the one createActor
        returned (or miss it when several die at once); the process table is the ground truth."""
        for child in list(self.children.values()):
            if child.address is not None and child.pid and child.state in states and not pid_alive(child.pid):
                self._child_gone(child, child.address)

    def _child_gone(self, child: _Child, address: Any) -> None:
        reason = child.exit_reason or "killed"
        if child.kill_timer is not None:
            self.cancel_timer(child.kill_timer)
            child.kill_timer = None
        if child.spec.register_as and self._registry is not None:
            self.send(self._registry, Down(name=child.spec.register_as, address=address))
        was_stopping = child.state == "stopping"
        child.state, child.address, child.pid = "stopped", None, 0
        if was_stopping:
            for ctx in child.waiters:
                self.reply(ctx, "ok")
            if child.waiters:
                child.waiters.clear()
                self._remove(child.spec.id)
            self._continue_stop()
            return
        for ctx in child.waiters:  # died while starting
            self.fail(
                ctx,
                AdkError(
                    "child exited during start", reason="start_failed", details={"id": child.spec.id, "exit": reason}
                ),
            )
        child.waiters.clear()
        if self._escalating:
            return
        self._on_failure(child, reason)

    def _on_failure(self, child: _Child, reason: str) -> None:
        if not should_restart(child.spec.restart, reason):
            if self.spec.strategy == "simple_one_for_one" or child.spec.restart == "temporary":
                self._remove(child.spec.id)
            return
        self.window, exceeded = self.window.record(time.monotonic())
        if exceeded:
            self.log.warning("restart intensity exceeded", supervisor=self._child_id, child=child.spec.id)
            self._escalating = True
            self._stop_all_then(lambda: self._exit("escalated", {"type": "RestartIntensity", "where": self._child_id}))
            return
        self.total_restarts += 1
        child.restarts += 1
        group = restart_group(self.spec.strategy, self.order, child.spec.id)
        others = [cid for cid in group if cid != child.spec.id]

        def restart() -> None:
            for cid in group:
                if cid in self.children and cid not in self._start_queue:
                    self._start_queue.append(cid)
            self._start_queue.sort(key=self.order.index)
            self._start_next()

        if others:
            for cid in others:
                if self.children[cid].state != "stopped":
                    self.children[cid].restarts += 1
            self._stop_sequence([cid for cid in others if self.children[cid].state != "stopped"], restart)
        else:
            restart()

    # ---- stopping ---------------------------------------------------------------------------------------------
    def _stop_all_then(self, then: Any) -> None:
        self._start_queue.clear()
        live = [cid for cid in self.order if self.children[cid].state in ("starting", "running", "stopping")]
        self._stop_sequence(live, then)

    def _stop_sequence(self, ids: list[str], then: Any) -> None:
        """Stop ``ids`` one at a time in reverse start order, then call ``then``."""
        self._stop_queue = sorted(ids, key=self.order.index)
        self._after_stop = then
        self._continue_stop()

    def _continue_stop(self) -> None:
        while self._stop_queue:
            cid = self._stop_queue[-1]
            child = self.children.get(cid)
            if child is None or child.state == "stopped":
                self._stop_queue.pop()
                continue
            if child.state != "stopping":
                self._stop_child(child)
            return
        then, self._after_stop = self._after_stop, None
        if then is not None:
            then()

    def _stop_child(self, child: _Child) -> None:
        child.state = "stopping"
        if child.spec.shutdown == "brutal_kill":
            self._kill(child)
            return
        if child.spec.kind == "supervisor":
            self.send(child.address, Shutdown(reason="shutdown"))
        else:
            from thespian.actors import ActorExitRequest

            self.send(child.address, ActorExitRequest())
        if child.spec.shutdown != "infinity":
            child.kill_timer = self.start_timer(float(child.spec.shutdown), _KillChild(child.spec.id, child.address))

    def _kill(self, child: _Child) -> None:
        if child.pid:
            try:
                os.kill(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for delay in (0.05, 0.5, 2.0):  # see GenServer.recheck_children
                self.start_timer(delay, _Recheck())
        else:
            from thespian.actors import ActorExitRequest

            self.send(child.address, ActorExitRequest())

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, _Recheck):
            self._reap_dead()
            if any(c.state == "stopping" for c in self.children.values()):
                self.recheck_children()
            return
        if isinstance(message, _KillChild):
            child = self.children.get(message.child_id)
            if child is not None and child.state == "stopping" and child.address == message.address:
                child.kill_timer = None
                self.log.warning("child did not stop in time; killing", child=message.child_id)
                self._kill(child)
            return
        super().handle_timer(message)

    def terminate(self, reason: str) -> None:
        # Thespian stops our children when we exit; a SIGKILLed supervisor's children exit by PDEATHSIG.
        pass

    def status(self) -> dict[str, Any]:
        return {
            "kind": "supervisor",
            "strategy": self.spec.strategy,
            "intensity": self.spec.intensity,
            "period": self.spec.period,
            "restarts": self.total_restarts,
            "children": [
                {
                    "id": cid,
                    "state": c.state,
                    "restarts": c.restarts,
                    "pid": c.pid,
                    "kind": c.spec.kind,
                    "actor": c.spec.actor,
                    "register_as": c.spec.register_as,
                    "address": c.address,
                }
                for cid in self.order
                if (c := self.children[cid]) is not None
            ],
        }
