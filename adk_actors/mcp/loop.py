"""One asyncio event-loop thread per process for the asyncio-based ``mcp`` SDK (DESIGN §8).

The actor that owns an MCP connection stays its owner and the unit of supervision; the loop thread is plumbing.
A blocking caller (a host's I/O thread, or a facade caller) hands a coroutine to :func:`run` and waits for it;
cancelling the caller's :class:`~adk_actors.runtime.cancel.CancelToken` cancels the coroutine on the loop (the SDK
then sends ``notifications/cancelled`` for an abandoned request). Child processes started from this thread (stdio
servers) get ``PR_SET_PDEATHSIG``, which the kernel ties to the thread that forked them: this thread lives as long
as its process, so a server dies with the process that owns it, SIGKILL included.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from adk_actors.errors import AdkError, McpError
from adk_actors.runtime.cancel import CancelToken
from adk_actors.runtime.iopool import Completion

__all__ = ["event_loop", "on_loop", "run"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = 0


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's MCP loop, started on first use (a daemon thread named ``adk-mcp-loop``)."""
    global _loop, _pid
    import os

    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=serve, name="adk-mcp-loop", daemon=True).start()
            started.wait()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(coro: Coroutine[Any, Any, T], token: CancelToken | None = None, timeout: float | None = None) -> T:
    """Run ``coro`` on the MCP loop and wait for its result.

    Raises:
        McpError: ``cancelled`` when ``token`` was cancelled first; ``mcp_timeout`` past ``timeout`` seconds (the
            coroutine is cancelled in both cases).
        Exception: whatever the coroutine raises.
    """
    loop = event_loop()
    future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
    if token is not None:
        token.on_cancel(future.cancel)
    try:
        return future.result(timeout)
    except concurrent.futures.CancelledError:
        raise McpError("the MCP request was cancelled", reason="cancelled") from None
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise McpError("the MCP request passed its deadline", reason="mcp_timeout") from None


def _outcome(future: concurrent.futures.Future[Any]) -> tuple[Any, AdkError | None]:
    if future.cancelled():
        return None, McpError("the MCP request was cancelled", reason="cancelled")
    exc = future.exception()
    if exc is None:
        return future.result(), None
    if isinstance(exc, AdkError):
        return None, exc
    return None, McpError(
        "the MCP request failed", reason="mcp_protocol_error", details={"exception_type": type(exc).__name__}
    )


def on_loop(make: Callable[..., Coroutine[Any, Any, Any]]) -> Completion:
    """An actor's ``io_call`` function that runs ``make(*args)`` on the MCP loop without occupying an I/O thread:
    the loop's done callback completes the call (one thread hand-off less than :func:`run` on an I/O thread)."""

    def start(token: CancelToken, complete: Callable[[Any, AdkError | None], None], *args: Any) -> None:
        future = asyncio.run_coroutine_threadsafe(make(*args), event_loop())
        token.on_cancel(future.cancel)
        future.add_done_callback(lambda f: complete(*_outcome(f)))

    return Completion(start)
