"""A FunctionTool pickled by value rebuilds in another process even with postponed annotations whose return type
names a global its body never uses (cloudpickle carries only the globals the body uses)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

from adk_actors.tools import ToolContext


def test_a_tool_from_a_script_with_postponed_annotations_rebuilds_elsewhere(tmp_path: Path) -> None:
    script = tmp_path / "make_tool.py"
    script.write_text(
        textwrap.dedent('''
        from __future__ import annotations
        import sys
        from typing import Any
        import cloudpickle
        from adk_actors.tools import FunctionTool, ToolContext

        def lookup(city: str, tool_context: ToolContext, days: int = 1) -> dict[str, Any]:
            """Look a city up."""
            tool_context.actions.set_state("temp:last", city)
            return {"city": city, "days": days}

        sys.stdout.buffer.write(cloudpickle.dumps(FunctionTool(lookup)))
    ''')
    )
    payload = subprocess.run([sys.executable, str(script)], capture_output=True, check=True, timeout=60).stdout
    tool = pickle.loads(payload)  # this process never imported the script: the function came by value
    assert tool.schema()["required"] == ["city"]
    assert tool.schema()["properties"]["days"] == {"type": "integer", "default": 1}
    context = ToolContext(invocation_id="inv", agent_name="a")
    assert tool.execute({"city": "Oslo"}, context) == {"city": "Oslo", "days": 1}  # the context is injected
    assert context.actions.state_delta == {"temp:last": "Oslo"}
