"""``make demo``: a weather agent with a tool, a Runner on a SQLite session, and a stable run with streamed events.

Everything runs offline: the model is the bundled Gemini emulator, the session store a SQLite file in a temporary
directory, and the actor system is started and stopped here.

Run: ``.venv/bin/python samples/quickstart.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.sessions import SessionRef
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool


def get_weather(city: str) -> dict:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return {"city": city, "forecast": "sunny"}


SCRIPT = {"rules": [
    {"when": {"user_text_contains": "weather", "tool_declared": "get_weather", "has_function_response": False},
     "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}},
    {"when": {"has_function_response": True},
     "respond": {"text": "It is {response.forecast} in {response.city}."}},
    {"when": {"user_text_contains": "advice"},
     "respond": {"text": "Take sunglasses and some water: it stays sunny all day.", "chunks": 6}},
    {"when": {}, "respond": {"text": "You said: {user_text}"}}]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-quickstart-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data, session_backend="sql")
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "model": "gemini-3.1-flash-lite",
                  "instructions": "You are a concise weather assistant.",
                  "base_url": emu.base_url,   # omit both lines to use the real Gemini API with GEMINI_API_KEY
                  "api_key": "demo-key"}
        weather = adk.spawn_agent("WeatherAgent", config, [FunctionTool(get_weather)])
        sessions = adk.session_service(settings)            # a SQLite file under the data dir
        runner = adk.Runner(weather, "quickstart", sessions, streaming_mode="text")

        print("user: What is the weather in Tokyo?")
        print("agent:", runner.run("user-1", "session-1", "What is the weather in Tokyo?"))

        run_id = adk.runs.start(runner, "user-1", "session-1", "Thanks! Any advice for today?")
        for item in adk.runs.subscribe(run_id):
            if item.terminal:
                print("run outcome:", type(item.item).__name__)
                break
            event = item.item
            kind = "partial" if event.partial else "final" if event.is_final else "event"
            print(f"  [{item.seq}] {kind} by {event.author}: {event.text() or ''}")

        session = sessions.get_session(SessionRef(app_name="quickstart", user_id="user-1", session_id="session-1"))
        print(f"the session holds {len(session.events)} events")
        adk.stop_agent(weather)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
