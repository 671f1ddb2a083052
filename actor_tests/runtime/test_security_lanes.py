"""Lane clients trust only listeners of their own uid; a squatted lane name fails the start (runtime/lane.py)."""

from __future__ import annotations

import os
import pickle
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport.IPBase import TCPv4ActorAddress

from adk_actors.errors import SystemNotRunning
from adk_actors.runtime.lane import LaneConn, LaneServer, held_lane_names, lane_name
from adk_actors.runtime.system import start
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port

NOBODY = 65534
_SYSTEM_PYTHON = "/usr/bin/python3"  # readable by nobody, unlike a venv under /root

# Runs as nobody: holds a lane name and greets every connection with the frame it is given, until stdin closes.
_SQUATTER = r"""
import os, select, socket, sys
frame = bytes.fromhex(sys.argv[2])
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(bytes.fromhex(sys.argv[1]))
sock.listen(16)
print("ready", flush=True)
while True:
    ready, _, _ = select.select([sock, sys.stdin], [], [])
    if sys.stdin in ready:
        break
    conn, _ = sock.accept()
    try:
        conn.sendall(frame)
    except OSError:
        pass
    conn.close()
"""


class _Plant:
    """Unpickling this creates a file: proof that a frame from the squatter was decoded by our process."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))


def _as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@pytest.fixture
def squat(tmp_path: Path) -> Iterator[object]:
    if os.getuid() != 0 or not os.access(_SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs root and a system python to run a squatter as another uid")
    procs: list[subprocess.Popen[str]] = []
    marker = tmp_path / "unpickled"

    def run(name: bytes) -> Path:
        body = pickle.dumps((None, _Plant(str(marker))), protocol=pickle.HIGHEST_PROTOCOL)
        frame = len(body).to_bytes(4, "big") + body
        proc = subprocess.Popen(
            [_SYSTEM_PYTHON, "-I", "-c", _SQUATTER, name.hex(), frame.hex()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_as_nobody,
            cwd="/",
        )
        procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        return marker

    yield run
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def _address(port: int) -> ActorAddress:
    return ActorAddress(TCPv4ActorAddress("127.0.0.1", port, external=True))


def test_a_facade_lane_to_a_listener_of_another_uid_is_refused_before_anything_is_read(squat) -> None:
    system_port, key = reserved_port(), ("127.0.0.1", 41001)
    marker = squat(lane_name(system_port, key))
    with pytest.raises(PermissionError):
        LaneConn(system_port, key)
    assert not marker.exists()


def test_an_actor_lane_to_a_listener_of_another_uid_falls_back_to_thespian(squat) -> None:
    system_port = reserved_port()
    squatted = _address(41002)
    marker = squat(lane_name(system_port, ("127.0.0.1", 41002)))
    server = LaneServer(system_port, _address(41003))
    try:
        assert server.client.send(squatted, server.client.server.key, "hello") is False
        assert server.client.by_key == {}
        assert server.poll() == []
    finally:
        server.close()
    assert not marker.exists()


def test_a_lane_name_held_before_the_node_starts_fails_the_start(squat, tmp_path: Path) -> None:
    port = reserved_port()
    name = lane_name(port, ("127.0.0.1", 40999))
    squat(name)
    assert held_lane_names(port) == ["@" + name[1:].decode()]
    settings = Settings(admin_port=port, data_dir=str(tmp_path / "data"), hosts=1, workers=1)
    with pytest.raises(SystemNotRunning) as info:
        start(settings).stop()
    assert info.value.reason == "lane_name_taken"
    assert info.value.details["port"] == port


def test_a_lane_of_our_own_uid_still_connects() -> None:
    system_port = reserved_port()
    server = LaneServer(system_port, _address(41004))
    try:
        conn = LaneConn(system_port, server.key)
        conn.close()
    finally:
        server.close()
