"""Running an evaluation: every (case, sample) in its own fresh agent and session, with bounded concurrency,
deadlines, cancellation and a cleanup that always runs.

::

    from adk_actors.evaluation import EvalSet, metric_specs
    from adk_actors.evaluation.runner import AgentTarget, EvalOptions, run_eval

    target = AgentTarget("Helper", {"provider": "gemini", "instructions": "Be concise."})
    result = run_eval(target, EvalSet.from_dict(data), metric_specs([...]), EvalOptions(samples=2, concurrency=8))
    result["status"]                                   # "passed" | "failed" | "error" | "cancelled"

**Isolation.** A sample spawns a fresh agent (``<target name>_<random suffix>``, the target's config and tools, a
permanent agent supervised by its host like any other), makes a :class:`~adk_actors.runner.Runner` over the node's
session service with the target's ``runner_options``, and creates a fresh session (app ``eval_<target name>``, a user
id and session id of its own) seeded with the case's ``initial_state``. The case's turns run in order, one Runner
invocation each; a failed turn records its error and ends the sample (later turns do not run). Session and
``user:`` state therefore never leak between samples; ``app:`` state is the app's, shared as in production.
Afterwards -- always: on success, failure, timeout, cancellation and ``KeyboardInterrupt`` -- the agent is stopped and
the session deleted. Every live agent and session is held in a registry that the run drains at the end.

**Bounds.** At most ``concurrency`` cases run at once and at most ``sample_concurrency`` samples of one case (one
thread each; the turns of a sample stay ordered). ``case_timeout_s`` bounds one sample: it is the Runner's
``run_timeout`` (unless the target sets a shorter one) and a watchdog stops the sample's agent at the deadline, so a
hung turn fails (``case_timeout``). ``overall_timeout_s`` bounds the whole run: samples that have not started are
reported ``not_run``, running ones are stopped (``overall_timeout``).

**Cancellation.** Setting ``cancel`` (a :class:`threading.Event`) or a ``KeyboardInterrupt`` in the calling thread
starts nothing more, stops the agents of the running samples (their turn fails: ``cancelled``), cleans everything
up and returns the result with status ``cancelled``.

**Memory.** A trace keeps the response text (cut to :data:`MAX_RESPONSE_CHARS` after scoring, dropped unless
``capture_responses``) and the tool calls (arguments dropped unless ``capture_tool_args``); events are read per
turn and not kept.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from adk_actors.agents import Agent, AgentRef, build_spec, check_agent_name, spawn_agent, stop_agent
from adk_actors.agents.turn.options import runner_options as check_runner_options
from adk_actors.errors import AdkError, AgentError, ConfigError, ValidationError
from adk_actors.evaluation.model import (
    MAX_TOOL_USES,
    EvalCase,
    EvalSet,
    MetricSpec,
    SampleTrace,
    Score,
    ToolUse,
    TurnTrace,
    metric_specs,
)
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.sessions.model import SessionRef

__all__ = [
    "CANCEL_POLL_S",
    "MAX_RESPONSE_CHARS",
    "AgentTarget",
    "EvalOptions",
    "eval_app_name",
    "resolve_target",
    "run_eval",
]

MAX_RESPONSE_CHARS: Final = 4096
"""A captured response is cut to this many characters (after scoring, which sees it whole)."""
CANCEL_POLL_S: Final = 0.1
"""How often the scheduler looks at a caller's ``cancel`` event (an Event cannot wake another waiter)."""
_SLACK_S: Final = 5.0
"""Beyond a sample's deadline, how long one Runner call may still wait (the watchdog stops the agent first)."""
_NAME_PREFIX_CHARS: Final = 48
_MIB: Final = 1024 * 1024


# ---- options --------------------------------------------------------------------------------------------------------
def _bad_option(name: str, rule: str) -> ValidationError:
    return ValidationError(
        f"invalid evaluation option {name}: {rule}",
        reason="invalid_eval_options",
        details={"field": name, "rule": rule},
    )


def _int_option(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad_option(name, f"an integer in {low}..{high}")
    return value


def _number_option(value: Any, name: str, low: float, high: float, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad_option(name, "a number")
    number = float(value) if isinstance(value, float) or abs(value) < 2**53 else math.inf
    if not math.isfinite(number) or number > high or number < low or (open_low and number <= low):
        raise _bad_option(name, f"a number in {'(' if open_low else '['}{low:g}, {high:g}]")
    return number


def _bool_option(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _bad_option(name, "a boolean")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalOptions:
    """How an evaluation runs and how its gate decides (validated on construction).

    Raises:
        ValidationError: reason ``invalid_eval_options``, ``details`` ``field`` and ``rule``.
    """

    samples: int = 1
    """Independent samples of each case (1..100)."""
    concurrency: int = 4
    """Cases run at once (1..256)."""
    sample_concurrency: int = 1
    """Samples of one case run at once (1..64)."""
    pass_rate_threshold: float = 1.0
    """The set passes when at least this share of its cases passed (0..1)."""
    sample_pass_rate_threshold: float = 1.0
    """A case passes when at least this share of its successful samples passed (0..1)."""
    min_successful_samples: int | None = None
    """A case with fewer non-error samples is an error (1..samples; ``None``: every sample)."""
    empty_criteria: Literal["fail", "pass"] = "fail"
    """What a sample with nothing scored is: ``fail`` (reason ``no_criteria_scored``) or ``pass``."""
    case_timeout_s: float = 300.0
    """Seconds one sample (all its turns) may take, in (0, 86400]."""
    overall_timeout_s: float | None = None
    """Seconds the whole run may take, in (0, 604800], or ``None`` (unbounded)."""
    capture_responses: bool = True
    """Keep the response texts in the result (cut to 4096 characters)."""
    capture_tool_args: bool = False
    """Keep tool-call arguments in the result (names are always kept)."""
    max_report_bytes: int = 64 * _MIB
    """Largest result JSON (1 KiB..1 GiB)."""

    def __post_init__(self) -> None:
        _int_option(self.samples, "samples", 1, 100)
        _int_option(self.concurrency, "concurrency", 1, 256)
        _int_option(self.sample_concurrency, "sample_concurrency", 1, 64)
        object.__setattr__(
            self, "pass_rate_threshold", _number_option(self.pass_rate_threshold, "pass_rate_threshold", 0.0, 1.0)
        )
        object.__setattr__(
            self,
            "sample_pass_rate_threshold",
            _number_option(self.sample_pass_rate_threshold, "sample_pass_rate_threshold", 0.0, 1.0),
        )
        if self.min_successful_samples is not None:
            _int_option(self.min_successful_samples, "min_successful_samples", 1, self.samples)
        if self.empty_criteria not in ("fail", "pass"):
            raise _bad_option("empty_criteria", "fail or pass")
        object.__setattr__(
            self, "case_timeout_s", _number_option(self.case_timeout_s, "case_timeout_s", 0.0, 86400.0, open_low=True)
        )
        if self.overall_timeout_s is not None:
            object.__setattr__(
                self,
                "overall_timeout_s",
                _number_option(self.overall_timeout_s, "overall_timeout_s", 0.0, 604800.0, open_low=True),
            )
        _bool_option(self.capture_responses, "capture_responses")
        _bool_option(self.capture_tool_args, "capture_tool_args")
        _int_option(self.max_report_bytes, "max_report_bytes", 1024, 1024 * _MIB)

    @property
    def required_samples(self) -> int:
        """``min_successful_samples``, or every sample when it is ``None``."""
        return self.samples if self.min_successful_samples is None else self.min_successful_samples

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON values (the result's ``options``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> EvalOptions:
        """Options from a JSON object (unknown keys refused).

        Raises:
            ValidationError: reason ``invalid_eval_options``.
        """
        if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
            raise _bad_option("$", "an object is expected")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k[:64] for k in data if k not in known)
        if unknown:
            raise _bad_option(unknown[0], "unknown key")
        return cls(**dict(data))


# ---- the target -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AgentTarget:
    """The agent under evaluation: what each sample spawns a fresh copy of.

    ``name`` is the agent name the copies derive theirs from, ``config`` the dict config (as ``spawn_agent`` takes
    it), ``tools`` its tools and ``runner_options`` the Runner's keyword options (``max_llm_calls``,
    ``run_timeout``...; ``streaming_mode`` is the evaluation's and not accepted).

    Raises:
        AgentError: an invalid name (``invalid_agent_name``).
        ConfigError: ``invalid_value`` (``details["key"]``: ``config``, ``tools`` or ``runner_options``).
    """

    name: str
    config: Mapping[str, Any]
    tools: Sequence[Any] = ()
    runner_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_agent_name(self.name)
        if not isinstance(self.config, Mapping) or not all(isinstance(k, str) for k in self.config):
            raise ConfigError("the target's config is a dict", reason="invalid_value", details={"key": "config"})
        if not isinstance(self.tools, list | tuple):
            raise ConfigError("the target's tools are a list", reason="invalid_value", details={"key": "tools"})
        if not isinstance(self.runner_options, Mapping) or not all(isinstance(k, str) for k in self.runner_options):
            raise ConfigError(
                "the target's runner_options are a dict", reason="invalid_value", details={"key": "runner_options"}
            )
        object.__setattr__(self, "config", dict(self.config))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "runner_options", dict(self.runner_options))

    @property
    def model(self) -> str:
        """The configured model id (``""``: the provider's default)."""
        model = self.config.get("model")
        return model if isinstance(model, str) else ""


def resolve_target(target: Any) -> AgentTarget:
    """An :class:`AgentTarget` from a target, an :class:`~adk_actors.Agent` value, or the path of an agent JSON file
    (as ``adk run`` reads it: ``adk_actors.cli.agent_file``).

    Raises:
        ConfigError: an agent file that does not load (``config_not_found``, ``invalid_json``,
            ``secret_in_config``...), or ``invalid_value`` for a value of another type.
        AgentError: an invalid agent name.
    """
    if isinstance(target, AgentTarget):
        return target
    if isinstance(target, Agent):
        return AgentTarget(target.name, target.config(), target.tools)
    if isinstance(target, str | os.PathLike):
        from adk_actors.cli.agent_file import load_agent_file

        loaded = load_agent_file(target)
        # The file's "name" names the target; each sample's agent gets a name of its own (spawn_agent refuses a
        # config whose name differs from the agent's).
        config = {k: v for k, v in loaded.config.items() if k != "name"}
        return AgentTarget(loaded.name, config, loaded.tools, loaded.runner_options)
    raise ConfigError(
        "an evaluation target is an AgentTarget, an Agent or an agent file path",
        reason="invalid_value",
        details={"key": "target", "type": type(target).__name__},
    )


def eval_app_name(target_name: str) -> str:
    """The app the evaluation sessions of ``target_name`` belong to."""
    return f"eval_{target_name}"


def _runner_options(target: AgentTarget, case_timeout_s: float) -> dict[str, Any]:
    """The target's Runner options with ``run_timeout`` bounded by the sample's timeout (validated).

    Raises:
        ConfigError: as :func:`~adk_actors.agents.turn.options.runner_options`, the key prefixed
            ``runner_options.``; ``streaming_mode`` is refused.
    """
    options = dict(target.runner_options)
    if "streaming_mode" in options:
        raise ConfigError(
            "streaming_mode is the evaluation's choice",
            reason="unknown_key",
            details={"key": "runner_options.streaming_mode"},
        )
    limit = max(1, math.ceil(case_timeout_s * 1000))
    given = options.get("run_timeout")
    if given is None or (isinstance(given, int) and not isinstance(given, bool) and given > limit):
        options["run_timeout"] = limit
    try:
        check_runner_options(**options)
    except ConfigError as err:
        key = err.details.get("key")
        details = {**err.details, "key": f"runner_options.{key}"} if isinstance(key, str) else dict(err.details)
        raise ConfigError(
            "invalid runner_options of the evaluation target", reason=err.reason, details=details
        ) from None
    return options


# ---- live resources -------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class _Job:
    """One sample: what it runs, its deadline, and the resources it holds while it runs."""

    case_index: int
    sample: int
    deadline: float
    aborted: str | None = None
    agent: AgentRef | None = None
    session: SessionRef | None = None


class _Live:
    """The agents and sessions held by running samples; :meth:`abort` stops one sample's agent (its turn fails),
    :meth:`drain` releases whatever is left. Registration and abort share one lock, so an agent spawned after
    its sample was aborted is noticed by the sample itself."""

    def __init__(self, handle: ActorSystemHandle, sessions: Any) -> None:
        self.handle = handle
        self.sessions = sessions
        self.lock = threading.Lock()
        self.jobs: set[_Job] = set()

    def hold_agent(self, job: _Job, ref: AgentRef) -> bool:
        """Record the sample's agent; ``False`` (stop it yourself) when the sample was aborted meanwhile."""
        with self.lock:
            job.agent = ref
            self.jobs.add(job)
            return job.aborted is None

    def hold_session(self, job: _Job, ref: SessionRef) -> None:
        with self.lock:
            job.session = ref
            self.jobs.add(job)

    def abort(self, job: _Job, reason: str) -> None:
        with self.lock:
            if job.aborted is not None:
                return
            job.aborted = reason
            agent = job.agent
        if agent is not None:
            _stop_agent(self.handle, agent)

    def release(self, job: _Job) -> None:
        """Stop the sample's agent and delete its session (each at most once, errors ignored)."""
        with self.lock:
            agent, session = job.agent, job.session
            job.agent = job.session = None
            self.jobs.discard(job)
        if agent is not None:
            _stop_agent(self.handle, agent)
        if session is not None:
            try:
                self.sessions.delete_session(session)
            except AdkError:
                pass  # the store is gone with its node: nothing is left to delete

    def drain(self) -> None:
        with self.lock:
            jobs = list(self.jobs)
        for job in jobs:
            self.release(job)


def _stop_agent(handle: ActorSystemHandle, agent: AgentRef) -> None:
    try:
        stop_agent(agent, system=handle)
    except AdkError:
        pass  # already stopped (by an abort or the sample's own cleanup), or its node is gone


# ---- one sample -----------------------------------------------------------------------------------------------------
def _error_of(exc: BaseException, job: _Job) -> dict[str, str]:
    """A structural error record: an abort's reason wins over the failure it caused."""
    if job.aborted is not None:
        return {"reason": job.aborted, "type": "Aborted"}
    if isinstance(exc, AdkError):
        return {"reason": exc.reason, "type": type(exc).__name__}
    return {"reason": "turn_failed", "type": type(exc).__name__}


def _response_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    data = output.to_dict() if callable(getattr(output, "to_dict", None)) else output
    if isinstance(data, Mapping) and isinstance(data.get("parts"), list | tuple):
        return "".join(
            str(p.get("text", ""))
            for p in data["parts"]
            if isinstance(p, Mapping) and p.get("type", "text") == "text" and not p.get("thought")
        )
    from adk_actors.content.canonical import canonical_dumps

    try:
        return canonical_dumps(data)
    except AdkError:
        return ""


def _new_tool_uses(events: Sequence[Any], seen: set[str]) -> tuple[ToolUse, ...]:
    """The function calls of the events of invocations not ``seen`` before (non-user authors, call order)."""
    found: list[ToolUse] = []
    for event in events:
        if event.invocation_id in seen or event.partial or event.author == "user" or event.content is None:
            continue
        for part in event.content.parts:
            if getattr(part, "type", None) == "function_call" and len(found) < MAX_TOOL_USES:
                found.append(ToolUse(name=part.name, args=dict(part.args)))
    return tuple(found)


@dataclass
class _Run:
    """What every sample of one evaluation shares."""

    handle: ActorSystemHandle
    sessions: Any
    live: _Live
    target: AgentTarget
    eval_set: EvalSet
    metrics: tuple[MetricSpec, ...]
    options: EvalOptions
    runner_options: dict[str, Any]
    judge: Callable[..., Any] | None
    score_sample: Callable[..., list[Score]]
    run_token: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:8])
    slots: queue.SimpleQueue[int] = dataclasses.field(default_factory=queue.SimpleQueue)

    def __post_init__(self) -> None:
        for slot in range(self.options.concurrency * self.options.sample_concurrency):
            self.slots.put(slot)

    def sample(self, job: _Job) -> tuple[SampleTrace, list[Score]]:
        case = self.eval_set.cases[job.case_index]
        started = time.monotonic()
        turns: list[TurnTrace] = []
        error: dict[str, str] | None = None
        slot = self.slots.get()
        try:
            error = self._turns(job, case, turns, slot)
        except Exception as exc:  # setting up the sample failed: an error sample, never a crash of the run
            error = _error_of(exc, job)
        finally:
            self.live.release(job)
            self.slots.put(slot)
        trace = SampleTrace(
            case_id=case.id,
            sample=job.sample,
            turns=tuple(turns),
            error=error,
            duration_ms=(time.monotonic() - started) * 1000.0,
        )
        return self._slim(trace), self._score(case, trace)

    def _agent(self, token: str, slot: int) -> AgentRef:
        """A fresh agent for one sample. Its name is its running slot's (``<target>_<run>_<slot>``: a name is
        reused only after the sample holding it stopped its agent), so an evaluation of any size adds at most
        ``concurrency * sample_concurrency`` agent names to the node's metrics series. Should a previous holder not
        have stopped, the sample takes a name of its own."""
        prefix = self.target.name[:_NAME_PREFIX_CHARS]
        try:
            return spawn_agent(
                f"{prefix}_{self.run_token}_{slot}", self.target.config, self.target.tools, system=self.handle
            )
        except AgentError as err:
            if err.reason != "already_started":
                raise
        return spawn_agent(f"{prefix}_{token}", self.target.config, self.target.tools, system=self.handle)

    def _turns(self, job: _Job, case: EvalCase, turns: list[TurnTrace], slot: int) -> dict[str, str] | None:
        from adk_actors.runner import Runner
        from adk_actors.runs import Paused

        token = uuid.uuid4().hex[:12]
        if job.aborted is not None:
            return {"reason": job.aborted, "type": "Aborted"}
        ref = self._agent(token, slot)
        if not self.live.hold_agent(job, ref):
            return {"reason": str(job.aborted), "type": "Aborted"}
        session = self.sessions.create_session(
            app_name=eval_app_name(self.target.name),
            user_id=f"eval_{token}",
            session_id=f"s_{token}",
            state=case.initial_state,
            if_exists="error",
        )
        self.live.hold_session(job, session.ref)
        runner = Runner(ref, session.ref.app_name, self.sessions, system=self.handle, **self.runner_options)
        seen: set[str] = {e.invocation_id for e in session.events}
        for turn in case.turns:
            began = time.monotonic()
            try:
                if job.aborted is not None:
                    raise AgentError("the sample was stopped", reason=job.aborted)
                output = runner.run(
                    session.ref.user_id,
                    session.ref.session_id,
                    turn.input,
                    timeout=max(0.0, job.deadline - began) + _SLACK_S,
                )
                if isinstance(output, Paused):
                    raise AgentError("the agent paused the invocation", reason="paused")
                events = self.sessions.get_session(session.ref).events
                tool_uses = _new_tool_uses(events, seen)
                seen.update(e.invocation_id for e in events)
            except Exception as exc:
                if time.monotonic() >= job.deadline:  # the Runner's own run_timeout may beat the watchdog to it
                    self.live.abort(job, "case_timeout")
                failed = _error_of(exc, job)
                turns.append(TurnTrace(turn.id, error=failed, duration_ms=(time.monotonic() - began) * 1000.0))
                return failed
            turns.append(
                TurnTrace(
                    turn.id,
                    response=_response_text(output),
                    tool_uses=tool_uses,
                    duration_ms=(time.monotonic() - began) * 1000.0,
                )
            )
        return None

    def _score(self, case: EvalCase, trace: SampleTrace) -> list[Score]:
        try:
            return list(self.score_sample(case, trace, self.metrics, judge=self.judge))
        except Exception as exc:  # the scorer itself broke: every metric is an error, never a pass
            return [
                Score(
                    metric_id=m.id,
                    status="error",
                    threshold=m.threshold,
                    reason="metric_failed",
                    details={"type": type(exc).__name__},
                )
                for m in self.metrics
            ]

    def _slim(self, trace: SampleTrace) -> SampleTrace:
        """The trace as the result keeps it (scoring has already seen it whole)."""
        keep_text, keep_args = self.options.capture_responses, self.options.capture_tool_args
        turns = tuple(
            dataclasses.replace(
                t,
                response=t.response[:MAX_RESPONSE_CHARS] if keep_text else "",
                tool_uses=t.tool_uses if keep_args else tuple(ToolUse(u.name) for u in t.tool_uses),
            )
            for t in trace.turns
        )
        return dataclasses.replace(trace, turns=turns)


def _sample_status(trace: SampleTrace, scores: Sequence[Score], options: EvalOptions) -> str:
    """The progress line's status of a sample (the result's own accounting is ``results.build_result``'s)."""
    if trace.error is not None:
        return "error"
    if any(s.status in ("failed", "error") for s in scores):
        return "failed"
    if any(s.status == "passed" for s in scores):
        return "passed"
    return "passed" if options.empty_criteria == "pass" else "failed"


# ---- the scheduler --------------------------------------------------------------------------------------------------
class _Schedule:
    """Which sample starts next: cases in set order, at most ``concurrency`` open at once and at most
    ``sample_concurrency`` running samples of one case. Pure bookkeeping (no threads, no clock)."""

    def __init__(self, cases: int, options: EvalOptions) -> None:
        self.samples = options.samples
        self.concurrency = options.concurrency
        self.sample_concurrency = options.sample_concurrency
        self.queued: deque[int] = deque(range(cases))
        self.next_sample: dict[int, int] = {}
        """Open cases with samples still to start -> the next sample number."""
        self.running: dict[int, int] = {}
        self.finished: dict[int, int] = {}
        self.open = 0
        """Cases started and not finished."""

    def take(self) -> list[tuple[int, int]]:
        """The samples that may start now (and mark them running)."""
        out: list[tuple[int, int]] = []
        for case in list(self.next_sample):
            self._fill(case, out)
        while self.queued and self.open < self.concurrency:
            case = self.queued.popleft()
            self.next_sample[case], self.running[case], self.finished[case] = 1, 0, 0
            self.open += 1
            self._fill(case, out)
        return out

    def _fill(self, case: int, out: list[tuple[int, int]]) -> None:
        while case in self.next_sample and self.running[case] < self.sample_concurrency:
            sample = self.next_sample[case]
            out.append((case, sample))
            self.running[case] += 1
            if sample >= self.samples:
                del self.next_sample[case]
            else:
                self.next_sample[case] = sample + 1

    def done(self, case: int) -> None:
        self.running[case] -= 1
        self.finished[case] += 1
        if self.finished[case] == self.samples:
            self.open -= 1

    def not_started(self) -> list[tuple[int, int]]:
        """Every sample never started, in case order then sample order; afterwards nothing is left to start."""
        out = [(c, s) for c, first in self.next_sample.items() for s in range(first, self.samples + 1)]
        out += [(c, s) for c in self.queued for s in range(1, self.samples + 1)]
        self.next_sample.clear()
        self.queued.clear()
        return sorted(out)

    def pending(self) -> bool:
        return bool(self.queued or self.next_sample)


def _check_metrics(metrics: Sequence[MetricSpec], criteria: Any) -> None:
    for spec in metrics:
        criteria.check_metric_config(spec)


def _spawn_sub_agents(agent: Agent, handle: ActorSystemHandle, started: list[AgentRef]) -> None:
    """Spawn the ``Agent``-valued sub-agents of an ``Agent`` target once (depth first), shared by every sample;
    those running already are used as they are."""
    for sub in agent.sub_agents:
        if isinstance(sub, Agent):
            _spawn_sub_agents(sub, handle, started)
            try:
                started.append(spawn_agent(sub.name, sub.config(), sub.tools, system=handle))
            except AgentError as err:
                if err.reason != "already_started":
                    raise


def run_eval(
    target: Any,
    eval_set: EvalSet | Mapping[str, Any],
    metrics: Sequence[MetricSpec | Mapping[str, Any]],
    options: EvalOptions | None = None,
    *,
    system: ActorSystemHandle | None = None,
    judge: Callable[..., Any] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run every case of ``eval_set`` ``options.samples`` times against fresh copies of ``target`` and score them.

    Args:
        target: An :class:`AgentTarget`, an :class:`~adk_actors.Agent` value (its ``Agent``-valued sub-agents are
            spawned once and shared by the samples), or the path of an agent JSON file.
        eval_set: An :class:`~adk_actors.evaluation.EvalSet` or its JSON (validated).
        metrics: Metric specs or their JSON (validated, each checked by ``criteria.check_metric_config``).
        options: :class:`EvalOptions` (default: the defaults).
        system: The node (default: the current system).
        judge: The LLM judge callable handed to the scorer (``llm_judge`` metrics).
        progress: Called in the calling thread after each sample with ``{"done", "total", "case_id", "sample",
            "status"}``; an exception it raises is swallowed and ends further progress calls.
        cancel: Set it to stop the evaluation (also ``KeyboardInterrupt``): the result comes back ``cancelled``.

    Returns:
        The result JSON of :func:`adk_actors.evaluation.results.build_result`.

    Raises:
        ValidationError: ``invalid_eval_set``, ``invalid_metric``, ``invalid_eval_options`` -- before anything runs.
        ConfigError, AgentError, ToolError, SchemaError: an invalid target (checked before anything runs).
    """
    from adk_actors.evaluation import criteria, results
    from adk_actors.node import session_service

    options = EvalOptions() if options is None else options
    if not isinstance(options, EvalOptions):
        raise _bad_option("options", "an EvalOptions value")
    if not isinstance(eval_set, EvalSet):
        eval_set = EvalSet.from_dict(eval_set)
    specs = metric_specs(metrics)
    _check_metrics(specs, criteria)
    resolved = resolve_target(target)
    build_spec(resolved.name, resolved.config, resolved.tools)
    run_opts = _runner_options(resolved, options.case_timeout_s)
    handle = system if system is not None else current_system()
    sessions = session_service(system=handle)
    live = _Live(handle, sessions)
    run = _Run(
        handle=handle,
        sessions=sessions,
        live=live,
        target=resolved,
        eval_set=eval_set,
        metrics=specs,
        options=options,
        runner_options=run_opts,
        judge=judge,
        score_sample=criteria.score_sample,
    )
    shared: list[AgentRef] = []
    started_at = time.time()
    try:
        if isinstance(target, Agent):
            _spawn_sub_agents(target, handle, shared)
        outcome = _drive(run, progress, cancel)
    finally:
        live.drain()
        for ref in reversed(shared):
            _stop_agent(handle, ref)
    samples, not_run, stopped = outcome
    return results.build_result(
        eval_set,
        specs,
        options,
        samples,
        agent={"name": resolved.name, "model": resolved.model},
        started_at=started_at,
        finished_at=time.time(),
        cancelled=stopped == "cancelled",
        not_run=not_run,
    )


def _drive(
    run: _Run, progress: Callable[[dict[str, Any]], None] | None, cancel: threading.Event | None
) -> tuple[list[tuple[SampleTrace, list[Score]]], list[tuple[str, int]], str | None]:
    """Run the samples under the schedule's bounds; returns (samples in case/sample order, not run, why stopped)."""
    options, cases = run.options, run.eval_set.cases
    schedule = _Schedule(len(cases), options)
    total = len(cases) * options.samples
    overall = None if options.overall_timeout_s is None else time.monotonic() + options.overall_timeout_s
    done: list[tuple[int, SampleTrace, list[Score]]] = []
    not_run: list[tuple[int, int]] = []
    running: dict[concurrent.futures.Future[tuple[SampleTrace, list[Score]]], _Job] = {}
    stopped: str | None = None
    workers = max(1, min(total, options.concurrency * options.sample_concurrency))
    pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="adk-eval")

    def stop(reason: str) -> None:
        nonlocal stopped
        if stopped is None:
            stopped = reason
        not_run.extend(schedule.not_started())
        for job in list(running.values()):
            run.live.abort(job, reason)

    try:
        while True:
            try:
                if stopped is None:
                    if cancel is not None and cancel.is_set():
                        stop("cancelled")
                    elif overall is not None and time.monotonic() >= overall:
                        stop("overall_timeout")
                if stopped is None:
                    for case_index, sample in schedule.take():
                        job = _Job(case_index, sample, time.monotonic() + options.case_timeout_s)
                        running[pool.submit(run.sample, job)] = job
                if not running:
                    break
                finished, _ = concurrent.futures.wait(
                    running, timeout=_wait_s(running.values(), overall, cancel, stopped), return_when=_FIRST
                )
                for future in finished:
                    job = running[future]
                    trace, scores = _outcome(run, job, future)
                    done.append((job.case_index, trace, scores))
                    del running[future]
                    schedule.done(job.case_index)
                    if progress is not None:
                        try:
                            progress(
                                {
                                    "done": len(done),
                                    "total": total,
                                    "case_id": trace.case_id,
                                    "sample": trace.sample,
                                    "status": _sample_status(trace, scores, options),
                                }
                            )
                        except Exception:  # the caller's display broke: the evaluation goes on without it
                            progress = None
                now = time.monotonic()
                for job in list(running.values()):
                    if job.aborted is None and now >= job.deadline:
                        run.live.abort(job, "case_timeout")
            except KeyboardInterrupt:
                stop("cancelled")
    finally:
        for job in list(running.values()):
            run.live.abort(job, stopped or "cancelled")
        pool.shutdown(wait=True, cancel_futures=True)
    # Every sample is accounted for: one interrupted between finishing and being collected is "not run".
    collected = {(c, t.sample) for c, t, _ in done} | set(not_run)
    not_run += [(c, s) for c in range(len(cases)) for s in range(1, options.samples + 1) if (c, s) not in collected]
    done.sort(key=lambda item: (item[0], item[1].sample))
    not_run.sort()
    samples = [(trace, scores) for _, trace, scores in done]
    return samples, [(cases[c].id, s) for c, s in not_run], stopped


_FIRST = concurrent.futures.FIRST_COMPLETED


def _wait_s(jobs: Any, overall: float | None, cancel: threading.Event | None, stopped: str | None) -> float:
    """How long the scheduler may wait for a sample to finish: until the next sample deadline (the watchdog), the
    overall deadline, or the next look at ``cancel``."""
    now = time.monotonic()
    wake = min((job.deadline for job in jobs if job.aborted is None), default=now + 3600.0)
    if stopped is None:
        if overall is not None:
            wake = min(wake, overall)
        if cancel is not None:
            wake = min(wake, now + CANCEL_POLL_S)
    return max(0.0, wake - now)


def _outcome(run: _Run, job: _Job, future: concurrent.futures.Future[Any]) -> tuple[SampleTrace, list[Score]]:
    try:
        outcome: tuple[SampleTrace, list[Score]] = future.result()
        return outcome
    except Exception as exc:  # run.sample catches its own failures; this is a bug's last line of defence
        case = run.eval_set.cases[job.case_index]
        trace = SampleTrace(case.id, job.sample, error={"reason": "sample_failed", "type": type(exc).__name__})
        return trace, run._score(case, trace)
