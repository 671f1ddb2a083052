"""Fixtures: the same behavioural suite runs against the in-memory store, SQLite and PostgreSQL.

Each PostgreSQL test gets its own ``adk_test_<unix>_<hex>`` schema, reached through the URL's ``search_path`` (so
child processes land in it too) and tagged with ``application_name`` so teardown can terminate its connections
before dropping the schema. With ``CI=true`` a missing PostgreSQL fails instead of skipping.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from adk_actors.sessions import InMemorySessionService, SqlSessionService

PG_BASE_URL = os.environ.get("SESSIONS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
_SCHEMA_RE = re.compile(r"^adk_test_(\d+)_[0-9a-f]+$")
_STALE_AFTER_S = 3600
_pg: dict[str, Any] = {}


def _pg_admin() -> Engine:
    """The admin engine, or skip (fail with CI=true) when PostgreSQL is unreachable."""
    if "engine" not in _pg:
        engine = create_engine(PG_BASE_URL, pool_pre_ping=True)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            _sweep_stale_schemas(engine)
            _pg["engine"] = engine
        except SQLAlchemyError as exc:
            engine.dispose()
            _pg["error"] = f"PostgreSQL unavailable at {PG_BASE_URL}: {type(exc).__name__}"
            _pg["engine"] = None
    if _pg["engine"] is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(_pg["error"])
        pytest.skip(_pg["error"])
    return _pg["engine"]


def _sweep_stale_schemas(engine: Engine) -> None:
    # Only schemas this suite names, and only old ones: other suites may be using fresh schemas right now.
    with engine.connect() as conn:
        names = conn.execute(text("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'adk_test_%'")).scalars()
        stale = [n for n in names if (m := _SCHEMA_RE.match(n)) and time.time() - int(m.group(1)) > _STALE_AFTER_S]
    for name in stale:
        _drop_schema(engine, name)


def _drop_schema(engine: Engine, name: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = :n AND pid <> pg_backend_pid()"
            ),
            {"n": name},
        )
        conn.execute(text("SET LOCAL lock_timeout = '10s'"))
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


class PgSchema:
    """A throwaway schema; ``url`` points a service (in any process) at it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.name = f"adk_test_{int(time.time())}_{secrets.token_hex(6)}"
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{self.name}"'))
        self.url = f"{PG_BASE_URL}?options=-csearch_path%3D{self.name}&application_name={self.name}"

    def drop(self) -> None:
        _drop_schema(self.engine, self.name)


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    """A temporary directory removed after the test (``tmp_path`` would be kept for later inspection)."""
    path = Path(tempfile.mkdtemp(prefix="adk-sessions-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def pg_schema() -> Iterator[PgSchema]:
    """A fresh PostgreSQL schema, dropped after the test."""
    schema = PgSchema(_pg_admin())
    try:
        yield schema
    finally:
        schema.drop()


@contextlib.contextmanager
def sql_urls(directory: Path, prefix: str) -> Iterator[Callable[[str], str]]:
    """``make(kind)`` returns a URL for an empty ``"sqlite"`` file in ``directory`` or a fresh ``"postgres"``
    schema; every schema is dropped when the block ends (also used by the workflow ledger's tests)."""
    schemas: list[PgSchema] = []

    def make(kind: str) -> str:
        if kind == "sqlite":
            return f"sqlite:///{directory / f'{prefix}-{secrets.token_hex(4)}.db'}"
        schema = PgSchema(_pg_admin())
        schemas.append(schema)
        return schema.url

    try:
        yield make
    finally:
        for schema in schemas:
            schema.drop()


@pytest.fixture
def sql_url_factory(tmp_dir: Path) -> Iterator[Any]:
    """``make(kind)`` returns a URL for an empty ``"sqlite"`` file or ``"postgres"`` schema; all are cleaned up."""
    with sql_urls(tmp_dir, "sessions") as make:
        yield make


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def service(request: pytest.FixtureRequest, sql_url_factory: Any) -> Iterator[Any]:
    """A fresh session service of each backend."""
    svc: Any = (
        InMemorySessionService() if request.param == "memory" else SqlSessionService(sql_url_factory(request.param))
    )
    try:
        yield svc
    finally:
        svc.close()


@pytest.fixture(params=["sqlite", "postgres"])
def sql_kind(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` or ``"postgres"``."""
    return str(request.param)
