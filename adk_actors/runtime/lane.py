"""Lanes: same-machine message transport between our processes over Unix sockets.

Thespian's TCP transport costs about 1 ms of CPU per message on each side on this kind of machine (a send intent,
an ACK back, a selector rebuilt and every pending intent rescanned on each pass of its loop; see
docs/ARCHITECTURE.md, "Decision note: lanes"). A lane carries the same pickled messages over a connected
``AF_UNIX`` stream instead: length-prefixed frames, written with one ``send`` and read in batches.

* Every tier-1 :class:`~adk_actors.runtime.server.GenServer` opens a :class:`LaneServer` at init, listening on an
  abstract socket named after the system's admin port and the actor's own Thespian address, so anyone on this
  machine who holds the actor's address (or its registry entry) can find its lane without asking. The server's
  listener and connections sit in one ``epoll`` set, and the actor gives Thespian only that epoll fd to watch, so
  a lane costs one watched fd however many peers are connected.
* Actor to actor: :class:`LaneClient` keeps one write-only connection per target; the frame carries the sender's
  Thespian address, so the receiver sees the same ``sender`` as with a Thespian send. Replies travel the same way
  on the reverse lane. A target is looked up once: if it has no lane (not one of our actors, or not started yet)
  every later message to it goes through Thespian, so two messages from one sender to one target never take
  different paths and per-pair order holds. A lane that breaks (the peer died) falls back to Thespian for that
  message, which then takes Thespian's dead-letter path as before.
* Facade to actor: a blocking connection per calling thread and target (:class:`LaneConn`); the frame carries no
  sender, the server answers a :class:`LaneReturn` on that same connection, and the peer's death is seen at once
  as end of stream.

Only peers with our own uid are accepted (``SO_PEERCRED``): a lane is never reachable from another machine and,
unlike Thespian's TCP ports, not from another local user either. The check runs both ways: a client refuses a
listener of another uid (one that took a lane's name first) before it writes or reads a byte, and the node refuses
to start while any lane name of its admin port is already held (``held_lane_names``). Thespian still carries
everything else: actor creation, exits, ``ChildActorExited``, wakeups, and every message to a peer on another
machine.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import select
import socket
import struct
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from adk_actors.logs import get_logger

__all__ = [
    "MAX_FRAME",
    "LaneClient",
    "LaneConn",
    "LaneReturn",
    "LaneServer",
    "address_key",
    "held_lane_names",
    "lane_name",
    "lanes_enabled",
    "peer_uid",
]

_HEADER = struct.Struct("!I")
MAX_FRAME = 1 << 30
"""Largest frame a lane accepts (1 GiB); a larger one closes the connection."""
_READ_CHUNK = 1 << 18
_NEGATIVE_CACHE = 4096
"""Targets remembered as having no lane (facade endpoints, other machines' actors), least recently used first."""
ENV = "ADKACTORS_LANES"
"""Environment switch the node sets for its actor processes ("0" turns lanes off; ``Settings.local_lanes``)."""

_log = get_logger("adk_actors.lane")
_open: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every lane object of this process, closed in a forked child: Thespian forks actor processes without exec, and
a child holding its parent's listener would keep the parent's lane name bound after the parent died."""


def _close_inherited() -> None:
    for item in list(_open):
        with contextlib.suppress(Exception):
            item.close()
    _open.clear()


os.register_at_fork(after_in_child=_close_inherited)


def lanes_enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def address_key(address: Any) -> tuple[str, int] | None:
    """``(ip, port)`` of a Thespian TCP actor address on this machine, or ``None`` (not an address we can lane)."""
    details = getattr(address, "addressDetails", None)
    sockname = getattr(details, "sockname", None)
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return None
    ip, port = sockname[0], sockname[1]
    if not isinstance(port, int) or not isinstance(ip, str) or not ip.startswith("127."):
        return None
    return ip, port


def lane_name(system_port: int, key: tuple[str, int]) -> bytes:
    """The abstract socket name of the lane of the actor at ``key`` in the system on ``system_port``."""
    return f"\0{_prefix(system_port)}{key[0]}-{key[1]}".encode()


def _prefix(system_port: int) -> str:
    return f"adk-lane-{system_port}-"


def held_lane_names(system_port: int) -> list[str]:
    """Abstract socket names of lanes of the system on ``system_port`` that some process has bound (from
    ``/proc/net/unix``, which shows an abstract name with ``@`` for its leading NUL)."""
    prefix = "@" + _prefix(system_port)
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        return []
    names = {fields[7] for fields in (line.split() for line in lines) if len(fields) >= 8}
    return sorted(name for name in names if name.startswith(prefix))


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (-1 when the kernel does not say)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return -1
    return int(struct.unpack("3i", creds)[1])


def _connect_own(name: bytes) -> socket.socket:
    """A blocking connection to the lane ``name``, refused unless its listener runs as our uid.

    Raises:
        PermissionError: another user holds the name (nothing was sent to it or read from it).
        OSError: nobody listens there.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)  # a full backlog makes connect wait; never forever
    try:
        sock.connect(name)
        uid = peer_uid(sock)
        if uid != os.getuid():
            _log.warning("lane held by another user refused", uid=uid)
            raise PermissionError(errno.EACCES, "lane listener runs as another user")
    except OSError:
        sock.close()
        raise
    return sock


@dataclass(frozen=True, slots=True)
class LaneReturn:
    """The ``sender`` of a facade message that came over a lane: replies go back on that connection."""

    pid: int
    conn: int


def encode(sender: Any, message: Any) -> bytes:
    body = pickle.dumps((sender, message), protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class _Frames:
    """Accumulates bytes and yields complete frames."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        frames: list[bytes] = []
        view = self.buf
        pos = 0
        while len(view) - pos >= _HEADER.size:
            (size,) = _HEADER.unpack_from(view, pos)
            if size > MAX_FRAME:
                raise ValueError("frame too large")
            end = pos + _HEADER.size + size
            if end > len(view):
                break
            frames.append(bytes(view[pos + _HEADER.size : end]))
            pos = end
        if pos:
            del self.buf[:pos]
        return frames


class _Peer:
    __slots__ = ("frames", "out", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = _Frames()
        self.out = bytearray()


def _send_out(peer: _Peer, epoll: select.epoll) -> bool:
    """Send what the socket takes of ``peer.out``; watch for writability while some is left. False: the
    connection is broken (the peer has gone)."""
    while peer.out:
        try:
            sent = peer.sock.send(peer.out)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            return False
        del peer.out[:sent]
    with contextlib.suppress(OSError, ValueError):
        epoll.modify(peer.sock.fileno(), select.EPOLLIN | (select.EPOLLOUT if peer.out else 0))
    return True


class LaneServer:
    """The lane of one tier-1 actor: accepts connections, reads frames, answers facade callers, and sends to
    other actors' lanes (:class:`LaneClient` shares its epoll set). Single-threaded: used from the actor's loop."""

    def __init__(self, system_port: int, own_address: Any) -> None:
        key = address_key(own_address)
        if key is None:
            raise OSError(errno.EINVAL, "not a local TCP actor address")
        self.system_port = system_port
        self.key = key
        self.pid = os.getpid()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.listener.bind(lane_name(system_port, key))
            self.listener.listen(1024)
            self.listener.setblocking(False)
            self.epoll = select.epoll()
        except OSError:
            self.listener.close()
            raise
        self.epoll.register(self.listener.fileno(), select.EPOLLIN)
        self.peers: dict[int, _Peer] = {}
        self.uid = os.getuid()
        self.client = LaneClient(self)
        self.frames_in = 0
        _open.add(self)

    def fileno(self) -> int:
        return self.epoll.fileno()

    def close(self) -> None:
        for peer in list(self.peers.values()):
            with contextlib.suppress(OSError):
                peer.sock.close()
        self.peers.clear()
        for peer in list(self.client.by_key.values()):
            with contextlib.suppress(OSError):
                peer.sock.close()
        self.client.by_key.clear()
        self.client.by_fd.clear()
        with contextlib.suppress(OSError):
            self.listener.close()
        with contextlib.suppress(OSError):
            self.epoll.close()

    # ---- incoming ----------------------------------------------------------------------------------------------
    def poll(self) -> list[tuple[Any, Any]]:
        """Everything that arrived since the last poll, as ``(sender, message)`` in arrival order per peer."""
        out: list[tuple[Any, Any]] = []
        for fd, events in self.epoll.poll(0):
            if fd == self.listener.fileno():
                self._accept()
                continue
            if fd in self.client.by_fd:
                self.client.on_event(fd, events)
                continue
            peer = self.peers.get(fd)
            if peer is None:
                continue
            if events & select.EPOLLOUT:
                self._flush(fd, peer)
            if events & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                self._read(fd, peer, out)
        self.frames_in += len(out)
        return out

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            uid = peer_uid(sock)
            if uid != self.uid:
                _log.warning("lane connection from another user refused", uid=uid)
                sock.close()
                continue
            sock.setblocking(False)
            self.peers[sock.fileno()] = _Peer(sock)
            self.epoll.register(sock.fileno(), select.EPOLLIN)

    def _read(self, fd: int, peer: _Peer, out: list[tuple[Any, Any]]) -> None:
        closed = False
        while True:
            try:
                data = peer.sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                closed = True
                break
            if not data:
                closed = True
                break
            try:
                frames = peer.frames.feed(data)
            except ValueError:
                _log.warning("lane frame over the size limit; connection closed")
                closed = True
                break
            for frame in frames:
                try:
                    sender, message = pickle.loads(frame)
                except Exception as exc:
                    _log.warning(
                        "lane frame could not be decoded; connection closed", exception_type=type(exc).__name__
                    )
                    closed = True
                    break
                out.append((LaneReturn(self.pid, fd) if sender is None else sender, message))
            if closed or len(data) < _READ_CHUNK:
                break
        if closed:
            self._drop(fd)

    def _drop(self, fd: int) -> None:
        peer = self.peers.pop(fd, None)
        if peer is not None:
            with contextlib.suppress(OSError, ValueError):
                self.epoll.unregister(fd)
            with contextlib.suppress(OSError):
                peer.sock.close()

    # ---- answers to facade callers ------------------------------------------------------------------------------
    def answer(self, target: LaneReturn, message: Any) -> bool:
        """Send ``message`` back on the connection ``target`` names; False when it is not ours or is gone."""
        if target.pid != self.pid:
            return False
        peer = self.peers.get(target.conn)
        if peer is None:
            return False
        peer.out += encode(None, message)  # raises when it does not pickle yet (see Tier1Port.send)
        self._flush(target.conn, peer)
        return True

    def _flush(self, fd: int, peer: _Peer) -> None:
        if not _send_out(peer, self.epoll):
            self._drop(fd)


class LaneClient:
    """Write-only connections from one actor to other actors' lanes, in its :class:`LaneServer`'s epoll set."""

    def __init__(self, server: LaneServer) -> None:
        self.server = server
        self.by_key: dict[tuple[str, int], _Peer] = {}
        self.by_fd: dict[int, tuple[tuple[str, int], _Peer]] = {}
        self.none: OrderedDict[tuple[str, int], None] = OrderedDict()
        self.frames_out = 0

    def send(self, target: Any, sender: Any, message: Any) -> bool:
        """Send over the target's lane; False when the target has no lane (the caller sends through Thespian)."""
        key = address_key(target)
        if key is None or key == self.server.key:
            return False
        peer = self.by_key.get(key)
        if peer is None:
            if key in self.none:
                self.none.move_to_end(key)
                return False
            peer = self._connect(key)
            if peer is None:
                self.none[key] = None
                if len(self.none) > _NEGATIVE_CACHE:
                    self.none.popitem(last=False)
                return False
        try:
            frame = encode(sender, message)
        except Exception:
            # Thespian can send what plain pickle cannot (an address it has not translated yet, which it
            # postpones): this and every later message to the target go through Thespian, keeping their order.
            self._forget(key, peer)
            self.none[key] = None
            return False
        fresh_start = not peer.out
        peer.out += frame
        if not self._flush(peer):
            self._forget(key, peer)
            # A kept connection to an actor that has died since: nothing of this frame left when it had nothing
            # queued before it, so it may go once more to whoever listens at that address now (a new actor that
            # got the port). Otherwise the target is gone and Thespian takes it (and its dead-letter handling).
            retry = self._connect(key) if fresh_start else None
            if retry is not None:
                retry.out += frame
                if self._flush(retry):
                    self.frames_out += 1
                    return True
                self._forget(key, retry)
            self.none[key] = None
            return False
        self.frames_out += 1
        return True

    def _connect(self, key: tuple[str, int]) -> _Peer | None:
        try:
            sock = _connect_own(lane_name(self.server.system_port, key))
        except OSError:
            return None
        sock.setblocking(False)
        peer = _Peer(sock)
        self.by_key[key] = peer
        self.by_fd[sock.fileno()] = (key, peer)
        self.server.epoll.register(sock.fileno(), select.EPOLLIN)  # EPOLLIN/HUP: the peer closed
        return peer

    def _flush(self, peer: _Peer) -> bool:
        return _send_out(peer, self.server.epoll)

    def on_event(self, fd: int, events: int) -> None:
        key, peer = self.by_fd[fd]
        if events & (select.EPOLLHUP | select.EPOLLERR):
            self._forget(key, peer)
            return
        if events & select.EPOLLIN:
            try:
                data = peer.sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                data = b"x"
            except OSError:
                data = b""
            if not data:  # the peer closed: the next send reconnects (a restarted actor has a new address)
                self._forget(key, peer)
                return
        if events & select.EPOLLOUT and not self._flush(peer):
            self._forget(key, peer)

    def _forget(self, key: tuple[str, int], peer: _Peer) -> None:
        self.by_key.pop(key, None)
        self.by_fd.pop(peer.sock.fileno(), None)
        with contextlib.suppress(OSError, ValueError):
            self.server.epoll.unregister(peer.sock.fileno())
        with contextlib.suppress(OSError):
            peer.sock.close()


class LaneConn:
    """A facade caller's blocking connection to one actor's lane (one per calling thread and target)."""

    def __init__(self, system_port: int, key: tuple[str, int]) -> None:
        """Connect to the lane of the actor at ``key``.

        Raises:
            PermissionError: the lane's listener runs as another user.
            OSError: the actor has no lane.
        """
        self.sock = _connect_own(lane_name(system_port, key))
        self.frames = _Frames()
        self.pending: list[bytes] = []
        self.closed = False
        _open.add(self)

    def send(self, message: Any) -> None:
        self.sock.settimeout(None)
        self.sock.sendall(encode(None, message))

    def recv(self, timeout: float) -> Any:
        """The next message, waiting up to ``timeout`` seconds.

        Raises:
            TimeoutError: nothing arrived in time.
            ConnectionError: the peer closed the lane (its process exited).
        """
        while not self.pending:
            self.sock.settimeout(max(timeout, 1e-4))
            data = self.sock.recv(_READ_CHUNK)
            if not data:
                raise ConnectionResetError("lane closed by the peer")
            self.pending.extend(self.frames.feed(data))
        _sender, message = pickle.loads(self.pending.pop(0))
        return message

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.close()
