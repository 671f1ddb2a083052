"""The reference's legacy graph example in Python: a counter node looping through a conditional edge, then a
tool node. Legacy graphs run in this process (no actor system needed); the supervised engine is
``compile_workflow``.

Run: ``.venv/bin/python samples/workflow_legacy_graph.py``
"""

from __future__ import annotations

from typing import Any

from adk_actors.tools import FunctionTool
from adk_actors.workflows.graph import END, Graph, function_node, tool_node


def increment(state: dict[str, Any]) -> dict[str, Any]:
    return {"count": state.get("count", 0) + 1}


def next_node(state: dict[str, Any]) -> str:
    return "counter" if state["count"] < 3 else END


def release_note(count: int) -> dict[str, Any]:
    """Write a release note.

    Args:
        count: How many preparation rounds ran.
    """
    return {"note": f"prepared in {count} rounds"}


def main() -> int:
    graph = Graph()
    graph.add_node("counter", increment)
    graph.add_conditional_edge("counter", next_node)
    graph.set_entry_point("counter")
    final = graph.compile().run({"count": 0}, max_steps=10)
    print(f"count={final['count']}")

    release = (Graph()
               .add_node("counter", increment)
               .add_conditional_edge("counter", lambda state: "note" if state["count"] >= 3 else "counter",
                                     routes=["counter", "note"])
               .add_node("note", tool_node(FunctionTool(release_note), output_key="release"))
               .add_edge("note", "summary")
               .add_node("summary", function_node(lambda state: state["release"]["note"].upper(),
                                                  output_key="summary"))
               .set_entry_point("counter")
               .compile())
    state = release.run({"count": 0}, max_steps=10)
    print(f"release={state['release']} summary={state['summary']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
