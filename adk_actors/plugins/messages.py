"""Messages of a stateful plugin instance (``plugins/instance.py``); the facade in ``plugins/api.py`` builds them.

Every class is a frozen, keyword-only dataclass, so it pickles across actor processes.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from adk_actors.runtime.messages import Request

__all__ = ["AwaitReady", "InstanceSpec", "InvokeInstance"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceSpec:
    """What a plugin instance starts with: validated by ``plugins.api.check_instance_options`` in the caller."""

    id: str
    """The instance id (at most 256 UTF-8 bytes)."""
    plugin: str | bytes
    """The plugin as ``plugins.descriptors.plugin_entry`` sends it: an importable name (``"pkg.mod"``,
    ``"pkg.mod:Class"``) or the cloudpickled class, object or module."""
    label: str
    """The plugin's name for status and logs (never code)."""
    config: Any = None
    """The configuration (a JSON object of at most 1 MiB) for the plugin's constructor and ``init_state``."""
    max_queue: int = 32
    """Calls that may wait behind the one in flight; one more is refused ``busy``."""
    max_state_bytes: int = 4096
    """Largest committed state, canonical JSON UTF-8 bytes."""
    init_timeout_ms: int = 5000
    """Deadline of the ``init_state`` job."""
    invocation_timeout_ms: int = 1000
    """Deadline of each hook job."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InvokeInstance(Request[dict[str, Any]]):
    """Run one hook of the instance against its current state; answered with the normalized hook result
    ``{"action": "continue" | "amend" | "return" | "halt" | "failed", "value"?, "reason"?}``.

    Calls are served one at a time in arrival order; the new state is committed only when the hook finished in
    time, returned a valid result and a JSON-safe state within the size bound, and the owner is still alive.
    """

    hook: str
    """The hook's name (``before_model``, ``on_event``, ...)."""
    context: Any
    """The hook's JSON-safe context (already secret-pruned by whoever builds it)."""
    owner_pid: int
    """The process on whose behalf the call runs (the caller's): if it has died when the hook finishes, the new
    state is discarded."""
    owner_host: str = field(default_factory=socket.gethostname)
    """The machine of ``owner_pid`` (filled in where the message is built): an owner on another machine cannot be
    checked by pid, so there only the caller's deadline stands for its liveness."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitReady(Request[str]):
    """Answered ``"ready"`` once ``init_state`` has committed the first state, or with the error that failed the
    initialisation (the instance then exits)."""
