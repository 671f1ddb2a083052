"""Callbacks used by the agent tests: they run in worker processes and report through a journal file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _note(config: dict[str, Any], line: dict[str, Any]) -> None:
    with Path(config["callback_config"]["journal"]).open("a") as fh:
        fh.write(json.dumps(line) + "\n")


class Audit:
    """Observes every hook (the reference's readme_audit_callback)."""

    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> str:
        _note(
            config,
            {"hook": "before_model", "tools": len(tools), "config_keys": sorted(config), "history": len(history)},
        )
        return "ok"

    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> None:
        _note(config, {"hook": "after_model", "text": result["text"], "calls": len(result["function_calls"])})

    @staticmethod
    def before_tool(name: str, args: dict[str, Any], context: dict[str, Any]) -> None:
        return None

    @staticmethod
    def after_tool(name: str, args: dict[str, Any], context: dict[str, Any], result: dict[str, Any]) -> str:
        return "continue"


class Halt:
    """Answers without calling the model."""

    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> tuple[str, Any]:
        return ("halt", "cached answer")


class Rewrite:
    """Replaces the model's answer and the tool's arguments and result."""

    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> Any:
        if result["function_calls"]:
            return None
        return ("replace", result["text"].upper())

    @staticmethod
    def before_tool(name: str, args: dict[str, Any], context: dict[str, Any]) -> Any:
        return ("replace", {**args, "city": "Paris"})

    @staticmethod
    def after_tool(name: str, args: dict[str, Any], context: dict[str, Any], result: dict[str, Any]) -> Any:
        return ("replace", {**result, "forecast": "rainy"})


class Broken:
    """Every hook raises or answers nonsense: the agent must carry on."""

    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> Any:
        raise RuntimeError("callback bug with private detail")

    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> Any:
        return ("explode", 1)

    @staticmethod
    def before_tool(name: str, args: dict[str, Any], context: dict[str, Any]) -> Any:
        raise ValueError("private")


class ErrorWatch:
    """An agent-level error hook: journals what it is told about failed turns."""

    @staticmethod
    def on_error(config: dict[str, Any], error: dict[str, Any]) -> None:
        line = json.dumps({"hook": "on_error", "error": error, "config_keys": sorted(config)})
        with Path(config["callback_config"]["fifo"]).open("w") as fh:  # the test is blocked reading it
            fh.write(line + "\n")


class HaltTool:
    """Answers every tool call itself: the tool never runs."""

    @staticmethod
    def before_tool(name: str, args: dict[str, Any], context: dict[str, Any]) -> tuple[str, Any]:
        return ("halt", {"city": args["city"], "forecast": "from the callback"})


class ReplaceHistory:
    """Sends the model a history of its own instead of the conversation."""

    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> tuple[str, Any]:
        return ("replace", [{"role": "user", "content": "replaced question"}])


class HostileAnswers:
    """Answers the model can never give: a NUL character, from before_model (halt) and after_model (replace)."""

    @staticmethod
    def before_model(config: dict[str, Any], history: list[Any], tools: list[Any]) -> Any:
        if config["callback_config"].get("where") == "before":
            return ("halt", "bad\u0000answer")
        return None

    @staticmethod
    def after_model(config: dict[str, Any], result: dict[str, Any]) -> Any:
        return ("replace", "bad\u0000answer")
