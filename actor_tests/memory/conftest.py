"""Fixtures: every contract test runs against the in-memory service, a SQLite file and a PostgreSQL schema.

PostgreSQL schemas come from the sessions' fixtures (a fresh ``adk_test_*`` schema per service, dropped after the
test); PostgreSQL is skipped only when the server is unreachable (and fails instead with ``CI=true``).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.runner.conftest import agent_factory, emu, spawn, svc  # noqa: F401 - the Runner tests' fixtures
from actor_tests.sessions.conftest import sql_urls
from adk_actors.memory import BaseMemoryService, InMemoryMemoryService, SqlMemoryService


class ManualClock:
    """A wall clock the test moves by hand (``created_at`` of every add)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float = 1.0) -> float:
        with self._lock:
            self.now += seconds
            return self.now


MakeService = Callable[..., BaseMemoryService]
MakeSql = Callable[..., SqlMemoryService]


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    """A temporary directory removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="adk-memory-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def urls(tmp_dir: Path) -> Iterator[Callable[[str], str]]:
    """``make(kind)``: a URL of an empty ``"sqlite"`` file or a fresh ``"postgres"`` schema (all cleaned up)."""
    with sql_urls(tmp_dir, "memory") as make:
        yield make


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _factory(kind: str, urls: Callable[[str], str], clock: ManualClock) -> tuple[MakeService, list[Any]]:
    made: list[Any] = []

    def make(**options: Any) -> BaseMemoryService:
        options.setdefault("clock", clock)
        svc: BaseMemoryService
        if kind == "memory":
            svc = InMemoryMemoryService(**options)
        else:
            svc = SqlMemoryService(options.pop("url", None) or urls(kind), **options)
        made.append(svc)
        return svc

    return make, made


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    """The adapter under test."""
    return str(request.param)


@pytest.fixture
def make_service(kind: str, urls: Callable[[str], str], clock: ManualClock) -> Iterator[MakeService]:
    """``make(**options)``: a fresh, empty service of the adapter under test (closed after the test)."""
    make, made = _factory(kind, urls, clock)
    try:
        yield make
    finally:
        for svc in made:
            svc.close()


@pytest.fixture
def service(make_service: MakeService) -> BaseMemoryService:
    """A fresh, empty service of the adapter under test."""
    return make_service()


@pytest.fixture(params=["sqlite", "postgres"])
def sql_kind(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` or ``"postgres"``."""
    return str(request.param)


@pytest.fixture
def make_sql(sql_kind: str, urls: Callable[[str], str], clock: ManualClock) -> Iterator[MakeSql]:
    """``make(**options)`` for the SQL adapter on the dialect under test (``url=`` reopens an existing one)."""
    make, made = _factory(sql_kind, urls, clock)
    try:
        yield make  # type: ignore[misc]  # on a SQL kind the factory makes SqlMemoryService
    finally:
        for svc in made:
            svc.close()
