"""The JSON samples of docs/EVALUATION.md's eval-set and judge sections are valid as written (the page marks them
illustrative because no test runs JSON; this one validates them)."""

from __future__ import annotations

import json

from actor_tests.docs_env import ROOT, fenced_blocks
from adk_actors.evaluation.adk_format import load_eval_set
from adk_actors.evaluation.criteria import check_metric_config
from adk_actors.evaluation.model import metric_specs

PAGE = ROOT / "docs" / "EVALUATION.md"


def _json_blocks() -> list[object]:
    return [json.loads(block.code) for block in fenced_blocks(PAGE) if block.language == "json"]


def test_the_sample_eval_set_of_the_docs_is_valid():
    (eval_set,) = [block for block in _json_blocks() if isinstance(block, dict) and "schema_version" in block]
    built = load_eval_set(eval_set)
    assert [c.id for c in built.cases] == ["tokyo", "two-cities"]
    assert built.cases[1].initial_state == {"unit": "celsius"}


def test_the_sample_judge_metric_of_the_docs_is_valid():
    (metric,) = [block for block in _json_blocks() if isinstance(block, dict) and block.get("criterion") == "llm_judge"]
    (spec,) = metric_specs([metric])
    check_metric_config(spec)
    assert (spec.kind, spec.scope, spec.threshold) == ("judge", "case", 0.8)
