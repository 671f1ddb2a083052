"""The stateful-plugin facade: start, call, inspect and stop plugin instances.

::

    from adk_actors.plugins.api import invoke_plugin_instance, start_plugin_instance, stop_plugin_instance

    counter = start_plugin_instance("readme-counter", CounterPlugin, config={"step": 1}, max_queue=32)
    invoke_plugin_instance(counter, "before_run", {"run_id": "r1"})    # -> {"action": "amend", "value": 1}
    stop_plugin_instance(counter)

Each instance is one tier-2 actor (:class:`~adk_actors.plugins.instance.PluginInstance`), started
``temporary``: after a crash (or the loss of its host) the instance is gone, and calls fail with
``ActorCrashed`` (reason ``noproc``) until someone starts it again. Each function takes an optional ``system=``
(default: ``current_system()``); ``timeout`` is in seconds, the instance options in milliseconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.content.json_values import copy_json
from adk_actors.content.validation import MAX_ARG_JSON_BYTES, check_json, check_timeout
from adk_actors.errors import ActorCrashed, AdkError, AskTimeout, ConfigError, NameNotFound, ValidationError
from adk_actors.plugins.descriptors import plugin_entry
from adk_actors.plugins.hooks import HOOKS, load_plugin, plugin_label
from adk_actors.plugins.messages import AwaitReady, InstanceSpec, InvokeInstance
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.server import JOB_REPLY_GRACE_S
from adk_actors.runtime.system import ActorSystemHandle, current_system

__all__ = [
    "INSTANCE_ACTOR",
    "MAX_CONFIG_BYTES",
    "MAX_INIT_TIMEOUT_MS",
    "MAX_INSTANCE_ID_BYTES",
    "MAX_INVOCATION_TIMEOUT_MS",
    "MAX_QUEUE",
    "MAX_STATE_BYTES",
    "PluginInstanceRef",
    "check_instance_options",
    "instance_status",
    "invoke_plugin_instance",
    "start_plugin_instance",
    "stop_plugin_instance",
]

INSTANCE_ACTOR = "adk_actors.plugins.instance.PluginInstance"

MAX_INSTANCE_ID_BYTES = 256
"""Hard maximum of an instance id, UTF-8 bytes (the reference's)."""
MAX_CONFIG_BYTES = 1024 * 1024
"""Hard maximum of an instance's configuration, canonical JSON UTF-8 bytes."""
MAX_QUEUE = 4096
"""Hard maximum of ``max_queue`` (calls waiting behind the one in flight)."""
MAX_STATE_BYTES = 64 * 1024 * 1024
"""Hard maximum of ``max_state_bytes``."""
MAX_INIT_TIMEOUT_MS = 30_000
"""Hard maximum of ``init_timeout_ms``."""
MAX_INVOCATION_TIMEOUT_MS = 120_000
"""Hard maximum of ``invocation_timeout_ms``."""

_READY_SLACK_S = 5.0
"""How much longer than its ``init_timeout_ms`` the start waits for an instance's answer (spawn, job queueing)."""


@dataclass(frozen=True, slots=True)
class PluginInstanceRef:
    """A handle on a started plugin instance (picklable: actors may pass it on)."""

    name: str
    """The registered name (``plugin.<id>``): what other actors resolve."""
    id: str
    """The instance id given to :func:`start_plugin_instance`."""
    ref: LocalRef
    """Where the instance lives (host and local id); a call to a vanished instance fails at once through it."""

    def __str__(self) -> str:
        return self.name


def instance_name(instance_id: str) -> str:
    """The local id and registered name of instance ``instance_id`` (one id is one instance per system)."""
    return f"plugin.{instance_id}"


def _bounded_int(value: Any, key: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key} must be a positive integer", reason="invalid_value", details={"key": key})
    if value > maximum:
        raise ConfigError(
            f"{key} is above its hard maximum", reason="limit_exceeded", details={"key": key, "max": maximum}
        )
    return value


def _check_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError("an instance id is a non-empty string", reason="invalid_value", details={"key": "id"})
    if len(value) > MAX_INSTANCE_ID_BYTES:  # every character is at least one byte
        raise ConfigError(
            "the instance id is too long",
            reason="limit_exceeded",
            details={"key": "id", "max": MAX_INSTANCE_ID_BYTES},
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigError(
            "the instance id is not valid Unicode", reason="invalid_value", details={"key": "id"}
        ) from None
    if size > MAX_INSTANCE_ID_BYTES:
        raise ConfigError(
            "the instance id is too long",
            reason="limit_exceeded",
            details={"key": "id", "max": MAX_INSTANCE_ID_BYTES},
        )
    if any(ch < " " or ch == "\x7f" for ch in value):
        raise ConfigError("an instance id has no control characters", reason="invalid_value", details={"key": "id"})
    return value


def _check_config(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError("config must be a JSON object", reason="invalid_value", details={"key": "config"})
    try:
        copied, _size = copy_json(dict(value), field="config", max_bytes=MAX_CONFIG_BYTES)
    except ValidationError as exc:
        reason = "limit_exceeded" if exc.reason == "limit_exceeded" else "invalid_value"
        raise ConfigError(
            "config must be a JSON object of at most 1 MiB", reason=reason, details={"key": "config"}
        ) from None
    checked: dict[str, Any] = copied
    return checked


def check_instance_options(
    id: Any,
    plugin: Any,
    *,
    config: Any = None,
    max_queue: Any = 32,
    max_state_bytes: Any = 4096,
    init_timeout_ms: Any = 5000,
    invocation_timeout_ms: Any = 1000,
) -> InstanceSpec:
    """Validate a plugin instance's options against the reference's hard maxima (in the caller's process).

    ``config`` is a JSON object (``None`` means ``{}``); a plugin given by name is imported here so a typo fails
    now, not in a worker (the plugin travels as ``plugins.descriptors.plugin_entry`` sends a descriptor's).

    Raises:
        ConfigError: reason ``invalid_value`` (a wrong type, an empty or non-positive value, control characters
            in the id, a config that is not a JSON object; ``details["key"]`` names the option),
            ``limit_exceeded`` (above a hard maximum: id > 256 bytes, config > 1 MiB, ``max_queue`` > 4096,
            ``max_state_bytes`` > 64 MiB, ``init_timeout_ms`` > 30 s, ``invocation_timeout_ms`` > 120 s;
            ``details["max"]``) or ``plugin_not_importable`` (neither importable nor picklable).
    """
    instance_id = _check_id(id)
    entry = plugin_entry(plugin, instance_id)
    if isinstance(entry, str):
        load_plugin(entry)
    checked_config = _check_config(config)
    return InstanceSpec(
        id=instance_id,
        plugin=entry,
        label=plugin_label(entry),
        config=checked_config,
        max_queue=_bounded_int(max_queue, "max_queue", MAX_QUEUE),
        max_state_bytes=_bounded_int(max_state_bytes, "max_state_bytes", MAX_STATE_BYTES),
        init_timeout_ms=_bounded_int(init_timeout_ms, "init_timeout_ms", MAX_INIT_TIMEOUT_MS),
        invocation_timeout_ms=_bounded_int(invocation_timeout_ms, "invocation_timeout_ms", MAX_INVOCATION_TIMEOUT_MS),
    )


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _ref(instance: PluginInstanceRef | str, handle: ActorSystemHandle) -> PluginInstanceRef:
    if isinstance(instance, PluginInstanceRef):
        return instance
    instance_id = _check_id(instance)
    name = instance_name(instance_id)
    return PluginInstanceRef(name, instance_id, LocalRef(place(name, handle.settings.hosts), name))


def start_plugin_instance(
    id: str,
    plugin: Any,
    *,
    config: Any = None,
    max_queue: int = 32,
    max_state_bytes: int = 4096,
    init_timeout_ms: int = 5000,
    invocation_timeout_ms: int = 1000,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> PluginInstanceRef:
    """Start a stateful plugin instance and wait until its ``init_state(config)`` has run.

    Args:
        id: The instance id (unique per actor system, at most 256 UTF-8 bytes).
        plugin: An importable name (``"pkg.mod"``, ``"pkg.mod:Class"``) or a class. A class is instantiated
            for each job (with the read-only ``config`` when it has a constructor of its own); it travels by
            value when defined in a script (captured variables are copies in the worker). Its optional
            ``init_state(config)`` returns the first JSON state (default ``{}``); each hook is
            ``hook(state, context) -> (result, new_state)``.
        config: A JSON object for the constructor and ``init_state`` (at most 1 MiB).
        max_queue: Calls that may wait behind the one in flight (1..4096).
        max_state_bytes: Largest committed state in canonical JSON bytes (1..64 MiB).
        init_timeout_ms: Deadline of ``init_state`` (1..30,000).
        invocation_timeout_ms: Deadline of each hook call (1..120,000).
        system: The actor system (default: the current one).
        timeout: Seconds to wait for the spawn itself.

    Raises:
        ConfigError: as :func:`check_instance_options`.
        AdkError: ``already_started`` when an instance with that id runs; the error of a failed ``init_state``
            (``job_timeout``, ``function_failed``, ``invalid_plugin_state``, ``plugin_state_too_large``,
            ``plugin_not_importable``);
            ``ActorCrashed`` (``init_failed``) when the instance exited before it could say why.
    """
    check_timeout(timeout)
    spec = check_instance_options(
        id,
        plugin,
        config=config,
        max_queue=max_queue,
        max_state_bytes=max_state_bytes,
        init_timeout_ms=init_timeout_ms,
        invocation_timeout_ms=invocation_timeout_ms,
    )
    handle = _system(system)
    name = instance_name(spec.id)
    try:
        local = handle.spawn(INSTANCE_ACTOR, args=spec, id=name, name=name, restart="temporary", timeout=timeout)
    except AdkError as err:
        if err.reason == "already_started":
            raise AdkError(
                "a plugin instance with that id runs", reason="already_started", details={"instance": spec.id}
            ) from None
        raise
    ref = PluginInstanceRef(name, spec.id, local)
    wait = spec.init_timeout_ms / 1000.0 + JOB_REPLY_GRACE_S + _READY_SLACK_S
    try:
        handle.ask(local, AwaitReady(), wait)
    except ActorCrashed as err:
        if err.reason == "noproc":
            raise ActorCrashed(
                "the plugin instance exited while initialising", reason="init_failed", details={"instance": spec.id}
            ) from None
        raise
    except AskTimeout:
        try:
            handle.stop_inner(local)
        except AdkError:
            pass  # already gone
        raise
    return ref


def invoke_plugin_instance(
    instance: PluginInstanceRef | str,
    hook: str,
    context: Any,
    *,
    timeout: float | None = None,
    system: ActorSystemHandle | None = None,
) -> dict[str, Any]:
    """Run ``hook`` of the instance with ``context`` on behalf of this process (its owner).

    Returns:
        The normalized hook result: ``{"action": "continue" | "amend" | "return" | "halt" | "failed",
        "value"?, "reason"?}``. ``failed`` reasons: ``plugin_timeout``, ``plugin_raised`` (with ``type``, the
        exception's class name), ``invalid_plugin_result``, ``plugin_result_too_large``, ``invalid_plugin_state``,
        ``plugin_state_too_large``, ``plugin_not_importable``, ``memory_limit``, ``plugin_failed`` (the job was
        lost), ``owner_down``. A failed call commits nothing.

    Raises:
        ValidationError: ``unknown_hook``; ``invalid_json`` / ``limit_exceeded`` for the context.
        PolicyDenied: ``busy`` when ``max_queue`` calls already wait.
        ActorCrashed: ``noproc`` when the instance does not run (stopped, crashed, or its host was lost).
        AskTimeout: no answer within ``timeout`` (default: the system's ask timeout).
    """
    check_timeout(timeout)
    if not isinstance(hook, str) or hook not in HOOKS:
        raise ValidationError("unknown plugin hook", reason="unknown_hook", details={"key": "hook"})
    payload = check_json(context, "context", max_bytes=MAX_ARG_JSON_BYTES)
    handle = _system(system)
    ref = _ref(instance, handle)
    request = InvokeInstance(hook=hook, context=payload, owner_pid=os.getpid())
    return dict(handle.ask(ref.ref, request, timeout))


def instance_status(
    instance: PluginInstanceRef | str, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> dict[str, Any]:
    """The instance's status: ``phase``, ``running``, ``queued``, ``calls``, ``commits``, ``discarded``,
    ``refused``, ``state_bytes`` (never the state itself) and the actor's ``pid`` (its host process).

    Raises:
        ActorCrashed: ``noproc`` when the instance does not run.
    """
    check_timeout(timeout)
    handle = _system(system)
    return dict(handle.ask(_ref(instance, handle).ref, GetStatus(), timeout))


def stop_plugin_instance(
    instance: PluginInstanceRef | str, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> None:
    """Stop an instance: its state is dropped, waiting and running calls fail ``instance_exited``.

    Raises:
        NameNotFound: reason ``not_found`` when no such instance runs.
    """
    check_timeout(timeout)
    handle = _system(system)
    ref = _ref(instance, handle)
    try:
        handle.stop_inner(ref.ref, timeout)
    except AdkError as err:
        if err.reason == "not_found":
            raise NameNotFound("no such plugin instance", reason="not_found", details={"instance": ref.id}) from None
        raise
