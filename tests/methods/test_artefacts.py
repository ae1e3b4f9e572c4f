"""ACE playbooks as ACE writes them, and EvoSkill skills folders inlined into a system prompt (issue 13, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.methods.artefacts import ArtefactInputError, evoskill_prompt
from studybench.protocol import ArtefactError, clean_ace_playbook, load_artefacts

ACE = """## STRATEGIES & INSIGHTS
[str-00001] helpful=3 harmful=0 :: Draw a free-body diagram before writing Newton's second law.
[str-00002] helpful=0 harmful=1 :: Check limiting cases (m -> 0, theta -> 90 degrees).

## FORMULAS & CALCULATIONS
[calc-00003] helpful=5 harmful=0 :: Moment of inertia of a thin rod about its end: $I = \\frac{1}{3} M L^2$.

## COMMON MISTAKES TO AVOID

## OTHERS
"""

CLEAN = """## STRATEGIES & INSIGHTS
- Draw a free-body diagram before writing Newton's second law.
- Check limiting cases (m -> 0, theta -> 90 degrees).

## FORMULAS & CALCULATIONS
- Moment of inertia of a thin rod about its end: $I = \\frac{1}{3} M L^2$.
"""


def _invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_ace_bullets_lose_ids_and_counters_and_empty_sections_go() -> None:
    assert clean_ace_playbook(ACE) == CLEAN


def test_ace_bullets_as_ace_parses_them() -> None:
    # ACE's parser (playbook_utils.parse_playbook_line) takes any id without "]" and optional spaces
    text = "## OTHERS\n[misc 7] helpful=1 harmful=0 :: spaced id\n[err-00002]helpful=0 harmful=2::  tight\n"
    assert clean_ace_playbook(text) == "## OTHERS\n- spaced id\n- tight\n"


def test_plain_playbook_is_unchanged() -> None:
    plain = "## Tips\n- [note] keep units: helpful advice\n\n## Empty\n"
    assert clean_ace_playbook(plain) == plain


def test_load_artefacts_cleans_ace_playbooks_and_keeps_the_file_digest(tmp_path: Path) -> None:
    import hashlib

    f = tmp_path / "playbook.md"
    f.write_text(ACE, encoding="utf-8")
    art = load_artefacts(playbook=f)
    assert art.playbook == CLEAN
    assert "helpful=" not in art.system_message() and "str-00001" not in art.system_message()
    assert art.digests["playbook"] == hashlib.sha256(f.read_bytes()).hexdigest()


def test_playbook_token_cap(tmp_path: Path) -> None:
    f = tmp_path / "big.md"
    f.write_text("## S\n" + "".join(f"[str-{i:05d}] helpful=1 harmful=0 :: apply energy conservation first\n" for i in range(3000)))
    with pytest.raises(ArtefactError, match=r"playbook file .*big\.md: [\d,]+ tokens .* over the cap of 12,000; raise it with --playbook-max-tokens"):
        load_artefacts(playbook=f)
    assert load_artefacts(playbook=f, playbook_max_tokens=100_000).playbook is not None
    assert load_artefacts(playbook=f, playbook_max_tokens=0).playbook is not None


def _skill(root: Path, folder: str, name: str, desc: str, body: str) -> None:
    d = root / folder
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: \"{desc}\"\n---\n\n{body}\n", encoding="utf-8")
    (d / "helper.py").write_text("print('not inlined')\n")


def _skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    _skill(root, "units-check", "units-check", "Check units of every final answer.", "# Units\nWrite SI units beside each step.")
    _skill(root, "buoyancy", "buoyancy", "Archimedes problems.", "Balance weight against displaced fluid.")
    _skill(root, "skill-creator", "skill-creator", "Create new skills.", "STOCK META SKILL BODY")
    return root


def test_evoskill_base_meta_skills_are_left_out(tmp_path: Path) -> None:
    # EvoSkill ships .claude/skills/brainstorming and .claude/skills/skill-creator with the agent; neither is evolved
    root = _skills(tmp_path)
    _skill(root, "brainstorming", "brainstorming", "Use before answering any task.", "BRAINSTORMING BODY")
    prompt, skills = evoskill_prompt(root)
    assert [s.folder for s in skills] == ["buoyancy", "units-check"] and "BRAINSTORMING BODY" not in prompt
    out = tmp_path / "all.md"
    res = _invoke("artefact", "evoskill", root, "-o", out, "--include-all")
    assert res.exit_code == 0 and "BRAINSTORMING BODY" in out.read_text()  # type: ignore[attr-defined]


def test_evoskill_prompt_inlines_skills_sorted_without_meta_skills(tmp_path: Path) -> None:
    prompt, skills = evoskill_prompt(_skills(tmp_path))
    assert [s.folder for s in skills] == ["buoyancy", "units-check"]
    assert prompt.index("## Skill: buoyancy") < prompt.index("## Skill: units-check")
    assert "Check units of every final answer." in prompt and "Write SI units beside each step." in prompt
    assert "STOCK META SKILL BODY" not in prompt and "not inlined" not in prompt and "---" not in prompt


def test_evoskill_cli_output_is_an_eval_system_prompt(tmp_path: Path) -> None:
    out = tmp_path / "prompt.md"
    res = _invoke("artefact", "evoskill", _skills(tmp_path), "-o", out)
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert "wrote 2 skills (buoyancy, units-check)" in res.output  # type: ignore[attr-defined]
    assert "left out: skill-creator" in res.output and "--include-all keeps" in res.output  # type: ignore[attr-defined]
    art = load_artefacts(system_prompt=out)
    assert art.system_message().startswith("You are an expert physicist") and "## Skill: units-check" in art.system_message()
    res = _invoke("artefact", "evoskill", tmp_path / "skills", "-o", out, "--include-all", "--exclude", "buoyancy")
    assert res.exit_code == 0 and "skill-creator" in out.read_text() and "## Skill: buoyancy" not in out.read_text()  # type: ignore[attr-defined]
    assert "left out" not in res.output and "warning" not in res.output  # type: ignore[attr-defined]
    res = _invoke("artefact", "evoskill", tmp_path / "skills", "-o", out, "--exclude", "buoyancyy")  # a typo is said, not ignored
    assert res.exit_code == 0 and "--exclude buoyancyy: no such skill folder" in " ".join(res.output.split())  # type: ignore[attr-defined]


def test_evoskill_refusals(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    res = _invoke("artefact", "evoskill", tmp_path / "none", "-o", tmp_path / "p.md")
    assert res.exit_code == 2 and "no skills" in res.output  # type: ignore[attr-defined]
    # a natural slip: the folder of one skill instead of the skills folder
    res = _invoke("artefact", "evoskill", _skills(tmp_path / "one") / "buoyancy", "-o", tmp_path / "p.md")
    assert res.exit_code == 2 and "one skill's folder (it holds SKILL.md); give the folder above it" in res.output  # type: ignore[attr-defined]
    only_meta = tmp_path / "meta"
    _skill(only_meta, "skill-creator", "skill-creator", "x", "y")
    res = _invoke("artefact", "evoskill", only_meta, "-o", tmp_path / "p.md")
    assert res.exit_code == 2 and "1 left out" in res.output  # type: ignore[attr-defined]
    bad = _skills(tmp_path)
    (bad / "buoyancy" / "SKILL.md").write_bytes(b"---\nname: b\n---\n\xff\n")
    with pytest.raises(ArtefactInputError, match=r"buoyancy/SKILL\.md: line 4: not valid UTF-8"):
        evoskill_prompt(bad)
    (bad / "buoyancy" / "SKILL.md").write_text("---\nname: b\n- not a key\n---\nbody\n")
    with pytest.raises(ArtefactInputError, match=r"buoyancy/SKILL\.md: line 3: front matter line is not 'key: value'"):
        evoskill_prompt(bad)
    (bad / "buoyancy" / "SKILL.md").write_text("no front matter\n")
    res = _invoke("artefact", "evoskill", bad, "-o", tmp_path / "p.md")
    assert res.exit_code == 2 and "no front matter" in res.output and not (tmp_path / "p.md").exists()  # type: ignore[attr-defined]


def test_evoskill_token_cap(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _skill(root, "long", "long", "d", "use energy conservation " * 5000)
    res = _invoke("artefact", "evoskill", root, "-o", tmp_path / "p.md")
    assert res.exit_code == 2 and "over the cap of 12,000" in " ".join(res.output.split()) and "--max-tokens" in res.output  # type: ignore[attr-defined]
    assert _invoke("artefact", "evoskill", root, "-o", tmp_path / "p.md", "--max-tokens", 0).exit_code == 0  # type: ignore[attr-defined]


def test_eval_playbook_max_tokens_option(tmp_path: Path) -> None:
    import json

    split = tmp_path / "set.json"
    split.write_text(json.dumps([{"source": "S", "year": "", "source_problem_id": "P1", "problem": "q", "answer": "\\boxed{1}",
                                  "answer_type": "NV", "type_sequence": "", "sub_problems": []}]))
    pb = tmp_path / "pb.md"
    pb.write_text(ACE)
    common = ("eval", "--split", split, "-k", 1, "--seeds", 1, "--playbook", pb)
    res = _invoke(*common, "--out", tmp_path / "r1", "--playbook-max-tokens", 10)
    assert res.exit_code == 2 and "over the cap of 10" in " ".join(res.output.split())  # type: ignore[attr-defined]
    res = _invoke(*common, "--out", tmp_path / "r2")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]


def test_evoskill_control_characters_in_names_never_reach_the_terminal(tmp_path: Path) -> None:
    d = tmp_path / "skills"
    for name in ("a\x1b[31mred", "[bold]b"):
        (d / name).mkdir(parents=True)
        (d / name / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\nbody\n", encoding="utf-8")
    res = _invoke("artefact", "evoskill", d, "-o", tmp_path / "p.md")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert "\x1b" not in res.output and "a\\x1b[31mred" in res.output and "[bold]b" in res.output  # type: ignore[attr-defined]


def test_evoskill_fifo_skill_refused_not_skipped(tmp_path: Path) -> None:
    import os

    d = tmp_path / "skills"
    (d / "ok").mkdir(parents=True)
    (d / "ok" / "SKILL.md").write_text("---\nname: ok\n---\nbody\n", encoding="utf-8")
    (d / "pipe").mkdir()
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(d / "pipe" / "SKILL.md")
    with pytest.raises(ArtefactInputError, match="pipe"):
        evoskill_prompt(d, [], None)
