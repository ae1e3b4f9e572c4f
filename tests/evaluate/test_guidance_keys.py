"""Guidance entries that match no sub-problem are refused with the nearest real keys; `studybench data ids`
lists the keys a guidance file must use (issue 11, item 17)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import parent, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import load_dataset
from studybench.evaluate import EvalError, EvalSpec, prepare_eval
from studybench.protocol import load_artefacts, nearest_guidance_keys

SET = [
    parent("Q1", [sub("Q1(a.)", "\\boxed{1}", problem="first"), sub("Q1(b.)", "\\boxed{2}", problem="second")],
           source="IPhO", year="1983", problem="stem"),
    parent("P2", source="Book", problem="single", answer="\\boxed{3}", answer_type="NV"),
]
KEYS = [("IPhO", "1983", "Q1", "Q1(a.)"), ("IPhO", "1983", "Q1", "Q1(b.)"), ("Book", "", "P2", "P2")]


def _files(tmp_path: Path, entries: list[dict]) -> tuple[Path, Path]:
    data, g = write_set(tmp_path / "set.json", SET), tmp_path / "guidance.jsonl"
    g.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return data, g


WRONG = [
    {"source": "IPhO", "year": 1983, "source_problem_id": "Q1", "problem_id": "Q1(a)", "guidance": "Use energy."},
    {"source": "IPhO", "year": "1983", "source_problem_id": "Q1", "problem_id": "Q1(b.)", "guidance": "Use momentum."},
]


def _invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_unmatched_guidance_is_refused_with_the_nearest_ids(tmp_path: Path) -> None:
    data, g = _files(tmp_path, WRONG)
    spec = EvalSpec(split=str(data), guidance=g, k=1, seeds=[0])
    with pytest.raises(EvalError) as exc:
        prepare_eval(spec, tmp_path / "run")
    msg = str(exc.value)
    assert exc.value.field == "guidance"
    assert "1 of 2 guidance entries match no sub-problem" in msg
    assert "('IPhO', '1983', 'Q1', 'Q1(a)') (nearest: ('IPhO', '1983', 'Q1', 'Q1(a.)')" in msg
    assert f"studybench data ids --split {data}" in msg and "--ignore-unmatched-guidance" in msg
    assert not (tmp_path / "run").exists()
    plan = prepare_eval(EvalSpec(split=str(data), guidance=g, k=1, seeds=[0], ignore_unmatched_guidance=True), tmp_path / "run")
    assert plan.guidance == (1, [("IPhO", "1983", "Q1", "Q1(a)")])


def test_nearest_keys_of_an_unknown_parent_compare_whole_keys(tmp_path: Path) -> None:
    data, _ = _files(tmp_path, [])
    ds = load_dataset(data)
    assert nearest_guidance_keys(("IPhO", "1983", "Q 1", "Q1(b)"), ds)[0] == ("IPhO", "1983", "Q1", "Q1(b.)")
    assert nearest_guidance_keys(("Other", "2020", "X9", "zz"), ds) == []


def test_cli_refuses_unmatched_guidance_unless_told_to_ignore_it(tmp_path: Path) -> None:
    data, g = _files(tmp_path, WRONG)
    args = ["eval", "--split", data, "-k", 1, "--seeds", 1, "--guidance", g]
    res = _invoke(*args, "--out", tmp_path / "run")
    out = res.output.replace("\n", "")  # type: ignore[attr-defined]  (fail() does not wrap)
    assert res.exit_code == 2, out  # type: ignore[attr-defined]
    assert "--guidance: 1 of 2 guidance entries match no sub-problem" in out
    assert "(nearest: ('IPhO', '1983', 'Q1', 'Q1(a.)')" in out
    res = _invoke(*args, "--ignore-unmatched-guidance", "--out", tmp_path / "run2")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    out = " ".join(res.output.split())  # type: ignore[attr-defined]
    assert "1 guidance key matching no sub-problem" in out
    assert "ignored: 1 of 2 guidance entries match no sub-problem of set: ('IPhO', '1983', 'Q1', 'Q1(a)')" in out
    assert (tmp_path / "run2" / "report.json").is_file()


def test_data_ids_lines_are_accepted_as_guidance_keys(tmp_path: Path) -> None:
    data, _ = _files(tmp_path, [])
    plain = _invoke("data", "ids", "--split", data)
    assert plain.exit_code == 0  # type: ignore[attr-defined]
    assert [tuple(line.split("\t")) for line in plain.stdout.splitlines()] == KEYS  # type: ignore[attr-defined]
    res = _invoke("data", "ids", "--split", data, "--json")
    assert res.exit_code == 0  # type: ignore[attr-defined]
    g = tmp_path / "g.jsonl"
    g.write_text("".join(json.dumps({**json.loads(line), "guidance": f"hint {i}"}) + "\n"
                         for i, line in enumerate(res.stdout.splitlines())))  # type: ignore[attr-defined]
    assert set(load_artefacts(guidance=g).guidance) == set(KEYS)
    plan = prepare_eval(EvalSpec(split=str(data), guidance=g, k=1, seeds=[0]), tmp_path / "run")
    assert plan.guidance == (3, [])


def test_data_ids_of_the_real_sets_round_trip(tmp_path: Path, data_dir: Path) -> None:
    for split in ("application", "transfer"):
        res = _invoke("data", "ids", "--split", split, "--data-dir", data_dir, "--json")
        assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
        lines = res.stdout.splitlines()  # type: ignore[attr-defined]
        ds = load_dataset(data_dir / f"{split}.json")
        assert len(lines) == ds.n_sub_problems == len(set(lines))
        g = tmp_path / f"{split}.jsonl"
        g.write_text("".join(json.dumps({**json.loads(x), "guidance": "hint"}) + "\n" for x in lines))
        plan = prepare_eval(EvalSpec(split=split, data_dir=data_dir, guidance=g, k=1, seeds=[0]), tmp_path / split)
        assert plan.guidance == (ds.n_sub_problems, [])


def test_data_ids_bad_split_is_a_clean_error(tmp_path: Path) -> None:
    res = _invoke("data", "ids", "--split", tmp_path / "missing.json")
    assert res.exit_code == 2 and "neither a split name" in res.output  # type: ignore[attr-defined]
