"""EvalSpec composed of parts (data, generation, budgets, verification, artefacts): every flat setting
routes to its part and reads back, errors name the flat setting, ``merge()`` lays set fields over, the
manifest records the nested form; one official-splits constant, one ``find_run_dataset`` for the
judge and ``reproduce``, one budgets module."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _support import REPO
from pydantic import BaseModel

from studybench.costs import BudgetError, BudgetLimits, open_budget, record_pricing
from studybench.datasets import OFFICIAL_SPLITS, SPLIT_FILES, official_name
from studybench.evaluate import (
    ArtefactSpec,
    DataSpec,
    EvalError,
    EvalSpec,
    GenerationSpec,
    VerificationSpec,
    add_llm_verdicts,
    find_run_dataset,
    reproduction_spec,
    run_eval,
)
from studybench.evaluate.spec import FLAT_FIELDS, PARTS
from studybench.llm_judge import LLMJudgeSpec
from studybench.store import RunStore

SRC = REPO / "src" / "studybench"

SET = [
    {"source": "S", "year": "2020", "source_problem_id": f"P{i}", "problem_type": "Mechanics", "problem": f"Block {i}.",
     "answer": "", "answer_type": "", "type_sequence": "",
     "sub_problems": [{"problem_id": "a", "problem": f"Q{i}: speed?", "answer": f"\\boxed{{{i}}}", "answer_type": "NV",
                       "type_sequence": ""}]}
    for i in range(3)
]


def _value(part: type[BaseModel], name: str) -> Any:
    """A valid value other than the default, from the field's type (every field is covered)."""
    default = part.model_fields[name].get_default(call_default_factory=True)
    special = {"split": "application", "errata": "apply", "stratify": "source", "backend": "openai", "preset": "greedy",
               "reference_mode": "solution", "verifier_mode": "rule", "parent_slice": "1:2", "seeds": [4, 5],
               "api_key_env": "MY_KEY", "model": "m", "base_url": "http://127.0.0.1:9/v1", "sample": 2,
               "parent_ids": ["S/2020/P1"], "exclude_ids": ["S/2020/P2"], "judge": LLMJudgeSpec(model="j")}
    if name in special:
        return special[name]
    if isinstance(default, bool) or name == "thinking":
        return not default
    if isinstance(default, float) or name in ("temperature", "top_p", "min_p", "presence_penalty",
                                              "repetition_penalty", "max_cost"):
        return 0.5
    if isinstance(default, int) or name in ("limit", "top_k", "max_tokens", "context_budget", "verify_workers",
                                            "max_total_tokens"):
        return 4096 if name in ("max_tokens", "context_budget", "min_completion_tokens") else 3
    if name == "dataset":
        return None
    return Path(f"/nonexistent/{name}")


FIELDS = [(part, name) for part, cls in PARTS.items() for name in cls.model_fields if name != "dataset"]


@pytest.mark.parametrize(("part", "name"), FIELDS, ids=[f"{p}.{n}" for p, n in FIELDS])
def test_every_flat_setting_routes_to_its_part_and_reads_back(part: str, name: str) -> None:
    value = _value(PARTS[part], name)
    extra = {"sample": 2} if name == "stratify" else {}
    flat = EvalSpec(**{name: value}, **extra)
    nested = EvalSpec(**{part: {name: value, **extra} if part == "data" else {name: value}})
    assert getattr(getattr(flat, part), name) == value == getattr(flat, name)
    assert flat == nested
    assert name in getattr(flat, part).model_fields_set
    assert EvalSpec.from_flat({name: value, **extra}) == flat


BOUNDED = [(part, name) for part, name in FIELDS
           if any(getattr(m, "ge", None) is not None for m in PARTS[part].model_fields[name].metadata)]


@pytest.mark.parametrize(("part", "name"), BOUNDED, ids=[f"{p}.{n}" for p, n in BOUNDED])
def test_an_invalid_setting_is_named_by_its_flat_name_either_way(part: str, name: str) -> None:
    for values in ({name: -5}, {part: {name: -5}}):
        with pytest.raises(EvalError) as e:
            EvalSpec(**values)
        assert e.value.field == name and str(e.value).startswith(f"{name}: ")


def test_every_field_of_every_part_has_a_docstring() -> None:
    for cls in (*PARTS.values(), EvalSpec):
        for name, f in cls.model_fields.items():
            assert f.description and len(f.description) > 8, f"{cls.__name__}.{name}"
    assert set(PARTS) == {"data", "generation", "budgets", "verification", "artefacts"}
    assert (PARTS["data"], PARTS["generation"], PARTS["verification"], PARTS["artefacts"]) == (
        DataSpec, GenerationSpec, VerificationSpec, ArtefactSpec)
    assert set(FLAT_FIELDS) - {"slice"} == {n for c in PARTS.values() for n in c.model_fields}


def test_merge_lays_only_the_fields_set_over() -> None:
    base = EvalSpec(k=2, seeds=[0], max_tokens=4096, temperature=0.3, labels={"a": "1"})
    merged = base.merge(EvalSpec(k=5, concurrency=64))  # 64 is the default, but it was given: it is set
    assert (merged.k, merged.seeds, merged.max_tokens, merged.temperature) == (5, [0], 4096, 0.3)
    assert merged.labels == {"a": "1"} and "concurrency" in merged.generation.model_fields_set
    assert base.merge({"temperature": 0.9, "generation": {"top_p": 0.5}}).generation.model_dump(
        include={"temperature", "top_p", "max_tokens"}) == {"temperature": 0.9, "top_p": 0.5, "max_tokens": 4096}
    assert base.data.merge(DataSpec(limit=3)).k == 2 and base.data.merge({"k": 7}).k == 7
    assert BudgetLimits(max_total_tokens=10).merge(BudgetLimits(max_cost=1.0)).model_dump() == {
        "pricing": None, "max_cost": 1.0, "max_total_tokens": 10}
    with pytest.raises(EvalError) as e:
        base.merge({"k": 0})  # validated again
    assert e.value.field == "k"
    with pytest.raises(EvalError):
        base.merge({"only_generate": True, "only_verify": True})


def test_the_manifest_stores_the_nested_form_without_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_TEST_KEY", "sk-verysecretvalue123")
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    spec = EvalSpec(split=str(f), model="reference", k=1, seeds=[0], api_key_env="SB_TEST_KEY",
                    base_url="http://user:sk-verysecretvalue123@127.0.0.1:9/v1", max_total_tokens=10**9)
    run_eval(spec, tmp_path / "run")
    text = (tmp_path / "run" / "manifest.json").read_text()
    assert "sk-verysecretvalue123" not in text
    config = json.loads(text)["config"]
    assert set(config) == {"data", "generation", "budgets", "verification", "artefacts", "only_generate", "only_verify",
                           "labels"}
    assert config["data"]["k"] == 1 and config["budgets"]["max_total_tokens"] == 10**9
    assert config["generation"]["api_key_env"] == "SB_TEST_KEY"
    back = EvalSpec(**{k: v for k, v in config.items()} | {"data": {**config["data"], "dataset": None}})
    assert back.k == 1 and back.max_total_tokens == 10**9


_SPLIT_LITERALS = re.compile(r"""[(\[{]\s*(['"])(application|transfer)\1\s*,\s*(['"])(application|transfer)\3\s*,?\s*[)\]}]""")


def test_the_official_splits_are_written_out_once() -> None:
    found = [f"{p.relative_to(SRC)}:{text[:m.start()].count(chr(10)) + 1}"
             for p in sorted(SRC.rglob("*.py")) for text in [p.read_text(encoding="utf-8")]
             for m in _SPLIT_LITERALS.finditer(text)]
    assert [f.split(":")[0] for f in found] == ["datasets.py"], found  # OFFICIAL_SPLITS itself
    assert OFFICIAL_SPLITS == ("application", "transfer") and set(SPLIT_FILES) == set(OFFICIAL_SPLITS)
    assert official_name("transfer") == "transfer" and official_name("x/transfer.json") is None


def test_the_judge_and_reproduce_find_a_run_s_test_set_alike(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    run_eval(EvalSpec(split=str(f), model="reference", k=1, seeds=[0]), tmp_path / "run")
    man = RunStore(tmp_path / "run").read_manifest()
    moved = tmp_path / "moved.json"
    f.rename(moved)
    assert find_run_dataset(man, "run", split_path=moved).sha256 == man.split.sha256
    assert reproduction_spec(tmp_path / "run", split_path=moved).dataset.sha256 == man.split.sha256
    judged = add_llm_verdicts(tmp_path / "run", LLMJudgeSpec(model="j", base_url="http://127.0.0.1:9/v1"),
                              split_path=moved, preflight=False)
    assert judged.llm.judged == 0  # every answer was right: nothing for the judge
    moved.write_text(json.dumps(SET[:2]))  # the file changed since the run
    refusals = []
    for find in (lambda: find_run_dataset(man, "run", split_path=moved),
                 lambda: reproduction_spec(tmp_path / "run", split_path=moved),
                 lambda: add_llm_verdicts(tmp_path / "run", LLMJudgeSpec(model="j", base_url="http://127.0.0.1:9/v1"),
                                          split_path=moved, preflight=False)):
        with pytest.raises(EvalError) as e:
            find()
        assert e.value.field == "split"
        refusals.append(str(e.value))
    assert all("changed since the run was made (content differs from the run's test set: sha256" in r for r in refusals)
    assert "--allow-data-change" in refusals[1] and "--allow-data-change" not in refusals[2]
    changed = reproduction_spec(tmp_path / "run", split_path=moved, allow_data_change=True)
    assert changed.data_change == (man.split.sha256, changed.dataset.sha256)


def test_one_budgets_module_opens_every_job_s_limits(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"currency": "EUR", "models": {"*": {"input": 1.0, "output": 2.0}}}))
    with pytest.raises(BudgetError) as e:
        open_budget(BudgetLimits(max_cost=1.0))
    assert e.value.field == "max_cost"
    tracker = open_budget(BudgetLimits(pricing=prices, max_cost=1.0))
    assert tracker.pricing is not None and tracker.pricing.currency == "EUR" and tracker.exceeded() is None
    record_pricing(tmp_path, tracker.pricing)  # a run directory's record is used when no file is given
    again = open_budget(BudgetLimits(max_cost=1.0), run_dir=tmp_path)
    assert again.pricing is not None and again.pricing.currency == "EUR"
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(BudgetError) as e:
        open_budget(BudgetLimits(pricing=bad))
    assert e.value.field == "pricing" and "bad.json" in str(e.value)
    # evaluation goes through it too: the same refusal, named by the spec's field
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    with pytest.raises(EvalError) as e:
        run_eval(EvalSpec(split=str(f), k=1, seeds=[0], max_cost=1.0), tmp_path / "run")
    assert e.value.field == "max_cost" and "needs prices" in str(e.value)
    users = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "BudgetTracker(" in p.read_text(encoding="utf-8"))
    assert users == ["costs.py"]  # every job opens its budget with open_budget


def test_from_flat_takes_a_mapping_or_keywords_alike() -> None:
    by_map = EvalSpec.from_flat({"split": "transfer", "model": "reference", "k": 2})
    by_kw = EvalSpec.from_flat(split="transfer", model="reference", k=2)
    mixed = EvalSpec.from_flat({"split": "transfer", "model": "reference", "k": 5}, k=2)
    assert by_map == by_kw == mixed and by_kw.data.k == 2


def test_model_copy_with_a_flat_setting_keeps_the_part_and_the_read_through_in_step() -> None:
    spec = EvalSpec(split="transfer", model="reference", k=1)
    copied = spec.model_copy(update={"k": 3, "max_tokens": 4096})
    assert copied.k == copied.data.k == 3 and copied.generation.max_tokens == copied.max_tokens == 4096
    assert spec.data.k == 1  # the original is untouched
    with pytest.raises(EvalError, match="k"):
        spec.model_copy(update={"k": 0})
    with pytest.raises(EvalError):
        spec.model_copy(update={"no_such_setting": 1})
    part = spec.model_copy(update={"data": spec.data.merge({"k": 4})})  # parts: pydantic's own copy
    assert part.k == part.data.k == 4
