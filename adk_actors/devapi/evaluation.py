"""The developer operations of ``/dev/v1/evaluation``: render a saved result or comparison, compare two results.

Pure functions over JSON bodies (no node is asked): the routes run them on the offload pool, because validating and
rendering a large result takes CPU. Every document is validated first
(:func:`~adk_actors.evaluation.results.validate_result` / ``validate_comparison``); the request's size is bounded by
the edge (``max_body_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from adk_actors.errors import ValidationError
from adk_actors.evaluation.report import render_html
from adk_actors.evaluation.results import (
    COMPARISON_SCHEMA,
    compare,
    render_markdown,
    validate_comparison,
    validate_result,
)

__all__ = ["MAX_SUMMARY_CASES", "RENDER_FORMATS", "compare_results", "render_document"]

MAX_SUMMARY_CASES: Final = 500
"""Cases a render summary lists (``cases_total`` counts them all)."""
RENDER_FORMATS: Final = ("markdown", "html")
_COMPARE_KEYS: Final = frozenset({"baseline", "current", "options"})
_OPTION_KEYS: Final = frozenset({"max_pass_rate_drop", "metric_tolerances"})


def _summary(kind: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    if kind == "comparison":
        return {
            "passed": doc["passed"],
            "same_set": doc["same_set"],
            "pass_rate": doc["pass_rate"],
            "regressed_metrics": [m["metric_id"] for m in doc["metrics"] if m["regressed"]],
            "cases": {key: len(ids) for key, ids in doc["cases"].items()},
        }
    return {
        "eval_set": doc["eval_set"]["id"],
        "status": doc["status"],
        "passed": doc["passed"],
        "pass_rate": doc["pass_rate"],
        "counts": doc["counts"],
        "cases": [
            {"case_id": c["case_id"], "status": c["status"], "pass_rate": c.get("pass_rate")}
            for c in doc["cases"][:MAX_SUMMARY_CASES]
        ],
        "cases_total": len(doc["cases"]),
    }


def render_document(document: Any, fmt: str = "markdown") -> dict[str, Any] | str:
    """Render a result or comparison: ``{"kind", "summary", "markdown"}``, or the HTML report (a ``str``) for
    ``fmt="html"``.

    Raises:
        ValidationError: ``invalid_value`` for an unknown format; ``invalid_result`` for the document.
    """
    if fmt not in RENDER_FORMATS:
        raise ValidationError(
            "format is markdown or html",
            reason="invalid_value",
            details={"key": "format", "allowed": list(RENDER_FORMATS)},
        )
    is_comparison = isinstance(document, Mapping) and document.get("schema") == COMPARISON_SCHEMA
    checked = validate_comparison(document) if is_comparison else validate_result(document)
    if fmt == "html":
        return render_html(checked)
    kind = "comparison" if is_comparison else "result"
    return {"kind": kind, "summary": _summary(kind, checked), "markdown": render_markdown(checked)}


def compare_results(body: Any) -> dict[str, Any]:
    """Compare ``body["current"]`` to ``body["baseline"]`` with ``body["options"]`` (``max_pass_rate_drop``,
    ``metric_tolerances``); the comparison document.

    Raises:
        ValidationError: ``unknown_key`` / ``invalid_value`` for the body or its options; ``invalid_result`` for
            either result.
    """
    if not isinstance(body, Mapping):
        raise ValidationError("the body is a JSON object", reason="invalid_body")
    unknown = sorted(k for k in body if k not in _COMPARE_KEYS)
    if unknown:
        raise ValidationError(
            "the body has an unknown key", reason="unknown_key", details={"allowed": sorted(_COMPARE_KEYS)}
        )
    for key in ("baseline", "current"):
        if key not in body:
            raise ValidationError(f"the body needs {key}", reason="invalid_value", details={"key": key})
    options = body.get("options", {})
    if not isinstance(options, Mapping):
        raise ValidationError("options is an object", reason="invalid_value", details={"key": "options"})
    unknown = sorted(k for k in options if k not in _OPTION_KEYS)
    if unknown:
        raise ValidationError(
            "options has an unknown key", reason="unknown_key", details={"allowed": sorted(_OPTION_KEYS)}
        )
    return compare(
        body["baseline"],
        body["current"],
        max_pass_rate_drop=options.get("max_pass_rate_drop", 0.0),
        metric_tolerances=options.get("metric_tolerances", {}),
    )
