"""Stateful plugin instances on a real actor system: serialized calls, the queue cap, the commit conditions
(deadline, valid state within its bound, a live owner) and the ``temporary`` identity that a lost host takes with
it; plus the hard maxima of the options, without actors."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import ActorCrashed, AdkError, ConfigError, NameNotFound, PolicyDenied, ValidationError
from adk_actors.plugins.api import (
    MAX_CONFIG_BYTES,
    MAX_INIT_TIMEOUT_MS,
    MAX_INVOCATION_TIMEOUT_MS,
    MAX_QUEUE,
    MAX_STATE_BYTES,
    PluginInstanceRef,
    check_instance_options,
    instance_status,
    invoke_plugin_instance,
    start_plugin_instance,
    stop_plugin_instance,
)
from adk_actors.plugins.messages import InvokeInstance
from adk_actors.runtime.messages import Ping
from adk_actors.runtime.refs import host_name
from adk_actors.runtime.system import ActorSystemHandle

WAIT_S = 30.0
"""Upper bound for anything a test waits on (never reached when the code works)."""


def _hold(context: Any) -> None:
    """Block (in the worker) until the test's gate releases this hook, when the context names a gate."""
    port = context.get("gate")
    if port:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
            conn.recv(1)


class Counter:
    """A stateful plugin: ``before_run`` counts its calls (by ``step``) and answers the new count."""

    def __init__(self, config: Any) -> None:
        self.step = config.get("step", 1)

    def init_state(self, config: Any) -> dict[str, Any]:
        _hold(config)
        return {"count": config.get("start", 0), "pad": "x" * config.get("pad", 0)}

    def before_run(self, state: dict[str, Any], context: Any) -> Any:
        state["count"] += self.step
        if "blob" in context:
            state["blob"] = "x" * context["blob"]
        _hold(context)
        if context.get("boom"):
            raise RuntimeError("the hook broke")
        if context.get("bad_result"):
            return "not a pair"
        return ("amend", state["count"]), state

    def on_event(self, state: dict[str, Any], context: Any) -> Any:
        return ("halt", "policy_stop"), state


class Bare:
    """No ``init_state``: the instance starts with ``{}``."""

    def before_run(self, state: Any, context: Any) -> Any:
        return ("return", state), state


class _Gate:
    """A listening socket that a hook connects to and then waits on: the test knows the hook is running (it
    accepted the connection) and decides when it may go on."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(WAIT_S)
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []

    def entered(self) -> None:
        """Wait until a hook is inside the gate."""
        conn, _ = self.server.accept()
        self.conns.append(conn)

    def release(self) -> None:
        for conn in self.conns:
            try:
                conn.sendall(b"g")
            except OSError:
                pass  # the hook's worker was killed

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.server.close()


@pytest.fixture
def gate() -> Iterator[_Gate]:
    g = _Gate()
    try:
        yield g
    finally:
        g.release()
        g.close()


@pytest.fixture
def start(system: ActorSystemHandle) -> Iterator[Any]:
    """``start(plugin, **options)``: an instance with a fresh id, stopped after the test. Hook calls get 10 s unless
    a test says otherwise: a worker that has just been started imports this module first, which under a loaded
    machine can take longer than the 1 s default."""
    started: list[PluginInstanceRef] = []

    def make(plugin: Any = Counter, **options: Any) -> PluginInstanceRef:
        options.setdefault("invocation_timeout_ms", 10_000)
        ref = start_plugin_instance(f"test-{uuid.uuid4().hex[:12]}", plugin, system=system, **options)
        started.append(ref)
        return ref

    yield make
    for ref in started:
        try:
            stop_plugin_instance(ref, system=system)
        except AdkError:
            pass  # already gone


def _count(ref: PluginInstanceRef, system: ActorSystemHandle, **context: Any) -> dict[str, Any]:
    return invoke_plugin_instance(ref, "before_run", context, system=system, timeout=WAIT_S)


# ---- the happy path and serialization --------------------------------------------------------------------------------
def test_a_counter_instance_keeps_its_state_across_calls(system: ActorSystemHandle, start: Any) -> None:
    ref = start(Counter, config={"start": 10, "step": 2})
    assert [_count(ref, system) for _ in range(3)] == [{"action": "amend", "value": v} for v in (12, 14, 16)]
    status = instance_status(ref, system=system)
    assert (status["kind"], status["phase"], status["calls"], status["commits"]) == ("plugin_instance", "ready", 3, 3)
    assert ref.name == f"plugin.{ref.id}"


def test_a_plugin_without_init_state_starts_empty_and_undefined_hooks_continue(
    system: ActorSystemHandle, start: Any
) -> None:
    ref = start(Bare)
    assert _count(ref, system) == {"action": "return", "value": {}}
    assert invoke_plugin_instance(ref, "after_tool", {}, system=system) == {"action": "continue"}
    counter = start(Counter)
    assert invoke_plugin_instance(counter, "on_event", {}, system=system) == {"action": "halt", "reason": "policy_stop"}


def test_concurrent_calls_are_serialized_and_each_sees_the_previous_commit(
    system: ActorSystemHandle, start: Any
) -> None:
    ref = start(Counter, max_queue=16)
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda _i: _count(ref, system), range(12)))
    # Twelve distinct counts 1..12: no two calls ran against the same snapshot, no update was lost.
    assert sorted(a["value"] for a in answers) == list(range(1, 13))
    assert instance_status(ref, system=system)["commits"] == 12


# ---- the queue cap ---------------------------------------------------------------------------------------------------
def test_calls_beyond_the_queue_cap_are_refused_busy(system: ActorSystemHandle, start: Any, gate: _Gate) -> None:
    ref = start(Counter, max_queue=2, invocation_timeout_ms=20_000)
    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(_count, ref, system, gate=gate.port)
        gate.entered()  # the first call is in flight
        waiting = [pool.submit(_count, ref, system) for _ in range(2)]
        give_up = time.monotonic() + WAIT_S
        while instance_status(ref, system=system)["queued"] < 2:  # one round trip per check: no sleep needed
            assert time.monotonic() < give_up, "the two calls never arrived"
        with pytest.raises(PolicyDenied) as info:
            _count(ref, system)
        assert info.value.reason == "busy" and info.value.details["max_queue"] == 2
        assert instance_status(ref, system=system)["refused"] == 1
        gate.release()
        assert first.result(WAIT_S) == {"action": "amend", "value": 1}
        assert sorted(f.result(WAIT_S)["value"] for f in waiting) == [2, 3]


# ---- what is not committed -----------------------------------------------------------------------------------------
def test_a_call_that_misses_its_deadline_fails_and_commits_nothing(
    system: ActorSystemHandle, start: Any, gate: _Gate
) -> None:
    ref = start(Counter, invocation_timeout_ms=1500)  # room for a fresh worker's imports, still a short test
    with ThreadPoolExecutor(max_workers=1) as pool:
        late = pool.submit(_count, ref, system, gate=gate.port)
        gate.entered()  # the hook has already counted in its copy of the state and now hangs
        try:
            answer = late.result(10.0)
        finally:
            gate.release()  # without the deadline the hook would now finish and commit
        assert answer == {"action": "failed", "reason": "plugin_timeout"}
    assert _count(ref, system) == {"action": "amend", "value": 1}


def test_a_crashing_hook_fails_the_call_and_keeps_the_state(system: ActorSystemHandle, start: Any) -> None:
    ref = start(Counter)
    assert _count(ref, system) == {"action": "amend", "value": 1}
    assert _count(ref, system, boom=True) == {"action": "failed", "reason": "plugin_raised", "type": "RuntimeError"}
    assert _count(ref, system, bad_result=True) == {"action": "failed", "reason": "invalid_plugin_result"}
    assert _count(ref, system) == {"action": "amend", "value": 2}
    assert instance_status(ref, system=system)["phase"] == "ready"


def test_a_state_above_max_state_bytes_is_not_committed(system: ActorSystemHandle, start: Any) -> None:
    ref = start(Counter, max_state_bytes=256)
    assert _count(ref, system, blob=100) == {"action": "amend", "value": 1}
    assert _count(ref, system, blob=300) == {"action": "failed", "reason": "plugin_state_too_large"}
    assert _count(ref, system) == {"action": "amend", "value": 2}
    assert instance_status(ref, system=system)["state_bytes"] <= 256


def test_the_state_is_not_committed_when_the_owner_died_during_the_call(
    system: ActorSystemHandle, start: Any, gate: _Gate
) -> None:
    ref = start(Counter, invocation_timeout_ms=20_000)
    owner = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        request = InvokeInstance(hook="before_run", context={"gate": gate.port}, owner_pid=owner.pid)
        with ThreadPoolExecutor(max_workers=1) as pool:
            answer = pool.submit(system.ask, ref.ref, request, WAIT_S)
            gate.entered()
            owner.kill()
            owner.wait(WAIT_S)
            gate.release()
            assert answer.result(WAIT_S) == {"action": "amend", "value": 1}  # answered, but not committed
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(WAIT_S)
    assert _count(ref, system) == {"action": "amend", "value": 1}
    assert instance_status(ref, system=system)["discarded"] == 1
    dead = InvokeInstance(hook="before_run", context={}, owner_pid=owner.pid)
    assert system.ask(ref.ref, dead, WAIT_S) == {"action": "failed", "reason": "owner_down"}


# ---- lifecycle ------------------------------------------------------------------------------------------------------
def test_init_state_failures_fail_the_start_and_free_the_id(system: ActorSystemHandle, gate: _Gate) -> None:
    instance_id = f"test-{uuid.uuid4().hex[:12]}"
    with pytest.raises(AdkError) as info:
        start_plugin_instance(
            instance_id, Counter, config={"gate": gate.port}, init_timeout_ms=300, system=system, timeout=WAIT_S
        )
    assert info.value.reason == "job_timeout"
    with pytest.raises(ValidationError) as too_big:
        start_plugin_instance(instance_id, Counter, config={"pad": 500}, max_state_bytes=100, system=system)
    assert too_big.value.reason == "plugin_state_too_large"
    ref = start_plugin_instance(instance_id, Counter, system=system)
    try:
        assert _count(ref, system) == {"action": "amend", "value": 1}
        with pytest.raises(AdkError) as twice:
            start_plugin_instance(instance_id, Counter, system=system)
        assert twice.value.reason == "already_started"
    finally:
        stop_plugin_instance(ref, system=system)


def test_a_stopped_instance_is_gone(system: ActorSystemHandle) -> None:
    ref = start_plugin_instance(f"test-{uuid.uuid4().hex[:12]}", Counter, system=system)
    stop_plugin_instance(ref, system=system)
    with pytest.raises(ActorCrashed) as info:
        _count(ref, system)
    assert info.value.reason == "noproc"
    with pytest.raises(NameNotFound):
        stop_plugin_instance(ref, system=system)


def _kill_and_wait(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it has exited (its pidfd becomes readable), so that every later liveness check
    of the name service sees it dead."""
    fd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        readable, _, _ = select.select([fd], [], [], WAIT_S)
        assert readable, "the killed process did not exit"
    finally:
        os.close(fd)


def test_an_instance_whose_host_was_sigkilled_stays_unavailable(fresh_system: ActorSystemHandle) -> None:
    system = fresh_system
    ref = start_plugin_instance("survivor", Counter, system=system)
    assert [_count(ref, system)["value"] for _ in range(2)] == [1, 2]
    host = instance_status(ref, system=system)["pid"]  # an inner actor's pid is its host's
    _kill_and_wait(host)
    with pytest.raises(ActorCrashed) as info:
        _count(ref, system)  # reaches the restarted host ...
    assert info.value.reason == "noproc"  # ... which has no such instance: no silent restart with an empty state
    assert system.ask(host_name(ref.ref.host_id), Ping(), WAIT_S) == "pong"
    with pytest.raises(ActorCrashed) as again_info:
        instance_status(ref, system=system)
    assert again_info.value.reason == "noproc"
    again = start_plugin_instance("survivor", Counter, system=system)  # recreated explicitly, from init_state
    assert _count(again, system) == {"action": "amend", "value": 1}


def test_invoke_checks_its_arguments_before_sending(system: ActorSystemHandle) -> None:
    with pytest.raises(ValidationError) as hook:
        invoke_plugin_instance("any", "before_everything", {}, system=system)
    assert hook.value.reason == "unknown_hook"
    with pytest.raises(ValidationError) as context:
        invoke_plugin_instance("any", "before_run", {"x": float("nan")}, system=system)
    assert context.value.reason == "invalid_json"


# ---- option caps (no actors) -----------------------------------------------------------------------------------------
CAPS = {
    "max_queue": MAX_QUEUE,
    "max_state_bytes": MAX_STATE_BYTES,
    "init_timeout_ms": MAX_INIT_TIMEOUT_MS,
    "invocation_timeout_ms": MAX_INVOCATION_TIMEOUT_MS,
}


@st.composite
def _option_values(draw: st.DrawFn) -> tuple[str, int]:
    """An integer option and a value: anywhere, or right at one of its bounds."""
    key = draw(st.sampled_from(sorted(CAPS)))
    maximum = CAPS[key]
    value = draw(
        st.one_of(
            st.integers(min_value=-(2**70), max_value=2**70),
            st.integers(min_value=-1, max_value=2),
            st.integers(min_value=maximum - 2, max_value=maximum + 2),
        )
    )
    return key, value


@given(_option_values())
def test_integer_options_are_accepted_exactly_within_their_hard_maxima(option: tuple[str, int]) -> None:
    key, value = option
    maximum = CAPS[key]
    if 1 <= value <= maximum:
        assert getattr(check_instance_options("i", Counter, **{key: value}), key) == value
        return
    with pytest.raises(ConfigError) as info:
        check_instance_options("i", Counter, **{key: value})
    assert info.value.reason == ("limit_exceeded" if value > maximum else "invalid_value")
    assert info.value.details["key"] == key


@pytest.mark.parametrize("key", sorted(CAPS))
@pytest.mark.parametrize("value", [CAPS["max_queue"] + 0.5, True, "32", None])
def test_integer_options_reject_non_integers(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        check_instance_options("i", Counter, **{key: value})
    assert (info.value.reason, info.value.details["key"]) == ("invalid_value", key)


_ID_CHARS = ["a", "é", "€", "😀"]
"""Characters of 1, 2, 3 and 4 UTF-8 bytes."""


@given(
    st.one_of(
        st.text(alphabet=st.sampled_from(_ID_CHARS), min_size=1, max_size=300),
        st.builds(lambda ch, n: ch * n, st.sampled_from(_ID_CHARS), st.integers(min_value=1, max_value=300)),
    )
)
def test_instance_ids_are_capped_at_256_utf8_bytes(text: str) -> None:
    if len(text.encode("utf-8")) <= 256:
        assert check_instance_options(text, Counter).id == text
        return
    with pytest.raises(ConfigError) as info:
        check_instance_options(text, Counter)
    assert (info.value.reason, info.value.details["key"]) == ("limit_exceeded", "id")


@pytest.mark.parametrize("bad", ["", "a\nb", 7, None])
def test_malformed_instance_ids_are_rejected(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        check_instance_options(bad, Counter)
    assert (info.value.reason, info.value.details["key"]) == ("invalid_value", "id")


def test_the_config_is_capped_at_one_mib_and_must_be_json() -> None:
    overhead = len('{"k":""}')
    assert check_instance_options("i", Counter, config={"k": "x" * (MAX_CONFIG_BYTES - overhead)}).config
    with pytest.raises(ConfigError) as big:
        check_instance_options("i", Counter, config={"k": "x" * (MAX_CONFIG_BYTES - overhead + 1)})
    assert big.value.reason == "limit_exceeded"
    for bad_config in ({"k": {1, 2}}, ["not", "an", "object"]):
        with pytest.raises(ConfigError) as bad:
            check_instance_options("i", Counter, config=bad_config)
        assert (bad.value.reason, bad.value.details["key"]) == ("invalid_value", "config")


def test_unimportable_plugins_are_rejected_when_starting() -> None:
    with pytest.raises(ConfigError) as info:
        check_instance_options("i", "no_such_module_anywhere:Plugin")
    assert info.value.reason == "plugin_not_importable"
    with pytest.raises(ConfigError) as unpicklable:
        check_instance_options("i", threading.Lock())
    assert unpicklable.value.reason == "plugin_not_importable"
