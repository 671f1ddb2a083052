"""The MCP samples run offline as their own processes and print what docs/MCP.md says they print."""

from __future__ import annotations

from actor_tests.samples_runner import run_sample


def test_mcp_client_sample_uses_an_mcp_servers_tool_over_stdio_and_http() -> None:
    result = run_sample("mcp_client.py")
    assert result.stdout.splitlines() == [
        "stdio: weather-peer speaks MCP 2025-11-25",
        "tools: ['get_weather']",
        "direct call: {'city': 'Porto', 'forecast': 'sunny'} isError: False",
        "agent: The weather in Lisbon is sunny.",
        "http: weather-peer speaks MCP 2025-11-25",
        "agent over http: The weather in Lisbon is sunny.",
    ]


def test_mcp_server_sample_serves_a_tool_an_agent_a_resource_and_a_prompt() -> None:
    result = run_sample("mcp_server.py")
    assert result.stdout.splitlines() == [
        "server: adk_actors, MCP 2025-11-25",
        "tools: ['Explainer', 'convert_temperature']",
        'convert_temperature: {"celsius": 21.0, "fahrenheit": 69.8}',
        "Explainer: OTP supervisors restart what crashes.",
        "resource: Supervise every process.",
        "prompt: Explain OTP",
    ]
