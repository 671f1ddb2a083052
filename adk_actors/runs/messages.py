"""Messages of the run actor and the run index."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INDEX_NAME",
    "AckRun",
    "CancelRun",
    "IndexLookup",
    "IndexWait",
    "ListRuns",
    "RunFinished",
    "RunMessage",
    "RunOptions",
    "RunStarted",
    "RunStatus",
    "SubscribeRun",
    "UnsubscribeRun",
    "WaitRun",
]

INDEX_NAME = "runs"
"""The name the node's run index actor is registered under."""

MAX_LIST_RUNS = 1000
"""The most runs one ``ListRuns`` answers with, whatever its ``limit``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    retention_ms: int = 60000
    """How long a finished run stays queryable (status, wait, late subscribers)."""
    max_buffered_events: int = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStatus:
    """Ask the run for its status."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitRun:
    """Answered with the terminal outcome once there is one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeRun:
    """Deliver the run's messages after ``after_seq`` to ``subscriber`` (default: the caller's endpoint)."""

    subscriber: Any
    subscription_id: str
    after_seq: int = 0
    credit: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AckRun:
    """Credit mode: the subscriber consumed message ``seq``."""

    subscription_id: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsubscribeRun:
    subscription_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRun:
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMessage:
    """One delivery to a subscriber (an event, a replay gap, or the terminal outcome)."""

    run_id: str
    subscription_id: str
    seq: int
    item: Any
    terminal: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    """Run actor → index: a run is live on ``host_id`` (whose process is ``host_pid``)."""

    run_id: str
    host_id: int
    host_pid: int
    retention_ms: int = 60000
    parent_run_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    """Run actor → index: the terminal outcome."""

    run_id: str
    outcome: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexLookup:
    run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexWait:
    """Answered with the run's outcome once the index knows it (e.g. ``Failed("host_lost")``)."""

    run_id: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListRuns:
    """Ask the run index for its newest runs (running and retained), newest first.

    Answered with ``{"runs": [{"run_id", "host_id", "state", "age_s", "parent_run_id", "reason"}], "total",
    "running"}``: ``total`` and ``running`` count every run the index holds, ``runs`` is bounded.
    """

    limit: int = 100
    """At most this many runs (capped at ``MAX_LIST_RUNS``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeRun:
    """Claim a paused run for a resume into the run ``new_run_id``; answered with the new run's body.

    The paused run stays immutable apart from ``resumed_to``; a second claim fails with ``already_resumed``.
    """

    new_run_id: str
    response: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class OnHostLost:
    """Ask the run index to send ``message`` to ``target`` if the run's host dies before the run finishes (how a
    Runner run stops its agent's invocation — and frees its permit — when the run itself is lost)."""

    run_id: str
    target: Any
    message: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class OnProcessLost:
    """Ask the run index to send ``message`` to ``target`` if process ``pid`` (one the run depends on, e.g. the
    agent's host) dies while the run is still running."""

    run_id: str
    pid: int
    target: Any
    message: Any
