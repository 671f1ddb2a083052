"""Lanes: same-machine messages over Unix sockets instead of Thespian's TCP transport (runtime/lane.py)."""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import ActorCrashed, AskTimeout
from adk_actors.runtime.lane import LaneServer, _Frames, address_key, encode, lane_name
from adk_actors.runtime.messages import Call, GetStatus
from adk_actors.runtime.refs import host_name
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing.actors import Block, Burst, Echo, GetNotes, GetPid, Relay, ReplyLater, SendUnpicklable

from .helpers import PROBE, mismatched_replies, start_child, unique, wait_exit, wait_status


def _lane(system: ActorSystemHandle, target: str) -> dict[str, int]:
    return dict(system.ask(target, GetStatus(), timeout=10)["lane"])


def test_facade_asks_to_tier1_and_inner_actors_travel_on_lanes(system: ActorSystemHandle) -> None:
    name = unique("lane")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    before = _lane(system, name)["frames_in"]
    for i in range(20):
        assert system.ask(name, Echo(value=i)) == i
    assert _lane(system, name)["frames_in"] >= before + 20
    inner = system.spawn(PROBE, id=unique("lane-inner"))
    host = host_name(inner.host_id)
    before = _lane(system, host)["frames_in"]
    for i in range(20):
        assert system.ask(inner, Echo(value=i)) == i
    assert _lane(system, host)["frames_in"] >= before + 20
    system.stop_inner(inner)


def test_without_lanes_every_message_goes_through_thespian(make_system) -> None:
    handle: ActorSystemHandle = make_system(local_lanes=False)
    name = unique("nolane")
    start_child(handle, ChildSpec(id=name, actor=PROBE, register_as=name))
    assert handle.ask(name, Echo(value=1)) == 1
    assert "lane" not in handle.ask(name, GetStatus())
    assert "lane" not in handle.ask(host_name(0), GetStatus())
    inner = handle.spawn(PROBE, id=unique("nolane-inner"))
    assert handle.ask(inner, Echo(value=2)) == 2


def test_lane_replies_stay_matched_across_threads_and_a_late_reply_never_reaches_a_later_ask(
    system: ActorSystemHandle,
) -> None:
    name = unique("lanemt")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    with pytest.raises(AskTimeout):
        system.ask(name, ReplyLater(seconds=0.3, value="late"), timeout=0.05)
    assert system.ask(name, ReplyLater(seconds=0.05, value="on-time"), timeout=5) == "on-time"
    before = _lane(system, name)["frames_in"]
    assert mismatched_replies(system, name, threads=8, per_thread=100) == []
    lane = _lane(system, name)
    assert lane["frames_in"] >= before + 800
    assert lane["peers"] <= 2  # a thread's connections close with it (this one and the status ask's remain)


def test_an_ask_in_flight_on_a_lane_fails_noproc_at_once_when_the_target_is_sigkilled(
    system: ActorSystemHandle,
) -> None:
    name = unique("lanekill")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name, restart="temporary"))
    pid = system.ask(name, GetPid())
    killer = threading.Timer(0.3, os.kill, (pid, signal.SIGKILL))
    killer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(ActorCrashed) as info:
            system.ask(name, Block(seconds=30), timeout=30)
    finally:
        killer.join()
    assert info.value.reason == "noproc"
    assert time.monotonic() - t0 < 3.0  # the end of the lane, not the 30 s deadline
    assert wait_exit(pid, 5)


def test_actor_to_actor_messages_on_lanes_keep_their_order(system: ActorSystemHandle) -> None:
    sender = unique("lanesrc")
    receiver = unique("lanedst")
    start_child(system, ChildSpec(id=sender, actor=PROBE, register_as=sender))
    receiver_address = start_child(system, ChildSpec(id=receiver, actor=PROBE, register_as=receiver))
    out_before = _lane(system, sender)["frames_out"]
    assert system.ask(sender, Burst(target=receiver_address, count=2000), timeout=30) == 2000
    deadline = time.monotonic() + 20
    while len(notes := system.ask(receiver, GetNotes())) < 2000:
        assert time.monotonic() < deadline, len(notes)
    assert notes == list(range(2000))
    assert _lane(system, sender)["frames_out"] >= out_before + 2000


def test_inner_actors_on_two_hosts_talk_over_the_host_lanes(system: ActorSystemHandle) -> None:
    a = system.spawn(PROBE, id="lane-a-" + unique("x"))
    b = system.spawn(PROBE, id="lane-b-" + unique("y"))
    while b.host_id == a.host_id:
        system.stop_inner(b)
        b = system.spawn(PROBE, id="lane-b-" + unique("y"))
    out_before = _lane(system, host_name(a.host_id))["frames_out"]
    assert system.ask(a, Relay(target=b, request=Echo(value="across"))) == "across"
    assert system.ask(a, Burst(target=b, count=500), timeout=30) == 500
    deadline = time.monotonic() + 20
    while len(notes := system.ask(b, GetNotes())) < 500:
        assert time.monotonic() < deadline
    assert notes == list(range(500))
    assert _lane(system, host_name(a.host_id))["frames_out"] >= out_before + 500
    system.stop_inner(a)
    system.stop_inner(b)


def test_an_unpicklable_message_falls_back_to_thespian_and_fails_as_before(system: ActorSystemHandle) -> None:
    name = unique("lanebad")
    target = unique("lanebadt")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    target_address = start_child(system, ChildSpec(id=target, actor=PROBE, register_as=target))
    with pytest.raises((ActorCrashed, AskTimeout)):
        system.ask(name, SendUnpicklable(target=target_address), timeout=5)
    assert system.ask(name, Relay(target=target_address, request=Echo(value="still")), timeout=10) == "still"


def _probe_lane(system: ActorSystemHandle, name: str) -> bytes:
    address = system.resolve(name)
    key = address_key(address)
    assert key is not None
    return lane_name(system.port, key)


def test_a_connection_from_another_user_is_refused(system: ActorSystemHandle) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to switch to another uid")
    name = unique("laneuid")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    path = _probe_lane(system, name)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child becomes nobody and tries to ask the probe
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(encode(None, Call(call_id="x", request=Echo(value=1), deadline=time.monotonic() + 5)))
            answer = sock.recv(4096)
            os.write(w, b"answered" if answer else b"closed")
        except OSError:
            os.write(w, b"closed")
        finally:
            os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 100) == b"closed"
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert system.ask(name, Echo(value="ok")) == "ok"


def test_a_bad_frame_closes_only_that_connection(system: ActorSystemHandle) -> None:
    name = unique("laneframe")
    start_child(system, ChildSpec(id=name, actor=PROBE, register_as=name))
    path = _probe_lane(system, name)
    for junk in (struct.pack("!I", 5) + b"\x80\x05junk", struct.pack("!I", (1 << 30) + 1) + b"x"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(junk)
            assert sock.recv(4096) == b""  # closed by the actor
    assert system.ask(name, Echo(value="alive")) == "alive"


class _Addr:
    """Shaped like a Thespian TCP address (``addressDetails.sockname``)."""

    def __init__(self, port: int) -> None:
        self.addressDetails = type("D", (), {"sockname": ("127.0.0.1", port)})()


def test_a_forked_child_does_not_keep_its_parents_lane_bound() -> None:
    server = LaneServer(1, _Addr(os.getpid() + 40000))
    name = lane_name(1, server.key)
    go_r, go_w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # runs its at-fork handlers, says so, then lives on until the parent has checked
        os.write(up_w, b"u")
        os.read(go_r, 1)
        os._exit(0)
    try:
        assert os.read(up_r, 1) == b"u"
        server.close()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, pytest.raises(ConnectionRefusedError):
            sock.connect(name)
    finally:
        os.write(go_w, b"x")
        for fd in (go_r, go_w, up_r, up_w):
            os.close(fd)
        os.waitpid(pid, 0)


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(
        st.recursive(
            st.none() | st.integers() | st.text(max_size=50), lambda inner: st.lists(inner, max_size=4), max_leaves=10
        ),
        max_size=20,
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=64), max_size=50),
)
def test_frames_are_reassembled_whatever_the_chunking(messages: list, cuts: list[int]) -> None:
    data = b"".join(encode(None, m) for m in messages)
    frames, pos, parser = [], 0, _Frames()
    for cut in cuts:
        frames += parser.feed(data[pos : pos + cut])
        pos += cut
    frames += parser.feed(data[pos:])
    assert [pickle.loads(f)[1] for f in frames] == messages
    assert not parser.buf


def test_a_frame_header_over_the_limit_is_rejected() -> None:
    with pytest.raises(ValueError):
        _Frames().feed(struct.pack("!I", (1 << 30) + 1))


def test_the_worker_pool_and_its_workers_serve_over_lanes(system: ActorSystemHandle) -> None:
    before = _lane(system, "workers")["frames_in"]
    assert system.run_job("os.getpid", timeout=10) != os.getpid()
    status = wait_status(system, "workers", lambda s: s["lane"]["frames_in"] > before)
    assert status["lane"]["frames_in"] > before


@pytest.mark.serial  # the exit is observed through two kernel views in a tight loop
def test_fast_liveness_sees_an_exit_a_zombie_and_never_a_reused_pid() -> None:
    from adk_actors.runtime.procs import pid_alive, pid_alive_fast

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)
        os._exit(0)
    try:
        assert pid_alive_fast(pid) and pid_alive(pid)
        os.write(w, b"x")
        with open(f"/proc/{pid}/stat", "rb"):  # still in the process table until reaped
            pass
        deadline = time.monotonic() + 10
        while pid_alive(pid):  # the /proc view: running, then a zombie (dead)
            assert time.monotonic() < deadline
        # The pidfd turns readable as the kernel finishes the exit, a moment after /proc shows the zombie: the fast
        # view must follow (an unreaped zombie counts as dead), never report it alive for good.
        while pid_alive_fast(pid):
            assert time.monotonic() < deadline
    finally:
        os.close(r)
        os.close(w)
        os.waitpid(pid, 0)
    assert not pid_alive_fast(pid)
    assert pid_alive_fast(os.getpid())


def test_a_kept_connection_to_a_dead_actor_reaches_the_new_actor_at_its_address() -> None:
    """A port (and so a lane name) freed by a dead actor can be taken by a new one: the first send on the stale
    connection fails before anything left, so the frame goes once to the new listener."""
    system_port = 7
    owner = LaneServer(system_port, _Addr(os.getpid() + 41000))
    target = _Addr(os.getpid() + 42000)
    first = LaneServer(system_port, target)
    try:
        assert owner.client.send(target, "me", "one")
        assert _poll_until(first) == [("me", "one")]
        first.close()
        second = LaneServer(system_port, target)
        try:
            assert owner.client.send(target, "me", "two")
            assert _poll_until(second) == [("me", "two")]
        finally:
            second.close()
        assert not owner.client.send(target, "me", "three")  # nobody listens now: the caller uses Thespian
    finally:
        owner.close()


def _poll_until(server: LaneServer) -> list[tuple[object, object]]:
    """Wait on the server's epoll fd until a message arrived (accepting the connection takes a pass of its own)."""
    poller = select.poll()
    poller.register(server.fileno(), select.POLLIN)
    for _ in range(10):
        assert poller.poll(5000)
        got = server.poll()
        if got:
            return got
    return []
