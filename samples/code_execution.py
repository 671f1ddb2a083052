"""An agent that runs the code its model writes, in a separate, limited process: the ``execute_code`` toolset.

``code_toolset(ProcessSandbox())`` gives the agent one tool, ``execute_code(language, code)``. adk_actors never runs
the code itself: the sandbox starts a fresh process with resource limits (and, as root, its own network namespace
and the ``nobody`` user), kills it at the wall clock or the output bound, and returns exit code, stdout and stderr.
The model here is the offline emulator, scripted to write one program and then read its output.

Run: ``.venv/bin/python samples/code_execution.py``
"""

from __future__ import annotations

import tempfile

import adk_actors as adk
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools import CodeRequest, ProcessSandbox, capabilities, code_toolset

PROGRAM = "import math\nprint(math.factorial(20))"
SCRIPT = {"rules": [
    {"when": {"has_function_response": False},
     "respond": {"function_calls": [{"name": "execute_code", "args": {"language": "python", "code": PROGRAM}}]}},
    {"when": {"has_function_response": True},
     "respond": {"text": "20! = {response.stdout}"}},
]}


def main() -> None:
    print("library:", capabilities())
    sandbox = ProcessSandbox(cpu_s=5, memory_mb=256, max_processes=16)
    endless = CodeRequest(language="python", code="while True: pass", timeout_s=1, max_output_bytes=1024)
    looping = sandbox.execute(endless)
    print("an endless loop:", looping.outcome)
    settings = adk.Settings.from_dict({"admin_port": reserved_port(), "data_dir": tempfile.mkdtemp()})
    with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
        model = {"provider": "gemini", "base_url": emu.base_url, "api_key": "offline"}
        agent = adk.spawn_agent("Calculator", model, [code_toolset(sandbox, timeout_s=10)])
        print("agent:", adk.prompt(agent, "What is 20 factorial?").strip())


if __name__ == "__main__":
    main()
