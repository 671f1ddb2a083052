"""Stable runs as pure logic: outcomes, the bounded replay log, and push / credit subscriptions.

A run's history is a sequence of numbered messages: events (``seq`` 1, 2, ...) and exactly one terminal outcome
(the last sequence number). The log keeps at most ``max_buffered_events`` events; a subscriber asking to resume
from a sequence that has been dropped gets an explicit :class:`ReplayGap` first — never a silent skip.

Subscriptions:

* *push*: every message from ``after_seq + 1`` on, replay first, then live, then the terminal.
* *credit*: at most one unacknowledged message per subscriber; :meth:`CreditSubscription.ack` of the message in
  flight releases the next one. A slow consumer therefore costs the run one buffered message per subscriber,
  not a queue.

The run actor owns one :class:`RunLog` and its subscriptions and turns their decisions into sends; tests drive
them directly.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import RunError

__all__ = [
    "Cancelled",
    "Completed",
    "CreditSubscription",
    "Delivery",
    "Failed",
    "Outcome",
    "Paused",
    "PushSubscription",
    "ReplayGap",
    "RunLog",
]


@dataclass(frozen=True, slots=True)
class Completed:
    """The run finished; ``output`` is the final response (text or content), exactly once."""

    output: Any


@dataclass(frozen=True, slots=True)
class Paused:
    """The run paused (approval, long-running tool); ``event`` is the pause event."""

    event: Any


@dataclass(frozen=True, slots=True)
class Cancelled:
    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    """The run failed with a structural ``reason`` (``host_lost``, ``timeout``, a provider reason ...)."""

    reason: str
    details: dict[str, Any] = field(default_factory=dict)


Outcome = Completed | Paused | Cancelled | Failed


@dataclass(frozen=True, slots=True)
class ReplayGap:
    """Messages ``from_seq .. resumes_at - 1`` were dropped from the bounded log before this subscriber asked."""

    from_seq: int
    resumes_at: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message for one subscriber: an event, the terminal outcome, or a replay gap."""

    seq: int
    """The message's sequence number (for a gap: the first sequence that will follow it)."""
    item: Any
    terminal: bool = False


class RunLog:
    """The numbered, bounded history of one run with exactly one terminal outcome."""

    def __init__(self, max_buffered_events: int = 256) -> None:
        if max_buffered_events < 1:
            raise RunError(
                "max_buffered_events must be >= 1",
                reason="invalid_run_options",
                details={"max_buffered_events": max_buffered_events},
            )
        self.max_buffered_events = max_buffered_events
        self.events: deque[tuple[int, Any]] = deque()
        self.last_seq = 0
        self.outcome: Outcome | None = None
        self.terminal_seq = 0
        self.dropped = 0

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def first_buffered(self) -> int:
        """The lowest sequence still replayable (the terminal always is)."""
        if self.events:
            return self.events[0][0]
        return self.terminal_seq or self.last_seq + 1

    def append(self, event: Any) -> int:
        """Add an event; returns its sequence number.

        Raises:
            RunError: ``run_finished`` after the terminal outcome (nothing may follow it).
        """
        if self.outcome is not None:
            raise RunError("the run has finished", reason="run_finished")
        self.last_seq += 1
        self.events.append((self.last_seq, event))
        while len(self.events) > self.max_buffered_events:
            self.events.popleft()
            self.dropped += 1
        return self.last_seq

    def finish(self, outcome: Outcome) -> int | None:
        """Record the terminal outcome; returns its sequence, or None if one was already recorded (first wins)."""
        if self.outcome is not None:
            return None
        self.outcome = outcome
        self.last_seq += 1
        self.terminal_seq = self.last_seq
        return self.terminal_seq

    def start_point(self, after_seq: int) -> int:
        """Where a subscriber asking for what follows ``after_seq`` starts. The terminal outcome is always
        delivered, so a position at or past it (a stale or bogus ``Last-Event-ID``) starts just before it, and a
        position past the newest event of a running run starts at that event (without this, such a subscriber would
        wait for messages that never come)."""
        if self.outcome is not None:
            return min(after_seq, self.terminal_seq - 1)
        return min(after_seq, self.last_seq)

    def replay(self, after_seq: int) -> list[Delivery]:
        """Everything after ``after_seq`` still available: a gap marker first when some of it was dropped."""
        out: list[Delivery] = []
        wanted = after_seq + 1
        first = self.first_buffered
        if wanted < first and wanted <= self.last_seq:
            out.append(Delivery(first, ReplayGap(wanted, first)))
        out.extend(Delivery(seq, event) for seq, event in self.events if seq >= wanted)
        if self.outcome is not None and self.terminal_seq >= wanted:
            out.append(Delivery(self.terminal_seq, self.outcome, terminal=True))
        return out


@dataclass
class PushSubscription:
    """Everything after ``after_seq``, as fast as it comes (for consumers that always drain)."""

    subscriber: Any
    after_seq: int = 0

    def pending(self, log: RunLog) -> list[Delivery]:
        """Messages to send now; advances the subscription past them."""
        out = log.replay(self.after_seq)
        if out:
            self.after_seq = out[-1].seq if not isinstance(out[-1].item, ReplayGap) else out[-1].seq - 1
        return out


@dataclass
class CreditSubscription:
    """At most one unacknowledged message; :meth:`ack` of the one in flight releases the next."""

    subscriber: Any
    after_seq: int = 0
    in_flight: Delivery | None = None

    def pending(self, log: RunLog) -> list[Delivery]:
        """The next message if none is unacknowledged (and one is available)."""
        if self.in_flight is not None:
            return []
        available = log.replay(self.after_seq)
        if not available:
            return []
        self.in_flight = available[0]
        return [self.in_flight]

    def ack(self, seq: int) -> bool:
        """Acknowledge the message in flight (a gap is acknowledged by the seq it resumes at).

        Returns:
            True when ``seq`` matched the message in flight (stale or duplicate acks are ignored).
        """
        if self.in_flight is None or seq != self.in_flight.seq:
            return False
        self.after_seq = seq - 1 if isinstance(self.in_flight.item, ReplayGap) else seq
        self.in_flight = None
        return True

    def done(self, log: RunLog) -> bool:
        """Whether the terminal outcome has been delivered and acknowledged."""
        return log.done and self.in_flight is None and self.after_seq >= log.terminal_seq
