"""The conversation for sub-problem i of an attempt (PROTOCOL.md section 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studybench.protocol import (
    DEFAULT_SYSTEM_PROMPT,
    GUIDANCE_HEADING,
    INSTRUCTION,
    PLACEHOLDER,
    ArtefactError,
    Artefacts,
    build_messages,
    load_artefacts,
    messages_digest,
)
from studybench.records import Parent, SubProblemRef


def _parent(**kw: object) -> Parent:
    base: dict[str, object] = {
        "source": "IPhO",
        "year": "2001",
        "source_problem_id": "Q1",
        "problem_type": "Mechanics",
        "problem": "A block of mass m slides on a plane.",
        "solution": "SECRET-PARENT-SOLUTION",
        "answer": "",
        "answer_type": "",
        "type_sequence": "",
        "sub_problems": [
            {"problem_id": "Q1(a)", "problem": "(a) Find the speed.", "solution": "SECRET-A", "answer": "\\boxed{v=\\sqrt{2gh}}", "answer_type": "EQ", "type_sequence": ""},
            {"problem_id": "Q1(b)", "problem": "(b) Find the time.", "solution": "SECRET-B", "answer": "\\boxed{7.25\\,\\mathrm{s}}", "answer_type": "NV", "type_sequence": ""},
            {"problem_id": "Q1(c)", "problem": "(c) Is it constant?", "solution": "SECRET-C", "answer": "\\boxed{\\text{No}}", "answer_type": "TF", "type_sequence": ""},
        ],
    }
    base.update(kw)
    return Parent.model_validate(base)


def _slot(p: Parent, i: int) -> SubProblemRef:
    return SubProblemRef(p, i, p.subs()[i])


def test_turn0_has_instruction_stem_and_first_sub_only() -> None:
    p = _parent()
    msgs = build_messages(_slot(p, 0), [])
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == DEFAULT_SYSTEM_PROMPT
    assert msgs[1]["content"] == f"{INSTRUCTION}\n\nA block of mass m slides on a plane.\n\n(a) Find the speed."


def test_continuity_uses_own_replies_with_reasoning_removed() -> None:
    p = _parent()
    r0 = "<think>private chain</think>Speed is v. Final Answer: \\boxed{v=1}"
    r1 = "<think>unclosed reasoning that never ends"
    msgs = build_messages(_slot(p, 2), [r0, r1])
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"] == "Speed is v. Final Answer: \\boxed{v=1}"
    assert msgs[4]["content"] == PLACEHOLDER  # nothing usable left after removing reasoning
    assert msgs[3]["content"] == "(b) Find the time."  # later turns carry only the sub-problem text
    assert msgs[5]["content"] == "(c) Is it constant?"
    blob = json.dumps(msgs)
    assert "SECRET" not in blob and "7.25" not in blob and "sqrt{2gh}" not in blob


def test_stray_close_tag_and_failed_turn() -> None:
    p = _parent()
    msgs = build_messages(_slot(p, 2), ["reasoning leaked</think>\nAnswer 3", None])
    assert msgs[2]["content"] == "Answer 3"
    assert msgs[4]["content"] == PLACEHOLDER


def test_previous_count_must_match() -> None:
    with pytest.raises(ValueError):
        build_messages(_slot(_parent(), 1), [])


def test_single_question_parent_and_identical_stem() -> None:
    p = _parent(sub_problems=[], problem="What is g?", answer="\\boxed{9.8}", answer_type="NV")
    msgs = build_messages(_slot(p, 0), [])
    assert msgs[1]["content"] == f"{INSTRUCTION}\n\nWhat is g?"
    # a one-sub parent whose stem equals the sub text shows it once
    q = _parent(problem="(a) Find the speed.", sub_problems=[_parent().sub_problems[0].model_dump()])
    assert build_messages(_slot(q, 0), [])[1]["content"].count("(a) Find the speed.") == 1


def test_playbook_and_system_prompt_are_alternatives(tmp_path: Path) -> None:
    sp = tmp_path / "sp.txt"
    sp.write_text("You are GEPA-optimised.")
    pb = tmp_path / "pb.md"
    pb.write_text("- check units\n- draw a diagram")
    a = load_artefacts(system_prompt=sp)
    assert build_messages(_slot(_parent(), 0), [], a)[0]["content"] == "You are GEPA-optimised."
    b = load_artefacts(playbook=pb)
    sysmsg = build_messages(_slot(_parent(), 0), [], b)[0]["content"]
    assert sysmsg.startswith(DEFAULT_SYSTEM_PROMPT)
    assert "- check units\n- draw a diagram" in sysmsg and "PLAYBOOK (BEGIN)" in sysmsg and "PLAYBOOK (END)" in sysmsg
    with pytest.raises(ArtefactError, match="alternatives"):
        load_artefacts(system_prompt=sp, playbook=pb)


def test_guidance_joined_on_four_part_key_and_combines(tmp_path: Path) -> None:
    g = tmp_path / "g.jsonl"
    rows = [
        {"source": "IPhO", "year": 2001, "source_problem_id": "Q1", "problem_id": "Q1(b)", "guidance": "Use energy conservation."},
        {"source": "IPhO", "year": "1999", "source_problem_id": "Q1", "problem_id": "Q1(b)", "guidance": "WRONG YEAR"},
        {"source": "Book", "year": "", "source_problem_id": "P2", "guidance": "single-question hint"},
    ]
    g.write_text("\n".join(json.dumps(r) for r in rows))
    pb = tmp_path / "pb.md"
    pb.write_text("play")
    a = load_artefacts(playbook=pb, guidance=g)
    msgs = build_messages(_slot(_parent(), 1), ["r0"], a)
    assert msgs[-1]["content"].startswith("(b) Find the time.\n\n" + GUIDANCE_HEADING + "\n\nUse energy conservation.")
    assert "WRONG YEAR" not in json.dumps(msgs)
    assert "PLAYBOOK" in msgs[0]["content"]
    # the guidance stays in the earlier user turn when later turns are built (continuity)
    later = build_messages(_slot(_parent(), 2), ["r0", "r1"], a)
    assert "Use energy conservation." in later[3]["content"]
    single = _parent(source="Book", year="", source_problem_id="P2", sub_problems=[], problem="Q?", answer="\\boxed{1}", answer_type="NV")
    assert "single-question hint" in build_messages(_slot(single, 0), [], a)[1]["content"]


def test_bad_guidance_file_errors_name_the_record(tmp_path: Path) -> None:
    g = tmp_path / "g.json"
    g.write_text(json.dumps([{"source": "X", "source_problem_id": "1", "hint": "ok"}, {"source": "X", "source_problem_id": "2"}]))
    with pytest.raises(ArtefactError, match=r"record 1 .*guidance"):
        load_artefacts(guidance=g)
    empty = tmp_path / "e.txt"
    empty.write_text("  ")
    with pytest.raises(ArtefactError, match="empty"):
        load_artefacts(system_prompt=empty)


def test_digest_changes_with_content() -> None:
    p = _parent()
    d1 = messages_digest(build_messages(_slot(p, 1), ["a"]))
    d2 = messages_digest(build_messages(_slot(p, 1), ["b"]))
    assert d1 != d2 and len(d1) == 64
    assert Artefacts().system_message() == DEFAULT_SYSTEM_PROMPT
