"""Artifact-test fixtures: the Runner tests' agent fixtures (``emu``, ``spawn``, ``svc``, ``agent_factory``)."""

from __future__ import annotations

from actor_tests.runner.conftest import agent_factory, emu, spawn, svc  # noqa: F401 - fixtures
