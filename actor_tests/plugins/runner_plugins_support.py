"""Plugin classes for ``test_runner_plugins.py``: each one does one thing a Runner plugin may do (halt, amend,
return, stall, raise, leak, observe), driven by its descriptor's ``config``.

They live in a module of their own so that worker processes load them by importable name
(``actor_tests.plugins.runner_plugins_support:<Class>``, what ``compile_plugins`` makes of a class defined here)
rather than by value. A plugin that must tell the test what it saw appends one JSON line per hook to
``config["journal"]``, a file in a temp dir the test owns: hooks run in worker processes (or in the agent's host
for ``inline=True``), so a file is the simplest witness every process can write.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from adk_actors.plugins.hooks import thaw

__all__ = [
    "AgentShortcut",
    "AnswerFromPlugin",
    "ArgsOverride",
    "Boom",
    "CheckedByCallback",
    "HaltTool",
    "LeakyResult",
    "LegacyErrors",
    "Notes",
    "PidHalt",
    "RecoverModel",
    "RewriteInput",
    "RewriteOutput",
    "RunCounter",
    "Shout",
    "SignAnswer",
    "Stall",
    "Stamp",
    "StubTool",
    "journal_lines",
]


def _journal(config: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    """Append ``record`` to the config's journal file (one short write per line: lines never interleave)."""
    path = config.get("journal")
    if isinstance(path, str):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(thaw(record), sort_keys=True) + "\n")


def journal_lines(path: str) -> list[dict[str, Any]]:
    """The records the plugins appended to ``path``, oldest first (``[]`` before the first)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


class HaltTool:
    """``before_tool``: halts the run for the tools in ``config["tools"]`` with the tag ``config["cause"]``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.tools = set(config.get("tools", ()))
        self.cause = config.get("cause", "destructive_tool")

    def before_tool(self, context: Mapping[str, Any]) -> Any:
        return ("halt", self.cause) if context["tool"] in self.tools else None


class Stamp:
    """``before_model``: appends ``[stamp:<mark>]`` to the request's instructions (an amendment)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.mark = config["mark"]

    def before_model(self, context: Mapping[str, Any]) -> Any:
        current = context["request"].get("instructions") or ""
        return ("amend", {"instructions": f"{current} [stamp:{self.mark}]".strip()})


class AnswerFromPlugin:
    """``after_model``: answers ``config["text"]`` in place of the model's answer, as a return (the default) or,
    with ``config["kind"] = "amend"``, as an amendment."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.text = config["text"]
        self.kind = config.get("kind", "return")

    def after_model(self, context: Mapping[str, Any]) -> Any:
        return (self.kind, self.text)


class SignAnswer:
    """``after_model``: amends the answer's text (``context["response"]["text"]``) with ``config["signature"]``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.signature = config["signature"]

    def after_model(self, context: Mapping[str, Any]) -> Any:
        return ("amend", f"{context['response']['text']} {self.signature}")


class CheckedByCallback:
    """An agent callback (not a plugin): its ``after_model`` marks the answer it saw with `` (checked)``."""

    @staticmethod
    def after_model(config: Mapping[str, Any], result: Mapping[str, Any]) -> Any:
        return ("replace", f"{result['text']} (checked)")


class StubTool:
    """``before_tool``: returns ``config["result"]`` as the tool's result, so the tool itself never runs."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.result = thaw(config["result"])

    def before_tool(self, context: Mapping[str, Any]) -> Any:
        return ("return", self.result)


class RewriteInput:
    """``on_user_message``: amends the user's message to ``config["text"]``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.text = config["text"]

    def on_user_message(self, context: Mapping[str, Any]) -> Any:
        return ("amend", self.text)


class AgentShortcut:
    """``before_agent``: returns ``config["text"]`` as the agent's output, so the agent never runs."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.text = config["text"]

    def before_agent(self, context: Mapping[str, Any]) -> Any:
        return ("return", self.text)


class RecoverModel:
    """``on_model_error``: answers ``"Recovered from <reason>."`` in place of the failed model call."""

    def on_model_error(self, context: Mapping[str, Any]) -> Any:
        return ("return", f"Recovered from {context['error']['reason']}.")


class ArgsOverride:
    """``before_tool``: amends the call's arguments to ``config["args"]`` (revalidated against the tool's schema)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.args = thaw(config["args"])

    def before_tool(self, context: Mapping[str, Any]) -> Any:
        return ("amend", self.args)


class Stall:
    """``before_model``: sleeps ``config["sleep_s"]`` (past its descriptor's ``timeout_ms``), then carries on."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.sleep_s = float(config["sleep_s"])

    def before_model(self, context: Mapping[str, Any]) -> Any:
        time.sleep(self.sleep_s)  # the plugin under test is slow on purpose: the engine must not wait for it
        return None


class Boom:
    """``before_model``: raises, with a message the caller must never see."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.message = config.get("message", "the plugin broke")

    def before_model(self, context: Mapping[str, Any]) -> Any:
        raise RuntimeError(self.message)


class LeakyResult:
    """``after_tool``: amends the tool result with credentials under secret-named keys (an ``api_key`` next to the
    result, a ``token`` nested in it): the Runner must prune them before anything is stored or sent."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.secret = config["leak"]

    def after_tool(self, context: Mapping[str, Any]) -> Any:
        result = thaw(context["result"])
        return ("amend", {**result, "api_key": self.secret, "auth": {"token": self.secret}})


class Shout:
    """``on_event``: upper-cases the text of every partial event and tries the same on the final event (which an
    ``on_event`` amendment may not change)."""

    def on_event(self, context: Mapping[str, Any]) -> Any:
        event = thaw(context["event"])
        if not (event.get("partial") or event.get("is_final")) or not event.get("content"):
            return None
        parts = [
            {**part, "text": part["text"].upper()} if part.get("type") == "text" else part
            for part in event["content"]["parts"]
        ]
        return ("amend", {"content": {**event["content"], "parts": parts}})


class RewriteOutput:
    """``after_agent``: returns ``config["text"]`` as the agent's output."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.text = config["text"]

    def after_agent(self, context: Mapping[str, Any]) -> Any:
        return ("return", self.text)


class Notes:
    """Journals the hooks it hears (the notification hooks, and ``before_run`` to order them): the hook, the
    output of ``after_run`` and the error's reason tag. It never intervenes."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def _note(self, context: Mapping[str, Any]) -> None:
        error = context.get("error")
        _journal(
            self.config,
            {
                "hook": context["hook"],
                "run_id": context.get("run_id"),
                "output": context.get("output"),
                "reason": error.get("reason") if isinstance(error, Mapping) else None,
                "phase": context.get("phase"),
            },
        )

    before_run = _note
    after_run = _note
    on_agent_error = _note
    on_run_error = _note


class LegacyErrors:
    """Only the legacy ``on_error``: the phase error hooks fall back to it, with ``context["phase"]``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def on_error(self, context: Mapping[str, Any]) -> None:
        error = context["error"]
        _journal(self.config, {"hook": context["hook"], "phase": context.get("phase"), "reason": error["reason"]})


class PidHalt:
    """``before_run``: halts with the cause ``pid-<pid of the process running the hook>``, so the caller learns
    where the plugin ran from the structural error alone."""

    def before_run(self, context: Mapping[str, Any]) -> Any:
        return ("halt", f"pid-{os.getpid()}")


class RunCounter:
    """A stateful plugin (``hook(state, context) -> (result, state)``): ``before_run`` counts the runs it let
    through; the count lives in the instance's committed state."""

    def init_state(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"runs": 0}

    def before_run(self, state: dict[str, Any], context: Mapping[str, Any]) -> Any:
        state["runs"] += 1
        return None, state
