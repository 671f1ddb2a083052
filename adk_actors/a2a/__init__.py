"""A2A 1.0 (docs/A2A.md): our client, a remote A2A agent as a model provider, and the wire shapes shared with the
server (``adk_actors.web.a2a_app``).

::

    from adk_actors import a2a

    card = a2a.discover("https://agent.example.com")          # the Agent Card, validated
    result = a2a.send(card, "Write a haiku about OTP.")        # {"task": {...}} or {"message": {...}}
    for event in a2a.stream(card, "And another one."):         # StreamResponse dicts, bounded
        ...
    spawn_agent("Poet", {"provider": a2a.A2aModel(card)}, [])  # a remote agent as a local (sub-)agent
"""

from adk_actors.a2a.client import (
    A2aClient,
    A2aStream,
    AgentCard,
    AuthHeaders,
    cancel,
    discover,
    get,
    parse_card,
    send,
    stream,
    subscribe,
)
from adk_actors.a2a.remote import A2aModel, answer_text
from adk_actors.a2a.wire import PROTOCOL_VERSION

__all__ = [
    "PROTOCOL_VERSION",
    "A2aClient",
    "A2aModel",
    "A2aStream",
    "AgentCard",
    "AuthHeaders",
    "answer_text",
    "cancel",
    "discover",
    "get",
    "parse_card",
    "send",
    "stream",
    "subscribe",
]
