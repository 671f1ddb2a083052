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
import contextlib
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


def check_dev_endpoints(settings: Any) -> None:
    """The A2A endpoints ``adk serve`` adds are loopback only (the public A2A server is ``a2a_app`` with auth).

    Raises:
        ConfigError: ``a2a_dev_endpoint_must_bind_loopback``; ``legacy_a2a_server_must_bind_loopback``.
    """
    if settings.dev_legacy_a2a:
        from adk_actors.web.legacy_a2a import check_legacy_bind

        check_legacy_bind(settings.dev_bind_ip)
    if settings.dev_a2a and settings.dev_allow_remote_bind:
        raise ConfigError(
            "the dev server's A2A endpoint is loopback only: serve a public A2A agent with a2a_app and auth",
            reason="a2a_dev_endpoint_must_bind_loopback",
        )


def _resources(name: str) -> Any:
    """The application's resource provider named by the ``dev_resources`` setting, loaded in this process.

    Raises:
        ConfigError: ``invalid_dev_resources`` when the name does not import or names neither a provider callable
            nor a ``DevResources`` value (details name the setting and the exception type, never the module's text).
    """
    from adk_actors.devapi.resources import DevResources
    from adk_actors.runtime.callables import CallableRef

    try:
        found = CallableRef.by_name(name).resolve()
    except AdkError as err:
        raise ConfigError(
            "dev_resources does not import",
            reason="invalid_dev_resources",
            details={"key": "dev_resources", "type": str(err.details.get("error", ""))},
        ) from None
    if not isinstance(found, DevResources) and not callable(found):
        raise ConfigError(
            "dev_resources must name a resource provider callable or a DevResources value",
            reason="invalid_dev_resources",
            details={"key": "dev_resources", "type": type(found).__name__},
        )
    return found


def _serve(admin_port: int) -> int:
    from adk_actors.runtime.system import attach
    from adk_actors.settings import Settings
    from adk_actors.web.dev import dev_app
    from adk_actors.web.edge import DevToken
    from adk_actors.web.serve import check_bind, start_in_thread

    settings = Settings.from_dict(
        {
            **json.loads(os.environ.get("ADKACTORS_EDGE_SETTINGS") or "{}"),
            "dev_live_principal": os.environ.get("ADK_DEV_LIVE_PRINCIPAL") or None,
        }
    )
    check_bind(settings.dev_bind_ip, settings.dev_allow_remote_bind)
    token = DevToken.from_env()
    handle = attach(admin_port, settings, make_default=False)
    mcp = a2a = legacy = None
    if settings.dev_mcp:
        from adk_actors.web.mcp_server import mcp_app

        mcp = mcp_app(handle, token=token, agents=settings.dev_mcp.split(","))
    if (settings.dev_a2a or settings.dev_legacy_a2a) and settings.dev_allow_remote_bind:
        raise ConfigError(
            "the dev server's A2A endpoints are loopback only: serve a public A2A agent with a2a_app and auth",
            reason="a2a_dev_endpoint_must_bind_loopback",
        )
    if settings.dev_a2a:
        from adk_actors.node import session_service
        from adk_actors.runner import Runner
        from adk_actors.web.a2a_server import a2a_app

        runner = Runner(settings.dev_a2a, "a2a", session_service(system=handle), system=handle)
        a2a = a2a_app(handle, runner=runner, card=None)
    if settings.dev_legacy_a2a:
        from adk_actors.web.legacy_a2a import legacy_a2a_app

        legacy = legacy_a2a_app(handle)
    resources = _resources(settings.dev_resources) if settings.dev_resources else None
    app: Any = _Composite(dev_app(handle, token=token, a2a=a2a, resources=resources), mcp=mcp, a2a=a2a, legacy=legacy)
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
    if a2a is not None:
        from adk_actors.web.a2a_server import A2A_PATH, agent_card

        a2a.set_card(
            agent_card(name=settings.dev_a2a, description=f"{settings.dev_a2a} (adk serve)", url=server.url + A2A_PATH)
        )
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


class _Composite:
    """The dev app with the endpoints ``adk serve`` adds: ``/mcp`` (the MCP app, whose session manager runs for the
    server's lifespan), the A2A card and ``/a2a/v1``, ``/a2a/prompt`` (legacy); everything else goes to ``/dev``."""

    def __init__(self, dev: Any, *, mcp: Any = None, a2a: Any = None, legacy: Any = None) -> None:
        self.dev, self.mcp, self.a2a, self.legacy = dev, mcp, a2a, legacy

    def _target(self, path: str) -> Any:
        from adk_actors.web.a2a_server import A2A_PATH, CARD_PATH
        from adk_actors.web.mcp_server import MCP_PATH

        if self.mcp is not None and path == MCP_PATH:
            return self.mcp
        if self.a2a is not None and path in (A2A_PATH, CARD_PATH):
            return self.a2a
        if self.legacy is not None and path == "/a2a/prompt":
            return self.legacy
        return self.dev

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            async with contextlib.AsyncExitStack() as stack:
                if self.mcp is not None:
                    await stack.enter_async_context(self.mcp.lifespan())
                if self.a2a is not None:
                    stack.push_async_callback(self.a2a.close)
                await self.dev(scope, receive, send)
        elif scope["type"] == "http":
            await self._target(str(scope.get("path", "")))(scope, receive, send)
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
