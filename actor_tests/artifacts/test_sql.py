"""The SQL adapter beyond the shared contract (SQLite file and PostgreSQL schema): two processes writing one name
of a new scope at once, numbering across instances and restarts, tampered rows detected, pickling as a descriptor,
a driver failure that never leaks the URL."""

from __future__ import annotations

import multiprocessing
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from actor_tests.sessions.conftest import sql_urls
from adk_actors.artifacts import ArtifactScope, SqlArtifactService
from adk_actors.artifacts.base import digest_of
from adk_actors.errors import StorageError

SCOPE = ArtifactScope.session("app", "user-1", "session-1")
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(params=["sqlite", "postgres"])
def url_of(request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """``url_of()``: a fresh database URL of the dialect under test (files and schemas removed afterwards)."""
    tmp = Path(tempfile.mkdtemp(prefix="adk-artifacts-sql-"))
    try:
        with sql_urls(tmp, "artifacts") as make:
            yield lambda: make(str(request.param))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def services() -> Iterator[list[SqlArtifactService]]:
    made: list[SqlArtifactService] = []
    try:
        yield made
    finally:
        for service in made:
            service.close()


@pytest.fixture
def children() -> Iterator[list[Any]]:
    """Processes a test starts; any still alive at the end is killed and reaped."""
    started: list[Any] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=30)


def payload(tag: str, i: int) -> bytes:
    return f"{tag}:{i}:".encode() * (i + 1)


def write_many(service: SqlArtifactService, tag: str, count: int, barrier: Any, results: Any) -> None:
    """Child process: wait for the other writer, then put ``count`` versions of one name."""
    barrier.wait(timeout=60)
    results.put((tag, [service.put(SCOPE, "shared/report.bin", payload(tag, i)).version for i in range(count)]))
    service.close()


def test_two_processes_writing_one_name_of_a_new_scope_get_distinct_versions_none_lost(
    url_of: Callable[[], str], services: list[SqlArtifactService], children: list[Any]
) -> None:
    service = SqlArtifactService(url_of(), max_scan_entries=300)
    services.append(service)
    service.open()  # the schema exists; the scope does not: both children race to admit it
    count = 20
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    for tag in ("a", "b"):
        proc = SPAWN.Process(target=write_many, args=(service, tag, count, barrier, results))
        children.append(proc)
        proc.start()
    got = dict(results.get(timeout=120) for _ in range(2))
    for proc in children:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    assert sorted(got["a"] + got["b"]) == list(range(1, 2 * count + 1))
    for tag, versions in got.items():
        for i, version in enumerate(versions):
            artifact = service.get(SCOPE, "shared/report.bin", version)
            assert artifact.data == payload(tag, i) and artifact.digest == digest_of(payload(tag, i))
    assert service.list_names(SCOPE) == (["shared/report.bin"], None)
    with pytest.raises(StorageError) as full:  # one scope admitted, one name: the version capacity is 100
        for _ in range(100 - 2 * count + 1):
            service.put(SCOPE, "shared/report.bin", b".")
    assert full.value.reason == "artifact_version_capacity_reached"


def test_a_new_instance_on_the_same_database_continues_numbering_after_deletes(
    url_of: Callable[[], str], services: list[SqlArtifactService]
) -> None:
    url = url_of()
    first = SqlArtifactService(url)
    services.append(first)
    for data in (b"1", b"2", b"3"):
        first.put(SCOPE, "doc", data, mime_type="text/plain", metadata={"k": 1.5})
    assert first.delete(SCOPE, "doc") == 3
    first.close()
    second = SqlArtifactService(url)
    services.append(second)
    made = second.put(SCOPE, "doc", b"4")
    assert made.version == 4 and second.list_versions(SCOPE, "doc") == [made]
    assert second.schema_version() == 1


def test_the_service_pickles_as_its_url_and_options(
    url_of: Callable[[], str], services: list[SqlArtifactService]
) -> None:
    service = SqlArtifactService(url_of(), max_artifact_bytes=10, max_scan_entries=9)
    services.append(service)
    service.put(SCOPE, "n", b"x")
    copy = pickle.loads(pickle.dumps(service))
    services.append(copy)
    assert copy.url == service.url and copy.capacities == service.capacities
    assert copy.get(SCOPE, "n").data == b"x"


@pytest.mark.parametrize(
    ("column", "value", "rule"),
    [
        ("data", b"y", "digest_mismatch"),
        ("data", b"xx", "size_mismatch"),
        ("metadata", "not json", "metadata_not_json"),
    ],
)
def test_a_tampered_row_is_reported_corrupt(
    url_of: Callable[[], str], services: list[SqlArtifactService], column: str, value: Any, rule: str
) -> None:
    service = SqlArtifactService(url_of())
    services.append(service)
    service.put(SCOPE, "n", b"x")
    engine = create_engine(service.url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"UPDATE adk_artifact_versions SET {column} = :v"), {"v": value})
    finally:
        engine.dispose()
    with pytest.raises(StorageError) as excinfo:
        service.get(SCOPE, "n")
    assert excinfo.value.reason == "artifact_corrupt" and excinfo.value.details == {"rule": rule}


def test_an_unreachable_database_fails_structurally_without_the_url() -> None:
    service = SqlArtifactService("postgresql+psycopg://drv-user-x7q:hunter2@127.0.0.1:1/drv-db-x7q?connect_timeout=2")
    try:
        with pytest.raises(StorageError) as excinfo:
            service.put(SCOPE, "n", b"x")
    finally:
        service.close()
    assert excinfo.value.reason == "open_failed"
    shown = repr(excinfo.value) + str(excinfo.value) + str(excinfo.value.details)
    for private in ("hunter2", "drv-db-x7q", "drv-user-x7q", "127.0.0.1"):
        assert private not in shown
    assert "hunter2" not in repr(service)
