"""``studybench data fetch|check|ids``: find, fetch and check the test-set files; list their sub-problem keys."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, out_console, plural

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
            for f in findings:  # one JSON object per line
                sys.stdout.write(json.dumps({"split": s, **f.to_dict()}, ensure_ascii=False) + "\n")
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
    if bad:
        raise typer.Exit(1)


@data_app.command("ids")
def data_ids(
    split: Annotated[str, typer.Option("--split", help="application | transfer | PATH to a test-set JSON file.")],
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding the test sets.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per line (source, year, source_problem_id, problem_id).")] = False,
) -> None:
    """Print the four-part key of every sub-problem (the key a --guidance file joins on), one per line.

    Plain output is tab-separated: source, year, source_problem_id, problem_id. With --json each line is
    an object with those fields; add a "guidance" field to make it a guidance record."""
    from studybench.datasets import DatasetError, load_dataset, resolve_split

    try:
        ds = load_dataset(resolve_split(split, data_dir), name=split if split in ("application", "transfer") else None)
    except DatasetError as e:
        fail(str(e))
    for key in ds.sub_problem_keys():
        if as_json:
            line = json.dumps(dict(zip(("source", "year", "source_problem_id", "problem_id"), key, strict=True)), ensure_ascii=False)
        else:
            line = "\t".join(key)
        sys.stdout.write(line + "\n")
