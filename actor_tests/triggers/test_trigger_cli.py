"""``adk trigger list|status`` against the shared node, as subprocesses: the same JSON as ``/dev/v1/triggers``,
an event by reference or by id, and failures by reason with exit status 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from actor_tests.triggers.t2_support import Register, echo_runner, emu, register, unique_trigger  # noqa: F401
from adk_actors.cli.trigger_cmd import event_ref
from adk_actors.errors import ValidationError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import await_event, submit

ADK = str(Path(sys.executable).with_name("adk"))


def adk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ADK, *args], capture_output=True, text=True, timeout=60)


def test_list_and_status_print_the_triggers_and_one_event(register: Register, system: ActorSystemHandle) -> None:  # noqa: F811
    name = register(max_queue=8)
    ref = submit(name, {"payload": "hello", "idempotency_key": "cli-1"}, system=system).ref
    assert await_event(ref, 30, system=system).outcome == "completed"
    port = str(system.port)

    listed = adk("trigger", "list", "--port", port)
    assert listed.returncode == 0, listed.stderr
    mine = [t for t in json.loads(listed.stdout)["triggers"] if t["name"] == name]
    assert mine and mine[0]["max_queue"] == 8 and mine[0]["completed"] == 1 and mine[0]["recent"][0]["ref"] == ref

    shown = json.loads(adk("trigger", "status", name, "--port", port).stdout)
    assert shown["name"] == name and shown["accepted"] == 1
    by_id = json.loads(adk("trigger", "status", name, ref.split("/", 1)[1], "--port", port).stdout)
    assert by_id["ref"] == ref and by_id["outcome"] == "completed" and by_id["state"] == "terminal"


def test_an_unknown_trigger_fails_by_reason_with_status_1(system: ActorSystemHandle) -> None:
    missing = adk("trigger", "status", unique_trigger("absent"), "--port", str(system.port))
    assert missing.returncode == 1 and "[unknown_trigger]" in missing.stderr and missing.stdout == ""


def test_a_reference_of_another_trigger_is_refused() -> None:
    assert event_ref("inbox", "abc") == "inbox/abc"
    assert event_ref("inbox", "inbox/abc") == "inbox/abc"
    with pytest.raises(ValidationError) as err:
        event_ref("inbox", "other/abc")
    assert err.value.details == {"key": "ref"}


def test_no_action_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from adk_actors.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["trigger"])
    assert exited.value.code == 2 and "ACTION" in capsys.readouterr().err
