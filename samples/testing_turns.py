"""Testing an agent's turn logic in process: a scripted model, real tools and sub-agents, no node, no HTTP.

Run: ``.venv/bin/python samples/testing_turns.py`` (no actor system, no emulator: it finishes in about a second).
"""

from __future__ import annotations

import adk_actors as adk
from adk_actors.testing import ScriptedModel, TurnHarness, function_call, run_turn


def get_weather(city: str) -> dict:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return {"city": city, "forecast": "sunny"}


def main() -> int:
    # One turn: the model asks for the tool, the tool runs here, its response goes back to the model.
    weather = adk.Agent(name="Weather", instruction="Be concise.", tools=[adk.FunctionTool(get_weather)])
    model = ScriptedModel([function_call("get_weather", city="Tokyo"), "Sunny in Tokyo."])
    outcome = run_turn(weather, "What is the weather in Tokyo?", model=model)
    print("weather:", outcome.output)
    assert outcome.tool_calls[0].response == {"city": "Tokyo", "forecast": "sunny"}
    assert model.requests[1].history[-1]["content"]["parts"][0]["type"] == "function_response"

    # A coordinator and its sub-agent share one script, consumed in call order.
    helper = adk.Agent(name="Helper", description="Researches a topic.", instruction="Research.")
    root = adk.Agent(name="Root", instruction="Delegate research.", sub_agents=[helper])
    model = ScriptedModel([function_call("Helper", prompt="OTP"), "notes on OTP", "Root: notes on OTP"])
    outcome = run_turn(root, "Explain OTP", model=model)
    print("coordinator:", outcome.output)
    assert [request.agent for request in outcome.model_calls] == ["Root", "Helper", "Root"]
    assert outcome.agent_calls[0].output == "notes on OTP"

    # A Runner invocation: the stored events and the state the output_key committed.
    scribe = adk.Agent(name="Scribe", output_key="summary")
    outcome = run_turn(scribe, "Summarise OTP.", model=ScriptedModel(["OTP is a toolkit."]), runner_options={})
    print("runner:", [event.author for event in outcome.events], outcome.state)
    assert outcome.state == {"summary": "OTP is a toolkit."}

    # Failures are outcomes: a scripted provider error is what the caller would see raised.
    outcome = run_turn(weather, "Hi", model=ScriptedModel([adk.ProviderError("down", reason="unavailable")]))
    print("failure:", outcome.error.reason if outcome.error else None)
    assert outcome.error is not None and outcome.error.reason == "unavailable"

    # Several turns of one conversation.
    harness = TurnHarness(helper, model=ScriptedModel(["first answer", "second answer"]))
    harness.prompt("one")
    second = harness.prompt("two")
    print("conversation:", len(second.model_calls[0].history), "history entries")
    assert len(second.model_calls[0].history) == 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
