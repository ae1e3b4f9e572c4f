"""Token and cost accounting (:mod:`studybench.costs`): usage counts, pricing files, budgets."""

from __future__ import annotations

import json
import threading

import pytest

from studybench.costs import (
    BudgetTracker,
    PricingError,
    TokenCounts,
    load_pricing,
    normalise_usage,
    parse_pricing,
)


def test_normalise_usage_reads_nested_details_and_drops_junk():
    raw = {
        "prompt_tokens": 120,
        "completion_tokens": 80,
        "total_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    assert normalise_usage(raw) == {"prompt_tokens": 120, "completion_tokens": 80, "reasoning_tokens": 50, "cached_tokens": 64}
    # already flat (as stored in a run) wins over the details
    assert normalise_usage({"prompt_tokens": 3, "cached_tokens": 1, "prompt_tokens_details": {"cached_tokens": 2}})["cached_tokens"] == 1
    junk = {"prompt_tokens": -1, "completion_tokens": float("nan"), "reasoning_tokens": True, "cached_tokens": "7"}
    assert normalise_usage(junk) == {}
    assert normalise_usage(None) == {} and normalise_usage([1, 2]) == {}


def test_token_counts_sum_and_unreported():
    c = TokenCounts.of([{"prompt_tokens": 10, "completion_tokens": 5}, None, {"prompt_tokens": 1, "completion_tokens": 2,
                                                                           "completion_tokens_details": {"reasoning_tokens": 2}}])
    assert c.requests == 3 and c.unreported == 1
    assert (c.prompt_tokens, c.completion_tokens, c.reasoning_tokens, c.total_tokens) == (11, 7, 2, 18)


def test_pricing_cost_exact_glob_default_and_cached(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"currency": "EUR", "models": {
        "m-exact": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
        "Qwen/*": {"input": 0.1, "output": 0.2},
        "*": {"input": 1.0, "output": 1.0},
    }}))
    p = load_pricing(path)
    assert p.currency == "EUR"
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 500_000, "cached_tokens": 400_000}
    # 600k uncached at 2.0 + 400k cached at 0.5 + 500k output at 8.0
    assert p.cost("m-exact", usage) == pytest.approx(1.2 + 0.2 + 4.0)
    # no cached price: cached input costs the input price
    assert p.cost("Qwen/Qwen2.5-7B", usage) == pytest.approx(0.1 + 0.1)
    assert p.cost("other", usage) == pytest.approx(1.5)
    no_default = parse_pricing({"models": {"a": {"input": 1, "output": 1}}})
    assert no_default.cost("b", usage) is None


@pytest.mark.parametrize("obj, field", [
    ({"models": {}}, "models"),
    ({"models": {"a": {"input": -1, "output": 1}}}, "models.a.input"),
    ({"models": {"a": {"input": 1}}}, "models.a.output"),
    ({"models": {"a": {"input": 1, "output": 1, "cahced_input": 1}}}, "cahced_input"),
    ({"models": {"a": 3}}, "models.a"),
    ([], "object"),
])
def test_pricing_errors_name_the_field(obj, field):
    with pytest.raises(PricingError, match=field.replace(".", r"\.")):
        parse_pricing(obj, "p.json")


def test_pricing_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PricingError, match="bad.json"):
        load_pricing(bad)
    with pytest.raises(PricingError, match="missing.json"):
        load_pricing(tmp_path / "missing.json")
    toml = tmp_path / "p.toml"
    toml.write_text('currency = "USD"\n[models."gpt-x"]\ninput = 1.0\noutput = 2.0\n')
    assert load_pricing(toml).cost("gpt-x", {"completion_tokens": 1_000_000}) == pytest.approx(2.0)


def test_budget_tracker_limits_and_resume():
    pricing = parse_pricing({"models": {"*": {"input": 1.0, "output": 1.0}}})
    earlier = {"m": TokenCounts(requests=1, prompt_tokens=600, completion_tokens=300)}
    b = BudgetTracker(max_total_tokens=1000, spent=earlier)
    assert b.exceeded() is None
    b.charge("m", {"prompt_tokens": 50, "completion_tokens": 49})
    assert b.exceeded() is None
    b.charge("m", {"prompt_tokens": 1, "completion_tokens": 0})
    assert "max-total-tokens" in (b.exceeded() or "")
    c = BudgetTracker(max_cost=0.001, pricing=pricing)
    threads = [threading.Thread(target=c.charge, args=("m", {"prompt_tokens": 100})) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.total_tokens == 1000 and "max-cost" in (c.exceeded() or "")
    with pytest.raises(ValueError, match="pricing"):
        BudgetTracker(max_cost=1.0)
