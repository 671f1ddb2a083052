"""Messages of the runtime: call envelopes, supervision, registry, router and introspection.

Every message is a frozen, keyword-only dataclass in an importable module, so it pickles across actor processes
(a contract test round-trips every class found here).

A request whose reply type is fixed derives from :class:`Request` parameterised with that type
(``class Ping(Request[str])``), so ``ActorSystemHandle.ask(target, Ping())`` is typed ``str``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from adk_actors.errors import AdkError

__all__ = [
    "Call",
    "ChildExit",
    "ChildReady",
    "Down",
    "DumpProfile",
    "Failure",
    "Forward",
    "GetStatus",
    "Lookup",
    "Ping",
    "Register",
    "RegistryMoved",
    "Reply",
    "Request",
    "Resolved",
    "Route",
    "Shutdown",
    "StartChild",
    "SupInit",
    "TerminateChild",
    "ToInner",
    "Unregister",
]

R_co = TypeVar("R_co", covariant=True)


class Request(Generic[R_co]):
    """Marker base of a request answered with an ``R_co``: typing only (no fields, no state, no run-time cost).

    ``ask`` (``ActorSystemHandle.ask``) returns ``R_co`` for such a request and ``Any`` for any other message.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """A request that expects exactly one ``Reply`` or ``Failure`` with the same ``call_id``."""

    call_id: str
    """Correlation id; replies carrying another id are stale and dropped by the asker."""
    request: Any
    """The request message (a frozen dataclass of the target's protocol)."""
    deadline: float
    """Absolute ``time.monotonic()`` deadline (system-wide on one machine); expired calls are not handled."""
    reply_to: Any = None
    """Address to reply to when it is not the sender (set when a call is forwarded)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """The successful answer to a ``Call``."""

    call_id: str
    value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """The failed answer to a ``Call``: the error travels as data (an ``AdkError`` always pickles)."""

    call_id: str
    error: AdkError


@dataclass(frozen=True, slots=True, kw_only=True)
class SupInit:
    """First message from a supervisor to a child it created: who the parent is and what to start with."""

    parent: Any
    """The supervisor's address."""
    child_id: str
    args: Any = None
    registry: Any = None
    """The registry's address (None for the registry itself)."""
    register_as: str | None = None
    """Name the child registers under once initialised."""
    system_port: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildReady:
    """A child finished ``init``; ordered start proceeds to the next child."""

    child_id: str
    pid: int
    address: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildExit:
    """A child is about to exit and says why (Thespian's ChildActorExited carries no reason)."""

    child_id: str
    reason: str
    """``"normal"``, ``"shutdown"``, ``"crash"`` or ``"escalated"``."""
    error: dict[str, Any] | None = None
    """Bounded structural error (type, reason), never exception text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Shutdown:
    """Ask a supervisor (or any server) to stop its children in reverse order and exit normally."""

    reason: str = "shutdown"


@dataclass(frozen=True, slots=True, kw_only=True)
class StartChild:
    """Start a dynamic child (simple_one_for_one) or add a child spec (other strategies)."""

    spec: Any
    """A ``ChildSpec``; for simple_one_for_one, ``spec.args`` is used with the template."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminateChild:
    """Stop one child by id (it is not restarted) and remove it."""

    child_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetStatus(Request[dict[str, Any]]):
    """Introspection: every supervisor, host and server answers with a JSON-safe status dict."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DumpProfile(Request[str | None]):
    """Diagnostics: a tier-1 actor started with ``ADKACTORS_PROFILE_DIR`` set writes its cProfile statistics there
    (``<child id>-<pid>.prof``) and answers with the path (``None`` when it is not profiling)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping(Request[str]):
    """Liveness probe; answered with ``"pong"``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Register:
    """Register ``name`` → ``address`` (a restarted child re-registers; the newest wins)."""

    name: str
    address: Any
    pid: int
    kind: str = "actor"
    hostname: str = ""

    @classmethod
    def here(cls, name: str, address: Any, pid: int, actor: str) -> Register:
        """The registration of an actor of this machine; ``actor`` is its class name or import path."""
        return cls(name=name, address=address, pid=pid, kind=actor.rpartition(".")[2], hostname=socket.gethostname())


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryMoved:
    """The registry was restarted at ``address`` with an empty table: the root tells its children, and every
    supervisor (and host) re-registers its named children there and passes the message down."""

    address: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Unregister:
    name: str
    address: Any = None
    """When given, only an entry still pointing at this address is removed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Down:
    """A supervisor saw a registered child exit: lookups of ``name`` wait for the restart."""

    name: str
    address: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup(Request["Resolved"]):
    """Resolve a name; parked until the name is (re-)registered or the call's deadline passes."""

    name: str
    exclude: Any = None
    """An address the caller saw die: an entry still pointing at it counts as down."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A registry entry: address plus the pid and host that let callers check liveness cheaply."""

    name: str
    address: Any
    pid: int
    hostname: str
    generation: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Forward:
    """Deliver ``message`` to the actor registered as ``name`` (waits for a registration if it is down)."""

    name: str
    message: Any
    deadline: float = field(default=0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """Router: fire-and-forget delivery of ``message`` to ``target`` (an address or a registered name)."""

    target: Any
    message: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToInner:
    """Deliver ``message`` to inner actor ``local_id`` of the receiving host."""

    local_id: str
    message: Any
