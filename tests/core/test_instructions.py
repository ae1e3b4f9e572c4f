"""The instruction-layer loader (:mod:`studybench.instructions`): real files, error messages, parents."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _support import require_data_file

from studybench.instructions import (
    InstructionError,
    find_instruction_files,
    instruction_parents,
    load_instructions,
)


def _train_dir() -> Path:
    return Path(os.environ.get("STUDYBENCH_DATA", "/nonexistent")) / "train"


def _rec(q: str = "What is 1+1?", answer: str = "\\boxed{2}", at: str = "NV", spid: Any = "P1.1",
         messages: list[dict[str, str]] | None = None, chapter: str = "ch01", source: str = "BookA", **kw: Any) -> dict[str, Any]:
    return {"messages": messages if messages is not None else [{"role": "user", "content": q}], "solution": "s",
            "answer": answer, "answer_type": at, "type_sequence": kw.pop("ts", ""),
            "metadata": {"source": source, "source_problem_id": spid, "source_chapter": chapter, "sub_discipline": "Mechanics"},
            **kw}


def _chain(spid: str, n: int, source: str = "BookA", chapter: str = "ch01", answers: list[str] | None = None) -> list[dict[str, Any]]:
    answers = answers or [f"\\boxed{{{j + 1}}}" for j in range(n)]
    out, msgs = [], []
    for j in range(n):
        msgs = [*msgs, {"role": "user", "content": f"{spid} part {j + 1}"}]
        out.append(_rec(answer=answers[j], spid=spid, messages=list(msgs), source=source, chapter=chapter))
        msgs = [*msgs, {"role": "assistant", "content": answers[j]}]
    return out


def _write(tmp_path: Path, obj: Any, name: str = "verifiable_instr.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(obj), encoding="utf-8")
    return p


# ---- real files ---------------------------------------------------------------------------------


def test_real_files_load_with_counts_and_kinds() -> None:
    d = _train_dir()
    require_data_file(d / "verifiable_instr.json", "the single-turn instruction file")
    require_data_file(d / "verifiable_instr_multi_subs.head.json", "the multi-sub instruction head")
    require_data_file(d / "unverifiable_instr.head.json", "the without-answer instruction head")
    found = find_instruction_files(d)
    assert set(found) == {"single", "multi_sub", "without_answer"}
    single = load_instructions(found["single"])
    multi = load_instructions(found["multi_sub"])
    without = load_instructions(found["without_answer"])
    assert (single.kind, len(single), single.head) == ("single", 867, False)
    assert (multi.kind, len(multi), multi.head) == ("multi_sub", 94, True)
    assert (without.kind, len(without), without.head) == ("without_answer", 102, True)
    assert all(r.sub_index == 0 and r.has_answer for r in single.records)
    assert any(r.sub_index > 0 for r in multi.records)
    assert not any(r.has_answer for r in without.records)
    assert len(single.sha256) == 64


def test_real_single_gold_problem_is_record_297() -> None:
    p = _train_dir() / "verifiable_instr.json"
    require_data_file(p, "the single-turn instruction file")
    layer = load_instructions(p)
    probs = layer.gold_problems()
    assert [i for i, _ in probs] == [297]
    line = layer.describe_problem(*probs[0])
    assert str(p) in line and "record 297" in line and "type_sequence" in line


def test_real_multi_sub_head_chains() -> None:
    p = _train_dir() / "verifiable_instr_multi_subs.head.json"
    require_data_file(p, "the multi-sub instruction head")
    layer = load_instructions(p)
    parents, notes = instruction_parents(layer)
    subs = sum(len(x.subs()) for x in parents)
    orphans = [n for n in notes if "earlier sub-problems are not in the file" in n]
    assert len(orphans) == 1 and ".head.json" in orphans[0]
    n_orphans = int(orphans[0].split()[0])
    assert n_orphans > 0 and subs + n_orphans == len(layer)
    assert all(len(x.sub_problems) >= 1 for x in parents)
    ids = [(x.source, x.source_problem_id) for x in parents]
    assert len(ids) == len(set(ids))


# ---- errors name file, record and field ---------------------------------------------------------


@pytest.mark.parametrize(("obj", "want"), [
    ({"x": 1}, "expected a JSON list of records"),
    ([_rec(), 5], "record 1: expected an object"),
    ([{k: v for k, v in _rec().items() if k != "metadata"}], "record 0: field metadata"),
    ([{**_rec(), "metadata": {"source_problem_id": "P9"}}], "field metadata.source"),
    ([_rec(messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])], "field messages"),
    ([_rec(messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])], "last turn must be a user turn"),
    ([_rec(answer="")], "field answer: empty"),
    ([_rec(answer="   ")], "field answer: empty"),
])
def test_errors_name_file_record_field(tmp_path: Path, obj: Any, want: str) -> None:
    p = _write(tmp_path, obj)
    with pytest.raises(InstructionError) as e:
        load_instructions(p)
    msg = str(e.value)
    assert str(p) in msg and want in msg and "\n" not in msg


def test_error_names_source_problem_id(tmp_path: Path) -> None:
    p = _write(tmp_path, [_rec(), _rec(spid="P7.3", messages=[{"role": "assistant", "content": "x"}])])
    with pytest.raises(InstructionError, match=r"record 1 \(source_problem_id=P7.3\): field messages"):
        load_instructions(p)


def test_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "verifiable_instr.json"
    p.write_bytes(b'[{"messages": "\xff\xfe"}]')
    with pytest.raises(InstructionError, match="UTF-8") as e:
        load_instructions(p)
    assert str(p) in str(e.value)


def test_json_lines_accepted(tmp_path: Path) -> None:
    p = tmp_path / "verifiable_instr.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [_rec(spid="A"), _rec(spid=7)]) + "\n\n", encoding="utf-8")
    layer = load_instructions(p)
    assert layer.kind == "single"
    assert [r.metadata.source_problem_id for r in layer.records] == ["A", "7"]


def test_json_lines_bad_line_named(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(_rec()) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(InstructionError, match="line 2"):
        load_instructions(p)


def test_without_answer_layer_accepts_empty_answers(tmp_path: Path) -> None:
    p = _write(tmp_path, [_rec(answer="", at="")], "unverifiable_instr.json")
    layer = load_instructions(p)
    assert layer.kind == "without_answer" and not layer.records[0].has_answer
    with pytest.raises(InstructionError, match="no gold answers"):
        instruction_parents(layer)


# ---- parents ------------------------------------------------------------------------------------


def test_chains_become_parents(tmp_path: Path) -> None:
    recs = _chain("P1", 3) + _chain("P2", 2)
    layer = load_instructions(_write(tmp_path, recs, "verifiable_instr_multi_subs.json"))
    parents, notes = instruction_parents(layer)
    assert notes == []
    assert [(x.source_problem_id, len(x.sub_problems)) for x in parents] == [("P1", 3), ("P2", 2)]
    assert [s.problem_id for s in parents[0].sub_problems] == ["P1.1", "P1.2", "P1.3"]
    assert parents[0].sub_problems[2].problem == "P1 part 3"


def test_orphans_counted(tmp_path: Path) -> None:
    recs = _chain("P1", 3)[1:] + _chain("P2", 2)  # a head copy that starts inside P1's chain
    layer = load_instructions(_write(tmp_path, recs, "verifiable_instr_multi_subs.head.json"))
    parents, notes = instruction_parents(layer)
    assert [x.source_problem_id for x in parents] == ["P2"]
    assert notes == ["2 record(s) left out: their earlier sub-problems are not in the file (a .head.json copy)"]


def test_repeated_ids_get_chapter(tmp_path: Path) -> None:
    recs = [_rec(spid="P1", chapter="ch01"), _rec(spid="P1", chapter="ch02"), _rec(spid="P1", chapter="ch02"),
            _rec(spid="P1", chapter="ch01", source="BookB")]
    layer = load_instructions(_write(tmp_path, recs))
    parents, _ = instruction_parents(layer)
    assert [(x.source, x.source_problem_id) for x in parents] == [
        ("BookA", "ch01/P1"), ("BookA", "ch02/P1"), ("BookA", "ch02/P1#2"), ("BookB", "P1")]


def test_bad_gold_cuts_its_chain(tmp_path: Path) -> None:
    recs = _chain("P1", 3, answers=["\\boxed{1}", "no box here", "\\boxed{3}"]) + _chain("P2", 1)
    layer = load_instructions(_write(tmp_path, recs, "verifiable_instr_multi_subs.json"))
    assert [i for i, _ in layer.gold_problems()] == [1]
    parents, notes = instruction_parents(layer)
    assert [(x.source_problem_id, len(x.sub_problems)) for x in parents] == [("P1", 1), ("P2", 1)]
    # P1 part 3 follows the bad gold: counted as cut, not as an orphan of a partial copy
    assert notes == ["1 record(s) left out: gold answer the verifier cannot use",
                     "1 record(s) left out: they follow an unusable gold answer in their chain"]


def test_cut_and_orphans_counted_apart(tmp_path: Path) -> None:
    recs = (_chain("P0", 3)[2:] + _chain("P1", 4, answers=["\\boxed{1}", "no box", "\\boxed{3}", "\\boxed{4}"])
            + _chain("P2", 2))
    layer = load_instructions(_write(tmp_path, recs, "verifiable_instr_multi_subs.json"))
    parents, notes = instruction_parents(layer)
    assert [(x.source_problem_id, len(x.sub_problems)) for x in parents] == [("P1", 1), ("P2", 2)]
    assert notes == ["1 record(s) left out: gold answer the verifier cannot use",
                     "2 record(s) left out: they follow an unusable gold answer in their chain",
                     "1 record(s) left out: their earlier sub-problems are not in the file"]


def test_bad_single_gold_left_out(tmp_path: Path) -> None:
    recs = [_rec(spid="A"), _rec(spid="B", answer="\\boxed{1}\\boxed{2}", at="TUP", ts="NV"), _rec(spid="C")]
    layer = load_instructions(_write(tmp_path, recs))
    parents, notes = instruction_parents(layer)
    assert [x.source_problem_id for x in parents] == ["A", "C"]
    assert notes == ["1 record(s) left out: gold answer the verifier cannot use"]


# ---- hostile input --------------------------------------------------------------------------------


@pytest.mark.parametrize("escape,field", [
    ("\\ud800", "messages[0].content"),
    ("\\udfff tail", "messages[0].content"),
])
def test_lone_surrogate_named(tmp_path: Path, escape: str, field: str) -> None:
    # a JSON escape can smuggle an unpaired surrogate into a str: no parquet / CSV / hash can write it later
    p = tmp_path / "verifiable_instr.json"
    p.write_text(json.dumps([_rec(), _rec(q="QQQ")]).replace("QQQ", escape), encoding="utf-8")
    with pytest.raises(InstructionError) as e:
        load_instructions(p)
    msg = str(e.value)
    assert f"record 1 (source_problem_id=P1.1): field {field}: a lone surrogate" in msg
    msg.encode("utf-8")  # the message itself is printable


def test_lone_surrogate_in_id_and_key_named(tmp_path: Path) -> None:
    p = tmp_path / "verifiable_instr.json"
    p.write_text(json.dumps([_rec(spid="SSS")]).replace("SSS", "\\ud83d"), encoding="utf-8")
    with pytest.raises(InstructionError, match="field metadata.source_problem_id: a lone surrogate") as e:
        load_instructions(p)
    str(e.value).encode("utf-8")
    p.write_text(json.dumps([{**_rec(), "KKK": 1}]).replace("KKK", "\\udc00"), encoding="utf-8")
    with pytest.raises(InstructionError, match=r"field \(key\): a lone surrogate"):
        load_instructions(p)


def test_surrogate_pair_is_fine(tmp_path: Path) -> None:
    p = tmp_path / "verifiable_instr.json"
    p.write_text(json.dumps([_rec(q="smile \U0001f600")]), encoding="utf-8")  # ensure_ascii: a \\ud83d\\ude00 pair
    assert load_instructions(p).records[0].question == "smile \U0001f600"


@pytest.mark.parametrize("text", ['[{"n": ' + "1" * 5000 + "}]", json.dumps(_rec()) + "\n" + "[" + "9" * 5000 + "]\n"])
def test_huge_integer_is_named_not_called_invalid_json(tmp_path: Path, text: str) -> None:
    p = tmp_path / "verifiable_instr.json"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(InstructionError, match=r"integer out of range \(5000 digits") as e:
        load_instructions(p)
    assert "not valid JSON" not in str(e.value)


def test_repeated_ids_linear(tmp_path: Path) -> None:
    # thousands of records sharing one id used to probe ch01/P1#2, #3, ... from 2 each time: quadratic
    from _support import assert_linear

    layers = {}
    for n in (500, 4000):
        layers[n] = load_instructions(_write(tmp_path, [_rec(spid="P1") for _ in range(n)], f"verifiable_instr{n}.json"))
    parents, _ = instruction_parents(layers[4000])
    ids = [x.source_problem_id for x in parents]
    assert ids[:3] == ["ch01/P1", "ch01/P1#2", "ch01/P1#3"] and len(set(ids)) == 4000
    assert_linear(lambda n: instruction_parents(layers[n]), 500, factor=8)
