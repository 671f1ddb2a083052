"""``adk eval run|render|compare``: exit codes (passed, failed gate, invalid input, errors), progress on stderr, the
output formats, baselines — against the shared node and the emulator in process, and once as a subprocess with an
ephemeral node that must leave no process behind."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.evaluation.e3_support import result, roundtrip, scores, trace
from adk_actors.cli.eval_cmd import Progress, default_metrics
from adk_actors.cli.main import main
from adk_actors.evaluation.model import EvalSet
from adk_actors.evaluation.results import validate_comparison, validate_result
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import pids_with_cmdline

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = {
    "rules": [
        {"when": {"has_function_response": True}, "respond": {"text": "Sunny in {args.city}"}},
        {
            "when": {"user_text_contains": "Tokyo"},
            "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
        },
        {"when": {"user_text_contains": "explode"}, "respond": {"fault": {"status": 400, "message": "bad"}}},
        {"when": {"user_text_contains": "greet"}, "respond": {"text": "hello"}},
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}
TOKYO = {
    "id": "tokyo",
    "input": "Weather in Tokyo?",
    "expected_response": "Sunny in Tokyo",
    "expected_tool_uses": [{"name": "get_weather", "args": {"city": "Tokyo"}}],
}
GREET = {"id": "greet", "input": "greet me", "expected_response": "hello"}
WRONG_TOOL = {**TOKYO, "id": "wrong-tool", "expected_tool_uses": [{"name": "get_forecast", "args": {"city": "Tokyo"}}]}
EXPLODE = {"id": "explode", "input": "explode now", "expected_response": "never"}
TARGET = "actor_tests.evaluation.e3_agents:WEATHER"


def write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


def eval_set_file(tmp_path: Path, *cases: dict[str, Any], name: str = "set.json") -> str:
    return write(tmp_path / name, {"schema_version": 1, "id": "cli-set", "cases": list(cases)})


@pytest.fixture
def script(tmp_path: Path) -> str:
    return write(tmp_path / "script.json", SCRIPT)


@contextlib.contextmanager
def captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def adk_eval(*args: str) -> tuple[int, str, str]:
    """``adk eval ARGS`` in this process: (exit status, stdout, stderr)."""
    with captured() as (out, err):
        try:
            code = main(["eval", *args])
        except SystemExit as exc:  # argparse's own exits (--help)
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def run_args(system: ActorSystemHandle, script: str, set_path: str, *extra: str) -> list[str]:
    return ["run", set_path, "--agent", TARGET, "--emulator", "--script", script, "--port", str(system.port), *extra]


def error_of(stderr: str) -> dict[str, Any]:
    line = json.loads(stderr.strip().splitlines()[-1])
    assert line["ok"] is False
    return dict(line["error"])


# ---- run: exit codes ----------------------------------------------------------------------------------------------
def test_a_passing_set_exits_0_with_the_result_json_and_progress_lines(
    system: ActorSystemHandle, script: str, tmp_path: Path
) -> None:
    code, out, err = adk_eval(*run_args(system, script, eval_set_file(tmp_path, TOKYO, GREET), "--samples", "2"))
    assert code == 0, err
    doc = validate_result(json.loads(out))
    assert doc["status"] == "passed" and doc["counts"]["passed"] == 2
    assert [m["id"] for m in doc["metrics"]] == ["exact_response", "trajectory_exact"]
    assert doc["metrics"][0]["config"] == {"normalization": "strip"}
    tokyo = doc["cases"][0]["samples"][0]["turns"][0]
    assert tokyo["tool_uses"] == [{"name": "get_weather", "args": {}}] and tokyo["response"] == "Sunny in Tokyo"
    lines = err.strip().splitlines()
    assert len(lines) == 4
    assert sorted(line.split()[0] for line in lines) == ["1/4", "2/4", "3/4", "4/4"]
    assert all(line.split()[1] == "passed" for line in lines)
    assert {line.split()[2] for line in lines} == {"tokyo#1", "tokyo#2", "greet#1", "greet#2"}


def test_a_failed_trajectory_exits_1_and_markdown_shows_the_diff(
    system: ActorSystemHandle, script: str, tmp_path: Path
) -> None:
    set_path = eval_set_file(tmp_path, TOKYO, WRONG_TOOL)
    code, out, err = adk_eval(*run_args(system, script, set_path, "--format", "markdown"))
    assert code == 1, err
    assert out.startswith("# Evaluation cli-set: FAILED")
    assert "- case wrong-tool: failed" in out
    assert "trajectory of turn wrong-tool: expected get\\_forecast; actual get\\_weather" in out


def test_a_provider_fault_is_an_error_exit_3_and_html_goes_to_the_output_file(
    system: ActorSystemHandle, script: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    set_path = eval_set_file(tmp_path, GREET, EXPLODE)
    code, out, err = adk_eval(*run_args(system, script, set_path, "--format", "html", "--output", str(report)))
    assert code == 3, err
    assert out == ""
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Evaluation cli-set: error" in page
    assert not list(tmp_path.glob(".*.partial"))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("missing-set", "invalid_eval_set"),
        ("bad-set", "invalid_eval_set"),
        ("bad-criteria", "invalid_metric"),
        ("criteria-not-json", "invalid_json"),
        ("samples", "invalid_eval_options"),
        ("agent-module", "invalid_agent"),
        ("agent-not-target", "invalid_agent"),
        ("agent-file", "config_not_found"),
        ("baseline", "invalid_result"),
        ("tolerances", "invalid_value"),
        ("script-without-emulator", "invalid_value"),
        ("missing-agent", "invalid_arguments"),
        ("unknown-option", "invalid_arguments"),
        ("bad-format", "invalid_arguments"),
    ],
)
def test_invalid_input_exits_2_with_a_json_error_and_runs_nothing(
    system: ActorSystemHandle, script: str, tmp_path: Path, change: str, reason: str
) -> None:
    good = eval_set_file(tmp_path, GREET)
    args = run_args(system, script, good)
    if change == "missing-set":
        args[1] = str(tmp_path / "absent.json")
    elif change == "bad-set":
        args[1] = write(tmp_path / "bad.json", {"schema_version": 2, "id": "x", "cases": []})
    elif change == "bad-criteria":
        args += ["--criteria", write(tmp_path / "c.json", [{"id": "m", "criterion": "telepathy"}])]
    elif change == "criteria-not-json":
        (tmp_path / "c.txt").write_text("{nope")
        args += ["--criteria", str(tmp_path / "c.txt")]
    elif change == "samples":
        args += ["--samples", "0"]
    elif change == "agent-module":
        args[3] = "no_such_module_for_eval:AGENT"
    elif change == "agent-not-target":
        args[3] = "actor_tests.evaluation.e3_agents:NOT_A_TARGET"
    elif change == "agent-file":
        args[3] = str(tmp_path / "absent-agent.json")
    elif change == "baseline":
        args += ["--baseline", write(tmp_path / "b.json", {"schema": "adk_actors.eval_result"})]
    elif change == "tolerances":
        args += [
            "--baseline",
            write(tmp_path / "b.json", result()),
            "--metric-tolerances",
            write(tmp_path / "t.json", [1]),
        ]
    elif change == "script-without-emulator":
        args.remove("--emulator")
    elif change == "missing-agent":
        args = ["run", good]
    elif change == "unknown-option":
        args += ["--frobnicate"]
    elif change == "bad-format":
        args += ["--format", "pdf"]
    code, out, err = adk_eval(*args)
    assert code == 2, err
    assert out == ""
    assert error_of(err)["reason"] == reason
    assert "Traceback" not in err


def test_a_baseline_comparison_gates_the_run_and_markdown_puts_the_comparison_first(
    system: ActorSystemHandle, script: str, tmp_path: Path
) -> None:
    set_path = eval_set_file(tmp_path, TOKYO, GREET)
    code, out, _ = adk_eval(*run_args(system, script, set_path))
    assert code == 0
    baseline = write(tmp_path / "baseline.json", json.loads(out))
    code, out, err = adk_eval(*run_args(system, script, set_path, "--baseline", baseline))
    assert code == 0, err
    comparison = validate_comparison(json.loads(err.strip().splitlines()[-1])["comparison"])
    assert comparison["passed"] is True and comparison["same_set"] is True
    validate_result(json.loads(out))  # the JSON output is the result itself: the next run's baseline

    scored_more = json.loads(Path(baseline).read_text())
    scored_more["metric_summaries"].append({**scored_more["metric_summaries"][0], "metric_id": "judge"})
    code, out, err = adk_eval(
        *run_args(system, script, set_path, "--baseline", write(tmp_path / "more.json", scored_more))
    )
    assert code == 1, err  # the gate passed, but the baseline's "judge" metric is no longer scored: a regression
    assert validate_result(json.loads(out))["passed"] is True
    assert json.loads(err.strip().splitlines()[-1])["comparison"]["passed"] is False

    regressed = eval_set_file(tmp_path, TOKYO, {**GREET, "expected_response": "bonjour"}, name="regressed.json")
    args = run_args(system, script, regressed, "--baseline", baseline, "--format", "markdown")
    code, out, err = adk_eval(*args, "--max-pass-rate-drop", "0.5")
    assert code == 1, err  # the gate failed (the comparison is shown, the current result decides first)
    assert out.startswith("# Evaluation comparison: REGRESSED")
    assert out.index("## Regressions") < out.index("## Evaluation cli-set: FAILED")


# ---- render and compare -----------------------------------------------------------------------------------------
def test_render_writes_markdown_html_or_checked_json_and_refuses_an_invalid_document(tmp_path: Path) -> None:
    saved = write(tmp_path / "r.json", result({"greeting": [(trace("greeting"), scores("failed"))]}))
    code, out, _ = adk_eval("render", saved)
    assert code == 0 and out.startswith("# Evaluation demo: FAILED")
    code, out, _ = adk_eval("render", saved, "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>")
    code, out, _ = adk_eval("render", saved, "--format", "json")
    assert code == 0 and json.loads(out) == json.loads(Path(saved).read_text())
    broken = write(tmp_path / "broken.json", {**json.loads(Path(saved).read_text()), "pass_rate": 7})
    code, out, err = adk_eval("render", broken)
    assert code == 2 and out == ""
    assert error_of(err) == {
        "type": "ValidationError",
        "reason": "invalid_result",
        "message": "invalid result: a number in [0.0, 1.0]",
        "details": {"path": "$.pass_rate", "rule": "a number in [0.0, 1.0]"},
    }


def test_compare_exits_0_or_1_with_tolerances_and_renders_a_saved_comparison(tmp_path: Path) -> None:
    baseline = write(tmp_path / "base.json", result())
    current = write(tmp_path / "cur.json", result({"weather": [(trace("weather"), scores("passed", "failed"))]}))
    code, out, _ = adk_eval("compare", baseline, current)
    assert code == 1
    comparison = json.loads(out)
    assert comparison["passed"] is False and comparison["cases"]["regressed"] == ["weather"]
    tolerances = write(tmp_path / "tol.json", {"trajectory": 0.5})
    code, out, _ = adk_eval(
        "compare", baseline, current, "--metric-tolerances", tolerances, "--max-pass-rate-drop", "0.34"
    )
    assert code == 0 and json.loads(out)["passed"] is True
    code, out, _ = adk_eval("compare", baseline, current, "--format", "markdown")
    assert code == 1 and out.startswith("# Evaluation comparison: REGRESSED")
    assert "## Evaluation demo: FAILED" in out
    saved = write(tmp_path / "cmp.json", comparison)
    code, out, _ = adk_eval("render", saved, "--format", "html")
    assert code == 0 and "Evaluation comparison" in out
    code, _, err = adk_eval("compare", baseline, current, "--max-pass-rate-drop", "2")
    assert code == 2 and error_of(err)["details"] == {"key": "max_pass_rate_drop"}


# ---- pieces -------------------------------------------------------------------------------------------------------
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_redrawn_bar_on_a_terminal_and_lines_otherwise() -> None:
    tty, plain = _Terminal(), io.StringIO()
    for stream in (tty, plain):
        progress = Progress(stream)
        progress({"done": 1, "total": 4, "case_id": "a", "sample": 0, "status": "passed"})
        progress({"done": 4, "total": 4, "case_id": "b", "sample": 1, "status": "failed"})
        progress.close()
    assert tty.getvalue() == (
        "\r[#######.......................] 1/4 passed a#0\x1b[K"
        "\r[##############################] 4/4 failed b#1\x1b[K\n"
    )
    assert plain.getvalue() == "1/4 passed a#0\n4/4 failed b#1\n"


def test_default_metrics_follow_what_the_set_expects() -> None:
    only_responses = EvalSet.from_dict({"schema_version": 1, "id": "s", "cases": [GREET]})
    assert [m["criterion"] for m in default_metrics(only_responses)] == ["exact_response"]
    both = EvalSet.from_dict({"schema_version": 1, "id": "s", "cases": [GREET, TOKYO]})
    assert [m["criterion"] for m in default_metrics(both)] == ["exact_response", "trajectory_exact"]
    nothing = EvalSet.from_dict({"schema_version": 1, "id": "s", "cases": [{"id": "x", "input": "hi"}]})
    assert default_metrics(nothing) == []


# ---- as a command -------------------------------------------------------------------------------------------------
def test_adk_eval_run_as_a_subprocess_starts_and_stops_its_own_node(tmp_path: Path, script: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    agent = write(
        tmp_path / "agent.json", {"name": "EvalCliFile", "provider": "gemini", "model": "gemini-3.1-flash-lite"}
    )
    output = tmp_path / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_") and k not in ("GEMINI_API_KEY",)}
    env.update({"ADK_DATA_DIR": str(data), "THESPIAN_BASE_IPADDR": "127.0.0.1", "PYTHONPATH": str(ROOT)})
    try:
        out = subprocess.run(
            [sys.executable, "-m", "adk_actors.cli.main", "eval", "run", eval_set_file(tmp_path, GREET), "--agent",
             agent, "--emulator", "--script", script, "--output", str(output)],
            capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL, cwd=tmp_path, env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr + (output.read_text() if output.exists() else "")
        assert out.stdout == "" and out.stderr.strip() == "1/1 passed greet#1"
        doc = validate_result(json.loads(output.read_text()))
        assert doc["agent"] == {"name": "EvalCliFile", "model": "gemini-3.1-flash-lite"} and doc["passed"] is True
    finally:
        survivors = pids_with_cmdline(str(data).encode())
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert survivors == [], "a process of the command's node outlived it"


def test_ctrl_c_cancels_the_run_writes_the_partial_result_exits_3_and_stops_everything(
    tmp_path: Path, script: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    slow_script = write(
        tmp_path / "slow.json",
        {"rules": [{"when": {"user_text_contains": "slow"}, "respond": {"text": "late", "delay_ms": 30000}}]
         + SCRIPT["rules"]},
    )  # fmt: skip
    agent = write(tmp_path / "agent.json", {"name": "EvalCliSlow", "provider": "gemini"})
    output = tmp_path / "result.json"
    slow = {"id": "slow", "input": "a slow one", "expected_response": "late"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_") and k not in ("GEMINI_API_KEY",)}
    env.update({"ADK_DATA_DIR": str(data), "THESPIAN_BASE_IPADDR": "127.0.0.1", "PYTHONPATH": str(ROOT)})
    command = [
        sys.executable,
        "-m",
        "adk_actors.cli.main",
        "eval",
        "run",
        eval_set_file(tmp_path, GREET, slow),
        "--agent",
        agent,
        "--emulator",
        "--script",
        slow_script,
        "--output",
        str(output),
        "--concurrency",
        "2",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               cwd=tmp_path, env=env, text=True)  # fmt: skip
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # the fast case finished; the slow one is in its model call
        assert first.strip() == "1/2 passed greet#1", first
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 3, err
        doc = validate_result(json.loads(output.read_text()))
        assert doc["status"] == "cancelled"
        assert doc["cases"][0]["status"] == "passed"
        slow_sample = doc["cases"][1]["samples"][0]  # stopped in its model call (or, on a busy machine, never started)
        assert (slow_sample["status"], slow_sample["reason"]) in (("error", "cancelled"), ("not_evaluated", "not_run"))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        survivors = pids_with_cmdline(str(data).encode())
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert survivors == [], "a process of the command's node outlived it"


def test_saved_results_round_trip_through_render_json() -> None:
    doc = result()
    assert validate_result(roundtrip(doc)) == doc
