"""Loader tests: the real test sets load, and corrupted copies fail with a precise DatasetError.

Every corrupted file is built here from a real record copied into ``tmp_path``; the shared data
directory is only read.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from studybench.datasets import DatasetError, load_dataset
from studybench.records import AnswerType, Parent

Records = list[dict[str, Any]]


def _read(path: Path) -> Records:
    obj = json.loads(path.read_text(encoding="utf-8"))
    return obj["data"] if isinstance(obj, dict) else obj


@pytest.fixture(scope="module")
def app_raw(data_dir: Path) -> Records:
    return _read(data_dir / "application.json")


@pytest.fixture(scope="module")
def transfer_raw(data_dir: Path) -> Records:
    return _read(data_dir / "transfer.json")


def _write(tmp_path: Path, name: str, obj: Any) -> Path:
    p = tmp_path / name
    with p.open("w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return p


# --------------------------------------------------------------------------- real files


def test_application_loads(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "application.json")
    assert (len(ds), ds.n_sub_problems) == (88, 109)
    assert ds.wrapped is True
    assert ds.name == "application"
    assert len(ds.sha256) == 64


def test_transfer_loads(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "transfer.json")
    assert (len(ds), ds.n_sub_problems) == (90, 280)
    assert ds.wrapped is False
    assert len(list(ds.sub_problem_refs())) == 280


def test_both_shapes_load_the_same(tmp_path: Path, transfer_raw: Records) -> None:
    bare = load_dataset(_write(tmp_path, "bare.json", transfer_raw[:5]))
    wrapped = load_dataset(_write(tmp_path, "wrapped.json", {"data": transfer_raw[:5]}))
    assert not bare.wrapped and wrapped.wrapped
    assert [p.key for p in bare.parents] == [p.key for p in wrapped.parents]
    assert bare.n_sub_problems == wrapped.n_sub_problems


def test_single_question_parent_is_one_slot(app_raw: Records) -> None:
    rec = next(r for r in app_raw if not r["sub_problems"])
    parent = Parent.model_validate(copy.deepcopy(rec))
    assert parent.is_single
    slots = parent.subs()
    assert len(slots) == 1
    assert slots[0].problem_id == rec["source_problem_id"]
    assert slots[0].answer == rec["answer"]
    assert parent.stem == ""


def test_single_question_slot_id_in_dataset(tmp_path: Path, app_raw: Records) -> None:
    singles = [r for r in app_raw if not r["sub_problems"]][:3]
    ds = load_dataset(_write(tmp_path, "singles.json", {"data": singles}))
    assert [s.sub_id for s in ds.sub_problem_refs()] == [r["source_problem_id"] for r in singles]
    assert all(s.index == 0 for s in ds.sub_problem_refs())


def test_multi_sub_parent_slots_in_order(tmp_path: Path, transfer_raw: Records) -> None:
    rec = next(r for r in transfer_raw if len(r["sub_problems"]) >= 3)
    ds = load_dataset(_write(tmp_path, "multi.json", [rec]))
    assert [s.sub_id for s in ds.sub_problem_refs()] == [s["problem_id"] for s in rec["sub_problems"]]
    assert [s.index for s in ds.sub_problem_refs()] == list(range(len(rec["sub_problems"])))


def test_packed_tup_gold_is_split(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "application.json")
    p34 = next(p for p in ds.parents if p.source == "Georgi_Waves" and p.source_problem_id == "P3.4")
    sub_a = p34.sub_problems[0]
    assert sub_a.answer_type is AnswerType.TUP
    assert len(sub_a.boxes) == 4


# --------------------------------------------------------------------------- corruption

BAD_INDEX = 2  # the corrupted record sits after two good ones


class Case:
    """One corruption: ``mutate(single, multi)`` returns the bad record (or whole file content)."""

    def __init__(
        self,
        name: str,
        base: str,
        mutate: Callable[[dict[str, Any]], Any],
        field: str | None,
        *,
        whole_file: bool = False,
        record_level: bool = True,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.base = base  # "single" | "multi"
        self.mutate = mutate
        self.field = field
        self.whole_file = whole_file
        self.record_level = record_level
        self.extra = extra


def _sub(j: int, **kw: Any) -> Callable[[dict[str, Any]], None]:
    def f(r: dict[str, Any]) -> None:
        r["sub_problems"][j].update(kw)

    return f


def _pop(key: str, j: int | None = None) -> Callable[[dict[str, Any]], None]:
    def f(r: dict[str, Any]) -> None:
        (r if j is None else r["sub_problems"][j]).pop(key)

    return f


def _set(**kw: Any) -> Callable[[dict[str, Any]], None]:
    def f(r: dict[str, Any]) -> None:
        r.update(kw)

    return f


def _dup_problem_id(r: dict[str, Any]) -> None:
    r["sub_problems"][2]["problem_id"] = r["sub_problems"][0]["problem_id"]


def _empty_sub_and_stem(r: dict[str, Any]) -> None:
    r["problem"] = ""
    r["sub_problems"][1]["problem"] = "   "


TWO = r"\boxed{1}, \boxed{2}"

CASES = [
    Case("missing_answer_sub", "multi", _pop("answer", 1), "sub_problems[1].answer", extra=("missing",)),
    Case("missing_answer_single", "single", _pop("answer"), "answer", extra=("missing",)),
    Case("unknown_answer_type", "multi", _sub(1, answer_type="XX"), "sub_problems[1].answer_type",
         extra=("unknown answer_type 'XX'",)),
    Case("unknown_answer_type_single", "single", _set(answer_type="XX"), "answer_type", extra=("'XX'",)),
    Case("tup_without_type_sequence", "multi", _sub(1, answer_type="TUP", type_sequence="", answer=TWO),
         "sub_problems[1].type_sequence", extra=("required",)),
    Case("tup_without_type_sequence_single", "single", _set(answer_type="TUP", type_sequence="", answer=TWO),
         "type_sequence", extra=("required",)),
    Case("type_sequence_length", "multi", _sub(1, answer_type="TUP", type_sequence="NV,NV,NV", answer=TWO),
         "sub_problems[1].type_sequence", extra=("3 types", "2 boxes")),
    Case("type_sequence_unknown_type", "multi", _sub(1, answer_type="TUP", type_sequence="NV,ZZ", answer=TWO),
         "sub_problems[1].type_sequence", extra=("'ZZ'",)),
    Case("type_sequence_not_string", "multi", _sub(1, type_sequence=5), "sub_problems[1].type_sequence"),
    Case("duplicate_problem_id", "multi", _dup_problem_id, "sub_problems[2].problem_id", extra=("duplicate",)),
    Case("unbalanced_braces_open", "multi", _sub(1, answer=r"\boxed{\frac{1}{2}"), "sub_problems[1].answer",
         extra=("unbalanced",)),
    Case("unbalanced_braces_close", "single", _set(answer=r"\boxed{\frac{1}{2}}}"), "answer",
         extra=("unbalanced",)),
    Case("gold_without_box", "multi", _sub(1, answer="42"), "sub_problems[1].answer", extra=("boxed",)),
    Case("gold_without_box_single", "single", _set(answer="42 m/s"), "answer", extra=("boxed",)),
    Case("answer_is_list", "multi", _sub(1, answer=[r"\boxed{1}"]), "sub_problems[1].answer",
         extra=("string", "list")),
    Case("answer_is_number", "single", _set(answer=42), "answer", extra=("string", "int")),
    Case("sub_problems_not_list", "multi", _set(sub_problems="(a) ..."), "sub_problems", extra=("list",)),
    Case("sub_problems_is_object", "multi", _set(sub_problems={"a": 1}), "sub_problems", extra=("list",)),
    Case("sub_problem_not_object", "multi", lambda r: r["sub_problems"].__setitem__(1, "x"),
         "sub_problems[1]"),
    Case("empty_problem_single", "single", _set(problem="  \n"), "problem", extra=("empty",)),
    Case("empty_sub_problem_and_stem", "multi", _empty_sub_and_stem, "sub_problems[1].problem",
         extra=("empty",)),
    Case("missing_source", "single", _pop("source"), "source", extra=("missing",)),
    Case("empty_problem_id", "multi", _sub(1, problem_id=" "), "sub_problems[1].problem_id"),
    Case("atomic_type_with_sequence", "multi", _sub(1, answer_type="NV", type_sequence="EX"),
         "sub_problems[1].type_sequence"),
    Case("year_wrong_type", "single", _set(year=2.5), "year", extra=("float",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corrupted_record(case: Case, tmp_path: Path, app_raw: Records, transfer_raw: Records) -> None:
    single = next(r for r in app_raw if not r["sub_problems"])
    multi = next(r for r in transfer_raw if len(r["sub_problems"]) >= 3)
    bad = copy.deepcopy(single if case.base == "single" else multi)
    spid = bad["source_problem_id"]
    case.mutate(bad)
    records = [copy.deepcopy(app_raw[10]), copy.deepcopy(transfer_raw[0]), bad, copy.deepcopy(transfer_raw[5])]
    path = _write(tmp_path, f"corrupt_{case.name}.json", records)
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    msg = str(exc.value)
    assert path.name in msg
    assert f"record {BAD_INDEX} " in msg
    assert f"source_problem_id={spid}" in msg
    assert f"field '{case.field}'" in msg, msg
    for s in case.extra:
        assert s in msg, msg
    assert "Traceback" not in msg and "pydantic" not in msg.lower()


def test_duplicate_parent_key(tmp_path: Path, app_raw: Records) -> None:
    records = [app_raw[0], app_raw[1], app_raw[2], copy.deepcopy(app_raw[1])]
    path = _write(tmp_path, "dup_parent.json", {"data": records})
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    msg = str(exc.value)
    assert path.name in msg
    assert "record 3 " in msg and "record 1" in msg
    assert f"source_problem_id={app_raw[1]['source_problem_id']}" in msg
    assert "field 'source_problem_id'" in msg and "duplicate" in msg


def test_same_spid_other_source_is_fine(tmp_path: Path, app_raw: Records) -> None:
    # Application has P3.4 from two different books: the key includes the source.
    p34 = [r for r in app_raw if r["source_problem_id"] == "P3.4"]
    assert len(p34) == 2
    ds = load_dataset(_write(tmp_path, "p34.json", p34))
    assert len(ds) == 2


def test_record_not_an_object(tmp_path: Path, app_raw: Records) -> None:
    path = _write(tmp_path, "notobj.json", [app_raw[0], app_raw[1], "a string", app_raw[3]])
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    msg = str(exc.value)
    assert path.name in msg and "record 2" in msg and "expected an object" in msg and "str" in msg


def test_missing_source_problem_id(tmp_path: Path, app_raw: Records) -> None:
    bad = copy.deepcopy(app_raw[4])
    del bad["source_problem_id"]
    path = _write(tmp_path, "nospid.json", [app_raw[0], app_raw[1], bad])
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    msg = str(exc.value)
    assert path.name in msg and "record 2 " in msg and "field 'source_problem_id'" in msg
    assert "missing" in msg


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (json.dumps({"items": []}), "'data'"),
        (json.dumps({"data": "x"}), "wrong JSON shape"),
        (json.dumps("a string"), "str"),
        ("42", "int"),
        ("null", "NoneType"),
    ],
    ids=["object_without_data", "data_not_list", "string", "number", "null"],
)
def test_wrong_json_shape(tmp_path: Path, content: str, expect: str) -> None:
    path = tmp_path / "shape.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    msg = str(exc.value)
    assert path.name in msg and "shape" in msg and expect in msg


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b'[{"source": "x",', "not valid JSON"),
        (b"", "empty file"),
        (b"  \n", "empty file"),
        (b"[]", "no parents"),
        (b'{"data": []}', "no parents"),
        (b"\xff\xfe\x00garbage", "not valid UTF-8"),
    ],
    ids=["truncated", "empty", "whitespace", "empty_list", "empty_data", "binary"],
)
def test_unusable_file(tmp_path: Path, content: bytes, expect: str) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    msg = str(exc.value)
    assert path.name in msg and expect in msg


def test_invalid_json_from_real_file(tmp_path: Path, data_dir: Path) -> None:
    text = (data_dir / "transfer.json").read_text(encoding="utf-8")
    path = tmp_path / "truncated_transfer.json"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(DatasetError, match="not valid JSON") as exc:
        load_dataset(path)
    assert "line " in str(exc.value)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(DatasetError, match="cannot read") as exc:
        load_dataset(path)
    assert "nope.json" in str(exc.value)


def test_dataset_error_is_value_error() -> None:
    assert issubclass(DatasetError, ValueError)
