"""``POST /dev/v1/evaluation/render`` and ``POST /dev/v1/evaluation/compare`` over real uvicorn on 127.0.0.1: the
documents are validated first, the HTML report is an inert download, the token rules of every ``/dev/v1`` route
apply and the request size is bounded by the edge."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import httpx
import pytest

from actor_tests.evaluation.e3_support import result, roundtrip, scores, trace
from actor_tests.web.dev_support import TOKEN, DevServer
from adk_actors.devapi.evaluation import MAX_SUMMARY_CASES
from adk_actors.evaluation.results import compare

RENDER = "/dev/v1/evaluation/render"
COMPARE = "/dev/v1/evaluation/compare"
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert "Traceback" not in response.text
    return dict(body["error"])


def failing() -> dict[str, Any]:
    return roundtrip(result({"weather": [(trace("weather", tools=()), scores("passed", "failed"))]}))


def test_render_answers_the_summary_and_markdown_of_a_result(dev_server: DevServer) -> None:
    answer = dev_server.client.post(RENDER, json=failing())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kind"] == "result"
    assert body["markdown"].startswith("# Evaluation demo: FAILED\n")
    assert body["summary"] == {
        "eval_set": "demo",
        "status": "failed",
        "passed": False,
        "pass_rate": round(2 / 3, 6),
        "counts": {"cases": 3, "passed": 2, "failed": 1, "error": 0, "not_evaluated": 0},
        "cases": [
            {"case_id": "weather", "status": "failed", "pass_rate": 0.0},
            {"case_id": "greeting", "status": "passed", "pass_rate": 1.0},
            {"case_id": "booking", "status": "passed", "pass_rate": 1.0},
        ],
        "cases_total": 3,
    }
    assert MAX_SUMMARY_CASES == 500


def test_render_html_is_an_inert_download_with_hostile_ids_escaped(dev_server: DevServer) -> None:
    doc = roundtrip(result({HOSTILE: [(trace(HOSTILE), scores("failed"))]}, case_ids=(HOSTILE,)))
    answer = dev_server.client.post(f"{RENDER}?format=html", json=doc)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert answer.headers["content-disposition"] == 'attachment; filename="eval-report.html"'
    assert "sandbox" in answer.headers["content-security-policy"]
    assert answer.headers["x-content-type-options"] == "nosniff"
    tags: list[str] = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: tags.append(tag)  # type: ignore[method-assign]
    parser.feed(answer.text)
    assert "script" not in tags and "img" not in tags and "svg" in tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text


def test_render_takes_a_comparison_too(dev_server: DevServer) -> None:
    comparison = compare(roundtrip(result()), failing())
    answer = dev_server.client.post(RENDER, json=comparison)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kind"] == "comparison"
    assert body["markdown"].startswith("# Evaluation comparison: REGRESSED")
    assert body["summary"]["regressed_metrics"] == ["trajectory"] and body["summary"]["passed"] is False
    assert body["summary"]["cases"] == {"regressed": 1, "improved": 0, "added": 0, "removed": 0}


@pytest.mark.parametrize(
    ("query", "body", "reason", "details"),
    [
        ("", {"schema": "adk_actors.eval_result", "schema_version": 1}, "invalid_result", {"path": "$.eval_set"}),
        ("", {**result(), "status": HOSTILE}, "invalid_result", {"path": "$.status"}),
        ("", {"schema": "other"}, "invalid_result", {"path": "$.schema"}),
        ("?format=pdf", result(), "invalid_value", {"key": "format"}),
    ],
    ids=["incomplete", "hostile-status", "schema", "format"],
)
def test_render_refuses_an_invalid_document_or_format_with_a_400(
    dev_server: DevServer, query: str, body: dict[str, Any], reason: str, details: dict[str, Any]
) -> None:
    error = error_of(dev_server.client.post(RENDER + query, json=roundtrip(body)), 400)
    assert error["reason"] == reason
    assert details.items() <= error.items() or details.items() <= error.get("details", {}).items(), error
    assert "<script>" not in str(error)


def test_compare_answers_the_comparison_with_options(dev_server: DevServer) -> None:
    baseline, current = roundtrip(result()), failing()
    answer = dev_server.client.post(COMPARE, json={"baseline": baseline, "current": current})
    assert answer.status_code == 200, answer.text
    assert answer.json() == compare(baseline, current)
    assert answer.json()["passed"] is False
    tolerant = dev_server.client.post(
        COMPARE,
        json={
            "baseline": baseline,
            "current": current,
            "options": {"max_pass_rate_drop": 0.5, "metric_tolerances": {"trajectory": 0.5}},
        },
    )
    assert tolerant.status_code == 200 and tolerant.json()["passed"] is True


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"baseline": result()}, "invalid_value"),
        ({"baseline": result(), "current": result(), "extra": 1}, "unknown_key"),
        ({"baseline": result(), "current": result(), "options": {"max_pass_rate_drop": 3}}, "invalid_value"),
        ({"baseline": result(), "current": result(), "options": {"speed": 1}}, "unknown_key"),
        ({"baseline": result(), "current": {"schema": "adk_actors.eval_result"}}, "invalid_result"),
    ],
    ids=["missing-current", "unknown-key", "bad-drop", "unknown-option", "bad-current"],
)
def test_compare_refuses_a_bad_body_with_a_400(dev_server: DevServer, body: dict[str, Any], reason: str) -> None:
    assert error_of(dev_server.client.post(COMPARE, json=roundtrip(body)), 400)["reason"] == reason


@pytest.mark.parametrize("path", [RENDER, COMPARE])
@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer " + "w" * 40}, {"Authorization": TOKEN}], ids=["none", "wrong", "bare"]
)
def test_the_evaluation_routes_need_the_token(dev_server: DevServer, path: str, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=dev_server.url, headers=headers, trust_env=False, timeout=10) as stranger:
        answer = stranger.post(path, json=result())
    assert error_of(answer, 401)["reason"] == "unauthorized"
    in_query = dev_server.client.post(f"{path}?token={TOKEN}", json=result())
    assert in_query.status_code == 400 and TOKEN not in in_query.text


def test_a_body_over_the_edge_bound_is_413_before_anything_is_parsed(dev_server: DevServer) -> None:
    big = {**result(), "padding": "x" * (1024 * 1024 + 1)}
    for path in (RENDER, COMPARE):
        assert error_of(dev_server.client.post(path, json=big), 413)["reason"] == "body_too_large"
