"""``adk console``: an interactive chat with one agent and one Runner kept alive across turns.

::

    adk console --config config/agent.json [--emulator [--script PATH] | --base-url URL] [--port N]
                [--user U] [--session S]

Each input line is one Runner turn streamed as it arrives (text deltas, then a newline). Lines starting with ``/``
are local commands (:data:`HELP`). ``/exit`` or end of input closes the console (exit status 0) and stops what it
started. A failed turn is reported and the console carries on.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from adk_actors.agents.turn.pauses import open_pauses
from adk_actors.cli.launch import (
    APP_NAME,
    LiveAgent,
    add_launch_arguments,
    new_session_id,
    open_agent,
    options_from_args,
)
from adk_actors.cli.output import output_value, print_error, safe
from adk_actors.errors import AdkError, SessionNotFound
from adk_actors.events import Event
from adk_actors.runs.logic import Paused
from adk_actors.secrets import is_secret_key
from adk_actors.sessions.model import SessionRef, validate_name
from adk_actors.settings import load_settings

__all__ = ["HELP", "Command", "Console", "add_parser", "console", "parse_line"]

HELP = """\
/inspect        session id, event count, state keys and open pauses
/new            start a new session
/session ID     switch to session ID
/resume JSON    resume the session's paused invocation with the JSON response (e.g. {"confirmed": true})
/help           this text
/exit           leave (end of input too)"""

_COMMANDS = {"/inspect": False, "/new": False, "/session": True, "/resume": True, "/help": False, "/exit": False}
"""Console commands and whether they take an argument."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One parsed input line."""

    name: str
    """``"message"``, ``"empty"``, ``"invalid"`` or a command without its slash (``"inspect"``, ``"resume"``...)."""
    argument: str = ""
    """The message text, or the command's argument."""


def parse_line(line: str) -> Command:
    """Parse an input line: a command (``/name [argument]``), a message, or nothing."""
    text = line.strip()
    if not text:
        return Command(name="empty")
    if not text.startswith("/"):
        return Command(name="message", argument=text)
    head, _, rest = text.partition(" ")
    rest = rest.strip()
    if head not in _COMMANDS:
        return Command(name="invalid", argument=f"unknown command {head} (try /help)")
    if _COMMANDS[head] and not rest:
        return Command(name="invalid", argument=f"{head} needs an argument (try /help)")
    if not _COMMANDS[head] and rest:
        return Command(name="invalid", argument=f"{head} takes no argument")
    return Command(name=head[1:], argument=rest)


class Console:
    """The console's state (the live agent, the user and the current session) and its command handlers."""

    def __init__(self, live: LiveAgent, *, user_id: str, session_id: str, out: TextIO, err: TextIO) -> None:
        self.live = live
        self.user_id = user_id
        self.session_id = session_id
        self.out = out
        self.err = err

    def write(self, text: str) -> None:
        self.out.write(safe(text))
        self.out.flush()

    def banner(self) -> None:
        self.write(
            f"adk console: agent {self.live.agent.name}, user {self.user_id}, session {self.session_id}"
            " (/help for commands)\n"
        )

    def handle(self, line: str) -> bool:
        """Handle one input line; ``False`` when the console should close."""
        command = parse_line(line)
        try:
            if command.name == "exit":
                return False
            if command.name == "message":
                self.turn(command.argument)
            elif command.name == "inspect":
                self.inspect()
            elif command.name == "new":
                self.session_id = new_session_id()
                self.write(f"session {self.session_id}\n")
            elif command.name == "session":
                self.session_id = validate_name(command.argument, "session_id")
                self.write(f"session {self.session_id}\n")
            elif command.name == "resume":
                self.resume(command.argument)
            elif command.name == "help":
                self.write(HELP + "\n")
            elif command.name == "invalid":
                self.write(command.argument + "\n")
        except AdkError as error:
            print_error(error, stream=self.err)
        return True

    def turn(self, text: str) -> None:
        """One streamed Runner turn: deltas as they arrive, then the final answer or the pause."""
        streamed = False
        try:
            for event in self.live.runner.stream(self.user_id, self.session_id, text):
                streamed = self._show(event, streamed)
        finally:
            if streamed:
                self.write("\n")

    def _show(self, event: Event, streamed: bool) -> bool:
        """Print what ``event`` adds; returns whether a line of streamed text is open."""
        if event.author == "user":
            return streamed
        if event.partial:
            delta = event.text()
            if delta:
                self.write(delta)
                return True
            return streamed
        pause = event.actions.pause
        if pause is not None:
            if streamed:
                self.write("\n")
            self.write(f"[paused: {pause.reason}] {_pause_summary(pause.details)} — /resume JSON to continue\n")
            return False
        if event.content is not None and event.content.function_calls():
            names = ", ".join(call.name for call in event.content.function_calls())
            self.write(("\n" if streamed else "") + f"[calling {names}]\n")
            return False
        if event.is_final and not streamed:
            self._answer(event.content.simplified() if event.content is not None else "")
            return False
        return streamed

    def _answer(self, value: Any) -> None:
        value = output_value(value)
        self.write((value if isinstance(value, str) else json.dumps(value, sort_keys=True)) + "\n")

    def resume(self, argument: str) -> None:
        """Resume the session's only open pause with a JSON response."""
        try:
            response = json.loads(argument)
        except json.JSONDecodeError:
            self.write('/resume takes a JSON value, for example {"confirmed": true}\n')
            return
        outcome = self.live.runner.resume(self.user_id, self.session_id, None, response)
        if isinstance(outcome, Paused):
            self._show(outcome.event, False)
        else:
            self._answer(outcome)

    def inspect(self) -> None:
        """Session id, event count, state keys (secret-named ones hidden) and open pauses."""
        ref = SessionRef(app_name=APP_NAME, user_id=self.user_id, session_id=self.session_id)
        try:
            session = self.live.runner.session_service.get_session(ref)
        except SessionNotFound:
            self.write(f"session  {self.session_id} (user {self.user_id}, app {APP_NAME}): not created yet\n")
            return
        keys = sorted(k for k in session.state if not is_secret_key(k))
        hidden = len(session.state) - len(keys)
        pauses = [
            f"{p.continuation_id} ({p.event.actions.pause.reason})"
            for p in open_pauses(session.events, session.state)
            if p.event.actions.pause is not None
        ]
        self.write(
            f"session  {self.session_id} (user {self.user_id}, app {APP_NAME})\n"
            f"events   {len(session.events)}\n"
            f"state    {', '.join(keys) or '(none)'}" + (f" (+{hidden} hidden)" if hidden else "") + "\n"
            f"paused   {', '.join(pauses) or 'none'}\n"
        )


def _pause_summary(details: dict[str, Any]) -> str:
    shown = {k: details[k] for k in ("type", "function_name", "operation_id", "hint") if k in details}
    return json.dumps(shown, sort_keys=True) if shown else ""


def add_parser(sub: Any) -> None:
    """Register ``console`` on the ``adk`` subparsers."""
    parser = sub.add_parser(
        "console",
        help="interactive chat with an agent from a JSON config file",
        description="Chat with the agent in FILE; /help lists the console commands.",
    )
    add_launch_arguments(parser)
    parser.set_defaults(handler=console)


def console(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status."""
    interactive = sys.stdin.isatty()
    try:
        options = options_from_args(args, streaming=True)
        with open_agent(options, load_settings()) as live:
            chat = Console(
                live,
                user_id=validate_name(args.user, "user_id"),
                session_id=validate_name(args.session or new_session_id(), "session_id"),
                out=sys.stdout,
                err=sys.stderr,
            )
            chat.banner()
            while True:
                if interactive:
                    chat.write("> ")
                line = sys.stdin.readline()
                if not line:
                    if interactive:
                        chat.write("\n")
                    break
                if not chat.handle(line):
                    break
    except AdkError as err:
        print_error(err)
        return 1
    return 0
