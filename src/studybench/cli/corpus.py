"""``studybench corpus ...``: check, parse, clean, redact and audit a books directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from studybench.cli.common import console, fail, fail_write, out_console, progress_bars
from studybench.escaping import md_cell, plural
from studybench.files import atomic_write_text, dumps_json

corpus_app = typer.Typer(
    help="Process the textbook corpus: parse PDFs (MinerU), clean OCR, redact test items, audit for residue.",
    no_args_is_help=True,
)

_Books = Annotated[
    Path | None,
    typer.Option("--books", help="Books directory DIR/<source>/<chapter>/ (default $STUDYBENCH_BOOKS); `studybench corpus check` lists what each stage has there."),
]
_Split = Annotated[str, typer.Option("--split", help="Test set whose items are redacted: application | transfer | PATH.")]
_DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets (default $STUDYBENCH_DATA).")]


def _books(books: Path | None) -> Path:
    root = books or (Path(os.environ["STUDYBENCH_BOOKS"]) if os.environ.get("STUDYBENCH_BOOKS") else None)
    if root is None:
        fail("--books DIR is required (or set $STUDYBENCH_BOOKS)")
    assert root is not None
    if not root.is_dir():
        fail(f"--books {root}: not a directory (expected DIR/<source>/<chapter>/full.md)")
    return root


def _parents(split: str, data_dir: Path | None) -> list[Any]:
    from studybench.datasets import DatasetError, load_dataset, official_name, resolve_split

    try:
        path = resolve_split(split, data_dir)
        ds = load_dataset(path, name=official_name(split))
    except (DatasetError, ValueError) as e:
        fail(str(e))
    return list(ds.parents)


def _write_reports(root: Path, name: str, data: dict[str, Any], markdown: str, out: Path | None = None) -> Path:
    from studybench.testset.corpus.books import REPORTS

    target = out or root / REPORTS
    try:
        atomic_write_text(target / f"{name}.json", dumps_json(data) + "\n")
        atomic_write_text(target / f"{name}.md", markdown)
    except OSError as e:
        fail_write(e, target, resumable=False)
    return target


@corpus_app.command("check")
def check_cmd(
    books: _Books = None,
    stage: Annotated[str, typer.Option("--stage", help="What the next step needs: parse | clean | redact | audit.")] = "redact",
    split: _Split = "application",
    data_dir: _DataDir = None,
) -> None:
    """Show the layout of the books directory and say exactly what is missing for a stage. Exit 1 when something is."""
    from studybench.testset.corpus.books import (
        CLEAN,
        FULL,
        REDACTED,
        CorpusError,
        layout_problems,
        scan_books,
    )

    if stage not in ("parse", "clean", "redact", "audit"):
        fail(f"--stage must be parse, clean, redact or audit, got {stage!r}")
    root = _books(books)
    try:
        tree = scan_books(root)
    except CorpusError as e:
        fail(str(e))
    sources = sorted({p.source for p in _parents(split, data_dir)}) if stage in ("redact", "audit") else None
    t = Table(title=f"{root}")
    for col in ("source", "chapters", "pdf", FULL, CLEAN, REDACTED):
        t.add_column(col, justify="right" if col != "source" else "left")
    for src, chapters in tree.items():
        t.add_row(src, str(len(chapters)), str(sum(1 for c in chapters if c.pdfs)), str(sum(c.has(FULL) for c in chapters)),
                  str(sum(c.has(CLEAN) for c in chapters)), str(sum(c.has(REDACTED) for c in chapters)))
    out_console.print(t)
    problems = layout_problems(tree, stage, sources)
    if problems:
        console.print(f"[yellow]{len(problems)} problem(s) for `corpus {stage}`:[/yellow]")
        for p in problems:
            console.print(f"  - {escape(p)}", soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"[green]ready for `corpus {stage}`[/green]")


@corpus_app.command("parse")
def parse_cmd(
    books: _Books = None,
    force: Annotated[bool, typer.Option("--force", help="Parse again chapters that already have full.md.")] = False,
    backend: Annotated[str, typer.Option("--backend", help="MinerU backend (-b), e.g. pipeline.")] = "pipeline",
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds per PDF.")] = None,
) -> None:
    """PDF -> full.md for every chapter through MinerU (the `mineru` extra). Resumable: done chapters are skipped."""
    from studybench.testset.corpus.books import CorpusError, parse_books

    root = _books(books)
    try:
        res = parse_books(root, force=force, backend=backend, timeout=timeout,
                          progress=lambda label, status: console.print(f"{status:>8} {escape(label)}"))
    except CorpusError as e:
        fail(str(e))
    console.print(f"parsed {len(res['parsed'])}, skipped {len(res['skipped'])} (already parsed), failed {len(res['failed'])}")
    for f in res["failed"]:
        console.print(f"[red]failed[/red] {escape(f)}", soft_wrap=True)
    if res["failed"]:
        raise typer.Exit(1)


@corpus_app.command("clean")
def clean_cmd(books: _Books = None) -> None:
    """full.md -> clean.md with the deterministic OCR clean-up rules; report edits per rule."""
    from studybench.testset.corpus.books import RULES, CorpusError, clean_books

    root = _books(books)
    try:
        with progress_bars(unit="chapters") as bar:
            res = clean_books(root, progress=lambda _label: bar("clean", 1, None))
    except CorpusError as e:
        fail(str(e))
    totals: dict[str, int] = res["totals"]  # type: ignore[assignment]
    t = Table(title=f"clean-up edits ({plural(len(res['chapters']), 'chapter')})")  # type: ignore[arg-type]
    t.add_column("rule")
    t.add_column("edits", justify="right")
    for name, _ in RULES:
        t.add_row(name, str(totals[name]))
    out_console.print(t)
    md = ["# Clean-up report", "", "| chapter | " + " | ".join(n for n, _ in RULES) + " |", "|---|" + "---|" * len(RULES)]
    for label, edits in res["chapters"].items():  # type: ignore[union-attr]
        md.append(f"| {md_cell(label)} | " + " | ".join(str(edits[n]) for n, _ in RULES) + " |")
    md.append("| **total** | " + " | ".join(str(totals[n]) for n, _ in RULES) + " |")
    where = _write_reports(root, "clean", res, "\n".join(md) + "\n")
    if res["skipped"]:
        console.print(f"[yellow]{len(res['skipped'])} chapter(s) without full.md were skipped[/yellow]")  # type: ignore[arg-type]
    console.print(f"report: {where / 'clean.json'}, {where / 'clean.md'}", soft_wrap=True)


@corpus_app.command("redact")
def redact_cmd(
    books: _Books = None,
    split: _Split = "application",
    data_dir: _DataDir = None,
    min_match: Annotated[int, typer.Option("--min-match", help="Normalised characters a found copy must share with the test item (short items: 60% of their length).")] = 100,
) -> None:
    """clean.md -> clean.redacted.md: every copy of each test item's problem, solution and answer-key entry becomes a marker line."""
    from studybench.testset.corpus.books import CorpusError
    from studybench.testset.corpus.redact import RedactParams, redact_books

    if min_match < 24:
        fail("--min-match must be >= 24")
    root = _books(books)
    parents = _parents(split, data_dir)
    try:
        with progress_bars(unit="chapters") as bar:
            res = redact_books(root, parents, params=RedactParams(min_match=min_match),
                               progress=lambda _label: bar("redact", 1, None))
    except CorpusError as e:
        fail(str(e))
    blocks = sum(res["files"].values())
    console.print(f"redacted {blocks} block(s) in {len(res['files'])} file(s); {len(parents) - len(res['not_found'])} of "
                  f"{plural(len(parents), 'parent')} found")
    if res["missing_sources"]:
        console.print(f"[yellow]sources without a folder: {', '.join(res['missing_sources'])}[/yellow]", soft_wrap=True)
    for uid in res["not_found"][:20]:
        console.print(f"[yellow]nothing found for[/yellow] {escape(uid)}", soft_wrap=True)
    md = ["# Redaction report", "", f"{plural(blocks, 'block')} in {plural(len(res['files']), 'file')}.", "",
          "| parent | blocks | kinds |", "|---|---|---|"]
    for uid, d in res["parents"].items():
        kinds = sorted({b["kind"] for b in d["blocks"]})
        md.append(f"| {md_cell(uid)} | {len(d['blocks'])} | {md_cell(', '.join(kinds)) or '**none found**'} |")
    where = _write_reports(root, "redact", res, "\n".join(md) + "\n")
    console.print(f"report: {where / 'redact.json'}, {where / 'redact.md'}; next: `studybench corpus audit` (contamination) or `studybench build fragments` (test-set construction)", soft_wrap=True)


@corpus_app.command("audit")
def audit_cmd(
    books: _Books = None,
    split: _Split = "application",
    data_dir: _DataDir = None,
    out: Annotated[Path | None, typer.Option("--out", help="Report directory (default DIR/_reports).")] = None,
    min_anchors: Annotated[int, typer.Option("--min-anchors", help="Distinct 40-character anchors of one item a file must hold to count as residue (1 = any anchor; 2, the default, ignores a lone generic phrase).")] = 2,
) -> None:
    """Search every clean.redacted.md for verbatim residue of the test items (40-character normalised
    anchors) and check every parent has a marker in its book. Exit 1 with a per-parent list when anything remains."""
    from studybench.testset.corpus.books import CorpusError
    from studybench.testset.corpus.redact import audit_books

    if min_anchors < 1:
        fail("--min-anchors must be >= 1")
    if out is not None and out.exists() and not out.is_dir():
        fail(f"--out {out} exists and is not a directory")
    root = _books(books)
    parents = _parents(split, data_dir)
    try:
        with progress_bars(unit="files") as bar:
            res = audit_books(root, parents, min_anchors=min_anchors, progress=lambda _label: bar("audit", 1, None))
    except CorpusError as e:
        fail(str(e))
    md = ["# Residue audit", "", f"{plural(res['files'], 'redacted file')}, {plural(res['parents'], 'parent')}, {plural(res['anchors'], 'anchor')}.", ""]
    md.append(f"**{'OK: no residue, every parent has a marker' if res['ok'] else 'FAILED'}**")
    md.append("")
    if res["residue"]:
        md += ["## Residue", "", "| source | source_problem_id | file | line | kind | anchors | example |", "|---|---|---|---|---|---|---|"]
        for r in res["residue"]:
            md.append("| " + " | ".join(md_cell(r[c]) for c in ("source", "source_problem_id", "file", "line", "kind", "anchors", "example"))
                      + " |")
        md.append("")
    if res["missing_markers"]:
        md += ["## Parents without a marker in their book", ""]
        md += [f"- {md_cell(m['source'])} / {md_cell(m['source_problem_id'])}" for m in res["missing_markers"]]
        md.append("")
    if res["not_redacted"]:
        md += ["## Chapters with clean.md but no clean.redacted.md", ""] + [f"- {md_cell(x)}" for x in res["not_redacted"]] + [""]
    where = _write_reports(root, "audit", res, "\n".join(md), out)
    if res["ok"]:
        console.print(f"[green]audit passed[/green]: {plural(res['files'], 'file')}, {plural(res['parents'], 'parent')}, no residue, every parent has a marker")
    else:
        for r in res["residue"]:
            what = "answer-key entry" if r["kind"] == "answer key" else f"{plural(r['anchors'], 'anchor')}"
            console.print(f"[red]residue[/red] {escape(r['source'])} / {escape(r['source_problem_id'])} in {escape(r['file'])} "
                          f"line {r['line']} ({what})", soft_wrap=True)
        for m in res["missing_markers"]:
            console.print(f"[red]no marker[/red] {escape(m['source'])} / {escape(m['source_problem_id'])}", soft_wrap=True)
        for x in res["not_redacted"]:
            console.print(f"[red]not redacted[/red] {escape(x)}", soft_wrap=True)
    console.print(f"report: {where / 'audit.json'}, {where / 'audit.md'}", soft_wrap=True)
    if not res["ok"]:
        raise typer.Exit(1)


@corpus_app.command("ingest-cnxml")
def ingest_cnxml_cmd(
    src: Annotated[Path, typer.Argument(help="OpenStax-style CNXML directory (collections/*.collection.xml, modules/<id>/index.cnxml).")],
    books: Annotated[Path, typer.Option("--books", help="Books directory to write (DIR/<source>/<chapter>/clean.md).")],
    pool: Annotated[Path | None, typer.Option("--pool", help="Exercise pool JSON to write (default BOOKS/pool.json).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Convert again chapters whose inputs did not change.")] = False,
) -> None:
    """CNXML textbook (MathML) -> Markdown chapters through pandoc, plus its worked examples and answered exercises as a pool."""
    from studybench.testset.corpus.ingest import IngestError, ingest_cnxml

    if not src.is_dir():
        fail(f"{src}: not a directory", code=2)
    try:
        rep = ingest_cnxml(src, books, pool, force=force,
                           progress=lambda label, status: console.print(f"{status:>5} {escape(label)}"))
    except (IngestError, OSError) as e:
        fail(str(e), code=1)
    for source, v in rep.volumes.items():
        out_console.print(f"{source}: {plural(v['chapters'], 'chapter')}, {v['characters']:,} characters (+{v['answer_characters']:,} in answers), "
                          f"items {dict(v['items'])}, with an answer {dict(v['items_with_answer'])}, records {v['records']}")
    out_console.print(f"chapters converted {rep.converted}, reused {rep.reused}; pool {rep.pool}: {plural(rep.records, 'record')} "
                      f"({plural(rep.sub_problems, 'sub-problem')}), kept {dict(rep.kept)}")
    out_console.print("skipped: " + ", ".join(f"{k}: {n}" for k, n in sorted(rep.skipped.items(), key=lambda x: -x[1])))
    out_console.print(f"{rep.seconds:.1f} s")
