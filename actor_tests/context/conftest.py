"""Context-test fixtures: the emulator, agents and the session service of the runner tests."""

from __future__ import annotations

from actor_tests.runner.conftest import agent_factory, emu, spawn, svc  # noqa: F401
