"""Admission decisions as pure logic: global and per-agent limits, reject or a bounded FIFO queue with deadlines.

The actor (``admission/actor.py``) owns one :class:`AdmissionState` and turns messages into calls of it; every
decision is made here, with times passed in, so it is tested without actors or clocks.

Fairness: the queue is FIFO; when capacity frees, the oldest waiting request whose agent has room is granted
(a request for a saturated agent does not block requests for other agents behind it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from adk_actors.errors import ConfigError

__all__ = ["AdmissionConfig", "AdmissionState", "Grant", "Permit", "Reject", "Waiting"]

Overflow = Literal["reject", "queue"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionConfig:
    """Node-wide admission settings (the reference's names; the timeout is milliseconds)."""

    global_limit: int = 256
    default_agent_limit: int = 16
    agent_limits: Mapping[str, int] = field(default_factory=dict)
    overflow: Overflow = "reject"
    max_queue: int = 1024
    default_queue_timeout: int = 30000

    def __post_init__(self) -> None:
        for name in ("global_limit", "default_agent_limit", "max_queue", "default_queue_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_queue" else 1):
                raise ConfigError(
                    f"admission {name} must be a positive integer", reason="invalid_value", details={"key": name}
                )
        if self.overflow not in ("reject", "queue"):
            raise ConfigError(
                "admission overflow must be 'reject' or 'queue'", reason="invalid_value", details={"key": "overflow"}
            )
        for agent, limit in self.agent_limits.items():
            if not isinstance(agent, str) or isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ConfigError(
                    "agent_limits maps agent names to positive integers",
                    reason="invalid_value",
                    details={"key": "agent_limits"},
                )

    def limit_for(self, agent: str) -> int:
        return self.agent_limits.get(agent, self.default_agent_limit)


@dataclass(frozen=True, slots=True)
class Permit:
    """A granted admission; release it exactly once (or let its owner's death release it)."""

    permit_id: str
    agent: str
    owner: int
    """The owner's process id: when that process dies, its permits are released."""


@dataclass(frozen=True, slots=True)
class Grant:
    request_id: str
    permit: Permit


@dataclass(frozen=True, slots=True)
class Reject:
    request_id: str
    reason: str
    """``busy`` (limits reached with overflow=reject, or the queue is full) or ``admission_timeout``."""


@dataclass(frozen=True, slots=True)
class Waiting:
    request_id: str
    position: int


@dataclass(slots=True)
class _Request:
    request_id: str
    agent: str
    owner: int
    deadline: float


@dataclass
class AdmissionState:
    """Permits in use and the waiting queue (owned by one actor)."""

    config: AdmissionConfig
    in_use: dict[str, Permit] = field(default_factory=dict)
    per_agent: dict[str, int] = field(default_factory=dict)
    queue: deque[_Request] = field(default_factory=deque)
    granted_total: int = 0
    rejected_total: int = 0
    released_by_owner_exit: int = 0

    def _has_room(self, agent: str) -> bool:
        return len(self.in_use) < self.config.global_limit and self.per_agent.get(agent, 0) < self.config.limit_for(
            agent
        )

    def _grant(self, request_id: str, agent: str, owner: int) -> Grant:
        permit = Permit(permit_id=request_id, agent=agent, owner=owner)
        self.in_use[permit.permit_id] = permit
        self.per_agent[agent] = self.per_agent.get(agent, 0) + 1
        self.granted_total += 1
        return Grant(request_id, permit)

    def acquire(
        self,
        request_id: str,
        agent: str,
        owner: int,
        now: float,
        *,
        overflow: Overflow | None = None,
        queue_timeout_ms: int | None = None,
        caller_deadline: float | None = None,
    ) -> Grant | Reject | Waiting:
        """Grant at once, queue (FIFO, bounded, with an absolute deadline) or reject with ``busy``.

        A queued request leaves the queue at its queue deadline or at ``caller_deadline`` (when the caller stops
        waiting, e.g. its run timed out), whichever comes first: a request nobody waits for holds no queue slot.
        """
        if self._has_room(agent) and not any(r.agent == agent for r in self.queue):
            return self._grant(request_id, agent, owner)
        mode = overflow or self.config.overflow
        if mode == "reject" or len(self.queue) >= self.config.max_queue:
            self.rejected_total += 1
            return Reject(request_id, "busy")
        timeout = self.config.default_queue_timeout if queue_timeout_ms is None else queue_timeout_ms
        deadline = now + timeout / 1000.0
        if caller_deadline is not None:
            deadline = min(deadline, caller_deadline)
        self.queue.append(_Request(request_id, agent, owner, deadline))
        return Waiting(request_id, len(self.queue))

    def release(self, permit_id: str) -> list[Grant]:
        """Return a permit (unknown ids are ignored: release is idempotent); grant waiting requests."""
        permit = self.in_use.pop(permit_id, None)
        if permit is None:
            return []
        self.per_agent[permit.agent] -= 1
        if not self.per_agent[permit.agent]:
            del self.per_agent[permit.agent]
        return self._drain()

    def cancel(self, request_id: str) -> bool:
        """Withdraw a waiting request (its caller gave up)."""
        for request in self.queue:
            if request.request_id == request_id:
                self.queue.remove(request)
                return True
        return False

    def expire(self, now: float) -> list[Reject]:
        """Reject every waiting request whose deadline has passed."""
        expired = [r for r in self.queue if r.deadline <= now]
        for request in expired:
            self.queue.remove(request)
        self.rejected_total += len(expired)
        return [Reject(r.request_id, "admission_timeout") for r in expired]

    def owner_exited(self, owner: int) -> tuple[list[Permit], list[str], list[Grant]]:
        """The owner process died: release its permits, drop its waiting requests, grant others."""
        released = [p for p in self.in_use.values() if p.owner == owner]
        dropped = [r.request_id for r in self.queue if r.owner == owner]
        self.queue = deque(r for r in self.queue if r.owner != owner)
        grants: list[Grant] = []
        for permit in released:
            grants.extend(self.release(permit.permit_id))
        self.released_by_owner_exit += len(released)
        return released, dropped, grants

    def next_deadline(self) -> float | None:
        return min((r.deadline for r in self.queue), default=None)

    def owners(self) -> set[int]:
        return {p.owner for p in self.in_use.values()} | {r.owner for r in self.queue}

    def _drain(self) -> list[Grant]:
        grants = []
        for request in list(self.queue):
            if len(self.in_use) >= self.config.global_limit:
                break
            if self._has_room(request.agent):
                self.queue.remove(request)
                grants.append(self._grant(request.request_id, request.agent, request.owner))
        return grants

    def snapshot(self) -> dict[str, Any]:
        return {
            "in_use": len(self.in_use),
            "per_agent": dict(sorted(self.per_agent.items())),
            "queued": len(self.queue),
            "granted_total": self.granted_total,
            "rejected_total": self.rejected_total,
            "released_by_owner_exit": self.released_by_owner_exit,
            "global_limit": self.config.global_limit,
            "overflow": self.config.overflow,
        }
