"""An agent that uses the tools of an MCP server, over stdio and over Streamable HTTP.

The MCP server is ``adk_actors.devtools.mcp_peer``, written with the official ``mcp`` SDK (``get_weather(city)``).
``mcp.connect`` starts it over stdio (the connection actor owns the process: it never outlives the node) and
performs the initialize handshake; ``mcp_toolset`` takes a snapshot of its tools, which an agent gets like any other
tools. The model (the offline emulator) calls ``get_weather``; the agent sends the call straight to the connection
actor and the function response carries the MCP result's content. The same server is then reached over Streamable
HTTP.

Run: ``.venv/bin/python samples/mcp_client.py``
"""

from __future__ import annotations

import sys
import tempfile

import adk_actors as adk
from adk_actors import mcp
from adk_actors.devtools.mcp_peer import serving_http
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"has_function_response": False},
     "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Lisbon"}}]}},
    {"when": {"has_function_response": True},
     "respond": {"text": "The weather in {args.city} is {response.structuredContent.forecast}."}},
]}


def main() -> None:
    settings = adk.Settings.from_dict({"admin_port": reserved_port(), "data_dir": tempfile.mkdtemp()})
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        model = {"provider": "gemini", "base_url": emu.base_url, "api_key": "offline"}

        client = mcp.connect("stdio", sys.executable, args=["-m", "adk_actors.devtools.mcp_peer"])
        print(f"stdio: {client.server_info['name']} speaks MCP {client.protocol_version}")
        print("tools:", [tool["name"] for tool in client.list_tools()])
        direct = client.execute_tool("get_weather", {"city": "Porto"})
        print("direct call:", direct["structuredContent"], "isError:", direct["isError"])

        agent = adk.spawn_agent("Forecaster", model, [mcp.mcp_toolset(client)])
        print("agent:", adk.prompt(agent, "What is the weather in Lisbon?"))
        adk.stop_agent(agent)
        client.close()

        with serving_http() as (url, _pid):  # the same server over Streamable HTTP, in a process of its own
            remote = mcp.connect("http", url, allow_http_loopback=True)
            print(f"http: {remote.server_info['name']} speaks MCP {remote.protocol_version}")
            agent = adk.spawn_agent("RemoteForecaster", model, [mcp.mcp_toolset(remote)])
            print("agent over http:", adk.prompt(agent, "And in Lisbon, over HTTP?"))
            remote.close()


if __name__ == "__main__":
    main()
