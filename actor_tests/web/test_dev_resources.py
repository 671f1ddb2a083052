"""The ``/dev/v1`` memory, artifact and context routes over real HTTP on 127.0.0.1: a real node, a
``FileArtifactService`` in a temp dir, a ``SqlMemoryService`` on a SQLite file and the node's context cache, handed
to ``dev_app`` by an exact-scope provider.

Sections: provider and scope; artifacts; memory; context; fail-closed adapters; token rules and hostile paths.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.web.resources_support import (
    APP,
    OTHER,
    SECRET_BYTES,
    SESSION,
    TOKEN,
    USER,
    ResourceServer,
    make_world,
    serve_resources,
)
from adk_actors.artifacts import ArtifactScope, ArtifactVersion
from adk_actors.context.cache import ContextCache, scope_fingerprint
from adk_actors.devapi.resources import DevResources, single_tenant
from adk_actors.events import Event, EventActions
from adk_actors.memory import MemoryScope
from adk_actors.memory.base import MemoryEntry, MemoryHit
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef

ART = f"/dev/v1/artifacts/{APP}/{USER}/{SESSION}"
MEM = f"/dev/v1/memory/{APP}/{USER}"
CTX = f"/dev/v1/context/{APP}/{USER}/{SESSION}"
MODEL = "gemini-3.1-flash-lite"
FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"])


class RecordingCache:
    """The node's context cache, recording what the server asked of it."""

    def __init__(self, cache: ContextCache, system: ActorSystemHandle) -> None:
        self.cache, self.system = cache, system
        self.invalidated: list[str] = []

    def stats(self, scope_fingerprint: str | None = None) -> dict[str, int]:
        return self.cache.stats(scope_fingerprint, system=self.system)

    def invalidate(self, scope_fingerprint: str) -> int:
        self.invalidated.append(scope_fingerprint)
        return self.cache.invalidate(scope_fingerprint, system=self.system)


@pytest.fixture
def res(system: ActorSystemHandle, tmp_path: Path) -> Iterator[ResourceServer]:
    cache = ContextCache.start(system=system, name=f"devres_cache_{uuid.uuid4().hex[:8]}")
    world = make_world(tmp_path, RecordingCache(cache, system))
    world.seed()
    sessions = None
    try:
        with serve_resources(system, world) as served:
            from adk_actors.node import session_service

            sessions = session_service(system=system)
            sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION, if_exists="return")
            yield served
    finally:
        if sessions is not None:
            sessions.delete_session(SessionRef(app_name=APP, user_id=USER, session_id=SESSION))
        cache.stop(system=system)


def no_secret_in(server: ResourceServer) -> None:
    for response in server.responses:
        text = response.text
        assert SECRET_BYTES.decode() not in text
        assert "hunter2" not in text and "sk-999" not in text and TOKEN not in text


# ---- provider and scope ------------------------------------------------------------------------------------------


def test_the_provider_is_asked_with_the_exact_scope_of_each_route(res: ResourceServer) -> None:
    res.client.get(ART)
    res.client.get(MEM)
    res.client.get(f"{CTX}/lifecycle", params={"model": MODEL})

    assert res.world.asked == [(APP, USER, SESSION), (APP, USER, None), (APP, USER, SESSION)]


def test_a_scope_the_provider_denies_is_403_and_reaches_no_service(res: ResourceServer) -> None:
    res.world.deny.add((APP, OTHER))

    for answer in (
        res.client.get(f"/dev/v1/artifacts/{APP}/{OTHER}/{SESSION}"),
        res.client.get(f"/dev/v1/memory/{APP}/{OTHER}"),
        res.client.post(f"/dev/v1/memory/{APP}/{OTHER}/search", json={"query": "otp"}),
    ):
        assert error_of(answer, 403)["reason"] == "resource_forbidden"
    assert res.world.memory.count(MemoryScope(APP, OTHER)) == 1


def test_single_tenant_serves_only_its_app_user_and_sessions(system: ActorSystemHandle, tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.seed()
    provider = single_tenant(
        DevResources(artifacts=world.artifacts, memory=world.memory), app_name=APP, user_id=USER, session_ids=[SESSION]
    )
    with serve_resources(system, world, resources=provider) as served:
        assert served.client.get(ART).status_code == 200
        assert served.client.get(MEM).status_code == 200
        for path in (f"/dev/v1/artifacts/{APP}/{USER}/other-session", f"/dev/v1/memory/{APP}/{OTHER}"):
            assert error_of(served.client.get(path), 403)["reason"] == "resource_forbidden"


def test_without_a_provider_resources_are_503_unavailable_and_diagnostics_say_none(
    system: ActorSystemHandle, tmp_path: Path
) -> None:
    with serve_resources(system, make_world(tmp_path), resources=None) as served:
        for path, kind in ((ART, "artifact"), (MEM, "memory")):
            error = error_of(served.client.get(path), 503)
            assert error["reason"] == f"{kind}_unavailable" and error["problem"] == "not_configured"
        lifecycle = served.client.get(f"{CTX}/lifecycle", params={"model": MODEL})
        assert lifecycle.status_code in (404, 503)
        assert served.client.get("/dev/v1/diagnostics").json()["resources"]["resource_provider"] == "none"


def test_a_failing_provider_is_503_provider_failed_without_its_message(
    system: ActorSystemHandle, tmp_path: Path
) -> None:
    def broken(app: str, user: str, session: str | None) -> DevResources:
        raise RuntimeError("internal provider detail " + TOKEN)

    with serve_resources(system, make_world(tmp_path), resources=broken) as served:
        answer = served.client.get(MEM)
        assert error_of(answer, 503) == {
            "reason": "memory_unavailable",
            "message": "the memory source is unavailable",
            "problem": "provider_failed",
        }
        assert "internal provider detail" not in answer.text


def test_diagnostics_name_the_resource_configuration_without_handles(res: ResourceServer) -> None:
    resources = res.client.get("/dev/v1/diagnostics").json()["resources"]

    assert resources == {"resource_provider": "provider", "context_explain": "available", "max_resource_results": 100}


# ---- artifacts ---------------------------------------------------------------------------------------------------


def test_artifact_names_page_through_with_an_exclusive_cursor(res: ResourceServer) -> None:
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = res.client.get(ART, params=params).json()
        assert len(page["names"]) <= 2
        names += page["names"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert names == ["a.txt", "b.txt", "c.txt", "d.txt", "reports/result.txt"] and pages == 3
    assert "hidden.txt" not in names and "theirs.txt" not in names  # other session, other user
    no_secret_in(res)


@pytest.mark.parametrize("limit", ["0", "101", "-1", "x", "1" * 12])
def test_an_artifact_page_outside_1_to_100_is_400(res: ResourceServer, limit: str) -> None:
    assert error_of(res.client.get(ART, params={"limit": limit}), 400)["reason"] in ("invalid_value", "limit_exceeded")


def test_versions_are_metadata_only_with_secret_named_metadata_pruned(res: ResourceServer) -> None:
    page = res.client.get(f"{ART}/versions", params={"name": "reports/result.txt", "limit": 1}).json()
    assert [v["version"] for v in page["versions"]] == [1] and page["next_cursor"] == 1
    rest = res.client.get(f"{ART}/versions", params={"name": "reports/result.txt", "cursor": 1}).json()

    [second] = rest["versions"]
    assert set(second) == {"version", "size", "digest", "mime_type", "created_at", "metadata"}
    assert second["version"] == 2 and second["size"] == len(SECRET_BYTES) + 1 and second["mime_type"] == "text/plain"
    assert second["metadata"]["stage"] == "final" and second["metadata"]["api_key"] != "sk-" + "9" * 20
    assert rest["next_cursor"] is None
    no_secret_in(res)


def test_versions_need_a_valid_name(res: ResourceServer) -> None:
    assert error_of(res.client.get(f"{ART}/versions"), 400)["reason"] == "invalid_artifact_name"
    assert error_of(res.client.get(f"{ART}/versions", params={"name": "../x"}), 400)["reason"] == (
        "invalid_artifact_name"
    )


def _delete_body(selector: str = "latest", change: dict[str, Any] | None = None) -> dict[str, Any]:
    confirmation = {"app_name": APP, "user_id": USER, "session_id": SESSION, "name": "reports/result.txt"}
    confirmation["selector"] = selector
    confirmation.update(change or {})
    return {"name": "reports/result.txt", "selector": selector, "confirmation": confirmation}


def stored_versions(res: ResourceServer, name: str = "reports/result.txt") -> list[int]:
    return [v.version for v in res.world.artifacts.list_versions(ArtifactScope.session(APP, USER, SESSION), name)]


@pytest.mark.parametrize(
    "confirmation",
    [
        {"session_id": "other-session"},
        {"user_id": OTHER},
        {"selector": "all"},
        {"name": "a.txt"},
        {"extra": "x"},
        {"app_name": None},
    ],
    ids=["session", "user", "selector", "name", "extra-key", "not-a-string"],
)
def test_an_artifact_delete_with_a_wrong_confirmation_is_refused_and_deletes_nothing(
    res: ResourceServer, confirmation: dict[str, Any]
) -> None:
    answer = res.client.post(f"{ART}/delete", json=_delete_body(change=confirmation))

    error = error_of(answer, 400)
    assert error["reason"] == "confirmation_mismatch"
    assert error["expected_keys"] == ["app_name", "name", "selector", "session_id", "user_id"]
    assert stored_versions(res) == [1, 2]


def test_an_artifact_delete_without_confirmation_is_refused(res: ResourceServer) -> None:
    body = _delete_body()
    del body["confirmation"]

    assert error_of(res.client.post(f"{ART}/delete", json=body), 400)["reason"] == "confirmation_required"
    assert stored_versions(res) == [1, 2]


def test_a_confirmed_delete_removes_exactly_its_selector(res: ResourceServer) -> None:
    latest = res.client.post(f"{ART}/delete", json=_delete_body("latest"))
    assert latest.json() == {"deleted": 1, "versions": [2], "selector": "latest"}
    assert stored_versions(res) == [1]

    every = res.client.post(f"{ART}/delete", json=_delete_body("all"))
    assert every.json()["deleted"] == 1 and stored_versions(res) == []
    again = res.client.post(f"{ART}/delete", json=_delete_body("1"))
    assert error_of(again, 404)["reason"] == "artifact_not_found"


# ---- memory ------------------------------------------------------------------------------------------------------


def test_memory_info_shows_capabilities_limits_and_the_scopes_count(res: ResourceServer) -> None:
    info = res.client.get(MEM).json()

    assert info["adapter"] == "sql" and info["entries"] == 2 and info["search"] == "lexical"
    assert info["limits"]["max_results"] == 100 and info["erase_targets"] == ["entry", "session", "user"]


def test_memory_search_returns_only_the_paths_user_bounded_and_redacted(res: ResourceServer) -> None:
    hits = res.client.post(f"{MEM}/search", json={"query": "supervision", "limit": 5}).json()["hits"]

    assert len(hits) == 2
    assert all("another user" not in h["content"] for h in hits)
    long = next(h for h in hits if h["content_truncated"])
    assert len(long["content"]) == 1024 and long["metadata"]["password"] != "hunter2-secret"
    otp = next(h for h in hits if not h["content_truncated"])
    assert otp["session_id"] == "memory-session" and otp["author"] == "user" and otp["metadata"] == {"topic": "otp"}
    no_secret_in(res)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"query": ""}, "invalid_query"),
        ({"query": "x" * 2000}, "invalid_query"),
        ({"query": "otp", "limit": 101}, "invalid_value"),
        ({"query": "otp", "filter": {"k": [1]}}, "invalid_metadata"),
        ({"query": "otp", "surprise": 1}, "unknown_key"),
    ],
)
def test_a_malformed_search_is_400(res: ResourceServer, body: dict[str, Any], reason: str) -> None:
    assert error_of(res.client.post(f"{MEM}/search", json=body), 400)["reason"] == reason


def _erase(target: str, identifier: str, change: dict[str, Any] | None = None) -> dict[str, Any]:
    confirmation: dict[str, Any] = {"app_name": APP, "user_id": USER, "target": target, "identifier": identifier}
    confirmation.update(change or {})
    return {"target": target, "identifier": identifier, "confirmation": confirmation}


def test_a_memory_erase_needs_its_exact_confirmation(res: ResourceServer) -> None:
    scope = MemoryScope(APP, USER)
    missing = _erase("user", USER)
    del missing["confirmation"]

    assert error_of(res.client.post(f"{MEM}/erase", json=missing), 400)["reason"] == "confirmation_required"
    for change in ({"target": "session"}, {"user_id": OTHER}, {"identifier": "x"}, {"extra": True}):
        answer = res.client.post(f"{MEM}/erase", json=_erase("user", USER, change))
        assert error_of(answer, 400)["reason"] == "confirmation_mismatch"
    assert res.world.memory.count(scope) == 2

    erased = res.client.post(f"{MEM}/erase", json=_erase("session", "memory-session"))
    assert erased.json() == {"erased": 1, "target": "session"} and res.world.memory.count(scope) == 1
    [left] = res.world.memory.search(scope, "supervision")
    assert res.client.post(f"{MEM}/erase", json=_erase("entry", left.entry.id)).json()["erased"] == 1
    assert res.client.post(f"{MEM}/erase", json=_erase("user", USER)).json()["erased"] == 0
    assert res.world.memory.count(MemoryScope(APP, OTHER)) == 1  # the other user's entry is untouched


def test_erasing_a_user_must_name_that_user(res: ResourceServer) -> None:
    answer = res.client.post(f"{MEM}/erase", json=_erase("user", OTHER))

    assert error_of(answer, 400)["reason"] == "invalid_value"
    assert res.world.memory.count(MemoryScope(APP, OTHER)) == 1


# ---- context -----------------------------------------------------------------------------------------------------


def _add_events(res: ResourceServer, *events: Event) -> None:
    from adk_actors.node import session_service

    sessions = session_service(system=res.system)
    ref = SessionRef(app_name=APP, user_id=USER, session_id=SESSION)
    for event in events:
        sessions.add_event(ref, event)


def test_context_explanation_counts_the_history_without_events_or_state(res: ResourceServer) -> None:
    _add_events(
        res,
        Event.new(invocation_id="i1", author="user", content="remember the SECRETWORD"),
        Event.new(invocation_id="i1", author="agent", content="noted", is_final=True),
    )

    answer = res.client.get(CTX)

    body = answer.json()
    assert body["events_total"] == 2 and body["history"]["selected"] == 2
    assert len(body["history"]["fingerprint"]) == 32 and body["compaction"] is None
    assert "SECRETWORD" not in answer.text and "noted" not in answer.text


def test_context_of_an_unknown_session_is_404(res: ResourceServer) -> None:
    assert error_of(res.client.get(f"/dev/v1/context/{APP}/{USER}/nope"), 404)["reason"] == "not_found"


def test_lifecycle_shows_whitelisted_compaction_fields_and_the_cache_scope(res: ResourceServer) -> None:
    effect = {
        "type": "compaction",
        "through_seq": 7,
        "folded_events": 6,
        "summary_bytes": 120,
        "fingerprint": "ab" * 16,
        "compressor": "model",
        "summary": "SUMMARY TEXT",
        "policy": {"max_bytes": 99},
    }
    _add_events(res, Event.new(invocation_id="c", author="system", actions=EventActions(context_effects=(effect,))))

    answer = res.client.get(f"{CTX}/lifecycle", params={"model": MODEL})

    body = answer.json()
    assert body["compaction"] == {
        "through_seq": 7,
        "folded_events": 6,
        "summary_bytes": 120,
        "fingerprint": "ab" * 16,
        "compressor": "model",
        "event_id": body["compaction"]["event_id"],
    }
    expected = scope_fingerprint(APP, USER, MODEL, res.world.cache_policy)
    assert body["cache"]["scope_fingerprint"] == expected and len(expected) == 64
    assert body["cache"]["counts"]["entries"] == 0 and "SUMMARY" not in answer.text
    assert "developer_inspection" not in answer.text  # the policy's value is never shown


def test_lifecycle_needs_a_model(res: ResourceServer) -> None:
    assert error_of(res.client.get(f"{CTX}/lifecycle"), 400)["key"] == "model"


def test_cache_invalidation_needs_the_confirmed_scope_fingerprint(res: ResourceServer) -> None:
    fingerprint = res.client.get(f"{CTX}/lifecycle", params={"model": MODEL}).json()["cache"]["scope_fingerprint"]
    confirmation = {"app_name": APP, "user_id": USER, "session_id": SESSION, "model": MODEL}
    path = f"{CTX}/cache/invalidate"

    missing = res.client.post(path, json={"model": MODEL})
    wrong = res.client.post(
        path, json={"model": MODEL, "confirmation": {**confirmation, "scope_fingerprint": "0" * 64}}
    )
    other_model = res.client.post(
        path, json={"model": "other", "confirmation": {**confirmation, "scope_fingerprint": fingerprint}}
    )

    assert error_of(missing, 400)["reason"] == "confirmation_required"
    assert error_of(wrong, 400)["reason"] == "confirmation_mismatch"
    assert error_of(other_model, 400)["reason"] == "confirmation_mismatch"
    assert res.world.cache.invalidated == []
    done = res.client.post(
        path, json={"model": MODEL, "confirmation": {**confirmation, "scope_fingerprint": fingerprint}}
    )
    assert done.json() == {"invalidated": 0, "scope_fingerprint": fingerprint}
    assert res.world.cache.invalidated == [fingerprint]


def test_without_a_cache_lifecycle_is_503_context_cache_unavailable(res: ResourceServer) -> None:
    res.world.cache = None

    error = error_of(res.client.get(f"{CTX}/lifecycle", params={"model": MODEL}), 503)

    assert error["reason"] == "context_cache_unavailable" and error["problem"] == "not_configured"


# ---- fail-closed adapters ----------------------------------------------------------------------------------------


class ForeignVersions:
    """An artifact adapter that answers with a record of another session (or too long a page)."""

    def __init__(self, real: Any, mode: str) -> None:
        self.real, self.mode = real, mode

    def list_names(self, scope: ArtifactScope, *, limit: int = 100, cursor: str | None = None) -> Any:
        names, _ = self.real.list_names(scope, limit=1000)
        if self.mode == "long_page":
            return names, None
        if self.mode == "unordered":
            return list(reversed(names))[:limit], None
        return self.real.list_names(scope, limit=limit, cursor=cursor)

    def list_versions(self, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        versions = self.real.list_versions(scope, name)
        other = ArtifactScope.session(APP, USER, "other-session")
        return [*versions, ArtifactVersion(**{**_fields(versions[0]), "scope": other, "version": 99})]

    def delete(self, scope: ArtifactScope, name: str, version: int | None = None) -> int:
        return self.real.delete(scope, name, version)


def _fields(record: ArtifactVersion) -> dict[str, Any]:
    return {k: getattr(record, k) for k in ArtifactVersion.__slots__}  # type: ignore[attr-defined]


class ForeignHits:
    """A memory adapter whose search also returns another user's entry."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def search(self, scope: MemoryScope, query: str, **kwargs: Any) -> list[MemoryHit]:
        hits = self.real.search(scope, query, **kwargs)
        stray = MemoryEntry(id="mem_" + "0" * 32, scope=MemoryScope(APP, OTHER), content="LEAKED", created_at=1.0)
        return [*hits, MemoryHit(entry=stray, score=0.0, rank=len(hits) + 1)]


@pytest.mark.parametrize("mode", ["long_page", "unordered"])
def test_an_artifact_page_out_of_shape_fails_closed(system: ActorSystemHandle, tmp_path: Path, mode: str) -> None:
    world = make_world(tmp_path)
    world.seed()
    hostile = DevResources(artifacts=ForeignVersions(world.artifacts, mode))
    with serve_resources(system, world, resources=hostile) as served:
        answer = served.client.get(ART, params={"limit": 2})
        error = error_of(answer, 503)
        assert error["reason"] == "artifact_unavailable" and error["problem"] == "invalid_result"
        assert "a.txt" not in answer.text


def test_a_version_record_of_another_scope_fails_closed_and_blocks_deletes(
    system: ActorSystemHandle, tmp_path: Path
) -> None:
    world = make_world(tmp_path)
    world.seed()
    hostile = DevResources(artifacts=ForeignVersions(world.artifacts, "exact"))
    with serve_resources(system, world, resources=hostile) as served:
        answer = served.client.get(f"{ART}/versions", params={"name": "a.txt"})
        assert error_of(answer, 503)["problem"] == "scope_mismatch" and "digest" not in answer.text
        deleted = served.client.post(f"{ART}/delete", json=_delete_body("all"))
        assert error_of(deleted, 503)["problem"] == "scope_mismatch"
    scope = ArtifactScope.session(APP, USER, SESSION)
    assert [v.version for v in world.artifacts.list_versions(scope, "reports/result.txt")] == [1, 2]


def test_a_memory_hit_of_another_user_fails_closed(system: ActorSystemHandle, tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.seed()
    with serve_resources(system, world, resources=DevResources(memory=ForeignHits(world.memory))) as served:
        answer = served.client.post(f"{MEM}/search", json={"query": "supervision"})
        error = error_of(answer, 503)
        assert error["reason"] == "memory_unavailable" and error["problem"] == "scope_mismatch"
        assert "LEAKED" not in answer.text and "OTP" not in answer.text


# ---- token rules and hostile paths -------------------------------------------------------------------------------

ROUTES = [
    ("GET", ART, None),
    ("GET", f"{ART}/versions?name=a.txt", None),
    ("POST", f"{ART}/delete", _delete_body("all")),
    ("GET", MEM, None),
    ("POST", f"{MEM}/search", {"query": "otp"}),
    ("POST", f"{MEM}/erase", _erase("user", USER)),
    ("GET", CTX, None),
    ("GET", f"{CTX}/lifecycle?model={MODEL}", None),
    ("POST", f"{CTX}/cache/invalidate", {"model": MODEL}),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_resource_route_needs_the_token_and_same_origin(
    res: ResourceServer, method: str, path: str, body: Any
) -> None:
    plain = httpx.Client(base_url=res.url, trust_env=False, timeout=10.0)
    try:
        assert error_of(plain.request(method, path, json=body), 401)["reason"] == "unauthorized"
        foreign = {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}
        assert error_of(plain.request(method, path, json=body, headers=foreign), 403)["reason"] == "cross_origin"
    finally:
        plain.close()
    assert stored_versions(res) == [1, 2] and res.world.memory.count(MemoryScope(APP, USER)) == 2
    assert res.world.asked == []


MARK = "FZX"
hostile_part = st.text(min_size=1, max_size=40).map(lambda s: MARK + s)


@FUZZ
@given(app=hostile_part, user=hostile_part, session=hostile_part)
def test_hostile_path_parts_are_refused_or_scoped_never_echoed_or_500(
    res: ResourceServer, app: str, user: str, session: str
) -> None:
    parts = "/".join(quote(p, safe="") for p in (app, user, session))
    for answer in (
        res.client.get(f"/dev/v1/artifacts/{parts}"),
        res.client.get(f"/dev/v1/memory/{'/'.join(parts.split('/')[:2])}"),
        res.client.get(f"/dev/v1/context/{parts}"),
    ):
        assert answer.status_code in (200, 400, 404), answer.text
        if answer.status_code >= 400:
            assert MARK not in answer.text
    for app_name, user_id, _ in res.world.asked:
        assert app_name == app and user_id == user
    res.world.asked.clear()
