"""Evaluation targets that ``adk eval run --agent actor_tests.evaluation.e3_agents:NAME`` imports.

The tools are closures, so they travel to the node's workers by value (the node never imports this module)."""

from __future__ import annotations

from adk_actors import FunctionTool
from adk_actors.evaluation.runner import AgentTarget


def _weather_tool() -> FunctionTool:
    def get_weather(city: str) -> dict:
        """Get the weather for a city."""
        return {"city": city, "forecast": "sunny"}

    return FunctionTool(get_weather)


WEATHER = AgentTarget("EvalCliWeather", {"provider": "gemini", "model": "gemini-3.1-flash-lite"}, (_weather_tool(),))
"""An agent with ``get_weather(city)``; ``adk eval run --emulator`` points it at the emulator."""
NOT_A_TARGET = {"name": "just a dict"}
