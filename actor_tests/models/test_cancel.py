"""CancelToken on its own: real socket pairs, no HTTP."""

from __future__ import annotations

import socket
import threading

import pytest

from adk_actors.errors import ProviderError
from adk_actors.models.cancel import CancelToken


def test_cancel_shuts_down_a_blocked_reader():
    token = CancelToken()
    a, b = socket.socketpair()
    with a, b:
        token.register(a)
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.append(a.recv(10)))
        reader.start()
        token.cancel()
        reader.join(5)
        assert not reader.is_alive() and received == [b""]
    assert token.cancelled and token.reason == "cancelled"
    with pytest.raises(ProviderError) as info:
        token.raise_if_cancelled()
    assert info.value.reason == "cancelled"


def test_a_socket_registered_after_cancel_is_shut_down_at_once():
    token = CancelToken()
    token.cancel("shutdown")
    token.cancel("second")
    a, b = socket.socketpair()
    with a, b:
        token.register(a)
        assert a.recv(10) == b""
    assert token.reason == "shutdown"


def test_unregistered_sockets_are_left_alone_and_wait_returns_on_cancel():
    token = CancelToken()
    a, b = socket.socketpair()
    with a, b:
        token.register(a)
        token.unregister(a)
        assert not token.wait(0)
        token.cancel()
        assert token.wait(None)
        b.sendall(b"ok")
        assert a.recv(10) == b"ok"
