"""Evaluation: eval sets (ours and google-adk's), criteria and the rubric LLM judge, isolated runs with bounded
concurrency, versioned results, comparison, Markdown and HTML reports (docs/EVALUATION.md).

::

    eval_set = load_eval_set("weather.evalset.json")
    result = run_eval(AgentTarget("Weather", config, tools), eval_set, [MetricSpec("response", "exact_response")])
    print(render_markdown(result))
"""

from adk_actors.evaluation.adk_format import detect_format, load_adk_eval_set, load_eval_set
from adk_actors.evaluation.criteria import check_metric_config, rouge1_f, score_sample
from adk_actors.evaluation.judge import judge_config
from adk_actors.evaluation.model import (
    EvalCase,
    EvalSet,
    EvalTurn,
    MetricSpec,
    SampleTrace,
    Score,
    ToolUse,
    TurnTrace,
    metric_specs,
)
from adk_actors.evaluation.report import render_html
from adk_actors.evaluation.results import (
    COMPARISON_SCHEMA,
    RESULT_SCHEMA,
    build_result,
    compare,
    render_markdown,
    validate_comparison,
    validate_result,
)
from adk_actors.evaluation.runner import AgentTarget, EvalOptions, resolve_target, run_eval

__all__ = [
    "COMPARISON_SCHEMA",
    "RESULT_SCHEMA",
    "AgentTarget",
    "EvalCase",
    "EvalOptions",
    "EvalSet",
    "EvalTurn",
    "MetricSpec",
    "SampleTrace",
    "Score",
    "ToolUse",
    "TurnTrace",
    "build_result",
    "check_metric_config",
    "compare",
    "detect_format",
    "judge_config",
    "load_adk_eval_set",
    "load_eval_set",
    "metric_specs",
    "render_html",
    "render_markdown",
    "resolve_target",
    "rouge1_f",
    "run_eval",
    "score_sample",
    "validate_comparison",
    "validate_result",
]
