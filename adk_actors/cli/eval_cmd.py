"""``adk eval``: run an eval set against an agent, render a saved result, compare two results (docs/EVALUATION.md).

::

    adk eval run SET --agent FILE_OR_MODULE [--criteria FILE] [--samples N] [--concurrency N]
                 [--sample-concurrency N] [--baseline RESULT] [--max-pass-rate-drop X] [--metric-tolerances FILE]
                 [--format json|markdown|html] [--output FILE]
                 [--emulator [--script PATH] | --base-url URL] [--port N]
    adk eval render RESULT [--format markdown|html|json] [--output FILE]
    adk eval compare BASELINE CURRENT [--max-pass-rate-drop X] [--metric-tolerances FILE]
                 [--format json|markdown|html] [--output FILE]

``SET`` is our eval set (schema version 1 or 2) or a google-adk ``.evalset.json`` / ``.test.json``.
``FILE_OR_MODULE`` is an agent JSON file (as ``adk run --config`` reads it) or ``pkg.module:name`` naming an
``AgentTarget`` or an ``Agent`` (the module must import in this process and in the node's). Without ``--criteria``
the set is scored by ``exact_response`` (``strip``) where turns expect a response and ``trajectory_exact`` (arguments
exact) where they expect tool uses. ``--criteria`` is a JSON list of metric specs (or ``{"metrics": [...]}``).

``run`` starts an ephemeral node (or attaches to ``--port``) and, with ``--emulator``, an in-process Gemini emulator,
and stops what it started at the end, also on Ctrl-C (the result then says ``cancelled``). Progress goes to stderr:
a bar on a terminal, ``done/total`` lines otherwise. The document (JSON by default) goes to stdout or ``--output``.
With ``--baseline`` the result is compared to a saved result; in JSON the output stays the result (usable as the
next baseline) and the comparison is printed to stderr as one ``{"comparison": ...}`` line; Markdown and HTML show
the comparison first, then the result.

Exit status (for CI): ``0`` the gate passed (and the comparison, with ``--baseline``); ``1`` the gate failed or the
comparison regressed; ``2`` invalid input (arguments, set, criteria, options, agent file, result files); ``3`` the
evaluation errored or was cancelled, or a runtime failure. Errors are one JSON line on stderr,
``{"ok": false, "error": {"type", "reason", "message", "details"}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from adk_actors.cli.output import print_json, safe
from adk_actors.errors import AdkError, AgentError, ConfigError, ToolError, ValidationError

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_PASSED",
    "EvalArgumentParser",
    "Progress",
    "add_parser",
    "compare_command",
    "default_metrics",
    "load_target",
    "reject_arguments",
    "render_command",
    "run_command",
]

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_ERROR = 3
_MAX_OPTION_FILE_BYTES = 1024 * 1024
"""Largest ``--criteria`` / ``--metric-tolerances`` file."""
_INVALID_INPUT = (ValidationError, ConfigError, AgentError, ToolError)
"""What an invalid input raises (an invalid target is refused before anything runs): exit status 2."""
_FORMATS = ("json", "markdown", "html")


class EvalArgumentParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are a JSON error line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        _report(ConfigError(message, reason="invalid_arguments", details={"command": self.prog}))
        raise SystemExit(EXIT_INVALID)


def add_parser(sub: Any) -> None:
    """Register ``eval`` (``run``, ``render``, ``compare``) on the ``adk`` subparsers."""
    parser = sub.add_parser(
        "eval",
        help="run an eval set against an agent, render or compare results",
        description="Evaluate an agent against an eval set (docs/EVALUATION.md).",
    )
    parser.error = EvalArgumentParser.error.__get__(parser)
    parser.set_defaults(handler=_no_action, reject_arguments=reject_arguments)
    actions = parser.add_subparsers(dest="eval_command", metavar="ACTION", parser_class=EvalArgumentParser)

    run = actions.add_parser("run", help="run an eval set and print the result")
    run.add_argument("set", metavar="SET", help="the eval set (ours, or google-adk's .evalset.json / .test.json)")
    run.add_argument("--agent", required=True, metavar="FILE_OR_MODULE", help="agent JSON file or pkg.module:name")
    run.add_argument(
        "--criteria", metavar="FILE", help="JSON list of metric specs (default: exact response/trajectory)"
    )
    run.add_argument("--samples", type=int, default=1, metavar="N", help="samples per case (default 1)")
    run.add_argument("--concurrency", type=int, default=4, metavar="N", help="cases at once (default 4)")
    run.add_argument("--sample-concurrency", type=int, default=1, metavar="N", help="samples of a case at once")
    _compare_arguments(run)
    run.add_argument("--baseline", metavar="RESULT", help="a saved result JSON to compare the new result to")
    run.add_argument("--format", choices=_FORMATS, default="json", help="output format (default json)")
    run.add_argument("--output", metavar="FILE", help="write the document here instead of stdout")
    run.add_argument("--emulator", action="store_true", help="run the agent against an in-process Gemini emulator")
    run.add_argument("--script", metavar="PATH", help="emulator scenario script (with --emulator)")
    run.add_argument("--base-url", metavar="URL", help="Gemini endpoint (https, or loopback http)")
    run.add_argument("--port", type=int, help="attach to the running system on this admin port")
    run.set_defaults(handler=run_command)

    render = actions.add_parser("render", help="render a saved result or comparison")
    render.add_argument("document", metavar="RESULT", help="a result or comparison JSON file")
    render.add_argument("--format", choices=_FORMATS, default="markdown", help="output format (default markdown)")
    render.add_argument("--output", metavar="FILE", help="write the report here instead of stdout")
    render.set_defaults(handler=render_command)

    comp = actions.add_parser("compare", help="compare a current result to a baseline result")
    comp.add_argument("baseline", metavar="BASELINE", help="the baseline result JSON file")
    comp.add_argument("current", metavar="CURRENT", help="the current result JSON file")
    _compare_arguments(comp)
    comp.add_argument("--format", choices=_FORMATS, default="json", help="output format (default json)")
    comp.add_argument("--output", metavar="FILE", help="write the document here instead of stdout")
    comp.set_defaults(handler=compare_command)


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-pass-rate-drop", type=float, default=0.0, metavar="X", help="allowed pass-rate drop, 0..1 (default 0)"
    )
    parser.add_argument("--metric-tolerances", metavar="FILE", help='JSON object {"metric_id": allowed score drop}')


def reject_arguments(rest: Sequence[str]) -> int:
    """Unknown arguments of ``adk eval ...`` (called by ``adk``'s main): a JSON error, exit status 2."""
    _report(ConfigError("unrecognized arguments", reason="invalid_arguments", details={"count": len(rest)}))
    return EXIT_INVALID


def _no_action(args: argparse.Namespace) -> int:
    _report(ConfigError("adk eval needs an action: run, render or compare", reason="invalid_arguments"))
    return EXIT_INVALID


def _report(err: AdkError) -> None:
    print_json({"ok": False, "error": err.to_dict()}, sys.stderr)


# ---- inputs ---------------------------------------------------------------------------------------------------------
def _read_json(path: str, option: str, max_bytes: int) -> Any:
    """A JSON file named by a command-line option, bounded and strictly parsed.

    Raises:
        ValidationError: ``file_not_found``, ``file_too_large`` or ``invalid_json`` (details: the option).
    """
    from adk_actors.content.canonical import canonical_loads

    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError:
        raise ValidationError("the file cannot be read", reason="file_not_found", details={"option": option}) from None
    if len(raw) > max_bytes:
        raise ValidationError(
            "the file is too large", reason="file_too_large", details={"option": option, "max_bytes": max_bytes}
        )
    try:
        return canonical_loads(raw)
    except ValidationError:
        raise ValidationError("the file is not valid JSON", reason="invalid_json", details={"option": option}) from None


def _read_result(path: str, option: str) -> Any:
    from adk_actors.evaluation.results import MAX_RESULT_BYTES

    return _read_json(path, option, MAX_RESULT_BYTES)


def default_metrics(eval_set: Any) -> list[dict[str, Any]]:
    """The metrics ``adk eval run`` uses without ``--criteria``: ``exact_response`` (``strip``) when a turn of the
    set expects a response, ``trajectory_exact`` (arguments exact) when a turn expects tool uses."""
    turns = [turn for case in eval_set.cases for turn in case.turns]
    metrics: list[dict[str, Any]] = []
    if any(turn.expected_response is not None for turn in turns):
        metrics.append({"id": "exact_response", "criterion": "exact_response", "config": {"normalization": "strip"}})
    if any(turn.expected_tool_uses is not None for turn in turns):
        metrics.append({"id": "trajectory_exact", "criterion": "trajectory_exact", "config": {"args": "exact"}})
    return metrics


def _criteria(path: str | None, eval_set: Any) -> Any:
    if path is None:
        return default_metrics(eval_set)
    data = _read_json(path, "--criteria", _MAX_OPTION_FILE_BYTES)
    if isinstance(data, dict) and set(data) == {"metrics"}:
        data = data["metrics"]
    from adk_actors.evaluation.model import metric_specs

    return metric_specs(data)


def _tolerances(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    data = _read_json(path, "--metric-tolerances", _MAX_OPTION_FILE_BYTES)
    if not isinstance(data, dict):
        raise ValidationError(
            "--metric-tolerances is a JSON object of metric ids",
            reason="invalid_value",
            details={"key": "--metric-tolerances"},
        )
    return data


def load_target(spec: str) -> Any:
    """The evaluation target of ``--agent``: an agent JSON file (a path that exists, or ends in ``.json``), else
    ``pkg.module:name`` naming an ``AgentTarget`` or an ``Agent``.

    Raises:
        ConfigError: ``invalid_agent`` (details ``key``: ``--agent``) for a name that does not import or names
            something else; the agent file's own reasons (``config_not_found``, ``secret_in_config``...).
    """
    from adk_actors.agents import Agent
    from adk_actors.evaluation.runner import AgentTarget, resolve_target

    if os.path.exists(spec) or spec.endswith(".json") or ":" not in spec:
        return resolve_target(spec)
    module_name, _, attr = spec.partition(":")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # an import runs arbitrary code: any failure is "cannot import", by type only
        raise ConfigError(
            "--agent names nothing importable",
            reason="invalid_agent",
            details={"key": "--agent", "error": type(exc).__name__},
        ) from None
    if not isinstance(value, AgentTarget | Agent):
        raise ConfigError(
            "--agent pkg.module:name must name an AgentTarget or an Agent",
            reason="invalid_agent",
            details={"key": "--agent", "type": type(value).__name__},
        )
    return value


def _with_endpoint(target: Any, args: argparse.Namespace, base_url: str | None) -> Any:
    """The target pointed at the emulator (``base_url``) or at ``--base-url`` / the settings' endpoint, with the
    placeholder key on a loopback endpoint when no key is configured (``adk run``'s rules)."""
    from adk_actors.cli.launch import LOCAL_KEY, LaunchOptions, apply_endpoint
    from adk_actors.evaluation.runner import AgentTarget, resolve_target
    from adk_actors.settings import load_settings

    resolved = resolve_target(target)
    config = dict(resolved.config)
    if base_url is not None:
        config["base_url"] = base_url
        config["api_key"] = LOCAL_KEY
    else:
        options = LaunchOptions(config_path="", port=args.port, base_url=args.base_url)
        apply_endpoint(config, options, load_settings())
    return AgentTarget(resolved.name, config, resolved.tools, resolved.runner_options)


# ---- output ---------------------------------------------------------------------------------------------------------
def _render(document: Mapping[str, Any], fmt: str, result: Mapping[str, Any] | None = None) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if fmt == "html":
        from adk_actors.evaluation.report import render_html

        return render_html(document, result=result)
    from adk_actors.evaluation.results import render_markdown

    return render_markdown(document, result=result)


def _write(text: str, output: str | None) -> None:
    """The document to ``output`` (written whole, then renamed into place) or to stdout.

    Raises:
        ValidationError: ``output_not_writable``.
    """
    if output is None:
        sys.stdout.write(safe(text))
        sys.stdout.flush()
        return
    target = Path(output)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(safe(text), encoding="utf-8")
        os.replace(partial, target)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise ValidationError(
            "the output file cannot be written", reason="output_not_writable", details={"option": "--output"}
        ) from None


class Progress:
    """Progress on stderr: a redrawn bar on a terminal, one ``done/total status case#sample`` line otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.drawn = False

    def __call__(self, event: Mapping[str, Any]) -> None:
        done, total = int(event.get("done", 0)), int(event.get("total", 0))
        label = f"{event.get('case_id', '')}#{event.get('sample', 0)}"
        if self.tty:
            width = 30
            filled = width * done // total if total else width
            line = f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {event.get('status', '')} {label}"
            self.stream.write(safe(line[:120]) + "\x1b[K")
            self.drawn = True
        else:
            self.stream.write(safe(f"{done}/{total} {event.get('status', '')} {label}") + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _exit_status(result: Mapping[str, Any], comparison: Mapping[str, Any] | None) -> int:
    if result["status"] in ("error", "cancelled"):
        return EXIT_ERROR
    if result["status"] != "passed" or (comparison is not None and not comparison["passed"]):
        return EXIT_FAILED
    return EXIT_PASSED


def _failed(err: AdkError) -> int:
    _report(err)
    return EXIT_INVALID if isinstance(err, _INVALID_INPUT) else EXIT_ERROR


# ---- commands -------------------------------------------------------------------------------------------------------
def run_command(args: argparse.Namespace) -> int:
    """``adk eval run``; returns the exit status."""
    try:
        from adk_actors.evaluation.adk_format import load_eval_set
        from adk_actors.evaluation.runner import EvalOptions

        if args.script is not None and not args.emulator:
            raise ConfigError("--script needs --emulator", reason="invalid_value", details={"key": "--script"})
        if args.emulator and args.base_url is not None:
            raise ConfigError(
                "--emulator and --base-url are mutually exclusive",
                reason="invalid_value",
                details={"key": "--base-url"},
            )
        eval_set = load_eval_set(args.set)
        metrics = _criteria(args.criteria, eval_set)
        options = EvalOptions(
            samples=args.samples, concurrency=args.concurrency, sample_concurrency=args.sample_concurrency
        )
        tolerances = _tolerances(args.metric_tolerances)
        baseline = None if args.baseline is None else _read_result(args.baseline, "--baseline")
        if baseline is not None:
            from adk_actors.evaluation.results import validate_result

            baseline = validate_result(baseline)
        target = load_target(args.agent)
        progress = Progress(sys.stderr)
        try:
            result = _evaluate(target, eval_set, metrics, options, args, progress)
        finally:
            progress.close()
        comparison = None
        if baseline is not None:
            from adk_actors.evaluation.results import compare

            comparison = compare(
                baseline, result, max_pass_rate_drop=args.max_pass_rate_drop, metric_tolerances=tolerances
            )
        if comparison is not None and args.format != "json":
            text = _render(comparison, args.format, result)
        else:
            text = _render(result, args.format)
        _write(text, args.output)
        if comparison is not None and args.format == "json":
            print_json({"comparison": comparison}, sys.stderr)
    except AdkError as err:
        return _failed(err)
    return _exit_status(result, comparison)


def _evaluate(
    target: Any, eval_set: Any, metrics: Any, options: Any, args: argparse.Namespace, progress: Progress
) -> dict[str, Any]:
    from adk_actors.evaluation.runner import run_eval

    with _node(args) as (handle, base_url):
        target = _with_endpoint(target, args, base_url)
        return run_eval(target, eval_set, metrics, options, system=handle, progress=progress)


@contextlib.contextmanager
def _node(args: argparse.Namespace) -> Iterator[tuple[Any, str | None]]:
    """The emulator (``--emulator``) and the system (attached with ``--port``, else an ephemeral owned node),
    stopped in reverse order when the block ends."""
    from adk_actors.cli.launch import start_emulator, start_ephemeral
    from adk_actors.runtime.system import attach
    from adk_actors.settings import load_settings

    settings = load_settings()
    with contextlib.ExitStack() as stack:
        base_url = None
        if args.emulator:
            base_url = start_emulator(stack, args.script)
        if args.port is not None:
            handle = attach(args.port, settings, make_default=False)
            stack.callback(handle.detach)
        else:
            handle = start_ephemeral(settings)
            stack.callback(handle.stop)
        yield handle, base_url


def render_command(args: argparse.Namespace) -> int:
    """``adk eval render``; returns the exit status (0, or 2 for an invalid document)."""
    try:
        document = _read_result(args.document, "RESULT")
        if args.format == "json":
            from adk_actors.evaluation.results import COMPARISON_SCHEMA, validate_comparison, validate_result

            comparison = isinstance(document, dict) and document.get("schema") == COMPARISON_SCHEMA
            document = validate_comparison(document) if comparison else validate_result(document)
        _write(_render(document, args.format), args.output)
    except AdkError as err:
        return _failed(err)
    return EXIT_PASSED


def compare_command(args: argparse.Namespace) -> int:
    """``adk eval compare``; returns 0 when nothing regressed, 1 when something did, 2 for invalid input."""
    try:
        from adk_actors.evaluation.results import compare

        baseline = _read_result(args.baseline, "BASELINE")
        current = _read_result(args.current, "CURRENT")
        comparison = compare(
            baseline,
            current,
            max_pass_rate_drop=args.max_pass_rate_drop,
            metric_tolerances=_tolerances(args.metric_tolerances),
        )
        _write(_render(comparison, args.format, current if args.format != "json" else None), args.output)
    except AdkError as err:
        return _failed(err)
    return EXIT_PASSED if comparison["passed"] else EXIT_FAILED
