"""``studybench label``: set, remove or show the labels of a run (:func:`studybench.store.set_labels`).

Labels are free ``key=value`` strings in the run's manifest (``eval --label`` sets them when the run
is made); ``report.json`` / ``report.md`` and ``export attempts`` carry them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, fail_write, out_console

if TYPE_CHECKING:
    from studybench.store import RunStore

__all__ = ["label_cmd", "parse_labels"]


def parse_labels(values: list[str] | None, flag: str = "--label") -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict (later wins), each validated (:func:`studybench.store.check_labels`).

    Args:
        values: the arguments as given.
        flag: the option or argument, for error messages.

    Returns:
        The labels in the order given.

    Raises:
        typer.Exit: (exit 2) an argument without ``=`` or an invalid label, named.
    """
    from studybench.store import check_labels

    out: dict[str, str] = {}
    for raw in values or []:
        key, eq, value = raw.partition("=")
        if not eq:
            fail(f"{flag} {raw!r}: expected KEY=VALUE, e.g. method=GEPA")
        try:
            check_labels({key: value})
        except ValueError as e:
            fail(f"{flag} {raw!r}: {e}")
        out[key] = value
    try:
        return check_labels(out)
    except ValueError as e:  # too many
        fail(f"{flag}: {e}")


def _show(labels: dict[str, str]) -> None:
    if not labels:
        out_console.print("(no labels)", highlight=False)
    for key, value in labels.items():
        out_console.print(f"{escape(key)}={escape(value)}", highlight=False, soft_wrap=True)


def label_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    assignments: Annotated[list[str] | None, typer.Argument(help="KEY=VALUE labels to set (e.g. method=GEPA 'layer=Instructions with Answer').", show_default=False)] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", metavar="KEY", help="Remove the label KEY (repeatable).")] = None,
    show: Annotated[bool, typer.Option("--show", help="Print the run's labels (the default when nothing is set or removed).")] = False,
) -> None:
    """Set, remove or show the labels of a run (free KEY=VALUE strings in its manifest, carried by reports and exports).

    An existing report.json / report.md is refreshed so that it carries the new labels. Refused while
    another command (eval, judge) writes the run directory."""
    from studybench.store import RunDirInUseError, RunStore, set_labels

    new = parse_labels(assignments, "label")
    gone = [k for k in remove or [] if k]
    if remove and len(gone) < len(remove):
        fail("--remove: a label key must not be empty")
    both = sorted(set(new) & set(gone))
    if both:
        fail(f"label {both[0]!r} is both set and removed")
    store = RunStore(run_dir)
    if not new and not gone:
        try:
            _show(store.read_manifest().labels)
        except (OSError, ValueError) as e:
            fail(str(e), 1)
        return
    scoring = _report_scoring(store) if store.exists() else None
    try:
        labels = set_labels(store, {**new, **dict.fromkeys(gone)})
    except RunDirInUseError as e:
        fail(str(e), 1)
    except FileNotFoundError as e:
        fail(str(e), 1)
    except ValueError as e:
        fail(str(e))
    except OSError as e:
        fail_write(e, store.manifest_path, resumable=False)
    console.print(f"labels of {escape(str(run_dir))}: "
                  + (escape(", ".join(f"{k}={v}" for k, v in labels.items())) or "none"), soft_wrap=True)
    if scoring is not None:
        _refresh_report(store.root, scoring)
    if show:
        _show(labels)


_NO_SCORING = ""


def _report_scoring(store: RunStore) -> str | None:
    """The scoring of the run's existing report (``None``: no report to refresh; ``""``: the run's
    default), after checking that every file a refresh reads can be read: a file that cannot (a named
    pipe, a corrupt row) fails the command here, before the manifest is written."""
    from studybench.files import read_json
    from studybench.report import SCORINGS
    from studybench.report.tokens import PRICING_FILE, recorded_pricing

    path = store.root / "report.json"
    if not os.path.lexists(path):
        return None
    try:
        obj = read_json(path)
        store.check_files(PRICING_FILE)
        recorded_pricing(store)
    except FileNotFoundError as e:
        fail(str(e), 1)
    except (OSError, ValueError) as e:
        fail(str(e))
    scoring = obj.get("scoring_used") if isinstance(obj, dict) else None
    return scoring if scoring in SCORINGS else _NO_SCORING


def _refresh_report(root: Path, scoring: str) -> None:
    """Rewrite an existing report (same scoring) so that it carries the run's labels."""
    from studybench.report import write_report

    try:
        write_report(root, scoring or None)
    except (OSError, ValueError) as e:
        console.print(f"[yellow]warning:[/yellow] report.json not refreshed ({escape(str(e))}); "
                      f"run `studybench report {escape(str(root))}`", soft_wrap=True)
        return
    console.print("report.json and report.md refreshed")
