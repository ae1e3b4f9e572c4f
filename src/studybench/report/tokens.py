"""Tokens and cost of a run: ``report["tokens"]``, ``report["cost"]`` and their table.

``report["tokens"]`` sums the ``usage`` of every request stored for the report's turns (docs/protocol.md
turns of the selected parents, seeds and attempts), also requests whose turn was generated again
later (a failed or stale turn: it was paid for; ``superseded`` counts them):

- ``total``: ``requests``, ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``,
  ``cached_tokens``, ``total_tokens`` and ``unreported`` (requests whose server reported no usage,
  or no valid prompt or completion count, failed requests among them: their tokens are unknown), as
  :class:`studybench.costs.TokenCounts`;
- ``per_seed``: the same per run seed (``{"0": {...}}``);
- ``per_turn``: the same per turn of the multi-turn protocol (``{"1": {...}}``: turn 1 is each
  parent's first sub-problem); each generation row keeps its own ``usage`` as well.

``report["cost"]`` is present when the run has a pricing file (:mod:`studybench.costs`): given now
(``studybench report --pricing FILE``) or recorded in the run directory's ``pricing.json`` by the last
command that was given one (``eval --pricing``). It holds ``currency``, ``model``, ``total``,
``per_seed``, ``per_turn`` and ``pricing`` (the file's name and sha256, and the prices that matched
the model). A model the file has no price for gets ``total: null`` and a ``reason``
(``"no price for model X in FILE"``), never a cost of zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from studybench import costs
from studybench.costs import PRICING_FILE, PRICING_LIMIT, Pricing, TokenCounts
from studybench.escaping import plural
from studybench.store import Manifest, RunStore, TurnKey

__all__ = ["PRICING_FILE", "PRICING_LIMIT", "cost_block", "record_pricing", "recorded_pricing", "token_block", "token_table"]

_COST_DIGITS = 10


def recorded_pricing(store: RunStore) -> Pricing | None:
    """The pricing recorded in a run directory (:func:`studybench.costs.recorded_pricing`).

    Raises:
        ValueError: the record exists but is unreadable or malformed (the message names the file).
    """
    return costs.recorded_pricing(store.root)


def record_pricing(store: RunStore, pricing: Pricing) -> None:
    """Record ``pricing`` in the run directory (:func:`studybench.costs.record_pricing`).

    Raises:
        OSError: the file cannot be written.
    """
    costs.record_pricing(store.root, pricing)


def token_block(store: RunStore, man: Manifest, keys: Iterable[TurnKey]) -> dict[str, Any]:
    """``report["tokens"]``: the usage of every request stored for ``keys`` (see the module docstring).

    Args:
        store: the run directory.
        man: its manifest (the split and the parents' sub-problems, for the turn numbers).
        keys: the report's turns.

    Returns:
        ``{"model", "total", "per_seed", "per_turn", "superseded"}``.
    """
    wanted = set(keys)
    turn_of = {(p.uid, s.id): i for p in man.parents for i, s in enumerate(p.subs)}
    total = TokenCounts()
    per_seed = {str(s): TokenCounts() for s in man.seeds}
    per_turn: dict[int, TokenCounts] = {}
    rows_per_key: dict[TurnKey, int] = {}
    for row in store.generation_log.rows():
        try:
            key = TurnKey.from_row(row)
        except (KeyError, TypeError, ValueError):
            continue
        if key not in wanted:
            continue
        rows_per_key[key] = rows_per_key.get(key, 0) + 1
        one = TokenCounts.of([row.get("usage")])
        total.merge(one)
        per_seed[str(key.seed)].merge(one)
        per_turn.setdefault(turn_of.get((key.parent, key.sub_id), -1) + 1, TokenCounts()).merge(one)
    return {
        "model": man.backend.get("model"),
        "total": total.to_dict(),
        "per_seed": {s: c.to_dict() for s, c in per_seed.items()},
        "per_turn": {str(t): per_turn[t].to_dict() for t in sorted(per_turn)},
        "superseded": sum(n - 1 for n in rows_per_key.values()),
    }


def _cost(price: Any, counts: Mapping[str, int]) -> float:
    return round(price.cost(counts), _COST_DIGITS)


def cost_block(tokens: dict[str, Any], pricing: Pricing) -> dict[str, Any]:
    """``report["cost"]``: :func:`token_block`'s counts at ``pricing``'s prices.

    Args:
        tokens: ``report["tokens"]``.
        pricing: the prices.

    Returns:
        ``{"currency", "model", "total", "per_seed", "per_turn", "pricing", "reason"}``; the costs are
        ``None`` and ``reason`` says why when the pricing has no price for the model or no request
        reported its usage (never a cost of zero for unknown tokens); ``note``, present
        when some requests reported no usage, says the cost leaves them out.
    """
    model = tokens.get("model")
    found = price = pricing.price(model if isinstance(model, str) else None)
    total = tokens["total"]
    if total["requests"] and total["unreported"] == total["requests"]:
        price = None  # no request reported usage: the cost is unknown, not zero
    matched = None
    if found is not None:
        matched = model if isinstance(model, str) and model in pricing.models else next(
            (pat for pat, p in pricing.models.items() if p is found), None)
    out: dict[str, Any] = {
        "currency": pricing.currency,
        "model": model,
        "total": None if price is None else _cost(price, tokens["total"]),
        "per_seed": {s: None if price is None else _cost(price, c) for s, c in tokens["per_seed"].items()},
        "per_turn": {t: None if price is None else _cost(price, c) for t, c in tokens["per_turn"].items()},
        "pricing": {
            "source": pricing.source,
            "sha256": pricing.sha256 or None,
            "matched": matched,
            "price": None if found is None else pricing.to_dict()["models"][matched],
        },
        "reason": None,
    }
    if found is None:
        out["reason"] = f"no price for model {model} in {pricing.source or 'the pricing file'}"
    elif price is None:
        out["reason"] = "no request reported its token usage: the cost is unknown"
    if price is not None and tokens["total"]["unreported"]:
        out["note"] = (f"{plural(tokens['total']['unreported'], 'request')} reported no usage (or only part of it): the cost "
                       "leaves out what they did not report (a lower bound)")
    return out


def _n(x: int) -> str:
    return f"{x:,}"


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.6f}"


def token_table(rep: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]] | None:
    """The "Tokens and cost" table of a report, for Markdown and HTML alike.

    Args:
        rep: the report (:func:`studybench.report.build_report`).

    Returns:
        ``(header, rows, notes)``: the column names, one row for the run, each seed and each turn,
        and sentences to print above the table (the prices used, a missing price). ``None`` when
        the report has no tokens to show (no request reported usage and no pricing was given).
    """
    tok = rep.get("tokens")
    cost = rep.get("cost")
    if not tok or (not cost and tok["total"]["requests"] == tok["total"]["unreported"]):
        return None
    header = ["", "requests", "prompt", "cached prompt", "completion", "reasoning", "total", "no usage"]
    if cost:
        header.append(f"cost ({cost['currency']})")
    groups = [("run", tok["total"], cost["total"] if cost else None)]
    groups += [(f"seed {s}", c, cost["per_seed"].get(s) if cost else None) for s, c in tok["per_seed"].items()]
    groups += [(f"turn {t}", c, cost["per_turn"].get(t) if cost else None) for t, c in tok["per_turn"].items()]
    rows = []
    for name, c, money in groups:
        row = [name, _n(c["requests"]), _n(c["prompt_tokens"]), _n(c["cached_tokens"]), _n(c["completion_tokens"]),
               _n(c["reasoning_tokens"]), _n(c["total_tokens"]), _n(c["unreported"])]
        if cost:
            row.append(_money(money))
        rows.append(row)
    notes = ["Tokens of every request stored for the report's turns (turns generated again included: they were paid "
             "for). Cached prompt tokens are part of the prompt tokens, reasoning tokens part of the completion tokens."]
    if cost:
        p = cost["pricing"]
        sha = f", sha256 {p['sha256'][:12]}" if p.get("sha256") else ""
        if cost["total"] is None and p["price"] is not None:
            notes.append(f"Cost unknown: {cost['reason']}.")
        if p["price"] is None:
            notes.append(f"No price for model {cost['model']} in {p['source']}{sha}: the cost is unknown (not zero). "
                         "Add the model (or a glob pattern matching it) to the pricing file and run "
                         "`studybench report RUN_DIR --pricing FILE`.")
        else:
            pr = p["price"]
            notes.append(f"Prices from {p['source']}{sha} ({p['matched']}): {pr['input']:g} input, "
                         f"{pr['cached_input']:g} cached input, {pr['output']:g} output, {cost['currency']} per million tokens.")
            if cost.get("note"):
                notes.append(f"Note: {cost['note']}.")
    return header, rows, notes
