"""Token and cost accounting of evaluations, end to end through the CLI with the stub server: the report's
``tokens`` and ``cost`` blocks (report.json, report.md, the HTML page), ``--pricing`` on ``eval`` and
``report``, and ``--max-total-tokens`` / ``--max-cost`` stopping a run that resumes to the same results."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _support import require_extra, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.cli.budget import BUDGET_EXIT_CODE as BUDGET_EXIT
from studybench.testing import Script, start_stub_server

PRICES = {"currency": "USD", "models": {"stub-*": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
                                        "*": {"input": 100.0, "output": 100.0}}}
SCRIPT = Script(default="Work.\nFinal Answer: \\boxed{1}", reasoning="Careful reasoning about the problem at hand.")
N_PARENTS = 4  # 1 + 2 + 3 + 1 = 7 sub-problems
TURNS = 7 * 2 * 2  # k=2, two seeds


def _invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _eval(data: Path, out: Path, url: str, *extra: object) -> Any:
    return _invoke("eval", "--split", data, "--model", "stub-model", "--base-url", url, "-k", 2, "--seeds", 2,
                   "--out", out, "--concurrency", 1, "--verify-workers", 1, "--max-retries", 0, *extra)


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def _sums(rows: list[dict[str, Any]]) -> Counter[str]:
    c: Counter[str] = Counter()
    for r in rows:
        for f in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            c[f] += r["usage"][f]
    c["total_tokens"] = c["prompt_tokens"] + c["completion_tokens"]
    c["requests"] = len(rows)
    return c


def _hand_cost(rows: list[dict[str, Any]]) -> float:
    """USD at the stub-* prices, row by row from the stored usage."""
    total = 0.0
    for r in rows:
        u = r["usage"]
        total += ((u["prompt_tokens"] - u["cached_tokens"]) * 2.0 + u["cached_tokens"] * 0.5 + u["completion_tokens"] * 8.0) / 1e6
    return total


@pytest.fixture(scope="module")
def server() -> Any:
    with start_stub_server(SCRIPT) as srv:
        yield srv


@pytest.fixture(scope="module")
def full(server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(test set, pricing file, an uninterrupted run made with --pricing): shared, never changed."""
    tmp = tmp_path_factory.mktemp("cost")
    data = write_set(tmp / "set.json", N_PARENTS)
    prices = tmp / "prices.json"
    prices.write_text(json.dumps(PRICES))
    res = _eval(data, tmp / "full", server.base_url, "--pricing", prices)
    assert res.exit_code == 0, res.output
    return data, prices, tmp / "full"


@pytest.fixture
def setup(full: tuple[Path, Path, Path], server: Any) -> tuple[Path, Path, Any]:
    return full[0], full[1], server


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns(".lock"))
    return out


def test_eval_with_pricing_sums_the_stored_usage_and_prices_it(full: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, prices, out = full
    rows = _rows(out)
    assert len(rows) == TURNS and all(r["usage"]["cached_tokens"] > 0 or r["turn"] == 0 for r in rows)
    rep = _report(out)
    tok = rep["tokens"]
    want = _sums(rows)
    assert want["reasoning_tokens"] > 0 and want["cached_tokens"] > 0
    assert tok["total"] == {**{k: want[k] for k in ("requests", "prompt_tokens", "completion_tokens", "reasoning_tokens",
                                                      "cached_tokens", "total_tokens")}, "unreported": 0}
    for seed in (0, 1):
        assert tok["per_seed"][str(seed)]["total_tokens"] == _sums([r for r in rows if r["seed"] == seed])["total_tokens"]
    assert sorted(tok["per_turn"]) == ["1", "2", "3"]
    for t in (1, 2, 3):
        s = _sums([r for r in rows if r["turn"] == t - 1])
        assert tok["per_turn"][str(t)]["prompt_tokens"] == s["prompt_tokens"]
        assert tok["per_turn"][str(t)]["requests"] == s["requests"]
    assert rep["usage"]["prompt_tokens"] == want["prompt_tokens"]  # the older block is kept
    cost = rep["cost"]
    assert cost["currency"] == "USD" and cost["model"] == "stub-model" and cost["reason"] is None
    assert cost["total"] == pytest.approx(_hand_cost(rows), rel=1e-9) and cost["total"] > 0
    assert cost["per_seed"]["1"] == pytest.approx(_hand_cost([r for r in rows if r["seed"] == 1]), rel=1e-9)
    assert cost["pricing"]["matched"] == "stub-*" and cost["pricing"]["source"] == str(prices)
    assert cost["pricing"]["sha256"] == hashlib.sha256(prices.read_bytes()).hexdigest()
    md = (out / "report.md").read_text()
    assert "## Tokens and cost" in md and "| run | 28 |" in md and f"| {cost['total']:,.6f} |" in md
    assert "Prices from" in md and "2 input, 0.5 cached input, 8 output, USD per million tokens" in md
    # `report` without --pricing reuses the prices recorded at eval time; the HTML page has the same table
    require_extra("analysis", "jinja2", "matplotlib")
    out = _copy(out, tmp_path)
    shutil.move(out / "report.json", tmp_path / "old.json")  # nothing left over from eval
    res = _invoke("report", out, "--html")
    assert res.exit_code == 0, res.output
    assert _report(out)["cost"]["total"] == cost["total"]
    page = (out / "report.html").read_text()
    assert "<h3>Tokens and cost</h3>" in page and f"{cost['total']:,.6f}</td>" in page
    assert f"<td>turn 3</td><td class=\"num\">{tok['per_turn']['3']['requests']}</td>" in page


def test_a_model_without_a_price_reports_no_price_not_zero(full: tuple[Path, Path, Path], tmp_path: Path) -> None:
    out = _copy(full[2], tmp_path)
    other = tmp_path / "other.toml"
    other.write_text('currency = "EUR"\n[models."gpt-*"]\ninput = 1.0\noutput = 2.0\n')
    res = _invoke("report", out, "--pricing", other)
    assert res.exit_code == 0, res.output
    cost = _report(out)["cost"]
    assert cost["total"] is None and cost["per_seed"] == {"0": None, "1": None}
    assert cost["reason"] == f"no price for model stub-model in {other}"
    md = (out / "report.md").read_text()
    assert f"No price for model stub-model in {other}" in md and "not zero" in md
    assert "0.000000" not in md and "| run | 28 |" in md and md.split("| run | 28 |")[1].split("\n")[0].endswith("| n/a |")
    # recorded: a later rebuild keeps the new prices
    assert _invoke("report", out).exit_code == 0 and _report(out)["cost"]["currency"] == "EUR"


@pytest.mark.parametrize("command", ["eval", "report"])
def test_a_bad_pricing_file_is_one_clean_line(setup: Any, tmp_path: Path, command: str) -> None:
    data, prices, srv = setup
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"stub-model": {"input": -1, "output": 2}}}))
    out = tmp_path / "run"
    if command == "report":
        out = _copy(Path(prices).parent / "full", tmp_path)
        res = _invoke("report", out, "--pricing", bad)
        assert "cost" in _report(out)  # unchanged
    else:
        before = srv.count
        res = _eval(data, out, srv.base_url, "--pricing", bad)
        assert srv.count == before and not (out / "manifest.json").exists()
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert " ".join(res.output.split()) == (f"error: {bad}: models.stub-model.input must be a non-negative number per "
                                            "million tokens, got -1")


def test_max_total_tokens_stops_cleanly_and_resumes_to_the_same_results(setup: Any, tmp_path: Path) -> None:
    data, prices, srv = setup
    full = Path(prices).parent / "full"
    full_rep, full_rows = _report(full), _rows(full)
    limit = full_rep["tokens"]["total"]["total_tokens"] // 3
    out = tmp_path / "run"
    before = srv.count
    res = _eval(data, out, srv.base_url, "--max-total-tokens", limit)
    assert res.exit_code == BUDGET_EXIT, res.output
    text = " ".join(res.output.split())
    assert "stopped: the token budget is spent: " in text and f">= --max-total-tokens {limit:,}" in text
    assert "re-run the same command with a higher --max-total-tokens (or without it) to resume" in text
    rows = _rows(out)
    spent = _sums(rows)["total_tokens"]
    assert 0 < len(rows) < TURNS and srv.count - before == len(rows)
    assert spent >= limit and _sums(rows[:-1])["total_tokens"] < limit  # stopped at the first request past the limit
    rep = _report(out)
    assert rep["complete"] is False and rep["not_generated"] == TURNS - len(rows)
    # the same limit again: the tokens stored in the run directory count, so nothing is sent
    before = srv.count
    res = _eval(data, out, srv.base_url, "--max-total-tokens", limit)
    assert res.exit_code == BUDGET_EXIT and srv.count == before
    # no limit: the run completes, asking only what is missing, with the uninterrupted run's results
    res = _eval(data, out, srv.base_url)
    assert res.exit_code == 0, res.output
    assert srv.count - before == TURNS - len(rows)
    rep = _report(out)
    assert rep["complete"] is True
    for key in ("par_at_k", "sub_at_k", "breakdowns", "pass_at_k", "tokens", "usage", "turns"):
        assert rep[key] == full_rep[key], key
    strip = lambda rs: sorted((r["parent"], r["sub_id"], r["seed"], r["attempt"], r["completion"], json.dumps(r["usage"])) for r in rs)  # noqa: E731
    assert strip(_rows(out)) == strip(full_rows)


def test_max_cost_stops_and_resumes_with_the_recorded_prices(setup: Any, tmp_path: Path) -> None:
    data, prices, srv = setup
    out = tmp_path / "run"
    before = srv.count
    res = _eval(data, out, srv.base_url, "--max-cost", 1)
    assert res.exit_code == 2 and "--max-cost: a cost limit needs prices: give --pricing FILE" in " ".join(res.output.split())
    assert srv.count == before and not (out / "manifest.json").exists()
    full = Path(prices).parent / "full"
    limit = round(_report(full)["cost"]["total"] / 4, 8)
    before = srv.count
    res = _eval(data, out, srv.base_url, "--pricing", prices, "--max-cost", limit)
    assert res.exit_code == BUDGET_EXIT, res.output
    text = " ".join(res.output.split())
    assert "stopped: the cost budget is spent: " in text and f"--max-cost {limit:g}" in text
    assert "with a higher --max-cost" in text
    rows = _rows(out)
    assert 0 < len(rows) < TURNS and srv.count - before == len(rows)
    assert _hand_cost(rows) >= limit > _hand_cost(rows[:-1])
    # resume with a higher limit and no --pricing: the prices the run recorded price the limit and the report
    res = _eval(data, out, srv.base_url, "--max-cost", 1000)
    assert res.exit_code == 0, res.output
    rep, full_rep = _report(out), _report(full)
    assert rep["complete"] is True and rep["sub_at_k"] == full_rep["sub_at_k"]
    assert rep["cost"]["total"] == pytest.approx(full_rep["cost"]["total"], rel=1e-9)
    assert len(_rows(out)) == TURNS


def test_unknown_usage_is_never_priced_as_zero() -> None:
    from studybench.costs import TokenCounts, parse_pricing
    from studybench.report.tokens import cost_block

    pricing = parse_pricing(PRICES, "p.json")
    none = TokenCounts.of([None, {}]).to_dict()
    tokens = {"model": "stub-model", "total": none, "per_seed": {"0": none}, "per_turn": {"1": none}}
    cost = cost_block(tokens, pricing)
    assert cost["total"] is None and cost["per_seed"] == {"0": None}
    assert cost["reason"] == "no request reported its token usage: the cost is unknown"
    some = TokenCounts.of([None, {"prompt_tokens": 1_000_000, "completion_tokens": 0}]).to_dict()
    cost = cost_block({**tokens, "total": some}, pricing)
    assert cost["total"] == 2.0 and cost["reason"] is None and "1 request reported no usage" in cost["note"]
    assert cost_block({**tokens, "model": "other"}, parse_pricing({"models": {"stub-*": {"input": 1, "output": 1}}}))["reason"] \
        == "no price for model other in pricing"
