"""``studybench build guide | retry | capability``: guidance behind a leakage gate, and the two filters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from studybench.cli.budget import BUDGET_OPTIONS, exit_budget_stopped
from studybench.cli.build_llm import TRANSPORT_OPTIONS
from studybench.cli.common import console, fail, fail_write, plural, progress_bars

__all__ = ["build_capability", "build_guide", "build_retry"]

_Work = Annotated[Path, typer.Option("--work", help="The construction's work directory.")]
_Split = Annotated[str, typer.Option("--split", help="Test set the work directory was built from: application | transfer | PATH.")]
_BaseUrl = Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL).")]


def _dataset(split: str) -> Any:
    from studybench.datasets import DatasetError, load_split

    try:
        return load_split(split, None)
    except (DatasetError, ValueError) as e:
        fail(f"--split: {e}")


@TRANSPORT_OPTIONS
@BUDGET_OPTIONS
def build_guide(
    work: _Work,
    teacher: Annotated[str, typer.Option("--teacher", help="Writer model (temperature 0.7).")],
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="Reviewer model (default: the teacher).")] = None,
    split: _Split = "transfer",
    base_url: _BaseUrl = None,
    reviewer_url: Annotated[str | None, typer.Option("--reviewer-url", help="Reviewer endpoint (default: --base-url).")] = None,
    accept_fallback: Annotated[bool, typer.Option("--accept-fallback", help="Also emit sanitised guidance that never passed the review.")] = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=16, help="Writer completion budget.")] = 1024,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Requests in flight at once.")] = 8,
    restart: Annotated[bool, typer.Option("--restart", help="Discard guide.jsonl and start again.")] = False,
    *,
    transport_options: dict[str, Any],
    budget_options: dict[str, Any],
) -> None:
    """Write method-only guidance per covered sub-problem: writer, leakage gate, review; 3 rounds, then the sanitiser.

    Exit 3 when --max-cost / --max-total-tokens stopped it: the limit covers writer and reviewer together and
    counts every reply in DIR/cache/guide*.jsonl; sub-problems not finished are done by a re-run."""
    from studybench.testset.guidance.guide import GuideError, GuideSettings, run_guide
    from studybench.testset.llmstage import StageCache, StageLLM, open_backend

    ds = _dataset(split)
    settings = GuideSettings(teacher=teacher, reviewer=reviewer or teacher, max_tokens=max_tokens,
                             accept_fallback=accept_fallback)
    try:
        wb = open_backend(teacher, base_url, concurrency=concurrency, **transport_options)
        rb = wb if reviewer is None and reviewer_url is None else open_backend(reviewer or teacher, reviewer_url or base_url,
                                                                               concurrency=concurrency, **transport_options)
    except ValueError as e:
        fail(str(e))
    work.mkdir(parents=True, exist_ok=True)
    writer = StageLLM(wb, StageCache.for_stage(work, "guide"), concurrency=concurrency)
    rev = writer if rb is wb else StageLLM(rb, StageCache.for_stage(work, "guide-review"), concurrency=concurrency)
    from studybench.cli.build_llm import attach_budget, finish_stage

    budget = attach_budget(work, "guide", [writer, rev], budget_options)

    async def go(bar: Any) -> dict[str, Any]:
        try:
            return await run_guide(work, ds, writer, rev, settings, concurrency=concurrency, restart=restart,
                                   progress=lambda advance, total: bar("guide", advance, total))
        finally:
            await writer.aclose()
            if rev is not writer:
                await rev.aclose()

    try:
        with progress_bars(unit="sub-problems") as bar:
            res = asyncio.run(go(bar))
    except GuideError as e:
        fail(str(e))
    except OSError as e:
        fail_write(e, work)
    c = res["counts"]
    paths = ", ".join(f"{k}: {v}" for k, v in sorted(c.items()) if k != "emitted")
    from studybench.testset.llmstage import read_rows

    resumed = res["items"].get("skipped", 0)
    console.print(f"guide: {paths}; {c['emitted']} emitted to {work / 'guidance.jsonl'}"
                  f"{' (sanitised fallbacks included)' if accept_fallback else ''}"
                  + (f" ({plural(resumed, 'sub-problem')} from an earlier run)" if resumed else ""))
    finish = res["items"]
    unread = [r for r in read_rows(work / "guide.jsonl")
              if any((rd.get("review") or {}).get("error") for rd in r.get("rounds") or [])]
    if unread:
        console.print(f"[bold yellow]warning:[/bold yellow] {len(unread)} sub-problem(s) had a review call that failed or "
                      "was unreadable (see rounds[].review.error in guide.jsonl): such rounds count as failed. Rows are "
                      "final once written: after fixing the reviewer, re-run with --restart (cached replies, also "
                      "malformed ones, are replayed; delete WORK/cache/guide*.jsonl for new ones).", soft_wrap=True)
    finish_stage(work, "guide", {"writer": writer, "reviewer": rev}, budget, finish.get("budget_stop"),
                 finish.get("left", 0), "sub-problem")
    if res["transport_failed"]:
        n = len(res["transport_failed"])
        console.print(f"[bold yellow]{plural(n, 'sub-problem')} failed[/bold yellow]: the writer's calls failed in transport "
                      "(see rounds[].writer.error in guide.jsonl) and no draft came; re-running the same command "
                      "asks them again.", soft_wrap=True)
        raise typer.Exit(1)


_FilterConcurrency = Annotated[int | None, typer.Option(
    "--concurrency", min=1, help="Requests in flight at once (default: eval's). A budget can be overshot by the "
    "requests in flight.")]


def _filter_options(max_tokens: int | None, concurrency: int | None, budget_options: dict[str, Any],
                    transport_options: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The filter run's extra EvalSpec fields: the completion cap, the concurrency, the endpoint's key and retry
    policy, and the budget options."""
    opts: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
    opts.update(transport_options or {})
    if concurrency is not None:
        opts["concurrency"] = concurrency
    opts.update({k: v for k, v in budget_options.items() if v is not None})
    return opts or None


@TRANSPORT_OPTIONS
@BUDGET_OPTIONS
def build_retry(
    work: _Work,
    model: Annotated[str, typer.Option("--model", help="The filter model.")],
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Attempts per parent.")] = 8,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    split: _Split = "transfer",
    base_url: _BaseUrl = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1)] = None,
    concurrency: _FilterConcurrency = None,
    *,
    transport_options: dict[str, Any],
    budget_options: dict[str, Any],
) -> None:
    """Naive Reachability Filter: the filter model with the guidance, pass@k; admitted when solved at least once."""
    from studybench.evaluate import BudgetStoppedError, EvalError
    from studybench.testset.filters.passk import FilterRunIncompleteError, run_retry

    ds = _dataset(split)
    try:
        with progress_bars() as bar:
            res = run_retry(work, ds, model, base_url=base_url, k=k, seed=seed, progress=bar,
                            eval_options=_filter_options(max_tokens, concurrency, budget_options, transport_options))
    except BudgetStoppedError as e:
        exit_budget_stopped(e, " (the filter run's directory keeps what was done)")
    except FilterRunIncompleteError as e:
        fail(str(e), 1)
    except (EvalError, ValueError) as e:
        fail(str(e))
    console.print(f"retry: {res['admitted']} of {plural(res['candidates'], 'parent')} admitted -> {work / 'admitted.jsonl'}")


@TRANSPORT_OPTIONS
@BUDGET_OPTIONS
def build_capability(
    split: Annotated[str, typer.Option("--split", help="The candidate pool: application | transfer | PATH.")],
    model: Annotated[str, typer.Option("--model", help="The filter model.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("capability"),
    k: Annotated[int, typer.Option("-k", "--k", min=1)] = 8,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    per_discipline: Annotated[int | None, typer.Option("--per-discipline", min=1, help="Most failed textbook parents per sub-discipline.")] = None,
    admit_solved_once_for: Annotated[list[str] | None, typer.Option("--admit-solved-once-for", help="Sub-discipline admitting solved-once parents (repeatable).")] = None,
    guidance: Annotated[Path | None, typer.Option("--guidance", help="Guidance file to filter to the selection.")] = None,
    base_url: _BaseUrl = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1)] = None,
    concurrency: _FilterConcurrency = None,
    *,
    transport_options: dict[str, Any],
    budget_options: dict[str, Any],
) -> None:
    """Capability Filter: pass@k, partition (failed / solved once / solved), seeded selection, the test set."""
    from studybench.evaluate import BudgetStoppedError, EvalError
    from studybench.testset.filters.passk import FilterRunIncompleteError, run_capability

    ds = _dataset(split)
    try:
        with progress_bars() as bar:
            res = run_capability(ds, model, out, base_url=base_url, k=k, seed=seed, per_discipline=per_discipline,
                                 admit_solved_once_for=admit_solved_once_for or (), guidance=guidance,
                                 eval_options=_filter_options(max_tokens, concurrency, budget_options, transport_options),
                                 progress=bar)
    except BudgetStoppedError as e:
        exit_budget_stopped(e, " (the filter run's directory keeps what was done)")
    except FilterRunIncompleteError as e:
        fail(str(e), 1)
    except (EvalError, ValueError) as e:
        fail(str(e))
    except OSError as e:
        fail_write(e, out)
    parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in res.counts.items())
    console.print(f"capability: pool {plural(res.pool, 'parent')} ({parts}); selected {plural(res.selected, 'parent')} "
                  f"({plural(res.selected_sub_problems, 'sub-problem')}) -> {out / 'test_set.json'}")
