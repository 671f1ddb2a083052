"""evaluation/report.py: the self-contained HTML report — escaping (hostile ids and responses), determinism, and the
page in a real headless Chromium showing its charts.

With ``ADK_SCREENSHOTS=1`` the browser test saves docs/images/eval-report.png (the screenshot of docs/EVALUATION.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from actor_tests.evaluation.e3_support import demo_result, result, roundtrip, scores, trace
from adk_actors.errors import ValidationError
from adk_actors.evaluation.report import render_html
from adk_actors.evaluation.results import compare

HOSTILE_ID = "<script>alert('id')</script>\"><img src=x onerror=alert(1)>"
HOSTILE_RESPONSE = "</div><script>document.title='pwned'</script><svg onload=alert(2)>"
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


class _Tags(HTMLParser):
    """Every start tag and its attributes, as the browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def hostile_result() -> dict[str, Any]:
    return result(
        {HOSTILE_ID: [(trace(HOSTILE_ID, tools=("x<b>y",), response=HOSTILE_RESPONSE), scores("failed", "failed"))]},
        case_ids=(HOSTILE_ID, "plain"),
    )


# ---- static checks ----------------------------------------------------------------------------------------------
def test_hostile_ids_tool_names_and_responses_are_escaped_never_markup() -> None:
    page = render_html(hostile_result())
    tags = tags_of(page)
    assert [t for t, _ in tags if t == "script"] == []
    assert not [(t, a) for t, a in tags if any(name.startswith("on") for name in a)]
    assert [t for t, _ in tags if t == "img"] == []
    assert "&lt;script&gt;alert(&#x27;id&#x27;)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;/div&gt;&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert "x&lt;b&gt;y" in page


def test_the_page_is_self_contained_and_forbids_scripts_and_remote_resources() -> None:
    page = render_html(demo_result())
    tags = tags_of(page)
    csp = next(a["content"] for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None and "default-src 'none'" in csp and "script-src" not in csp
    for tag, attrs in tags:
        for name in ("src", "href"):
            assert attrs.get(name) is None, (tag, attrs)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    charts = [a.get("data-chart") for t, a in tags if t == "svg"]
    assert charts == ["case-pass-rate", "score-histogram", "score-histogram", "score-histogram"]


def test_the_report_is_deterministic_and_validates_its_input() -> None:
    doc = demo_result()
    assert render_html(doc) == render_html(roundtrip(doc))
    with pytest.raises(ValidationError) as caught:
        render_html({"schema": "adk_actors.eval_result", "schema_version": 1})
    assert caught.value.reason == "invalid_result"


def test_a_comparison_report_draws_the_metric_deltas_and_lists_regressions_first() -> None:
    baseline, current = demo_result(), demo_result(worse=True)
    page = render_html(compare(baseline, current), result=current)
    tags = tags_of(page)
    charts = [a.get("data-chart") for t, a in tags if t == "svg"]
    assert charts[:2] == ["metric-deltas", "pass-rates"] and "case-pass-rate" in charts
    assert page.index('id="regressions"') < page.index('id="metric-deltas"') < page.index('id="pass-rate-per-case"')
    assert "REGRESSED" in page
    negative = [a for t, a in tags if t == "rect" and "negative" in (a.get("class") or "")]
    assert negative, "a regressed metric is drawn as a negative bar"


def test_a_failing_turn_shows_expected_against_actual_tool_names() -> None:
    page = render_html(result({"greeting": [(trace("greeting", tools=("lookup",)), scores("passed", "failed"))]}))
    row = page[page.index('<tr class="diff">') :]
    row = row[: row.index("</tr>")]
    assert '<span class="tool missing">get_weather</span>' in row
    assert '<span class="tool extra">lookup</span>' in row


# ---- in a browser -----------------------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"the browser test needs {CHROMIUM} and {CHROMEDRIVER}")
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium")
    from selenium.webdriver.chrome.service import Service

    profile = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-proxy-server",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_the_report_opens_in_chromium_and_shows_its_charts_and_no_injected_markup(browser: Any, tmp_path: Path) -> None:
    doc = demo_result()
    hostile = hostile_result()
    page = tmp_path / "report.html"
    page.write_text(render_html(doc), encoding="utf-8")
    browser.get(page.as_uri())
    found = browser.execute_script(
        "const q = (s) => document.querySelectorAll(s);"
        "return {title: document.title, status: document.getElementById('status').textContent,"
        " charts: Array.from(q('svg.chart')).map((s) => [s.dataset.chart, s.getBoundingClientRect().width > 100]),"
        " caseBars: q('svg[data-chart=case-pass-rate] rect.bar').length,"
        " histBars: q('svg[data-chart=score-histogram] rect.bar').length,"
        " diffs: q('tr.diff').length, scripts: q('script').length};"
    )
    assert found["title"] == "Evaluation travel-assistant: failed"
    assert found["status"] == "FAILED"
    assert found["charts"] == [["case-pass-rate", True]] + [["score-histogram", True]] * 3
    assert found["caseBars"] == 6 and found["histBars"] == 30
    assert found["diffs"] > 0 and found["scripts"] == 0
    if os.environ.get("ADK_SCREENSHOTS") == "1":
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
        )
        IMAGES.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(IMAGES / "eval-report.png"))

    page.write_text(render_html(hostile), encoding="utf-8")
    browser.get(page.as_uri())
    injected = browser.execute_script(
        "return {scripts: document.querySelectorAll('script').length, imgs: document.querySelectorAll('img').length,"
        " title: document.title, text: document.body.innerText};"
    )
    assert injected["scripts"] == 0 and injected["imgs"] == 0
    assert injected["title"].startswith("Evaluation demo") and "pwned" not in injected["title"]
    assert HOSTILE_ID in injected["text"]
    bad = [e["message"] for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert not bad, bad
