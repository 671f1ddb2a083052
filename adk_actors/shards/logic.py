"""Pure decisions of the shard router: admitting a call for a scope, and which idle shard to stop (no actors).

A scope with a shard is a *warm* route: its calls join that shard's queue. A scope without one is a *cold* route:
it gets a new shard while fewer than ``max_active_scopes`` run; otherwise the least recently used *idle* shard
(nothing in flight, nothing queued) is stopped to make room; when every shard is busy the call waits in the bounded
cold queue, or is refused when that queue is full (or has no room at all, the default).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["Admission", "ShardLoad", "admit", "idle_expired", "idle_victim"]


@dataclass(frozen=True, slots=True)
class ShardLoad:
    """What the router knows of one running shard, for these decisions."""

    key: Hashable
    busy: bool
    """A call is in flight, queued, or the shard is still starting."""
    last_used: float
    """Monotonic time of its last finished call (or of its start)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """The decision for one call."""

    action: Literal["warm", "start", "evict_then_start", "queue", "refuse"]
    victim: Hashable | None = None
    """For ``evict_then_start``: the idle shard to stop first."""


def idle_victim(shards: Iterable[ShardLoad]) -> Hashable | None:
    """The least recently used idle shard (ties: the first seen), or ``None`` when every shard is busy."""
    best: ShardLoad | None = None
    for shard in shards:
        if not shard.busy and (best is None or shard.last_used < best.last_used):
            best = shard
    return None if best is None else best.key


def admit(
    key: Hashable,
    shards: dict[Hashable, ShardLoad],
    *,
    max_active: int,
    cold_waiting: int,
    cold_queue: int,
) -> Admission:
    """Where a call for ``key`` goes, given the running ``shards`` and the cold calls already waiting.

    A cold route never overtakes cold calls already waiting: while any wait, a new one queues behind them (or is
    refused when the queue is full).
    """
    if key in shards:
        return Admission("warm")
    if cold_waiting == 0:
        if len(shards) < max_active:
            return Admission("start")
        victim = idle_victim(shards.values())
        if victim is not None:
            return Admission("evict_then_start", victim)
    if cold_waiting < cold_queue:
        return Admission("queue")
    return Admission("refuse")


def idle_expired(shards: Iterable[ShardLoad], now: float, idle_timeout: float | None) -> list[Hashable]:
    """The idle shards unused for at least ``idle_timeout`` seconds (none when the timeout is ``None``)."""
    if idle_timeout is None:
        return []
    return [s.key for s in shards if not s.busy and now - s.last_used >= idle_timeout]
