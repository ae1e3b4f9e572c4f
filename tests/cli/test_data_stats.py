"""`studybench data stats`: the paper's Table 1 and Table 7 for the files present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import require_data_file
from typer.testing import CliRunner

from studybench.cli import app
from studybench.cli.common import out_console
from studybench.datasets import Dataset, DatasetError, load_dataset, resolve_train_dir
from studybench.instructions import find_instruction_files, load_instructions
from studybench.records import Parent
from studybench.testset.corpus.stats import corpus_stats, data_stats, layer_stats


def _cli(*args: str) -> tuple[int, str]:
    width = out_console.width
    out_console.width = 250  # one table row per line, whatever the terminal
    try:
        res = CliRunner().invoke(app, ["data", "stats", *args], catch_exceptions=False)
    finally:
        out_console.width = width
    return res.exit_code, res.output


def _record(spid: str, answer: str = "\\boxed{2}", answer_type: str = "NV", disc: str = "Mechanics",
            source: str = "Book_A", chapter: str = "ch01") -> dict:
    return {"messages": [{"role": "user", "content": f"Question {spid}?"}], "solution": "s", "answer": answer,
            "answer_type": answer_type, "type_sequence": "",
            "metadata": {"source": source, "source_problem_id": spid, "source_chapter": chapter, "sub_discipline": disc}}


def test_real_layers_and_sets_match_the_paper(data_dir: Path) -> None:
    train = data_dir / "train"
    require_data_file(train / "verifiable_instr.json", "single-turn instruction layer")
    code, out = _cli("--data-dir", str(data_dir), "--json")
    assert code == 0, out
    got = json.loads(out)
    layers = {x["kind"]: x for x in got["layers"]}
    assert layers["single"]["records"] == 867 == layers["single"]["paper"]
    assert not layers["single"]["head"]
    assert layers["single"]["unusable_golds"] == 1  # Georgi_Waves P1.4: three boxes for an EX,QL ALT
    assert sum(layers["single"]["answer_types"].values()) == 867
    sets = {s["name"]: s for s in got["sets"]}
    assert (sets["application"]["parents"], sets["application"]["sub_problems"]) == (88, 109)
    assert (sets["transfer"]["parents"], sets["transfer"]["sub_problems"]) == (90, 280)
    for s in sets.values():  # Table 7 rows add up to the set
        assert sum(v[0] for v in s["sub_disciplines"].values()) == s["parents"]
        assert sum(v[1] for v in s["sub_disciplines"].values()) == s["sub_problems"]
    # the Transfer Set spells one sub-discipline two ways ('&' and 'and'): one row, not two
    thermo = [k for k in sets["transfer"]["sub_disciplines"] if k.lower().startswith("thermodynamics")]
    assert len(thermo) == 1, thermo


def test_head_files_are_marked_partial(data_dir: Path) -> None:
    head = data_dir / "train" / "verifiable_instr_multi_subs.head.json"
    require_data_file(head, "multi-sub instruction layer (head)")
    st = layer_stats(load_instructions(head))
    assert st.kind == "multi_sub" and st.head and st.paper == 553
    assert st.records == 94 and st.exercises < st.records  # several sub-problems per exercise
    code, out = _cli("--data-dir", str(data_dir))
    assert code == 0
    assert "head: 94 of 553" in out
    assert "Table 7" in out


def test_counts_follow_the_files_not_the_paper(tmp_path: Path) -> None:
    train = tmp_path / "train"
    train.mkdir()
    recs = [_record("E1"), _record("E2", disc="Waves"), _record("E3", answer="\\boxed{1}", answer_type="XYZ")]
    (train / "verifiable_instr.json").write_text(json.dumps(recs), encoding="utf-8")
    p = Parent(source="S", source_problem_id="1", problem="q", answer="\\boxed{1}", answer_type="NV",
               problem_type="Thermodynamics & Statistical Physics")
    q = Parent(source="S", source_problem_id="2", problem="q", answer="\\boxed{1}", answer_type="NV",
               problem_type="thermodynamics and statistical physics")
    ds = Dataset.from_parents([p, q], "transfer")
    st = data_stats([load_instructions(train / "verifiable_instr.json")], [ds])
    layer = st.layers[0]
    assert (layer.records, layer.exercises, layer.unusable_golds) == (3, 3, 1)
    assert layer.sub_disciplines == {"Mechanics": 2, "Waves": 1}
    assert st.sets[0].parents == 2 and len(st.sets[0].sub_disciplines) == 1
    code, out = _cli("--train-dir", str(train), "--data-dir", str(tmp_path))
    assert code == 0, out
    assert "differs from the paper" in out and "1 gold(s) the verifier cannot use" in out
    assert "not counted" in out  # no test sets in tmp_path: said, not silently skipped


def test_corpus_row_counts_chapters_bytes_and_tokens(tmp_path: Path) -> None:
    books = tmp_path / "books"
    (books / "Book_A" / "ch01").mkdir(parents=True)
    (books / "Book_A" / "ch02").mkdir(parents=True)
    (books / "Book_A" / "solutions-ch01").mkdir(parents=True)
    (books / "Book_B" / "ch01").mkdir(parents=True)
    (books / "Book_B" / "empty").mkdir(parents=True)
    (books / "Book_A" / "ch01" / "clean.redacted.md").write_text("alpha beta gamma " * 50, encoding="utf-8")
    (books / "Book_A" / "ch01" / "clean.md").write_text("x" * 10_000, encoding="utf-8")  # older stage: not counted
    (books / "Book_A" / "ch02" / "clean.md").write_text("delta " * 10, encoding="utf-8")
    (books / "Book_A" / "solutions-ch01" / "clean.md").write_text("answers", encoding="utf-8")
    (books / "Book_B" / "ch01" / "full.md").write_text("é" * 100, encoding="utf-8")
    c = corpus_stats(books, count_tokens=lambda text: len(text.split()))
    assert (c.books, c.chapters, c.answer_chapters) == (2, 3, 1)
    assert c.stages == {"redacted": 1, "clean": 1, "full": 1}
    assert c.bytes == len("alpha beta gamma " * 50) + len("delta " * 10) + 200
    assert c.tokens == 150 + 10 + 1
    assert c.per_book["Book_A"][0] == 2
    code, out = _cli("--books", str(books), "--train-dir", str(tmp_path), "--data-dir", str(tmp_path), "--json")
    assert code == 0, out
    corpus = json.loads(out)["corpus"]
    assert corpus["chapters"] == 3 and corpus["tokens"] > 0  # the builtin estimate


def test_missing_places_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STUDYBENCH_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code, out = _cli("--train-dir", str(tmp_path / "nope"))
    assert code == 2 and "not a directory" in out
    code, out = _cli("--data-dir", str(tmp_path))
    assert code == 1 and "nothing to count" in out
    with pytest.raises(DatasetError, match="data fetch --train"):
        resolve_train_dir(None, tmp_path)
    assert find_instruction_files(tmp_path) == {}


def test_a_broken_layer_names_file_and_record(tmp_path: Path) -> None:
    train = tmp_path / "train"
    train.mkdir()
    bad = [_record("E1"), {"messages": [{"role": "user", "content": "q"}], "answer": "\\boxed{1}", "answer_type": "NV"}]
    (train / "verifiable_instr.json").write_text(json.dumps(bad), encoding="utf-8")
    code, out = _cli("--train-dir", str(train))
    assert code == 1
    assert "verifiable_instr.json" in out and "record 1" in out and "metadata" in out


def test_real_sets_load_for_stats(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "application.json", name="application")
    st = data_stats([], [ds])
    assert st.sets[0].paper_parents == 88 and st.corpus is None
