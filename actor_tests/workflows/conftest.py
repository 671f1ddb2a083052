"""Fixtures: every ledger test runs against a SQLite file and a PostgreSQL schema of its own.

The PostgreSQL side reuses the session suite's throwaway ``adk_test_<unix>_<hex>`` schemas (reached through the
URL's ``search_path`` so child processes land in them too, dropped after the test, stale ones swept).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actor_tests.sessions.conftest import sql_urls
from actor_tests.workflows.wf_durable_defs import CHANNEL
from actor_tests.workflows.wf_signals import Channel
from adk_actors.workflows.ledger import SqlInvocationLedger


@pytest.fixture(params=["sqlite", "postgres"])
def sql_kind(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` or ``"postgres"``."""
    return str(request.param)


@pytest.fixture
def ledger_url_factory(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``make(kind)`` returns a URL for an empty SQLite file or PostgreSQL schema; all are removed afterwards."""
    with sql_urls(tmp_path, "ledger") as make:
        yield make


@pytest.fixture
def ledger_url(sql_kind: str, ledger_url_factory: Callable[[str], str]) -> str:
    """A fresh ledger URL of the parametrized backend."""
    return ledger_url_factory(sql_kind)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[SqlInvocationLedger]:
    """A ledger on the parametrized backend (a SQLite file or a PostgreSQL schema of its own), on the database
    clock. Modules that need an injected clock define their own ``ledger``."""
    led = SqlInvocationLedger(ledger_url)
    try:
        yield led
    finally:
        led.close()


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[Channel]:
    """The FIFO the ``wf_durable_defs`` actions post to (their input carries ``lab`` = ``tmp_path``)."""
    fifo = Channel(tmp_path / CHANNEL)
    try:
        yield fifo
    finally:
        fifo.close()
