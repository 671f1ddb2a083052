"""A stateful plugin on a Runner: a per-user run budget that lives in a plugin instance.

A plugin that must remember something between runs is started as a **stateful instance**
(``start_plugin_instance``): one supervised actor that serializes its calls and keeps the JSON state its hooks
return (``hook(state, context) -> (result, new_state)``). The Runner's descriptor names it (``instance``), and
every run's ``before_run`` goes there. ``RunBudget`` lets each user through ``budget`` times, then halts that
user's runs; other users keep their own count.

The instance is ``temporary``: once it is gone (stopped here; a crash or the loss of its host alike) it is not
restarted behind the Runner's back with an empty state. A Runner whose plugin is ``failure_policy="closed"`` then
fails its runs with a ``PluginError``: ``plugin_failed`` for a stopped instance, ``plugin_timeout`` (after the
hook's ``timeout_ms``) for one whose host was lost. Starting the instance again is an explicit decision and begins
from ``init_state``.

Run: ``.venv/bin/python samples/runner_stateful_plugin.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.errors import PluginError
from adk_actors.plugins.api import instance_status, start_plugin_instance, stop_plugin_instance
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [{"when": {}, "respond": {"text": "You said: {user_text}"}}]}


class RunBudget:
    """Lets each user through ``budget`` runs, then halts that user's further runs."""

    def init_state(self, config):
        return {"budget": config["budget"], "runs": {}}

    def before_run(self, state, context):
        used = state["runs"].get(context["user_id"], 0)
        if used >= state["budget"]:
            return ("halt", "run_budget_spent"), state
        state["runs"][context["user_id"]] = used + 1  # a private copy: it counts once the call is committed
        return None, state


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        agent = adk.spawn_agent("BudgetedAgent", config)
        budget = start_plugin_instance("run-budget", RunBudget, config={"budget": 2})
        runner = adk.Runner(agent, "budget_app", adk.session_service(settings), plugins=[
            {"id": "run-budget", "plugin": RunBudget, "instance": budget.name, "mode": "intervene",
             "failure_policy": "closed", "timeout_ms": 2000},
        ])

        for n in (1, 2):
            print(f"alice run {n}: {runner.run('alice', f'alice-{n}', f'Question {n}.')}")
        try:
            runner.run("alice", "alice-3", "Question 3.")
            raise AssertionError("the budget let a third run through")
        except PluginError as err:
            print(f"alice run 3: {err.reason} cause={err.details['cause']}")
            assert err.details["cause"] == "run_budget_spent"
        print(f"bob run 1: {runner.run('bob', 'bob-1', 'Hello.')}")
        status = instance_status(budget)
        print(f"instance: calls={status['calls']} commits={status['commits']} phase={status['phase']}")
        assert (status["calls"], status["commits"]) == (4, 4)

        stop_plugin_instance(budget)
        try:
            runner.run("bob", "bob-2", "Hello again.")
            raise AssertionError("a run went through without its closed plugin")
        except PluginError as err:
            print(f"instance gone, closed policy: {err.reason} hook={err.details['hook']}")
            assert err.reason == "plugin_failed"

        start_plugin_instance("run-budget", RunBudget, config={"budget": 2})  # explicitly, from init_state
        print(f"started again, alice run 4: {runner.run('alice', 'alice-4', 'Question 4.')}")
        adk.stop_agent(agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
