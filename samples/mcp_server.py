"""Serving a node's agent and tools over MCP (Streamable HTTP), and calling them with an MCP client.

``mcp_app`` exposes a FunctionTool, an agent (a tool ``{"prompt": str}``), a resource and a prompt at ``/mcp``,
behind a bearer token. Every tool call is a stable run the node owns: a client that goes away does not leak work,
and a cancellation cancels the run. Here the client is adk_actors' own (``mcp.connect("http", ...)``); the official
SDK's client works the same way (docs/MCP.md).

Run: ``.venv/bin/python samples/mcp_server.py``
"""

from __future__ import annotations

import secrets
import tempfile

import adk_actors as adk
from adk_actors import mcp
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool
from adk_actors.web import McpPrompt, McpResource, mcp_app, start_in_thread


def convert_temperature(celsius: float) -> dict:
    """Convert a temperature from Celsius to Fahrenheit."""
    return {"celsius": celsius, "fahrenheit": round(celsius * 9 / 5 + 32, 1)}


def main() -> None:
    token = secrets.token_urlsafe(24)  # at least 16 bytes; clients send it as "Authorization: Bearer ..."
    settings = adk.Settings.from_dict({"admin_port": reserved_port(), "data_dir": tempfile.mkdtemp()})
    script = {"rules": [{"when": {}, "respond": {"text": "OTP supervisors restart what crashes."}}]}
    with Emulator(script=script) as emu, adk.open_actor_system(settings) as system:
        adk.spawn_agent("Explainer", {"provider": "gemini", "base_url": emu.base_url, "api_key": "offline"})
        app = mcp_app(
            system,
            token=token,
            tools=[FunctionTool(convert_temperature)],
            agents=["Explainer"],
            resources=[McpResource(uri="memo://otp", name="otp-note", read=lambda: "Supervise every process.")],
            prompts=[McpPrompt(name="explain", arguments=({"name": "topic", "required": True},),
                               get=lambda args: [{"role": "user", "content": f"Explain {args['topic']}"}])],
        )
        with start_in_thread(app) as server:  # 127.0.0.1, a free port
            url = f"{server.url}/mcp"
            client = mcp.connect("http", url, token=token, allow_http_loopback=True)
            print(f"server: {client.server_info['name']}, MCP {client.protocol_version}")
            print("tools:", sorted(t["name"] for t in client.list_tools()))
            converted = client.execute_tool("convert_temperature", {"celsius": 21})
            print("convert_temperature:", converted["content"][0]["text"])
            answer = client.execute_tool("Explainer", {"prompt": "What do supervisors do?"})
            print("Explainer:", answer["content"][0]["text"])
            print("resource:", client.read_resource("memo://otp")["contents"][0]["text"])
            print("prompt:", client.get_prompt("explain", {"topic": "OTP"})["messages"][0]["content"]["text"])
            client.close()


if __name__ == "__main__":
    main()
