"""``studybench data fetch|check|ids|errata``: find, fetch and check the test-set files; list their sub-problem keys and errata."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, out_console, plural
from studybench.escaping import printable

__all__ = ["data_app"]

data_app = typer.Typer(help="Find, fetch and check the test-set files.", no_args_is_help=True)


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
        fail(str(e), code=1)
    for p in paths:
        out_console.print(str(p))


@data_app.command("check")
def data_check(
    split: Annotated[list[str] | None, typer.Option("--split", help="application | transfer | PATH (repeatable; default both).")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print findings as JSON lines.")] = False,
    recompute: Annotated[bool, typer.Option("--recompute", help="Also recompute every numeric (NV) gold from its reference solution's own numbers and flag golds a careful answer fails against.")] = False,
) -> None:
    """Validate test-set files and report suspicious but loadable records.

    With --recompute every NV gold is recomputed from the arithmetic its reference solution writes
    (rounded intermediate results carried at full precision; a small safe evaluator, nothing is
    executed); a gold is flagged when that value fails the verifier's NV check against it."""
    from rich.table import Table

    from studybench.checks import check_dataset
    from studybench.datasets import OFFICIAL_SPLITS, DatasetError, load_dataset, official_name, resolve_split

    splits = split or list(OFFICIAL_SPLITS)
    bad = False
    for s in splits:
        try:
            path = resolve_split(s, data_dir)
            ds = load_dataset(path, name=official_name(s))
        except DatasetError as e:
            console.print(f"[bold red]{s}: invalid[/bold red] {e}")
            bad = True
            continue
        findings = check_dataset(ds)
        if as_json:
            for f in findings:  # one JSON object per line
                sys.stdout.write(json.dumps({"split": s, **f.to_dict()}, ensure_ascii=False, allow_nan=False) + "\n")
            if recompute:
                _print_recompute(s, ds, as_json=True)
            continue
        where = "" if str(path) == s else f" ({path})"
        out_console.print(f"[bold]{escape(s)}[/bold]{escape(where)}: {plural(len(ds), 'parent')}, "
                          f"{plural(ds.n_sub_problems, 'sub-problem')}, loads OK; {plural(len(findings), 'finding')}", soft_wrap=True)
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
        if recompute:
            _print_recompute(s, ds, as_json=False)
    if bad:
        raise typer.Exit(1)


def _print_recompute(split: str, ds: Any, *, as_json: bool) -> None:
    """The recomputation of a split's numeric golds: a summary and the flagged golds (table or JSON lines)."""
    from rich.table import Table

    from studybench.recompute import recompute_dataset

    res = recompute_dataset(ds)
    summary = res.summary()
    if as_json:
        sys.stdout.write(json.dumps({"split": split, "recompute": summary}, allow_nan=False) + "\n")
        for r in res.flagged:
            sys.stdout.write(json.dumps({"split": split, "kind": "recomputed_gold_differs", "parent_uid": r.parent_uid,
                                         "sub_id": r.sub_id, "field": r.field, "message": r.reason,
                                         "recompute": r.to_dict()}, ensure_ascii=False, allow_nan=False) + "\n")
        return
    out_console.print(f"[bold]{escape(split)}[/bold] recompute: {summary['recomputed']} of "
                      f"{plural(summary['numeric_golds'], 'numeric gold')} recomputed from their solutions' own numbers; "
                      f"{summary['agrees']} agree, {summary['flagged']} flagged", soft_wrap=True)
    if not res.flagged:
        return
    t = Table(title=f"{split}: golds the solution's own numbers contradict")
    for col, just in (("item", "left"), ("gold", "left"), ("recomputed", "right"), ("off", "right"), ("kind", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in res.flagged:
        slot = f" slot {r.slot + 1}" if r.slot else ""
        t.add_row(escape(f"{r.parent_uid} / {r.sub_id}{slot}"), escape(r.gold), f"{r.recomputed:.4g}",
                  f"{100 * (r.relative_error or 0):.1f}%", r.kind or "")
    out_console.print(t)
    for r in res.flagged:
        out_console.print(f"[cyan]recomputed_gold_differs[/cyan] {escape(r.parent_uid)} / {escape(r.sub_id)}: "
                          f"{escape(r.reason)}; step: {escape(r.step or '')}", highlight=False, soft_wrap=True)


@data_app.command("errata")
def data_errata(
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets (to say whether each erratum still applies).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per erratum.")] = False,
) -> None:
    """List the errata shipped with studybench: golds of the official test sets found wrong by hand,
    with the corrected value (or none: unanswerable as stated), the cause and the evidence.

    `eval` scores the official golds unless --errata apply (corrected golds) or --errata exclude
    (parents holding an erratum left out). The status column says whether the test-set file found
    still holds each official value."""
    from rich.table import Table

    from studybench.datasets import DatasetError, load_dataset, resolve_split
    from studybench.errata import load_errata, plan_errata

    errata = load_errata()
    status: dict[str, str] = {}
    for split in sorted({e.split for e in errata}):
        try:
            ds = load_dataset(resolve_split(split, data_dir), name=split)
        except DatasetError:
            status.update({e.id: "test set not found" for e in errata if e.split == split})
            continue
        plan = plan_errata(ds.parents, "official", [e for e in errata if e.split == split])
        status.update({e.id: "applies" for e in plan.matched})
        status.update({e.id: "the test set holds another value" for e in plan.stale})
        status.update({e.id: "not in the test set" for e in errata if e.split == split and e.id not in status})
    if as_json:
        for e in errata:
            sys.stdout.write(json.dumps({**e.to_dict(), "status": status[e.id]}, ensure_ascii=False, allow_nan=False) + "\n")
        return
    t = Table(title=f"studybench errata ({len(errata)})")
    for col in ("item", "kind", "official", "corrected", "cause", "status"):
        t.add_column(col)
    for e in errata:
        t.add_row(escape(f"{e.split}: {e.parent_uid} / {e.problem_id}"), e.kind, escape(e.official),
                  escape(e.corrected or "(unanswerable)"), escape(e.cause), status[e.id])
    out_console.print(t)


@data_app.command("ids")
def data_ids(
    split: Annotated[str, typer.Option("--split", help="application | transfer | PATH to a test-set JSON file.")],
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per line (source, year, source_problem_id, problem_id).")] = False,
) -> None:
    """Print the four-part key of every sub-problem (the key a --guidance file joins on), one per line.

    Plain output is tab-separated: source, year, source_problem_id, problem_id (control characters in an
    id shown as escapes such as \\x00; --json gives the exact text). With --json each line is
    an object with those fields; add a "guidance" field to make it a guidance record."""
    from studybench.datasets import DatasetError, load_split

    try:
        ds = load_split(split, data_dir)
    except DatasetError as e:
        fail(str(e))
    for key in ds.sub_problem_keys():
        if as_json:
            line = json.dumps(dict(zip(("source", "year", "source_problem_id", "problem_id"), key, strict=True)), ensure_ascii=False, allow_nan=False)
        else:
            line = "\t".join(printable(k) for k in key)  # a tab, NUL or escape sequence in an id is shown escaped
        sys.stdout.write(line + "\n")


@data_app.command("stats")
def data_stats_cmd(
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help="Directory of the instruction layers (default: train/ in --data-dir, $STUDYBENCH_DATA or the fetch cache).")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets (and train/).")] = None,
    books: Annotated[Path | None, typer.Option("--books", help="Books directory DIR/<source>/<chapter>/: adds the Corpus row (chapter files, MB, estimated tokens).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the tables as one JSON object.")] = False,
) -> None:
    """Print the paper's Table 1 (layers and test sets, beside the paper's counts) and Table 7
    (sub-discipline mix of the two test sets) for the files present.

    A layer file named *.head.json is a partial copy: its row says so. Token counts of the Corpus are
    the builtin tokenizer's estimate (see `studybench export chunks --help`)."""
    from rich.table import Table

    from studybench.datasets import OFFICIAL_SPLITS, DatasetError, load_split, resolve_train_dir
    from studybench.instructions import InstructionError, find_instruction_files, load_instructions
    from studybench.testset.corpus.books import CorpusError
    from studybench.testset.corpus.stats import data_stats

    layers, sets, missing = [], [], []
    try:
        tdir = resolve_train_dir(train_dir, data_dir)
    except DatasetError as e:
        if train_dir is not None:
            fail(str(e))
        tdir = None
        missing.append(str(e))
    if tdir is not None:
        found = find_instruction_files(tdir)
        if not found:
            missing.append(f"no instruction layer files in {tdir}")
        for path in found.values():
            try:
                layers.append(load_instructions(path))
            except InstructionError as e:
                fail(str(e), 1)
    for s in OFFICIAL_SPLITS:
        try:
            sets.append(load_split(s, data_dir))
        except DatasetError as e:
            missing.append(str(e))
    if not layers and not sets and books is None:
        fail("nothing to count: " + "; ".join(missing), 1)
    try:
        stats = data_stats(layers, sets, books)
    except (CorpusError, OSError) as e:
        fail(str(e), 1)
    if as_json:
        sys.stdout.write(json.dumps(stats.to_dict(), ensure_ascii=False, indent=2, allow_nan=False) + "\n")
        return
    t1 = Table(title="Table 1: training layers and test sets (files present vs the paper)")
    for col, just in (("layer", "left"), ("records", "right"), ("exercises", "right"), ("paper", "right"), ("note", "left")):
        t1.add_column(col, justify=just)  # type: ignore[arg-type]
    if stats.corpus is not None:
        c = stats.corpus
        t1.add_row("Corpus", f"{plural(c.chapters, 'chapter')}", f"{plural(c.books, 'book')}", "",
                   f"{c.bytes / 1e6:.1f} MB, ~{c.tokens:,} tokens (estimate)"
                   + (f"; {c.answer_chapters} answer folders left out" if c.answer_chapters else ""))
    names = {"single": "Instructions with Answer (single-turn)", "multi_sub": "Instructions with Answer (multi-sub)",
             "without_answer": "Instructions without Answer"}
    for x in stats.layers:
        note = f"head: {x.records} of {x.paper}" if x.head else ("" if x.records == x.paper else "differs from the paper")
        if x.unusable_golds:
            note += ("; " if note else "") + f"{x.unusable_golds} gold(s) the verifier cannot use"
        t1.add_row(names[x.kind], str(x.records), str(x.exercises), str(x.paper), note)
    for st in stats.sets:
        same = (st.parents, st.sub_problems) == (st.paper_parents, st.paper_sub_problems)
        t1.add_row(f"{st.name.capitalize()} Set", f"{plural(st.parents, 'parent')}", f"{plural(st.sub_problems, 'sub-problem')}",
                   f"{st.paper_parents} / {st.paper_sub_problems}", "" if same else "differs from the paper")
    out_console.print(t1)
    if stats.sets:
        t7 = Table(title="Table 7: sub-discipline mix (parents, % of the set)")
        t7.add_column("sub-discipline")
        labels: list[str] = []
        for st in stats.sets:
            t7.add_column(st.name, justify="right")
            labels += [k for k in st.sub_disciplines if k not in labels]
        for label in labels:
            cells = []
            for st in stats.sets:
                n = st.sub_disciplines.get(label, [0, 0])[0]
                cells.append(f"{n} ({100 * n / st.parents:.1f}%)" if st.parents else "0")
            t7.add_row(escape(label), *cells)
        out_console.print(t7)
    for m in missing:
        console.print(f"[yellow]not counted:[/yellow] {escape(m)}", soft_wrap=True)
