"""Shared fixtures: one actor system per test session, fresh systems for destructive tests, and a sweep.

* ``system``: session-scoped, owned, on an admin port from the reserved range, data dir in a temp folder. Every
  fixture starts the full product node (``adk_actors.node``: runtime children plus admission, run index,
  telemetry hub and the in-memory session store).
* ``fresh_system``: a system of its own for tests that kill, escalate or stop things.
* ``make_system``: a factory for tests that need several systems.
* Every system started here is recorded; the session ends by killing each one's process group, so no actor
  process outlives the run even if a test forgot to stop one.
* ``--strict-pickle`` (or ``ADK_STRICT_PICKLE_TESTS=1``) starts systems in strict-pickle mode.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_actors.auth.credentials import KEYS_ENV, CredentialKeys
from adk_actors.node import start
from adk_actors.runtime.system import ActorSystemHandle, group_pids
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port

_started: list[ActorSystemHandle] = []
_tmp_root = Path(tempfile.mkdtemp(prefix="adk-tests-"))

# Tests never inherit a developer's real key or config.
for _name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL", "ADK_CONFIG", "ADK_SYSTEM_PORT"):
    os.environ.pop(_name, None)
# Switches of the test suite itself survive (strict pickling; the console tests' screenshots for the docs).
for _name in [
    n for n in os.environ if n.startswith("ADK_") and n not in ("ADK_STRICT_PICKLE_TESTS", "ADK_SCREENSHOTS")
]:
    os.environ.pop(_name, None)
# One credential key for the session, set before any system starts so every node process (token service, tool
# workers) reads the same key: credential stores pickle as their URL and each process reads the keys itself.
os.environ[KEYS_ENV] = CredentialKeys.generate()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--strict-pickle",
        action="store_true",
        default=False,
        help="start actor systems in strict-pickle mode (every message crossing a host is pickled)",
    )


@pytest.fixture(scope="session")
def strict_pickle(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--strict-pickle") or os.environ.get("ADK_STRICT_PICKLE_TESTS") == "1")


def _settings(data_dir: Path, strict: bool, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "admin_port": reserved_port(),
        "data_dir": str(data_dir),
        "strict_pickle": strict,
        "hosts": 2,
        "workers": 2,
        "start_timeout_s": 30.0,
    }
    values.update(overrides)
    return Settings.from_dict(values)


@pytest.fixture(scope="session")
def make_system(strict_pickle: bool) -> Iterator[Callable[..., ActorSystemHandle]]:
    """Factory: ``make_system(**setting_overrides)`` starts an owned system that is stopped after the test."""
    mine: list[ActorSystemHandle] = []

    def make(**overrides: Any) -> ActorSystemHandle:
        data_dir = Path(tempfile.mkdtemp(prefix="sys-", dir=_tmp_root))
        handle = start(_settings(data_dir, strict_pickle, **overrides))
        _started.append(handle)
        mine.append(handle)
        return handle

    yield make
    for handle in mine:
        handle.stop()


@pytest.fixture(scope="session")
def system(make_system: Callable[..., ActorSystemHandle]) -> ActorSystemHandle:
    """The shared actor system of this test session."""
    return make_system()


@pytest.fixture
def fresh_system(strict_pickle: bool) -> Iterator[ActorSystemHandle]:
    """An actor system of its own, stopped at the end of the test."""
    data_dir = Path(tempfile.mkdtemp(prefix="fresh-", dir=_tmp_root))
    handle = start(_settings(data_dir, strict_pickle))
    _started.append(handle)
    try:
        yield handle
    finally:
        handle.stop()
        assert group_pids(handle.pgid) == [], "a process of the fresh system outlived stop()"


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A temp dir of the test's own, removed when the test ends (pytest's own keeps the last runs' dirs)."""
    path = Path(tempfile.mkdtemp(prefix="tmp-", dir=_tmp_root))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def tmp_module_dir() -> Iterator[Path]:
    """A temp dir shared by one module's tests, removed after the module."""
    path = Path(tempfile.mkdtemp(prefix="mod-", dir=_tmp_root))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmp_data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="data-", dir=_tmp_root))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Sweep: kill the process group of every system any test started (normally already gone)."""
    for handle in _started:
        if handle.pgid > 1 and handle.pgid != os.getpgid(0):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(handle.pgid, signal.SIGKILL)
    shutil.rmtree(_tmp_root, ignore_errors=True)
