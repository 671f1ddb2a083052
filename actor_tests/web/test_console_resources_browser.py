"""The console's Resources and Context tabs in a real headless Chromium, against ``dev_app`` on 127.0.0.1 with a
``FileArtifactService``, a ``SqlMemoryService`` on SQLite and the node's context cache behind an exact-scope provider.

With ``ADK_SCREENSHOTS=1`` the test saves docs/images/console-resources.png and console-context.png.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actor_tests.web.resources_support import APP, SESSION, TOKEN, USER, ResourceServer, make_world, serve_resources
from actor_tests.web.test_console_browser import Console, browser  # noqa: F401
from adk_actors.artifacts import ArtifactScope
from adk_actors.context.cache import ContextCache
from adk_actors.events import Event, EventActions
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef


class NodeCache:
    def __init__(self, cache: ContextCache, system: ActorSystemHandle) -> None:
        self.cache, self.system = cache, system

    def stats(self, scope_fingerprint: str | None = None) -> dict[str, int]:
        return self.cache.stats(scope_fingerprint, system=self.system)

    def invalidate(self, scope_fingerprint: str) -> int:
        return self.cache.invalidate(scope_fingerprint, system=self.system)


@pytest.fixture
def res(system: ActorSystemHandle, tmp_path: Path) -> Iterator[ResourceServer]:
    from adk_actors.node import session_service

    cache = ContextCache.start(system=system, name=f"uires_cache_{uuid.uuid4().hex[:8]}")
    world = make_world(tmp_path, NodeCache(cache, system))
    world.seed()
    sessions = session_service(system=system)
    ref = SessionRef(app_name=APP, user_id=USER, session_id=SESSION)
    sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION, if_exists="return")
    effect = {"type": "compaction", "through_seq": 2, "folded_events": 2, "summary_bytes": 64, "compressor": "model"}
    for event in (
        Event.new(invocation_id="i1", author="user", content="Explain supervision"),
        Event.new(invocation_id="i1", author="agent", content="Supervisors restart children.", is_final=True),
        Event.new(invocation_id="c", author="system", actions=EventActions(context_effects=(effect,))),
    ):
        sessions.add_event(ref, event)
    try:
        with serve_resources(system, world) as served:
            yield served
    finally:
        sessions.delete_session(ref)
        cache.stop(system=system)


@pytest.fixture
def page(browser: Any, res: ResourceServer) -> Iterator[Console]:  # noqa: F811
    browser.get_log("browser")
    browser.get(f"{res.url}/dev")
    console = Console(browser, SimpleNamespace(token=TOKEN, agent=None))  # type: ignore[arg-type]
    console.wait(lambda: console.find("#token-input").is_displayed(), "the connect screen")
    yield console
    logged = browser.get_log("browser")
    browser.get("about:blank")
    bad = [e["message"] for e in logged if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


def scope(page: Console, prefix: str) -> None:
    page.type(f"#{prefix}-app", APP)
    page.type(f"#{prefix}-user", USER)
    page.type(f"#{prefix}-session", SESSION)


def test_resources_and_context_tabs_inspect_search_and_delete_with_confirmation(
    page: Console, res: ResourceServer
) -> None:
    page.login()
    page.wait(lambda: page.find("#app").is_displayed(), "the console after connecting")

    page.tab("resources")
    scope(page, "res")
    page.click("#res-load")
    page.wait_text("#mem-info", "2 entries", "the memory adapter's count")
    page.wait_text("#art-rows td", "reports/result.txt", "the artifact names")
    page.type("#mem-query", "OTP supervision")
    page.click("#mem-search-btn")
    page.wait_text("#mem-rows td", "OTP supervision restarts failed children", "the search hit")
    assert not any("another user" in t for t in page.texts("#mem-rows td"))
    page.wait_text("#art-rows td", "reports/result.txt", "the name row").click()
    page.wait(lambda: len(page.texts("#ver-rows tr")) == 2, "two versions")
    page.click("#art-delete")
    shown = page.wait_text("#art-confirm-json", '"selector": "latest"', "the confirmation object").text
    assert '"session_id": "artifact-session"' in shown
    page.driver.execute_script("arguments[0].scrollIntoView({block: 'end'})", page.find("#art-confirm"))
    page.screenshot("console-resources.png")
    page.click("#art-confirm-btn")
    page.wait_text("#art-ok", "Deleted 1 version", "the delete's result")
    versions = res.world.artifacts.list_versions(ArtifactScope.session(APP, USER, SESSION), "reports/result.txt")
    assert [v.version for v in versions] == [1]

    page.tab("context")
    scope(page, "ctx")
    page.click("#ctx-explain")
    page.wait_text("#ctx-rows td", "history selected", "the explanation")
    assert "Supervisors restart" not in " ".join(page.texts("#ctx-rows td"))
    page.click("#ctx-lifecycle")
    page.wait_text("#ctx-rows td", "folded events", "the compaction checkpoint")
    fingerprint = page.wait(lambda: page.find("#ctx-fingerprint").text, "the cache scope fingerprint")
    assert len(fingerprint) == 64
    page.click("#ctx-invalidate")
    page.wait_text("#ctx-confirm-json", fingerprint, "the invalidation confirmation")
    page.driver.execute_script("arguments[0].scrollIntoView({block: 'end'})", page.find("#ctx-confirm"))
    page.screenshot("console-context.png")
    page.click("#ctx-confirm-btn")
    page.wait_text("#ctx-ok", "Invalidated 0 cache entries", "the invalidation's result")
