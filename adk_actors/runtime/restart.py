"""Pure supervision decisions: restart types, strategies and the intensity window (no actors, injected clock)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["RestartType", "Strategy", "Window", "restart_group", "should_restart"]

RestartType = Literal["permanent", "transient", "temporary"]
Strategy = Literal["one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one"]

NORMAL_REASONS = frozenset({"normal", "shutdown"})


def should_restart(restart: RestartType, reason: str) -> bool:
    """OTP restart types: permanent always, transient only after an abnormal exit, temporary never."""
    if restart == "permanent":
        return True
    if restart == "transient":
        return reason not in NORMAL_REASONS
    return False


def restart_group(strategy: Strategy, order: Sequence[str], failed: str) -> list[str]:
    """Children to restart (in start order) when ``failed`` exits, per strategy.

    ``one_for_one`` and ``simple_one_for_one``: only the failed child. ``one_for_all``: every child.
    ``rest_for_one``: the failed child and every child started after it.
    """
    if strategy in ("one_for_one", "simple_one_for_one"):
        return [failed]
    if strategy == "one_for_all":
        return list(order)
    index = list(order).index(failed)
    return list(order[index:])


@dataclass(frozen=True, slots=True)
class Window:
    """The restart-intensity window: at most ``intensity`` restarts within any ``period`` seconds.

    Immutable; :meth:`record` returns the new window and whether the limit is exceeded (escalate).
    """

    intensity: int
    period: float
    stamps: tuple[float, ...] = ()

    def record(self, now: float) -> tuple[Window, bool]:
        recent = tuple(t for t in self.stamps if now - t < self.period) + (now,)
        return Window(self.intensity, self.period, recent), len(recent) > self.intensity

    def count(self, now: float) -> int:
        return sum(1 for t in self.stamps if now - t < self.period)
