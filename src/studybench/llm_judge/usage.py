"""The LLM judge's tokens and cost in a run directory, from the usage stored with its verdicts.

Every row of ``llm_judgements.jsonl`` (:class:`studybench.store.LLMVerdictRow`) carries ``usage``:
the token counts of the judge's replies that made the verdict (format re-asks included). How a
row counts depends on how the verdict was obtained:

- asked now (neither ``cached`` nor ``shared``): the run paid for these tokens (``spent``);
- ``cached`` (served from the verdict cache): nothing was spent by this run; the row keeps what the
  judgement took when it was first asked (``from_cache``), so the run still says how many tokens its
  judgements took;
- ``shared`` (a concurrent request for identical inputs answered it): counted once, on the row of
  the request that made it.

Every row ever appended counts, not only the latest per turn: a verdict replaced by ``judge
--refresh`` was paid for too. Rows written before usage was recorded count as requests with
unreported tokens (:attr:`~studybench.costs.TokenCounts.unreported`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.costs import USAGE_FIELDS, Pricing, TokenCounts, normalise_usage
from studybench.store import RunStore

__all__ = ["JudgeUsage", "judge_usage", "judge_usage_summary"]


@dataclass
class JudgeUsage:
    """The judge tokens of one judge model in one run directory (see the module docstring).

    Attributes:
        spent: tokens of the requests this run made (``requests`` = HTTP requests; verdicts without
            recorded usage count in ``unreported``).
        from_cache: what the verdicts served from the verdict cache took originally (not spent;
            ``requests`` counts the verdicts served).
        verdicts: verdict rows of this model (cached and shared ones included).
    """

    spent: TokenCounts = field(default_factory=TokenCounts)
    from_cache: TokenCounts = field(default_factory=TokenCounts)
    verdicts: int = 0


def _counts(usage: Any, requests: int) -> TokenCounts:
    counts = normalise_usage(usage)
    out = TokenCounts(requests=requests, **{k: counts.get(k, 0) for k in USAGE_FIELDS})
    if requests and ("prompt_tokens" not in counts or "completion_tokens" not in counts):
        out.unreported = 1  # no usage, or only part of it: the tokens are not all known
    return out


def judge_usage(run_dir: Path | str | RunStore) -> dict[str, JudgeUsage]:
    """The LLM judge tokens of a run directory, per judge model.

    Args:
        run_dir: the run directory (or its :class:`~studybench.store.RunStore`).

    Returns:
        ``{judge model: JudgeUsage}`` (empty without LLM verdicts); rows of no known model count
        under ``""``.

    Raises:
        OSError: ``llm_judgements.jsonl`` exists and cannot be read.
    """
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(Path(run_dir))
    out: dict[str, JudgeUsage] = {}
    for row in store.llm_log.rows():
        if not isinstance(row.get("judge_id"), str):
            continue
        model = row.get("judge_model")
        u = out.setdefault(model if isinstance(model, str) else "", JudgeUsage())
        u.verdicts += 1
        requests = row.get("requests")
        requests = requests if isinstance(requests, int) and not isinstance(requests, bool) and requests >= 0 else 0
        if row.get("cached") is True:
            u.from_cache.merge(_counts(row.get("usage"), 0))
            u.from_cache.requests += 1  # a verdict served, no request made
        elif row.get("shared") is not True:
            u.spent.merge(_counts(row.get("usage"), requests))
    return out


def judge_usage_summary(run_dir: Path | str | RunStore, pricing: Pricing | None = None) -> dict[str, Any]:
    """:func:`judge_usage` as a JSON-ready ``judge`` section for reports, with cost when priced.

    Args:
        run_dir: the run directory.
        pricing: prices per model (``None``: no cost).

    Returns:
        ``{"models": {model: {"verdicts", "spent": TokenCounts dict, "from_cache": TokenCounts dict,
        "cost", "cost_from_cache"}}, "spent": totals, "from_cache": totals, "cost", "currency"}``;
        a cost is ``None`` without pricing or when a model has no price.

    Raises:
        OSError: ``llm_judgements.jsonl`` cannot be read.
    """
    usage = judge_usage(run_dir)
    models: dict[str, Any] = {}
    spent, cached = TokenCounts(), TokenCounts()
    costs: list[float | None] = []
    for model, u in sorted(usage.items()):
        cost = pricing.cost(model or None, u.spent) if pricing else None
        costs.append(cost)
        models[model] = {
            "verdicts": u.verdicts, "spent": u.spent.to_dict(), "from_cache": u.from_cache.to_dict(),
            "cost": cost, "cost_from_cache": pricing.cost(model or None, u.from_cache) if pricing else None,
        }
        spent.merge(u.spent)
        cached.merge(u.from_cache)
    total = None if pricing is None or any(c is None for c in costs) else sum(c for c in costs if c is not None)
    return {"models": models, "spent": spent.to_dict(), "from_cache": cached.to_dict(), "cost": total,
            "currency": pricing.currency if pricing else None}
