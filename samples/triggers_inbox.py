"""Ambient triggers: register a trigger, submit deliveries, await them, and a fixed-delay schedule.

A trigger owns a bounded queue and runs each accepted delivery as a stable run through its Runner, in a session
derived from the delivery's idempotency key (``per_event``). ``submit`` returns at once with a stable reference;
a second submit with the same key is a duplicate and starts nothing. The schedule source submits through the same
bounded path, with the key ``<schedule id>:<n>`` per firing.

Runs offline against the Gemini emulator. Run: ``.venv/bin/python samples/triggers_inbox.py``
"""

from __future__ import annotations

import tempfile
import threading

import adk_actors as adk
from adk_actors import triggers
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.triggers.schedule import start_schedule

SCRIPT = {"rules": [{"when": {}, "respond": {"text": "Summary: {user_text}"}}]}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        agent = adk.spawn_agent("InboxAgent", config)
        runner = adk.Runner(agent, "inbox_app", adk.session_service(settings))
        triggers.register_trigger(
            "inbox-events",
            runner,
            {
                "max_concurrency": 4,
                "max_queue": 64,
                "event_timeout_ms": 60_000,
                "session_policy": {"mode": "per_event", "user_id": "background-worker", "prefix": "inbox-"},
                "retry": {"max_attempts": 3, "initial_delay_ms": 100, "jitter": "full"},
            },
        )
        delivery = {
            "payload": "Summarize message 42",
            "idempotency_key": "mailbox:42:v1",
            "metadata": {"source": "local-queue"},
        }
        first = triggers.submit("inbox-events", delivery)
        again = triggers.submit("inbox-events", delivery)
        print(f"duplicate submit, same reference: {again.duplicate and again.ref == first.ref}")
        outcome = triggers.await_event(first.ref, 30)
        print(f"{outcome.outcome}: {outcome.output}")
        print(f"status: {triggers.status(first.ref)['state']} after {outcome.attempts} attempt(s)")

        schedule = start_schedule(
            "inbox-events", "hourly-inbox-summary", 3_600_000, {"payload": "Summarize the last hour"},
            initial_delay_ms=0,
        )
        fired = _wait(lambda: schedule.status()["last_ref"])
        print(f"schedule fired: {triggers.await_event(fired, 30).output}")
        print(f"schedule: {schedule.status()['type']} every {schedule.status()['interval_ms']} ms")
        schedule.stop()

        counts = triggers.trigger_status("inbox-events")
        print(f"accepted {counts['accepted']}, duplicates {counts['duplicates']}, completed {counts['completed']}")
        triggers.unregister_trigger("inbox-events")
    return 0


def _wait(check, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    """Poll ``check`` until it returns something (the schedule fires on its own timer)."""
    tick = threading.Event()
    for _ in range(int(timeout / 0.02)):
        found = check()
        if found:
            return found
        tick.wait(0.02)
    raise SystemExit("the schedule did not fire")


if __name__ == "__main__":
    raise SystemExit(main())
