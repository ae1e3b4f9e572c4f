"""The ``studybench`` command (typer + rich)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from studybench import __version__

app = typer.Typer(
    help="StudyBench: evaluate models and self-evolution methods on the Application and Transfer sets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="Find, fetch and check the test-set files.", no_args_is_help=True)
app.add_typer(data_app, name="data")


def _register_subapps() -> None:
    from studybench.audit.cli import audit_app
    from studybench.build.cli import corpus_app

    app.add_typer(corpus_app, name="corpus")
    app.add_typer(audit_app, name="audit")


_register_subapps()

console = Console(stderr=True)
out_console = Console()


def _fail(msg: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/bold red] {escape(msg)}", soft_wrap=True)
    raise typer.Exit(code)


class _RateColumn(ProgressColumn):
    """Turns per second since the task started."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.1f} turns/s", style="progress.data.speed")


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and os.environ.get("STUDYBENCH_PROGRESS") != "1",
    )


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "run"


def _parse_slice(s: str | None) -> tuple[int, int | None]:
    if not s:
        return 0, None
    m = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*", s)
    if not m:
        _fail(f"--slice must look like START:STOP (e.g. 10:20), got {s!r}")
    a, b = m.group(1), m.group(2)  # type: ignore[union-attr]
    return (int(a) if a else 0), (int(b) if b else None)


def _seeds(n: int, base: int, seed_list: str | None) -> list[int]:
    if seed_list:
        try:
            vals = [int(x) for x in seed_list.split(",") if x.strip()]
        except ValueError:
            _fail(f"--seed-list must be comma-separated integers, got {seed_list!r}")
        if len(set(vals)) != len(vals) or not vals:
            _fail("--seed-list must hold distinct integers")
        return vals
    if n < 1:
        _fail("--seeds must be >= 1")
    return [base + i for i in range(n)]


# Options of the LLM judge (paper 2.2, PROTOCOL.md section 6), shared by `eval` and `judge`.
_JudgeModel = Annotated[
    str | None,
    typer.Option("--judge-model", help="LLM judge model at an OpenAI-compatible endpoint; rule rejections go to it (leaderboard mode rule+llm).", rich_help_panel="LLM judge"),
]
_JudgeBaseUrl = Annotated[
    str | None,
    typer.Option("--judge-base-url", help="Judge endpoint, e.g. http://127.0.0.1:8001/v1 (default $STUDYBENCH_JUDGE_BASE_URL).", rich_help_panel="LLM judge"),
]
_JudgePrompt = Annotated[
    Path | None,
    typer.Option("--judge-prompt", help="Judge prompt template file with all of {problem} {reference_solution} {reference_answers} {student_solution} {student_answers} (default: ours).", rich_help_panel="LLM judge"),
]
_JudgeKeyEnv = Annotated[str, typer.Option("--judge-api-key-env", help="Environment variable holding the judge's API key (never stored).", rich_help_panel="LLM judge")]
_JudgeConcurrency = Annotated[int, typer.Option("--judge-concurrency", help="Judge requests in flight.", rich_help_panel="LLM judge")]
_JudgeRequestTimeout = Annotated[float, typer.Option("--judge-request-timeout", help="Seconds per judge HTTP request.", rich_help_panel="LLM judge")]
_JudgeMaxRetries = Annotated[int, typer.Option("--judge-max-retries", help="Retries per judge request on 429/5xx/timeouts.", rich_help_panel="LLM judge")]
_JudgeParseRetries = Annotated[int, typer.Option("--judge-parse-retries", help="Re-asks after a malformed judge reply; still malformed -> unjudgeable.", rich_help_panel="LLM judge")]
_JudgeMaxTokens = Annotated[int | None, typer.Option("--judge-max-tokens", help="Token budget per judge reply (default: the server's).", rich_help_panel="LLM judge")]
_JudgeCache = Annotated[Path | None, typer.Option("--judge-cache", help="Verdict cache directory (default $STUDYBENCH_JUDGE_CACHE, then the user cache).", rich_help_panel="LLM judge")]
_NoJudgeCache = Annotated[bool, typer.Option("--no-judge-cache", help="Neither read nor write the verdict cache.", rich_help_panel="LLM judge")]


def _make_judge(model: str, base_url: str | None, prompt: Path | None, api_key_env: str, concurrency: int,
                request_timeout: float, max_retries: int, parse_retries: int, max_tokens: int | None,
                cache_dir: Path | None, no_cache: bool, read_cache: bool = True) -> Any:
    """An :class:`studybench.llm_judge.LLMJudge` from CLI options (fails with a usage error)."""
    from studybench.llm_judge import LLMJudge, LLMJudgeTemplate, LLMJudgeTemplateError, LLMVerdictCache

    _check_ranges(judge_concurrency=(concurrency, 1, 100_000), judge_request_timeout=(request_timeout, 1e-3, 86_400.0),
                  judge_max_retries=(max_retries, 0, 1000), judge_parse_retries=(parse_retries, 0, 100),
                  judge_max_tokens=(max_tokens, 1, 10_000_000))
    if not model.strip():
        _fail("--judge-model must not be empty")
    url = base_url or os.environ.get("STUDYBENCH_JUDGE_BASE_URL")
    if not url:
        _fail("--judge-base-url is required with --judge-model (or set $STUDYBENCH_JUDGE_BASE_URL), "
              "e.g. http://127.0.0.1:8001/v1 from `vllm serve`, or https://api.openai.com/v1")
    try:
        template = LLMJudgeTemplate.from_file(prompt) if prompt is not None else LLMJudgeTemplate.builtin()
    except LLMJudgeTemplateError as e:
        _fail(str(e))
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        _fail(f"--judge-cache {cache_dir} exists and is not a directory")
    cache = None if no_cache else LLMVerdictCache(cache_dir)
    if cache is not None:
        try:
            cache.check_writable()
        except OSError as e:
            _fail(f"cannot use the verdict cache {cache.root} ({e.strerror or e}); pass --judge-cache DIR or --no-judge-cache")
    if not os.environ.get(api_key_env):
        console.print(f"[dim]note: ${api_key_env} is not set; the judge gets the placeholder key EMPTY (what `vllm serve` accepts)[/dim]")
    return LLMJudge(model, url, template=template, cache=cache, parse_retries=parse_retries, concurrency=concurrency,
                    request_timeout=request_timeout, max_retries=max_retries, max_tokens=max_tokens,
                    api_key_env=api_key_env, read_cache=read_cache)


def _run_llm_judge(parents: list[Any], store: Any, cfg: Any, judge: Any, audit: bool = False, refresh: bool = False) -> Any:
    """Run :func:`studybench.runner.llm_judge_run` with a progress bar and print its counts."""
    from studybench.llm_judge import LLMJudgeConfigError
    from studybench.runner import llm_judge_run

    async def go() -> Any:
        try:
            with _progress() as prog:
                task = prog.add_task("llm judge", total=None)

                def tick(n: int) -> None:
                    prog.advance(task, n)

                return await llm_judge_run(parents, store, cfg, judge, audit_rule_accepts=audit, refresh=refresh, progress=tick)
        finally:
            await judge.aclose()

    try:
        st = asyncio.run(go())
    except LLMJudgeConfigError as e:
        _fail(f"{e}. Verdicts obtained so far are kept; nothing else changed.")
    v = st.verdicts
    console.print(
        f"llm judge {judge.model}: {st.candidates} candidates ({st.reused} already judged in this run), "
        f"{st.judged} judged now ({st.cache_hits} from the cache, {st.shared} shared with identical inputs, {st.requests} requests): "
        f"TRUE {v.get('TRUE', 0)}, FALSE {v.get('FALSE', 0)}, unjudgeable {v.get('unjudgeable', 0)}, error {v.get('error', 0)} "
        f"in {st.seconds:.1f}s",
        soft_wrap=True,
    )
    if st.no_rule_verdict:
        console.print(f"[yellow]{_plural(st.no_rule_verdict, 'turn')} without a current rule verdict were not sent to the judge[/yellow]")
    return st


@app.command("eval")
def eval_cmd(
    split: Annotated[str, typer.Option("--split", help="application | transfer | PATH to a test-set JSON file.")] = "transfer",
    model: Annotated[str, typer.Option("--model", help="Model name at the endpoint, or 'reference' for the offline gold replay.")] = "reference",
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vllm serve). Default: $OPENAI_BASE_URL.")] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto | openai | reference (auto: reference when --model reference).")] = "auto",
    k: Annotated[int, typer.Option("-k", "--k", help="Attempts per parent (Par@k, Sub@k).")] = 8,
    seeds: Annotated[int, typer.Option("--seeds", help="Number of seeds (each a full set of k attempts; the paper uses 3).")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="First seed; seeds are SEED..SEED+N-1.")] = 0,
    seed_list: Annotated[str | None, typer.Option("--seed-list", help="Explicit comma-separated seeds (overrides --seeds/--seed).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default runs/<model>-<split>, runs/reference-<mode>-<split> for the reference backend). Re-running the same command resumes.")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding application.json / transfer.json (default $STUDYBENCH_DATA, then the fetch cache).")] = None,
    preset: Annotated[str, typer.Option("--preset", help="Sampling preset: paper | greedy | none.")] = "none",
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling p.")] = None,
    top_k: Annotated[int | None, typer.Option(help="Top-k sampling (vLLM extra_body).")] = None,
    min_p: Annotated[float | None, typer.Option(help="Min-p sampling (vLLM extra_body).")] = None,
    presence_penalty: Annotated[float | None, typer.Option(help="Presence penalty.")] = None,
    repetition_penalty: Annotated[float | None, typer.Option(help="Repetition penalty (vLLM extra_body).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget per turn.")] = None,
    thinking: Annotated[bool | None, typer.Option("--thinking/--no-thinking", help="Send chat_template_kwargs.enable_thinking (Qwen3).")] = None,
    concurrency: Annotated[int, typer.Option(help="Maximum requests in flight.")] = 64,
    request_timeout: Annotated[float, typer.Option(help="Seconds per HTTP request before it is retried.")] = 600.0,
    max_retries: Annotated[int, typer.Option(help="Retries per turn on 429/5xx/timeouts/dropped connections.")] = 6,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key (never stored).")] = "OPENAI_API_KEY",
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="File replacing the system message (GEPA, EvoSkill).")] = None,
    playbook: Annotated[Path | None, typer.Option("--playbook", help="File appended to the default system message (ACE).")] = None,
    guidance: Annotated[Path | None, typer.Option("--guidance", help="JSON/JSONL hints joined on (source, year, source_problem_id, problem_id).")] = None,
    reference_mode: Annotated[str, typer.Option("--reference-mode", help="reference backend: gold | solution.")] = "gold",
    only_generate: Annotated[bool, typer.Option("--only-generate", help="Generate turns, do not judge or report.")] = False,
    only_judge: Annotated[bool, typer.Option("--only-judge", help="Judge existing turns and report; generate nothing.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N parents (after --slice).")] = None,
    slice_: Annotated[str | None, typer.Option("--slice", help="Parents START:STOP (Python slice of the file order).")] = None,
    judge_timeout: Annotated[float, typer.Option(help="Hard wall-clock seconds per symbolic judgement.")] = 5.0,
    judge_workers: Annotated[int | None, typer.Option(help="Verifier worker processes (default: CPU count).")] = None,
    verifier_mode: Annotated[
        str | None,
        typer.Option("--verifier-mode", help="rule (reward-safe, never calls an LLM) | rule+llm (leaderboard). Default: rule+llm with --judge-model, else the run's previous mode, else rule.", rich_help_panel="LLM judge"),
    ] = None,
    judge_model: _JudgeModel = None,
    judge_base_url: _JudgeBaseUrl = None,
    judge_prompt: _JudgePrompt = None,
    judge_api_key_env: _JudgeKeyEnv = "OPENAI_API_KEY",
    judge_concurrency: _JudgeConcurrency = 16,
    judge_request_timeout: _JudgeRequestTimeout = 300.0,
    judge_max_retries: _JudgeMaxRetries = 6,
    judge_parse_retries: _JudgeParseRetries = 2,
    judge_max_tokens: _JudgeMaxTokens = None,
    judge_cache: _JudgeCache = None,
    no_judge_cache: _NoJudgeCache = False,
) -> None:
    """Run the StudyBench protocol (generate, judge, report). Resumable: re-run the same command.

    With --judge-model every answer the rule verifier rejects is also sent to an LLM judge and the
    report scores rule OR LLM (paper 2.2 leaderboard numbers)."""
    from studybench.datasets import DatasetError, load_dataset, resolve_split
    from studybench.models import PRESETS
    from studybench.protocol import ArtefactError, guidance_coverage, load_artefacts
    from studybench.report import parents_index, write_report
    from studybench.runner import (
        VERIFIER_MODES,
        EvalConfig,
        generate,
        judge_run,
        select_parents,
        verifier_config,
    )
    from studybench.store import RunStore

    if only_generate and only_judge:
        _fail("--only-generate and --only-judge exclude each other")
    if k < 1:
        _fail("-k must be >= 1")
    if preset not in PRESETS:
        _fail(f"--preset must be one of {', '.join(PRESETS)}")
    _check_ranges(
        temperature=(temperature, 0.0, 100.0), top_p=(top_p, 1e-9, 1.0), min_p=(min_p, 0.0, 1.0),
        presence_penalty=(presence_penalty, -2.0, 2.0), repetition_penalty=(repetition_penalty, 1e-9, 100.0),
        max_tokens=(max_tokens, 1, 10_000_000), top_k=(top_k, -1, 1_000_000), concurrency=(concurrency, 1, 100_000),
        judge_timeout=(judge_timeout, 1e-3, 86_400.0), judge_workers=(judge_workers, 1, 1024),
        request_timeout=(request_timeout, 1e-3, 86_400.0), max_retries=(max_retries, 0, 1000),
    )
    if out is not None and out.exists() and not out.is_dir():
        _fail(f"--out {out} exists and is not a directory")
    try:
        path = resolve_split(split, data_dir)
        ds = load_dataset(path, name=split if split in ("application", "transfer") else None)
        start, stop = _parse_slice(slice_)
        parents = select_parents(ds, limit, start, stop)
        art = load_artefacts(system_prompt, playbook, guidance)
    except (DatasetError, ArtefactError, ValueError) as e:
        _fail(str(e))
    seed_vals = _seeds(seeds, seed, seed_list)

    use_ref = backend == "reference" or (backend == "auto" and model == "reference")
    if backend not in ("auto", "openai", "reference"):
        _fail(f"--backend must be auto, openai or reference, got {backend!r}")
    run_dir = out or Path("runs") / f"{_slug(model if not use_ref else 'reference-' + reference_mode)}-{_slug(ds.name)}"
    store = RunStore(run_dir)
    old: dict[str, Any] | None = None
    if store.exists():
        try:
            old = store.read_manifest()
        except ValueError as e:
            _fail(str(e))
    elif only_judge:
        _fail(f"{run_dir}: no run to judge (no manifest.json); run without --only-judge first")

    be: Any = None
    if only_judge:
        backend_desc = (old or {}).get("backend") or {}
    else:
        be = _make_backend(use_ref, reference_mode, model, base_url, preset, concurrency, request_timeout, max_retries,
                           api_key_env, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                           presence_penalty=presence_penalty, repetition_penalty=repetition_penalty,
                           max_tokens=max_tokens, enable_thinking=thinking)
        backend_desc = be.describe()

    manifest: dict[str, Any] = {
        "studybench_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "split": {"name": ds.name, "path": str(path.resolve()), "sha256": ds.sha256, "parents": len(ds), "sub_problems": ds.n_sub_problems},
        "selection": {"slice": slice_, "limit": limit, "parents": len(parents)},
        "k": k,
        "seeds": seed_vals,
        "backend": backend_desc,
        "artefacts": art.describe(),
        "verifier": None,
        "parents": parents_index(parents),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }
    cfg = EvalConfig(split=ds.name, k=k, seeds=seed_vals, concurrency=concurrency, judge_timeout=judge_timeout, judge_workers=judge_workers)
    if verifier_mode is not None and verifier_mode not in VERIFIER_MODES:
        _fail(f"--verifier-mode must be one of {', '.join(VERIFIER_MODES)}, got {verifier_mode!r}")
    llm_judge: Any = None
    if judge_model is not None and verifier_mode != "rule":
        llm_judge = _make_judge(judge_model, judge_base_url, judge_prompt, judge_api_key_env, judge_concurrency,
                                judge_request_timeout, judge_max_retries, judge_parse_retries, judge_max_tokens,
                                judge_cache, no_judge_cache)
    elif judge_model is not None:
        console.print("[yellow]note:[/yellow] --verifier-mode rule never calls an LLM; --judge-model is ignored")
    old_v = (old or {}).get("verifier")
    old_v = old_v if isinstance(old_v, dict) else {}
    old_judge = old_v.get("judge")
    if llm_judge is not None:
        mode, judge_desc = "rule+llm", llm_judge.describe()
    elif verifier_mode == "rule":
        mode, judge_desc = "rule", None
    elif isinstance(old_judge, dict) and isinstance(old_judge.get("judge_id"), str) and old_v.get("mode") == "rule+llm":
        mode, judge_desc = "rule+llm", old_judge  # keep the run's judge; its verdicts stay in the report
    elif verifier_mode == "rule+llm":
        _fail("--verifier-mode rule+llm needs --judge-model (and --judge-base-url)")
    else:
        mode, judge_desc = "rule", None
    manifest["verifier"] = {**verifier_config(cfg), "mode": mode, "judge": judge_desc}
    if old is not None:
        diff = _identity_diff(old, manifest)
        if diff:
            _fail(
                f"{run_dir} holds a different run ({'; '.join(diff)}); use another --out "
                f"(or delete the directory) instead of mixing runs"
            )
        manifest["created"] = old.get("created", manifest["created"])
        scope_old = (len(old.get("parents") or []), old.get("k"), old.get("seeds"))
        scope_new = (len(parents), k, seed_vals)
        console.print(f"[cyan]resuming[/cyan] {run_dir}")
        if scope_old != scope_new:
            console.print(
                f"[yellow]note:[/yellow] the run directory last covered {scope_old[0]} parents, k={scope_old[1]}, "
                f"seeds={scope_old[2]}; this invocation (and the report it writes) covers {scope_new[0]} parents, "
                f"k={k}, seeds={seed_vals}. Rows outside it are kept."
            )
    if art.guidance:
        matched, unmatched = guidance_coverage(art, ds, parents)
        console.print(
            f"guidance: {_plural(matched, 'selected sub-problem')} with hints; "
            f"{_plural(len(unmatched), 'guidance key')} matching no sub-problem of {ds.name}"
        )

    n_turns = sum(len(p.subs()) for p in parents) * k * len(seed_vals)
    console.print(
        f"[bold]{ds.name}[/bold]: {len(parents)} parents, {sum(len(p.subs()) for p in parents)} sub-problems, "
        f"k={k}, seeds={seed_vals} -> {n_turns} turns; backend {backend_desc.get('backend')} "
        f"({backend_desc.get('model')})",
    )
    console.print(f"run directory: {run_dir}", soft_wrap=True)
    if be is not None and not use_ref:
        _preflight(be)
    if llm_judge is not None and not only_generate:
        _preflight(llm_judge.backend, what="judge endpoint")
    store.write_manifest(manifest)
    failed = 0
    try:
        if not only_judge:
            errors: list[str] = []

            def on_error(key: Any, err: str) -> None:
                errors.append(err)
                if len(errors) <= 3:
                    console.print(f"[yellow]turn failed[/yellow] {key.parent} / {key.sub_id} seed {key.seed} attempt {key.attempt}: {escape(err)}")
                elif len(errors) == 4:
                    console.print("[yellow]more turns failed; counting them silently[/yellow]")

            with _progress() as prog:
                task = prog.add_task("generate", total=n_turns)
                gstats = asyncio.run(generate(parents, store, be, art, cfg, lambda n: prog.advance(task, n), on_error))
            rate = f" ({gstats.turns_per_s:.1f} turns/s)" if gstats.generated else ""
            console.print(
                f"generated {gstats.generated} turns ({gstats.reused} reused, {gstats.failed} failed) in {gstats.seconds:.1f}s{rate}"
            )
        if only_generate:
            return
        from studybench.verify import Verifier

        with Verifier(workers=judge_workers, timeout=judge_timeout) as verifier, _progress() as prog:
            task = prog.add_task("judge", total=n_turns)
            jstats = judge_run(parents, store, cfg, verifier, lambda n: prog.advance(task, n))
        console.print(f"judged {jstats.judged} turns ({jstats.reused} reused) in {jstats.seconds:.1f}s")
        if llm_judge is not None:
            _run_llm_judge(parents, store, cfg, llm_judge)
        rep = write_report(store)
        failed = rep["turns"]["failed"]
    finally:
        store.close()
        if llm_judge is not None and only_generate:
            try:
                asyncio.run(llm_judge.aclose())
            except Exception:  # noqa: BLE001
                pass
        if be is not None:
            try:
                asyncio.run(be.aclose())
            except Exception:  # noqa: BLE001 - closing must not mask the real outcome
                pass
    _print_report(rep, run_dir)
    if failed:
        console.print(
            f"[bold yellow]{_plural(failed, 'turn')} failed after retries and count as incorrect; "
            f"run the same command again to retry them.[/bold yellow]"
        )
        raise typer.Exit(1)


def _check_ranges(**values: tuple[float | int | None, float, float]) -> None:
    """Fail with a usage error for a non-finite or out-of-range option value (``None`` = unset)."""
    import math

    for name, (v, lo, hi) in values.items():
        if v is None:
            continue
        if not math.isfinite(v) or not (lo <= v <= hi):
            flag = "--" + name.replace("_", "-")
            _fail(f"{flag} must be a finite number in [{lo:g}, {hi:g}], got {v}")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _make_backend(use_ref: bool, reference_mode: str, model: str, base_url: str | None, preset: str, concurrency: int,
                  request_timeout: float, max_retries: int, api_key_env: str, **overrides: Any) -> Any:
    from studybench.models import PRESETS, ReferenceBackend

    if use_ref:
        try:
            return ReferenceBackend(reference_mode)
        except ValueError as e:
            _fail(str(e))
    from studybench.models.openai_backend import OpenAIBackend

    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not url:
        _fail("--base-url is required for the openai backend (e.g. http://127.0.0.1:8000/v1 from `vllm serve`)")
    if concurrency < 1 or max_retries < 0 or request_timeout <= 0:
        _fail("--concurrency must be >= 1, --max-retries >= 0 and --request-timeout > 0")
    sampling = PRESETS[preset].merged(**overrides)
    return OpenAIBackend(model, url, sampling, concurrency=concurrency, request_timeout=request_timeout,
                         max_retries=max_retries, api_key_env=api_key_env)


# Backend settings that may change between invocations of one run (they do not change answers).
_OPERATIONAL = frozenset({"base_url", "concurrency", "request_timeout", "max_retries", "backoff_initial", "backoff_max", "api_key_env"})


def _identity_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What makes ``new`` a different run from ``old`` (empty when resuming is safe)."""
    diff: list[str] = []
    ob, nb = old.get("backend") or {}, new.get("backend") or {}
    for key in sorted(set(ob) | set(nb)):
        if key in _OPERATIONAL:
            continue
        if ob.get(key) != nb.get(key):
            diff.append(f"backend.{key}: {ob.get(key)!r} -> {nb.get(key)!r}")
    if (old.get("split") or {}).get("sha256") != (new.get("split") or {}).get("sha256"):
        diff.append("test-set file content changed")
    od = (old.get("artefacts") or {}).get("digests") or {}
    nd = (new.get("artefacts") or {}).get("digests") or {}
    for key in sorted(set(od) | set(nd)):
        if od.get(key) != nd.get(key):
            diff.append(f"artefact {key} changed")
    return diff


def _preflight(be: Any, what: str = "endpoint") -> None:
    """Fail fast when the endpoint is unreachable; warn when it does not list the model."""
    import httpx

    url = be.base_url.rstrip("/") + "/models"
    key = os.environ.get(be.api_key_env) or "EMPTY"
    try:
        r = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=min(30.0, be.request_timeout))
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as e:
        _fail(f"the {what} URL {be.describe().get('base_url')!r} is not a valid http(s) URL ({e})")
    except httpx.HTTPError as e:
        _fail(f"cannot reach the {what} {be.describe().get('base_url')} ({type(e).__name__}); is the server running?")
    if r.status_code in (401, 403):
        _fail(f"the {what} refused the API key (HTTP {r.status_code}); set ${be.api_key_env}")
    if r.status_code != 200:
        return  # some servers do not implement /models
    try:
        ids = [m.get("id") for m in r.json().get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return
    if ids and be.model not in ids:
        console.print(f"[yellow]warning:[/yellow] the {what} lists {', '.join(map(str, ids[:8]))} but not {be.model!r}")


def _print_report(rep: dict[str, Any], run_dir: Path) -> None:
    from studybench.report import rich_table

    out_console.print(rich_table(rep))
    t = rep["turns"]
    if t["failed"] or t["missing_judgements"]:
        console.print(
            f"[yellow]{t['failed']} failed turns and {t['missing_judgements']} turns without a current judgement "
            f"(of {t['expected']}) count as incorrect above.[/yellow]"
        )
    lj = rep.get("llm_judge")
    if lj:
        v = lj["verdicts"]
        rate = "n/a" if lj["unjudgeable_rate"] is None else f"{100 * lj['unjudgeable_rate']:.2f}%"
        console.print(
            f"scoring {rep.get('scoring_used')}: LLM judge {lj['judge'].get('model')} on {lj['rule_rejections']} rule rejections: "
            f"TRUE {v['TRUE']}, FALSE {v['FALSE']}, unjudgeable {v['unjudgeable']} ({rate}), error {v['error']}, not judged {v['not judged']}",
            soft_wrap=True,
        )
        if v["error"] or v["not judged"]:
            console.print(f"[yellow]{v['error'] + v['not judged']} rule rejections have no LLM verdict and count as incorrect; "
                          f"run `studybench judge {run_dir}` to judge them.[/yellow]", soft_wrap=True)
    console.print(f"report: {run_dir / 'report.json'}, {run_dir / 'report.md'}", soft_wrap=True)


@app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print report.json to stdout instead of a table.")] = False,
    scoring: Annotated[
        str | None,
        typer.Option("--scoring", help="strict (rule verifier only) | liberal (rule OR LLM judge). Default: liberal for rule+llm runs, else strict."),
    ] = None,
) -> None:
    """Recompute report.json / report.md of a run directory and print the summary."""
    from studybench.report import SCORINGS, write_report
    from studybench.store import RunStore

    if scoring is not None and scoring not in SCORINGS:
        _fail(f"--scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    store = RunStore(run_dir)
    try:
        rep = write_report(store, scoring)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e))
    except (KeyError, TypeError) as e:
        _fail(f"{store.manifest_path}: malformed manifest ({type(e).__name__}: {e})")
    if as_json:
        out_console.print_json(json.dumps(rep))
    else:
        _print_report(rep, run_dir)


def _run_dataset(store: Any, man: dict[str, Any], data_dir: Path | None, split_path: Path | None) -> Any:
    """The test set a run was made on, checked against the manifest's sha256 (fails with a usage error)."""
    from studybench.datasets import DatasetError, load_dataset, resolve_split

    split = man.get("split") or {}
    name, want = split.get("name"), split.get("sha256")
    candidates: list[Path] = []
    if split_path is not None:
        candidates.append(split_path)
    else:
        if isinstance(split.get("path"), str):
            candidates.append(Path(split["path"]))
        if name in ("application", "transfer"):
            try:
                candidates.append(resolve_split(name, data_dir))
            except (DatasetError, ValueError):
                pass
    tried = []
    for path in candidates:
        if not path.is_file():
            tried.append(f"{path} (missing)")
            continue
        try:
            ds = load_dataset(path, name=name if name in ("application", "transfer") else None)
        except DatasetError as e:
            _fail(str(e))
        if want and ds.sha256 != want:
            tried.append(f"{path} (content differs from the run's test set)")
            continue
        return ds
    _fail(f"{store.manifest_path}: cannot find the test set this run was made on ({'; '.join(tried) or 'no path recorded'}); "
          "pass --split PATH or --data-dir DIR")


@app.command("judge")
def judge_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    judge_model: _JudgeModel = None,
    judge_base_url: _JudgeBaseUrl = None,
    judge_prompt: _JudgePrompt = None,
    judge_api_key_env: _JudgeKeyEnv = "OPENAI_API_KEY",
    judge_concurrency: _JudgeConcurrency = 16,
    judge_request_timeout: _JudgeRequestTimeout = 300.0,
    judge_max_retries: _JudgeMaxRetries = 6,
    judge_parse_retries: _JudgeParseRetries = 2,
    judge_max_tokens: _JudgeMaxTokens = None,
    judge_cache: _JudgeCache = None,
    no_judge_cache: _NoJudgeCache = False,
    audit_rule_accepts: Annotated[bool, typer.Option("--audit-rule-accepts", help="Also send rule accepts to the judge (makes the rule verifier's false accepts visible in `studybench consistency`; scores are unchanged).")] = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="Judge again turns that already hold a verdict of this judge (the cache still answers unless --no-judge-cache).")] = False,
    activate: Annotated[bool, typer.Option("--activate/--no-activate", help="Make this judge the run's leaderboard judge (mode rule+llm). --no-activate only adds verdicts, e.g. a second judge for Cohen's kappa.")] = True,
    split_path: Annotated[Path | None, typer.Option("--split", help="The test-set file, when it is no longer where the manifest says.")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding application.json / transfer.json.")] = None,
    judge_timeout: Annotated[float, typer.Option(help="Hard wall-clock seconds per symbolic judgement (rule verdicts still missing).")] = 5.0,
    judge_workers: Annotated[int | None, typer.Option(help="Rule verifier worker processes (default: CPU count).")] = None,
) -> None:
    """Add or refresh LLM judge verdicts on an existing run, without generating anything.

    Rule verdicts still missing are computed first; then every rule rejection (and with
    --audit-rule-accepts every accept) gets an LLM verdict tied to the digest of the completion it
    judged. Verdicts come from the cache when the same inputs were judged before. Writes report.json /
    report.md. Exit 1 when some verdicts failed (re-run to retry them)."""
    from studybench.report import write_report
    from studybench.runner import EvalConfig, judge_run
    from studybench.store import RunStore

    _check_ranges(judge_timeout=(judge_timeout, 1e-3, 86_400.0), judge_workers=(judge_workers, 1, 1024))
    store = RunStore(run_dir)
    try:
        man = store.read_manifest()
        from studybench.report import load_manifest_view

        view = load_manifest_view(store)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e))
    old_v = man.get("verifier") if isinstance(man.get("verifier"), dict) else {}
    prev = old_v.get("judge") if isinstance(old_v.get("judge"), dict) else None
    if judge_model is None:
        if prev is None or not isinstance(prev.get("model"), str):
            _fail("--judge-model is required (this run has no judge yet)")
        judge_model = str(prev["model"])
        if judge_base_url is None and isinstance(prev.get("base_url"), str):
            judge_base_url = prev["base_url"]  # the run's judge, not $STUDYBENCH_JUDGE_BASE_URL
        if judge_prompt is None and prev.get("template") not in (None, "builtin"):
            judge_prompt = Path(str(prev["template"]))
    try:
        rule_timeout = float(old_v.get("timeout") or judge_timeout)
    except (TypeError, ValueError):
        rule_timeout = judge_timeout
    _check_ranges(rule_timeout=(rule_timeout, 1e-3, 86_400.0))
    llm_judge = _make_judge(judge_model, judge_base_url, judge_prompt, judge_api_key_env, judge_concurrency,
                            judge_request_timeout, judge_max_retries, judge_parse_retries, judge_max_tokens,
                            judge_cache, no_judge_cache, read_cache=True)
    ds = _run_dataset(store, man, data_dir, split_path)
    by_uid = {p.uid: p for p in ds.parents}
    missing = [p.uid for p in view.parents if p.uid not in by_uid]
    if missing:
        _fail(f"{store.manifest_path}: parents not in the test set: {', '.join(missing[:5])}")
    parents = [by_uid[p.uid] for p in view.parents]
    cfg = EvalConfig(split=ds.name, k=view.k, seeds=view.seeds, judge_timeout=rule_timeout, judge_workers=judge_workers)
    if (prev is not None and prev.get("model") == llm_judge.model and prev.get("template") == llm_judge.template.source
            and prev.get("template_digest") != llm_judge.template.digest):
        console.print(f"[yellow]note:[/yellow] the judge prompt {llm_judge.template.source} changed since this run was last judged; "
                      "this is a new judge configuration (its verdicts are judged afresh)", soft_wrap=True)
    _preflight(llm_judge.backend, what="judge endpoint")
    from studybench.verify import Verifier

    try:
        with Verifier(workers=judge_workers, timeout=cfg.judge_timeout) as verifier:
            jstats = judge_run(parents, store, cfg, verifier)
        if jstats.judged:
            console.print(f"rule verifier: judged {jstats.judged} turns that had no current rule verdict")
        st = _run_llm_judge(parents, store, cfg, llm_judge, audit=audit_rule_accepts, refresh=refresh)
        if activate:
            man = store.read_manifest()
            rule_cfg = {k_: v_ for k_, v_ in (man.get("verifier") or {}).items() if k_ not in ("mode", "judge")}
            man["verifier"] = {**rule_cfg, "mode": "rule+llm", "judge": llm_judge.describe()}
            store.write_manifest(man)
        rep = write_report(store)
    finally:
        store.close()
    _print_report(rep, run_dir)
    if st.verdicts.get("error"):
        console.print(f"[bold yellow]{_plural(st.verdicts['error'], 'judge request')} failed after retries; "
                      f"run the same command again to retry them.[/bold yellow]")
        raise typer.Exit(1)


@app.command("consistency")
def consistency_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory with LLM verdicts (`studybench judge`).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print consistency.json to stdout instead of tables.")] = False,
) -> None:
    """Rule verifier vs LLM judge: 2x2 tables overall and per answer type, the rule verifier's precision and
    recall w.r.t. the cascade (paper Table 11), Cohen's kappa between judge configurations.

    Writes consistency.json and consistency.md into the run directory."""
    from rich.markdown import Markdown

    from studybench.analysis.consistency import render_consistency_markdown, write_consistency
    from studybench.store import RunStore

    store = RunStore(run_dir)
    try:
        rep = write_consistency(store)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e))
    if as_json:
        out_console.print_json(json.dumps(rep))
    else:
        out_console.print(Markdown(render_consistency_markdown(rep)))
        console.print(f"written: {run_dir / 'consistency.json'}, {run_dir / 'consistency.md'}", soft_wrap=True)
    if not rep["judges"]:
        raise typer.Exit(1)


@data_app.command("fetch")
def data_fetch(
    dest: Annotated[Path | None, typer.Option("--dest", help="Target directory (default: the user cache).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Raw-file base URL of the official repository.")] = None,
    branch: Annotated[str, typer.Option(help="Repository branch.")] = "main",
    train: Annotated[bool, typer.Option("--train", help="Also fetch the training instruction layers.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Download again even if present.")] = False,
) -> None:
    """Download the official test sets (and optionally training layers) into the user cache."""
    from studybench import fetch

    kwargs: dict[str, Any] = {"branch": branch, "include_train": train, "force": force}
    if base_url:
        kwargs["base_url"] = base_url
    try:
        paths = fetch.fetch_official(dest, **kwargs)
    except Exception as e:  # noqa: BLE001 - report any fetch failure as a clean CLI error
        _fail(str(e), code=1)
    for p in paths:
        out_console.print(str(p))


@data_app.command("check")
def data_check(
    split: Annotated[list[str] | None, typer.Option("--split", help="application | transfer | PATH (repeatable; default both).")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print findings as JSON lines.")] = False,
) -> None:
    """Validate test-set files and report suspicious but loadable records."""
    from rich.table import Table

    from studybench.checks import check_dataset
    from studybench.datasets import DatasetError, load_dataset, resolve_split

    splits = split or ["application", "transfer"]
    bad = False
    for s in splits:
        try:
            path = resolve_split(s, data_dir)
            ds = load_dataset(path, name=s if s in ("application", "transfer") else None)
        except DatasetError as e:
            console.print(f"[bold red]{s}: invalid[/bold red] {e}")
            bad = True
            continue
        findings = check_dataset(ds)
        if as_json:
            for f in findings:
                out_console.print_json(json.dumps({"split": s, **f.to_dict()}))
            continue
        out_console.print(f"[bold]{s}[/bold] ({path}): {len(ds)} parents, {ds.n_sub_problems} sub-problems, loads OK; {len(findings)} findings")
        if findings:
            counts = Counter(f.kind for f in findings)
            t = Table(title=f"{s}: findings by kind")
            t.add_column("kind")
            t.add_column("count", justify="right")
            for kind, n in counts.most_common():
                t.add_row(kind, str(n))
            out_console.print(t)
            for f in findings:
                where = f"{f.parent_uid} / {f.sub_id}" if f.sub_id else f.parent_uid
                out_console.print(
                    f"[cyan]{f.kind}[/cyan] {escape(where)} [dim]{escape(f.field)}[/dim]: {escape(f.message)}",
                    highlight=False,
                )
    if bad:
        raise typer.Exit(1)


def _pair_boxes(gold: str, response: str, answer_type: Any, type_sequence: Any) -> tuple[list[str], list[str]]:
    """Gold boxes and predicted boxes for one pair; a bare gold or response (no box) is one answer."""
    from studybench.answers import extract_answers, find_boxes
    from studybench.records import gold_boxes

    golds = gold_boxes(gold, answer_type, type_sequence) if find_boxes(gold) else [gold.strip()]
    if find_boxes(response):
        preds = extract_answers(response, len(golds))
    else:
        preds = [response.strip()] if response.strip() else []
    return golds, preds


def _parse_types(answer_type: str, type_sequence: str | None) -> tuple[Any, Any]:
    from studybench.records import AnswerType, parse_type_sequence

    try:
        at = AnswerType(answer_type.strip().upper())
    except ValueError:
        raise ValueError(f"unknown answer type {answer_type!r} (allowed: {', '.join(a.value for a in AnswerType)})") from None
    ts = parse_type_sequence(type_sequence or "")
    if at.value in ("TUP", "ALT") and not ts:
        raise ValueError(f"answer type {at.value} needs a type_sequence (e.g. NV,EX)")
    return at, ts


@app.command("verify")
def verify_cmd(
    gold: Annotated[str, typer.Argument(help="Gold answer: a \\boxed{...} string (one box per answer) or a bare answer.")],
    response: Annotated[str, typer.Argument(help="Model response (boxes on the Final Answer line are extracted) or a bare answer.")],
    answer_type: Annotated[str, typer.Option("--type", help="NV | EX | EQ | TUP | IN | MC | TF | QL | ALT.")],
    type_sequence: Annotated[str | None, typer.Option("--type-sequence", help="Slot types for TUP / ALT, e.g. NV,EX.")] = None,
    gold_unit: Annotated[
        str | None,
        typer.Option("--gold-unit", help="Unit of a unitless gold, e.g. '\\mathrm{km}' (one per box, comma-separated, 'None' for none)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Hard wall-clock seconds for the symbolic judgement.")] = 5.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Judge one (gold, response) pair with the rule verifier. Exit 0 when correct, 1 when not, 2 on bad input."""
    from studybench.verify import Verifier

    _check_ranges(timeout=(timeout, 1e-3, 86_400.0))
    try:
        at, ts = _parse_types(answer_type, type_sequence)
    except ValueError as e:
        _fail(str(e))
    golds, preds = _pair_boxes(gold, response, at, ts)
    with Verifier(workers=1, timeout=timeout) as v:
        verdict = v.judge(golds, preds, at, ts, gold_unit=gold_unit) if preds else None
    correct = bool(verdict and verdict.correct)
    reason = verdict.reason if verdict else "incorrect: no final answer found"
    if as_json:
        out_console.print_json(json.dumps({"correct": correct, "reason": reason, "gold": golds, "extracted": preds}))
    else:
        mark = "[bold green]correct[/bold green]" if correct else "[bold red]incorrect[/bold red]"
        out_console.print(f"{mark}  {escape(reason)}", highlight=False)
    raise typer.Exit(0 if correct else 1)


@app.command("verify-file")
def verify_file_cmd(
    in_path: Annotated[
        Path,
        typer.Argument(help="JSONL rows with gold, response, answer_type and optional type_sequence and gold_unit (the dev-pair format)."),
    ],
    out_path: Annotated[Path, typer.Option("-o", "--out", help="Output JSONL: the same rows with correct and reason added.")],
    workers: Annotated[int | None, typer.Option("--workers", help="Verifier worker processes (default: CPU count).")] = None,
    timeout: Annotated[float, typer.Option(help="Hard wall-clock seconds per symbolic judgement.")] = 5.0,
) -> None:
    """Judge every row of a JSONL file on a process pool; write rows with `correct` and `reason` added."""
    from studybench.files import atomic_write_text
    from studybench.verify import Verifier

    _check_ranges(timeout=(timeout, 1e-3, 86_400.0), workers=(workers, 1, 1024))
    try:
        lines = in_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        _fail(f"{in_path}: cannot read ({getattr(e, 'strerror', None) or e})")
    rows: list[dict[str, Any]] = []
    items: list[tuple[Any, ...]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as e:
            _fail(f"{in_path}: line {n}: not valid JSON ({e})")
        if not isinstance(row, dict):
            _fail(f"{in_path}: line {n}: expected a JSON object")
        for fld in ("gold", "response", "answer_type"):
            if not isinstance(row.get(fld), str):
                _fail(f"{in_path}: line {n}: field '{fld}': missing or not a string")
        ts_raw = row.get("type_sequence") or ""
        if not isinstance(ts_raw, (str, list)):
            _fail(f"{in_path}: line {n}: field 'type_sequence': must be a comma-separated string")
        try:
            at, ts = _parse_types(row["answer_type"], ",".join(ts_raw) if isinstance(ts_raw, list) else ts_raw)
        except ValueError as e:
            _fail(f"{in_path}: line {n}: {e}")
        unit = row.get("gold_unit")
        if unit is not None and not isinstance(unit, (str, list)):
            _fail(f"{in_path}: line {n}: field 'gold_unit': must be a string, a list or null")
        golds, preds = _pair_boxes(row["gold"], row["response"], at, ts)
        rows.append(row)
        items.append((golds, preds, at, ts, unit))
    if not rows:
        _fail(f"{in_path}: no rows")
    verdicts: list[Any] = []
    with Verifier(workers=workers, timeout=timeout) as v, _progress() as prog:
        task = prog.add_task("verify", total=len(items))
        for start in range(0, len(items), 256):
            chunk = items[start : start + 256]
            verdicts.extend(v.judge_many(chunk))
            prog.advance(task, len(chunk))
    out_lines = []
    tp = fp = fn = tn = 0
    for row, item, verdict in zip(rows, items, verdicts, strict=True):
        correct = bool(item[1]) and verdict.correct
        reason = verdict.reason if item[1] else "incorrect: no final answer found"
        out_lines.append(json.dumps({**row, "correct": correct, "reason": reason}, ensure_ascii=False))
        if isinstance(row.get("label"), bool):
            tp += correct and row["label"]
            fp += correct and not row["label"]
            fn += (not correct) and row["label"]
            tn += (not correct) and not row["label"]
    try:
        atomic_write_text(out_path, "\n".join(out_lines) + "\n")
    except OSError as e:
        _fail(f"{out_path}: cannot write ({e.strerror or e})")
    n_correct = sum(1 for v_ in verdicts if v_.correct)
    console.print(f"{len(rows)} rows judged, {n_correct} correct -> {out_path}")
    if tp + fp + fn + tn:
        prec = tp / (tp + fp) if tp + fp else float("nan")
        rec = tp / (tp + fn) if tp + fn else float("nan")
        console.print(f"against `label`: accuracy {(tp + tn) / (tp + fp + fn + tn):.4f}, precision {prec:.4f}, recall {rec:.4f} "
                      f"(tp {tp}, fp {fp}, fn {fn}, tn {tn})")


@app.command("version")
def version_cmd() -> None:
    """Print the studybench version."""
    out_console.print(__version__)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
