"""Attempt functions for the retry tests, in a module that imports nothing heavy (workers import it by name)."""

from __future__ import annotations

import time

from adk_actors.testing import CrossProcessCounter


def flaky(counter: CrossProcessCounter, succeed_on: int) -> str:
    attempt = counter.incr()
    if attempt < succeed_on:
        raise RuntimeError("temporary")
    return "recovered"


def hang_first(counter: CrossProcessCounter) -> str:
    if counter.incr() == 1:
        time.sleep(60)
    return "after a hung attempt"
