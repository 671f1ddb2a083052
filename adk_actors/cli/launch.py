"""Bring one agent from a config file to life for ``adk run`` and ``adk console``, and tear down what was started.

:func:`open_agent` owns, in start order: an in-process :class:`~adk_actors.emulator.Emulator` (``--emulator``),
the actor system (an ephemeral owned node on a free port, or an attachment with ``--port``), the agent. They
stop in reverse order when the ``with`` block ends, also on error or interrupt.

Where the agent's model calls go, first match wins: ``--emulator`` (the emulator's URL and a placeholder key, so a
real key never reaches it), ``--base-url``, the file's ``base_url``, the ``gemini_base_url`` setting, the public
endpoint. Without a configured key (``GEMINI_API_KEY`` / ``ADK_GEMINI_API_KEY``) only a loopback endpoint is
allowed (it gets the placeholder key); anything else fails with ``ProviderError(reason="missing_api_key")`` before
anything starts. An attached system resolves its own key, in its own environment.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from adk_actors.agents.api import AgentRef, spawn_agent, stop_agent
from adk_actors.cli.agent_file import load_agent_file
from adk_actors.errors import AdkError, ConfigError, ProviderError
from adk_actors.models.gemini.config import check_base_url
from adk_actors.node import session_service, start
from adk_actors.runner import Runner
from adk_actors.runtime.system import ActorSystemHandle, attach
from adk_actors.settings import Settings

__all__ = [
    "APP_NAME",
    "LOCAL_KEY",
    "LaunchOptions",
    "LiveAgent",
    "add_launch_arguments",
    "apply_endpoint",
    "new_session_id",
    "open_agent",
    "options_from_args",
    "start_emulator",
    "start_ephemeral",
]

APP_NAME = "adk-cli"
"""The app name of every session the CLI creates."""
LOCAL_KEY = "adk-cli-local-endpoint"
"""Placeholder API key sent to the emulator and to a loopback endpoint when no real key is configured."""
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchOptions:
    """Where the agent comes from and where its model calls go."""

    config_path: str
    """The agent file."""
    port: int | None = None
    """Attach to the system on this admin port instead of starting an ephemeral one."""
    emulator: bool = False
    """Start an in-process emulator and point the agent at it."""
    script: str | None = None
    """The emulator's scenario script (default: the built-in one)."""
    base_url: str | None = None
    """The model endpoint (overrides the file and the settings)."""
    streaming: bool = False
    """Ask the Runner for text deltas (``streaming_mode="text"``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveAgent:
    """What :func:`open_agent` started: the system handle, the agent and one Runner over the node's sessions."""

    handle: ActorSystemHandle
    agent: AgentRef
    runner: Runner
    owns_system: bool
    """Whether the system is the ephemeral one this process started (stopped on exit)."""


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``console`` share."""
    parser.add_argument("--config", required=True, metavar="FILE", help="agent config (JSON)")
    parser.add_argument("--user", default="local", help="user id of the session (default: local)")
    parser.add_argument("--session", default=None, help="session id (default: a new cli-... id)")
    parser.add_argument("--emulator", action="store_true", help="run against an in-process Gemini emulator")
    parser.add_argument("--script", default=None, metavar="PATH", help="emulator scenario script (with --emulator)")
    parser.add_argument("--base-url", default=None, metavar="URL", help="Gemini endpoint (https, or loopback http)")
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="attach to the running system on this admin port (default: start an ephemeral one)",
    )


def options_from_args(args: argparse.Namespace, *, streaming: bool) -> LaunchOptions:
    """:class:`LaunchOptions` from parsed arguments.

    Raises:
        ConfigError: ``invalid_value`` for ``--script`` without ``--emulator`` or with ``--base-url``.
    """
    if args.script is not None and not args.emulator:
        raise ConfigError("--script needs --emulator", reason="invalid_value", details={"key": "--script"})
    if args.emulator and args.base_url is not None:
        raise ConfigError(
            "--emulator and --base-url are mutually exclusive", reason="invalid_value", details={"key": "--base-url"}
        )
    return LaunchOptions(
        config_path=args.config,
        port=args.port,
        emulator=args.emulator,
        script=args.script,
        base_url=args.base_url,
        streaming=streaming,
    )


def new_session_id() -> str:
    """A fresh session id for the CLI."""
    return f"cli-{uuid.uuid4().hex[:12]}"


def _is_loopback(url: str) -> bool:
    return urlsplit(url).hostname in _LOOPBACK


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def start_emulator(stack: contextlib.ExitStack, script: str | None) -> str:
    """Start an in-process emulator with ``script`` (default: the built-in one), stopped when ``stack`` closes;
    its base URL (``--emulator`` of ``adk run``, ``adk console`` and ``adk eval run``).

    Raises:
        ConfigError: ``invalid_script`` (``details``: the script's path and the error type).
    """
    from adk_actors.emulator import Emulator

    try:
        emulator = Emulator(script=script).start()
    except (OSError, ValueError) as exc:
        raise ConfigError(
            "the emulator cannot start with that script",
            reason="invalid_script",
            details={"path": script, "error": type(exc).__name__},
        ) from None
    stack.callback(emulator.stop)
    return str(emulator.base_url)


def start_ephemeral(settings: Settings) -> ActorSystemHandle:
    """An owned node on a free admin port (one retry if another process takes the port first)."""
    for attempt in range(2):
        try:
            return start(settings.replace(admin_port=_free_port(settings.bind_ip)), owned=True)
        except ConfigError as err:
            if err.reason != "port_in_use" or attempt:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def apply_endpoint(config: dict[str, Any], options: LaunchOptions, settings: Settings) -> None:
    """Set ``base_url`` / a placeholder ``api_key`` on ``config`` (see the module docstring).

    Raises:
        ConfigError: an invalid ``--base-url``.
        ProviderError: ``missing_api_key``.
    """
    if options.base_url is not None:
        config["base_url"] = check_base_url(options.base_url, "--base-url")
    elif "base_url" not in config and settings.gemini_base_url:
        config["base_url"] = check_base_url(settings.gemini_base_url, "gemini_base_url")
    if options.port is not None or settings.gemini_api_key is not None:
        return
    if "base_url" in config and _is_loopback(config["base_url"]):
        config["api_key"] = LOCAL_KEY
        return
    raise ProviderError(
        "no Gemini API key: set GEMINI_API_KEY in the environment, or use --emulator "
        "(or --base-url with a local endpoint)",
        reason="missing_api_key",
    )


@contextlib.contextmanager
def open_agent(options: LaunchOptions, settings: Settings) -> Iterator[LiveAgent]:
    """Start (or attach to) a system and spawn the file's agent; stop everything started on exit.

    The Runner gets the file's ``runner_options`` (``max_llm_calls``, ``max_tool_rounds``...) and the command's
    ``streaming_mode``.

    Raises:
        ConfigError: the file or the options are invalid (``secret_in_config``, ``unknown_key``, ``invalid_script``,
            ``port_in_use``...).
        ProviderError: ``missing_api_key``.
        SystemNotRunning: ``--port`` names no running system, or the node failed to boot.
        AgentError: the agent cannot be spawned (``already_started`` on an attached system...).
    """
    agent_file = load_agent_file(options.config_path)
    name, config = agent_file.name, dict(agent_file.config)
    with contextlib.ExitStack() as stack:
        if options.emulator:
            config["base_url"] = start_emulator(stack, options.script)
            config["api_key"] = LOCAL_KEY
        else:
            apply_endpoint(config, options, settings)
        if options.port is not None:
            handle = attach(options.port, settings)
            stack.callback(handle.detach)
        else:
            handle = start_ephemeral(settings)
            stack.callback(handle.stop)
        agent = spawn_agent(name, config, agent_file.tools, system=handle)
        stack.callback(_quietly_stop, agent, handle)
        runner = Runner(
            agent,
            APP_NAME,
            session_service(handle.settings),
            system=handle,
            **agent_file.runner_options,
            streaming_mode="text" if options.streaming else "none",
        )
        yield LiveAgent(handle=handle, agent=agent, runner=runner, owns_system=options.port is None)


def _quietly_stop(agent: AgentRef, handle: ActorSystemHandle) -> None:
    # The agent may already be gone (its system stopping under us); stopping is best effort.
    with contextlib.suppress(AdkError):
        stop_agent(agent, system=handle, timeout=5.0)
