"""The reference's "Callbacks and telemetry" section in Python: the audit callback, then a telemetry subscriber.

Callbacks run in worker processes, so this one reports to a journal file named in ``callback_config`` (the
reference registers an observer process out of band the same way). A class or object defined in a script travels
by value; callbacks in your own modules can be named as ``"package.module"`` or ``"package.module:Class"``.

Telemetry events travel from the agent to the node's telemetry hub and on to every subscriber, here one in this
process (the reference's ``telemetry:attach`` handler for ``[erlang_adk, agent, prompt, stop]``).

Run: ``.venv/bin/python samples/agent_callbacks.py``
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import adk_actors as adk
from adk_actors import telemetry
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port


class AuditCallback:
    """Observes the model calls of an agent (the reference's ``readme_audit_callback``)."""

    @staticmethod
    def _notify(config: dict[str, Any], message: list[Any]) -> None:
        with Path(config["callback_config"]["journal"]).open("a") as fh:
            fh.write(json.dumps(message) + "\n")

    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> str:
        AuditCallback._notify(config, ["before_model", len(tools)])
        return "ok"

    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> None:
        AuditCallback._notify(config, ["after_model", result["text"]])

    @staticmethod
    def before_tool(tool_name: str, args: dict[str, Any], context: dict[str, Any]) -> str:
        return "ok"

    @staticmethod
    def after_tool(tool_name: str, args: dict[str, Any], context: dict[str, Any], result: dict[str, Any]) -> None:
        return None


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(Path(data))


def _main(data: Path) -> int:
    journal = data / "audit.jsonl"
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=str(data))
    with Emulator() as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key",
                  "callbacks": [AuditCallback], "callback_config": {"journal": str(journal)}}
        agent = adk.spawn_agent("CallbackAgent", config)
        adk.prompt(agent, "Say hello.")
        for hook, value in (json.loads(line) for line in journal.read_text().splitlines()):
            print(f"{value} tools" if hook == "before_model" else f"{hook}: {value}")
        adk.stop_agent(agent)

        telemetry_agent = adk.spawn_agent("TelemetryAgent", {"provider": "gemini", "base_url": emu.base_url,
                                                             "api_key": "test-key"})
        with telemetry.attach("agent.prompt.") as sub:
            adk.prompt(telemetry_agent, "Say hello.")
            events = list(sub.until("agent.prompt.stop", timeout=10))
        print("events:", " ".join(e.name for e in events))
        stop = events[-1]
        print(f"agent={stop.metadata['agent']} duration_ms={stop.measurements['duration_ms']}")
        adk.stop_agent(telemetry_agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
