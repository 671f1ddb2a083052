"""Every TCP listener of a node binds the configured address only (runtime/thespian_tuning.py, runtime/boot.py)."""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import ConfigError
from adk_actors.runtime.boot import check_bind
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle, group_pids, start

from .helpers import PROBE, socket_inodes, start_child, unique

_LISTEN = "0A"


def _listeners(inodes: set[int]) -> list[tuple[str, int]]:
    """``(ip, port)`` of every listening TCP socket (IPv4 and IPv6) among ``inodes``."""
    found: list[tuple[str, int]] = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        with open(table) as fh:
            rows = [line.split() for line in fh.read().splitlines()[1:]]
        for row in rows:
            if row[3] != _LISTEN or int(row[9]) not in inodes:
                continue
            hex_ip, hex_port = row[1].split(":")
            raw = bytes.fromhex(hex_ip)
            # /proc prints the address as host-order 32-bit words.
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append(
                (
                    str(ipaddress.ip_address(packed)) if family == 4 else str(ipaddress.IPv6Address(packed)),
                    int(hex_port, 16),
                )
            )
    return found


def test_every_listener_of_the_node_binds_the_configured_address(system: ActorSystemHandle) -> None:
    start_child(system, ChildSpec(id=unique("bind"), actor=PROBE))
    node = group_pids(system.pgid)
    listeners = _listeners(socket_inodes(node))
    # admin, logger, root, registry, router, sandbox, hosts, workers, the probe...: all of them, whatever the count
    assert len(listeners) >= 8, listeners
    assert system.port in {port for _ip, port in listeners}
    assert {ip for ip, _port in listeners} == {system.settings.bind_ip}, listeners
    # The caller's own endpoint listens for replies too.
    mine = _listeners(socket_inodes([os.getpid()]))
    assert mine and all(ip == "127.0.0.1" for ip, _port in mine), mine
    for _ip, port in listeners:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", port), timeout=2).close()
    with socket.create_connection(("127.0.0.1", system.port), timeout=2):
        pass


def _local_non_loopback_ipv4() -> str | None:
    try:
        with open("/proc/net/fib_trie") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for prev, line in itertools.pairwise(lines):
        if "/32 host LOCAL" in line:
            ip = prev.strip().split()[-1]
            if not ipaddress.ip_address(ip).is_loopback:
                return ip
    return None


def test_a_non_loopback_bind_ip_without_the_opt_in_fails_the_start(tmp_path: Path) -> None:
    ip = _local_non_loopback_ipv4()  # an address of this machine: the start's port probe stays local
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    from adk_actors.settings import Settings
    from adk_actors.testing import reserved_port

    settings = Settings(admin_port=reserved_port(), data_dir=str(tmp_path / "data"), bind_ip=ip, hosts=1, workers=1)
    with pytest.raises(ConfigError) as info:
        start(settings).stop()
    assert info.value.reason == "remote_bind_not_allowed"
    assert info.value.details["key"] == "bind_ip"


@given(st.ip_addresses(v=4))
def test_check_bind_refuses_exactly_the_non_loopback_addresses(ip: ipaddress.IPv4Address) -> None:
    check_bind(str(ip), allow_remote_bind=True)
    if ip.is_loopback:
        check_bind(str(ip), allow_remote_bind=False)
    else:
        with pytest.raises(ConfigError) as info:
            check_bind(str(ip), allow_remote_bind=False)
        assert info.value.reason == "remote_bind_not_allowed"


def test_check_bind_resolves_names_and_rejects_garbage() -> None:
    check_bind("localhost", allow_remote_bind=False)
    with pytest.raises(ConfigError) as info:
        check_bind("bad\x00name", allow_remote_bind=False)  # refused before any name lookup
    assert info.value.reason == "invalid_value"
