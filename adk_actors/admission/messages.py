"""Messages of the admission controller."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Acquire", "Release"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Acquire:
    """Ask for a permit for ``agent``; answered with a ``Permit`` once granted (possibly after queueing)."""

    agent: str
    owner_pid: int
    """The process whose death releases the permit (a host for tier-2 runs)."""
    overflow: str = ""
    """Override of the node's overflow policy for this request (``"reject"`` or ``"queue"``; empty: node's)."""
    queue_timeout_ms: int = -1
    """Override of the node's queue timeout in milliseconds (negative: node's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """Return a permit (idempotent). Sent as a tell."""

    permit_id: str
