"""Runs that stop early and resume: a dead endpoint, a spent token or cost budget.

Both stop a run the same way: no new turn is asked, what finished is saved and verified, the report
(unless ``only_generate``) says the run is incomplete, and running the same command again resumes.

**Budgets** (``EvalSpec.max_total_tokens``, ``EvalSpec.max_cost``; ``studybench eval
--max-total-tokens N``, ``--max-cost X``; :class:`~studybench.costs.BudgetLimits`, opened by
:func:`studybench.costs.open_budget`, the budgets module's one entry): a :class:`~studybench.costs.BudgetTracker` starts from
the tokens every request stored in the run directory spent (failed and superseded ones included),
and counts each reply of this invocation. The generation pass checks it before it sends a request;
once a limit is reached it sends none, lets the requests in flight finish (they are stored, so a run
may go past its limit by the replies in flight, at most ``concurrency``) and stops with
:class:`BudgetStoppedError`. Limits are not part of a run's identity: running again with a higher
limit (or none) continues where the run stopped. ``--max-cost`` needs prices: ``--pricing FILE``,
or the pricing the run directory recorded when an earlier invocation was given one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from studybench.costs import (
    BudgetLimits,
    BudgetTracker,
    Pricing,
    TokenCounts,
    open_budget,
    record_pricing,
)
from studybench.llm_judge import judge_usage
from studybench.store import RunStore

if TYPE_CHECKING:
    from studybench.evaluate.run import EvalResult

__all__ = ["BudgetStoppedError", "EndpointStoppedError", "run_budget", "run_spent", "stop_error"]


class EndpointStoppedError(RuntimeError):
    """The model endpoint stopped answering mid-run: the run stopped early, and what it did is saved.

    Turns finished before are kept, the turns done were verified and the report (written unless
    ``only_generate``) says the run is incomplete. Running the same evaluation again resumes.

    Attributes:
        result: what the run did (``result.report`` has ``"complete": false``).
        last_answer: epoch seconds of the endpoint's last answer.
        done: turns of the selection with a usable completion.
        left: turns still to generate.
    """

    def __init__(self, result: EvalResult) -> None:
        g = result.generation
        assert g is not None and g.stopped is not None
        self.result, self.last_answer, self.done, self.left = result, g.last_answer, g.done, g.left
        super().__init__(
            f"the endpoint stopped answering at {time.strftime('%H:%M:%S', time.localtime(g.last_answer))} ({g.stopped}); "
            f"{g.done} turns done, {g.left} left; the run is incomplete (the report says so); "
            "re-run the same command to resume once the endpoint is back")


class BudgetStoppedError(RuntimeError):
    """The run's token or cost budget is spent: it stopped early, and what it did is saved.

    Like :class:`EndpointStoppedError`: the turns done are kept and verified, the report says the run
    is incomplete, and running again with a higher limit resumes.

    Attributes:
        result: what the run did.
        reason: which limit, and what was spent (:meth:`studybench.costs.BudgetTracker.exceeded`).
        done: turns of the selection with a usable completion.
        left: turns still to generate.
    """

    def __init__(self, result: EvalResult) -> None:
        g, llm = result.generation, result.llm
        if g is not None and g.budget_stopped is not None:
            self.result, self.reason, self.done, self.left = result, g.budget_stopped, g.done, g.left
            what = f"{g.done} turns done, {g.left} left; the run is incomplete (the report says so)"
        else:  # the LLM judge's pass spent the budget: every turn is generated and rule-verified
            assert llm is not None and llm.budget_stop is not None
            self.result, self.reason, self.done, self.left = result, llm.budget_stop, llm.judged, llm.skipped
            what = (f"{llm.skipped} turns left un-judged by the LLM judge (their rule verdicts stand; "
                    "the report uses what was judged)")
        flag = "--max-cost" if "--max-cost" in self.reason else "--max-total-tokens"
        super().__init__(f"stopped: {self.reason}; {what}; re-run the same command with a higher {flag} "
                         "(or without it) to resume")


def stop_error(result: EvalResult) -> EndpointStoppedError | BudgetStoppedError | None:
    """The error to raise for a run whose generation pass stopped early, or ``None`` when it did not.

    Args:
        result: what the run did so far.
    """
    g = result.generation
    if g is not None and g.stopped is not None:
        return EndpointStoppedError(result)
    if (g is not None and g.budget_stopped is not None) or (result.llm is not None and result.llm.budget_stop is not None):
        return BudgetStoppedError(result)
    return None


def run_spent(store: RunStore, model: str | None) -> dict[str, TokenCounts]:
    """What the requests stored in a run directory spent, per model: the LLM judge's and the model's.

    Args:
        store: the run directory.
        model: the run's model (the manifest's ``backend.model``).
    """
    spent = {judge_model: used.spent for judge_model, used in judge_usage(store).items()}  # the judge's requests count too
    spent.setdefault(model or "", TokenCounts()).merge(TokenCounts.of(row.get("usage") for row in store.generation_log.rows()))
    return spent


def run_budget(store: RunStore, model: str | None, pricing: Pricing | None, limits: BudgetLimits) -> BudgetTracker | None:
    """The budget of a run, starting from what the requests stored in its directory spent.

    Prices given now (``limits.pricing``) are recorded in the run directory
    (:func:`studybench.costs.record_pricing`): its later reports use them.

    Args:
        store: the run directory.
        model: the run's model (the manifest's ``backend.model``), which the prices are looked up by.
        pricing: the prices (the plan's; needed with ``max_cost``).
        limits: ``EvalSpec.budgets``.

    Returns:
        The tracker (:func:`studybench.costs.open_budget`), or ``None`` without limits.

    Raises:
        OSError: the prices cannot be recorded.
    """
    spent = run_spent(store, model) if limits.limited else None
    budget = open_budget(limits, spent=spent, pricing=pricing) if limits.limited else None
    if limits.pricing is not None and pricing is not None:
        record_pricing(store.root, pricing)
    return budget
