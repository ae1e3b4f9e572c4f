"""Hostile input to the issue-16 features: pricing files, servers' ``usage`` objects, ``--ray-address``
strings and reward batches that a careless or malicious user, dataset or server would give.

Each case once ended in a traceback, a silent wrong price or a batch that raised; now each is a clean
one-line error (exit 2) or, for model output and server replies, an honest count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _support import write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.cli.budget import BUDGET_EXIT_CODE
from studybench.costs import PricingError, TokenCounts, load_pricing, normalise_usage, parse_pricing
from studybench.testing import Reply, start_stub_server

OK_ENTRY = '{"input": 1, "output": 2}'

# (file name, content, words the one-line message must hold)
BAD_PRICING = [
    ("deep.json", "[" * 100_000 + "]" * 100_000, ["deep.json", "nested too deeply"]),
    ("deep-object.json", '{"models": ' + '{"a": ' * 50_000 + "1" + "}" * 50_001, ["nested too deeply"]),
    ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000, ["deep.toml", "nested too deeply"]),
    ("bigint.json", '{"models": {"m": {"input": ' + "9" * 400 + ', "output": 1}}}', ["models.m.input", "at most"]),
    ("huge.json", '{"models": {"m": {"input": 1e308, "output": 1}}}', ["models.m.input", "at most"]),
    ("dup-model.json", '{"models": {"m": ' + OK_ENTRY + ', "m": {"input": 9, "output": 9}}}', ["duplicate key 'm'"]),
    ("dup-field.json", '{"models": {"m": {"input": 1, "input": 5, "output": 1}}}', ["duplicate key 'input'"]),
    ("empty-name.json", '{"models": {"": ' + OK_ENTRY + "}}", ["model name", "empty"]),
    ("currency.json", '{"currency": "US\\nD", "models": {"m": ' + OK_ENTRY + "}}", ["currency", "printable"]),
]


@pytest.mark.parametrize("name,content,words", BAD_PRICING, ids=[c[0] for c in BAD_PRICING])
def test_a_hostile_pricing_file_is_a_pricing_error_naming_the_file(tmp_path: Path, name: str, content: str,
                                                                   words: list[str]) -> None:
    # before: RecursionError / OverflowError tracebacks, a silently last-wins duplicate, a price that
    # made every cost inf (report.json then held "Infinity"), a currency that broke report.md's table
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(PricingError) as e:
        load_pricing(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and len(msg) < 400
    for w in words:
        assert w in msg


def test_a_price_too_large_to_print_is_refused_without_printing_it() -> None:
    with pytest.raises(PricingError, match="models.m.input .* at most 1e\\+12, got a number too large to print"):
        parse_pricing({"models": {"m": {"input": 10**5000, "output": 1}}})
    assert parse_pricing({"models": {"m": {"input": 1e12, "output": 0}}}).price("m") is not None  # the bound itself


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ref")
    data = write_set(tmp / "set.json", 1)
    res = CliRunner().invoke(app, ["eval", "--split", str(data), "--model", "reference", "-k", "1", "--seeds", "1",
                                   "--out", str(tmp / "run"), "--verify-workers", "1"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return tmp / "run"


@pytest.mark.parametrize("name,content", [(c[0], c[1]) for c in BAD_PRICING[:4]], ids=[c[0] for c in BAD_PRICING[:4]])
@pytest.mark.parametrize("command", ["report", "judge"])
def test_the_cli_turns_a_hostile_pricing_file_into_one_line_and_exit_2(reference_run: Path, tmp_path: Path,
                                                                      command: str, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    before = (reference_run / "report.json").read_bytes()
    res = CliRunner().invoke(app, [command, str(reference_run), "--pricing", str(path)])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    line = " ".join(res.output.split())
    assert "Traceback" not in res.output and line.startswith("error: ") and str(path) in line
    assert (reference_run / "report.json").read_bytes() == before


# -- servers' usage objects ------------------------------------------------------------------------

def test_a_part_larger_than_its_whole_is_cut_to_the_whole() -> None:
    # before: cached 50 of a 10-token prompt was summed as is, so the report showed more cached
    # tokens than prompt tokens, and a batch of such replies was priced at the cached price throughout
    assert normalise_usage({"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 50},
                            "completion_tokens_details": {"reasoning_tokens": 99}}) == {
        "prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 10, "reasoning_tokens": 5}
    pricing = parse_pricing({"models": {"m": {"input": 1, "output": 0, "cached_input": 0}}})
    both = TokenCounts.of([{"prompt_tokens": 10, "completion_tokens": 0, "cached_tokens": 1_000_000},
                           {"prompt_tokens": 1_000_000, "completion_tokens": 0}])
    assert both.cached_tokens == 10 and pricing.cost("m", both) == pytest.approx(1.0)


def test_a_reply_missing_its_prompt_or_completion_count_is_unreported_not_free() -> None:
    # before: {"prompt_tokens": -5, "completion_tokens": 10} counted as a fully reported reply whose
    # prompt cost nothing
    c = TokenCounts.of([{"prompt_tokens": -5, "completion_tokens": 10}, {"prompt_tokens": 7, "completion_tokens": "x"},
                        {"prompt_tokens": 3, "completion_tokens": 4}])
    assert (c.requests, c.unreported, c.prompt_tokens, c.completion_tokens) == (3, 2, 10, 14)


HOSTILE_USAGE: list[Any] = [
    {"prompt_tokens": -5, "completion_tokens": 10},
    {"prompt_tokens": 12.7, "completion_tokens": 3.2},
    {"prompt_tokens": 10**30, "completion_tokens": 4},
    {"prompt_tokens": "12", "completion_tokens": "x"},
    {"prompt_tokens": 20, "completion_tokens": 6, "prompt_tokens_details": {"cached_tokens": 500},
     "completion_tokens_details": {"reasoning_tokens": {"nested": [1, 2]}}},
    {"prompt_tokens": 20, "completion_tokens": 6, "prompt_tokens_details": [1, 2], "completion_tokens_details": "junk"},
    None,
    "junk",
]
#: of the 7 requests of the test (the first 7 usages), those whose prompt or completion count is
#: unknown: -5, 10**30, the strings and null
UNREPORTED = 4


def test_an_eval_against_a_server_with_hostile_usage_reports_honest_counts(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 4)  # 1 + 2 + 3 + 1 = 7 turns
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"models": {"*": {"input": 1.0, "output": 2.0, "cached_input": 0.0}}}))
    n = [0]

    def reply(body: dict[str, Any]) -> Reply:
        u = HOSTILE_USAGE[n[0] % len(HOSTILE_USAGE)]
        n[0] += 1
        return Reply("Final Answer: \\boxed{1}", usage=u)

    with start_stub_server(reply) as srv:
        res = CliRunner().invoke(app, ["eval", "--split", str(data), "--model", "m", "--base-url", srv.base_url,
                                       "-k", "1", "--seeds", "1", "--out", str(tmp_path / "run"), "--concurrency", "1",
                                       "--verify-workers", "1", "--max-retries", "0", "--pricing", str(prices)],
                                 catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    total = rep["tokens"]["total"]
    assert total["requests"] == 7 and total["unreported"] == UNREPORTED
    assert total["cached_tokens"] <= total["prompt_tokens"] and total["reasoning_tokens"] <= total["completion_tokens"]
    assert rep["cost"]["total"] is not None and "reported no usage (or only part of it)" in rep["cost"]["note"]
    assert "Infinity" not in (tmp_path / "run" / "report.json").read_text()


def test_a_budget_stops_when_the_server_reports_no_usage(tmp_path: Path) -> None:
    """A limit that cannot be kept (replies without usage) stops the run loudly instead of spending uncounted."""
    data = write_set(tmp_path / "set.json", 4)

    def reply(body: dict[str, Any]) -> Reply:
        return Reply("Final Answer: \\boxed{1}", usage=None)

    with start_stub_server(reply) as srv:
        def run(out: str, *extra: str) -> Any:
            return CliRunner().invoke(app, ["eval", "--split", str(data), "--model", "m", "--base-url", srv.base_url,
                                            "-k", "1", "--seeds", "1", "--out", str(tmp_path / out), "--concurrency", "1",
                                            "--verify-workers", "1", "--max-retries", "0", *extra], catch_exceptions=False)

        res = run("limited", "--max-total-tokens", "1000000")
        assert res.exit_code == BUDGET_EXIT_CODE, res.output
        assert "without reporting token usage" in res.output and srv.count == 1
        assert run("free").exit_code == 0  # without a limit nothing needs counting: the run completes
    assert json.loads((tmp_path / "free" / "report.json").read_text())["tokens"]["total"]["unreported"] == 7


# -- --ray-address strings (refused before Ray is asked) --------------------------------------------

@pytest.mark.parametrize("address,words", [
    ("a" * 300 + ":6379", ["not a valid host name"]),
    ("é" * 70 + ":1", ["not a valid host name"]),
    ("127.0.0.1:0", ["port must be 1-65535"]),
    ("ray://h:" + "9" * 5000, ["port must be 1-65535"]),
])
def test_a_garbage_ray_address_is_one_short_line(address: str, words: list[str]) -> None:
    # before: UnicodeError (IDNA: a label over 63 characters) and ValueError (an over-long port) tracebacks.
    # The check that runs before ray.init is called directly: RayVerifier.connect skips it when Ray is
    # already initialised in this process (as the Ray tests' session cluster leaves it), and it needs no Ray.
    from studybench.evaluate import ray_judge

    with pytest.raises(ray_judge.RayJudgeError) as e:
        ray_judge._check_reachable(address)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300
    for w in words:
        assert w in msg


# -- reward batches ----------------------------------------------------------------------------------

class _Exploding:
    """A batch column whose length is known and whose iteration fails (a broken lazy column)."""

    def __len__(self) -> int:
        return 2

    def __iter__(self) -> Any:
        raise RuntimeError("lazy column failed")


def test_a_batch_column_that_cannot_be_iterated_gives_the_lowest_reward_not_an_exception() -> None:
    from studybench.rewards import compute_score_batch

    gold = {"answer": "\\boxed{2}", "answer_type": "NV"}
    assert compute_score_batch(solution_strs=["Final Answer: \\boxed{2}"] * 2, ground_truths=_Exploding()) == [0.0, 0.0]
    assert compute_score_batch(solution_strs=["x"] * 2, ground_truths=[gold] * 2, extra_infos=_Exploding()) == [0.0, 0.0]
