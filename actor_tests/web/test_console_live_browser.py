"""The console's Live tab in a real headless Chromium, against ``dev_app`` on 127.0.0.1 acting as a developer Live
principal, over the shared node and Live sessions on the Gemini emulator.

Pinned: the tab lists the principal's sessions only (state, model, subscribers, resumes, counters), follows the
selected session's events from now on, sends text that the session answers (transcription and folded audio sizes in
the log, never audio bytes), links to the voice page, and shows the end of the session.

With ``ADK_SCREENSHOTS=1`` the test saves docs/images/console-live.png.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from actor_tests.live.conftest import StartLive, emu, start_live  # noqa: F401
from actor_tests.web.live_support import OWNER, LiveDev, serve_live
from actor_tests.web.test_console_browser import Console, browser  # noqa: F401
from adk_actors.emulator import Emulator
from adk_actors.live import close_live_session, live_status
from adk_actors.runtime.system import ActorSystemHandle


@pytest.fixture
def served(system: ActorSystemHandle, emu: Emulator) -> Iterator[LiveDev]:  # noqa: F811
    with serve_live(system, emu) as dev:
        yield dev


@pytest.fixture
def page(browser: Any, served: LiveDev) -> Iterator[Console]:  # noqa: F811
    browser.get_log("browser")
    browser.get(f"{served.url}/dev")
    console = Console(browser, served)  # type: ignore[arg-type]
    console.wait(lambda: console.find("#token-input").is_displayed(), "the connect screen")
    yield console
    logged = browser.get_log("browser")
    browser.get("about:blank")
    bad = [e["message"] for e in logged if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


def test_the_live_tab_follows_a_session_sends_text_and_shows_the_answer_without_audio_bytes(
    page: Console,
    served: LiveDev,
    start_live: StartLive,  # noqa: F811
) -> None:
    served.emu.set_script({"rules": [{"when": {}, "respond": {"text": "You said: {user_text}"}}]})
    session = start_live(principal=OWNER, session_id=f"support-call-{OWNER[-4:]}")
    other = start_live(principal="someone-else")
    page.wait(lambda: live_status(session, OWNER)["state"] == "active", "the session active")

    page.login()
    page.wait(lambda: page.find("#app").is_displayed(), "the console after connecting")
    page.tab("live")
    row = page.wait_text("#live-rows tr", session.session_id, "the session's row")
    assert other.session_id not in page.find("#panel-live").text
    cells = [c.text for c in row.find_elements("css selector", "td")]
    assert cells[:2] == [f"{session.session_id}\n{live_status(session, OWNER)['model']}", "active"]
    assert cells[2:] == ["0", "0", "0", "0 / 0"]  # subscribers, resumes, inputs, audio in / out

    page.wait(lambda: page.find("#live-detail").is_displayed(), "the session's detail")  # the only one: selected
    page.wait(lambda: page.find("#live-stream-state").text == "following", "the event stream subscribed")
    link = page.find("#live-voice-link").get_attribute("href")
    assert link.endswith(f"/dev/voice?session={session.session_id}")

    page.type("#live-text", "hello there")
    page.click("#live-send")
    said = page.wait_text("#live-log li.tl-output_transcription", "You said: hello there", "the spoken answer")
    assert said.text.startswith("#")
    audio = page.wait_text("#live-log li.tl-audio", "bytes", "the answer's audio, folded")
    assert re.search(r"\d+ chunks? · \d+ bytes", audio.text)
    page.wait_text("#live-log li.tl-turn_complete", "turn_complete", "the end of the turn")
    assert "Sent text as input #1: hello there" in page.find("#live-log").text
    log_text = page.find("#live-log").text
    assert not re.search(r"[A-Za-z0-9+/]{120,}", log_text), "audio bytes on the page"

    def cells_after_refresh() -> list[str]:
        page.click("#live-refresh")
        return page.texts(f'#live-rows tr[data-session="{session.session_id}"] td')

    page.wait(lambda: cells_after_refresh()[4] == "1", "one input counted")
    assert cells_after_refresh()[2] == "1"  # this page's subscription
    page.screenshot("console-live.png")

    close_live_session(session, OWNER)
    page.wait_text("#live-log li.tl-terminal", "terminal", "the session's end")
    page.wait(lambda: page.find("#live-stream-state").text == "ended", "the stream ended")
