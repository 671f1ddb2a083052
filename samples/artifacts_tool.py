"""Artifacts shown to the model: the ``load_artifacts`` tool on a SQL artifact store.

A SQLite artifact store (``SqlArtifactService``) holds a session's artifacts. The agent declares
``load_artifacts``: the model asks for names, the function response lists what was loaded (name, version, MIME
type, size) and what is missing, and the artifacts' content goes into the model's next request only. The session
stores the small function response, never the content.

Run: ``.venv/bin/python samples/artifacts_tool.py``
"""

from __future__ import annotations

import json
import os
import tempfile

import adk_actors as adk
from adk_actors.artifacts import ArtifactScope, SqlArtifactService, load_artifacts_tool
from adk_actors.emulator import Emulator
from adk_actors.sessions import SessionRef
from adk_actors.testing import reserved_port

SCRIPT = {"rules": [
    {"when": {"function_response_name": "load_artifacts"},
     "respond": {"text": "Loaded {response.loaded.0.name} v{response.loaded.0.version}; "
                         "missing: {response.missing.0}."}},
    {"when": {"user_text_contains": "brief"},
     "respond": {"function_calls": [{"name": "load_artifacts",
                                     "args": {"artifact_names": ["brief.md", "budget.xlsx"]}}]}},
    {"when": {}, "respond": {"text": "Noted."}},
]}
BRIEF = b"Keep answers under fifty words. Code word: osprey-7."


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    artifacts = SqlArtifactService(f"sqlite:///{os.path.join(data, 'artifacts.db')}")
    scope = ArtifactScope.session("artifacts_app", "user-1", "session-1")
    artifacts.put(scope, "brief.md", b"an outdated brief", mime_type="text/markdown")
    version = artifacts.put(scope, "brief.md", BRIEF, mime_type="text/markdown")
    print(f"stored: brief.md v{version.version} {version.digest[:15]}...")
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        agent = adk.spawn_agent("Briefed", config, [load_artifacts_tool(max_total_bytes=64 * 1024)])
        runner = adk.Runner(agent, "artifacts_app", adk.session_service(settings), artifact_svc=artifacts)
        print(f"answer: {runner.run('user-1', 'session-1', 'Read the brief, please.')}")
        requests = [json.dumps(r["body"]) for r in emu.requests]
        print(f"content in the request after the tool: {'osprey-7' in requests[1]}")
        print(f"content in the first request: {'osprey-7' in requests[0]}")
        ref = SessionRef(app_name="artifacts_app", user_id="user-1", session_id="session-1")
        events = adk.session_service(settings).get_session(ref).events
        print(f"content stored in the session: {'osprey-7' in json.dumps([e.to_dict() for e in events])}")
        adk.stop_agent(agent)
    artifacts.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
