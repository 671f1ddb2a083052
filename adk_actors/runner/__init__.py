"""The event Runner: agent invocations against a session, streamed, paused and resumed.

::

    from adk_actors import Runner, runs, session_service, spawn_agent

    agent = spawn_agent("RunnerAgent", {"model": "gemini-3.1-flash-lite", "instructions": "Be concise."})
    runner = Runner(agent, "readme_app", session_service(), streaming_mode="text", max_llm_calls=32)
    runner.run("user-1", "session-1", "Hello")                   # -> "Hello!" or runs.Paused(event)
    for event in runner.stream("user-1", "session-1", "Hi"):       # partial events, then the final one
        ...
    run_id = runs.start(runner, "user-1", "session-2", "Explain supervisors.")   # a stable run
    runs.wait(run_id)                                              # -> runs.Completed(output)

A Runner is a picklable value (agent name, app name, session service descriptor, validated options); every call
is one invocation executed by the agent actor in the queue of its session (see ``agents/turn/engine.py``).
"""

from adk_actors.runner.core import Runner, RunnerBody

__all__ = ["Runner", "RunnerBody"]
