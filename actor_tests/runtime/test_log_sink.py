"""Our own log records go straight to the node's sink file from every process (``logs.AppendSink``), instead of
through Thespian's logger process: whole lines from concurrent processes, scrubbed, level-filtered, none lost."""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adk_actors import Runner
from adk_actors.emulator import Emulator
from adk_actors.logs import SINK_ENV, AppendSink, get_logger, quiet_libraries, sink_environment
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import FunctionTool

LINE = re.compile(r"^\S+ \S+ INFO adk_actors\.sinktest line (\d+)-(\d+) " + "x" * 200 + "$")


def _child(path: Path, worker: int, count: int) -> None:
    handler = AppendSink(str(path), logging.INFO, "console")
    logger = logging.Logger("adk_actors.sinktest")
    logger.addHandler(handler)
    for n in range(count):
        logger.info("line %d-%d %s", worker, n, "x" * 200)
    handler.close()


def test_lines_of_concurrent_processes_land_whole_and_none_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "sink.log"
    children = []
    for worker in range(3):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                _child(path, worker, 400)
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 1200 and all(LINE.match(line) for line in lines)
    seen = {tuple(map(int, m.groups())) for line in lines if (m := LINE.match(line))}
    assert seen == {(w, n) for w in range(3) for n in range(400)}


def test_the_sink_scrubs_secrets_and_keeps_its_file_private(tmp_path: Path) -> None:
    path = tmp_path / "sink.log"
    handler = AppendSink(str(path), logging.INFO, "json")
    logger = logging.Logger("adk_actors.sinktest")
    logger.addHandler(handler)
    logger.info("calling with key=%s", "AIza" + "B" * 35)
    handler.close()
    text = path.read_text()
    assert "AIza" not in text and '"logger": "adk_actors.sinktest"' in text
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_process_with_the_sink_environment_routes_our_loggers_there_at_its_level(tmp_path: Path) -> None:
    path = tmp_path / "node.log"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: a fresh logging manager, as Thespian gives an actor process
        status = 1
        try:
            os.close(read)
            os.environ.update(sink_environment(str(path), "warning", "console"))
            os.environ["ADKACTORS_LIBRARY_LOG_LEVEL"] = "warning"
            logging.Logger.manager = logging.Manager(logging.root)
            quiet_libraries()
            log = get_logger("adk_actors.sinktest.env")
            log.info("below the level")
            log.warning("kept record")
            logging.getLogger("adk_actors.sinktest.std").error("stdlib record")
            status = 0
        finally:
            os.write(write, b"done")
            os._exit(status)
    os.close(write)
    assert os.read(read, 16) == b"done"
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    text = path.read_text()
    assert "kept record" in text and "stdlib record" in text and "below the level" not in text
    assert (
        SINK_ENV not in os.environ
        or os.environ[SINK_ENV] != sink_environment(str(path), "warning", "console")[SINK_ENV]
    )


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def test_a_flood_of_records_from_a_node_process_all_reach_the_node_log(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    from adk_actors.agents import spawn_agent, stop_agent

    marker = uuid.uuid4().hex[:10]

    def chatty(n: int) -> dict[str, int]:
        """Logs n records."""
        log = get_logger("adk_actors.sinktest.flood")
        for i in range(n):
            log.info("flood", marker=marker, i=i)
        return {"logged": n}

    name = f"Flood{marker}"
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "chatty", "args": {"n": 2000}}]},
                },
                {"when": {}, "respond": {"text": "done"}},
            ]
        }
    )
    spawn_agent(
        name,
        {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"},
        tools=[FunctionTool(chatty, inline=True)],
        system=system,
    )
    try:
        runner = Runner(name, "sink", ActorSessionService(system=system), system=system)
        assert runner.run("u", f"s-{marker}", "go") == "done"
    finally:
        stop_agent(name, system=system)
    lines = [x for x in system.log_sink.read_text(errors="replace").splitlines() if f"marker={marker}" in x]
    assert len(lines) == 2000, "every record of the flood is in the node log"
