"""Node composition: the whole product's children under the root, preflight checks, and the facade's start.

The runtime boots whatever composer module it is given; this one adds the domain's tier-1 children to the
runtime's (worker pool, hosts): the in-memory session store when ``session_backend = "memory"``. Its preflight
opens and migrates a configured SQL session store in the boot process, so a backend that cannot initialize makes
``start()`` fail with its ``StorageError`` — never a silent fallback to memory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from adk_actors.admission.actor import ADMISSION_NAME
from adk_actors.admission.logic import AdmissionConfig
from adk_actors.errors import ConfigError
from adk_actors.observability import bus as observability_bus
from adk_actors.observability import setup as observability_setup
from adk_actors.runs.actor import INDEX_NAME as RUN_INDEX
from adk_actors.runtime import children as runtime_children
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.runtime.system import start as _runtime_start
from adk_actors.sessions.actor import STORE_NAME, ActorSessionService
from adk_actors.sessions.base import BaseSessionService
from adk_actors.sessions.factory import default_sqlite_url, session_service_for
from adk_actors.sessions.sql import SqlSessionService
from adk_actors.settings import Settings, load_settings
from adk_actors.telemetry.hub import TELEMETRY_NAME

__all__ = ["node_children", "open_actor_system", "preflight", "session_service", "start"]

COMPOSER = "adk_actors.node"


def node_children(settings: Settings) -> tuple[ChildSpec, ...]:
    """The runtime's children plus admission control, the run index, the telemetry hub and the session store
    (memory backend)."""
    admission = AdmissionConfig(
        global_limit=settings.global_limit,
        default_agent_limit=settings.default_agent_limit,
        agent_limits=dict(settings.agent_limits),
        overflow=settings.overflow,
        max_queue=settings.max_queue,
        default_queue_timeout=settings.default_queue_timeout,
    )
    extra: tuple[ChildSpec, ...] = (
        ChildSpec(
            id=ADMISSION_NAME,
            actor="adk_actors.admission.actor.AdmissionControl",
            args=admission,
            register_as=ADMISSION_NAME,
            shutdown=5.0,
        ),
        ChildSpec(id=RUN_INDEX, actor="adk_actors.runs.index.RunIndex", register_as=RUN_INDEX, shutdown=5.0),
        ChildSpec(
            id=TELEMETRY_NAME, actor="adk_actors.telemetry.hub.TelemetryHub", register_as=TELEMETRY_NAME, shutdown=5.0
        ),
    )
    if settings.session_backend == "memory":
        extra += (
            ChildSpec(
                id=STORE_NAME, actor="adk_actors.sessions.actor.SessionStoreActor", register_as=STORE_NAME, shutdown=5.0
            ),
        )
    if settings.dev_server:
        from adk_actors.web.process import EDGE_NAME, EdgeSpec

        # Last: it serves what the children before it provide.
        extra += (
            ChildSpec(
                id=EDGE_NAME,
                actor="adk_actors.web.process.EdgeChild",
                register_as=EDGE_NAME,
                args=EdgeSpec(settings=settings.to_dict()),
                shutdown=10.0,
            ),
        )
    return runtime_children.node_children(settings) + extra


def _check_dev_server(settings: Settings) -> None:
    """``dev_server``: the web extra is installed, the bind is allowed and ``ADK_DEV_TOKEN`` is strong enough."""
    if not settings.dev_server:
        return
    try:
        from adk_actors.web.edge import DevToken
        from adk_actors.web.serve import check_bind
    except ImportError:
        raise ConfigError(
            "dev_server needs the web extra: pip install 'adk_actors[web]'",
            reason="missing_dependency",
            details={"key": "dev_server"},
        ) from None
    from adk_actors.web.process import check_dev_endpoints

    check_dev_endpoints(settings)
    check_bind(settings.dev_bind_ip, settings.dev_allow_remote_bind)
    DevToken.from_env()


def preflight(settings: Settings) -> None:
    """Open (and migrate) a configured SQL session store; raise its error if it cannot initialize.

    Raises:
        StorageError: ``open_failed`` / ``schema_too_new``.
        ConfigError: an unknown backend or an unparseable URL; ``dev_server`` without the web extra
            (``missing_dependency``), with a refused bind (``non_loopback_bind``) or without a strong
            ``ADK_DEV_TOKEN`` (``missing_token``, ``weak_token``); an ``observability_bus`` setting that
            :func:`~adk_actors.observability.bus.configure_bus` refuses (``details["key"]`` names its argument).
    """
    runtime_children.preflight(settings)
    _check_dev_server(settings)
    session_service_for(settings).close()
    # Runs in the boot process before the node's processes fork: each of them inherits the span export settings
    # and configures its exporter on its first span (docs/OBSERVABILITY.md).
    os.environ.update(observability_setup.node_environment(settings))
    # The envelope bus likewise: each process that submits an envelope builds its own bus from this on first use.
    os.environ.update(observability_bus.bus_environment(settings.observability_bus))


def session_service(settings: Settings | None = None, *, system: ActorSystemHandle | None = None) -> BaseSessionService:
    """The node's configured session service as a picklable client (the store actor, or a SQL descriptor).

    ``system``: the node to use (its settings, and its store actor for the memory backend); default this process's
    current system for the store actor and ``settings`` (or the loaded settings) for the backend."""
    if system is not None:
        settings = system.settings
    settings = settings or load_settings()
    if settings.session_backend == "memory":
        return ActorSessionService(system=system)
    return SqlSessionService(settings.session_url or default_sqlite_url(settings.data_dir))


def start(settings: Settings | None = None, *, owned: bool | None = None, **overrides: Any) -> ActorSystemHandle:
    """Start this node's actor system with every product child (see :func:`adk_actors.runtime.system.start`).

    Raises:
        ConfigError: invalid settings or a busy admin port.
        StorageError: the configured session backend cannot initialize.
        SystemNotRunning: the system failed to boot.
    """
    return _runtime_start(settings, owned=owned, node=COMPOSER, **overrides)


@contextlib.contextmanager
def open_actor_system(settings: Settings | None = None, **overrides: Any) -> Iterator[ActorSystemHandle]:
    """Start an owned node for the duration of a ``with`` block; stopped on exit, also on error."""
    handle = start(settings, **overrides)
    try:
        yield handle
    finally:
        handle.stop()
