"""The ``execute_code`` toolset and the process sandbox: real processes, real limits, an agent on the emulator.

The sandbox's promises are tested by running hostile code: an infinite loop (wall clock), a fork bomb (process
limit, and nothing survives), huge output (bound), a memory hog (address space), a network connection (its own
network namespace when root), reading root's files (``nobody``), our environment (none of it). The toolset checks a
call before the executor sees it, and an agent's model calls it end to end through the worker pool.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actor_tests.agents.conftest import config_for, emu  # noqa: F401 - the fixture
from adk_actors import prompt, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError, ToolError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import pids_with_cmdline
from adk_actors.tools import CodeRequest, ProcessSandbox, capabilities, code_toolset

pytestmark = pytest.mark.timeout(60)

ROOT = os.geteuid() == 0
SANDBOX = ProcessSandbox(cpu_s=5, memory_mb=256, max_processes=16)


def run(code: str, timeout_s: float = 5.0, max_output_bytes: int = 65536) -> dict:
    request = CodeRequest(language="python", code=code, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
    return SANDBOX.execute(request).to_dict()


@pytest.fixture
def no_survivors() -> Iterator[None]:
    """No sandbox process (its command line names the sandbox's temporary directory) outlives the test."""
    yield
    assert pids_with_cmdline(b"/adk-sandbox-") == []


def test_the_library_runs_no_code_itself() -> None:
    assert capabilities() == {"external_sandbox_required": True, "in_process_execution": False, "shell_fallback": False}


def test_code_runs_and_its_output_and_exit_code_come_back() -> None:
    out = run("import sys\nprint(6 * 7)\nprint('warn', file=sys.stderr)\nsys.exit(3)")
    assert out["outcome"] == "failed" and out["exit_code"] == 3
    assert out["stdout"] == "42\n" and out["stderr"] == "warn\n" and out["truncated"] is False
    assert run("print('ok')")["outcome"] == "ok"


def test_an_infinite_loop_is_stopped_at_the_wall_clock() -> None:
    out = run("while True:\n    pass", timeout_s=1.0)
    assert out["outcome"] == "timeout" and out["duration_ms"] < 4000


def test_a_fork_bomb_meets_the_process_limit_and_nothing_survives(no_survivors: None) -> None:
    # Every process keeps forking past the limit's refusals, then sleeps: only killing the group ends them.
    code = (
        "import os, sys, time\nrefused = 0\nfor _ in range(200):\n    try:\n        os.fork()\n"
        "    except OSError:\n        refused += 1\nif refused:\n    print('refused', file=sys.stderr, flush=True)\n"
        "time.sleep(60)"
    )
    out = run(code, timeout_s=2.0)
    assert out["outcome"] == "timeout"
    assert "refused" in out["stderr"]  # the process limit said no


def test_huge_output_is_cut_at_the_bound_and_the_process_stopped() -> None:
    out = run("while True:\n    print('x' * 1000)", timeout_s=10.0, max_output_bytes=10_000)
    assert out["outcome"] == "output_limit" and out["truncated"] is True
    assert len(out["stdout"]) + len(out["stderr"]) <= 10_000


def test_memory_is_bounded_by_the_address_space_limit() -> None:
    out = run("block = bytearray(1024 ** 3)")
    assert out["outcome"] == "failed" and "MemoryError" in out["stderr"]


def test_the_environment_is_empty_of_our_settings_and_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "sandbox-canary-key-0123456789")
    out = run("import os\nprint(sorted(os.environ))\nprint(os.environ.get('GEMINI_API_KEY'))")
    assert out["stdout"] == "['HOME', 'LANG', 'PATH']\nNone\n"


@pytest.mark.skipif(not ROOT, reason="network namespaces and the nobody user need root")
def test_as_root_the_code_runs_as_nobody_without_a_network() -> None:
    assert SANDBOX.capabilities["network_isolated"] and SANDBOX.capabilities["unprivileged"]
    assert run("import os\nprint(os.getuid(), os.getgid())")["stdout"] == "65534 65534\n"
    net = run("import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)")
    assert net["outcome"] == "failed" and ("unreachable" in net["stderr"] or "refused" in net["stderr"])
    secret = run("print(open('/etc/shadow').read())")
    assert secret["outcome"] == "failed" and "PermissionError" in secret["stderr"]


def test_the_tool_checks_a_call_before_the_executor_sees_it() -> None:
    (tool,) = code_toolset(SANDBOX, max_code_bytes=100).tools
    with pytest.raises(ToolError) as caught:
        tool.execute({"language": "bash", "code": "ls"})
    assert caught.value.reason == "unsupported_language"
    with pytest.raises(ToolError) as caught:
        tool.execute({"language": "python", "code": "x" * 101})
    assert caught.value.reason == "code_too_large"
    with pytest.raises(ToolError) as caught:
        tool.execute({"language": "python", "code": "print(1)\x00"})
    assert caught.value.reason == "invalid_code"
    assert tool.execute({"language": "python", "code": "print(1)"})["stdout"] == "1\n"


@given(
    languages=st.one_of(st.none(), st.lists(st.text(max_size=8), max_size=3).map(tuple)),
    timeout_s=st.one_of(st.floats(allow_nan=True), st.integers(-5, 10_000), st.booleans()),
    max_output_bytes=st.one_of(st.integers(-5, 10**9), st.floats(allow_nan=True)),
)
def test_toolset_options_are_valid_or_refused_with_a_reason(
    languages: tuple[str, ...] | None, timeout_s: object, max_output_bytes: object
) -> None:
    try:
        toolset = code_toolset(SANDBOX, languages=languages, timeout_s=timeout_s, max_output_bytes=max_output_bytes)  # type: ignore[arg-type]
    except ConfigError as err:
        assert err.reason == "invalid_value"
        return
    assert [t.name for t in toolset.tools] == ["execute_code"]


def test_an_agent_runs_model_written_code_in_the_sandbox(system: ActorSystemHandle, emu: Emulator) -> None:  # noqa: F811
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {
                        "function_calls": [
                            {"name": "execute_code", "args": {"language": "python", "code": "print(sum(range(10)))"}}
                        ]
                    },
                },
                {"when": {"has_function_response": True}, "respond": {"text": "The sum is {response.stdout}"}},
            ]
        }
    )
    name = f"Coder_{uuid.uuid4().hex[:8]}"
    spawn_agent(name, config_for(emu), [code_toolset(ProcessSandbox(), timeout_s=5)], system=system)
    try:
        assert prompt(name, "add 0..9", timeout=30, system=system).strip() == "The sum is 45"
    finally:
        stop_agent(name, system=system)


def test_the_code_execution_sample_runs_offline() -> None:
    from actor_tests.samples_runner import run_sample

    assert run_sample("code_execution.py").stdout.splitlines() == [
        "library: {'external_sandbox_required': True, 'in_process_execution': False, 'shell_fallback': False}",
        "an endless loop: timeout",
        "agent: 20! = 2432902008176640000",
    ]
