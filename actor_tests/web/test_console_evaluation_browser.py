"""The console's Evaluation tab in a real headless Chromium, against ``dev_app`` on 127.0.0.1: upload a saved result,
render it, download its HTML report, compare it to a baseline; hostile case ids stay text.

With ``ADK_SCREENSHOTS=1`` the test saves docs/images/console-evaluation.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.evaluation.e3_support import demo_result, result, scores, trace
from actor_tests.web.dev_support import DevServer
from actor_tests.web.test_console_browser import Console, browser  # noqa: F401

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"


@pytest.fixture
def page(browser: Any, dev_server: DevServer) -> Iterator[Console]:  # noqa: F811
    """The console, connected, on its Evaluation tab; afterwards no script error and no CSP violation."""
    browser.get_log("browser")
    browser.get(f"{dev_server.url}/dev")
    console = Console(browser, dev_server)
    console.wait(lambda: console.find("#token-input").is_displayed(), "the connect screen")
    console.open()
    console.tab("evaluation")
    console.wait(lambda: console.find("#eval-input").is_displayed(), "the evaluation panel")
    yield console
    logged = browser.get_log("browser")
    browser.get("about:blank")
    bad = [e["message"] for e in logged if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


def upload(page: Console, selector: str, path: Path, target: str) -> None:
    page.find(selector).send_keys(str(path))
    page.wait(lambda: page.driver.execute_script(f"return document.getElementById('{target}').value.length") > 0,
              f"{path.name} loaded into #{target}")  # fmt: skip


def test_a_result_is_uploaded_rendered_compared_and_downloaded_as_html(page: Console, tmp_path: Path) -> None:
    current, baseline = tmp_path / "current.json", tmp_path / "baseline.json"
    current.write_text(json.dumps(demo_result(worse=True)), encoding="utf-8")
    baseline.write_text(json.dumps(demo_result()), encoding="utf-8")

    upload(page, "#eval-file", current, "eval-input")
    page.click("#eval-render")
    page.wait_text("#eval-headline", "travel-assistant", "the rendered summary")
    assert page.find("#eval-status").text == "failed"
    rows = page.texts("#eval-rows tr")
    assert len(rows) == 6 and rows[0].startswith("weather-paris")
    assert page.find("#eval-markdown").text.startswith("# Evaluation travel-assistant: FAILED")
    page.screenshot("console-evaluation.png")

    page.click("#eval-html")
    ok = page.wait_text("#eval-ok", "HTML report ready", "the downloaded report")
    assert "eval-report.html" in ok.text

    page.click("#eval-compare-box summary")
    upload(page, "#eval-baseline-file", baseline, "eval-baseline")
    page.click("#eval-compare")
    page.wait_text("#eval-headline", "comparison", "the comparison summary")
    assert page.find("#eval-status").text == "regressed"
    assert page.find("#eval-markdown").text.startswith("# Evaluation comparison: REGRESSED")
    assert any(r.startswith("cases regressed") for r in page.texts("#eval-rows tr"))


def test_hostile_ids_are_text_and_bad_documents_are_refused_in_the_panel(page: Console) -> None:
    doc = result({HOSTILE: [(trace(HOSTILE), scores("failed"))]}, case_ids=(HOSTILE,))
    page.driver.execute_script("document.getElementById('eval-input').value = arguments[0];", json.dumps(doc))
    page.click("#eval-render")
    page.wait_text("#eval-rows td", HOSTILE, "the hostile id as text")
    assert page.driver.execute_script("return document.querySelectorAll('#panel-evaluation img').length") == 0
    assert page.driver.title != "pwned"

    page.driver.execute_script("document.getElementById('eval-input').value = arguments[0];", "{not json")
    page.click("#eval-render")
    page.wait_text("#eval-error", "invalid_json", "the page's own refusal")
    broken = {**doc, "pass_rate": 3}
    page.driver.execute_script("document.getElementById('eval-input').value = arguments[0];", json.dumps(broken))
    page.click("#eval-render")
    page.wait_text("#eval-error", "invalid_result", "the node's refusal")
