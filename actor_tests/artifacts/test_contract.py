"""The artifact-service contract, run against every adapter (in memory, filesystem, SQL on a SQLite file and on a
PostgreSQL schema): versions, scopes, listing, deletion without reuse, limits, validation, lifetime capacities and
concurrent writers."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.sessions.conftest import sql_urls
from adk_actors.artifacts import (
    Artifact,
    ArtifactScope,
    ArtifactVersion,
    BaseArtifactService,
    FileArtifactService,
    InMemoryArtifactService,
    SqlArtifactService,
)
from adk_actors.artifacts.base import digest_of
from adk_actors.errors import ConfigError, ContentError, StorageError, ValidationError

SESSION = ArtifactScope.session("app", "user-1", "session-1")
OTHER_SESSION = ArtifactScope.session("app", "user-1", "session-2")
USER = ArtifactScope.user("app", "user-1")
APP = ArtifactScope.app("app")

Factory = Callable[..., BaseArtifactService]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture(params=["in_memory", "filesystem", "sql-sqlite", "sql-pg"])
def make(request: pytest.FixtureRequest) -> Iterator[Factory]:
    """A factory of services of one adapter; every filesystem root and SQLite file lives in a temp dir removed
    afterwards, every PostgreSQL schema is dropped (PostgreSQL unreachable: skipped, failed under ``CI=true``)."""
    tmp = Path(tempfile.mkdtemp(prefix="adk-artifacts-"))
    made: list[SqlArtifactService] = []
    try:
        with sql_urls(tmp, "artifacts") as url_of:

            def build(**options: Any) -> BaseArtifactService:
                if request.param == "in_memory":
                    return InMemoryArtifactService(**options)
                if request.param == "filesystem":
                    return FileArtifactService(tmp / "root", **options)
                service = SqlArtifactService(
                    url_of("sqlite" if request.param == "sql-sqlite" else "postgres"), **options
                )
                made.append(service)
                return service

            try:
                yield build
            finally:
                for service in made:
                    service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def service(make: Factory) -> BaseArtifactService:
    return make()


def reason_of(excinfo: pytest.ExceptionInfo[Any]) -> str:
    return str(excinfo.value.reason)


def test_put_numbers_versions_from_one_and_describes_them(make: Factory) -> None:
    clock = FakeClock()
    service = make(clock=clock)
    assert isinstance(service, BaseArtifactService)
    first = service.put(
        SESSION, "reports/result.txt", b"first", mime_type="text/plain", metadata={"source": "readme", "n": 1}
    )
    second = service.put(SESSION, "reports/result.txt", b"second!")
    assert type(first) is ArtifactVersion
    assert (first.version, second.version) == (1, 2)
    assert first.scope == SESSION and first.name == "reports/result.txt"
    assert first.digest == digest_of(b"first") and first.digest.startswith("sha256:") and len(first.digest) == 71
    assert (first.size, second.size) == (5, 7)
    assert (first.mime_type, second.mime_type) == ("text/plain", "application/octet-stream")
    assert (first.metadata, second.metadata) == ({"source": "readme", "n": 1}, {})
    assert (first.created_at, second.created_at) == (1_700_000_001.0, 1_700_000_002.0)


def test_get_returns_the_latest_or_the_asked_version_with_its_bytes(service: BaseArtifactService) -> None:
    first = service.put(SESSION, "a.bin", b"one", metadata={"k": "v"})
    second = service.put(SESSION, "a.bin", bytearray(b"two"))
    latest = service.get(SESSION, "a.bin")
    assert type(latest) is Artifact and latest.data == b"two" and latest.info() == second
    older = service.get(SESSION, "a.bin", 1)
    assert older.data == b"one" and older.info() == first and older.metadata == {"k": "v"}
    assert "b'one'" not in repr(older)  # bytes stay out of reprs and logs


def test_a_caller_changing_returned_metadata_does_not_change_the_store(service: BaseArtifactService) -> None:
    put = service.put(SESSION, "m", b"x", metadata={"k": "v"})
    put.metadata["k"] = "changed"
    got = service.get(SESSION, "m")
    got.metadata["k"] = "changed too"
    assert service.get(SESSION, "m").metadata == {"k": "v"}
    assert service.list_versions(SESSION, "m")[0].metadata == {"k": "v"}


def test_a_missing_artifact_and_one_of_another_scope_get_the_same_answer(service: BaseArtifactService) -> None:
    service.put(SESSION, "secret.txt", b"mine")
    answers = []
    for scope, version in ((OTHER_SESSION, None), (USER, None), (APP, 1), (SESSION, 2)):
        with pytest.raises(StorageError) as excinfo:
            service.get(scope, "secret.txt", version)
        answers.append((excinfo.value.reason, excinfo.value.message, sorted(excinfo.value.details)))
    with pytest.raises(StorageError) as excinfo:
        service.get(SESSION, "never.txt")
    answers.append((excinfo.value.reason, excinfo.value.message, sorted(excinfo.value.details)))
    assert {a[0] for a in answers} == {"artifact_not_found"} and len(set(map(repr, answers))) == 1


def test_scopes_are_exact_app_user_and_session_do_not_see_each_other(service: BaseArtifactService) -> None:
    service.put(APP, "shared", b"app")
    service.put(USER, "shared", b"user")
    service.put(SESSION, "shared", b"session")
    service.put(ArtifactScope.user("app", "user-2"), "shared", b"other user")
    assert [service.get(s, "shared").data for s in (APP, USER, SESSION)] == [b"app", b"user", b"session"]
    assert all(service.get(s, "shared").version == 1 for s in (APP, USER, SESSION))
    assert service.list_names(OTHER_SESSION) == ([], None)
    assert service.list_names(ArtifactScope.app("other-app")) == ([], None)


def test_list_names_pages_in_code_point_order_with_a_cursor(service: BaseArtifactService) -> None:
    names = ["b", "a/z", "a", "Z", "é", "a/b"]
    for name in names:
        service.put(SESSION, name, b".")
    page, cursor = service.list_names(SESSION, limit=4)
    assert page == ["Z", "a", "a/b", "a/z"] and cursor == "a/z"
    page, cursor = service.list_names(SESSION, limit=4, cursor=cursor)
    assert page == ["b", "é"] and cursor is None
    assert service.list_names(SESSION, limit=6) == (sorted(names), None)
    assert service.list_names(SESSION) == (sorted(names), None)


@pytest.mark.parametrize("limit", [0, -1, 1001, True, "10", 2.0])
def test_list_names_refuses_a_limit_outside_one_to_a_thousand(service: BaseArtifactService, limit: Any) -> None:
    with pytest.raises(ValidationError) as excinfo:
        service.list_names(SESSION, limit=limit)
    assert reason_of(excinfo) == "invalid_limit"


@pytest.mark.parametrize("cursor", ["", "../x", 5, "a\x00"])
def test_list_names_refuses_a_cursor_that_is_not_a_name(service: BaseArtifactService, cursor: Any) -> None:
    with pytest.raises(ValidationError) as excinfo:
        service.list_names(SESSION, cursor=cursor)
    assert reason_of(excinfo) == "invalid_cursor"


def test_list_versions_lists_stored_versions_oldest_first(service: BaseArtifactService) -> None:
    assert service.list_versions(SESSION, "nothing") == []
    made = [service.put(SESSION, "v", bytes([i]) * i) for i in range(1, 5)]
    service.delete(SESSION, "v", 2)
    listed = service.list_versions(SESSION, "v")
    assert [v.version for v in listed] == [1, 3, 4]
    assert listed == [made[0], made[2], made[3]] and all(type(v) is ArtifactVersion for v in listed)


def test_deleted_version_numbers_are_never_given_out_again(service: BaseArtifactService) -> None:
    for data in (b"1", b"2", b"3"):
        service.put(SESSION, "doc", data)
    assert service.delete(SESSION, "doc", 3) == 1
    assert service.delete(SESSION, "doc", 3) == 0
    assert service.get(SESSION, "doc").version == 2  # latest is now the newest stored one
    with pytest.raises(StorageError) as excinfo:
        service.get(SESSION, "doc", 3)
    assert reason_of(excinfo) == "artifact_not_found"
    assert service.put(SESSION, "doc", b"4").version == 4
    assert service.delete(SESSION, "doc") == 3
    assert service.delete(SESSION, "doc") == 0 and service.delete(SESSION, "never") == 0
    assert service.list_names(SESSION) == ([], None) and service.list_versions(SESSION, "doc") == []
    with pytest.raises(StorageError):
        service.get(SESSION, "doc")
    assert service.put(SESSION, "doc", b"5").version == 5
    assert service.list_names(SESSION) == (["doc"], None)


def test_an_artifact_over_the_byte_bound_is_refused(make: Factory) -> None:
    service = make(max_artifact_bytes=10)
    assert service.put(SESSION, "fits", b"x" * 10).size == 10
    with pytest.raises(ValidationError) as excinfo:
        service.put(SESSION, "big", b"x" * 11)
    assert reason_of(excinfo) == "artifact_too_large" and excinfo.value.details == {"size": 11, "max_bytes": 10}
    assert service.list_names(SESSION) == (["fits"], None)


def test_the_default_byte_bound_is_sixteen_mebibytes(make: Factory) -> None:
    service = make()
    with pytest.raises(ValidationError) as excinfo:
        service.put(SESSION, "big", bytes(16 * 1024 * 1024 + 1))
    assert reason_of(excinfo) == "artifact_too_large"


@pytest.mark.parametrize("options", [{"max_scan_entries": 2}, {"max_scan_entries": True}, {"max_artifact_bytes": -1}])
def test_options_out_of_range_are_refused(make: Factory, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as excinfo:
        make(**options)
    assert reason_of(excinfo) == "invalid_value"


@pytest.mark.parametrize("mime_type", ["text", "Text/Plain", "text/plain; charset=utf-8", "", 3])
def test_a_malformed_mime_type_is_refused(service: BaseArtifactService, mime_type: Any) -> None:
    with pytest.raises(ContentError) as excinfo:
        service.put(SESSION, "m", b"x", mime_type=mime_type)
    assert reason_of(excinfo) in ("invalid_mime_type", "invalid_part")
    assert service.list_names(SESSION) == ([], None)


@pytest.mark.parametrize(
    "metadata",
    [
        {"nested": {"a": 1}},
        {"list": [1]},
        {1: "int key"},
        {"": "empty key"},
        {"k\n": "control in key"},
        {f"k{i}": i for i in range(33)},
        {"long": "x" * 1025},
        {"nan": float("nan")},
        {"big": 1 << 63},
        {"surrogate": "\ud800"},
        ["not", "a", "mapping"],
    ],
)
def test_metadata_that_is_not_flat_and_bounded_is_refused(service: BaseArtifactService, metadata: Any) -> None:
    with pytest.raises(ValidationError) as excinfo:
        service.put(SESSION, "m", b"x", metadata=metadata)
    assert reason_of(excinfo) == "invalid_artifact_metadata"


@pytest.mark.parametrize("data", ["text", None, 5, [1, 2]])
def test_data_that_is_not_bytes_is_refused(service: BaseArtifactService, data: Any) -> None:
    with pytest.raises(ValidationError) as excinfo:
        service.put(SESSION, "d", data)
    assert reason_of(excinfo) == "invalid_artifact_data"


@pytest.mark.parametrize("version", [0, -1, True, "1", 1.0])
def test_a_version_that_is_not_a_positive_int_is_refused(service: BaseArtifactService, version: Any) -> None:
    service.put(SESSION, "d", b"x")
    for call in (service.get, service.delete):
        with pytest.raises(ValidationError) as excinfo:
            call(SESSION, "d", version)
        assert reason_of(excinfo) == "invalid_artifact_version"


def test_a_scope_argument_must_be_an_artifact_scope(service: BaseArtifactService) -> None:
    for call in (lambda: service.put(("app",), "n", b""), lambda: service.list_names("app")):  # type: ignore[arg-type]
        with pytest.raises(ValidationError) as excinfo:
            call()
        assert reason_of(excinfo) == "invalid_artifact_scope"


def test_lifetime_version_capacity_is_a_third_of_the_scan_bound_and_delete_does_not_restore_it(
    make: Factory,
) -> None:
    service = make(max_scan_entries=9)  # 3 versions per name, 4 names per scope, 4 scopes
    for i in range(3):
        service.put(SESSION, "n", bytes([i]))
    assert service.delete(SESSION, "n") == 3
    with pytest.raises(StorageError) as excinfo:
        service.put(SESSION, "n", b"again")
    assert reason_of(excinfo) == "artifact_version_capacity_reached"
    assert excinfo.value.details["max_versions"] == 3 and excinfo.value.details["name"] == "n"
    assert service.put(SESSION, "rotated", b"ok").version == 1


def test_lifetime_name_capacity_is_half_the_scan_bound_and_delete_does_not_restore_it(make: Factory) -> None:
    service = make(max_scan_entries=9)
    for i in range(4):
        service.put(SESSION, f"name-{i}", b".")
        service.delete(SESSION, f"name-{i}")
    with pytest.raises(StorageError) as excinfo:
        service.put(SESSION, "name-4", b".")
    assert reason_of(excinfo) == "artifact_name_capacity_reached" and excinfo.value.details["max_names"] == 4
    assert service.put(SESSION, "name-0", b"known names still take versions").version == 2
    assert service.put(OTHER_SESSION, "name-4", b"another scope").version == 1


def test_lifetime_scope_capacity_is_half_the_scan_bound(make: Factory) -> None:
    service = make(max_scan_entries=9)
    for i in range(4):
        service.put(ArtifactScope.session("app", "u", f"s{i}"), "n", b".")
        service.delete(ArtifactScope.session("app", "u", f"s{i}"), "n")
    with pytest.raises(StorageError) as excinfo:
        service.put(ArtifactScope.session("app", "u", "s4"), "n", b".")
    assert reason_of(excinfo) == "artifact_scope_capacity_reached" and excinfo.value.details["max_scopes"] == 4
    assert service.put(ArtifactScope.session("app", "u", "s0"), "n", b"known scope").version == 2


def test_concurrent_threads_writing_one_name_get_distinct_versions(service: BaseArtifactService) -> None:
    threads_n, each = 6, 10
    barrier = threading.Barrier(threads_n)
    results: list[list[int]] = [[] for _ in range(threads_n)]
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            for j in range(each):
                results[index].append(service.put(SESSION, "shared", f"{index}:{j}".encode()).version)
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    versions = sorted(v for r in results for v in r)
    assert versions == list(range(1, threads_n * each + 1))
    for index, mine in enumerate(results):
        assert [service.get(SESSION, "shared", v).data for v in mine] == [f"{index}:{j}".encode() for j in range(each)]


def test_scope_constructors_validate_their_ids() -> None:
    assert USER.key == ("user", "app", "user-1") and ArtifactScope.from_key(SESSION.key) == SESSION
    assert ArtifactScope.from_key(["app", "app"]) == APP
    for build in (
        lambda: ArtifactScope.app(""),
        lambda: ArtifactScope.user("app", "a\x00b"),
        lambda: ArtifactScope.session("app", "u", "x" * 257),
        lambda: ArtifactScope.session("app", "u", None),  # type: ignore[arg-type]
        lambda: ArtifactScope(level="app", app_name="a", user_id="u"),
        lambda: ArtifactScope(level="tenant", app_name="a"),  # type: ignore[arg-type]
        lambda: ArtifactScope.from_key(["user", "app"]),
        lambda: ArtifactScope.from_key("app"),
    ):
        with pytest.raises(ValidationError) as excinfo:
            build()
        assert reason_of(excinfo) == "invalid_artifact_scope"
