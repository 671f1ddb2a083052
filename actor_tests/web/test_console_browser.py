"""The developer console at ``/dev`` in a real headless Chromium, against a real node, the Gemini emulator and the
``/dev/v1`` API served by uvicorn on 127.0.0.1.

The served app bounds every SSE connection to :data:`LIMITS` (two events), so each run the console follows ends
its connections with ``event: bound`` several times: a console that did not reconnect with ``Last-Event-ID`` would
never see an outcome. Every test also checks that the page logged no script error and no CSP violation.

With ``ADK_SCREENSHOTS=1`` the tests save the screenshots of docs/DEV_CONSOLE.md (1280x860) under docs/images/.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.web.dev_support import DevServer, script_emulator, serve_dev
from adk_actors import FunctionTool, Runner, long_running, runs, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web import EdgeLimits

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(f"the browser tests need {CHROMIUM} and {CHROMEDRIVER}", allow_module_level=True)

webdriver = pytest.importorskip("selenium.webdriver", reason="the browser tests need selenium")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.chrome.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

LIMITS = EdgeLimits(sse_max_events=2)
"""Tiny stream bound: every followed run needs reconnects."""
WAIT_S = 20.0
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
EXPORT_ID = "export-42"


SCREENSHOTS = os.environ.get("ADK_SCREENSHOTS") == "1"


# ---- fixtures ------------------------------------------------------------------------------------------------


def export_tool() -> FunctionTool:
    """``start_export(name)``: suspends as the long-running operation :data:`EXPORT_ID` (a closure, so it travels
    to the worker by value)."""
    operation = EXPORT_ID

    def start_export(name: str) -> dict:
        """Start an export that finishes outside the agent."""
        return long_running(operation, "The export runs in the warehouse.")

    return FunctionTool(start_export)


@pytest.fixture(scope="module")
def export_agent(system: ActorSystemHandle) -> Iterator[str]:
    """An agent whose ``start_export`` tool suspends as long-running work, on an emulator of its own."""
    with Emulator() as emu:
        emu.set_script(
            {
                "rules": [
                    {
                        "when": {"user_text_contains": "export", "has_function_response": False},
                        "respond": {"function_calls": [{"name": "start_export", "args": {"name": "q3"}}]},
                    },
                    {"when": {"has_function_response": True}, "respond": {"text": "Export done: {response_text}."}},
                    {"when": {}, "respond": {"text": "You said: {user_text}"}},
                ]
            }
        )
        name = f"Exporter_{uuid.uuid4().hex[:8]}"
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        spawn_agent(name, config, [export_tool()], system=system)
        yield name
        stop_agent(name, system=system)


FLOW_REF = "flow_" + "c0ffee" * 5 + "00"
FLOW_STATE = "state-" + uuid.uuid4().hex
"""The one-time state of the console test's sign-in: only the test (the 'application') knows it."""


def calendar_tool(calls: Path) -> FunctionTool:
    """``read_calendar(day)``: the first call asks for a sign-in (a credential request made by hand: the page
    only shows the pause; the flow itself is tested in actor_tests/auth), later calls answer."""
    ref, state = FLOW_REF, FLOW_STATE

    def read_calendar(day: str) -> dict:
        """Read the user's calendar for a day."""
        from adk_actors.auth.flow import CredentialRequest
        from adk_actors.secrets import Secret
        from adk_actors.tools import request_credential

        if not calls.exists():
            calls.write_text("asked")
            uri = Secret("https://idp.example/authorize?state=" + state)
            request = CredentialRequest(
                flow_ref=ref,
                provider="calendar",
                scopes=("calendar.read",),
                expires_at=4102444800.0,
                authorization_uri=uri,
                correlation_id=Secret(state),
            )
            return request_credential(request)
        return {"day": day, "events": 3}

    return FunctionTool(read_calendar)


@pytest.fixture(scope="module")
def calendar_agent(system: ActorSystemHandle, tmp_module_dir: Path) -> Iterator[str]:
    """An agent whose ``read_calendar`` tool first pauses for a credential, on an emulator of its own."""
    with Emulator() as emu:
        emu.set_script(
            {
                "rules": [
                    {
                        "when": {"user_text_contains": "calendar", "has_function_response": False},
                        "respond": {"function_calls": [{"name": "read_calendar", "args": {"day": "monday"}}]},
                    },
                    {"when": {"has_function_response": True}, "respond": {"text": "Calendar: {response_text}."}},
                    {"when": {}, "respond": {"text": "You said: {user_text}"}},
                ]
            }
        )
        name = f"Calendar_{uuid.uuid4().hex[:8]}"
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        spawn_agent(name, config, [calendar_tool(tmp_module_dir / "calendar-calls")], system=system)
        yield name
        stop_agent(name, system=system)


@pytest.fixture
def server(system: ActorSystemHandle, dev_emu: Emulator, dev_agent: str) -> Iterator[DevServer]:
    """``dev_app`` over the shared node (the dev agent of dev_support), with the tiny stream bound."""
    script_emulator(dev_emu)
    with serve_dev(system, dev_emu, dev_agent, limits=LIMITS) as served:
        yield served


@pytest.fixture(scope="module")
def browser(tmp_module_dir: Path) -> Iterator[WebDriver]:
    """One headless Chromium for the module, with a 1280x860 viewport and its console log captured."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-proxy-server",
        "--window-size=1280,860",
        f"--user-data-dir={tmp_module_dir / 'chromium'}",
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
        shutil.rmtree(tmp_module_dir / "chromium", ignore_errors=True)


class Console:
    """The console page in the browser, with helpers that wait on real page conditions (never on time)."""

    def __init__(self, driver: WebDriver, server: DevServer) -> None:
        self.driver = driver
        self.server = server

    def find(self, css: str) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def texts(self, css: str) -> list[str]:
        """The rendered text of every element matching ``css`` (one script call, whatever their number)."""
        found = self.driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0])).map((e) => e.innerText.trim());", css
        )
        return [str(text) for text in found]

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        return WebDriverWait(self.driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda _: condition(), message=what
        )

    def wait_text(self, css: str, needle: str, what: str) -> Any:
        """The first element matching ``css`` whose visible text contains ``needle``."""

        def found() -> Any:
            # One script call, not one WebDriver round trip per element: after a long test session the metrics
            # table has thousands of rows.
            return self.driver.execute_script(
                "return Array.from(document.querySelectorAll(arguments[0]))"
                ".find((e) => e.offsetParent !== null && e.textContent.includes(arguments[1])) || null;",
                css,
                needle,
            )

        return self.wait(found, what)

    def type(self, css: str, text: str) -> None:
        box = self.find(css)
        box.clear()
        box.send_keys(text)

    def click(self, css: str) -> None:
        self.find(css).click()

    def login(self, token: str | None = None) -> None:
        self.type("#token-input", token or self.server.token)
        self.click("#connect-btn")

    def open(self, agent: str | None = None) -> None:
        """Connect with the right token and pick ``agent`` (default the dev agent)."""
        self.login()
        self.wait(lambda: self.find("#app").is_displayed(), "the console after connecting")
        wanted = agent or self.server.agent
        self.wait(lambda: wanted in self.texts("#agent-select option"), f"{wanted} in the agent picker")
        Select(self.find("#agent-select")).select_by_value(wanted)

    def say(self, text: str) -> None:
        self.wait(lambda: self.find("#send-btn").is_enabled(), "the send button")
        self.type("#chat-input", text)
        self.click("#send-btn")

    def run_state(self) -> str:
        return str(self.find("#run-state").text)

    def wait_state(self, state: str) -> None:
        self.wait(lambda: self.run_state() == state, f"run state {state!r} (now {self.run_state()!r})")

    def tab(self, name: str) -> None:
        self.click(f"#tab-{name}")

    def timeline_seqs(self) -> list[str]:
        return [e.get_attribute("data-seq") for e in self.all("#timeline li[data-seq]")]

    def screenshot(self, name: str) -> None:
        if SCREENSHOTS:
            IMAGES.mkdir(parents=True, exist_ok=True)
            assert self.driver.save_screenshot(str(IMAGES / name)), name


@pytest.fixture
def console(browser: WebDriver, server: DevServer) -> Iterator[Console]:
    """The console page freshly loaded from this test's server; afterwards the page must have logged no script
    error and no CSP violation (the page is left, so no connection outlives the server)."""
    browser.get_log("browser")  # drop what earlier tests left
    browser.get(f"{server.url}/dev")
    page = Console(browser, server)
    page.wait(lambda: page.find("#token-input").is_displayed(), "the connect screen")
    yield page
    logged = browser.get_log("browser")
    browser.get("about:blank")
    bad = [
        e["message"]
        for e in logged
        if "Content Security Policy" in e["message"] or "Uncaught" in e["message"] or "TypeError" in e["message"]
    ]
    assert not bad, bad


# ---- tests ---------------------------------------------------------------------------------------------------


def test_a_wrong_token_is_refused_on_the_connect_screen_and_the_right_one_lists_the_agents(
    console: Console, export_agent: str
) -> None:
    console.login("wrong-" + uuid.uuid4().hex)
    error = console.wait_text("#connect-error", "unauthorized", "the refusal on the connect screen")
    assert "refused" in error.text
    assert not console.find("#app").is_displayed()

    console.open()
    names = console.texts("#agent-select option")
    assert console.server.agent in names and export_agent in names
    assert not console.find("#connect-error").is_displayed()
    assert console.find("#conn-state").text == "connected"
    tools = console.texts("#agent-tools .chip")
    assert {"get_weather", "book_trip"} <= set(tools)


def test_a_chat_turn_shows_the_answer_and_the_tool_call_and_response_in_the_timeline(console: Console) -> None:
    console.open()
    console.say("What is the weather like?")
    console.wait_text("#chat-log .msg-agent", "The weather in Tokyo is sunny.", "the answer in the chat")
    console.wait_state("completed")

    call = console.wait_text("#timeline li.tl-function_call", "get_weather", "the function call in the timeline")
    assert '"city": "Tokyo"' in call.text
    response = console.find("#timeline li.tl-function_response")
    assert "get_weather returned" in response.text and '"forecast": "sunny"' in response.text
    assert "The weather in Tokyo is sunny." in console.find("#timeline li.tl-final").text
    # the user event, the call, the response, the streamed answer's partial event(s) and the final event, over
    # bounded connections: each seen exactly once, in order
    seqs = console.timeline_seqs()
    assert seqs == [str(i) for i in range(1, len(seqs) + 1)] and len(seqs) >= 5
    assert console.texts("#chat-log .msg-user .msg-text") == ["What is the weather like?"]
    assert console.texts("#chat-log .msg-agent .msg-text") == ["The weather in Tokyo is sunny."]
    assert console.find("#session-id").text != "new on first message"
    console.screenshot("console-chat.png")


def test_server_text_is_rendered_as_text_never_as_html(console: Console) -> None:
    console.open()
    hostile = '<img src=x id="xss-probe" onerror="document.title=\'owned\'"><b>bold</b>'
    console.say(hostile)
    console.wait_text("#chat-log .msg-agent", "You said: <img", "the echoed answer")
    console.wait_state("completed")
    assert console.all("#xss-probe") == [] and console.all("#chat-log b, #timeline b") == []
    assert console.driver.title != "owned"
    assert console.texts("#chat-log .msg-agent .msg-text") == [f"You said: {hostile}"]


def test_a_gated_tool_pauses_for_approval_and_approve_completes_the_run(console: Console) -> None:
    console.open()
    console.say("Please book a trip")
    console.wait(lambda: console.find("#approve-btn").is_displayed(), "the Approve button")
    console.wait_state("paused")
    assert "book_trip needs your approval" in console.find("#pause-title").text
    assert console.find("#reject-btn").is_displayed()
    assert console.all("#timeline li.tl-pause")
    console.screenshot("console-approval.png")

    console.click("#approve-btn")
    console.wait_text("#chat-log .msg-agent", "Booked.", "the answer after the approval")
    console.wait_state("completed")
    assert not console.find("#pause-box").is_displayed()
    assert '"booked": "Paris"' in console.wait_text("#timeline li.tl-function_response", "book_trip", "the result").text


def test_a_rejected_call_never_runs_and_the_run_still_completes(console: Console) -> None:
    console.open()
    console.say("book it")
    console.wait(lambda: console.find("#reject-btn").is_displayed(), "the Reject button")
    console.click("#reject-btn")
    console.wait_state("completed")
    response = console.wait_text("#timeline li.tl-function_response", "book_trip", "the rejection in the timeline")
    assert "tool_confirmation_rejected" in response.text and "booked" not in response.text


def test_a_long_running_pause_takes_a_json_answer_and_bad_json_is_refused_in_the_page(
    console: Console, export_agent: str
) -> None:
    console.open(export_agent)
    console.say("run the export")
    answer = console.wait(lambda: console.find("#long-running-input"), "the JSON answer box")
    console.wait(lambda: answer.is_displayed(), "the JSON answer box shown")
    assert EXPORT_ID in answer.get_attribute("value")

    console.type("#long-running-input", "{not json")
    console.click("#long-running-btn")
    console.wait_text("#pause-error", "Not valid JSON", "the local JSON error")
    assert console.run_state() == "paused"

    console.type("#long-running-input", f'{{"operation_id": "{EXPORT_ID}", "status": "completed", "rows": 12}}')
    console.click("#long-running-btn")
    console.wait_text("#chat-log .msg-agent", "Export done:", "the answer after the long-running result")
    console.wait_state("completed")
    assert "rows: 12" in console.texts("#chat-log .msg-agent .msg-text")[-1]


def test_a_credential_pause_shows_the_provider_and_flow_never_the_state_and_resumes_with_the_flows_answer(
    console: Console, calendar_agent: str
) -> None:
    console.open(calendar_agent)
    console.say("what is on my calendar monday?")
    console.wait_text("#pause-title", "needs a sign-in with calendar", "the credential pause")
    detail = console.find("#pause-detail").text
    assert FLOW_REF in detail and "calendar.read" in detail
    answer = console.wait(lambda: console.find("#long-running-input"), "the answer box")
    assert FLOW_REF in answer.get_attribute("value")
    assert FLOW_STATE not in console.driver.page_source
    console.screenshot("console-credential.png")

    console.type("#long-running-input", f'{{"flow_ref": "{FLOW_REF}", "correlation_id": "not-the-state"}}')
    console.click("#long-running-btn")
    console.wait_text("#pause-error", "invalid_resume_response", "the refused answer")
    assert console.run_state() == "paused"

    console.type("#long-running-input", f'{{"flow_ref": "{FLOW_REF}", "correlation_id": "{FLOW_STATE}"}}')
    console.click("#long-running-btn")
    console.wait_text("#chat-log .msg-agent", "Calendar:", "the answer after the sign-in")
    console.wait_state("completed")
    assert "events: 3" in console.texts("#chat-log .msg-agent .msg-text")[-1]


@pytest.fixture
def a2a_server(system: ActorSystemHandle, dev_emu: Emulator, dev_agent: str) -> Iterator[DevServer]:
    """The dev app composed with an A2A server for the dev agent (as ``adk serve --a2a`` runs them)."""
    from adk_actors.node import session_service
    from adk_actors.web.a2a_server import A2A_PATH, a2a_app, agent_card

    script_emulator(dev_emu)
    app = a2a_app(system, runner=Runner(dev_agent, "a2a", session_service(system=system), system=system), card=None)
    with serve_dev(system, dev_emu, dev_agent, limits=LIMITS, a2a=app) as served:
        app.set_card(agent_card(name=dev_agent, description="the dev agent", url=served.url + A2A_PATH))
        yield served


def test_the_a2a_panel_shows_the_card_and_the_tasks_of_the_served_agent(
    browser: WebDriver, a2a_server: DevServer
) -> None:
    from adk_actors import a2a

    task = a2a.send(a2a_server.url, "hello over A2A", allow_http_loopback=True)["task"]
    browser.get(f"{a2a_server.url}/dev")
    page = Console(browser, a2a_server)
    page.wait(lambda: page.find("#token-input").is_displayed(), "the connect screen")
    page.open()
    page.click("#tab-a2a")
    row = page.wait_text("#a2a-rows tr", task["id"][:8], "the task's row")
    assert row.get_attribute("data-task-id") == task["id"] and "completed" in row.text
    assert "A2A 1.0 at " + a2a_server.url + "/a2a/v1" in page.find("#a2a-card").text
    assert "1 tasks (0 active)" in page.find("#a2a-counts").text
    page.screenshot("console-a2a.png")
    browser.get("about:blank")


def test_a_slow_run_is_cancelled_from_the_console(console: Console) -> None:
    console.open()
    console.say("a slow question")
    console.wait(lambda: console.find("#cancel-btn").is_enabled(), "the Cancel button enabled")
    console.wait(lambda: "1" in console.timeline_seqs(), "the run's first event")
    run_id = console.find("#run-id").text
    console.click("#cancel-btn")
    console.wait_text("#chat-log .msg-note", "Run cancelled", "the cancellation in the chat")
    console.wait_state("cancelled")
    assert not console.find("#cancel-btn").is_enabled() and console.find("#send-btn").is_enabled()
    assert console.server.client.get(f"/dev/v1/runs/{run_id}").json()["state"] == "cancelled"


def test_reconnect_by_run_id_follows_a_run_started_elsewhere_and_builds_its_streamed_answer(
    console: Console, server: DevServer
) -> None:
    # A run with partial (streamed) events, started on the node directly: the dev API's runs do not stream.
    session = server.ops.sessions.create_session(app_name="dev", user_id="dev-user")
    runner = Runner(server.agent, "dev", server.ops.sessions, system=server.system, streaming_mode="text")
    run_id = runs.start(runner.run_body("dev-user", session.id, "tell me a story"), system=server.system)

    console.open()
    console.type("#reconnect-input", "no-such-run")
    console.click("#reconnect-btn")
    console.wait_text("#run-error", "not_found", "the refusal of an unknown run")

    console.type("#reconnect-input", run_id)
    console.click("#reconnect-btn")
    console.wait_state("completed")
    assert console.all("#timeline li.tl-partial"), "the streamed pieces are in the timeline"
    assert console.texts("#chat-log .msg-agent .msg-text") == ["You said: tell me a story"]
    assert console.texts("#chat-log .msg-user .msg-text") == ["tell me a story"]
    seen = console.timeline_seqs()
    assert seen == [str(n) for n in range(1, len(seen) + 1)]

    # the same id again: only what comes after the last event seen (here just the outcome)
    console.click("#reconnect-btn")
    console.wait_text("#timeline li.tl-note", f"Reconnecting after event {len(seen)}", "the reconnect note")
    console.wait(lambda: len(console.all("#timeline li.tl-outcome")) == 2, "the second outcome")
    assert console.timeline_seqs() == seen
    assert console.texts("#chat-log .msg-agent .msg-text") == ["You said: tell me a story"]


def test_the_session_panel_shows_and_edits_state_and_shows_a_refusal(console: Console, server: DevServer) -> None:
    console.open()
    console.say("hello session")
    console.wait_state("completed")
    session_id = console.find("#session-id").text
    console.tab("session")
    console.wait(lambda: console.find("#session-panel-id").text == session_id, "the session in the panel")
    console.wait_text("#session-meta", "events", "the session's metadata")

    console.type("#state-key", "color")
    console.type("#state-value", '"blue"')
    console.click("#state-save")
    console.wait_text("#state-rows tr", "color", "the new key in the state table")
    assert server.state(session_id)["color"] == "blue"

    console.type("#state-key", "api_key")
    console.type("#state-value", '"sk-123"')
    console.click("#state-save")
    console.wait_text("#state-error", "secret_key_refused", "the refusal reason")
    assert "api_key" not in server.state(session_id)

    console.type("#state-key", "size")
    console.type("#state-value", "large")
    console.click("#state-save")
    console.wait_text("#state-error", "not valid JSON", "the local JSON error")
    assert "size" not in server.state(session_id)

    console.type("#state-key", "user:lang")
    console.type("#state-value", '{"code": "fr", "rtl": false}')
    console.click("#state-save")
    console.wait_text("#state-rows tr", "user:lang", "the second key")
    assert console.wait_text("#session-list li.current", session_id, "the session in the list")
    console.screenshot("console-session.png")


def test_the_metrics_panel_lists_the_node_instruments_and_refreshes(console: Console) -> None:
    console.open()
    console.say("count me")
    console.wait_state("completed")
    console.tab("metrics")
    console.wait(
        lambda: "instruments" in console.find("#metrics-updated").text or console.find("#metrics-error").text,
        "the metrics snapshot (or its error)",
    )
    assert console.find("#metrics-error").text == ""
    console.wait_text("#metrics-rows tr", "adk.runs", "the runs counter")
    before = console.find("#metrics-updated").text
    assert "instruments" in before
    console.say("count me again")
    console.wait_state("completed")
    rows_before = console.texts("#metrics-rows tr")
    console.click("#metrics-refresh")
    console.wait(lambda: console.texts("#metrics-rows tr") != rows_before, "the refreshed metrics")
    assert any("outcome=completed" in row for row in console.texts("#metrics-rows tr"))
    console.screenshot("console-metrics.png")


def test_the_token_stays_out_of_the_url_storage_cookies_and_page_text(console: Console) -> None:
    console.open()
    console.say("keep my secret")
    console.wait_state("completed")
    token = console.server.token
    driver = console.driver
    exposed = driver.execute_script(
        "return [location.href, document.cookie, JSON.stringify(Object.entries(localStorage)),"
        " JSON.stringify(Object.entries(sessionStorage)), document.documentElement.outerHTML,"
        " document.body.innerText, document.title, document.getElementById('token-input').value,"
        " JSON.stringify(performance.getEntries().map((e) => e.name))]"
    )
    assert all(token not in str(item) for item in exposed)
    assert driver.get_cookies() == []

    driver.refresh()
    console.wait(lambda: console.find("#token-input").is_displayed(), "the connect screen after a reload")
    assert not console.find("#app").is_displayed()


def test_the_mcp_panel_lists_a_stdio_connection_and_shows_its_tools_when_selected(
    console: Console, server: DevServer
) -> None:
    import sys

    from actor_tests.web.mcp_peer import SERVER_NAME, SERVER_VERSION
    from adk_actors import mcp

    peer = str(Path(__file__).with_name("mcp_peer.py"))
    client = mcp.connect("stdio", sys.executable, args=[peer, "stdio"], name="local-peer", system=server.system)
    try:
        client.list_tools()
        row_css = f'#mcp-rows tr[data-connection-id="{client.ref.local_id}"]'
        console.open()
        console.tab("mcp")
        console.wait(lambda: console.all(row_css), "the connection's row")
        cells = [c.text for c in console.all(f"{row_css} td")]
        assert cells == [
            "local-peer",
            "stdio",
            f"{SERVER_NAME} {SERVER_VERSION}",
            client.protocol_version,
            "open",
            "3",
            "1",
        ]
        assert not console.find("#mcp-detail").is_displayed()

        console.click(row_css)
        console.wait(lambda: console.find("#mcp-detail").is_displayed(), "the selected connection's tools")
        assert console.texts("#mcp-tools .mcp-tool") == ["add", "fail", "summarize"]
        assert console.find("#mcp-detail-name").text == "local-peer"
        assert "selected" in console.find(row_css).get_attribute("class")
        assert console.find("#mcp-error").text == ""
        console.screenshot("console-mcp.png")
    finally:
        client.close()
