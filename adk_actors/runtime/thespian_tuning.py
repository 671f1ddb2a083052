"""One change to how Thespian's TCP transport waits, applied in every process of ours that runs it.

Thespian's ``TCPTransport`` builds a new ``selectors.DefaultSelector()`` on every pass of its loop (its own comment
says "perhaps this could be optimized"). On Linux that is an epoll object: ``epoll_create``, one ``epoll_ctl`` per
socket, the wait and a ``close`` — for one wait. The profile of a host serving prompt turns put a fifth of its main
thread there. A ``PollSelector`` makes the same wait one ``poll(2)`` call. Only the transport module's view of
``selectors`` changes (asyncio and everything else keep their defaults); semantics are the same for this use (read
and write registrations, a timeout, close).
"""

from __future__ import annotations

import os
import selectors
import types

__all__ = ["ENV", "apply"]

ENV = "ADKACTORS_THESPIAN_EPOLL"
"""Set to ``1`` to keep Thespian's own per-pass epoll selector (for A/B measurements)."""


def apply() -> None:
    """Point Thespian's TCP transport at ``PollSelector`` (idempotent)."""
    from thespian.system.transport import TCPTransport as transport

    if os.environ.get(ENV) == "1":
        return
    if getattr(transport, "_adk_poll_selector", False):
        return
    view = types.ModuleType("selectors")
    view.__dict__.update(vars(selectors))
    view.DefaultSelector = selectors.PollSelector  # type: ignore[attr-defined]
    transport.selectors = view
    transport._adk_poll_selector = True
