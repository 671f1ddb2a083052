"""What a node writes is private: folders 0700, files 0600 (runtime/boot.py, secrets.py, storage/sql.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import adk_actors
from adk_actors import Runner, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import group_pids
from adk_actors.secrets import private_dir, private_file
from adk_actors.sessions import SqlSessionService
from adk_actors.sessions.factory import session_service_from_settings
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port


@pytest.fixture
def shared_umask() -> Iterator[None]:
    """The caller runs with the usual 022, so only our explicit modes can make its files private."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _modes(root: Path) -> dict[str, int]:
    out = {".": _mode(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = _mode(path)
    return out


def test_a_node_creates_its_data_dir_0700_and_every_file_0600(tmp_path: Path, shared_umask: None) -> None:
    data = tmp_path / "fresh" / "data"  # neither level exists yet: start() makes both
    settings = Settings(admin_port=reserved_port(), data_dir=str(data), hosts=1, workers=1)
    port = settings.admin_port
    with Emulator() as emu:
        caller_store = session_service_from_settings("sql", "", str(data))  # opened in this process
        node_store = SqlSessionService(f"sqlite:///{data / 'node-sessions.db'}")  # first opened by the host
        handle = adk_actors.start(settings)
        try:
            spawn_agent(
                "FilesAgent", {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}, system=handle
            )
            for store, sid in ((caller_store, "s1"), (node_store, "s2")):
                assert Runner("FilesAgent", "files", store, system=handle).run("u", sid, "hello files")
            stop_agent("FilesAgent", system=handle)
            modes = _modes(data)
        finally:
            handle.stop()
            caller_store.close()
            node_store.close()
        assert group_pids(handle.pgid) == []
    for name in (
        "sessions.db",
        "sessions.db-wal",
        "sessions.db-shm",
        "node-sessions.db",
        "node-sessions.db-wal",
        "node-sessions.db-shm",
        f"logs/adk-{port}.log",
        f"logs/system-{port}.out",
    ):
        assert name in modes, sorted(modes)
    assert _mode(tmp_path / "fresh") == 0o700
    loose = {name: oct(mode) for name, mode in modes.items() if mode != (0o700 if (data / name).is_dir() else 0o600)}
    assert loose == {}


def test_private_helpers_leave_an_existing_directory_alone_and_create_0600(tmp_path: Path, shared_umask: None) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    made = private_dir(shared / "a" / "b")
    assert _mode(shared) == 0o755  # someone else's folder (think /tmp) keeps its mode
    assert _mode(shared / "a") == 0o700 and _mode(made) == 0o700
    target = private_file(shared / "c" / "file.db")
    assert _mode(target) == 0o600 and _mode(target.parent) == 0o700
    target.write_text("kept")
    private_file(target)  # an existing file is neither truncated nor re-moded
    assert target.read_text() == "kept"
