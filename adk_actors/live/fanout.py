"""Live subscribers as pure logic: per-subscriber credit, acknowledgement, bounded backlog, slow-subscriber removal.

Every subscriber has a *credit window* (``messages``, ``bytes``): events it has been sent and not yet acknowledged
by their exact sequence. Events beyond the window wait in that subscriber's own backlog, bounded by the session's
``max_subscriber_messages`` / ``max_subscriber_bytes``; a subscriber whose backlog would pass a bound is removed
(``slow_subscriber``) and told so by a credit-independent message, so one slow reader never stalls the others or
grows the session's memory. Delivery is future-only: a new subscriber sees events published after it joined.

An interruption purges the queued (not yet sent) output audio of the interrupted generation from every backlog.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fanout", "LiveEvent", "Subscriber"]


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One event of a Live session, as subscribers receive it.

    ``kind`` is one of ``ready``, ``audio``, ``text``, ``thought``, ``output_transcription``,
    ``input_transcription``, ``tool_call``, ``tool_call_cancellation``, ``tool_result``, ``interrupted``,
    ``generation_complete``, ``turn_complete``, ``usage``, ``grounding``, ``go_away``, ``resuming``, ``resumed``,
    ``inputs_dropped``, ``error``, ``terminal``. ``payload`` is JSON-safe; ``data`` carries the PCM bytes of an
    ``audio`` event (s16le mono 24 kHz), never persisted.
    """

    session_id: str
    seq: int
    kind: str
    payload: dict[str, Any]
    data: bytes | None = None
    generation: int = 0

    @property
    def size(self) -> int:
        """The bytes this event counts against credit (its audio plus a flat estimate of its payload)."""
        return (len(self.data) if self.data else 0) + 64 + _payload_size(self.payload)


def _payload_size(payload: dict[str, Any]) -> int:
    total = 0
    for key, value in payload.items():
        total += len(key) + (len(value) if isinstance(value, str | bytes) else 16)
    return total


@dataclass(slots=True)
class Subscriber:
    sub_id: str
    target: Any
    window_messages: int
    window_bytes: int
    inflight: dict[int, int] = field(default_factory=dict)
    inflight_bytes: int = 0
    backlog: deque[LiveEvent] = field(default_factory=deque)
    backlog_bytes: int = 0
    delivered: int = 0

    def has_credit(self, size: int) -> bool:
        if not self.inflight:
            return True  # one event always fits, even one larger than the byte window
        return len(self.inflight) < self.window_messages and self.inflight_bytes + size <= self.window_bytes


class Fanout:
    """The subscribers of one session; returns the ``(target, event)`` sends to make (the actor makes them)."""

    def __init__(self, *, max_subscribers: int, max_backlog_messages: int, max_backlog_bytes: int) -> None:
        self.max_subscribers = max_subscribers
        self.max_backlog_messages = max_backlog_messages
        self.max_backlog_bytes = max_backlog_bytes
        self.subs: dict[str, Subscriber] = {}
        self.dropped = 0

    def __len__(self) -> int:
        return len(self.subs)

    def add(self, sub: Subscriber) -> bool:
        """Admit ``sub``; ``False`` at the subscriber limit (or when its id is taken)."""
        if len(self.subs) >= self.max_subscribers or sub.sub_id in self.subs:
            return False
        self.subs[sub.sub_id] = sub
        return True

    def remove(self, sub_id: str) -> Subscriber | None:
        return self.subs.pop(sub_id, None)

    def publish(self, event: LiveEvent) -> tuple[list[tuple[Subscriber, LiveEvent]], list[Subscriber]]:
        """Offer ``event`` to every subscriber: the sends to make now, and the subscribers removed as slow."""
        sends: list[tuple[Subscriber, LiveEvent]] = []
        slow: list[Subscriber] = []
        size = event.size
        for sub in list(self.subs.values()):
            if not sub.backlog and sub.has_credit(size):
                self._send(sub, event, size, sends)
                continue
            if len(sub.backlog) + 1 > self.max_backlog_messages or sub.backlog_bytes + size > self.max_backlog_bytes:
                self.subs.pop(sub.sub_id, None)
                self.dropped += 1
                slow.append(sub)
                continue
            sub.backlog.append(event)
            sub.backlog_bytes += size
        return sends, slow

    def ack(self, sub_id: str, seq: int) -> list[tuple[Subscriber, LiveEvent]]:
        """Acknowledge ``seq`` for ``sub_id`` (exact sequence); returns the backlog events that now fit."""
        sub = self.subs.get(sub_id)
        if sub is None:
            return []
        size = sub.inflight.pop(seq, None)
        if size is None:
            return []
        sub.inflight_bytes -= size
        sends: list[tuple[Subscriber, LiveEvent]] = []
        while sub.backlog and sub.has_credit(sub.backlog[0].size):
            event = sub.backlog.popleft()
            sub.backlog_bytes -= event.size
            self._send(sub, event, event.size, sends)
        return sends

    def purge_audio(self, generation: int) -> int:
        """Drop queued ``audio`` events of ``generation`` from every backlog; returns how many were dropped."""
        purged = 0
        for sub in self.subs.values():
            if not sub.backlog:
                continue
            kept = deque(e for e in sub.backlog if not (e.kind == "audio" and e.generation == generation))
            purged += len(sub.backlog) - len(kept)
            sub.backlog = kept
            sub.backlog_bytes = sum(e.size for e in kept)
        return purged

    @staticmethod
    def _send(sub: Subscriber, event: LiveEvent, size: int, sends: list[tuple[Subscriber, LiveEvent]]) -> None:
        sub.inflight[event.seq] = size
        sub.inflight_bytes += size
        sub.delivered += 1
        sends.append((sub, event))

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "subscription_id": s.sub_id,
                "inflight": len(s.inflight),
                "backlog": len(s.backlog),
                "backlog_bytes": s.backlog_bytes,
                "delivered": s.delivered,
            }
            for s in self.subs.values()
        ]
