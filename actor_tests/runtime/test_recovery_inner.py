"""A restarted inner actor never receives what its crashed predecessor left in flight (issue 16, item 6).

Timer ids (and I/O ids) start again at 1 in each incarnation of an inner actor; a timer of the crashed incarnation
that fires after the restart must not be taken for the new incarnation's timer with the same id (which would then
be lost).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from adk_actors.errors import ActorCrashed, AdkError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Crash, Incr, ReplyLater

from .helpers import PROBE, unique, wait_status


@pytest.mark.timeout(60)
def test_a_timer_of_a_crashed_incarnation_does_not_reach_or_cancel_the_restarted_ones(
    system: ActorSystemHandle,
) -> None:
    name = unique("inc")
    system.spawn(PROBE, id=name, name=name)
    try:
        with ThreadPoolExecutor(1) as pool:
            old = pool.submit(system.ask, name, ReplyLater(seconds=1.0, value="old"), 3)
            wait_status(system, name, lambda s: s["timers"] == 1)  # the old incarnation's timer 1 is armed
            with pytest.raises(ActorCrashed):
                system.ask(name, Crash(), timeout=5)
            assert system.ask(name, Incr(by=0), timeout=5) == 0  # restarted
            # The new incarnation's first timer is timer 1 too; the old one fires first, a second earlier.
            assert system.ask(name, ReplyLater(seconds=2.0, value="new"), timeout=5) == "new"
            with pytest.raises(AdkError):  # the crashed incarnation's reply never comes
                old.result()
    finally:
        system.stop_inner(system.resolve(name))
