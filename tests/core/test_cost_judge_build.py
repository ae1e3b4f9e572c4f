"""Token and cost accounting of the LLM judge (`judge RUN_DIR`) and the construction stages (`build ...`).

Stub servers stand in for the judge and the teacher; their ``usage`` is computed from text lengths
(:mod:`studybench.testing.stub_core`), so the expected sums are recomputed here from the requests
and replies the stubs saw.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.cli.budget import BUDGET_EXIT_CODE
from studybench.costs import load_pricing, parse_pricing
from studybench.llm_judge import judge_usage, judge_usage_summary
from studybench.store import RunStore
from studybench.testing.stub_judge import judge_reply_fn
from studybench.testing.stub_script import message_text
from studybench.testing.stub_server import Reply, start_stub_server

PRICES = {"currency": "EUR", "models": {"stub-judge": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
                                        "stub-teacher": {"input": 1.0, "output": 3.0, "cached_input": 0.25}}}

SET = [parent("P1", [sub("a", "\\boxed{1}", problem="Q: the speed in m/s?", solution="v = 1."),
                     sub("b", "\\boxed{2}", problem="Q: the time in s?", solution="t = 2.")], problem="A block slides."),
       parent("P2", problem_type="Thermo", problem="Q: the heat in J?", answer="\\boxed{3}", answer_type="NV", solution="Q = 3.")]
K = 4  # 3 sub-problems x 4 attempts = 12 rule rejections, all with distinct texts


def expected_usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    """The stub's usage of one reply (stub_core._render), recomputed by hand."""
    msgs = [m for m in body.get("messages") or () if isinstance(m, dict)]
    prompt = math.ceil(sum(len(message_text(m.get("content"))) for m in msgs) / 4)
    cached = min(sum(len(message_text(m.get("content"))) for m in msgs[:-1]) // 4, prompt)
    return {"prompt_tokens": prompt, "completion_tokens": math.ceil((len(reply.content) + len(reply.reasoning or "")) / 4),
            "cached_tokens": cached, "reasoning_tokens": math.ceil(len(reply.reasoning or "") / 4)}


class Recorder:
    """Wraps a stub reply function; sums the usage the stub reports for every reply it renders."""

    def __init__(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        self.fn = fn
        self.lock = threading.Lock()
        self.usages: list[dict[str, int]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = Reply.coerce(self.fn(body))
        with self.lock:
            self.usages.append(expected_usage(body, reply))
        return reply

    def total(self, name: str) -> int:
        return sum(u[name] for u in self.usages)


def cli(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def model_reply(body: dict[str, Any]) -> Reply:
    """Always the wrong value, with the seed in the working so every completion (and judge input) differs."""
    return Reply(f"Working for seed {body.get('seed')}.\nFinal Answer: \\boxed{{7}}")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One evaluated run (no judge yet), copied by each test."""
    tmp = tmp_path_factory.mktemp("evaluated")
    f = write_set(tmp / "set.json", SET)
    run = tmp / "run"
    with start_stub_server(model_reply, model="stub-model") as msrv:
        res = cli("eval", "--split", f, "--model", "stub-model", "--base-url", msrv.base_url, "-k", K, "--seeds", 1,
                  "--out", run, "--verify-workers", 1)
        assert res.exit_code == 0, res.output
    return run


@pytest.fixture
def judge_env(evaluated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES), encoding="utf-8")
    run = tmp_path / "run"
    shutil.copytree(evaluated, run)
    rec = Recorder(judge_reply_fn(lambda x: False))
    with start_stub_server(rec, model="stub-judge") as jsrv:
        yield {"tmp": tmp_path, "run": run, "prices": prices, "rec": rec, "srv": jsrv}


def _judge(e: dict[str, Any], run: Path, *extra: Any) -> Any:
    return cli("judge", run, "--judge-model", "stub-judge", "--judge-base-url", e["srv"].base_url,
               "--judge-max-retries", 0, "--judge-concurrency", 2, "--pricing", e["prices"], *extra)


def _verdicts(run: Path) -> dict[Any, tuple[str | None, str | None]]:
    return {k: (r.verdict, r.inputs_digest) for k, r in RunStore(run).latest_llm_verdicts().items()}


def test_judge_tokens_and_cost_equal_the_stubs_usage(judge_env: dict[str, Any]) -> None:
    e = judge_env
    res = _judge(e, e["run"])
    assert res.exit_code == 0, res.output
    rec = e["rec"]
    assert len(rec.usages) == 3 * K
    u = judge_usage(e["run"])["stub-judge"]
    assert u.verdicts == 3 * K and u.spent.requests == 3 * K and u.spent.unreported == 0
    for name in ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"):
        assert getattr(u.spent, name) == rec.total(name), name
    assert u.from_cache.total_tokens == 0
    # cost by hand: (prompt - cached) x 2 + cached x 0.5 + completion x 8, per million
    p, c, o = rec.total("prompt_tokens"), rec.total("cached_tokens"), rec.total("completion_tokens")
    want = ((p - c) * 2.0 + c * 0.5 + o * 8.0) / 1e6
    summary = judge_usage_summary(e["run"], load_pricing(e["prices"]))
    assert summary["cost"] == pytest.approx(want) and summary["currency"] == "EUR"
    assert summary["spent"]["total_tokens"] == p + o
    assert f"{p + o:,} tokens = {want:.4f} EUR" in res.output

    # a second run judged by the same judge: every verdict comes from the cache, nothing is charged
    run2 = e["tmp"] / "run2"
    shutil.copytree(e["run"], run2)
    (run2 / "llm_judgements.jsonl").unlink()
    res2 = _judge(e, run2, "--max-total-tokens", 1)
    assert res2.exit_code == 0, res2.output  # cache hits cost nothing, so a tiny budget is no obstacle
    assert len(rec.usages) == 3 * K  # no new request
    u2 = judge_usage(run2)["stub-judge"]
    assert u2.spent.total_tokens == 0 and u2.spent.requests == 0
    assert u2.from_cache.total_tokens == p + o and u2.from_cache.requests == 3 * K  # what they took originally


def test_judge_budget_stops_and_a_rerun_resumes(judge_env: dict[str, Any]) -> None:
    e = judge_env
    full = e["tmp"] / "full"
    shutil.copytree(e["run"], full)
    res = _judge(e, e["run"], "--max-total-tokens", 1500)
    assert res.exit_code == BUDGET_EXIT_CODE, res.output
    assert "stopped:" in res.output and "--max-total-tokens 1,500" in res.output and "left un-judged" in res.output
    asked = len(e["rec"].usages)
    assert 0 < asked < 3 * K
    judged = _verdicts(e["run"])
    assert len(judged) == asked  # what was judged is kept; the rest has no row
    per_request = e["rec"].usages[0]["prompt_tokens"] + e["rec"].usages[0]["completion_tokens"]
    assert judge_usage(e["run"])["stub-judge"].spent.total_tokens < 1500 + 3 * per_request  # only the requests in flight (2) go over
    # the rule verdicts stand
    assert len(RunStore(e["run"]).latest_rule_verdicts()) == 3 * K
    # the same limit again: the tokens spent before count, so nothing new is asked
    res = _judge(e, e["run"], "--max-total-tokens", 1500)
    assert res.exit_code == BUDGET_EXIT_CODE and len(e["rec"].usages) == asked
    # without a limit the rest is judged; the verdicts equal an uninterrupted run's
    res = _judge(e, e["run"])
    assert res.exit_code == 0, res.output
    assert len(e["rec"].usages) == 3 * K  # nothing asked twice
    u = judge_usage(e["run"])["stub-judge"]
    assert u.spent.total_tokens == e["rec"].total("prompt_tokens") + e["rec"].total("completion_tokens")
    (e["tmp"] / "cache").rename(e["tmp"] / "cache-old")  # the uninterrupted run asks afresh
    res = _judge(e, full)
    assert res.exit_code == 0, res.output
    assert _verdicts(full) == _verdicts(e["run"])
    assert judge_usage(full)["stub-judge"].spent.total_tokens == u.spent.total_tokens


def test_max_cost_needs_pricing(judge_env: dict[str, Any]) -> None:
    res = cli("judge", judge_env["run"], "--judge-model", "stub-judge", "--judge-base-url", judge_env["srv"].base_url,
              "--max-cost", "1")
    assert res.exit_code == 2 and "--max-cost needs --pricing" in res.output


# --- construction stages: `build verify` with the stub as teacher ---------------------------------

FRAGMENT_TEXT = "Fragment {f}: the law of {kp} says that the quantity is conserved in every closed system."


def teacher_reply(body: dict[str, Any]) -> Reply:
    """A valid score with its quote, and some reasoning (so reasoning tokens are reported too)."""
    text = body["messages"][-1]["content"]
    score = 3 if "F1" in text else 1
    return Reply(json.dumps({"score": score, "quote": "the quantity is conserved in every closed system"}),
                 reasoning="Reading the fragment carefully.")


def _verify_work(work: Path) -> None:
    work.mkdir()
    kps = ["A", "B", "C", "D"]
    rows = {
        "kps.jsonl": [{"key": f"s{k}", "source": "X", "year": "2020", "source_problem_id": "P", "problem_id": f"s{k}",
                       "sub_discipline": "Mechanics", "status": "ok"} for k in kps],
        "kp_canonical.jsonl": [{"id": k, "type": "law_or_equation", "name": f"law {k}", "descriptions": [f"Law {k}."],
                                "keywords": [k], "sub_discipline": "Mechanics", "uses": [f"s{k}"]} for k in kps],
        "retrieval.jsonl": [{"kp_id": k, "candidates": [{"fragment_id": f"{k}F{i}", "rank": i, "score": 0.1} for i in (1, 2)]}
                            for k in kps],
        "fragments.jsonl": [{"id": f"{k}F{i}", "source": "UP1", "chapter": "1", "section": "1.1", "kind": "exposition",
                             "text": FRAGMENT_TEXT.format(f=f"{k}F{i}", kp=k)} for k in kps for i in (1, 2)],
    }
    for name, rs in rows.items():
        (work / name).write_text("".join(json.dumps(r) + "\n" for r in rs), encoding="utf-8")


def _verify(work: Path, url: str, prices: Path, *extra: Any) -> Any:
    return cli("build", "verify", "--work", work, "--teacher", "stub-teacher", "--base-url", url, "--max-retries", 0,
               "--pricing", prices, *extra)


def _usage(work: Path) -> dict[str, Any]:
    return json.loads((work / "verify.usage.json").read_text())


def test_build_stage_tokens_cost_budget_and_resume(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES), encoding="utf-8")
    full, cut = tmp_path / "full", tmp_path / "cut"
    _verify_work(full)
    _verify_work(cut)
    rec = Recorder(teacher_reply)
    with start_stub_server(rec, model="stub-teacher") as srv:
        res = _verify(full, srv.base_url, prices)
        assert res.exit_code == 0, res.output
        assert len(rec.usages) == 8
        u = _usage(full)
        now = u["now"]["teacher"]
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            assert now[name] == rec.total(name) > 0, name
        p, c, o = rec.total("prompt_tokens"), rec.total("cached_tokens"), rec.total("completion_tokens")
        want = ((p - c) * 1.0 + c * 0.25 + o * 3.0) / 1e6
        assert now["cost"] == pytest.approx(want) and u["total"]["cost"] == pytest.approx(want) and u["currency"] == "EUR"
        assert u["total"]["total_tokens"] == p + o and u["budget_stop"] is None
        assert f"cost {want:.4f} EUR" in res.output and f"{c:,} cached-prompt" in res.output
        # --restart with every reply cached: nothing is asked or charged (so a spent budget is no obstacle);
        # the stage's total is unchanged
        res = _verify(full, srv.base_url, prices, "--restart", "--max-total-tokens", 1)
        assert res.exit_code == 0, res.output
        assert len(rec.usages) == 8
        u2 = _usage(full)
        assert u2["now"]["teacher"]["requests"] == 0 and u2["now"]["teacher"]["prompt_tokens"] == 0
        assert u2["now"]["teacher"]["cached"] == 8 and u2["total"]["total_tokens"] == p + o

        # a small budget stops the stage after some pairs
        per_pair = (p + o) // 8
        limit = 3 * per_pair
        res = _verify(cut, srv.base_url, prices, "--concurrency", 1, "--max-total-tokens", limit)
        assert res.exit_code == BUDGET_EXIT_CODE, res.output
        assert "stopped:" in res.output and f"--max-total-tokens {limit:,}" in res.output and "pairs not asked" in res.output
        asked = len(rec.usages) - 8
        assert 2 <= asked <= 4
        assert len(read_pairs(cut)) == asked and _usage(cut)["budget_stop"]
        statuses = {r["kp_id"]: r["status"] for r in read_coverage(cut) if r["record"] == "kp"}
        assert "uncovered" not in statuses.values()  # pairs not asked leave their KPs unverified
        # the same limit again: the stage's earlier spending counts, nothing new is asked
        res = _verify(cut, srv.base_url, prices, "--concurrency", 1, "--max-total-tokens", limit)
        assert res.exit_code == BUDGET_EXIT_CODE and len(rec.usages) - 8 == asked
        # no limit: the rest is asked once, and the outputs equal the uninterrupted run's
        res = _verify(cut, srv.base_url, prices)
        assert res.exit_code == 0, res.output
        assert len(rec.usages) == 16
    assert _usage(cut)["total"]["total_tokens"] == p + o  # nothing charged twice
    assert (cut / "coverage.jsonl").read_text() == (full / "coverage.jsonl").read_text()
    assert sorted(map(_strip_key_order, read_pairs(cut))) == sorted(map(_strip_key_order, read_pairs(full)))


def read_pairs(work: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (work / "verify_pairs.jsonl").read_text().splitlines()]


def read_coverage(work: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (work / "coverage.jsonl").read_text().splitlines()]


def _strip_key_order(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def test_judge_usage_counts_rows_by_how_they_were_obtained(tmp_path: Path) -> None:
    base = {"parent_uid": "p", "sub_id": "a", "seed": 0, "attempt": 0, "judge_id": "j", "judge_model": "m", "verdict": "FALSE"}
    rows = [
        {**base, "requests": 2, "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 40}},
        {**base, "requests": 0, "cached": True, "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
        {**base, "requests": 0, "shared": True, "usage": {"prompt_tokens": 100, "completion_tokens": 10}},
        {**base, "requests": 1},  # written before usage was recorded
        {**base, "judge_model": "n", "requests": 1, "usage": {"prompt_tokens": 5, "completion_tokens": 5}},
    ]
    (tmp_path / "llm_judgements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    u = judge_usage(tmp_path)
    m = u["m"]
    assert m.verdicts == 4
    assert (m.spent.requests, m.spent.prompt_tokens, m.spent.completion_tokens, m.spent.cached_tokens) == (3, 100, 10, 40)
    assert m.spent.unreported == 1  # the old row
    assert (m.from_cache.requests, m.from_cache.total_tokens) == (1, 10)  # what the cached verdict took originally
    assert u["n"].spent.total_tokens == 10
    prices = parse_pricing({"models": {"m": {"input": 1.0, "output": 2.0}}})
    s = judge_usage_summary(tmp_path, prices)
    assert s["models"]["m"]["cost"] == pytest.approx((100 + 10 * 2) / 1e6)
    assert s["models"]["n"]["cost"] is None and s["cost"] is None  # a model without a price: no total, not zero


def test_eval_budget_covers_the_llm_judge_and_the_report_shows_its_tokens(judge_env: dict[str, Any],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`eval --judge-model ... --max-total-tokens`: one budget for the model's and the judge's requests."""
    e = judge_env
    f = write_set(e["tmp"] / "set.json", SET)
    with start_stub_server(model_reply, model="stub-model") as msrv:
        def run_eval(out: Path, *extra: Any) -> Any:
            return cli("eval", "--split", f, "--model", "stub-model", "--base-url", msrv.base_url, "-k", K,
                       "--seeds", 1, "--out", out, "--verify-workers", 1, "--judge-model", "stub-judge",
                       "--judge-base-url", e["srv"].base_url, "--judge-concurrency", 1, "--pricing", e["prices"], *extra)

        full = e["tmp"] / "full"
        assert run_eval(full).exit_code == 0
        gen = list(RunStore(full).generation_log.rows())
        gen_tokens = sum(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in gen)
        rep = json.loads((full / "report.json").read_text())
        jt = rep["judge_tokens"]
        assert jt["spent"]["requests"] == len(e["rec"].usages) > 0
        assert jt["spent"]["total_tokens"] == e["rec"].total("prompt_tokens") + e["rec"].total("completion_tokens")
        assert jt["cost"] == pytest.approx(load_pricing(e["prices"]).cost("stub-judge", jt["spent"]))
        assert "LLM judge stub-judge: " in (full / "report.md").read_text()

        # a limit the generation fits in but the judging does not: every turn generated, some left un-judged
        monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(e["tmp"] / "cache2"))  # else the verdict cache answers all
        cut = e["tmp"] / "cut"
        limit = gen_tokens + jt["spent"]["total_tokens"] // 3
        res = run_eval(cut, "--max-total-tokens", limit)
        assert res.exit_code == BUDGET_EXIT_CODE, res.output
        assert "un-judged by the LLM judge" in res.output and "--max-total-tokens" in res.output
        assert len(list(RunStore(cut).generation_log.rows())) == len(gen)
        judged = len(RunStore(cut).latest_llm_verdicts())
        assert 0 < judged < len(RunStore(full).latest_llm_verdicts())
        # the same limit again asks the judge nothing new; no limit judges the rest
        asked = len(e["rec"].usages)
        assert run_eval(cut, "--max-total-tokens", limit).exit_code == BUDGET_EXIT_CODE
        assert len(e["rec"].usages) == asked
        assert run_eval(cut).exit_code == 0
        a, b = (json.loads((r / "report.json").read_text()) for r in (full, cut))
        assert (a["par_at_k"], a["sub_at_k"]) == (b["par_at_k"], b["sub_at_k"])
        assert _verdicts(cut).keys() == _verdicts(full).keys()
