"""Fixtures for provider tests: a real emulator over HTTP, and no pooled socket outliving its test."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from adk_actors.models.gemini import close_sessions

API_KEY = "test-key-0123456789"


@pytest.fixture(autouse=True)
def _nothing_outlives_the_test() -> Iterator[None]:
    """Close pooled connections after each test and check that no thread the test started is still running."""
    before = set(threading.enumerate())
    sockets_before = _client_sockets()
    yield
    close_sessions()
    leaked = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leaked, f"threads outlived the test: {leaked}"
    assert _client_sockets() <= sockets_before, "client sockets outlived the test"


_SERVER_PORTS: set[int] = set()
"""Ports of emulators started by these tests: their accepted sockets are the emulator's to close, not ours."""


def _tcp_local_ports() -> dict[str, int]:
    ports: dict[str, int] = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                ports[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return ports


def _socket_inodes() -> set[str]:
    fd_dir = "/proc/self/fd"
    inodes = set()
    for name in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            link = os.readlink(os.path.join(fd_dir, name))
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes


def _client_sockets() -> set[str]:
    """Inodes of this process's open sockets, minus the server side of emulator connections."""
    if not os.path.isdir("/proc/self/fd"):
        return set()
    inodes = _socket_inodes()
    ports = _tcp_local_ports()
    # A socket closed between the two reads (an emulator closing its side) is missing from the TCP tables: keep
    # an unlisted one only if it is still open (a descriptor goes before its table entry, so it was unlisted).
    unlisted = inodes - ports.keys()
    if unlisted:
        inodes -= unlisted - _socket_inodes()
    return {i for i in inodes if ports.get(i) not in _SERVER_PORTS}


@contextlib.contextmanager
def open_emulator(**kwargs: Any) -> Iterator[Any]:
    """Start an emulator (in-process, real HTTP) for the duration of the block."""
    from adk_actors.emulator import Emulator

    with Emulator(**kwargs) as server:
        _SERVER_PORTS.add(server.port)
        yield server


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_BASE_URL", raising=False)


@pytest.fixture
def emu() -> Iterator[Any]:
    with open_emulator(script={"rules": []}, latency_ms=0) as server:
        yield server


@pytest.fixture
def cfg(emu: Any) -> dict[str, Any]:
    """A minimal provider config pointing at the emulator."""
    return {"provider": "gemini", "api_key": API_KEY, "base_url": emu.base_url}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def api_bodies(emu: Any) -> list[dict[str, Any]]:
    """Logged request bodies of generate/stream calls, oldest first."""
    return [r["body"] for r in emu.requests if "GenerateContent" in r["path"] or "generateContent" in r["path"]]
