"""The registry: stable names → current addresses, parked lookups while a name is down, dead-letter redelivery.

Accepts: ``Register``, ``Unregister``, ``Down``, ``Forward`` (tells); calls ``Lookup``, ``GetStatus``, ``Ping``;
Thespian ``DeadEnvelope``s (the system's dead letters, passed on by the root).
Emits: ``Resolved`` to forwarders (so they cache), the forwarded messages themselves.

A lookup of a name that is down (its supervisor reported the exit) or not yet registered is parked until the
name is registered again or the call's deadline passes (then ``NameNotFound``): callers that resolve by name
after a restart reach the new actor instead of a dead address.

A restarted registry starts empty: the root sends ``RegistryMoved`` down the tree and every supervisor and host
re-registers its running named children, and registry messages still addressed to the dead registry reach this
one as dead letters (held by the root until we run; see ``_dead_letter``).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any

from thespian.actors import DeadEnvelope

from adk_actors.errors import ActorCrashed, NameNotFound
from adk_actors.runtime.messages import (
    Call,
    Down,
    Forward,
    GetStatus,
    Lookup,
    Ping,
    Register,
    Resolved,
    ToInner,
    Unregister,
)
from adk_actors.runtime.procs import pid_alive
from adk_actors.runtime.refs import LocalRef, host_name
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["Registry"]

_MAX_PARKED_PER_NAME = 10_000
_VERIFY_S = 0.5
"""How long a suspected actor gets to answer the registry's ping: a crashing actor's process may still exist while
its supervisor re-creates it, and the lookup must not wait out its whole deadline for that ping."""
_MAX_OLD_ADDRESSES = 1_000


@dataclass(slots=True)
class _Parked:
    lookups: list[CallCtx] = field(default_factory=list)
    forwards: list[tuple[Any, float]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Expire:
    name: str


class Registry(GenServer):
    """Name service of one actor system (one per node)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: dict[str, Resolved] = {}
        self.down: set[str] = set()
        self.parked: dict[str, _Parked] = {}
        self.generation = 0
        self.old: list[tuple[Any, str]] = []
        self.redelivered = 0
        self.dead_letters = 0
        self.hostname = socket.gethostname()

    def init(self, args: Any) -> Any:
        # Dead letters reach us through the root, the node's handler: it outlives us and holds them while we are
        # being restarted.
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Lookup):
            entry = self.entries.get(request.name)
            if (
                entry is not None
                and request.exclude is not None
                and entry.address == request.exclude
                and request.name not in self.down
                and self._alive(entry)
            ):
                # The caller saw a failure, not necessarily a death (a lane drops a frame it cannot decode and
                # the caller reads that as noproc): ask the actor before marking its name down for everyone, or
                # a live actor that never restarts stays unresolvable for good.
                self._verify(entry, ctx)
                return DEFERRED
            if entry is not None and request.name not in self.down and self._alive(entry):
                return entry
            self._park(request.name, ctx)
            return DEFERRED
        if isinstance(request, GetStatus | Ping):
            return super().handle_call(request, ctx)
        return super().handle_call(request, ctx)

    def _park(self, name: str, ctx: CallCtx) -> None:
        parked = self.parked.setdefault(name, _Parked())
        if len(parked.lookups) >= _MAX_PARKED_PER_NAME:
            self.fail(
                ctx,
                NameNotFound("too many lookups waiting for this name", reason="name_not_found", details={"name": name}),
            )
            return
        parked.lookups.append(ctx)
        self.start_timer(max(0.0, ctx.deadline - time.monotonic()), _Expire(name))

    def _verify(self, entry: Resolved, ctx: CallCtx) -> None:
        """Answer ``ctx`` with ``entry`` if its actor answers a ping; else mark it down (if it died) and park."""

        def done(_value: Any, error: Any) -> None:
            current = self.entries.get(entry.name)
            if current is None or entry.name in self.down or not self._alive(current):
                self._park(entry.name, ctx)  # answered when the name is registered again
            elif error is None or current.address != entry.address:
                self.reply(ctx, current)  # it answered, or it was re-registered meanwhile
            elif isinstance(error, ActorCrashed):
                self.down.add(entry.name)
                self._park(entry.name, ctx)
            else:
                # A live process that did not answer in time is busy, not dead: the caller retries that address
                # (its own deadline bounds it) and nobody else's lookups are affected.
                self.reply(ctx, current)

        self.call(entry.address, Ping(), min(ctx.deadline, time.monotonic() + _VERIFY_S), done)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, Register):
            old = self.entries.get(message.name)
            if old is not None and old.address != message.address:
                self.old.append((old.address, message.name))
                del self.old[:-_MAX_OLD_ADDRESSES]
            self.generation += 1
            self.entries[message.name] = Resolved(
                name=message.name,
                address=message.address,
                pid=message.pid,
                hostname=message.hostname or self.hostname,
                generation=self.generation,
            )
            self.down.discard(message.name)
            self._flush(message.name)
        elif isinstance(message, Down):
            entry = self.entries.get(message.name)
            if entry is not None and (message.address is None or entry.address == message.address):
                self.down.add(message.name)
        elif isinstance(message, Unregister):
            entry = self.entries.get(message.name)
            if entry is not None and (message.address is None or entry.address == message.address):
                del self.entries[message.name]
                self.down.discard(message.name)
        elif isinstance(message, Forward):
            self._forward(message.name, message.message, message.deadline or time.monotonic() + 30.0, sender)
        elif isinstance(message, DeadEnvelope):
            self._dead_letter(message)
        else:
            super().handle_info(message, sender)

    def _alive(self, entry: Resolved) -> bool:
        """Same-host entries are checked against the process table: a SIGKILLed actor is down at once."""
        if entry.hostname != self.hostname:
            return True
        alive = pid_alive(entry.pid)
        if not alive:
            self.down.add(entry.name)
        return alive

    def _forward(self, name: str, payload: Any, deadline: float, sender: Any) -> None:
        entry = self.entries.get(name)
        if entry is not None and name not in self.down and self._alive(entry):
            self._deliver(entry.address, payload, deadline)
            if sender is not None:
                self.send(sender, entry)
            return
        parked = self.parked.setdefault(name, _Parked())
        if len(parked.forwards) < _MAX_PARKED_PER_NAME:
            parked.forwards.append((payload, deadline))
            self.start_timer(max(0.0, deadline - time.monotonic()), _Expire(name))

    def _deliver(self, address: Any, payload: Any, deadline: float) -> None:
        """Send to an address, or to an inner actor through its host (the registry resolves hosts itself)."""
        if isinstance(address, LocalRef):
            self._forward(
                host_name(address.host_id), ToInner(local_id=address.local_id, message=payload), deadline, None
            )
        else:
            # Thespian, not a lane: with forwards and lookups over lanes the host-SIGKILL admission test failed
            # about one run in two (bisected, cause not found); docs/ARCHITECTURE.md, refinement 8.
            self.send(address, payload)

    def _flush(self, name: str) -> None:
        parked = self.parked.pop(name, None)
        entry = self.entries[name]
        if parked is None:
            return
        now = time.monotonic()
        for ctx in parked.lookups:
            self.reply(ctx, entry)
        for payload, deadline in parked.forwards:
            if now <= deadline:
                self._deliver(entry.address, payload, deadline)

    def handle_timer(self, message: Any) -> None:
        if not isinstance(message, _Expire):
            return
        parked = self.parked.get(message.name)
        if parked is None:
            return
        now = time.monotonic()
        for ctx in [c for c in parked.lookups if c.deadline < now]:
            self.fail(ctx, NameNotFound("no actor registered under that name", details={"name": message.name}))
        parked.lookups = [c for c in parked.lookups if c.deadline >= now]
        parked.forwards = [(p, d) for p, d in parked.forwards if d >= now]
        if not parked.lookups and not parked.forwards:
            del self.parked[message.name]

    def _dead_letter(self, envelope: DeadEnvelope) -> None:
        self.dead_letters += 1
        target = envelope.deadAddress
        message = envelope.deadMessage
        # Sent to a registry that died before us (the sender has not heard of the restart yet): only a registry
        # is sent these, so they are ours. A call is answered only where it names its reply address.
        if isinstance(message, Register | Unregister | Down | Forward):
            self.handle_info(message, None)
            return
        if isinstance(message, Call) and isinstance(message.request, Lookup):
            if message.reply_to is not None:
                self._dispatch(message, None)
            return
        name = next((n for addr, n in reversed(self.old) if addr == target), None)
        if name is None:
            name = next((n for n, e in self.entries.items() if e.address == target), None)
        if name is None:
            self.log.debug("dead letter for an unknown address", message_type=type(envelope.deadMessage).__name__)
            return
        entry = self.entries.get(name)
        if entry is not None and entry.address == target:
            self.down.add(name)
        self.redelivered += 1
        self._forward(name, envelope.deadMessage, time.monotonic() + 30.0, None)

    def status(self) -> dict[str, Any]:
        return {
            "kind": "registry",
            "names": {
                n: {"pid": e.pid, "generation": e.generation, "down": n in self.down}
                for n, e in sorted(self.entries.items())
            },
            "parked": {n: len(p.lookups) + len(p.forwards) for n, p in self.parked.items()},
            "dead_letters": self.dead_letters,
            "redelivered": self.redelivered,
        }
