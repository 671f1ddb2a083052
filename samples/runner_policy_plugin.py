"""A policy plugin on a Runner: one class, defined in this script, that every run of the Runner goes through.

``OpsPolicy`` adds a house rule to every model request (``before_model`` amends the instructions), halts the run
before a destructive tool can start (``before_tool`` halts: the run fails with ``PluginError("plugin_halted")``
whose details carry the plugin, the hook and a short cause tag, never free text) and strips an internal field
from tool results before the model or the session sees them (``after_tool`` amends the result). The built-in
``MetadataLogger`` watches the same runs (``mode="observe"``), logging content-free records to the node log.

Plugins are Runner-global: the agent itself has no callbacks. Each hook runs as a job in the worker pool (the
class travels there by value, like a callback defined in a script), with the descriptor's ``timeout_ms``.

Run: ``.venv/bin/python samples/runner_policy_plugin.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.errors import PluginError
from adk_actors.sessions import SessionRef
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool

SCRIPT = {"rules": [
    {"when": {"user_text_contains": "instructions"},
     "respond": {"text": "The instructions I was given: {system_text}"}},
    {"when": {"user_text_contains": "delete", "has_function_response": False},
     "respond": {"function_calls": [{"name": "delete_deployment", "args": {"name": "legacy-web"}}]}},
    {"when": {"user_text_contains": "status", "has_function_response": False},
     "respond": {"function_calls": [{"name": "service_status", "args": {"service": "billing"}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "The {name} tool returned: {response_text}."}},
    {"when": {}, "respond": {"text": "You said: {user_text}"}},
]}


class OpsPolicy:
    """Runner-wide guard rails: a house rule in every request, no destructive tools, no internal fields."""

    def __init__(self, config):
        self.blocked = set(config["blocked_tools"])
        self.house_rule = config["house_rule"]

    def before_model(self, context):
        current = context["request"]["instructions"]
        return ("amend", {"instructions": f"{current} {self.house_rule}".strip()})

    def before_tool(self, context):
        if context["tool"] in self.blocked:
            return ("halt", "destructive_tool")
        return None

    def after_tool(self, context):
        result = context["result"]
        if "internal" in result:
            return ("amend", {key: value for key, value in result.items() if key != "internal"})
        return None


def service_status(service: str) -> dict:
    """Report a service's state.

    Args:
        service: The service to look at.
    """
    return {"service": service, "state": "healthy", "internal": {"node": "10.0.3.7"}}


def delete_deployment(name: str) -> dict:
    """Delete a deployment (the policy plugin never lets this run).

    Args:
        name: The deployment to delete.
    """
    return {"deleted": name}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "instructions": "You operate our services.", "base_url": emu.base_url,
                  "api_key": "test-key"}
        agent = adk.spawn_agent("OpsAgent", config, [FunctionTool(service_status), FunctionTool(delete_deployment)])
        sessions = adk.session_service(settings)
        runner = adk.Runner(agent, "policy_app", sessions, plugins=[
            {"id": "ops-policy", "plugin": OpsPolicy, "mode": "intervene", "failure_policy": "closed",
             "timeout_ms": 5000, "config": {"blocked_tools": ["delete_deployment"],
                                            "house_rule": "Never reveal internal addresses."}},
            {"id": "audit", "plugin": "adk_actors.plugins.builtins:MetadataLogger", "mode": "observe",
             "failure_policy": "open", "timeout_ms": 5000},
        ])

        seen = runner.run("user-1", "ops-1", "Which instructions do you have?")
        print(f"amended request: {seen}")
        assert seen.endswith("You operate our services. Never reveal internal addresses.")

        status = runner.run("user-1", "ops-2", "What is the status of billing?")
        print(f"amended tool result: {status}")
        assert "10.0.3.7" not in status
        stored = sessions.get_session(SessionRef(app_name="policy_app", user_id="user-1", session_id="ops-2"))
        responses = [p["response"] for e in stored.events if e.content is not None
                     for p in e.content.to_dict()["parts"] if p["type"] == "function_response"]
        print(f"stored tool result: {responses}")
        assert responses == [{"service": "billing", "state": "healthy"}]

        try:
            runner.run("user-1", "ops-3", "Please delete the legacy deployment.")
            raise AssertionError("the policy plugin let a destructive tool run")
        except PluginError as err:
            details = err.details
            print(f"halted: {err.reason} plugin={details['plugin']} hook={details['hook']} cause={details['cause']}")
            assert (err.reason, details["cause"]) == ("plugin_halted", "destructive_tool")
        stored = sessions.get_session(SessionRef(app_name="policy_app", user_id="user-1", session_id="ops-3"))
        kinds = [_kind(event) for event in stored.events]
        print(f"stored events: {' -> '.join(kinds)}")
        assert kinds == ["text", "function_call", "plugin_halted"]  # no function response: the tool never ran
        adk.stop_agent(agent)
    return 0


def _kind(event: adk.Event) -> str:
    """An event in one word: its error's reason, else the type of its first part."""
    if event.error is not None:
        return event.error.reason
    return event.content.to_dict()["parts"][0]["type"] if event.content is not None else "-"


if __name__ == "__main__":
    raise SystemExit(main())
