"""The reference's Quickstart in Python: a weather agent with one tool, against the local Gemini emulator.

Run: ``.venv/bin/python samples/agent_quickstart.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool


def get_weather(city: str) -> dict:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return {"city": city, "forecast": "sunny"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator() as emu, adk.open_actor_system(settings):
        llm_config = {
            "provider": "gemini",
            "instructions": "You are a concise weather assistant.",
            "model": "gemini-3.1-flash-lite",
            "base_url": emu.base_url,   # omit both lines to talk to the real Gemini API with GEMINI_API_KEY
            "api_key": "test-key",
        }
        weather = adk.spawn_agent("WeatherAgent", llm_config, [FunctionTool(get_weather)])
        print(adk.prompt(weather, "What is the weather in Tokyo?"))
        adk.stop_agent(weather)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
