"""An in-process driver for unit tests of the agent turn engine: it executes a :class:`Turn`'s effects with scripted
results, as ``agents/agent_actor.py`` does with I/O threads, workers and calls.

Each batch a turn hands out is submitted as a whole (every effect of it runs at once and its result is kept),
then the results are fed back one at a time, in submission order, so the turn sees what the actor shows it:
results arriving after all of a batch went out. A ``Cancel`` drops the results of the effects it names.

What runs for real, in this process: tool jobs (``execute_tool``), confirmation gates (``check_gate``), callback
hooks (``run_hook``), instruction providers (``resolve_instructions``), plugin hooks (``run_plugin_hook``) and
session calls against the given service (``blocking.session_calls``). What is scripted: model answers, sub-agent
answers, admission permits and the compatibility conversation's store. Any effect can be scripted instead through
``answers`` (keyed by effect type), and effects the test wants to answer itself are held (``hold``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adk_actors.admission.logic import Permit
from adk_actors.agents import blocking
from adk_actors.agents.callbacks import run_hook
from adk_actors.agents.instructions import resolve_instructions
from adk_actors.agents.toolexec import check_gate, execute_tool
from adk_actors.agents.turn import effects as fx
from adk_actors.agents.turn.engine import Turn
from adk_actors.errors import AdkError
from adk_actors.models import ModelResponse, as_response
from adk_actors.plugins.hooks import run_plugin_hook

__all__ = ["FakeClock", "TurnDriver", "call", "calls", "run", "text"]

Result = tuple[Any, AdkError | None]
Answer = Callable[[Any], Any]
"""A scripted answer for one effect: called with the effect, it returns the value or an ``AdkError`` instance
(which is fed back as the effect's error)."""


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def text(value: str) -> ModelResponse:
    """A model answer of plain text."""
    return as_response(value)


def call(name: str, args: Mapping[str, Any] | None = None, call_id: str | None = None) -> dict[str, Any]:
    """One function-call part."""
    part: dict[str, Any] = {"type": "function_call", "name": name, "args": dict(args or {})}
    if call_id is not None:
        part["id"] = call_id
    return part


def calls(*parts: dict[str, Any]) -> ModelResponse:
    """A model answer that calls functions (``call(...)`` parts)."""
    return as_response({"schema_version": 1, "parts": list(parts)})


@dataclass
class TurnDriver:
    """Runs one turn's effects until nothing is left to execute (see the module docstring).

    Args:
        turn: the turn to drive.
        model: answers of the model calls in order (anything ``as_response`` takes, an ``AdkError`` to fail the
            call, or a callable taking the ``CallModel``).
        agents: sub-agent name → its answer (a value, an ``AdkError``, or a callable taking the ``CallAgent``).
        permit: the admission answer (a ``Permit`` or an ``AdkError``).
        conversation: what ``LoadConversation`` answers (a history list or an ``AdkError``).
        save_error: what ``SaveConversation`` fails with (``None``: it succeeds).
        session_error: called with each ``SessionCall``; an ``AdkError`` it returns fails that call unexecuted.
        answers: effect type → answer, replacing the default execution of that type.
        hold: effect types not executed; they wait in ``held`` for the test to :meth:`feed`.
    """

    turn: Turn
    model: list[Any] = field(default_factory=list)
    agents: dict[str, Any] = field(default_factory=dict)
    permit: Any = None
    conversation: Any = field(default_factory=list)
    save_error: AdkError | None = None
    session_error: Callable[[fx.SessionCall], AdkError | None] | None = None
    answers: dict[type, Answer] = field(default_factory=dict)
    hold: tuple[type, ...] = ()
    effects: list[fx.Effect] = field(default_factory=list, init=False)
    """Every effect the turn handed out, in order."""
    batches: list[list[fx.Effect]] = field(default_factory=list, init=False)
    """The effects as the turn handed them out, one list per call into the turn."""
    held: list[Any] = field(default_factory=list, init=False)
    """Effects of the ``hold`` types still waiting for the test's answer."""
    _results: deque[tuple[Any, Result]] = field(default_factory=deque, init=False, repr=False)
    """Results of submitted effects not yet fed back, in submission order."""

    # ---- stepping ---------------------------------------------------------------------------------------------
    def start(self, caller_deadline: float = float("inf")) -> TurnDriver:
        """Start the turn and run it as far as the script goes."""
        self._take(self.turn.start(caller_deadline))
        self._pump()
        return self

    def feed(self, effect: Any, value: Any = None, error: AdkError | None = None) -> list[Any]:
        """Answer a held effect; returns the batch the turn handed out for it (later batches run as usual)."""
        self.held.remove(effect)
        batch = self._take(self.turn.on(effect.id, value, error))
        self._pump()
        return batch

    def progress(self, effect: Any, batch: Any) -> list[Any]:
        """Feed one stream batch of a held ``CallModel``."""
        out = self._take(self.turn.progress(effect.id, batch))
        self._pump()
        return out

    def cancel(self, error: AdkError) -> list[Any]:
        """Cancel the turn (a ``CancelTurn``); returns the batch it handed out."""
        out = self._take(self.turn.cancel(error))
        self._pump()
        return out

    def abort(self, error: AdkError) -> list[Any]:
        """Abort the turn (its agent exits); returns the batch it handed out."""
        out = self._take(self.turn.abort(error))
        self._pump()
        return out

    # ---- what came out ----------------------------------------------------------------------------------------
    def of(self, kind: type) -> list[Any]:
        """The effects of one type, in order."""
        return [e for e in self.effects if isinstance(e, kind)]

    def kinds(self, *ignore: type) -> list[str]:
        """The effect type names in order (minus ``ignore``)."""
        return [type(e).__name__ for e in self.effects if not isinstance(e, ignore)]

    @property
    def end(self) -> fx.Reply | fx.Fail:
        """The turn's answer (exactly one came out)."""
        [answer] = [e for e in self.effects if isinstance(e, fx.Reply | fx.Fail)]
        return answer

    @property
    def value(self) -> Any:
        end = self.end
        assert isinstance(end, fx.Reply), f"the turn failed: {getattr(end, 'error', None)!r}"
        return end.value

    @property
    def error(self) -> AdkError:
        end = self.end
        assert isinstance(end, fx.Fail), f"the turn answered: {getattr(end, 'value', None)!r}"
        return end.error

    # ---- execution --------------------------------------------------------------------------------------------
    def _take(self, batch: list[Any]) -> list[Any]:
        self.batches.append(batch)
        self.effects.extend(batch)
        for effect in batch:
            if isinstance(effect, fx.Cancel):  # a cancelled effect's result never arrives
                self._results = deque(r for r in self._results if r[0].id not in effect.ids)
            elif isinstance(effect, self.hold):
                self.held.append(effect)
            elif getattr(effect, "id", 0):
                self._results.append((effect, self._execute(effect)))
        return batch

    def _pump(self) -> None:
        while self._results:
            effect, (value, error) = self._results.popleft()
            self._take(self.turn.on(effect.id, value, error))

    def _execute(self, effect: Any) -> Result:
        scripted = self.answers.get(type(effect))
        if scripted is not None:
            return _result(scripted(effect))
        try:
            return self._default(effect)
        except AdkError as err:
            return None, err

    def _default(self, effect: Any) -> Result:
        """What the agent actor would get back for ``effect`` (see the module docstring)."""
        if isinstance(effect, fx.CallModel):
            assert self.model, "the model was called more often than scripted"
            answer = self.model.pop(0)
            value, error = _result(answer(effect) if callable(answer) else answer)
            return (None, error) if error is not None else (as_response(value), None)
        if isinstance(effect, fx.RunTool):
            args = (effect.payload, effect.name, effect.args, effect.call_id, effect.context, list(effect.callbacks))
            return execute_tool(*args, effect.runner), None
        if isinstance(effect, fx.CheckGate):
            return check_gate(effect.payload, effect.args, effect.call_id, effect.context), None
        if isinstance(effect, fx.RunHook):
            return run_hook(list(effect.callbacks), effect.hook, effect.args), None
        if isinstance(effect, fx.ResolveInstructions):
            return resolve_instructions(effect.local, effect.global_, effect.scope), None
        if isinstance(effect, fx.RunPlugin):
            return run_plugin_hook(effect.plugin, effect.config, effect.hook, effect.context), None
        if isinstance(effect, fx.CallAgent):
            assert effect.target in self.agents, f"no scripted answer for agent {effect.target}"
            answer = self.agents[effect.target]
            return _result(answer(effect) if callable(answer) else answer)
        if isinstance(effect, fx.AcquirePermit):
            permit = self.permit or Permit(permit_id="permit-1", agent=effect.agent, owner=1)
            return _result(permit)
        if isinstance(effect, fx.SessionCall):
            error = self.session_error(effect) if self.session_error is not None else None
            if error is not None:
                return None, error
            return blocking.session_calls(None, effect.service, effect.ops), None
        if isinstance(effect, fx.LoadConversation):
            return _result(self.conversation)
        if isinstance(effect, fx.SaveConversation):
            return None, self.save_error
        raise AssertionError(f"no result for {effect!r}")


def _result(answer: Any) -> Result:
    return (None, answer) if isinstance(answer, AdkError) else (answer, None)


def run(turn: Turn, caller_deadline: float = float("inf"), **script: Any) -> TurnDriver:
    """Drive ``turn`` from its start with ``script`` (the :class:`TurnDriver` arguments)."""
    return TurnDriver(turn, **script).start(caller_deadline)
