"""The filesystem adapter beyond the shared contract: real processes writing one name at once, a writer killed
after its reservation, restarts, symbolic links refused, corrupted files detected, the scan bound, pickling."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_actors.artifacts import ArtifactScope, FileArtifactService
from adk_actors.artifacts.base import digest_of
from adk_actors.errors import StorageError

SCOPE = ArtifactScope.session("app", "user-1", "session-1")
SPAWN = multiprocessing.get_context("spawn")
_VERSION_TEMP = re.compile(r"[0-9]{10}\.[0-9a-f]{16}")
_reached: Any = None
"""In a writer child: the event it sets once its version is reserved and half written."""


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="adk-artifacts-fs-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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


def write_many(service: FileArtifactService, tag: str, count: int, barrier: Any, results: Any) -> None:
    """Child process: wait for the other writer, then put ``count`` versions of one name."""
    barrier.wait(timeout=60)
    results.put((tag, [service.put(SCOPE, "shared/report.bin", payload(tag, i)).version for i in range(count)]))


class PausingService(FileArtifactService):
    """Writes half of a version's temporary file, says so, then waits for a wake-up that never comes."""

    def _write_file(self, dir_fd: int, entry: str, content: bytes) -> None:
        if not _VERSION_TEMP.fullmatch(entry):
            super()._write_file(dir_fd, entry, content)
            return
        fd = os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        os.write(fd, content[: len(content) // 2])
        os.fsync(fd)
        _reached.set()
        threading.Event().wait()  # the parent SIGKILLs this process here


def write_and_hang(root: str, reached: Any) -> None:
    """Child process: start writing a version and stop half-way."""
    global _reached
    _reached = reached
    PausingService(root).put(SCOPE, "shared/report.bin", b"interrupted" * 1000)


def version_file(root: Path, name: str, version: int) -> Path:
    for name_dir in root.glob("scopes/*/names/*"):
        if json.loads((name_dir / "name.json").read_text())["name"] == name:
            return name_dir / "versions" / f"{version:010d}"
    raise AssertionError(f"no directory for {name}")


def tree(path: Path) -> list[tuple[str, int]]:
    """Every entry under ``path`` with its lstat mode type, in order."""
    return sorted((str(p.relative_to(path)), stat.S_IFMT(p.lstat().st_mode)) for p in path.rglob("*"))


def reason(excinfo: pytest.ExceptionInfo[Any]) -> str:
    return str(excinfo.value.reason)


@pytest.mark.slow
def test_two_processes_writing_one_name_get_distinct_versions_none_lost(tmp_dir: Path, children: list[Any]) -> None:
    service = FileArtifactService(tmp_dir / "root")
    count = 25
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
    assert [v.version for v in service.list_versions(SCOPE, "shared/report.bin")] == list(range(1, 2 * count + 1))


@pytest.mark.slow
def test_a_writer_killed_after_reserving_leaves_a_version_never_reused_nor_readable(
    tmp_dir: Path, children: list[Any]
) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "shared/report.bin", b"before")
    reached = SPAWN.Event()
    proc = SPAWN.Process(target=write_and_hang, args=(str(root), reached))
    children.append(proc)
    proc.start()
    assert reached.wait(timeout=60), "the writer never reached its half-written version"
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    name_dir = version_file(root, "shared/report.bin", 1).parent.parent
    assert (name_dir / "reservations" / "0000000002").exists() and list((name_dir / "tmp").iterdir())

    restarted = FileArtifactService(root)
    for svc in (service, restarted):
        with pytest.raises(StorageError) as excinfo:
            svc.get(SCOPE, "shared/report.bin", 2)
        assert reason(excinfo) == "artifact_not_found"
        assert svc.get(SCOPE, "shared/report.bin").data == b"before"
        assert [v.version for v in svc.list_versions(SCOPE, "shared/report.bin")] == [1]
    assert restarted.put(SCOPE, "shared/report.bin", b"after").version == 3
    assert service.delete(SCOPE, "shared/report.bin", 2) == 0


def test_a_new_instance_on_the_same_root_continues_numbering(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    first = FileArtifactService(root, max_scan_entries=12)  # 4 versions per name
    for data in (b"1", b"2", b"3"):
        first.put(SCOPE, "doc", data)
    assert first.delete(SCOPE, "doc", 3) == 1
    second = FileArtifactService(root, max_scan_entries=12)
    assert second.put(SCOPE, "doc", b"4").version == 4
    assert [v.version for v in second.list_versions(SCOPE, "doc")] == [1, 2, 4]
    assert second.delete(SCOPE, "doc") == 3
    third = FileArtifactService(root, max_scan_entries=12)
    with pytest.raises(StorageError) as excinfo:
        third.put(SCOPE, "doc", b"5")
    assert reason(excinfo) == "artifact_version_capacity_reached"


def test_the_service_pickles_as_its_root_and_options(tmp_dir: Path) -> None:
    service = FileArtifactService(tmp_dir / "root", max_artifact_bytes=100, max_scan_entries=30)
    service.put(SCOPE, "n", b"x")
    copy = pickle.loads(pickle.dumps(service))
    assert type(copy) is FileArtifactService and copy.root == service.root
    assert copy.capacities == service.capacities and copy.get(SCOPE, "n").data == b"x"
    assert copy.put(SCOPE, "n", b"y").version == 2 and service.get(SCOPE, "n").data == b"y"


def test_files_and_directories_are_private_to_the_owner(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    FileArtifactService(root).put(SCOPE, "n", b"x")
    for path in [root, *root.rglob("*")]:
        assert path.lstat().st_mode & 0o077 == 0, path


def test_a_symlinked_root_is_refused_and_nothing_is_written_through_it(tmp_dir: Path) -> None:
    target = tmp_dir / "target"
    target.mkdir()
    link = tmp_dir / "link"
    link.symlink_to(target)
    with pytest.raises(StorageError) as excinfo:
        FileArtifactService(link)
    assert reason(excinfo) == "symlink_refused" and excinfo.value.details == {"entry": "root"}
    dangling = tmp_dir / "dangling"
    dangling.symlink_to(tmp_dir / "missing")
    with pytest.raises(StorageError) as excinfo:
        FileArtifactService(dangling)
    assert reason(excinfo) == "symlink_refused"
    assert list(target.iterdir()) == [] and not (tmp_dir / "missing").exists()


def test_a_root_that_is_a_file_is_refused(tmp_dir: Path) -> None:
    (tmp_dir / "file").write_bytes(b"")
    with pytest.raises(StorageError) as excinfo:
        FileArtifactService(tmp_dir / "file")
    assert reason(excinfo) == "artifact_root_not_a_directory"


def test_a_root_swapped_for_a_symlink_after_start_is_refused(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "n", b"x")
    root.rename(tmp_dir / "moved")
    root.symlink_to(tmp_dir / "moved")
    before = tree(tmp_dir / "moved")
    for call in (lambda: service.put(SCOPE, "n", b"y"), lambda: service.get(SCOPE, "n")):
        with pytest.raises(StorageError) as excinfo:
            call()
        assert reason(excinfo) == "symlink_refused"
    assert tree(tmp_dir / "moved") == before


@pytest.mark.parametrize("inner", ["scopes", "names", "versions", "reservations"])
def test_a_symlinked_inner_directory_is_refused_and_its_target_untouched(tmp_dir: Path, inner: str) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "n", b"x")
    name_dir = version_file(root, "n", 1).parent.parent
    real = {
        "scopes": root / "scopes",
        "names": name_dir.parent,
        "versions": name_dir / "versions",
        "reservations": name_dir / "reservations",
    }[inner]
    outside = tmp_dir / "outside"
    real.rename(outside)
    real.symlink_to(outside)
    before = tree(outside)
    calls = [
        lambda: service.put(SCOPE, "n", b"y"),
        lambda: service.put(SCOPE, "other", b"y"),
        lambda: service.get(SCOPE, "n"),
        lambda: service.list_names(SCOPE),
        lambda: service.list_versions(SCOPE, "n"),
        lambda: service.delete(SCOPE, "n"),
    ]
    refused = 0
    for call in calls:
        try:
            call()
        except StorageError as exc:
            assert exc.reason == "symlink_refused"
            refused += 1
    # Every call that reaches the linked directory refuses it (one for another name may not reach it).
    assert refused >= {"scopes": 6, "names": 6, "versions": 5, "reservations": 1}[inner]
    assert tree(outside) == before
    if inner == "scopes":
        with pytest.raises(StorageError) as excinfo:
            FileArtifactService(root)
        assert reason(excinfo) == "symlink_refused"


def test_a_symlinked_version_file_is_refused(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "n", b"x")
    path = version_file(root, "n", 1)
    path.rename(tmp_dir / "outside")
    path.symlink_to(tmp_dir / "outside")
    with pytest.raises(StorageError) as excinfo:
        service.get(SCOPE, "n")
    assert reason(excinfo) == "symlink_refused"


def corrupt_last_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    ("damage", "rule"),
    [
        (corrupt_last_byte, "digest_mismatch"),
        (lambda p: p.write_bytes(p.read_bytes()[:-1]), "size_mismatch"),
        (lambda p: p.write_bytes(p.read_bytes() + b"!"), "size_mismatch"),
        (lambda p: p.write_bytes(b"not an artifact"), "bad_header"),
        (lambda p: p.write_bytes(b""), "bad_header"),
    ],
)
def test_a_damaged_version_file_is_reported_corrupt(tmp_dir: Path, damage: Any, rule: str) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "n", b"payload bytes")
    damage(version_file(root, "n", 1))
    with pytest.raises(StorageError) as excinfo:
        service.get(SCOPE, "n")
    assert reason(excinfo) == "artifact_corrupt" and excinfo.value.details["rule"] == rule
    assert excinfo.value.details["version"] == 1 and "payload" not in str(excinfo.value.to_dict())


def test_a_version_file_moved_to_another_name_scope_or_number_is_reported_corrupt(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    other_scope = ArtifactScope.user("app", "user-1")
    service.put(SCOPE, "a", b"a1")
    service.put(SCOPE, "b", b"b1")
    service.put(other_scope, "b", b"b1 in the user scope")
    b_dir = version_file(root, "b", 1).parent
    shutil.copy(version_file(root, "a", 1), b_dir / "0000000002")
    shutil.copy(version_file(root, "b", 1), b_dir / "0000000005")
    cases = {2: "name_mismatch", 5: "version_mismatch"}
    for version, rule in cases.items():
        with pytest.raises(StorageError) as excinfo:
            service.get(SCOPE, "b", version)
        assert excinfo.value.details["rule"] == rule
    user_file = next(p for p in root.glob("scopes/*/names/*/versions/*") if p.read_bytes().endswith(b"user scope"))
    shutil.copy(user_file, b_dir / "0000000001")
    with pytest.raises(StorageError) as excinfo:
        service.get(SCOPE, "b", 1)
    assert excinfo.value.details["rule"] == "scope_mismatch"


def test_an_edited_scope_or_name_record_is_reported_corrupt(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "n", b"x")
    name_dir = version_file(root, "n", 1).parent.parent
    (name_dir / "name.json").write_text(json.dumps({"format": 1, "scope": list(SCOPE.key), "name": "m"}))
    for call in (lambda: service.get(SCOPE, "n"), lambda: service.list_names(SCOPE)):
        with pytest.raises(StorageError) as excinfo:
            call()
        assert reason(excinfo) == "artifact_corrupt"
    scope_file = next(root.glob("scopes/*/scope.json"))
    scope_file.write_text(json.dumps({"format": 1, "scope": ["app", "app"]}))
    with pytest.raises(StorageError) as excinfo:
        service.put(SCOPE, "n", b"y")
    assert reason(excinfo) == "artifact_corrupt" and excinfo.value.details["rule"] == "record_mismatch"


def test_listing_a_version_checks_its_header_and_size(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root)
    service.put(SCOPE, "n", b"abc")
    path = version_file(root, "n", 1)
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(StorageError) as excinfo:
        service.list_versions(SCOPE, "n")
    assert excinfo.value.details["rule"] == "size_mismatch"


def test_a_directory_past_the_scan_bound_is_refused_not_read(tmp_dir: Path) -> None:
    root = tmp_dir / "root"
    service = FileArtifactService(root, max_scan_entries=9)
    service.put(SCOPE, "n", b"x")
    versions = version_file(root, "n", 1).parent
    for i in range(9):
        (versions / f"junk-{i}").write_bytes(b"")
    with pytest.raises(StorageError) as excinfo:
        service.get(SCOPE, "n")
    assert reason(excinfo) == "artifact_scan_limit_reached"


def test_a_put_is_durable_before_it_returns(tmp_dir: Path) -> None:
    """The version file is complete and no temporary file is left behind after put returns."""
    root = tmp_dir / "root"
    service = FileArtifactService(root, clock=lambda: 1234.5)
    info = service.put(SCOPE, "n", b"x" * 1000, mime_type="text/plain")
    path = version_file(root, "n", 1)
    assert path.read_bytes().endswith(b"x" * 1000) and info.created_at == 1234.5
    assert not list((path.parent.parent / "tmp").iterdir())
