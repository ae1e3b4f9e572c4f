"""``studybench audit contamination``: the three-stage contamination audit (paper 2.3, appendix H).

Registered in the main CLI with ``app.add_typer(audit_app, name="audit")``.
"""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from studybench.audit.common import AuditExtraMissing
from studybench.audit.contamination import AuditConfig, run_audit
from studybench.audit.records import RecordError, read_files
from studybench.audit.reports import write_outputs
from studybench.cli.common import console, deprecated, fail, fail_write, out_console, plural, progress_bars
from studybench.cli.threads import EmbeddingBackend, TorchThreads, set_torch_threads
from studybench.embedding_backend import EmbeddingBackendMissing, require_backend
from studybench.llm_judge import LLMJudgeConfigError, LLMVerdictCache

__all__ = ["audit_app"]

audit_app = typer.Typer(
    help="Audits of training data against the test sets (contamination).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

def _expand(paths: list[Path], flag: str) -> list[Path]:
    """Paths with shell-style globs (``*``, ``?``, ``[``) expanded, in sorted order."""
    import glob

    out: list[Path] = []
    for p in paths:
        text = str(p)
        if any(ch in text for ch in "*?["):
            matches = sorted(glob.glob(text))
            if not matches:
                fail(f"{flag} {text}: no file matches")
            out.extend(Path(m) for m in matches)
        else:
            out.append(p)
    return out


@audit_app.callback()
def _audit() -> None:
    """Audits of training data against the test sets."""


@audit_app.command("contamination")
def contamination(
    train: Annotated[list[Path], typer.Option("--train", help="Training file(s) (JSON, {\"data\": [...]} or JSONL); repeat the flag, or quote a glob: --train 'train/*.json'.")],
    eval_files: Annotated[list[Path], typer.Option("--eval", help="Evaluation file(s); repeat the flag, or quote a glob.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory (pairs.jsonl, report.json, report.md).")],
    text_field: Annotated[
        str | None,
        typer.Option(help="Field holding the text of every record (dotted paths allowed); default: native "
                     "StudyBench shapes, else problem/question/text/prompt/content."),
    ] = None,
    id_field: Annotated[str | None, typer.Option(help="Field holding the record id (default: id, then index).")] = None,
    ngram: Annotated[int, typer.Option(help="Word n-gram size for stage 1.")] = 5,
    jaccard_threshold: Annotated[float, typer.Option(help="Stage 1: flag pairs with n-gram Jaccard >= this.")] = 0.5,
    lsh_threshold: Annotated[
        float | None, typer.Option(help="MinHash LSH candidate threshold (default max(0.1, 0.5 x Jaccard threshold)).")
    ] = None,
    containment_threshold: Annotated[
        float,
        typer.Option(help="Stage 1b: flag when an eval text (or one sub-problem) lies at least this much inside a "
                     "training record (share of its 5-grams; 0 turns stage 1b off)."),
    ] = 0.8,
    num_perm: Annotated[int, typer.Option(help="MinHash permutations.")] = 128,
    seed: Annotated[int, typer.Option(help="MinHash seed.")] = 1,
    embeddings: Annotated[bool, typer.Option("--embeddings/--no-embeddings", help="Run stage 2.")] = True,
    embedding_model: Annotated[
        str | None,
        typer.Option(help="sentence-transformers model name or path (default: bundled all-MiniLM-L6-v2, offline)."),
    ] = None,
    cosine_threshold: Annotated[float, typer.Option(help="Stage 2: candidates with cosine >= this.")] = 0.85,
    batch_size: Annotated[int, typer.Option(help="Embedding batch size.")] = 64,
    device: Annotated[str, typer.Option(help="Torch device for the embedding model (cpu, cuda, cuda:1, ...).")] = "cpu",
    torch_threads: TorchThreads = None,
    embedding_backend: EmbeddingBackend = "torch",
    max_seq_length: Annotated[
        int | None,
        typer.Option(help="Truncate texts to this many word pieces for embedding (default: the model's own limit, "
                     "256 for MiniLM; CPU time is about proportional to it)."),
    ] = None,
    dtype: Annotated[
        str,
        typer.Option(help="Embedding precision: auto (bfloat16 on CUDA or a CPU with native bf16 such as AMX, else "
                     "float32) | float32 | bfloat16 | int8 (CPU only, opt-in: float32 with int8 linear layers, faster on "
                     "a CPU without bf16, but cosines drop by up to about 0.1, so pairs near the threshold are missed)."),
    ] = "auto",
    embedding_cache: Annotated[
        Path | None,
        typer.Option("--embedding-cache", help="Stage 2: embedding cache directory (default $STUDYBENCH_EMBEDDING_CACHE, "
                     "then the user cache); a second audit of the same texts embeds nothing."),
    ] = None,
    no_embedding_cache: Annotated[
        bool, typer.Option("--no-embedding-cache", help="Stage 2: neither read nor write the embedding cache.")
    ] = False,
    judge_model: Annotated[str | None, typer.Option(help="Stage 3: LLM judge model (OpenAI-compatible).")] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="Stage 3: endpoint, e.g. http://127.0.0.1:8000/v1.")] = None,
    judge_api_key_env: Annotated[str, typer.Option(help="Environment variable holding the judge's API key.")] = (
        "OPENAI_API_KEY"
    ),
    judge_concurrency: Annotated[int, typer.Option(help="Stage 3: requests in flight.")] = 8,
    judge_request_timeout: Annotated[float, typer.Option("--judge-request-timeout", help="Stage 3: seconds per HTTP attempt (as in `studybench judge`).")] = 300.0,
    judge_timeout: Annotated[float | None, typer.Option("--judge-timeout", hidden=True, help="Deprecated: --judge-request-timeout.")] = None,
    judge_max_retries: Annotated[int, typer.Option(help="Stage 3: retries on transient failures.")] = 3,
    judge_max_tokens: Annotated[
        int | None, typer.Option("--judge-max-tokens", help="Stage 3: token budget per judge reply (default: the server's).")
    ] = None,
    judge_cache: Annotated[
        Path | None,
        typer.Option("--judge-cache", help="Stage 3: verdict cache directory (default $STUDYBENCH_JUDGE_CACHE, then the "
                     "user cache; the same cache as `studybench judge`)."),
    ] = None,
    no_judge_cache: Annotated[
        bool, typer.Option("--no-judge-cache", help="Stage 3: neither read nor write the verdict cache.")
    ] = False,
    clean_train: Annotated[
        Path | None, typer.Option(help="Also write the unflagged training records (original JSON) to this JSONL file.")
    ] = None,
) -> None:
    """Contamination audit: n-gram Jaccard (stage 1) and containment (1b) -> embedding cosine (2) -> optional LLM judge (3).

    Without a judge a pair is flagged when stage 1, 1b (containment) or 2 proposes it; with --judge-model, when the judge
    says it is the same problem (or gives no verdict: such pairs are counted apart). Judge verdicts are
    cached (--judge-cache, --no-judge-cache), so a second audit of the same pairs sends no request. Exit
    status 2 on a usage or input error, or when the judge endpoint refuses the key, URL or model (HTTP
    401/403/404); 1 when more than 20% of the judge's verdicts (at least 5), or all, are unjudgeable (the judge
    is not answering in its format; the outputs are written).
    """
    if judge_timeout is not None:
        deprecated("--judge-timeout", "--judge-request-timeout")
        judge_request_timeout = judge_timeout
    train = _expand(train, "--train")
    eval_files = _expand(eval_files, "--eval")
    if judge_model and not judge_base_url:
        fail("--judge-model needs --judge-base-url (the OpenAI-compatible endpoint)")
    if judge_base_url and not judge_model:
        fail("--judge-base-url needs --judge-model")
    if judge_max_retries < 0:
        fail("--judge-max-retries must be >= 0")
    if judge_max_tokens is not None and judge_max_tokens < 1:
        fail("--judge-max-tokens must be >= 1")
    if embedding_cache is not None and embedding_cache.exists() and not embedding_cache.is_dir():
        fail(f"--embedding-cache {embedding_cache} exists and is not a directory")
    if judge_model and not no_judge_cache:
        if judge_cache is not None and judge_cache.exists() and not judge_cache.is_dir():
            fail(f"--judge-cache {judge_cache} exists and is not a directory")
        cache = LLMVerdictCache(judge_cache)
        try:
            cache.check_writable()
        except (OSError, ValueError) as e:  # ValueError: InputFileError (a named pipe in its place, ...)
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
                fail_write(e, cache.root, resumable=False)  # a full disk: 1
            why = (e.strerror if isinstance(e, OSError) else None) or e
            fail(f"cannot use the verdict cache {cache.root} ({why}); pass --judge-cache DIR or --no-judge-cache")
        finally:
            cache.close()
    config = AuditConfig(
        ngram=ngram,
        jaccard_threshold=jaccard_threshold,
        lsh_threshold=lsh_threshold,
        num_perm=num_perm,
        seed=seed,
        embeddings=embeddings,
        embedding_model=embedding_model,
        cosine_threshold=cosine_threshold,
        batch_size=batch_size,
        device=device,
        max_seq_length=max_seq_length,
        dtype=dtype,
        embedding_backend=embedding_backend,
        containment_threshold=containment_threshold or None,
        judge_model=judge_model,
        judge_base_url=judge_base_url,
        judge_api_key_env=judge_api_key_env,
        judge_concurrency=judge_concurrency,
        judge_timeout=judge_request_timeout,
        judge_max_retries=judge_max_retries,
        judge_max_tokens=judge_max_tokens,
        judge_cache=str(judge_cache) if judge_cache is not None else None,
        judge_use_cache=not no_judge_cache,
        embedding_cache=str(embedding_cache) if embedding_cache is not None else None,
        embedding_use_cache=not no_embedding_cache,
    )
    try:
        config.validate()
    except ValueError as e:
        fail(str(e))
    if out.exists() and not out.is_dir():
        fail(f"--out {out} exists and is not a directory")
    if embeddings:
        set_torch_threads(torch_threads)
        try:  # the onnx extra checked before anything is read
            require_backend(embedding_backend)
        except EmbeddingBackendMissing as e:
            fail(str(e))
    t0 = time.perf_counter()
    try:
        train_records = read_files(train, text_field=text_field, id_field=id_field)
        eval_records = read_files(eval_files, text_field=text_field, id_field=id_field)
    except RecordError as e:
        fail(str(e))
    read_s = time.perf_counter() - t0
    console.print(
        f"audit: {len(train_records)} training records x {len(eval_records)} evaluation records", soft_wrap=True
    )

    with progress_bars(unit="") as bar:  # bars on a terminal, else lines (a log, a pipe)
        shown: dict[str, int] = {}

        def report(label: str, done: int, total: int) -> None:  # run_audit counts from 0; bars advance
            goal = done if total else 1
            bar(label, goal - shown.get(label, 0), max(total, 1))
            shown[label] = goal

        try:
            result = run_audit(train_records, eval_records, config, progress=report)
        except AuditExtraMissing as e:
            fail(str(e))
        except LLMJudgeConfigError as e:
            fail(f"stage 3 stopped: {e}. No outputs were written.")
        except (RuntimeError, ValueError) as e:
            fail(str(e))
    result.read_seconds = read_s
    try:
        rep = write_outputs(result, out, clean_train=str(clean_train) if clean_train else None)
    except OSError as e:
        fail_write(e, out, resumable=False)

    table = Table(title="contamination audit")
    for col in ("stage", "candidates", "flagged", "seconds"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for name, st in rep["stages"].items():
        if st is None:
            table.add_row(name, "skipped", "", "")
        elif name == "llm" and st["flagged_no_verdict"]:
            table.add_row(name, str(st["candidates"]), f"{st['flagged_yes']} (+{st['flagged_no_verdict']} no verdict)",
                          f"{st['seconds']:.1f}")
        else:
            table.add_row(name, str(st["candidates"]), str(st["flagged"]), f"{st['seconds']:.1f}")
    out_console.print(table)
    llm = rep["stages"]["llm"]
    if llm is not None:
        v = llm["verdicts"]
        out_console.print(
            f"llm judge: YES {v['yes']}, NO {v['no']}, unjudgeable {v['unjudgeable']}, error {v['error']}; "
            f"{llm['requests']} request{'' if llm['requests'] == 1 else 's'}, {llm['cache_hits']} from the verdict cache",
            soft_wrap=True,
        )
    if llm is not None:
        v = llm["verdicts"]
        flagged = (f"flagged pairs: {plural(llm['flagged_yes'], 'judged duplicate')}, "
                   f"{plural(llm['flagged_no_verdict'], 'pair')} without a verdict ({v['unjudgeable']} unjudgeable, "
                   f"{v['error']} error; also flagged)")
    else:
        flagged = f"flagged pairs: {rep['flagged_pairs']}"
    out_console.print(
        f"{flagged}; flagged train records: {rep['flagged_train_records']}; "
        f"eval records with a flagged match: {rep['flagged_eval_records']}",
        soft_wrap=True,
    )
    out_console.print(f"wrote {escape(str(out))}/pairs.jsonl, report.json, report.md", soft_wrap=True)
    if "clean_train" in rep:
        c = rep["clean_train"]
        out_console.print(f"wrote {escape(c['path'])}: kept {c['kept']}, removed {c['removed']}", soft_wrap=True)
    if llm is not None and llm["unjudgeable_alarm"]:
        console.print(f"[bold red]warning:[/bold red] {escape(llm['unjudgeable_alarm'])}", soft_wrap=True)
        console.print("[bold yellow]Fix the judge and run the audit again: unjudgeable verdicts are not cached, so "
                      "those pairs are asked again.[/bold yellow]", soft_wrap=True)
        raise typer.Exit(1)
