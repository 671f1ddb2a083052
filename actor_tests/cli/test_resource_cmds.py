"""``adk inspect memory|artifacts|artifact|context|context-lifecycle``, ``adk memory``, ``adk artifact`` and
``adk context-cache`` against a real developer server on 127.0.0.1 holding a ``FileArtifactService``, a
``SqlMemoryService`` on SQLite and the node's context cache."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.web.resources_support import APP, SESSION, TOKEN, USER, ResourceServer, make_world, serve_resources
from adk_actors.artifacts import ArtifactScope
from adk_actors.cli.main import main
from adk_actors.context.cache import ContextCache
from adk_actors.memory import MemoryScope
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef

MODEL = "gemini-3.1-flash-lite"
SCOPE = [APP, USER, SESSION]


class NodeCache:
    """The node's context cache, asked on the test's node (the server thread has no current system)."""

    def __init__(self, cache: ContextCache, system: ActorSystemHandle) -> None:
        self.cache, self.system = cache, system

    def stats(self, scope_fingerprint: str | None = None) -> dict[str, int]:
        return self.cache.stats(scope_fingerprint, system=self.system)

    def invalidate(self, scope_fingerprint: str) -> int:
        return self.cache.invalidate(scope_fingerprint, system=self.system)


@pytest.fixture
def res(system: ActorSystemHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ResourceServer]:
    from adk_actors.node import session_service

    monkeypatch.setenv("ADK_DEV_TOKEN", TOKEN)
    cache = ContextCache.start(system=system, name=f"clires_cache_{uuid.uuid4().hex[:8]}")
    world = make_world(tmp_path, NodeCache(cache, system))
    world.seed()
    sessions = session_service(system=system)
    sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION, if_exists="return")
    try:
        with serve_resources(system, world) as served:
            yield served
    finally:
        sessions.delete_session(SessionRef(app_name=APP, user_id=USER, session_id=SESSION))
        cache.stop(system=system)


def adk(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Run ``adk argv``: (exit status, the JSON printed, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert TOKEN not in out and TOKEN not in err
    return status, json.loads(out) if out.strip() else None, err


def test_inspect_commands_print_the_servers_json(res: ResourceServer, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--url", res.url]

    status, names, _ = adk(capsys, "inspect", "artifacts", *SCOPE, "--limit", "2", *url)
    assert status == 0 and names == {"names": ["a.txt", "b.txt"], "next_cursor": "b.txt"}
    status, page, _ = adk(capsys, "inspect", "artifacts", *SCOPE, "--cursor", "d.txt", *url)
    assert page == {"names": ["reports/result.txt"], "next_cursor": None}
    status, versions, _ = adk(capsys, "inspect", "artifact", *SCOPE, "--name", "reports/result.txt", *url)
    assert [v["version"] for v in versions["versions"]] == [1, 2]
    status, memory, _ = adk(capsys, "inspect", "memory", APP, USER, *url)
    assert memory["entries"] == 2 and memory["adapter"] == "sql"
    status, context, _ = adk(capsys, "inspect", "context", *SCOPE, *url)
    assert context["events_total"] == 0 and context["session_id"] == SESSION
    status, lifecycle, _ = adk(capsys, "inspect", "context-lifecycle", *SCOPE, "--model", MODEL, *url)
    assert status == 0 and len(lifecycle["cache"]["scope_fingerprint"]) == 64


def test_memory_search_prints_bounded_hits(res: ResourceServer, capsys: pytest.CaptureFixture[str]) -> None:
    status, found, _ = adk(capsys, "memory", "search", APP, USER, "--query", "OTP supervision", "--limit", "1",
                           "--url", res.url)  # fmt: skip

    assert status == 0 and len(found["hits"]) == 1 and "OTP supervision" in found["hits"][0]["content"]


def test_artifact_delete_needs_the_exact_confirm_json(res: ResourceServer, capsys: pytest.CaptureFixture[str]) -> None:
    confirm = {
        "app_name": APP,
        "user_id": USER,
        "session_id": SESSION,
        "name": "reports/result.txt",
        "selector": "latest",
    }
    command = ["artifact", "delete", *SCOPE, "reports/result.txt", "latest", "--url", res.url, "--confirm-json"]
    scope = ArtifactScope.session(APP, USER, SESSION)

    status, _, err = adk(capsys, *command, json.dumps({**confirm, "selector": "all"}))
    assert status == 1 and "[confirmation_mismatch]" in err
    status, _, err = adk(capsys, *command, "not json")
    assert status == 1 and "[invalid_value]" in err
    assert [v.version for v in res.world.artifacts.list_versions(scope, "reports/result.txt")] == [1, 2]

    status, done, _ = adk(capsys, *command, json.dumps(confirm))
    assert status == 0 and done == {"deleted": 1, "versions": [2], "selector": "latest"}


def test_memory_erase_and_cache_invalidate_take_their_confirmations(
    res: ResourceServer, capsys: pytest.CaptureFixture[str]
) -> None:
    erase = {"app_name": APP, "user_id": USER, "target": "session", "identifier": "memory-session"}
    status, erased, _ = adk(capsys, "memory", "erase", APP, USER, "session", "memory-session", "--url", res.url,
                            "--confirm-json", json.dumps(erase))  # fmt: skip
    assert status == 0 and erased["erased"] == 1 and res.world.memory.count(MemoryScope(APP, USER)) == 1

    _, lifecycle, _ = adk(capsys, "inspect", "context-lifecycle", *SCOPE, "--model", MODEL, "--url", res.url)
    fingerprint = lifecycle["cache"]["scope_fingerprint"]
    confirm = {
        "app_name": APP,
        "user_id": USER,
        "session_id": SESSION,
        "model": MODEL,
        "scope_fingerprint": fingerprint,
    }
    command = ["context-cache", "invalidate", *SCOPE, "--model", MODEL, "--url", res.url, "--confirm-json"]
    status, _, err = adk(capsys, *command, json.dumps({**confirm, "scope_fingerprint": "f" * 64}))
    assert status == 1 and "[confirmation_mismatch]" in err
    status, done, _ = adk(capsys, *command, json.dumps(confirm))
    assert status == 0 and done == {"invalidated": 0, "scope_fingerprint": fingerprint}


def test_a_refused_scope_reports_the_servers_reason(res: ResourceServer, capsys: pytest.CaptureFixture[str]) -> None:
    res.world.deny.add((APP, USER))

    status, out, err = adk(capsys, "inspect", "memory", APP, USER, "--url", res.url)

    assert status == 1 and out is None and "[resource_forbidden]" in err and '"status": 403' in err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_client_side_rules_token_url_and_an_absent_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ADK_DEV_TOKEN", raising=False)
    status, _, err = adk(capsys, "inspect", "memory", APP, USER, "--url", "http://127.0.0.1:9")
    assert status == 1 and "[missing_token]" in err

    monkeypatch.setenv("ADK_DEV_TOKEN", TOKEN)
    status, _, err = adk(capsys, "inspect", "memory", APP, USER, "--url", "http://dev.example:8765")
    assert status == 1 and "[insecure_url]" in err
    status, _, err = adk(capsys, "inspect", "memory", APP, USER, "--url", "http://127.0.0.1:8765/?token=x")
    assert status == 1 and "[invalid_value]" in err

    status, _, err = adk(capsys, "inspect", "memory", APP, USER, "--url", f"http://127.0.0.1:{_free_port()}")
    assert status == 1 and "[developer_api_unavailable]" in err and "connection_refused" in err
