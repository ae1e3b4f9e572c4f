"""Selecting parents: by id, by exclusion, by a seeded (stratified) sample; recorded in the manifest."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import Dataset, load_dataset
from studybench.evaluate import (
    EvalError,
    EvalSpec,
    prepare_eval,
    read_parent_ids,
    sample_parents,
    select_parents,
    selection_values,
)
from studybench.records import Parent
from studybench.store import RunStore


def _parents(n: int = 30) -> list[Parent]:
    out = []
    for i in range(n):
        src = ("BookA", "BookB", "Olymp")[i % 3] if i % 5 else "BookA"  # BookA the largest group
        out.append(Parent.model_validate({"source": src, "year": "", "source_problem_id": f"P{i}", "problem": "q",
                                          "problem_type": ("Mechanics", "Optics")[i % 2], "answer": "\\boxed{1}",
                                          "answer_type": "NV"}))
    return out


DS = Dataset.from_parents(_parents(), "set")


def test_parent_ids_keep_file_order_and_unknown_ids_name_the_nearest() -> None:
    got = select_parents(DS, parent_ids=["BookB//P7", "BookA//P0"])
    assert [p.uid for p in got] == ["BookA//P0", "BookB//P7"]
    with pytest.raises(EvalError, match=r"'BookB//P77' is not a parent.*nearest: BookB//P7") as e:
        select_parents(DS, parent_ids=["BookB//P77"])
    assert e.value.field == "parent_ids"
    with pytest.raises(EvalError, match="outside the slice"):
        select_parents(DS, None, "2:4", parent_ids=["BookB//P7"])


def test_exclusions_and_the_order_of_the_steps() -> None:
    all_ids = [p.uid for p in DS.parents]
    got = select_parents(DS, 3, "0:10", exclude_ids=[all_ids[1]])
    assert [p.uid for p in got] == [all_ids[0], all_ids[2], all_ids[3]]  # slice, exclusion, then limit
    with pytest.raises(EvalError, match="excluded parent 'nope'"):
        select_parents(DS, exclude_ids=["nope"])
    with pytest.raises(EvalError, match="holds no parents.*2 parent ids, 2 exclusions"):
        select_parents(DS, parent_ids=all_ids[:2], exclude_ids=all_ids[:2])
    got = select_parents(DS, drop={all_ids[0]: "erratum"}, limit=1)
    assert [p.uid for p in got] == [all_ids[1]]


def test_a_sample_is_deterministic_seeded_and_independent_of_the_pool_order() -> None:
    a = sample_parents(DS.parents, 8, seed=3)
    assert [p.uid for p in a] == [p.uid for p in sample_parents(DS.parents, 8, seed=3)]
    shuffled = list(DS.parents)
    random.Random(1).shuffle(shuffled)
    assert {p.uid for p in sample_parents(shuffled, 8, seed=3)} == {p.uid for p in a}
    assert any({p.uid for p in sample_parents(DS.parents, 8, seed=s)} != {p.uid for p in a} for s in range(4, 9))
    order = [p.uid for p in DS.parents]
    assert [p.uid for p in a] == sorted((p.uid for p in a), key=order.index)  # file order kept
    assert len(sample_parents(DS.parents, 100, seed=3)) == len(DS.parents)


@pytest.mark.parametrize("n", [3, 4, 7, 12])
@pytest.mark.parametrize("key", ["source", "problem_type"])
def test_a_stratified_sample_gives_every_group_its_share(n: int, key: str) -> None:
    got = sample_parents(DS.parents, n, seed=0, stratify=key)
    assert len(got) == n
    groups = {getattr(p, key) for p in DS.parents}
    picked = [getattr(p, key) for p in got]
    assert set(picked) == groups  # every group represented (n >= number of groups)
    for g in groups:
        share = n * sum(getattr(p, key) == g for p in DS.parents) / len(DS.parents)
        assert abs(picked.count(g) - share) < 1 + 1e-9


def test_the_first_twelve_application_parents_are_one_book_but_a_stratified_sample_is_not(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "application.json", name="application")
    assert len({p.source for p in ds.parents[:12]}) == 1
    got = select_parents(ds, sample=12, sample_seed=0, stratify="source")
    assert len({p.source for p in got}) >= 8


def test_stratify_needs_a_sample() -> None:
    with pytest.raises(EvalError, match="stratify") as e:
        EvalSpec(stratify="source")
    assert e.value.field == "stratify"


def test_id_files_read_plain_ids_and_data_ids_lines(tmp_path: Path) -> None:
    f = tmp_path / "ids.txt"
    f.write_text("# mine\nBookA//P0\n\nBookB\t\tP7\t(a)\nBookA//P0\n", encoding="utf-8")
    assert read_parent_ids(f) == ["BookA//P0", "BookB//P7"]
    f.write_text("# nothing\n")
    with pytest.raises(EvalError, match="no parent id"):
        read_parent_ids(f)
    with pytest.raises(EvalError, match="not a regular file"):
        read_parent_ids(tmp_path)


def _write(tmp_path: Path) -> Path:
    f = tmp_path / "set.json"
    f.write_text(json.dumps([p.model_dump() for p in _parents()]))
    return f


def test_the_manifest_records_the_selection_and_it_round_trips(tmp_path: Path) -> None:
    spec = EvalSpec(split=str(_write(tmp_path)), k=1, seeds=[0], sample=6, sample_seed=4, stratify="source",
                    exclude_ids=["BookA//P0"])
    plan = prepare_eval(spec, tmp_path / "run")
    plan.open_store().close()
    man = RunStore(tmp_path / "run").read_manifest()
    assert man.selection is not None and man.selection.model_extra == {
        "exclude_ids": ["BookA//P0"], "sample": 6, "sample_seed": 4, "stratify": "source"}
    assert man.errata is not None and man.errata["mode"] == "official"
    values = selection_values(man)
    again = prepare_eval(spec.merge(values), tmp_path / "run")
    assert [p.uid for p in again.scope.parents] == [p.uid for p in plan.scope.parents]
    plain = prepare_eval(EvalSpec(split=str(_write(tmp_path)), k=1, seeds=[0], limit=2), tmp_path / "plain")
    assert plain.manifest.selection is not None and not plain.manifest.selection.model_extra  # old keys only


def _invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_cli_selection_options(tmp_path: Path) -> None:
    f = _write(tmp_path)
    ids = tmp_path / "ids.txt"
    ids.write_text("BookA//P0\nBookB//P7\n")
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "a", "--parents", ids,
                  "--parent", "Olymp//P2", "--exclude", "BookB//P7")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    man = RunStore(tmp_path / "a").read_manifest()
    assert [p.uid for p in man.parents] == ["BookA//P0", "Olymp//P2"]
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "b", "--sample", 5, "--sample-seed", 2,
                  "--stratify", "source")
    assert res.exit_code == 0 and len(RunStore(tmp_path / "b").read_manifest().parents) == 5  # type: ignore[attr-defined]
    for args, msg in [(("--parent", "Nope//P1"), "--parent: parent 'Nope//P1' is not a parent"),
                      (("--stratify", "book"), "--stratify must be source or problem_type"),
                      (("--stratify", "source"), "--stratify: a stratified sample needs its size"),
                      (("--parents", tmp_path / "missing.txt"), "--parents:"),
                      (("--errata", "fix"), "--errata must be official, apply or exclude")]:
        res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "c", *args)
        assert res.exit_code == 2 and msg in " ".join(res.output.split()), (args, res.output)  # type: ignore[attr-defined]
