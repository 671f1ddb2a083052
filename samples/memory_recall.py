"""Long-term memory under a Runner: the ``load_memory`` tool and preload retrieval.

A SQLite memory store (FTS5 ranking) holds entries under an exact (app, user) scope. The agent declares
``load_memory``: the model calls it, and the function response carries public views only (content, id, score,
rank, timestamp). ``memory_retrieval`` preloads the best entries as delimited reference data into one invocation's
requests, never into the session. Another user's scope never sees the entry.

Run: ``.venv/bin/python samples/memory_recall.py``
"""

from __future__ import annotations

import os
import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.memory import MemoryScope, SqlMemoryService
from adk_actors.memory.access import load_memory_tool
from adk_actors.sessions import SessionRef
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"function_response_name": "load_memory"},
     "respond": {"text": "From memory: {response.memories.0.content}"}},
    {"when": {"user_text_contains": "recall"},
     "respond": {"function_calls": [{"name": "load_memory", "args": {"query": "supervision restart"}}]}},
    {"when": {}, "respond": {"text": "Noted."}},
]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    memory = SqlMemoryService(f"sqlite:///{os.path.join(data, 'memory.db')}")
    scope = MemoryScope(app="memory_app", user="user-1")
    memory.add(scope, "OTP supervision trees restart failed children", metadata={"topic": "otp"})
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        agent = adk.spawn_agent("Rememberer", config, [load_memory_tool()])
        runner = adk.Runner(agent, "memory_app", adk.session_service(settings), memory_svc=memory,
                            memory_retrieval={"limit": 3, "max_hit_bytes": 1024, "max_total_bytes": 4096})
        print(f"tool answer: {runner.run('user-1', 'session-1', 'Please recall what you know.')}")
        ref = SessionRef(app_name="memory_app", user_id="user-1", session_id="session-1")
        session = adk.session_service(settings).get_session(ref)
        stored = " ".join(e.text() or "" for e in session.events)
        print(f"preload stored in the session: {'<memory>' in stored}")
        hits = memory.search(MemoryScope(app="memory_app", user="someone-else"), "supervision")
        print(f"another user's search: {len(hits)} hits")
        adk.stop_agent(agent)
    memory.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
