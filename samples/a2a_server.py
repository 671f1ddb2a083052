"""Serving an agent over A2A 1.0, and calling it with our client and as a remote sub-agent.

``a2a_app`` publishes the agent's card at ``/.well-known/agent-card.json`` and JSON-RPC at ``/a2a/v1``. Each task is a
stable run of the node: the HTTP request does not own it. A second, local agent uses the remote one through
``A2aModel``, as an ``AgentTool``; the official ``a2a-sdk`` client works the same way (docs/A2A.md).

Run: ``.venv/bin/python samples/a2a_server.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors import a2a
from adk_actors.agents import AgentTool
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.web import start_in_thread
from adk_actors.web.a2a_server import A2A_PATH, a2a_app, agent_card

POET = {"rules": [{"when": {}, "respond": {"text": "Supervisors restart; {user_text} endures."}}]}
COORDINATOR = {"rules": [
    {"when": {"has_function_response": False},
     "respond": {"function_calls": [{"name": "RemotePoet", "args": {"prompt": "{user_text}"}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "The remote poet wrote: {response_text}"}},
]}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
        with Emulator(script=POET) as poet_model, Emulator(script=COORDINATOR) as coordinator_model, \
                adk.open_actor_system(settings) as system:
            adk.spawn_agent("Poet", {"provider": "gemini", "base_url": poet_model.base_url, "api_key": "offline"})
            runner = adk.Runner("Poet", "poems", adk.session_service(settings))
            app = a2a_app(system, runner=runner, card=None)
            with start_in_thread(app) as server:  # 127.0.0.1, a free port; no auth: loopback clients only
                app.set_card(agent_card(name="Poet", description="Writes one-line poems", url=server.url + A2A_PATH,
                                        skills=[{"id": "poem", "name": "Poem", "description": "a poem",
                                                 "tags": ["writing"]}]))
                card = a2a.discover(server.url, allow_http_loopback=True)
                print(f"card: {card.name}, A2A {a2a.PROTOCOL_VERSION} at {card.rpc_url.removeprefix(server.url)}")
                task = a2a.send(card, "OTP", allow_http_loopback=True)["task"]
                print(f"task: {task['status']['state']}: {task['artifacts'][0]['parts'][0]['text']}")
                events = list(a2a.stream(card, "Erlang", allow_http_loopback=True))
                print("stream:", [next(iter(e)) for e in events])

                remote = a2a.A2aModel(card, allow_http_loopback=True)
                adk.spawn_agent("RemotePoet", {"provider": remote, "description": "a poet behind A2A"})
                adk.spawn_agent("Coordinator", {"provider": "gemini", "base_url": coordinator_model.base_url,
                                                "api_key": "offline"}, [AgentTool("RemotePoet")])
                print("coordinator:", adk.prompt("Coordinator", "actors"))


if __name__ == "__main__":
    main()
