"""The messages of Live sessions and their index: every operation carries the caller's principal (checked against
the session's SHA-256 digest of it, never stored in clear)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adk_actors.live.fanout import LiveEvent

__all__ = [
    "INDEX_ID",
    "LIVE_ACTOR",
    "LiveAck",
    "LiveClose",
    "LiveDropped",
    "LiveInput",
    "LiveMessage",
    "LiveStatus",
    "LiveSubscribe",
    "LiveUnsubscribe",
    "ReleaseSlot",
    "ReserveSlot",
    "live_local_id",
]

LIVE_ACTOR = "adk_actors.live.actor.LiveSessionActor"
INDEX_ID = "live:index"


def live_local_id(session_id: str) -> str:
    return f"live:{session_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveInput:
    """One client input: ``kind`` is ``text``, ``audio``, ``video``, ``activity_start``, ``activity_end``,
    ``audio_stream_end`` or ``tool_response``; ``message`` the encoded wire message; ``size`` its ingress bytes."""

    principal: str
    kind: str
    message: dict[str, Any]
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveSubscribe:
    """Subscribe the caller's endpoint (future-only) with a credit window."""

    principal: str
    subscription_id: str
    messages: int
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveUnsubscribe:
    principal: str
    subscription_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveAck:
    """Acknowledge events ``seqs`` of a subscription, each by its exact sequence (a cast: credit returns, the
    backlog moves)."""

    principal_digest: str
    subscription_id: str
    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveStatus:
    principal: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveClose:
    principal: str
    reason: str = "normal"


@dataclass(frozen=True, slots=True)
class LiveMessage:
    """Events to one subscriber, in sequence order (the events one provider frame or one ACK released)."""

    subscription_id: str
    events: tuple[LiveEvent, ...]


@dataclass(frozen=True, slots=True)
class LiveDropped:
    """A subscriber was removed (``slow_subscriber``, ``session_closed``, ``unsubscribed``); credit-independent."""

    subscription_id: str
    session_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReserveSlot:
    """Ask the index for one of the node's ``live_session_limit`` slots for ``session_id``."""

    session_id: str
    host_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseSlot:
    session_id: str
