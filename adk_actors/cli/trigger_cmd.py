"""``adk trigger list|status``: the registered triggers of a running node, as JSON.

::

    adk trigger [--port N] list
    adk trigger [--port N] status NAME [REF]

``list`` prints ``{"triggers": [...]}`` (each trigger's mode, queue depth, active events, counters and recent
outcomes, sorted by name); ``status NAME`` prints that trigger's status; ``status NAME REF`` prints one event's
status, where ``REF`` is the reference ``submit`` returned (``NAME/<event id>``) or only its event id. They attach
to the node by its admin port, like ``adk inspect``, and call the same operations as ``GET /dev/v1/triggers``
(:class:`~adk_actors.devapi.triggers.TriggerOps`); a failure is reported by reason on stderr with exit status 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from adk_actors.cli.output import port_parent, print_error, print_json
from adk_actors.errors import AdkError, ValidationError
from adk_actors.settings import load_settings

__all__ = ["add_parser", "event_ref", "trigger"]


def add_parser(sub: Any) -> None:
    """Register ``trigger list`` and ``trigger status`` on the ``adk`` subparsers."""
    port = port_parent()
    parser = sub.add_parser("trigger", help="list registered triggers or show one trigger or event (JSON)")
    action = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    action.add_parser("list", help="every registered trigger with queue depth and recent outcomes", parents=[port])
    status = action.add_parser("status", help="one trigger's status, or one of its events", parents=[port])
    status.add_argument("name", help="the trigger's name")
    status.add_argument("ref", nargs="?", default=None, help="an event reference (NAME/EVENT_ID) or event id")
    parser.set_defaults(handler=trigger)


def event_ref(name: str, ref: str) -> str:
    """The full reference of ``ref`` for trigger ``name``: ``ref`` itself when it is ``name/...``, else
    ``name/ref``.

    Raises:
        ValidationError: ``ref`` names another trigger (``invalid_value``, key ``ref``).
    """
    if "/" not in ref:
        return f"{name}/{ref}"
    if not ref.startswith(f"{name}/"):
        raise ValidationError(
            "the reference belongs to another trigger", reason="invalid_value", details={"key": "ref"}
        )
    return ref


def trigger(args: argparse.Namespace) -> int:
    """``adk trigger``; returns the exit status."""
    from adk_actors.devapi.triggers import TriggerOps
    from adk_actors.runtime.system import attach

    calls: dict[str, Callable[[TriggerOps], Any]] = {
        "list": lambda ops: ops.list_triggers(),
        "status": lambda ops: ops.trigger(args.name) if args.ref is None else ops.event(event_ref(args.name, args.ref)),
    }
    try:
        handle = attach(args.port, load_settings(), make_default=False)
        try:
            print_json(calls[args.action](TriggerOps(handle)))
        finally:
            handle.detach()
    except AdkError as err:
        print_error(err)
        return 1
    return 0
