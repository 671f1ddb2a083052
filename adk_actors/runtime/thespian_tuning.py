"""Two changes to Thespian's TCP transport, applied in every process of ours that runs it.

**Listeners bind the advertised address only.** Thespian binds every listening socket it makes (the admin's, each
actor's, the logger's and an external endpoint's) to ``''`` — all interfaces — and advertises
``THESPIAN_BASE_IPADDR``. Those ports unpickle whatever arrives, so a wildcard bind lets anyone who reaches the
machine run code as the node's user. :func:`apply` makes an address's bind arguments its own advertised address
(``bind_ip``, loopback by default), which covers every listener because they all bind through ``bindArgs``.

**One poll per pass.**
Thespian's ``TCPTransport`` builds a new ``selectors.DefaultSelector()`` on every pass of its loop (its own comment
says "perhaps this could be optimized"). On Linux that is an epoll object: ``epoll_create``, one ``epoll_ctl`` per
socket, the wait and a ``close`` — for one wait. The profile of a host serving prompt turns put a fifth of its main
thread there. :class:`OnePoll` makes the same wait one ``poll(2)`` call, with registration reduced to what the
transport uses (fd, read/write interest; ready keys with ``.fd``) and the readiness mapping of the standard
``PollSelector`` (anything but plain POLLIN also counts as writable, anything but plain POLLOUT as readable).
Only the transport module's view of ``selectors`` changes (asyncio and everything else keep their defaults).
"""

from __future__ import annotations

import os
import select
import selectors
import types
from typing import Any, NamedTuple

__all__ = ["ENV", "OnePoll", "apply", "bound_address"]

ENV = "ADKACTORS_THESPIAN_EPOLL"
"""Set to ``1`` to keep Thespian's own per-pass epoll selector (for A/B measurements)."""


class _Key(NamedTuple):
    fd: int
    events: int


class OnePoll:
    """A single-use selector over ``select.poll`` for Thespian's transport loop (see the module docstring)."""

    __slots__ = ("_fds", "_poll")

    def __init__(self) -> None:
        self._poll = select.poll()
        self._fds: dict[int, int] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> _Key:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd < 0:
            raise ValueError(f"Invalid file descriptor: {fd}")
        if fd in self._fds:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        self._fds[fd] = events
        self._poll.register(fd, (select.POLLIN if events & selectors.EVENT_READ else 0)
                            | (select.POLLOUT if events & selectors.EVENT_WRITE else 0))
        return _Key(fd, events)

    def select(self, timeout: float | None = None) -> list[tuple[_Key, int]]:
        if timeout is None:
            wait = None
        elif timeout <= 0:
            wait = 0
        else:
            wait = max(1, int(timeout * 1000 + 0.999))  # poll(2) takes ms; round up, as PollSelector does
        try:
            ready = self._poll.poll(wait)
        except InterruptedError:
            return []
        out = []
        for fd, event in ready:
            events = 0
            if event & ~select.POLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.POLLOUT:
                events |= selectors.EVENT_READ
            wanted = self._fds.get(fd, 0)
            if events & wanted:
                out.append((_Key(fd, wanted), events & wanted))
        return out

    def close(self) -> None:
        self._fds.clear()


def bound_address(address: Any) -> tuple[tuple[str, int]]:
    """The bind arguments of a Thespian IP address: its advertised host, never the wildcard ``''``."""
    host, port = address.bindname[:2]
    return ((host or address.sockname[0], port),)


def apply() -> None:
    """Install both changes (idempotent). Call before the admin forks, so every actor process inherits them."""
    from thespian.system.transport import IPBase
    from thespian.system.transport import TCPTransport as transport

    if not getattr(IPBase, "_adk_bound", False):
        # ``bindname`` stays as Thespian made it: it is also read as a peer address when guessing our own IP.
        IPBase.IPActorAddress.bindArgs = property(bound_address)
        IPBase._adk_bound = True
    if os.environ.get(ENV) == "1":
        return
    if getattr(transport, "_adk_poll_selector", False):
        return
    view = types.ModuleType("selectors")
    view.__dict__.update(vars(selectors))
    view.DefaultSelector = OnePoll  # type: ignore[attr-defined]
    transport.selectors = view
    transport._adk_poll_selector = True
