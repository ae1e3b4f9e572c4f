"""Run directory: append-only JSONL that survives a kill at any byte, atomic manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from studybench.files import InputFileError, JsonlLog, atomic_write_text
from studybench.store import Manifest, ParentIndex, RunStore, SplitInfo, SubIndex, TurnKey


def _row(i: int, **kw: object) -> dict[str, object]:
    r = TurnKey("transfer", f"IPhO/2001/Q{i}", "a", 0, 0).to_dict()
    r.update(kw)
    return r


def test_torn_tail_is_ignored_and_repaired(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "g.jsonl")
    log.append(_row(1, completion="one"))
    log.append(_row(2, completion="two"))
    log.close()
    # simulate a writer killed in the middle of a line
    with open(log.path, "ab") as f:
        f.write(b'{"split":"transfer","parent":"IPhO/20')
    assert [r["completion"] for r in log.rows()] == ["one", "two"]
    log2 = JsonlLog(log.path)
    log2.append(_row(3, completion="three"))
    log2.close()
    lines = log.path.read_bytes().splitlines()
    assert len(lines) == 3 and all(json.loads(x) for x in lines)
    assert [r["completion"] for r in log.rows()] == ["one", "two", "three"]


def test_kill_at_every_byte_offset_leaves_a_prefix_of_rows(tmp_path: Path) -> None:
    rows = [_row(i, completion="x" * i + "é\n") for i in range(5)]
    full = b"".join((json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n").encode() for r in rows)
    for cut in range(0, len(full), 7):
        p = tmp_path / f"cut{cut}.jsonl"
        p.write_bytes(full[:cut])
        got = list(JsonlLog(p).rows())
        assert got == rows[: len(got)]
        assert full[:cut].count(b"\n") == len(got)


def test_last_row_per_key_wins(tmp_path: Path) -> None:
    st = RunStore(tmp_path)
    st.generation_log.append(_row(1, completion="old", error="HTTP 500"))
    st.generation_log.append(_row(1, completion="new", error=None))
    st.generation_log.append(_row(2, completion="other"))
    st.close()
    latest = RunStore(tmp_path).latest_generations()
    assert len(latest) == 2
    assert latest[TurnKey("transfer", "IPhO/2001/Q1", "a", 0, 0)].completion == "new"


def test_atomic_manifest_write_leaves_no_temp_files(tmp_path: Path) -> None:
    st = RunStore(tmp_path / "run")
    man = Manifest(split=SplitInfo(name="s"), k=8, seeds=[0], parents=[ParentIndex(uid="S//P", subs=[SubIndex(id="a", answer_type="NV")])])
    st.write_manifest(man)
    st.write_manifest(man.model_copy(update={"k": 4}))
    assert st.read_manifest().k == 4
    assert sorted(os.listdir(tmp_path / "run")) == ["manifest.json"]
    atomic_write_text(tmp_path / "x.txt", "hello")
    assert (tmp_path / "x.txt").read_text() == "hello"


@pytest.mark.parametrize("line,problem", [
    (b'{"a":' * 5000 + b"1" + b"}" * 5000, "line 2: JSON nested too deeply"),
    (b'{"split": "transfer", "seed": ' + b"9" * 5000 + b"}", "line 2: field 'seed': integer out of range (5000 digits"),
    (b'{"split": "transfer", "latency_s": NaN}', "line 2: field 'latency_s': NaN is not valid JSON"),
    (b"not json", "line 2: not valid JSON (Expecting value at column 1)"),
    (b"[1, 2]", "line 2: not a JSON object"),
    (b'{"completion": "\xff"}', "line 2: not valid UTF-8"),
])
def test_a_hostile_complete_line_is_refused_naming_file_and_line(tmp_path: Path, line: bytes, problem: str) -> None:
    """A complete line that is no strict JSON object is an error naming the line (before: skipped, so an
    older row of its key could count instead); a cache reading the same file just skips it."""
    st = RunStore(tmp_path)
    st.generation_log.append(_row(1, completion="kept"))
    with open(st.generation_log.path, "ab") as f:
        f.write(line + b"\n")
    st.generation_log.append(_row(2, completion="also kept"))
    st.close()
    with pytest.raises(InputFileError) as e:
        RunStore(tmp_path).latest_generations()
    assert str(e.value).startswith(f"{st.generation_log.path}: {problem}"), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    assert [r["completion"] for r in JsonlLog(st.generation_log.path, strict=False).rows()] == ["kept", "also kept"]


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"seeds": [0, 0]}, "seeds: a seed is listed twice"),
        ({"verifier": {"mode": "rule", "timeout": 1e308}}, "verifier.timeout"),
        ({"verifier": {"mode": "rule", "timeout": -5}}, "verifier.timeout"),
    ],
)
def test_manifests_with_impossible_values_are_refused(tmp_path: Path, patch: dict[str, object], needle: str) -> None:
    st = RunStore(tmp_path)
    man = Manifest(split=SplitInfo(name="s"), k=1, seeds=[0], parents=[ParentIndex(uid="S//P", subs=[SubIndex(id="a", answer_type="NV")])])
    obj = {**man.to_json(), **patch}
    st.manifest_path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match=needle):
        st.read_manifest()


def test_a_parent_listed_twice_is_refused(tmp_path: Path) -> None:
    p = ParentIndex(uid="S//P", subs=[SubIndex(id="a", answer_type="NV")])
    with pytest.raises(ValueError, match="listed twice"):
        Manifest(split=SplitInfo(name="s"), k=1, seeds=[0], parents=[p, p])
