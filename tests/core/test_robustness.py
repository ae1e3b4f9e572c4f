"""Hostile input at the boundaries: dataset files, artefacts, run directories, server replies.

Each case comes from a reproduced bug: it must give a clear error (or be handled), never a raw
traceback, a hang, or a secret in the run directory.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from studybench.datasets import DatasetError, load_dataset
from studybench.evaluate import EvalSpec, generate_turns, prepare_eval
from studybench.models.base import ChatRequest, ChatResult
from studybench.models.openai_backend import OpenAIBackend
from studybench.models.replies import parse_reply as _parse
from studybench.protocol import ArtefactError, Artefacts, load_artefacts
from studybench.report import build_report, write_report
from studybench.store import RunStore
from studybench.testing import Script, start_stub_server


def _rec(spid: str = "P1", **kw: Any) -> dict[str, Any]:
    r: dict[str, Any] = {"source": "S", "year": "", "source_problem_id": spid, "problem": "What is g?",
                         "answer": "\\boxed{9.8}", "answer_type": "NV", "type_sequence": "", "sub_problems": []}
    r.update(kw)
    return r


def _write(tmp: Path, obj: Any, name: str = "set.json") -> Path:
    p = tmp / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


@pytest.mark.parametrize(
    "text,needle,why",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply", "recursion in the JSON parser"),
        ('[{"year": ' + "9" * 5000 + "}]", r"field '\[0\]\.year': integer out of range \(5000 digits", "integer over Python's digit limit"),
        ('[{"year": ' + "9" * 400 + "}]", r"field '\[0\]\.year': integer out of range \(400 digits", "integer over 64 bits"),
        ('[{"year": NaN}]', r"field '\[0\]\.year': NaN is not valid JSON", "Python's json reads NaN"),
        ('[{"year": 1e999999}]', r"field '\[0\]\.year': number out of range \(1e999999", "a float overflowing to inf"),
        ("   \n", "empty file", "whitespace only"),
    ],
)
def test_dataset_parser_limits_give_dataset_errors(tmp_path: Path, text: str, needle: str, why: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(DatasetError, match=needle):
        load_dataset(p)


def test_ids_differing_only_by_whitespace_are_duplicates(tmp_path: Path) -> None:
    p = _write(tmp_path, [_rec("T3"), _rec("T3 ")])
    with pytest.raises(DatasetError, match=r"record 1 .*duplicate parent key"):
        load_dataset(p)
    subs = [{"problem_id": "a", "problem": "x", "answer": "\\boxed{1}", "answer_type": "NV"},
            {"problem_id": " a", "problem": "y", "answer": "\\boxed{2}", "answer_type": "NV"}]
    with pytest.raises(DatasetError, match="duplicate problem_id"):
        load_dataset(_write(tmp_path, [_rec(sub_problems=subs, answer="", answer_type="")], "b.json"))


def test_guidance_keys_normalised_and_bad_files_rejected(tmp_path: Path) -> None:
    g = _write(tmp_path, [{"source": "S", "year": 2003.0, "source_problem_id": 7, "guidance": "hint"}], "g.json")
    art = load_artefacts(guidance=g)
    assert ("S", "2003", "7", "7") in art.guidance
    deep = _write(tmp_path, "[" * 100_000 + "]" * 100_000, "deep.json")
    with pytest.raises(ArtefactError, match="nested too deeply"):
        load_artefacts(guidance=deep)
    bad = _write(tmp_path, [{"source": "S", "source_problem_id": [1], "guidance": "h"}], "bad.json")
    with pytest.raises(ArtefactError, match="record 0"):
        load_artefacts(guidance=bad)


def _plan(tmp_path: Path) -> Any:
    ds = load_dataset(_write(tmp_path, [_rec("P1"), _rec("P2")]))
    return prepare_eval(EvalSpec(dataset=ds, k=1, seeds=[0]), tmp_path / "run", backend=_Surrogate())


def _run_dir(tmp_path: Path) -> RunStore:
    plan = _plan(tmp_path)
    store = plan.open_store()
    return store


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"backend": "x"}, "field 'backend'"),
        ({"k": 0}, "field 'k'"),
        ({"k": 100_000_000}, "field 'k'"),
        ({"seeds": []}, "field 'seeds'"),
        ({"parents": "none"}, "field 'parents'"),
        ({"split": {"name": 5}}, "split.name"),
    ],
)
def test_corrupted_manifest_is_a_clear_error(tmp_path: Path, patch: dict[str, Any], needle: str) -> None:
    store = _run_dir(tmp_path)
    man = json.loads(store.manifest_path.read_text())
    man.update(patch)
    store.manifest_path.write_text(json.dumps(man))
    with pytest.raises(ValueError, match=needle):
        build_report(store)
    r = subprocess.run([sys.executable, "-m", "studybench.cli", "report", str(store.root)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "manifest.json" in r.stderr


def test_report_on_non_run_paths(tmp_path: Path) -> None:
    for target in (tmp_path, tmp_path / "missing", Path("/etc/hostname")):
        r = subprocess.run([sys.executable, "-m", "studybench.cli", "report", str(target)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "not a run directory" in r.stderr


def test_garbage_rows_do_not_crash_or_count(tmp_path: Path) -> None:
    store = _run_dir(tmp_path)
    base = {"split": "set", "parent": "S//P1", "sub_id": "P1", "seed": 0, "attempt": 0}
    store.generation_log.append({**base, "completion": 5, "usage": [1, 2]})
    store.generation_log.append({**base, "parent": "S//P2", "sub_id": "P2", "completion": "\\boxed{9.8}", "usage": {"x": "y"}})
    store.rule_log.append({**base, "parent": "S//P2", "sub_id": "P2", "correct": "false",
                             "completion_digest": __import__("studybench.files", fromlist=["x"]).text_digest("\\boxed{9.8}")})
    store.close()
    rep = write_report(store)
    assert rep["par_at_k"]["mean"] == 0.0  # "false" (a string) is not a verdict of correct
    assert rep["turns"]["missing_judgements"] == 1
    # a line that is no JSON object at all is not a row of any key: an error naming the line, never
    # skipped (an older row of the key it held would count in its place)
    with open(store.root / "generations.jsonl", "ab") as f:
        f.write(b"not json at all\n[1,2]\n")
    with pytest.raises(ValueError, match=r"generations\.jsonl: line 3: not valid JSON"):
        write_report(store)


class _Surrogate:
    name = "surrogate"

    async def complete(self, request: ChatRequest) -> ChatResult:
        return ChatResult("bad \ud800 text Final Answer: \\boxed{9.8}", reasoning="r\udfff")

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"backend": "surrogate", "model": "s"}


def test_lone_surrogates_from_the_model_are_stored_and_resumable(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    store = RunStore(plan.run_dir)
    st = asyncio.run(generate_turns(plan.scope, store, _Surrogate(), Artefacts()))
    assert st.generated == 2
    rows = list(store.generation_log.rows())
    assert len(rows) == 2 and all("\ufffd" in r["completion"] for r in rows)
    again = asyncio.run(generate_turns(plan.scope, store, _Surrogate(), Artefacts()))
    assert again.reused == 2 and again.generated == 0


def test_surrogates_in_the_dataset_are_rejected_with_the_field(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps([_rec("P1"), _rec("P2", problem="x \ud800 y")]))
    with pytest.raises(DatasetError, match=r"record 1 \(source_problem_id=P2\): field 'problem': .*surrogate"):
        load_dataset(p)
    r = subprocess.run([sys.executable, "-m", "studybench.cli", "eval", "--split", str(p), "--model", "reference",
                        "-k", "1", "--seeds", "1", "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "surrogate" in r.stderr and "Traceback" not in r.stderr


def test_api_key_never_stored_even_when_the_server_echoes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "canary-KEY-0123456789abcdef"
    monkeypatch.setenv("STUDYBENCH_TEST_KEY", secret)
    with start_stub_server(Script(default=f"my key is {secret} and Bearer {secret}. Final Answer: \\boxed{{1}}")) as srv:
        be = OpenAIBackend("m", srv.base_url, None, api_key_env="STUDYBENCH_TEST_KEY", request_timeout=5)

        async def go() -> ChatResult:
            try:
                return await be.complete(ChatRequest([{"role": "user", "content": "q"}], 1, None, 0))  # type: ignore[arg-type]
            finally:
                await be.aclose()

        res = asyncio.run(go())
        assert srv.headers[-1].get("authorization") == f"Bearer {secret}"
    assert secret not in res.completion and "Final Answer" in res.completion
    assert secret not in json.dumps(res.extra)


def test_non_finite_usage_keeps_the_completion() -> None:
    res = _parse({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": float("nan"), "completion_tokens": 1e400, "total_tokens": 3}})
    assert res.completion == "ok" and res.usage == {"total_tokens": 3}


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--temperature", "nan"], "--temperature"),
        (["--top-p", "5"], "--top-p"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--verify-timeout", "-1"], "--verify-timeout"),
        (["--judge-timeout", "-1"], "--verify-timeout"),
        (["-k", "0"], "-k"),
        (["--seeds", "0"], "--seeds"),
        (["--slice", "x"], "--slice"),
    ],
)
def test_cli_rejects_bad_options(tmp_path: Path, args: list[str], needle: str) -> None:
    p = _write(tmp_path, [_rec()])
    r = subprocess.run([sys.executable, "-m", "studybench.cli", "eval", "--split", str(p), "--model", "reference",
                        "--out", str(tmp_path / "run"), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


def test_out_is_an_existing_file(tmp_path: Path) -> None:
    p = _write(tmp_path, [_rec()])
    f = tmp_path / "file.txt"
    f.write_text("x")
    r = subprocess.run([sys.executable, "-m", "studybench.cli", "eval", "--split", str(p), "--model", "reference",
                        "--out", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a directory" in r.stderr


@pytest.mark.parametrize("patch,field", [({"answer_type": "junk"}, "answer_type"), ({"type_sequence": {"a": 1}}, "type_sequence")])
def test_malformed_parent_gold_fields_of_multi_sub_parent(tmp_path: Path, patch: dict[str, Any], field: str) -> None:
    sub = {"problem_id": "a", "problem": "x", "answer": "\\boxed{1}", "answer_type": "NV"}
    fields: dict[str, Any] = {"sub_problems": [sub], "answer": "", "answer_type": ""}
    fields.update(patch)
    p = _write(tmp_path, [_rec(**fields)])
    with pytest.raises(DatasetError, match=f"field '{field}'"):
        load_dataset(p)
