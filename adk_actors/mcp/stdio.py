"""The stdio transport: a server process we own, newline-delimited JSON-RPC on its stdin/stdout.

Written here instead of using ``mcp.client.stdio.stdio_client`` (the SDK's session layer still does the protocol)
for two defects of the SDK transport (mcp 2.3.0), both checked by tests:

* it starts the server with ``start_new_session`` only, so a SIGKILLed owner leaves the server running as an
  orphan; we also set ``PR_SET_PDEATHSIG=SIGKILL`` in the child (from the MCP loop thread, which lives as long as
  the process);
* it reads stdout with an unbounded line buffer, so a server that writes a huge line (or never a newline) grows
  the owner's memory without limit; we read with a bounded ``StreamReader`` and close the connection with
  ``mcp_message_too_large`` instead.

A line that is not a JSON-RPC message closes the connection as ``mcp_protocol_error`` (the spec reserves stdout
for MCP messages). The server's stderr is discarded. Only a small, safe part of our environment is passed on
(``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``, ``LANG``), plus the ``env`` the caller gives: our
API keys never reach a server by accident. Shutdown follows the spec: close stdin, wait, SIGTERM the process
group, wait, SIGKILL it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from adk_actors.errors import McpError

__all__ = ["SAFE_ENV", "StdioProcess", "stdio_transport"]

SAFE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG")
"""The environment variables a server inherits from us (everything else it gets from ``env``)."""

_PR_SET_PDEATHSIG = 1
_BUFFER = 16
"""Messages buffered between the pipe tasks and the session (a rendezvous stream costs a task switch per message;
the session's in-flight bound keeps the buffer small)."""
_libc: Any = None
with contextlib.suppress(OSError):
    _libc = ctypes.CDLL(None, use_errno=True)
_prctl = getattr(_libc, "prctl", None)


def _in_child() -> None:  # pragma: no cover - runs in the forked child before exec
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass(slots=True)
class StdioProcess:
    """What the transport knows about its server process (read by the connection for status and errors)."""

    pid: int = 0
    failure: str | None = None
    """Why the transport closed the connection itself (``mcp_message_too_large``, ``mcp_protocol_error``)."""
    returncode: int | None = None
    stderr_bytes: int = field(default=0)


def _environment(env: Mapping[str, str] | None) -> dict[str, str]:
    out = {k: os.environ[k] for k in SAFE_ENV if k in os.environ and not os.environ[k].startswith("()")}
    out.update(env or {})
    return out


async def _stop(proc: asyncio.subprocess.Process, grace: float) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    for sig, wait in ((None, grace), (signal.SIGTERM, 1.0), (signal.SIGKILL, 2.0)):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), wait)
            return


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_message_bytes: int,
    info: StdioProcess,
    shutdown_grace_s: float = 2.0,
    on_end: Callable[[], object] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server and yield the SDK's ``(read_stream, write_stream)`` pair; ``on_end()`` runs when the server's
    output ends on its own (it exited, broke the protocol or sent an oversize line).

    Raises:
        McpError: ``mcp_spawn_failed`` when the command cannot be started.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            command,
            *args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_environment(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_in_child,
            limit=max_message_bytes + 1,
        )
    except (OSError, ValueError) as exc:
        raise McpError(
            "the MCP server command could not be started",
            reason="mcp_spawn_failed",
            details={"exception_type": type(exc).__name__},
        ) from None
    info.pid = proc.pid
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](_BUFFER)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](_BUFFER)

    async def reader() -> None:
        try:
            await read_lines()
        finally:
            if on_end is not None:
                on_end()

    async def read_lines() -> None:
        assert proc.stdout is not None
        async with read_send:
            while True:
                try:
                    line = await proc.stdout.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    info.failure = "mcp_message_too_large"
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    info.failure = "mcp_protocol_error"
                    return
                try:
                    await read_send.send(SessionMessage(message))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def writer() -> None:
        assert proc.stdin is not None
        async with write_recv:
            async for item in write_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                try:
                    proc.stdin.write(data)
                    await proc.stdin.drain()
                except (OSError, RuntimeError):
                    return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            with anyio.CancelScope(shield=True):
                write_send.close()
                await _stop(proc, shutdown_grace_s)
                info.returncode = proc.returncode
            tasks.cancel_scope.cancel()
