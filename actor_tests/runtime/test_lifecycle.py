"""System lifecycle: clean boot, owned mode, stop, coexisting systems, fd hygiene, logging and secrets."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from adk_actors.errors import ConfigError, SystemNotRunning
from adk_actors.runtime.messages import Ping
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle, _wait_gone, attach, group_pids, start
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port
from adk_actors.testing.actors import GetPid, Log

from .helpers import PROBE, socket_inodes, start_child, unique


def test_stop_leaves_no_process_of_the_group(tmp_data_dir: Path) -> None:
    handle = start(Settings(admin_port=reserved_port(), data_dir=str(tmp_data_dir)))
    pids = group_pids(handle.pgid)
    assert len(pids) >= 4  # admin, logger, root, registry, router, sandbox
    assert handle.ask(handle.root, Ping()) == "pong"
    handle.stop()
    assert group_pids(handle.pgid) == []
    with pytest.raises(SystemNotRunning):
        handle.ask(handle.root, Ping())


def test_two_systems_on_two_ports_coexist_in_one_process(make_system) -> None:
    a: ActorSystemHandle = make_system()
    b: ActorSystemHandle = make_system()
    assert a.port != b.port and a.pgid != b.pgid
    pid_a = a.ask(start_child(a, ChildSpec(id=unique("p"), actor=PROBE)), GetPid())
    pid_b = b.ask(start_child(b, ChildSpec(id=unique("p"), actor=PROBE)), GetPid())
    assert pid_a in group_pids(a.pgid) and pid_b in group_pids(b.pgid)
    assert a.status()["port"] == a.port and b.status()["port"] == b.port


def test_a_socket_opened_before_start_is_not_held_by_any_thespian_process(tmp_data_dir: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    inode = os.fstat(listener.fileno()).st_ino
    handle = start(Settings(admin_port=reserved_port(), data_dir=str(tmp_data_dir)))
    try:
        pids = group_pids(handle.pgid)
        assert pids
        holders = [pid for pid in pids if inode in socket_inodes([pid])]
        assert holders == []
        assert inode in socket_inodes([os.getpid()])  # the check itself can see the socket
    finally:
        handle.stop()
        listener.close()


def test_sigkill_of_the_starter_takes_the_owned_system_down_within_5s(tmp_data_dir: Path) -> None:
    port = reserved_port()
    script = textwrap.dedent(f"""
        import json, signal, sys
        from adk_actors.runtime.system import start
        from adk_actors.settings import Settings
        h = start(Settings(admin_port={port}, data_dir={str(tmp_data_dir)!r}))
        print(json.dumps({{"pgid": h.pgid}}), flush=True)
        signal.pause()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the starter's stdout is a pipe: Thespian must not inherit it
        pgid = json.loads(line)["pgid"]
        pids = group_pids(pgid)
        assert pids
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5.0
        while (left := group_pids(pgid)) and time.monotonic() < deadline:
            _wait_gone(left, deadline - time.monotonic())  # blocks on pidfds, no sleeping
        assert group_pids(pgid) == [], "a Thespian process outlived its owner by 5 s"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_attach_joins_a_running_system_and_owns_nothing(system: ActorSystemHandle) -> None:
    other = attach(system.port, system.settings, make_default=False)
    assert other.owned is False
    assert other.ask(other.root, Ping()) == "pong"
    other.detach()
    assert system.ask(system.root, Ping()) == "pong"


def test_attach_to_a_port_with_no_system_fails_clearly() -> None:
    with pytest.raises(SystemNotRunning) as info:
        attach(reserved_port(), Settings(), make_default=False)
    assert info.value.reason == "system_not_running"


def test_start_on_a_busy_port_is_refused(system: ActorSystemHandle, tmp_data_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        start(Settings(admin_port=system.port, data_dir=str(tmp_data_dir)))
    assert info.value.reason == "port_in_use"


def test_actor_log_lines_reach_the_sink_and_the_api_key_never_does(tmp_data_dir: Path) -> None:
    key = "AIza" + uuid.uuid4().hex + "Zz"  # looks like a real key
    handle = start(Settings(admin_port=reserved_port(), data_dir=str(tmp_data_dir), gemini_api_key=key))
    try:
        probe = start_child(handle, ChildSpec(id=unique("log"), actor=PROBE))
        canary = f"canary-{uuid.uuid4().hex}"
        handle.ask(probe, Log(text=f"{canary} first"))
        handle.ask(probe, Log(text=f"{canary} with key {key} inside", level="error"))
        handle.ask(probe, Log(text=f"{canary} as header x-goog-api-key: {key}", level="warning"))
    finally:
        handle.stop()  # flushes the logger process
    sink = handle.log_sink.read_text()
    assert f"{canary} first" in sink, "the canary line never reached the sink"
    assert f"{canary} with key" in sink and "[REDACTED]" in sink
    outputs = {"sink": sink}
    for path in tmp_data_dir.rglob("*"):
        if path.is_file():
            outputs[str(path)] = path.read_text(errors="replace")
    for where, text in outputs.items():
        assert key not in text, f"the API key leaked into {where}"


def test_json_log_format_writes_one_json_object_per_line(tmp_data_dir: Path) -> None:
    handle = start(Settings(admin_port=reserved_port(), data_dir=str(tmp_data_dir), log_format="json"))
    try:
        probe = start_child(handle, ChildSpec(id=unique("json"), actor=PROBE))
        canary = f"json-canary-{uuid.uuid4().hex}"
        handle.ask(probe, Log(text=canary))
    finally:
        handle.stop()
    lines = [json.loads(line) for line in handle.log_sink.read_text().splitlines() if line.strip()]
    mine = [entry for entry in lines if canary in entry["message"]]
    assert mine and mine[0]["level"] == "WARNING" and mine[0]["logger"].startswith("adk_actors.")
