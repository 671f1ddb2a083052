"""The agent turn as a pure engine: :class:`~adk_actors.agents.turn.engine.Turn` hands out
:mod:`~adk_actors.agents.turn.effects` and is fed their results; ``options`` validates Runner options and
``pauses`` keeps pause bookkeeping in the session. No I/O and no actors in this package."""
