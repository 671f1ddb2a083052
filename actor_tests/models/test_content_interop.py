"""Provider output is valid shared content, and content-package values are accepted as input."""

from __future__ import annotations

from adk_actors import content, models
from adk_actors.models import StreamFrame

from .conftest import user


def test_structured_outputs_validate_as_content(emu, cfg):
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False, "tool_declared": "f"},
                    "respond": {"function_calls": [{"name": "f", "args": {"a": 1}}], "thought": "plan"},
                },
                {"respond": {"text": "final words here", "thought": "musing", "chunks": 3}},
            ]
        }
    )
    cfg |= {"thinking_config": {"include_thoughts": True}}
    calls = models.generate_response(cfg, [user("go")], [{"name": "f", "description": "d"}])
    assert content.validate(calls.content).to_dict() == calls.content
    thought = models.generate(cfg, [user("think")])
    assert isinstance(thought, dict) and content.validate(thought).to_dict() == thought
    frames: list[StreamFrame] = []
    final = models.stream_content(cfg, [user("think")], [], frames.append)
    for frame in frames:
        content.validate(frame.content)
    assert content.validate(final.content).to_dict() == final.content


def test_content_values_are_accepted_as_history(emu, cfg):
    prompt = content.new([content.text("Describe"), content.inline_data("image/png", b"\x89PNG\r\n")])
    assert models.generate(cfg, [{"role": "user", "content": prompt}]) == "You said: Describe"
