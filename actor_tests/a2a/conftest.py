"""A2A test fixtures: the agent and Runner fixtures of the agent and Runner tests (``emu``, ``spawn``, ``svc``),
and the anyio backend the official SDK's async client runs on."""

from __future__ import annotations

import pytest

from actor_tests.agents.conftest import emu, spawn  # noqa: F401 - fixtures
from actor_tests.runner.conftest import svc  # noqa: F401 - fixtures


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
