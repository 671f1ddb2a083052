"""Crash reports (issue 17 item 6): a crashing actor (tier 1 and tier 2), a raising user tool or job and a failing
timer-thread callback leave the exception type, scrubbed message and stack trace in the node log; the configured
key in the exception text never reaches the log, and the asker's error carries the exception type only."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import adk_actors
from adk_actors import prompt, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import ActorCrashed, AdkError
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle, group_pids
from adk_actors.runtime.threadtimers import ThreadTimers
from adk_actors.secrets import REDACTED, Secret
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port
from adk_actors.testing.actors import Crash, Incr, Job
from adk_actors.tools import FunctionTool

from .helpers import PROBE, start_child, unique

KEY = "AIza" + uuid.uuid4().hex + "Zq"  # the node's configured key, shaped like a real one
TRACEBACK = "Traceback (most recent call last):"


def leaky_weather(city: str) -> dict:
    """Get the weather for a city (fails, quoting the node's key in its message)."""
    raise RuntimeError(f"weather backend refused {city} with key {os.environ.get('GEMINI_API_KEY')}")


def leaky_job(tag: str) -> int:
    raise ValueError(f"job {tag} failed with key {os.environ.get('GEMINI_API_KEY')}")


@pytest.fixture(scope="module")
def node(tmp_module_dir: Path) -> Iterator[tuple[ActorSystemHandle, Emulator]]:
    """A node with a configured key (its processes scrub it) and an emulator for agent turns."""
    with Emulator() as emu:
        handle = adk_actors.start(
            Settings(
                admin_port=reserved_port(),
                data_dir=str(tmp_module_dir / "data"),
                hosts=1,
                workers=1,
                gemini_api_key=Secret(KEY),
            )
        )
        try:
            yield handle, emu
        finally:
            handle.stop()
    assert group_pids(handle.pgid) == []


def _report(sink: Path, needle: str, seconds: float = 15.0) -> str:
    """The log record holding ``needle``: its first line and the stack trace lines after it (up to the next record's
    timestamp). The logger process writes asynchronously: poll with a deadline."""
    deadline = time.monotonic() + seconds
    while True:
        text = sink.read_text(errors="replace")
        at = text.find(needle)
        if at >= 0:
            lines = text[text.rfind("\n", 0, at) + 1 :].splitlines()
            record = [lines[0]]
            for line in lines[1:]:
                if line[:4].isdigit() and line[4:5] == "-":
                    break
                record.append(line)
            return "\n".join(record)
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} not in the node log within {seconds}s")
        time.sleep(0.05)  # polling a file another process appends to (nothing to block on)


def _assert_no_key(handle: ActorSystemHandle) -> None:
    assert KEY not in handle.log_sink.read_text(errors="replace"), "the configured key reached the node log"


@pytest.mark.parametrize("tier", [1, 2])
def test_a_crashing_actor_logs_a_scrubbed_stack_trace_and_the_asker_gets_the_type_only(
    node: tuple[ActorSystemHandle, Emulator], tier: int
) -> None:
    handle, _emu = node
    probe = (
        start_child(handle, ChildSpec(id=unique("crash"), actor=PROBE))
        if tier == 1
        else handle.spawn(PROBE, id=unique("crash"))
    )
    assert handle.ask(probe, Incr(by=2)) == 2
    nonce = uuid.uuid4().hex
    with pytest.raises(ActorCrashed) as info:
        handle.ask(probe, Crash(text=f"crash-{nonce} holding {KEY}"))
    caller_sees = f"{info.value} {info.value.to_dict()}"
    assert "RuntimeError" in caller_sees
    assert nonce not in caller_sees and KEY not in caller_sees and "holding" not in caller_sees

    report = _report(handle.log_sink, f"crash-{nonce}")
    assert "actor crashed" in report and "exception_type=RuntimeError" in report
    assert TRACEBACK in report and "in handle_call" in report, report
    assert f"RuntimeError: crash-{nonce} holding {REDACTED}" in report
    assert "message_type=Call[Crash]" in report and f"tier={tier}" in report
    assert "'count': 'int'" in report, "the redacted state view names the attributes and their types"
    assert "'count': 2" not in report, "the state view shows no values"
    _assert_no_key(handle)


def test_a_raising_tool_logs_a_scrubbed_stack_trace_and_the_model_sees_the_type_only(
    node: tuple[ActorSystemHandle, Emulator],
) -> None:
    handle, emu = node
    name = unique("Leaky")
    spawn_agent(
        name,
        {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"},
        [FunctionTool(leaky_weather, name="get_weather")],
        system=handle,
    )
    try:
        answer = prompt(name, "What is the weather in Tokyo?", system=handle, timeout=30)
    finally:
        stop_agent(name, system=handle)
    assert "tool_exception" in answer and "RuntimeError" in answer
    assert "refused" not in answer and KEY not in answer
    sent = str(emu.requests[-1]["body"])
    assert "refused" not in sent and KEY not in sent, "the exception text reached the model"

    report = _report(handle.log_sink, "weather backend refused Tokyo")
    assert "tool raised" in report and "tool=get_weather" in report and "exception_type=RuntimeError" in report
    assert TRACEBACK in report and "in leaky_weather" in report, report
    assert f"with key {REDACTED}" in report
    _assert_no_key(handle)


@pytest.mark.parametrize("inline", [False, True])
def test_a_raising_job_logs_a_scrubbed_stack_trace_and_the_caller_gets_the_type_only(
    node: tuple[ActorSystemHandle, Emulator], inline: bool
) -> None:
    handle, _emu = node
    probe = start_child(handle, ChildSpec(id=unique("jobs"), actor=PROBE))
    tag = uuid.uuid4().hex
    with pytest.raises(AdkError) as info:
        handle.ask(probe, Job(fn=leaky_job, args=(tag,), inline=inline), timeout=15)
    assert info.value.reason == "function_failed"
    caller_sees = f"{info.value} {info.value.to_dict()}"
    assert "ValueError" in caller_sees and tag not in caller_sees and KEY not in caller_sees

    report = _report(handle.log_sink, f"job {tag} failed")
    assert ("inline function raised" if inline else "job function raised") in report
    assert "exception_type=ValueError" in report and TRACEBACK in report and "in leaky_job" in report, report
    assert f"with key {REDACTED}" in report
    _assert_no_key(handle)


def test_a_raising_timer_callback_is_logged_with_its_stack_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timers = ThreadTimers()
    secret = Secret("thread-timer-canary-" + uuid.uuid4().hex)
    done = threading.Event()

    def expire() -> None:
        raise OSError(f"deadline handling failed near {secret.reveal()}")

    with caplog.at_level(logging.ERROR, logger="adk_actors.thread_timers"):
        timers.add(0.0, expire)
        timers.add(0.001, done.set)  # runs after the failing callback, on the same thread
        assert done.wait(5.0), "the timer thread died with the failing callback"
    timers.stop_if_idle()
    records = [r for r in caplog.records if r.name == "adk_actors.thread_timers"]
    assert len(records) == 1 and records[0].levelno == logging.ERROR
    text = records[0].getMessage()
    assert "timer callback raised" in text and "exception_type=OSError" in text
    assert TRACEBACK in text and "in expire" in text and f"near {REDACTED}" in text
    assert secret.reveal() not in text
