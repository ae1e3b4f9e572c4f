"""``studybench guidance-gap``: paper Table 4 from pairs of solo / guided runs (:mod:`studybench.analysis.guidance_gap`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from studybench.cli.common import console, fail, fail_write
from studybench.cli.health import AllowIncomplete, exit_if_incomplete, refuse
from studybench.escaping import plural

__all__ = ["guidance_gap_cmd"]


def guidance_gap_cmd(
    solo: Annotated[list[Path], typer.Option("--solo", help="A method's run without guidance (repeat once per method, in the order of --guided).")],
    guided: Annotated[list[Path], typer.Option("--guided", help="The same method's run with --guidance (repeat, paired with --solo by position).")],
    name: Annotated[list[str] | None, typer.Option("--name", help="The method's name per pair (repeat once per pair). Default: the runs' label 'method', else the solo run's directory name.")] = None,
    base_solo: Annotated[Path | None, typer.Option("--base-solo", help="The base model's solo run: adds the share of its guidance gap each method closes.")] = None,
    base_guided: Annotated[Path | None, typer.Option("--base-guided", help="The base model's guided run (with --base-solo).")] = None,
    base_name: Annotated[str | None, typer.Option("--base-name", help="The base row's name.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="md (Markdown table) | csv | json | latex (booktabs).")] = "md",
    scoring: Annotated[str | None, typer.Option("--scoring", help="strict | liberal for every run. Default: each run's own (they must agree).")] = None,
    k: Annotated[int | None, typer.Option("-k", "--k", help="Compare Par@k / Sub@k at this k (from the first k attempts of each run).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the table to this file instead of stdout.")] = None,
    allow_incomplete: AllowIncomplete = False,
) -> None:
    """Guidance Gap (paper Table 4): solo, guided and gap (guided - solo) for Par@k and Sub@k per method.

    Each --solo run is paired with the --guided run at the same position; both must be over the same
    items (test set, parents, k, seeds) and model, and only the guided run may have a guidance
    artefact. With --base-solo/--base-guided, each method also gets the headroom it closes:
    (method solo - base solo) / (base guided - base solo).

    Every format carries each run's health. An incomplete or unreadable run is refused unless
    --allow-incomplete (then its row is marked and the command exits 1)."""
    from studybench.analysis.guidance_gap import FORMATS, GuidanceGapError, guidance_gap, render_guidance_gap
    from studybench.files import atomic_write_text
    from studybench.report import SCORINGS, IncompleteRunError

    if fmt not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if scoring is not None and scoring not in SCORINGS:
        fail(f"--scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if len(solo) != len(guided):
        fail(f"give one --guided per --solo: got {len(solo)} --solo and {len(guided)} --guided")
    if name and len(name) != len(solo):
        fail(f"give one --name per pair: got {len(name)} --name for {plural(len(solo), 'pair')}")
    if (base_solo is None) != (base_guided is None):
        fail("--base-solo and --base-guided go together")
    base = (base_solo, base_guided) if base_solo is not None and base_guided is not None else None
    try:
        rows = guidance_gap(list(zip(solo, guided, strict=True)), base, name or None, base_name=base_name, scoring=scoring, k=k,
                            allow_incomplete=allow_incomplete)
    except IncompleteRunError as e:
        refuse(e)
    except GuidanceGapError as e:
        fail(str(e))
    except (OSError, ValueError) as e:
        fail(str(e))
    text = render_guidance_gap(rows, fmt)
    health = [(r[f"{x}_run"], r[f"{x}_health"]) for r in rows for x in ("solo", "guided")]
    if out is None:
        typer.echo(text, nl=False)
        exit_if_incomplete(health)
        return
    try:
        atomic_write_text(out, text)
    except OSError as e:
        fail_write(e, out, resumable=False)
    console.print(f"written: {out}", soft_wrap=True)
    exit_if_incomplete(health)
