"""Trigger-test fixtures: the emulator, agent spawner and session service of the Runner tests, a trigger factory
that unregisters every trigger it registered, and queues on the local RabbitMQ broker."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actor_tests.runner.conftest import config_for, emu, spawn, svc, unique  # noqa: F401
from adk_actors import AdkError, Runner
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import register_trigger, unregister_trigger

Register = Callable[..., str]


def text_script(text: str = "done", *, delay_ms: int = 0) -> dict[str, Any]:
    """An emulator script answering every request with ``text`` (after ``delay_ms``)."""
    respond: dict[str, Any] = {"text": text}
    if delay_ms:
        respond["delay_ms"] = delay_ms
    return {"rules": [{"respond": respond}]}


@pytest.fixture
def make_trigger(
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
    spawn: Any,  # noqa: F811
    svc: Any,  # noqa: F811
) -> Iterator[Register]:
    """``make_trigger(options=None, **agent_config) -> name``: an agent on the emulator, a Runner over the node's
    session service and a trigger of a fresh name; all unregistered after the test."""
    names: list[str] = []

    def make(options: Any = None, **config: Any) -> str:
        agent = unique("TrigAgent")
        spawn(agent, config_for(emu, **config))
        runner = Runner(agent, "trigger-tests", svc, system=system)
        name = unique("trig").replace("_", "-")
        register_trigger(name, runner, options, system=system)
        names.append(name)
        return name

    yield make
    for name in names:
        try:
            unregister_trigger(name, system=system, timeout=10)
        except AdkError:
            pass  # unregistered by the test


AMQP_URL = os.environ.get("TRIGGERS_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
"""The broker of the AMQP source tests (RabbitMQ on this machine; ``.ci/run`` starts it when it is down)."""


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """:data:`AMQP_URL` once its port answers; the test is skipped when it does not, and fails under CI."""
    from urllib.parse import urlsplit

    parts = urlsplit(AMQP_URL)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672), timeout=2).close()
    except OSError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"RabbitMQ unreachable at {parts.hostname}:{parts.port}")
        pytest.skip("RabbitMQ unreachable at 127.0.0.1:5672 (start it with rabbitmq-server -detached)")
    return AMQP_URL


@pytest.fixture
def amqp_queues(amqp_url: str) -> Iterator[Callable[..., str]]:
    """``amqp_queues(prefix="t2amqp", **arguments) -> name``: a fresh durable queue on the broker (``arguments`` are
    its ``x-`` arguments, e.g. a dead-letter exchange); every queue made is deleted after the test."""
    import pika

    names: list[str] = []

    def make(prefix: str = "t2amqp", **arguments: Any) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
        try:
            conn.channel().queue_declare(queue=name, durable=True, arguments=arguments or None)
        finally:
            conn.close()
        names.append(name)
        return name

    yield make
    if names:
        conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
        try:
            channel = conn.channel()
            for name in names:
                channel.queue_delete(queue=name)
        finally:
            conn.close()
