"""sequential / parallel / loop over real agents and the emulator."""

from __future__ import annotations

import pytest

from adk_actors.agents import is_approved, loop, parallel, sequential
from adk_actors.emulator import Emulator
from adk_actors.errors import AgentError, AskTimeout
from adk_actors.runtime.system import ActorSystemHandle

from .conftest import Spawner, config_for, unique

SCRIPT = {
    "rules": [
        {"when": {"system_text_contains": "French"}, "respond": {"text": "FR({user_text})"}},
        {"when": {"system_text_contains": "Summarize"}, "respond": {"text": "SUM({user_text})"}},
        {"when": {"system_text_contains": "Stall"}, "respond": {"text": "late", "delay_ms": 5000}},
        {"when": {"system_text_contains": "Write", "user_text_contains": "Revise"}, "respond": {"text": "draft v2"}},
        {"when": {"system_text_contains": "Write"}, "respond": {"text": "draft v1"}},
        {"when": {"system_text_contains": "Picky"}, "respond": {"text": "Needs more rhyme."}},
        {
            "when": {"system_text_contains": "Reply exactly APPROVED", "user_text_contains": "v2"},
            "respond": {"text": "  approved \n"},
        },
        {"when": {"system_text_contains": "Reply exactly APPROVED"}, "respond": {"text": "APPROVED, but add rhyme."}},
    ]
}


@pytest.fixture
def agents(emu: Emulator, spawn: Spawner) -> dict[str, object]:
    emu.set_script(SCRIPT)
    made = {}
    for role, instructions in [
        ("translator", "Translate the input to French."),
        ("summarizer", "Summarize the input in one sentence."),
        ("staller", "Stall."),
        ("writer", "Write and revise the requested draft."),
        ("reviewer", "Reply exactly APPROVED when the draft is ready; otherwise critique it."),
        ("picky", "Picky reviewer."),
    ]:
        made[role] = spawn(unique(role.capitalize()), config_for(emu, instructions=instructions))
    return made


def test_sequential_feeds_each_output_into_the_next_agent(system: ActorSystemHandle, agents: dict) -> None:
    result = sequential(
        [agents["translator"], agents["summarizer"]], "Erlang processes are lightweight.", system=system
    )
    assert result == "SUM(FR(Erlang processes are lightweight.))"


def test_parallel_keeps_input_order_and_applies_one_overall_deadline(system: ActorSystemHandle, agents: dict) -> None:
    results = parallel([agents["translator"], agents["summarizer"]], "Explain OTP.", 30, system=system)
    assert results == [(agents["translator"], "FR(Explain OTP.)"), (agents["summarizer"], "SUM(Explain OTP.)")]
    results = parallel([agents["staller"], agents["translator"]], "Explain OTP.", 1.5, system=system)
    assert results[0][0] == agents["staller"] and isinstance(results[0][1], AskTimeout)
    assert results[1] == (agents["translator"], "FR(Explain OTP.)")


def test_parallel_reports_agent_errors_as_values(
    system: ActorSystemHandle, agents: dict, emu: Emulator, spawn: Spawner
) -> None:
    broken = spawn(unique("Broken"), {"provider": "gemini", "base_url": emu.base_url})  # no API key
    results = parallel([broken, agents["summarizer"]], "x", 30, system=system)
    assert results[0][1].reason == "missing_api_key" and results[1][1] == "SUM(x)"


def test_loop_returns_the_approved_draft(system: ActorSystemHandle, agents: dict) -> None:
    assert (
        loop(agents["writer"], agents["reviewer"], "Write a short poem about Erlang.", 3, system=system) == "draft v2"
    )


def test_loop_returns_the_latest_draft_at_the_bound(system: ActorSystemHandle, agents: dict, emu: Emulator) -> None:
    assert loop(agents["writer"], agents["picky"], "Write a poem.", 1, system=system) == "draft v1"
    assert loop(agents["writer"], agents["picky"], "Write a poem.", 3, system=system) == "draft v2"
    writer_calls = [r for r in emu.requests if "Write and revise" in str(r["body"].get("systemInstruction"))]
    assert len(writer_calls) == 1 + 3  # one draft at bound 1, three drafts at bound 3


@pytest.mark.parametrize(
    ("text", "approved"),
    [
        ("APPROVED", True),
        ("  approved\n", True),
        ("Approved", True),
        ("APPROVED.", False),
        ("APPROVED, but", False),
        ("NOT APPROVED", False),
        (None, False),
    ],
)
def test_approval_is_exact_after_trimming_and_case_folding(text: object, approved: bool) -> None:
    assert is_approved(text) is approved


def test_invalid_arguments_raise(system: ActorSystemHandle, agents: dict) -> None:
    with pytest.raises(AgentError):
        sequential([], "x", system=system)
    with pytest.raises(AgentError):
        loop(agents["writer"], agents["picky"], "x", 0, system=system)
    with pytest.raises(AgentError):
        parallel([agents["writer"]], 42, 5, system=system)
