"""The voice page (``/dev/voice``) in a real headless Chromium whose fake microphone plays speech generated at test
time (espeak-ng, resampled by sox to 16 kHz mono s16 with trailing silence, so the emulator's VAD ends each turn;
Chromium loops the file). The page captures it through its AudioWorklet, sends v1 audio frames over the voice
WebSocket of ``dev_app`` (served on 127.0.0.1), and plays the answer of a Live session on the Gemini emulator.

Pinned: speech goes up (the emulator hears audio turns), the scripted input and output transcriptions and the answer's
audio come back and are ACKed; a long real-time answer is barged in on by the looping speech, the page counts the
interruption and stops its scheduled playback; the page logs no script error or CSP violation.

With ``ADK_SCREENSHOTS=1`` the first test saves docs/images/voice-page.png.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.live.conftest import StartLive, emu, start_live  # noqa: F401
from actor_tests.web.live_support import OWNER, LiveDev, serve_live
from adk_actors.emulator import Emulator
from adk_actors.live import live_status
from adk_actors.runtime.system import ActorSystemHandle

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
_MISSING = [
    name
    for name, found in (
        (CHROMIUM, os.access(CHROMIUM, os.X_OK)),
        (CHROMEDRIVER, os.access(CHROMEDRIVER, os.X_OK)),
        ("espeak-ng", shutil.which("espeak-ng")),
        ("sox", shutil.which("sox")),
    )
    if not found
]
if _MISSING:
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"the voice browser tests need {', '.join(_MISSING)} (CI=true: not skipped)")
    pytest.skip(f"the voice browser tests need {', '.join(_MISSING)}", allow_module_level=True)

webdriver = pytest.importorskip("selenium.webdriver", reason="the browser tests need selenium")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.chrome.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT_S = 30.0
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
SCREENSHOTS = os.environ.get("ADK_SCREENSHOTS") == "1"
HEARD = "turn on the lights"
ANSWER = "Okay, the lights are on."
LONG_ANSWER = "Here is a long story about the lights. " * 12
"""About nine seconds of the emulator's voice: the looping speech barges in long before it ends."""


@pytest.fixture(scope="module")
def speech_wav(tmp_module_dir: Path) -> Path:
    """Speech saying :data:`HEARD`: espeak-ng, then sox to 16 kHz mono s16 with 1.5 s of trailing silence."""
    raw, out = tmp_module_dir / "speech-raw.wav", tmp_module_dir / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(raw), HEARD], check=True, capture_output=True, timeout=60)
    subprocess.run(
        ["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", str(out), "pad", "0.2", "1.5"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out


@pytest.fixture(scope="module")
def voice_browser(tmp_module_dir: Path, speech_wav: Path) -> Iterator[WebDriver]:
    """One headless Chromium for the module whose microphone plays :func:`speech_wav` in a loop."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-proxy-server",
        "--window-size=1280,860",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={speech_wav}",
        "--autoplay-policy=no-user-gesture-required",
        f"--user-data-dir={tmp_module_dir / 'chromium-voice'}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 860, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_module_dir / "chromium-voice", ignore_errors=True)


class VoicePage:
    """The voice page in the browser, with waits on page conditions (never on time)."""

    def __init__(self, driver: WebDriver, dev: LiveDev) -> None:
        self.driver = driver
        self.dev = dev

    def find(self, css: str) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        return str(self.driver.execute_script("return document.querySelector(arguments[0]).innerText.trim();", css))

    def count(self, name: str) -> int:
        return int(self.text(f"#{name}"))

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        def check(_: Any) -> Any:
            return condition()

        try:
            return WebDriverWait(self.driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(
                check, message=what
            )
        except Exception:
            print("page state:", self.text("main"))  # shown by pytest when the test fails
            raise

    def start(self) -> None:
        box = self.find("#voice-token")
        box.send_keys(self.dev.token)
        self.find("#voice-start").click()
        self.wait(lambda: self.text("#voice-state") == "connected", "the voice socket connected")

    def screenshot(self, name: str) -> None:
        if SCREENSHOTS:
            IMAGES.mkdir(parents=True, exist_ok=True)
            assert self.driver.save_screenshot(str(IMAGES / name)), name


@pytest.fixture
def served(system: ActorSystemHandle, emu: Emulator) -> Iterator[LiveDev]:  # noqa: F811
    with serve_live(system, emu) as dev:
        yield dev


@pytest.fixture
def voice(voice_browser: WebDriver, served: LiveDev) -> Iterator[Callable[[str], VoicePage]]:
    """``voice(session_id)``: the voice page for that session, loaded; afterwards the page must have logged no script
    error and no CSP violation, and it is left (its socket closes) before the server stops."""
    voice_browser.get_log("browser")
    pages: list[VoicePage] = []

    def open_page(session_id: str) -> VoicePage:
        voice_browser.get(f"{served.url}/dev/voice?session={session_id}")
        page = VoicePage(voice_browser, served)
        page.wait(lambda: page.find("#voice-token").is_displayed(), "the voice page")
        assert page.find("#voice-session").get_attribute("value") == session_id
        pages.append(page)
        return page

    yield open_page
    logged = voice_browser.get_log("browser")
    voice_browser.get("about:blank")
    bad = [e["message"] for e in logged if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


def _session(start_live: StartLive) -> Any:  # noqa: F811
    session = start_live(principal=OWNER, input_audio_transcription=True)
    deadline_state = live_status(session, OWNER)["state"]
    assert deadline_state in ("connecting", "active")
    return session


def test_speech_goes_up_and_the_transcriptions_and_the_spoken_answer_come_back(
    voice: Callable[[str], VoicePage],
    served: LiveDev,
    emu: Emulator,  # noqa: F811
    start_live: StartLive,  # noqa: F811
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": ANSWER, "input_transcription": HEARD}}]})
    session = _session(start_live)
    page = voice(session.session_id)
    page.wait(lambda: live_status(session, OWNER)["state"] == "active", "the session active")
    page.start()

    page.wait(lambda: HEARD in page.text("#input-transcript"), "the input transcription")
    page.wait(lambda: ANSWER in page.text("#output-transcript"), "the output transcription")
    page.wait(lambda: page.count("turns") >= 1, "a completed turn")
    assert page.count("frames-sent") > 25  # at least half a second of 20 ms frames went up
    assert page.count("audio-received") >= 1
    page.wait(lambda: page.count("acks-sent") >= page.count("audio-received"), "every audio frame ACKed")
    assert page.text("#capture-rate").endswith("Hz")
    heard_audio = [e for e in emu.live_log if e["direction"] == "in" and e["kind"] == "realtimeInput.audio"]
    assert heard_audio and sum(e["audio_bytes"] for e in heard_audio) > 16_000  # > 0.5 s of 16 kHz s16
    assert any(e["kind"] == "serverContent.inputTranscription" for e in emu.live_log)
    assert page.text("#voice-error") == ""
    page.screenshot("voice-page.png")

    page.find("#voice-stop").click()
    page.wait(lambda: page.text("#voice-state") == "stopped", "the page stopped")
    page.wait(lambda: live_status(session, OWNER)["subscribers"] == [], "the bridge stopped and unsubscribed")
    assert live_status(session, OWNER)["state"] == "active"  # the session goes on


def test_speech_during_a_long_answer_interrupts_it_and_cancels_the_scheduled_playback(
    voice: Callable[[str], VoicePage],
    emu: Emulator,  # noqa: F811
    start_live: StartLive,  # noqa: F811
) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"text": LONG_ANSWER, "input_transcription": HEARD, "pace": 1}}]})
    session = _session(start_live)
    page = voice(session.session_id)
    page.wait(lambda: live_status(session, OWNER)["state"] == "active", "the session active")
    page.start()

    page.wait(lambda: page.count("audio-received") >= 3, "the long answer playing")
    # The looping speech barges in on every answer; wait for an interruption that found playback scheduled.
    page.wait(lambda: page.count("cancelled-sources") >= 1, "an interruption stopping scheduled playback", 60.0)
    assert page.count("interruptions") >= 1
    assert re.search(r"interrupted: [1-9][0-9]* scheduled sources stopped", page.text("#voice-log"))
    assert any(e["kind"] == "serverContent.interrupted" for e in emu.live_log)
    said = page.text("#output-transcript")
    assert said and LONG_ANSWER.strip() not in said  # the answer was cut short
