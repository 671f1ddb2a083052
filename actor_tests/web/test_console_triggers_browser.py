"""The console's Triggers tab in a real headless Chromium, against ``dev_app`` on 127.0.0.1 over the shared node
with a registered trigger whose events completed and one that was cancelled.

With ``ADK_SCREENSHOTS=1`` the test saves docs/images/console-triggers.png.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from actor_tests.triggers.t2_support import Register, echo_runner, emu, register  # noqa: F401
from actor_tests.web.dev_support import DevServer, serve_dev
from actor_tests.web.test_console_browser import Console, browser  # noqa: F401
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import await_event, cancel, status, submit

SCRIPT = {
    "rules": [
        {"when": {"user_text_contains": "slow"}, "respond": {"text": "late", "delay_ms": 30_000}},
        {"when": {}, "respond": {"text": "Done: {user_text}"}},
    ]
}


@pytest.fixture
def served(system: ActorSystemHandle, emu: Emulator) -> Iterator[DevServer]:  # noqa: F811
    with serve_dev(system, emu, "none") as dev:
        yield dev


@pytest.fixture
def page(browser: Any, served: DevServer) -> Iterator[Console]:  # noqa: F811
    browser.get_log("browser")
    browser.get(f"{served.url}/dev")
    console = Console(browser, served)
    console.wait(lambda: console.find("#token-input").is_displayed(), "the connect screen")
    yield console
    logged = browser.get_log("browser")
    browser.get("about:blank")
    bad = [e["message"] for e in logged if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


def test_the_triggers_tab_lists_queue_depth_counters_and_a_triggers_recent_outcomes(
    page: Console,
    register: Register,  # noqa: F811
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
) -> None:
    name = register(f"inbox-events-{uuid.uuid4().hex[:4]}", max_concurrency=2, max_queue=16)
    emu.set_script(SCRIPT)
    done = [
        submit(name, {"payload": f"message {i}", "idempotency_key": f"mail:{i}"}, system=system).ref for i in (1, 2)
    ]
    slow = submit(name, {"payload": "slow digest", "idempotency_key": "mail:slow"}, system=system).ref
    for ref in done:
        assert await_event(ref, 30, system=system).outcome == "completed"
    page.wait(lambda: status(slow, system=system)["state"] == "running", "the slow event running")
    assert cancel(slow, system=system)
    assert await_event(slow, 30, system=system).outcome == "cancelled"

    page.login()
    page.wait(lambda: page.find("#app").is_displayed(), "the console after connecting")
    page.tab("triggers")
    row = page.wait_text("#triggers-rows tr", name, "the trigger's row")
    row.click()
    cells = [c.text for c in row.find_elements("css selector", "td")]
    assert cells == [name, "0 / 16", "0 / 2", "3", "2", "0", "1"]  # queue, active, accepted .. cancelled
    page.wait(lambda: page.find("#trigger-detail").is_displayed(), "the recent outcomes")
    assert page.find("#trigger-detail-name").text == name
    assert page.find("#trigger-detail-meta").text == "memory mode · 0 duplicates · 0 rejected · 0 expired"
    recent = page.texts("#trigger-recent-rows tr")
    assert len(recent) == 3 and recent[0].startswith(slow) and "cancelled" in recent[0]
    assert sum("completed" in r for r in recent) == 2
    page.screenshot("console-triggers.png")
    assert "message 1" not in page.find("#panel-triggers").text  # no payload on the page
