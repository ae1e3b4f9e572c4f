"""``studybench build decompose`` and ``build verify``: the teacher-LLM stages of the construction."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.budget import BUDGET_OPTIONS, budget_tracker, cost_text, stop_for_budget
from studybench.cli.common import (
    OptionSet,
    console,
    fail,
    fail_os,
    fail_write,
    interruptible,
    plural,
    progress_bars,
)
from studybench.cli.threads import EmbeddingBackend, TorchThreads, set_torch_threads

__all__ = ["TEACHER_OPTIONS", "TRANSPORT_OPTIONS", "attach_budget", "decompose_cmd", "finish_stage", "usage_line",
           "verify_cmd"]

_T = "Teacher"
TEACHER_OPTIONS = OptionSet("teacher_options", {
    "teacher": (Annotated[str, typer.Option("--teacher", rich_help_panel=_T, help="Teacher model name at the endpoint.")], ...),
    "base_url": (Annotated[str | None, typer.Option("--base-url", rich_help_panel=_T, help="OpenAI-compatible endpoint of the teacher (default $OPENAI_BASE_URL).")], None),
    "api_key_env": (Annotated[str, typer.Option("--api-key-env", rich_help_panel=_T, help="Environment variable holding the API key (never stored).")], "OPENAI_API_KEY"),
    "concurrency": (Annotated[int, typer.Option("--concurrency", rich_help_panel=_T, help="Requests in flight at once.")], 16),
    "request_timeout": (Annotated[float, typer.Option("--request-timeout", rich_help_panel=_T, help="Seconds per HTTP request before it is retried.")], 600.0),
    "max_retries": (Annotated[int, typer.Option("--max-retries", rich_help_panel=_T, help="Retries per request on 429/5xx/timeouts/dropped connections.")], 6),
    "max_tokens": (Annotated[int, typer.Option("--max-tokens", rich_help_panel=_T, help="Completion budget per request; a reply cut at it is a failed attempt.")], 4096),
})



def _in_panel(option: tuple[Any, Any], panel: str) -> tuple[Any, Any]:
    """An option of an :class:`OptionSet` shown under another help panel (the same flag, help and default)."""
    ann, default = option
    info = copy.copy(ann.__metadata__[0])
    info.rich_help_panel = panel
    return Annotated[ann.__origin__, info], default


TRANSPORT_OPTIONS = OptionSet("transport_options", {
    k: _in_panel(TEACHER_OPTIONS.options[k], "Endpoint") for k in ("api_key_env", "request_timeout", "max_retries")})
"""The endpoint's key and the one retry policy (the models layer's: 429/5xx/timeouts/dropped connections with
backoff) of :data:`TEACHER_OPTIONS`, for a stage with models of its own (``build guide``)."""

_Work = Annotated[Path, typer.Option("--work", help="Work directory of the construction (read and written).")]
_Restart = Annotated[bool, typer.Option("--restart", help="Discard this stage's output and recorded settings and start again (the reply cache is kept).")]


def attach_budget(work: Path, stage: str, llms: list[Any], budget_options: dict[str, Any]) -> Any:
    """Give the stage's models one budget tracker, starting from what the stage already spent in ``work``.

    Args:
        work: the work directory.
        stage: the stage name (for messages).
        llms: the stage's :class:`~studybench.testset.llmstage.StageLLM` objects (each with its cache).
        budget_options: the :data:`~studybench.cli.budget.BUDGET_OPTIONS` values.

    Returns:
        The :class:`~studybench.costs.BudgetTracker`.
    """
    from studybench.costs import TokenCounts

    spent: dict[str, TokenCounts] = {}
    caches = {id(llm.cache): llm.cache for llm in llms if llm.cache is not None}
    try:
        for cache in caches.values():
            for model, counts in cache.spent().items():
                spent.setdefault(model, TokenCounts()).merge(counts)
    except OSError as e:
        fail(f"{stage}: cannot read the reply cache ({e.strerror or e})")
    budget = budget_tracker(budget_options, spent)
    for llm in llms:
        llm.budget = budget
    return budget


def finish_stage(work: Path, stage: str, roles: dict[str, Any], budget: Any, budget_stop: str | None, left: int,
                 what: str) -> None:
    """Write ``DIR/<stage>.usage.json``, print the tokens (and cost) per role and the stage total, and
    stop with exit 3 when the budget stopped the stage.

    Args:
        work: the work directory.
        stage: the stage name.
        roles: the stage's models by role (``{"teacher": llm}``).
        budget: the stage's tracker (:func:`attach_budget`).
        budget_stop: why the budget stopped the stage, or ``None``.
        left: items not done.
        what: the word for an item (``sub-problem``, ``pair``).
    """
    from studybench.testset.llmstage import write_stage_usage

    try:
        rec = write_stage_usage(work, stage, roles, budget, budget_stop)
    except OSError as e:
        fail_write(e, work)
    pricing = budget.pricing
    for role, usage in rec["now"].items():
        console.print(usage_line(usage, role, cost_text(usage["cost"], pricing)))
    total = rec["total"]
    cost = cost_text(total["cost"], pricing)
    console.print(f"{stage} in {escape(str(work))}, all runs: {total['total_tokens']:,} tokens"
                  f"{f' = {cost}' if cost else ''} (written to {escape(str(work / f'{stage}.usage.json'))})", soft_wrap=True)
    if budget_stop:
        stop_for_budget(budget_stop, f"{plural(left, what)} not asked",
                        "Re-run the same command with a higher limit (the limit counts what this stage already spent "
                        "in this work directory), or without one, to resume.")


def _teacher(opts: dict[str, Any], work: Path, stage: str) -> Any:
    from studybench.testset.llmstage import StageCache, StageLLM, open_backend

    if opts["concurrency"] < 1:
        fail("--concurrency must be >= 1")
    if opts["max_tokens"] < 1:
        fail("--max-tokens must be >= 1")
    try:
        backend = open_backend(opts["teacher"], opts["base_url"], api_key_env=opts["api_key_env"],
                               concurrency=opts["concurrency"], request_timeout=opts["request_timeout"],
                               max_retries=opts["max_retries"])
        return StageLLM(backend, StageCache.for_stage(work, stage), concurrency=opts["concurrency"])
    except ValueError as e:
        fail(f"--teacher/--base-url: {e}")
    except OSError as e:
        fail_write(e, work / "cache")


#: What a re-run does for failed items: transport failures are asked again, replies are replayed from the cache.
_REASK_HINT = ("Re-running the same command asks again the calls that failed in transport (HTTP errors, timeouts), "
               "but replays from the cache the replies that were malformed or cut off by --max-tokens: for new "
               "replies, raise --attempts (with --restart; cached replies are reused) or delete {cache}.")


def usage_line(usage: dict[str, Any], who: str = "teacher", cost: str = "") -> str:
    """One line of an LLM stage's token usage (``llmstage.StageLLM.usage``), headed by ``who``.

    Args:
        usage: the usage totals.
        who: the role of the model (teacher, writer, reviewer).
        cost: the cost text (:func:`~studybench.cli.budget.cost_text`), or ``""``.

    Returns:
        The line, for the console.
    """
    reasoning = f", {usage['reasoning_tokens']:,} reasoning" if usage.get("reasoning_tokens") else ""
    cached = f", {usage['cached_tokens']:,} cached-prompt" if usage.get("cached_tokens") else ""
    return (f"{who}: {plural(usage.get('requests', 0), 'request')} ({usage.get('cached', 0)} cached replies reused, "
            f"{usage.get('reasked', 0)} re-asks, {usage.get('failures', 0)} failed asks); tokens: "
            f"{usage.get('prompt_tokens', 0):,} prompt, {usage.get('completion_tokens', 0):,} completion{reasoning}{cached}"
            f"{f'; cost {cost}' if cost else ''}")


def _work_dir(work: Path) -> Path:
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail_os(e, work)  # a file in the way: 2; a full disk: 1
    return work


def _run(fn: Any, what: str) -> Any:
    try:
        with interruptible() as term, progress_bars() as bars:
            return fn(lambda advance, total: bars(what, advance, total), bars)
    except KeyboardInterrupt:
        console.print("[bold yellow]interrupted:[/bold yellow] what is done is saved; re-run the same command to resume")
        raise typer.Exit(143 if term else 130) from None
    except ValueError as e:  # inputs or settings changed since the output was made (StageMetaError), a missing input
        fail(str(e))
    except RuntimeError as e:
        fail(str(e), 1)
    except OSError as e:
        fail_write(e, "the work directory")


@TEACHER_OPTIONS
@BUDGET_OPTIONS
def decompose_cmd(
    work: _Work,
    split: Annotated[str, typer.Option("--split", help="transfer | application | PATH to a test-set JSON file.")] = "transfer",
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets (default $STUDYBENCH_DATA).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N parents.")] = None,
    temperature: Annotated[float, typer.Option("--temperature", help="Teacher temperature (paper: 0.2).")] = 0.2,
    attempts: Annotated[int, typer.Option("--attempts", help="Replies per sub-problem before it is recorded as failed.")] = 3,
    merge_threshold: Annotated[float, typer.Option("--merge-threshold", help="Cosine of KP-name embeddings at or above which two KPs of one type merge (0.90: 'energy conservation' = 'conservation of energy' at 0.95, but not 'conservation of mechanical energy' at 0.87).")] = 0.90,
    embed_merge: Annotated[bool, typer.Option("--embed-merge/--no-embed-merge", help="Merge KPs by name embeddings after the exact merge.")] = True,
    embedding_model: Annotated[str | None, typer.Option("--embedding-model", help="sentence-transformers name or path (default: the bundled offline all-MiniLM-L6-v2).")] = None,
    torch_threads: TorchThreads = None,
    embedding_backend: EmbeddingBackend = "torch",
    restart: _Restart = False,
    *,
    teacher_options: dict[str, Any],
    budget_options: dict[str, Any],
) -> None:
    """Knowledge points of every sub-problem (teacher LLM), then canonical KPs: DIR/kps.jsonl,
    DIR/kp_canonical.jsonl and DIR/kp_merges.md. Resumable; sub-problems whose extraction failed are
    recorded as failed and asked again on the next run (a malformed or truncated reply is cached and
    replayed: raise --attempts with --restart, or delete DIR/cache/decompose.jsonl). Exit 1 when any failed;
    exit 3 when --max-cost / --max-total-tokens (which count every reply in DIR/cache/decompose.jsonl) stopped it."""
    from studybench.datasets import Dataset, DatasetError, load_split
    from studybench.testset.knowledge.points import DecomposeSettings, decompose

    if attempts < 1:
        fail("--attempts must be >= 1")
    if not 0.0 < merge_threshold <= 1.0:
        fail(f"--merge-threshold must be in (0, 1], got {merge_threshold}")
    if limit is not None and limit < 1:
        fail("--limit must be >= 1")
    if embed_merge:
        set_torch_threads(torch_threads)
        from studybench.testset.embedding import load_embedder

        try:  # the backend and its extra checked now, not after the teacher's work (nothing is loaded yet)
            load_embedder(embedding_model, backend=embedding_backend)
        except (ValueError, RuntimeError) as e:
            fail(str(e))
    try:
        ds = load_split(split, data_dir)
    except (DatasetError, ValueError) as e:
        fail(f"--split: {e}")
    if limit is not None:
        ds = Dataset.from_parents(ds.parents[:limit], ds.name)
    work = _work_dir(work)
    llm = _teacher(teacher_options, work, "decompose")
    budget = attach_budget(work, "decompose", [llm], budget_options)
    settings = DecomposeSettings(temperature=temperature, attempts=attempts, max_tokens=teacher_options["max_tokens"],
                                 concurrency=teacher_options["concurrency"], merge_threshold=merge_threshold,
                                 embed_merge=embed_merge, embedding_model=embedding_model,
                                 embedding_backend=embedding_backend)
    console.print(f"decompose: {plural(ds.n_sub_problems, 'sub-problem')} of {escape(ds.name)}; teacher {escape(llm.model)}")
    shown = [0]

    def embedded(done: int, total: int, bars: Any) -> None:  # (done, total) -> the bar's advance
        bars("embedding KP names", done - shown[0], total)
        shown[0] = done

    summary = _run(lambda progress, bars: decompose(ds, work, llm, settings, restart=restart, progress=progress,
                                                    embed_progress=lambda d, n: embedded(d, n, bars)), "decompose")
    console.print(f"sub-problems: {summary['ok']} decomposed ({summary['resumed']} from an earlier run), "
                  f"{summary['failed']} failed; {plural(summary['kps'], 'knowledge point')} "
                  f"({summary['invalid_kps']} invalid dropped) -> {plural(summary['canonical'], 'canonical KP')} "
                  f"({summary['embedding_merges']} embedding merges, listed in kp_merges.md)")
    console.print(f"wrote {escape(', '.join(summary['files']))}", soft_wrap=True)
    finish_stage(work, "decompose", {"teacher": llm}, budget, summary["budget_stop"], summary["left"], "sub-problem")
    if summary["failed"]:
        shown = ", ".join(summary["failed_keys"][:5])
        console.print(f"[bold yellow]{plural(summary['failed'], 'sub-problem')} failed[/bold yellow] (e.g. {escape(shown)}); "
                      f"their errors are in kps.jsonl. {_REASK_HINT.format(cache=escape(str(work / 'cache' / 'decompose.jsonl')))}",
                      soft_wrap=True)
        raise typer.Exit(1)


@TEACHER_OPTIONS
@BUDGET_OPTIONS
def verify_cmd(
    work: _Work,
    candidates: Annotated[int | None, typer.Option("--candidates", help="Verify only the N best-ranked candidates of each KP (default: all in retrieval.jsonl).")] = None,
    attempts: Annotated[int, typer.Option("--attempts", help="Replies per (KP, fragment) pair before its call counts as failed.")] = 3,
    restart: _Restart = False,
    *,
    teacher_options: dict[str, Any],
    budget_options: dict[str, Any],
) -> None:
    """Score every retrieved (KP, fragment) pair 0-3 with a verbatim quote (teacher LLM, temperature 0; one
    request per pair), demote scores >= 2 whose quote is not in the fragment, and write DIR/coverage.jsonl,
    DIR/coverage.md and the CSV matrices (sub-problem x KP). Failed calls leave KPs "unverified", never
    "uncovered"; re-run the same command to ask again the calls that failed in transport (malformed or
    truncated replies are cached and replayed: raise --attempts with --restart, or delete DIR/cache/verify.jsonl).
    Exit 1 when any call failed; exit 3 when --max-cost / --max-total-tokens (which count every reply in
    DIR/cache/verify.jsonl) stopped it (pairs not asked count as unverified until a re-run asks them)."""
    from studybench.testset.verification.kpverify import VerifySettings, verify

    if attempts < 1:
        fail("--attempts must be >= 1")
    if candidates is not None and candidates < 1:
        fail("--candidates must be >= 1")
    if not work.is_dir():
        fail(f"--work {work}: not a directory (run `studybench build decompose` and `build retrieve` first)")
    llm = _teacher(teacher_options, work, "verify")
    budget = attach_budget(work, "verify", [llm], budget_options)
    settings = VerifySettings(candidates=candidates, attempts=attempts, max_tokens=teacher_options["max_tokens"],
                              concurrency=teacher_options["concurrency"])
    summary = _run(lambda progress, _bars: verify(work, llm, settings, restart=restart, progress=progress), "verify")
    subs = ", ".join(f"{n} {s}" for s, n in summary["sub_problems"].items())
    kps = ", ".join(f"{n} {s}" for s, n in summary["kps"].items())
    console.print(f"pairs: {summary['pairs']} scored ({summary['resumed']} from an earlier run), {summary['failed_pairs']} failed calls, "
                  f"{summary['demoted']} demoted by the quote check")
    console.print(f"KPs: {kps}")
    console.print(f"sub-problems: {subs}")
    if summary["missing_fragments"]:
        console.print(f"[yellow]note:[/yellow] {plural(len(summary['missing_fragments']), 'candidate fragment')} of retrieval.jsonl "
                      "not in fragments.jsonl (their KPs count as unverified)")
    console.print(f"wrote {escape(', '.join(summary['files']))}", soft_wrap=True)
    finish_stage(work, "verify", {"teacher": llm}, budget, summary["budget_stop"], summary["left"], "pair")
    if summary["failed_pairs"]:
        console.print(f"[bold yellow]{plural(summary['failed_pairs'], 'pair')} failed[/bold yellow]; their errors are in "
                      f"verify_pairs.jsonl. {_REASK_HINT.format(cache=escape(str(work / 'cache' / 'verify.jsonl')))}",
                      soft_wrap=True)
        raise typer.Exit(1)
