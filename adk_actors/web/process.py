"""The ``/dev/v1`` server as a supervised child of a node (``dev_server = true``, ``adk serve``).

:class:`EdgeChild` is a tier-1 actor under the node's root, restarted like any permanent child. It runs the server
in a process of its own (``python -m adk_actors.web.process``): uvicorn serving :func:`~adk_actors.web.dev.dev_app`,
attached to the node by its admin port like any facade client. The two watch each other through pipes:

* the actor watches the server's stdout; end of file means the server died, and the actor exits with a crash, so its
  supervisor restarts it and a new server binds the same port;
* the server watches its stdin; end of file means the actor died, and the server stops (its successor is coming).

A restarted server may find the port still held for a moment by the one it replaces: it retries the bind for
:data:`BIND_RETRY_S` seconds before it gives up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError, ConfigError, RuntimeFailure
from adk_actors.runtime.server import GenServer

__all__ = ["BIND_RETRY_S", "EDGE_NAME", "EdgeChild", "EdgeSpec", "main"]

EDGE_NAME = "dev_edge"
"""The child's id (and registered name) under the node's root."""
BIND_RETRY_S = 15.0
_STOP_S = 5.0


@dataclass(frozen=True, slots=True)
class EdgeSpec:
    """What the child needs to start its server: the node's settings (as :meth:`Settings.to_dict`)."""

    settings: dict[str, Any]


class EdgeChild(GenServer):
    """Owns the server process; crashes when it dies (see the module docstring)."""

    def init(self, args: Any) -> Any:
        spec = args if isinstance(args, EdgeSpec) else EdgeSpec(settings={})
        env = {**os.environ, "ADKACTORS_EDGE_SETTINGS": json.dumps(spec.settings)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "adk_actors.web.process", "--admin-port", str(self._system_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.fileno()
        os.set_blocking(self.out, False)
        self.listening: dict[str, Any] = {}
        return None

    def watch_fds(self) -> list[int]:
        return [self.out] if getattr(self, "out", None) is not None else []

    def handle_ready(self, fds: list[int]) -> None:
        try:
            chunk = os.read(self.out, 4096)
        except BlockingIOError:
            return
        if not chunk:
            code = self.proc.wait()
            raise RuntimeFailure("the dev server process exited", reason="edge_exited", details={"code": code})
        for line in chunk.decode("utf-8", "replace").splitlines():
            try:
                said = json.loads(line)
                self.listening = {"url": str(said["url"]), "port": int(said["port"])}
            except (ValueError, TypeError, KeyError):
                continue
            self.log.info("dev server listening", url=self.listening.get("url"), pid=self.proc.pid)

    def status(self) -> dict[str, Any]:
        proc = getattr(self, "proc", None)
        return {"server_pid": proc.pid if proc is not None else None, **getattr(self, "listening", {})}

    def terminate(self, reason: str) -> None:
        proc = getattr(self, "proc", None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(_STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- the server process ---------------------------------------------------------------------------------------


def _serve(admin_port: int) -> int:
    from adk_actors.runtime.system import attach
    from adk_actors.settings import Settings
    from adk_actors.web.dev import dev_app
    from adk_actors.web.edge import DevToken
    from adk_actors.web.serve import check_bind, start_in_thread

    settings = Settings.from_dict(json.loads(os.environ.get("ADKACTORS_EDGE_SETTINGS") or "{}"))
    check_bind(settings.dev_bind_ip, settings.dev_allow_remote_bind)
    token = DevToken.from_env()
    handle = attach(admin_port, settings, make_default=False)
    app: Any = dev_app(handle, token=token)
    if settings.dev_mcp:
        from adk_actors.web.mcp_server import mcp_app

        app = _WithMcp(app, mcp_app(handle, token=token, agents=settings.dev_mcp.split(",")))
    deadline = time.monotonic() + BIND_RETRY_S
    while True:
        try:
            server = start_in_thread(
                app, settings.dev_bind_ip, settings.dev_port, allow_non_loopback=settings.dev_allow_remote_bind
            )
            break
        except (OSError, ConfigError):
            if time.monotonic() > deadline:
                raise ConfigError(
                    "the dev server port stayed taken", reason="port_in_use", details={"port": settings.dev_port}
                ) from None
            time.sleep(0.1)  # the server this one replaces still holds the port
    sys.stdout.write(json.dumps({"url": server.url, "port": server.port, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    parent_gone = threading.Event()

    def watch_parent() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        parent_gone.set()

    threading.Thread(target=watch_parent, name="adk-edge-parent", daemon=True).start()
    try:
        while not parent_gone.wait(0.5):
            if not server.running:
                return 1
    finally:
        server.stop(_STOP_S)
        handle.detach()
    return 0


class _WithMcp:
    """The dev app with the MCP endpoint (``adk serve --mcp``): ``/mcp`` goes to the MCP app, the rest to ``/dev``;
    the MCP app's session manager runs for the lifespan of the server."""

    def __init__(self, dev: Any, mcp: Any) -> None:
        self.dev, self.mcp = dev, mcp

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from adk_actors.web.mcp_server import MCP_PATH

        if scope["type"] == "lifespan":
            async with self.mcp.lifespan():
                await self.dev(scope, receive, send)
        elif scope["type"] == "http" and scope.get("path") == MCP_PATH:
            await self.mcp(scope, receive, send)
        else:
            await self.dev(scope, receive, send)


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    """``python -m adk_actors.web.process --admin-port N``: serve ``/dev/v1`` for the node on that admin port."""
    parser = argparse.ArgumentParser(prog="adk_actors.web.process")
    parser.add_argument("--admin-port", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        return _serve(args.admin_port)
    except AdkError as err:
        sys.stderr.write(f"dev server: {err.reason}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
