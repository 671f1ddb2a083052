"""The event record: ``Event``, ``EventActions``, ``Pause`` and ``ErrorInfo`` with an exact JSON round-trip.

::

    from adk_actors.events import Event, EventActions

    event = Event.new(invocation_id="inv-1", author="assistant", content="Hello", is_final=True,
                      actions=EventActions(state_delta={"user:greeted": True}))
    assert Event.from_dict(event.to_dict()) == event
"""

from adk_actors.events.event import EVENT_SCHEMA_VERSION, ErrorInfo, Event, EventActions, Pause

__all__ = ["EVENT_SCHEMA_VERSION", "ErrorInfo", "Event", "EventActions", "Pause"]
