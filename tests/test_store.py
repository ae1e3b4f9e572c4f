"""Run directory: append-only JSONL that survives a kill at any byte, atomic manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

from studybench.files import JsonlLog, atomic_write_text
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
