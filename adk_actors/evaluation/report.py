"""The HTML report of an evaluation result or comparison: one self-contained file.

:func:`render_html` writes a page with inline CSS and inline SVG charts drawn here (no script, no external
resource; the page's own Content-Security-Policy forbids both): the pass rate per case (bars), the score
distribution of each metric (histograms with the threshold marked), the trajectory diffs of failing turns (expected
against actual tool names) and the cases not passed with their failing metrics; for a comparison, the per-metric
deltas (diverging bars), the pass rates and the case changes, regressions first.

Every text from the document (case and metric ids, responses, reasons) is HTML-escaped: an eval set is untrusted
input. The output is deterministic for a given document.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, Final

# The number formats are the Markdown report's, so both renderings of a result show the same figures.
from adk_actors.evaluation.results import (
    COMPARISON_SCHEMA,
    _num,
    _pct,
    _signed,
    trajectory_diffs,
    validate_comparison,
    validate_result,
)

__all__ = ["MAX_CHART_CASES", "render_html"]

MAX_CHART_CASES: Final = 300
"""Cases drawn in the pass-rate chart (the rest are counted under it)."""
_MAX_FAILING: Final = 200
_MAX_DIFFS: Final = 200
_SNIPPET_CHARS: Final = 300
_BINS: Final = 10

_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_CSS: Final = """
:root { --pass: #2e7d32; --fail: #c62828; --error: #ef6c00; --skip: #9e9e9e; --ink: #1d2430; --muted: #5f6b7a;
  --line: #dde3ea; --bg: #f6f8fb; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  background: var(--bg); }
main { max-width: 1100px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 12px; display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
h2 { font-size: 17px; margin: 0 0 10px; }
h3 { font-size: 14px; margin: 0 0 6px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px; margin: 0 0 16px; }
.badge { font-size: 12px; font-weight: 700; letter-spacing: .04em; color: #fff; padding: 3px 10px;
  border-radius: 999px; }
.badge.passed { background: var(--pass); } .badge.failed { background: var(--fail); }
.badge.error, .badge.cancelled { background: var(--error); } .badge.not_evaluated { background: var(--skip); }
.summary { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 8px 16px; margin: 0; }
.summary div { border-left: 3px solid var(--line); padding-left: 8px; }
.summary dt { color: var(--muted); font-size: 12px; } .summary dd { margin: 0; font-weight: 600;
  overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top;
  overflow-wrap: anywhere; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; } figcaption { font-size: 12px; color: var(--muted); overflow-wrap: anywhere; max-width: 260px; }
svg.chart text { font: 11px system-ui, sans-serif; fill: var(--ink); }
svg.chart .axis { stroke: #9aa5b1; stroke-width: 1; }
svg.chart .threshold { stroke: var(--ink); stroke-dasharray: 4 3; stroke-width: 1.5; }
.bar.passed, .bar.positive { fill: var(--pass); } .bar.failed, .bar.negative { fill: var(--fail); }
.bar.error { fill: var(--error); } .bar.not_evaluated, .bar.none { fill: var(--skip); }
.bar.hist { fill: #3f6fb5; } .bar.baseline { fill: #90a4ae; } .bar.current { fill: #3f6fb5; }
.tool { display: inline-block; font: 12px ui-monospace, monospace; padding: 1px 6px; margin: 1px 2px;
  border-radius: 4px; background: #eef2f7; border: 1px solid var(--line); }
.tool.missing { background: #fdecea; border-color: #f5c2be; } .tool.extra { background: #fff4e5;
  border-color: #ffd8a8; }
.status { font-weight: 600; } .status.passed { color: var(--pass); } .status.failed { color: var(--fail); }
.status.error, .status.cancelled { color: var(--error); } .status.not_evaluated { color: var(--skip); }
.muted { color: var(--muted); } .note { color: var(--muted); font-size: 12px; margin-top: 6px; }
.response { font: 12px ui-monospace, monospace; white-space: pre-wrap; background: #f3f5f8; padding: 6px;
  border-radius: 4px; overflow-wrap: anywhere; }
details { border-top: 1px solid var(--line); padding: 6px 0; } summary { cursor: pointer; }
ul.regressions li { color: var(--fail); }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_html(document: Any, *, result: Any = None) -> str:
    """The HTML report of a result or a comparison (validated first); with a comparison, ``result`` (the current
    result) appends its report.

    Raises:
        ValidationError: ``invalid_result``.
    """
    if isinstance(document, dict) and document.get("schema") == COMPARISON_SCHEMA:
        comparison = validate_comparison(document)
        title = f"Evaluation comparison: {'passed' if comparison['passed'] else 'regressed'}"
        body = _comparison(comparison)
        if result is not None:
            body += _result(validate_result(result), heading="h2")
    else:
        doc = validate_result(document)
        title = f"Evaluation {doc['eval_set']['id']}: {doc['status']}"
        body = _result(doc)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="adk_actors.evaluation.report">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


# ---- a result -------------------------------------------------------------------------------------------------------
def _result(doc: Mapping[str, Any], *, heading: str = "h1") -> str:
    parts = [_header(doc, heading)]
    parts.append(_section("pass-rate-per-case", "Pass rate per case", _case_chart(doc["cases"])))
    parts.append(_section("score-distributions", "Score distributions", _histograms(doc)))
    parts.append(_section("metrics", "Metrics", _metrics_table(doc)))
    parts.append(_section("trajectory-diffs", "Trajectory diffs", _diffs(doc)))
    parts.append(_section("failing-cases", "Cases not passed", _failing(doc)))
    return "".join(parts)


def _section(ident: str, title: str, inner: str) -> str:
    return f'<section id="{ident}">\n<h2>{_e(title)}</h2>\n{inner}</section>\n'


def _header(doc: Mapping[str, Any], heading: str) -> str:
    counts, options = doc["counts"], doc.get("options", {})
    eval_set, agent = doc["eval_set"], doc["agent"]
    items = [
        ("Pass rate", f"{_pct(doc['pass_rate'])} (gate {_pct(options.get('pass_rate_threshold'))})"),
        (
            "Cases",
            f"{counts['cases']}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} error, "
            f"{counts['not_evaluated']} not evaluated",
        ),
        ("Eval set", f"{eval_set['id']} version {eval_set.get('version', '')}"),
        ("Agent", f"{agent.get('name', '')} ({agent.get('model') or 'model unknown'})"),
        ("Samples per case", str(options.get("samples", "—"))),
        ("Started", str(doc.get("started_at", ""))),
        ("Duration", f"{float(doc.get('duration_ms', 0.0)) / 1000:.3f} s"),
        ("Fingerprint", _short(str(eval_set.get("fingerprint", "")), 24)),
    ]
    cells = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in items)
    note = (
        '<p class="note">Responses were cut to keep the result within max_report_bytes.</p>'
        if doc.get("truncated")
        else ""
    )
    status = str(doc["status"])
    return (
        f'<section id="summary">\n<{heading}>Evaluation <span class="id">{_e(eval_set["id"])}</span> '
        f'<span class="badge {_e(status)}" id="status">{_e(status.upper())}</span></{heading}>\n'
        f'<dl class="summary">{cells}</dl>\n{note}</section>\n'
    )


def _case_chart(cases: Sequence[Mapping[str, Any]]) -> str:
    shown = cases[:MAX_CHART_CASES]
    if not shown:
        return '<p class="muted">No cases.</p>\n'
    row, label_w, bar_w, pad = 18, 230, 470, 6
    width, height = label_w + bar_w + 70, pad * 2 + row * len(shown) + 18
    out = [
        f'<svg class="chart" data-chart="case-pass-rate" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Pass rate per case">'
    ]
    for i, case in enumerate(shown):
        y = pad + i * row
        rate, status = case.get("pass_rate"), str(case["status"])
        label = _e(_short(str(case["case_id"]), 34))
        tip = _e(f"{case['case_id']}: {status}, pass rate {_pct(rate)}")
        length = 3.0 if rate is None else max(2.0, float(rate) * bar_w)
        out.append(
            f'<g class="case-row"><title>{tip}</title>'
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">{label}</text>'
            f'<rect class="bar {_e(status)}" x="{label_w}" y="{y + 3}" width="{length:.1f}" height="{row - 6}"/>'
            f'<text x="{label_w + length + 4:.1f}" y="{y + 13}">{_e(_pct(rate))}</text></g>'
        )
    axis_y = pad + row * len(shown) + 2
    out.append(f'<line class="axis" x1="{label_w}" y1="{pad}" x2="{label_w}" y2="{axis_y}"/>')
    for tick in (0.0, 0.5, 1.0):
        x = label_w + tick * bar_w
        out.append(f'<text x="{x:.1f}" y="{axis_y + 13}" text-anchor="middle">{int(tick * 100)}%</text>')
    out.append("</svg>")
    more = (
        f'<p class="note">{len(cases) - MAX_CHART_CASES} more cases are not drawn.</p>'
        if len(cases) > MAX_CHART_CASES
        else ""
    )
    return "".join(out) + "\n" + more


def _scores_of(doc: Mapping[str, Any], index: int, metric_id: str) -> list[float]:
    values = []
    for case in doc["cases"]:
        for sample in case["samples"]:
            scores = sample["scores"]
            score = scores[index] if index < len(scores) and scores[index]["metric_id"] == metric_id else None
            if score is None:
                score = next((s for s in scores if s["metric_id"] == metric_id), None)
            if score is not None and score.get("score") is not None:
                values.append(float(score["score"]))
    return values


def _histograms(doc: Mapping[str, Any]) -> str:
    metrics = doc["metrics"]
    if not metrics:
        return '<p class="muted">No metrics.</p>\n'
    figures = []
    for index, metric in enumerate(metrics):
        values = _scores_of(doc, index, metric["id"])
        figures.append(_histogram(str(metric["id"]), str(metric.get("criterion", "")), metric.get("threshold"), values))
    return '<div class="charts">' + "".join(figures) + "</div>\n"


def _histogram(metric_id: str, criterion: str, threshold: Any, values: Sequence[float]) -> str:
    bins = [0] * _BINS
    for value in values:
        bins[min(_BINS - 1, max(0, int(value * _BINS)))] += 1
    width, height, left, top, plot_h, plot_w = 260, 150, 28, 10, 100, 220
    peak = max(bins) or 1
    bar = plot_w / _BINS
    out = [
        f'<figure><svg class="chart" data-chart="score-histogram" data-metric="{_e(metric_id)}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="Score distribution of {_e(metric_id)}">'
    ]
    for i, count in enumerate(bins):
        h = plot_h * count / peak
        x = left + i * bar
        low, high = i / _BINS, (i + 1) / _BINS
        out.append(
            f'<rect class="bar hist" x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" width="{bar - 2:.1f}" '
            f'height="{h:.1f}"><title>{low:.1f}–{high:.1f}: {count}</title></rect>'
        )
    base = top + plot_h
    out.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}"/>')
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{base}"/>')
    out.append(f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{peak if values else 0}</text>')
    for tick in (0.0, 0.5, 1.0):
        out.append(f'<text x="{left + tick * plot_w:.1f}" y="{base + 14}" text-anchor="middle">{tick:g}</text>')
    if isinstance(threshold, int | float) and 0.0 <= threshold <= 1.0:
        x = left + float(threshold) * plot_w
        out.append(
            f'<line class="threshold" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{base}">'
            f"<title>threshold {_num(threshold)}</title></line>"
        )
    out.append("</svg>")
    caption = f"{metric_id} ({criterion}): {len(values)} scored samples"
    out.append(f"<figcaption>{_e(caption)}</figcaption></figure>")
    return "".join(out)


def _metrics_table(doc: Mapping[str, Any]) -> str:
    summaries = doc.get("metric_summaries", [])
    if not summaries:
        return '<p class="muted">No metrics.</p>\n'
    head = (
        "<tr><th>Metric</th><th>Criterion</th><th>Kind</th><th class=num>Threshold</th><th class=num>Mean score</th>"
        "<th class=num>Pass rate</th><th class=num>Passed</th><th class=num>Failed</th><th class=num>Error</th>"
        "<th class=num>Not evaluated</th></tr>"
    )
    rows = []
    for m in summaries:
        n = m["counts"]
        rows.append(
            f"<tr><td>{_e(m['metric_id'])}</td><td>{_e(m.get('criterion', ''))}</td><td>{_e(m.get('kind', ''))}</td>"
            f"<td class=num>{_num(m.get('threshold'))}</td><td class=num>{_num(m.get('mean_score'))}</td>"
            f"<td class=num>{_pct(m.get('pass_rate'))}</td><td class=num>{n['passed']}</td>"
            f"<td class=num>{n['failed']}</td><td class=num>{n['error']}</td><td class=num>{n['not_evaluated']}</td>"
            "</tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>\n"


def _tools(names: Sequence[str], other: Sequence[str], mark: str) -> str:
    if not names:
        return '<span class="muted">(none)</span>'
    chips = []
    for i, name in enumerate(names):
        matches = i < len(other) and other[i] == name
        chips.append(f'<span class="tool{"" if matches else " " + mark}">{_e(name)}</span>')
    return "".join(chips)


def _diffs(doc: Mapping[str, Any]) -> str:
    diffs = trajectory_diffs(doc, limit=_MAX_DIFFS)
    if not diffs:
        return '<p class="muted">No failing turn has a trajectory different from the expected one.</p>\n'
    rows = [
        f'<tr class="diff"><td>{_e(d["case_id"])}</td><td class=num>{d["sample"]}</td><td>{_e(d["turn_id"])}</td>'
        f"<td>{_tools(d['expected'], d['actual'], 'missing')}</td>"
        f"<td>{_tools(d['actual'], d['expected'], 'extra')}</td></tr>"
        for d in diffs
    ]
    head = "<tr><th>Case</th><th class=num>Sample</th><th>Turn</th><th>Expected tools</th><th>Actual tools</th></tr>"
    note = f'<p class="note">The first {_MAX_DIFFS} diffs are shown.</p>' if len(diffs) >= _MAX_DIFFS else ""
    return f"<table>{head}{''.join(rows)}</table>\n{note}"


def _failing(doc: Mapping[str, Any]) -> str:
    failing = [case for case in doc["cases"] if case["status"] != "passed"]
    if not failing:
        return '<p class="muted">All cases passed.</p>\n'
    criteria = {m["id"]: m.get("criterion", "") for m in doc["metrics"]}
    out = []
    for case in failing[:_MAX_FAILING]:
        status = str(case["status"])
        lines = []
        for sample in case["samples"]:
            if sample["status"] == "passed":
                continue
            why = sample.get("reason") or ""
            if sample.get("error"):
                why = f"{sample['error'].get('reason', '')} ({sample['error'].get('type') or 'error'})"
            metrics = "".join(
                f"<li>{_e(s['metric_id'])} <span class=muted>({_e(criteria.get(s['metric_id'], ''))})</span>: "
                f'<span class="status {_e(s["status"])}">{_e(s["status"])}</span> '
                f"{_e(_num(s.get('score')) if s.get('score') is not None else s.get('reason', ''))} "
                f"<span class=muted>(threshold {_num(s.get('threshold'))})</span></li>"
                for s in sample["scores"]
                if s["status"] in ("failed", "error")
            )
            responses = "".join(
                f'<div class="muted">turn {_e(t["turn_id"])}</div>'
                f'<div class="response">{_e(_short(str(t.get("response", "")), _SNIPPET_CHARS))}</div>'
                for t in sample.get("turns", [])
                if t.get("response")
            )
            lines.append(
                f'<div class="sample"><h3>sample {sample["sample"]}: '
                f'<span class="status {_e(sample["status"])}">{_e(sample["status"])}</span> '
                f"<span class=muted>{_e(why)}</span></h3><ul>{metrics}</ul>{responses}</div>"
            )
        out.append(
            f'<details class="case" data-status="{_e(status)}"><summary>{_e(case["case_id"])}: '
            f'<span class="status {_e(status)}">{_e(status)}</span> '
            f"<span class=muted>(sample pass rate {_pct(case.get('pass_rate'))})</span></summary>"
            f"{''.join(lines)}</details>"
        )
    more = (
        f'<p class="note">{len(failing) - _MAX_FAILING} more cases are not listed.</p>'
        if len(failing) > _MAX_FAILING
        else ""
    )
    return "".join(out) + "\n" + more


# ---- a comparison ---------------------------------------------------------------------------------------------------
def _comparison(doc: Mapping[str, Any]) -> str:
    rates = doc["pass_rate"]
    allowed = float(doc.get("max_pass_rate_drop", 0.0))
    verdict = "passed" if doc["passed"] else "failed"
    sets = doc.get("sets", {})
    lines = []
    if "baseline" in sets and "current" in sets:
        for side in ("baseline", "current"):
            info = sets[side]
            lines.append(
                f"<div><dt>{side.capitalize()}</dt><dd>{_e(info.get('id', ''))} version {_e(info.get('version', ''))}"
                f" — {_e(info.get('status', ''))}, {_e(info.get('finished_at', ''))}</dd></div>"
            )
    lines.append(f"<div><dt>Pass rate</dt><dd>{_pct(rates['baseline'])} → {_pct(rates['current'])}</dd></div>")
    lines.append(f"<div><dt>Drop</dt><dd>{_pct(rates['drop'])} (allowed {_pct(allowed)})</dd></div>")
    warning = (
        ""
        if doc["same_set"]
        else '<p class="note">The two results ran different eval sets (id or fingerprint differ).</p>'
    )
    header = (
        f'<section id="summary">\n<h1>Evaluation comparison <span class="badge {verdict}" id="status">'
        f'{"PASSED" if doc["passed"] else "REGRESSED"}</span></h1>\n<dl class="summary">{"".join(lines)}</dl>\n'
        f"{warning}</section>\n"
    )
    regressions = []
    if rates["drop"] > allowed + 1e-9:
        regressions.append(f"pass rate dropped by {_pct(rates['drop'])} (allowed {_pct(allowed)})")
    for m in doc["metrics"]:
        if m["regressed"]:
            regressions.append(
                f"metric {m['metric_id']}: {_num(m['baseline'])} → {_num(m['current'])} "
                f"(delta {_signed(m['delta'])}, tolerance {_num(m['tolerance'])})"
            )
    if doc["cases"]["regressed"]:
        ids = doc["cases"]["regressed"]
        shown = ", ".join(ids[:_MAX_FAILING]) + (
            f" and {len(ids) - _MAX_FAILING} more" if len(ids) > _MAX_FAILING else ""
        )
        regressions.append(f"cases no longer passing: {shown}")
    listed = (
        '<ul class="regressions">' + "".join(f"<li>{_e(r)}</li>" for r in regressions) + "</ul>"
        if regressions
        else '<p class="muted">None.</p>'
    )
    parts = [header, _section("regressions", "Regressions", listed + "\n")]
    parts.append(
        _section("metric-deltas", "Metric deltas", _delta_chart(doc["metrics"]) + _delta_table(doc["metrics"]))
    )
    parts.append(_section("pass-rates", "Pass rate", _rate_chart(rates)))
    changes = []
    for key in ("improved", "added", "removed"):
        ids = doc["cases"][key]
        text = ", ".join(ids[:_MAX_FAILING]) if ids else "none"
        more = f" and {len(ids) - _MAX_FAILING} more" if len(ids) > _MAX_FAILING else ""
        changes.append(f"<div><dt>{key.capitalize()}</dt><dd>{_e(text + more)}</dd></div>")
    parts.append(_section("case-changes", "Cases", f'<dl class="summary">{"".join(changes)}</dl>\n'))
    return "".join(parts)


def _delta_chart(metrics: Sequence[Mapping[str, Any]]) -> str:
    if not metrics:
        return '<p class="muted">No metrics.</p>\n'
    row, label_w, half, pad = 20, 230, 220, 6
    scale = max([0.1, *(abs(float(m["delta"])) for m in metrics if m["delta"] is not None)])
    width, height = label_w + 2 * half + 70, pad * 2 + row * len(metrics) + 18
    center = label_w + half
    out = [
        f'<svg class="chart" data-chart="metric-deltas" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Metric deltas">'
    ]
    for i, m in enumerate(metrics):
        y = pad + i * row
        delta = m["delta"]
        tip = _e(f"{m['metric_id']}: {_num(m['baseline'])} → {_num(m['current'])} ({_signed(delta)})")
        label = _e(_short(str(m["metric_id"]), 34))
        if delta is None:
            kind, x, length = "none", center - 1.5, 3.0
        else:
            length = max(2.0, abs(float(delta)) / scale * half)
            kind = "negative" if m["regressed"] or float(delta) < 0 else "positive"
            x = center - length if float(delta) < 0 else center
        out.append(
            f'<g class="delta-row"><title>{tip}</title><text x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
            f'{label}</text><rect class="bar {kind}" x="{x:.1f}" y="{y + 4}" width="{length:.1f}" height="{row - 8}"/>'
            f'<text x="{center + half + 6}" y="{y + 14}">{_e(_signed(delta))}</text></g>'
        )
    bottom = pad + row * len(metrics) + 2
    out.append(f'<line class="axis" x1="{center}" y1="{pad}" x2="{center}" y2="{bottom}"/>')
    for tick in (-scale, 0.0, scale):
        out.append(
            f'<text x="{center + tick / scale * half:.1f}" y="{bottom + 13}" text-anchor="middle">{tick:+.2f}</text>'
        )
    out.append("</svg>\n")
    return "".join(out)


def _delta_table(metrics: Sequence[Mapping[str, Any]]) -> str:
    if not metrics:
        return ""
    head = (
        "<tr><th>Metric</th><th class=num>Baseline</th><th class=num>Current</th><th class=num>Delta</th>"
        "<th class=num>Tolerance</th><th>Regressed</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{_e(m['metric_id'])}</td><td class=num>{_num(m['baseline'])}</td>"
        f"<td class=num>{_num(m['current'])}</td><td class=num>{_signed(m['delta'])}</td>"
        f"<td class=num>{_num(m['tolerance'])}</td>"
        f'<td class="status {"failed" if m["regressed"] else "passed"}">{"yes" if m["regressed"] else "no"}</td></tr>'
        for m in metrics
    )
    return f"<table>{head}{rows}</table>\n"


def _rate_chart(rates: Mapping[str, Any]) -> str:
    width, height, label_w, bar_w = 600, 64, 90, 420
    out = [
        f'<svg class="chart" data-chart="pass-rates" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Pass rates">'
    ]
    for i, side in enumerate(("baseline", "current")):
        y = 6 + i * 26
        length = max(2.0, float(rates[side]) * bar_w)
        out.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{side}</text>'
            f'<rect class="bar {side}" x="{label_w}" y="{y + 3}" width="{length:.1f}" height="16"/>'
            f'<text x="{label_w + length + 4:.1f}" y="{y + 15}">{_pct(rates[side])}</text>'
        )
    out.append("</svg>\n")
    return "".join(out)
