"""Three changes to Thespian's TCP transport and log forwarding, applied in every process of ours that runs them.

**Listeners bind the advertised address only.** Thespian binds every listening socket it makes (the admin's, each
actor's, the logger's and an external endpoint's) to ``''`` — all interfaces — and advertises
``THESPIAN_BASE_IPADDR``. Those ports unpickle whatever arrives, so a wildcard bind lets anyone who reaches the
machine run code as the node's user. :func:`apply` makes an address's bind arguments its own advertised address
(``bind_ip``, loopback by default), which covers every listener because they all bind through ``bindArgs``.

**One poll per pass.**
Thespian's ``TCPTransport`` builds a new ``selectors.DefaultSelector()`` on every pass of its loop (its own comment
says "perhaps this could be optimized"). On Linux that is an epoll object: ``epoll_create``, one ``epoll_ctl`` per
socket, the wait and a ``close`` — for one wait. The profile of a host serving prompt turns put a fifth of its main
thread there. :class:`OnePoll` makes the same wait one ``poll(2)`` call, with registration reduced to what the
transport uses (fd, read/write interest; ready keys with ``.fd``) and the readiness mapping of the standard
``PollSelector`` (anything but plain POLLIN also counts as writable, anything but plain POLLOUT as readable).
Only the transport module's view of ``selectors`` changes (asyncio and everything else keep their defaults).

**Log records made off the actor's thread reach the transport through the actor's thread.** In an actor process
Thespian's root logger is a forwarder whose handler sends each record to the logger process with
``scheduleTransmit`` on the thread that logged. Thespian's transport is not safe for that: a second thread that
finds more than 20 transmits pending runs the transport's own loop (``run(TransmitOnly)``) beside the actor's,
and ``_runQueued`` clears the actor thread's exclusive-processing flag when it loses the race for it. Under plain
load (SQL statements logged on a host's I/O threads) that gave "Bad file descriptor" send errors, lost records,
stalls, and at last ``RuntimeError: dictionary changed size during iteration`` out of the transport's run loop,
which ends the actor process. :data:`LOG_RELAY` keeps the records of other threads (formatted where they were made)
in a bounded queue and writes one byte to its pipe; every actor's transport watches that pipe along with the fds the
actor asked for (``ThespianWatch``), so the actor's own thread wakes and, before it handles any message, hands the
queued records to Thespian (:meth:`LogRelay.flush`); a wake-up for the pipe alone goes no further. Records logged on
the actor's thread go out as before, after any queued ones.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import selectors
import threading
import types
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from adk_actors.runtime.threadtimers import thread_timers

__all__ = ["ENV", "LOG_RELAY", "LogRelay", "OnePoll", "apply", "bound_address"]

ENV = "ADKACTORS_THESPIAN_EPOLL"
"""Set to ``1`` to keep Thespian's own per-pass epoll selector (for A/B measurements)."""


class _Key(NamedTuple):
    fd: int
    events: int


class OnePoll:
    """A single-use selector over ``select.poll`` for Thespian's transport loop (see the module docstring)."""

    __slots__ = ("_fds", "_poll")

    def __init__(self) -> None:
        self._poll = select.poll()
        self._fds: dict[int, int] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> _Key:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd < 0:
            raise ValueError(f"Invalid file descriptor: {fd}")
        if fd in self._fds:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        self._fds[fd] = events
        self._poll.register(
            fd,
            (select.POLLIN if events & selectors.EVENT_READ else 0)
            | (select.POLLOUT if events & selectors.EVENT_WRITE else 0),
        )
        return _Key(fd, events)

    def select(self, timeout: float | None = None) -> list[tuple[_Key, int]]:
        if timeout is None:
            wait = None
        elif timeout <= 0:
            wait = 0
        else:
            wait = max(1, int(timeout * 1000 + 0.999))  # poll(2) takes ms; round up, as PollSelector does
        try:
            ready = self._poll.poll(wait)
        except InterruptedError:
            return []
        out = []
        for fd, event in ready:
            events = 0
            if event & ~select.POLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.POLLOUT:
                events |= selectors.EVENT_READ
            wanted = self._fds.get(fd, 0)
            if events & wanted:
                out.append((_Key(fd, wanted), events & wanted))
        return out

    def close(self) -> None:
        self._fds.clear()


class LogRelay:
    """Log records of other threads, carried to the actor's thread of this process (see the module docstring).

    ``put`` may be called on any thread; ``flush`` and ``fileno`` belong to the actor's thread (the process's
    main thread, the one Thespian runs the actor on). A forked child starts with an empty queue and a new pipe.
    """

    MAX_PENDING = 10_000
    """Records held at most; more are counted and dropped (reported by the next flush)."""
    BATCH = 500
    """Records handed to Thespian per flush; a longer queue re-arms the pipe so the actor comes back for more."""
    BACKLOG = 400
    """Records are handed over only while Thespian has fewer transmits queued than this (it stalls its actor in a
    transmit-only drain at 950); the rest wait, and the pipe is re-armed after :attr:`RETRY_S`."""
    RETRY_S = 0.02

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: deque[tuple[Any, logging.LogRecord]] = deque()
        self._dropped = 0
        self._armed = False
        self._flushing = False
        self._read_fd = self._write_fd = -1
        self._retry: int | None = None
        self.transport: Callable[[], Any] = _log_transport
        self.forward: Callable[[Any, logging.LogRecord], None] | None = None
        """Thespian's own ``ThespianLogForwardHandler.handle`` (set by :func:`apply`)."""

    @staticmethod
    def on_actor_thread() -> bool:
        return threading.get_ident() == threading.main_thread().ident

    @property
    def pending(self) -> int:
        return len(self._pending)

    def fileno(self) -> int:
        """The read end of the wake pipe, readable while records wait (created on first use)."""
        with self._lock:
            return self._pipe()

    def _pipe(self) -> int:
        if self._read_fd < 0:
            self._read_fd, self._write_fd = os.pipe()
            os.set_blocking(self._read_fd, False)
            os.set_blocking(self._write_fd, False)
            if self._pending:
                self._armed = True
                self._wake()
        return self._read_fd

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a full pipe is already readable
            os.write(self._write_fd, b"\0")

    def handle(self, handler: Any, record: logging.LogRecord) -> None:
        """The forwarding handler's ``handle``: send now on the actor's thread, queue on any other."""
        if record.levelno < handler.level or self.forward is None:
            return
        if self.on_actor_thread():
            if self._pending:
                self.flush()
            self.forward(handler, record)
            return
        self.put(handler, record)

    def put(self, handler: Any, record: logging.LogRecord) -> None:
        """Queue ``record`` for the actor's thread, formatted now (its arguments may change once we return)."""
        _freeze(record)
        with self._lock:
            if len(self._pending) >= self.MAX_PENDING:
                self._dropped += 1
                return
            self._pending.append((handler, record))
            if self._armed:
                return
            self._armed = True
            self._pipe()
            self._wake()

    def flush(self) -> int:
        """Hand queued records to Thespian (on the actor's thread only); returns how many were sent."""
        if self._flushing or not self.on_actor_thread() or self.forward is None:
            return 0
        self._flushing = True
        try:
            with self._lock:
                if self._read_fd >= 0:
                    with contextlib.suppress(OSError):
                        while os.read(self._read_fd, 4096):
                            pass
                room = min(self.BATCH, self._room())
                batch = [self._pending.popleft() for _ in range(min(room, len(self._pending)))]
                dropped = self._dropped if batch else 0  # reported with the records that made it
                self._dropped -= dropped
                self._armed = bool(self._pending)
                if self._armed:
                    if room < self.BATCH:  # Thespian is behind: come back shortly, not at once
                        if self._retry is None:
                            self._retry = thread_timers.add(self.RETRY_S, self._rearm)
                    else:
                        self._wake()
            for handler, record in batch:
                self.forward(handler, record)
            if dropped and batch:
                note = logging.LogRecord(
                    "adk_actors.runtime",
                    logging.WARNING,
                    __file__,
                    0,
                    "%d log records of other threads dropped (more than %d waiting)",
                    (dropped, self.MAX_PENDING),
                    None,
                )
                self.forward(batch[-1][0], note)
            return len(batch)
        finally:
            self._flushing = False

    def _room(self) -> int:
        queued = getattr(self.transport(), "_aTB_queuedPendingTransmits", ())
        return max(0, self.BACKLOG - len(queued))

    def _rearm(self) -> None:  # on the timer thread: only the pipe, never the transport
        with self._lock:
            self._retry = None
            if self._pending and self._read_fd >= 0:
                self._wake()

    def reset(self) -> None:
        """In a forked child: nothing queued, and a pipe of its own (made on first use)."""
        self._lock = threading.Lock()
        self._pending.clear()
        self._dropped = 0
        self._armed = self._flushing = False
        self._retry = None
        for fd in (self._read_fd, self._write_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read_fd = self._write_fd = -1


def _log_transport() -> Any:
    from thespian.system import logdirector

    return logdirector.logTransport


def _freeze(record: logging.LogRecord) -> None:
    """What Thespian's handler does to a record before pickling it, done on the thread that made it."""
    if record.exc_info:
        if not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
    try:
        record.msg = record.getMessage()
    except Exception:
        record.msg = f"{record.msg!s} (unformattable arguments)"
    record.args = None


LOG_RELAY = LogRelay()
os.register_at_fork(after_in_child=LOG_RELAY.reset)


def _install_relay() -> None:
    """Route the forwarder's records through :data:`LOG_RELAY`; every actor watches the relay's pipe, and the
    actor's thread flushes it before each message it handles (a wake-up for the pipe alone stops there)."""
    from thespian.actors import WatchMessage
    from thespian.system import logdirector
    from thespian.system.actorManager import ActorManager
    from thespian.system.transport.TCPTransport import TCPTransport

    forwarder: Any = logdirector.ThespianLogForwardHandler
    if hasattr(forwarder, "_adk_thespian_handle"):
        LOG_RELAY.forward = forwarder._adk_thespian_handle
        return
    forwarder._adk_thespian_handle = LOG_RELAY.forward = forwarder.handle
    forwarder.handle = lambda handler, record: LOG_RELAY.handle(handler, record)

    set_watch = TCPTransport.set_watch

    def watch_relay_too(transport: Any, watchlist: Any) -> None:
        relay = LOG_RELAY.fileno()
        set_watch(transport, [*(fd for fd in watchlist if fd != relay), relay])

    handle_messages = ActorManager.handleMessages

    def flush_first(manager: Any, envelope: Any) -> Any:
        if LOG_RELAY.pending:
            LOG_RELAY.flush()
        message = envelope.message
        if isinstance(message, WatchMessage) and LOG_RELAY.fileno() in message.ready:
            message.ready = [fd for fd in message.ready if fd != LOG_RELAY.fileno()]
            if not message.ready and not getattr(manager, "_receiveQueue", None):
                return True  # the wake-up was for the relay only: keep running
        return handle_messages(manager, envelope)

    TCPTransport.set_watch = watch_relay_too
    ActorManager.handleMessages = flush_first


def bound_address(address: Any) -> tuple[tuple[str, int]]:
    """The bind arguments of a Thespian IP address: its advertised host, never the wildcard ``''``."""
    host, port = address.bindname[:2]
    return ((host or address.sockname[0], port),)


def apply() -> None:
    """Install the changes (idempotent). Call before the admin forks, so every actor process inherits them."""
    from thespian.system.transport import IPBase
    from thespian.system.transport import TCPTransport as transport

    if not getattr(IPBase, "_adk_bound", False):
        # ``bindname`` stays as Thespian made it: it is also read as a peer address when guessing our own IP.
        IPBase.IPActorAddress.bindArgs = property(bound_address)
        IPBase._adk_bound = True
    _install_relay()
    if os.environ.get(ENV) == "1":
        return
    if getattr(transport, "_adk_poll_selector", False):
        return
    view = types.ModuleType("selectors")
    view.__dict__.update(vars(selectors))
    view.DefaultSelector = OnePoll  # type: ignore[attr-defined]
    transport.selectors = view
    transport._adk_poll_selector = True
