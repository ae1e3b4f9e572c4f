"""Training material out (:mod:`studybench.methods.exports`): verl parquet, TRL dataset, agent-loop CSV."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from _support import require_data_file, require_extra
from typer.testing import CliRunner

from studybench.cli import app
from studybench.instructions import InstructionError
from studybench.methods.exports import (
    CSV_COLUMNS,
    ExportError,
    export_csv,
    export_trl,
    export_verl,
    load_layers,
    render_question,
    split_counts,
)
from studybench.protocol import ANSWER_FORMAT, DEFAULT_SYSTEM_PROMPT
from studybench.rewards import compute_score, trl_reward

SUFFIX = "\n\n" + ANSWER_FORMAT

# (answer, answer_type, type_sequence, a wrong answer)
GOLDS = [
    ("\\boxed{3.5}", "NV", "", "\\boxed{97}"),
    ("\\boxed{v = a t}", "EQ", "", "\\boxed{v = a t^2}"),
    ("\\boxed{2}\\boxed{x^2}", "TUP", "NV,EX", "\\boxed{7}\\boxed{y^3}"),
    ("\\boxed{\\frac{1}{2} m v^2}", "EX", "", "\\boxed{m v}"),
    ("\\boxed{B}", "MC", "", "\\boxed{D}"),
]


def _meta(source: str, spid: str, chapter: str = "ch01") -> dict[str, str]:
    return {"source": source, "source_problem_id": spid, "source_chapter": chapter, "sub_discipline": "Mechanics"}


def _single(source: str, spid: str, g: int, **kw: Any) -> dict[str, Any]:
    ans, at, ts, _ = GOLDS[g % len(GOLDS)]
    q = kw.pop("q", f"{source} {spid}: find it, with \"quotes\", commas, and\na newline")
    return {"messages": [{"role": "user", "content": q}], "solution": "sol", "answer": kw.pop("answer", ans),
            "answer_type": at, "type_sequence": ts, "metadata": _meta(source, spid)}


def _chain(source: str, spid: str, n: int) -> list[dict[str, Any]]:
    out, msgs = [], []
    for j in range(n):
        ans = f"\\boxed{{{j + 10}}}"
        msgs = [*msgs, {"role": "user", "content": f"{spid} part {j + 1}"}]
        out.append({"messages": list(msgs), "solution": "s", "answer": ans, "answer_type": "NV", "type_sequence": "",
                    "metadata": _meta(source, spid)})
        msgs = [*msgs, {"role": "assistant", "content": ans}]
    return out


@pytest.fixture
def train_dir(tmp_path: Path) -> Path:
    d = tmp_path / "train"
    d.mkdir()
    single = [_single(src, f"P{k}", k) for src in ("BookA", "BookB") for k in range(30)]
    single.append(_single("BookA", "P99", 2, answer="\\boxed{1}"))  # TUP with one box for two types: unusable
    multi = [r for src in ("BookA", "BookB") for k in range(8) for r in _chain(src, f"M{k}", 1 + k % 3)]
    multi += _chain("BookA", "P3", 2)  # the same exercise as a single-turn record
    without = [{"messages": [{"role": "user", "content": f"explain {k}"}], "solution": "because", "answer": "",
                "answer_type": "", "metadata": _meta("BookA", f"W{k}")} for k in range(6)]
    for name, obj in (("verifiable_instr.json", single), ("verifiable_instr_multi_subs.json", multi),
                      ("unverifiable_instr.json", without)):
        (d / name).write_text(json.dumps(obj), encoding="utf-8")
    return d


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["source"], row["source_chapter"], row["source_problem_id"])


def _need_train() -> None:
    require_extra("train", "pyarrow", "datasets")


# ---- verl ---------------------------------------------------------------------------------------


def _verl(out: Path, train_dir: Path, **kw: Any) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    import pyarrow.parquet as pq

    res = export_verl(out, load_layers(train_dir, ["single", "multi_sub"]), **kw)
    return res, {s: pq.read_table(out / f"{s}.parquet").to_pylist() for s in ("train", "validation")}


def test_verl_schema_and_prompts(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    import pyarrow as pa
    import pyarrow.parquet as pq

    res, rows = _verl(tmp_path / "v", train_dir, val_fraction=0.2)
    schema = pq.read_schema(tmp_path / "v" / "train.parquet")
    assert schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert schema.field("data_source").type == pa.string()
    assert schema.field("prompt").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    gt = schema.field("reward_model").type.field("ground_truth").type
    assert [gt.field(i).name for i in range(gt.num_fields)] == ["answer", "answer_type", "type_sequence", "gold_unit"]
    assert all(gt.field(i).type == pa.string() for i in range(gt.num_fields))
    info = schema.field("extra_info").type
    assert {info.field(i).name for i in range(info.num_fields)} >= {
        "split", "index", "layer", "source", "source_problem_id", "source_chapter", "sub_discipline", "sub_index",
        "problem"}
    assert pq.read_schema(tmp_path / "v" / "validation.parquet") == schema
    allrows = rows["train"] + rows["validation"]
    assert len(allrows) == 60 + 2 * (3 + 3 * 2 + 2 * 3) + 2 == res.total
    assert res.left_out == {"single": 1, "multi_sub": 0}
    assert any("record 60" in w and "P99" in w and "verifiable_instr.json" in w for w in res.warnings)
    for split, rs in rows.items():
        assert [r["extra_info"]["index"] for r in rs] == list(range(len(rs)))
        for r in rs:
            p = r["prompt"]
            assert p[0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
            assert p[-1]["role"] == "user" and p[-1]["content"].endswith(SUFFIX)
            assert sum(m["content"].endswith(SUFFIX) for m in p) == 1
            assert r["ability"] == "physics" and r["reward_model"]["style"] == "rule"
            assert r["extra_info"]["split"] == split
            assert r["data_source"] == "studybench/" + r["extra_info"]["layer"]
            # the problem text the reward hands to the verifier: every user turn, nothing else
            assert r["extra_info"]["problem"] == "\n\n".join(x["content"] for x in p if x["role"] == "user")
    m = next(r for r in allrows if r["extra_info"]["sub_index"] == 2)
    assert [x["role"] for x in m["prompt"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [x["content"] for x in m["prompt"][2::2]] == ["\\boxed{10}", "\\boxed{11}"]  # earlier golds
    assert m["reward_model"]["ground_truth"]["answer"] == "\\boxed{12}"
    meta = json.loads((tmp_path / "v" / "export.json").read_text())
    assert meta["seed"] == 0 and meta["fractions"]["validation"] == 0.2 and len(meta["sha256"]["single"]) == 64
    assert sum(n for s in meta["rows"].values() for n in s.values()) == res.total


def test_verl_split_by_exercise_and_seeded(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    _, a = _verl(tmp_path / "a", train_dir, val_fraction=0.25, seed=1)
    _, b = _verl(tmp_path / "b", train_dir, val_fraction=0.25, seed=1)
    _, c = _verl(tmp_path / "c", train_dir, val_fraction=0.25, seed=2)
    assert a == b
    assert (tmp_path / "a" / "train.parquet").read_bytes() == (tmp_path / "b" / "train.parquet").read_bytes()
    val = {_key(r["extra_info"]) for r in a["validation"]}
    train = {_key(r["extra_info"]) for r in a["train"]}
    assert val and train and not val & train
    assert ("BookA", "ch01", "P3") in val | train  # single and multi-sub records of P3 on one side
    p3 = [r["extra_info"]["split"] for r in a["train"] + a["validation"] if _key(r["extra_info"]) == ("BookA", "ch01", "P3")]
    assert len(p3) == 3 and len(set(p3)) == 1
    assert {_key(r["extra_info"]) for r in c["validation"]} != val
    n_ex = len(val | train)
    assert len(val) == round(0.25 * n_ex)


@pytest.mark.parametrize("g", range(len(GOLDS)))
def test_verl_rows_score_with_compute_score(tmp_path: Path, train_dir: Path, g: int) -> None:
    _need_train()
    _, rows = _verl(tmp_path / "v", train_dir)
    ans, at, _, wrong = GOLDS[g]
    row = next(r for r in rows["train"] + rows["validation"] if r["reward_model"]["ground_truth"]["answer_type"] == at)
    gt = row["reward_model"]["ground_truth"]
    assert gt["answer"] == ans

    def score(text: str) -> Any:
        return compute_score(data_source=row["data_source"], solution_str="Working...\nFinal Answer: " + text,
                             ground_truth=gt, extra_info=row["extra_info"])

    assert score(gt["answer"]) == 1.0
    assert score(wrong) == 0.0


def test_verl_rows_as_verl_reads_them(tmp_path: Path, train_dir: Path) -> None:
    # verl 0.9 (verl/utils/dataset/rl_dataset.py) loads the parquet with datasets.load_dataset("parquet"),
    # batches non-tensor columns as numpy object arrays, and its naive reward manager calls the reward
    # with reward_model["ground_truth"] and an extra_info to which it adds num_turns / rollout_reward_scores
    _need_train()
    import datasets
    import numpy as np

    export_verl(tmp_path / "v", load_layers(train_dir, ["single", "multi_sub"]))
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "v" / "train.parquet"))["train"]
    rows = [ds[i] for i in range(len(ds))]
    batch = {k: np.fromiter((r[k] for r in rows), dtype=object, count=len(rows)) for k in ("data_source", "reward_model", "extra_info")}
    for i in range(len(rows)):
        gt = batch["reward_model"][i]["ground_truth"]
        info = batch["extra_info"][i]
        info["num_turns"], info["rollout_reward_scores"] = None, {}
        got = compute_score(data_source=batch["data_source"][i], solution_str="Final Answer: " + gt["answer"],
                            ground_truth=gt, extra_info=info, return_dict=True)
        assert got["score"] == 1.0, (i, gt, got)  # type: ignore[index]


def test_verl_system_prompt_options(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    _, rows = _verl(tmp_path / "n", train_dir, system_prompt=None)
    assert all(r["prompt"][0]["role"] == "user" for r in rows["train"])
    sp = tmp_path / "sp.txt"
    sp.write_text("Be terse.\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["export", "verl", "--out", str(tmp_path / "f"), "--train-dir", str(train_dir),
                                   "--system-prompt", str(sp)])
    assert res.exit_code == 0, res.output
    import pyarrow.parquet as pq

    first = pq.read_table(tmp_path / "f" / "train.parquet").to_pylist()[0]["prompt"][0]
    assert first == {"role": "system", "content": "Be terse."}
    res = CliRunner().invoke(app, ["export", "verl", "--out", str(tmp_path / "g"), "--train-dir", str(train_dir),
                                   "--system-prompt", str(sp), "--no-system-prompt"])
    assert res.exit_code == 2 and "not both" in res.output


def test_verl_refuses_without_answer(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    with pytest.raises(ExportError, match="Instructions without Answer have no gold answer"):
        export_verl(tmp_path / "v", load_layers(train_dir, ["single", "without_answer"]))
    res = CliRunner().invoke(app, ["export", "verl", "--out", str(tmp_path / "v"), "--train-dir", str(train_dir),
                                   "--layers", "without_answer"])
    assert res.exit_code == 2 and "unverifiable_instr.json" in res.output
    assert not (tmp_path / "v").exists()


def test_verl_missing_pyarrow_names_extra(tmp_path: Path, train_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(ImportError, match=r"studybench\[train\]"):
        export_verl(tmp_path / "v", load_layers(train_dir, ["single"]))


# ---- TRL ----------------------------------------------------------------------------------------


def test_trl_dataset_scores_with_trl_reward(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    import datasets

    res = export_trl(tmp_path / "t", load_layers(train_dir, ["single", "multi_sub"]), val_fraction=0.2, seed=3)
    dd = datasets.load_from_disk(str(tmp_path / "t"))
    assert set(dd) == {"train", "validation"}
    assert len(dd["train"]) + len(dd["validation"]) == res.total == 92
    cols = set(dd["train"].column_names)
    assert {"prompt", "answer", "answer_type", "type_sequence", "gold_unit", "source", "source_problem_id", "layer"} <= cols
    tr = {_key(r) for r in dd["train"]}
    assert not tr & {_key(r) for r in dd["validation"]}
    ds = dd["train"]
    picks = [next(i for i, t in enumerate(ds["answer_type"]) if t == at) for _, at, _, _ in GOLDS]
    batch = ds.select(picks)
    columns = {c: batch[c] for c in batch.column_names if c != "prompt"}
    assert all(p[-1]["content"].endswith(SUFFIX) for p in batch["prompt"])

    def reward(texts: list[str]) -> list[Any]:
        completions = [[{"role": "assistant", "content": "Thinking.\nFinal Answer: " + t}] for t in texts]
        return trl_reward(prompts=batch["prompt"], completions=completions, completion_ids=None, trainer_state=None, **columns)

    assert reward(list(batch["answer"])) == [1.0] * len(GOLDS)
    assert reward([g[3] for g in GOLDS]) == [0.0] * len(GOLDS)


def test_trl_without_answer_rows(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    import datasets

    layers = load_layers(train_dir, ["single", "without_answer"])
    with pytest.raises(ExportError, match="without Answer"):
        export_trl(tmp_path / "t", layers)
    res = export_trl(tmp_path / "t", layers, with_without_answer=True)
    dd = datasets.load_from_disk(str(tmp_path / "t"))
    rows = [r for s in dd.values() for r in s if r["layer"] == "without_answer"]
    assert len(rows) == 6 and all(r["answer"] == "" and r["answer_type"] == "" for r in rows)
    assert res.counts.get(("train", "without_answer"), 0) + res.counts.get(("validation", "without_answer"), 0) == 6
    # TRL's call on a mixed batch: rows without a gold get None (TRL leaves them out), the others a float
    every = [r for s in dd.values() for r in s]
    mixed = [r for r in every if r["layer"] == "single"][:6] + rows
    assert {r["layer"] for r in mixed} == {"single", "without_answer"}
    cols = {c: [r[c] for r in mixed] for c in mixed[0] if c != "prompt"}
    comps = [[{"role": "assistant", "content": "Final Answer: " + (r["answer"] or "\\boxed{1}")}] for r in mixed]
    got = trl_reward(prompts=[r["prompt"] for r in mixed], completions=comps, completion_ids=None, trainer_state=None, **cols)
    assert [g is None for g in got] == [r["layer"] == "without_answer" for r in mixed]
    assert all(g == 1.0 for g in got if g is not None)
    # a second export replaces the first; a directory that is not an export is never replaced
    export_trl(tmp_path / "t", load_layers(train_dir, ["single"]))
    assert datasets.load_from_disk(str(tmp_path / "t"))["train"].unique("layer") == ["single"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="not a previous TRL export"):
        export_trl(other, load_layers(train_dir, ["single"]))
    assert (other / "keep.txt").read_text() == "x"


# ---- CSV ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "want"), [(10, [2, 1, 7]), (4, [1, 1, 2]), (3, [1, 1, 1]), (2, [1, 0, 1]),
                                         (1, [0, 0, 1]), (0, [0, 0, 0]), (31, [6, 3, 22])])
def test_split_counts(n: int, want: list[int]) -> None:
    assert split_counts(n, (0.2, 0.1, 0.7)) == want


def test_csv_round_trips_and_splits_per_source(tmp_path: Path, train_dir: Path) -> None:
    out = tmp_path / "agent.csv"
    layers = load_layers(train_dir, ["single", "multi_sub"])
    res = export_csv(out, layers, seed=5)
    want = [r for layer in layers for i, r in enumerate(layer.records) if not (layer.kind == "single" and i == 60)]
    with open(out, newline="", encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    assert tuple(got[0]) == CSV_COLUMNS and len(got) == len(want) == res.total
    for row, rec in zip(got, want, strict=True):
        assert row["question"] == render_question(rec)
        assert row["answer"] == rec.answer and row["answer_type"] == rec.answer_type
        assert row["type_sequence"] == rec.type_sequence_str
    assert '"quotes", commas, and\na newline' in got[0]["question"]
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert frame.to_dict("records") == got
    ex: dict[tuple[str, str, str], set[str]] = {}
    for r in got:
        ex.setdefault(_key(r), set()).add(r["split"])
    assert all(len(s) == 1 for s in ex.values())
    for src in ("BookA", "BookB"):
        splits = [next(iter(s)) for k, s in ex.items() if k[0] == src]
        assert {x: splits.count(x) for x in ("train", "val", "test")} == dict(zip(("train", "val", "test"),
                                                                               split_counts(len(splits), (0.2, 0.1, 0.7)), strict=True))
    again = tmp_path / "again.csv"
    export_csv(again, layers, seed=5)
    assert again.read_bytes() == out.read_bytes()
    export_csv(again, layers, seed=6)
    assert again.read_bytes() != out.read_bytes()


def test_render_question_multi_sub(train_dir: Path) -> None:
    multi = load_layers(train_dir, ["multi_sub"])[0]
    rec = next(r for r in multi.records if r.sub_index == 2)
    spid = rec.metadata.source_problem_id
    assert render_question(rec) == (f"Part 1:\n{spid} part 1\n\nAnswer to part 1:\n\\boxed{{10}}\n\n"
                                    f"Part 2:\n{spid} part 2\n\nAnswer to part 2:\n\\boxed{{11}}\n\n"
                                    f"Part 3 (answer this part):\n{spid} part 3")
    single = next(r for r in multi.records if r.sub_index == 0)
    assert render_question(single) == single.question


def test_csv_bad_fractions(tmp_path: Path, train_dir: Path) -> None:
    with pytest.raises(ExportError, match="summing to 1"):
        export_csv(tmp_path / "x.csv", load_layers(train_dir, ["single"]), fractions=(0.5, 0.5, 0.5))
    res = CliRunner().invoke(app, ["export", "csv", "--out", str(tmp_path / "x.csv"), "--train-dir", str(train_dir),
                                   "--fractions", "a,b"])
    assert res.exit_code == 2 and "--fractions" in res.output


# ---- layers and the command line ----------------------------------------------------------------


def test_load_layers_errors(tmp_path: Path, train_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ExportError, match="unknown layer 'bogus'"):
        load_layers(train_dir, ["single", "bogus"])
    with pytest.raises(ExportError, match=r"no such directory \(expected the folder of the instruction layers, train/"):
        load_layers(tmp_path / "nope", ["single"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ExportError, match="verifiable_instr_multi_subs.json"):
        load_layers(empty, ["multi_sub"])
    monkeypatch.delenv("STUDYBENCH_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ExportError, match="data fetch --train"):
        load_layers(None, ["single"])
    monkeypatch.setenv("STUDYBENCH_DATA", str(tmp_path))
    assert load_layers(None, ["single"])[0].path.parent == train_dir
    (train_dir / "verifiable_instr.json").write_text("[5]", encoding="utf-8")
    with pytest.raises(InstructionError, match="record 0"):
        load_layers(None, ["single"])


def test_cli_summary(tmp_path: Path, train_dir: Path) -> None:
    res = CliRunner().invoke(app, ["export", "csv", "--out", str(tmp_path / "a.csv"), "--train-dir", str(train_dir)])
    assert res.exit_code == 0, res.output
    assert "rows per split and layer" in res.output and "multi_sub" in res.output
    assert "warning: left out:" in res.output and "P99" in res.output
    assert "wrote 92 rows" in res.output
    res = CliRunner().invoke(app, ["export", "csv", "--out", str(tmp_path / "b.csv"), "--train-dir", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no such directory" in res.output


# ---- real files ---------------------------------------------------------------------------------


def test_real_files_export(tmp_path: Path) -> None:
    d = Path(os.environ.get("STUDYBENCH_DATA", "/nonexistent")) / "train"
    require_data_file(d / "verifiable_instr.json", "the single-turn instruction file")
    require_data_file(d / "verifiable_instr_multi_subs.head.json", "the multi-sub instruction head")
    layers = load_layers(d, ["single", "multi_sub"])
    res = export_csv(tmp_path / "a.csv", layers)
    assert res.left_out == {"single": 1, "multi_sub": 0}
    assert res.total == 866 + len(layers[1])
    assert any("record 297" in w for w in res.warnings)


# ---- hostile input ------------------------------------------------------------------------------


@pytest.mark.parametrize("fractions", [(float("nan"), 0.5, 0.5), (0.5, float("nan"), 0.5), (float("inf"), 0.0, 0.0)])
def test_csv_non_finite_fractions_refused(tmp_path: Path, train_dir: Path, fractions: tuple[float, ...]) -> None:
    # NaN passed the "sum to 1" check (every comparison with NaN is false) and crashed in split_counts
    with pytest.raises(ExportError, match="fractions must be"):
        export_csv(tmp_path / "x.csv", load_layers(train_dir, ["single"]), fractions=fractions)
    res = CliRunner().invoke(app, ["export", "csv", "--out", str(tmp_path / "x.csv"), "--train-dir", str(train_dir),
                                   "--fractions", ",".join(map(str, fractions))])
    assert res.exit_code == 2 and "fractions must be" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("val_fraction", [0.0, 0.05])
def test_trl_empty_split_saved(tmp_path: Path, val_fraction: float) -> None:
    # one exercise (or --val-fraction 0): the validation split is empty; from_list([]) lost the columns
    # and save_to_disk failed with a datasets traceback
    _need_train()
    import datasets

    d = tmp_path / "train"
    d.mkdir()
    (d / "verifiable_instr.json").write_text(json.dumps([_single("BookA", "P1", 0)] * 3), encoding="utf-8")
    res = export_trl(tmp_path / "t", load_layers(d, ["single"]), val_fraction=val_fraction)
    dd = datasets.load_from_disk(str(tmp_path / "t"))
    assert len(dd["train"]) == res.total == 3 and len(dd["validation"]) == 0
    assert dd["validation"].column_names == dd["train"].column_names


def test_verl_out_not_a_fresh_directory(tmp_path: Path, train_dir: Path) -> None:
    _need_train()
    layers = load_layers(train_dir, ["single"])
    f = tmp_path / "file"
    f.write_text("x", encoding="utf-8")
    with pytest.raises(ExportError, match="exists and is not a directory"):
        export_verl(f, layers)
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.parquet").write_text("someone else's", encoding="utf-8")
    with pytest.raises(ExportError, match="not a previous verl export"):
        export_verl(other, layers)
    assert (other / "train.parquet").read_text(encoding="utf-8") == "someone else's"
    res = CliRunner().invoke(app, ["export", "verl", "--out", str(other), "--train-dir", str(train_dir)])
    assert res.exit_code == 2 and "not a previous verl export" in res.output
    export_verl(tmp_path / "v", layers)  # a previous export is replaced
    export_verl(tmp_path / "v", layers)
    (tmp_path / "empty").mkdir()
    export_verl(tmp_path / "empty", layers)


def test_nul_and_escape_in_text_round_trip(tmp_path: Path) -> None:
    _need_train()
    import pyarrow.parquet as pq

    d = tmp_path / "train"
    d.mkdir()
    recs = [_single("BookA", f"P{k}", 0, q=f"a\x00b \x1b[31m{k}") for k in range(4)]
    (d / "verifiable_instr.json").write_text(json.dumps(recs), encoding="utf-8")
    layers = load_layers(d, ["single"])
    export_verl(tmp_path / "v", layers)
    rows = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
    assert all("a\x00b \x1b[31m" in r["prompt"][-1]["content"] for r in rows)
    export_csv(tmp_path / "x.csv", layers)
    with open(tmp_path / "x.csv", encoding="utf-8", newline="") as fh:
        qs = [r["question"] for r in csv.DictReader(fh)]
    assert sorted(qs) == [f"a\x00b \x1b[31m{k}" for k in range(4)]
