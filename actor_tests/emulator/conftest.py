"""Fixtures for the emulator tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from adk_actors.emulator import Emulator


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """A started emulator with the built-in default script."""
    with Emulator() as e:
        yield e


@pytest.fixture(autouse=True)
def _no_leftover_emulator_threads() -> Iterator[None]:
    """Every emulator a test starts must be stopped (thread joined) by the end of that test."""
    yield
    leftovers = [t for t in threading.enumerate() if t.name == "gemini-emulator"]
    assert leftovers == [], "emulator thread outlived its test"
