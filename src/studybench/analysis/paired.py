"""Paired A/B comparison of two systems over the same items (Physics-R1's analysis of paired outcomes).

Two systems answer the same items; each item is solved (1) or not (0) by each. Items of a run are not
independent: a parent's sub-problems share one problem and one conversation, and every seed asks the
same parents again. So every test and interval here takes one paired observation per **unit**: per
parent for a run (:func:`run_outcomes` gives each item its parent), per item for an outcome file
without clusters (items there are taken as independent). Per unit: the items each side solves
(summed over seeds and sub-problems) and how many items it has (:func:`studybench.analysis.signflip.unit_counts`).
From the two outcome maps :func:`compare_outcomes` gives:

- each side's accuracy and the difference ``acc_b - acc_a`` (Sub@k or Par@k, pooled over units);
- a paired bootstrap percentile CI of the difference that resamples whole units, the same units for
  both sides (:func:`paired_bootstrap_diff` with :func:`ratio_statistic`);
- the exact paired sign-flip test over units (:func:`studybench.analysis.signflip.sign_flip_test`;
  two-sided and each one-sided): the headline p-value. With one 0/1 item per unit it is McNemar's
  exact test;
- the units by direction (A better, B better, tied) and the sign test on those that differ;
- descriptive only, over items: the 2x2 table and Cohen's kappa
  (``statsmodels.stats.inter_rater.cohens_kappa``).

Outcomes come from a run directory (:func:`run_outcomes`) or from a CSV / JSONL file with an item id
and a 0/1 column (:func:`read_outcome_file`), so comparisons made outside studybench (original vs
translated prompts, say) use the same statistics.

The statistics need the ``analysis`` extra (scipy, statsmodels, numpy); without it the functions that
compute raise :class:`AnalysisExtraMissing`. Reading outcomes needs nothing extra.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from studybench.analysis.signflip import UnitDirections, sign_flip_test, unit_counts, unit_directions
from studybench.escaping import plural
from studybench.files import decode_utf8, jsonl_lines, parse_json, read_user_bytes
from studybench.store import RunRows, RunStore, turn_verdicts

__all__ = [
    "LEVELS",
    "AnalysisExtraMissing",
    "BootstrapCI",
    "ItemOutcomes",
    "PairedComparison",
    "PairedTable",
    "compare_outcomes",
    "mean_statistic",
    "paired_bootstrap_diff",
    "ratio_statistic",
    "read_outcome_file",
    "run_outcomes",
]

LEVELS = ("sub-problem", "parent")
"""Item levels of a run: one item per (seed, sub-problem), or per (seed, parent)."""

EXTRA_HINT = 'pip install "studybench[analysis]"'

_TRUE = {"1", "true", "yes", "y", "t", "correct"}
_FALSE = {"0", "false", "no", "n", "f", "incorrect"}
_CHUNK_ELEMENTS = 4_000_000
"""Resampled indices drawn at once (resamples x units), so memory stays bounded for large sets."""


class AnalysisExtraMissing(RuntimeError):
    """An optional dependency of the statistics (scipy, statsmodels, numpy) is missing."""


def _need(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise AnalysisExtraMissing(
            f"paired statistics need the optional package '{module.split('.')[0]}' ({e}); install it with: {EXTRA_HINT}"
        ) from None


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PairedTable:
    """The 2x2 table of two paired binary outcome vectors (over items: descriptive; the tests use units).

    Attributes:
        both: items both sides solve.
        a_only: items only A solves.
        b_only: items only B solves.
        neither: items neither side solves.
    """

    both: int
    a_only: int
    b_only: int
    neither: int

    @property
    def n(self) -> int:
        """All items."""
        return self.both + self.a_only + self.b_only + self.neither

    @property
    def discordant(self) -> int:
        """Items exactly one side solves (not independent when items cluster in parents)."""
        return self.a_only + self.b_only


@dataclass(frozen=True)
class BootstrapCI:
    """A paired bootstrap percentile interval of ``statistic(B) - statistic(A)``.

    Attributes:
        observed: the difference on the full sample.
        lo, hi: the percentile interval's bounds.
        level: its confidence level (e.g. 0.95).
        resamples: bootstrap resamples drawn.
        seed: the seed of ``numpy.random.default_rng``.
        units: how many units (items or clusters) were resampled.
    """

    observed: float
    lo: float
    hi: float
    level: float
    resamples: int
    seed: int
    units: int


@dataclass(frozen=True)
class PairedComparison:
    """Physics-R1's paired A/B statistics with one paired observation per unit (proportions, not percent).

    The unit is the parent for runs (all of a parent's seeds and sub-problems are one observation) and
    the item for outcome files without clusters. Changed in issue 24: the tests were over items
    (``sign_p``, ``sign_p_a_better``, ``sign_p_b_better``, ``mcnemar_p``: seeds and sub-problems
    counted as independent items); they are now over units, under new names.

    Attributes:
        n: paired items.
        table: the 2x2 table over items (descriptive).
        acc_a, acc_b: the share of items each side solves.
        diff: ``acc_b - acc_a``.
        diff_ci: the paired bootstrap percentile CI of ``diff`` (``ci.lo``, ``ci.hi``), resampling units.
        ci: the bootstrap's details (level, resamples, seed, units).
        bootstrap_unit: what was resampled, the same as ``unit``.
        unit: the unit of the tests and the CI: ``"item"`` or the name of the clusters (``"parent"``).
        units: how many units.
        unit_table: the units by direction (A better, B better, tied) and the sign test on those that differ.
        p_value: the exact paired sign-flip test of ``sum(b - a)`` over units, two-sided (1.0 when no
            unit differs); McNemar's exact test when every unit is one item.
        p_a_better: its one-sided p-value: A better.
        p_b_better: its one-sided p-value: B better.
        kappa: Cohen's kappa of the two sides over items (descriptive); ``None`` when undefined (both
            sides one constant label).
    """

    n: int
    table: PairedTable
    acc_a: float
    acc_b: float
    diff: float
    diff_ci: tuple[float, float]
    ci: BootstrapCI
    bootstrap_unit: str
    unit: str
    units: int
    unit_table: UnitDirections
    p_value: float
    p_a_better: float
    p_b_better: float
    kappa: float | None

    def to_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-ready dict (the table's ``n`` and ``discordant`` included)."""
        d = asdict(self)
        d["table"].update(n=self.table.n, discordant=self.table.discordant)
        d["diff_ci"] = list(self.diff_ci)
        d["test"] = f"exact paired sign-flip test over {self.unit}s"
        return d

    def significant(self) -> bool:
        """Whether the two-sided sign-flip test is significant at ``1 - ci.level`` (5% by default)."""
        return self.p_value < 1.0 - self.ci.level

    def conclusion(self, a: str = "A", b: str = "B") -> str:
        """One line: which side is better, by how many points, the CI and the sign-flip test over units.

        Args:
            a, b: the names of the two sides.

        Returns:
            e.g. ``"B is worse than A: -6.7 points (95% CI over parents -12.2 to -2.2), exact sign-flip
            test over 90 parents (6 differ): p = 0.031 (significant at 5%)"``.
        """
        pts = 100.0 * self.diff
        lo, hi = (100.0 * x for x in self.diff_ci)
        if pts > 0:
            head = f"{b} is better than {a}"
        elif pts < 0:
            head = f"{b} is worse than {a}"
        else:
            head = f"{a} and {b} are equally accurate"
        alpha = f"{100 * (1.0 - self.ci.level):.3g}%"
        sig = f"significant at {alpha}" if self.significant() else f"not significant at {alpha}"
        level = f"{100 * self.ci.level:g}%"
        differ = self.unit_table.a_better + self.unit_table.b_better
        return (f"{head}: {pts:+.1f} points ({level} CI over {self.unit}s {lo:+.1f} to {hi:+.1f}), "
                f"exact sign-flip test over {self.units} {self.unit}s ({differ} differ): p = {_fmt_p(self.p_value)} ({sig})")


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


# --------------------------------------------------------------------------- bootstrap


def mean_statistic(values: Any) -> Any:
    """The mean over units of each resample: ``values`` of shape ``(r, n)`` -> ``r`` values.

    The default statistic of :func:`paired_bootstrap_diff`: accuracy for 0/1 outcomes, Par@k (as a
    proportion) for per-parent solved flags.
    """
    return values.mean(axis=1)


def ratio_statistic(values: Any) -> Any:
    """Sum of column 0 over sum of column 1 for each resample: ``values`` of shape ``(r, n, 2)`` -> ``r`` values.

    For clusters of items: per cluster ``(items solved, items)``, e.g. per parent ``(sub-problems
    solved, sub-problems)`` gives Sub@k (as a proportion) with parents resampled.
    """
    return values[..., 0].sum(axis=1) / values[..., 1].sum(axis=1)


def paired_bootstrap_diff(
    a: Any,
    b: Any,
    statistic: Callable[[Any], Any] | None = None,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> BootstrapCI:
    """Paired bootstrap percentile CI of ``statistic(b) - statistic(a)``, resampling units with replacement.

    Unit ``i`` of ``a`` and unit ``i`` of ``b`` are the same item or cluster (a parent, with all its
    seeds and sub-problems: never a (seed, parent) pair, since seeds repeat the parent); every
    resample draws one set of unit indices and applies it to both sides, so the pairing is kept.
    Runs resample parents: per parent, ``a[i]`` = model A's Par@k unit (solved, its mean over seeds)
    with :func:`mean_statistic`, or ``(items solved, items)`` summed over seeds with
    :func:`ratio_statistic` for Sub@k (and for Par@k, with items = seeds).

    Args:
        a, b: per-unit values, array-like of the same shape ``(n, ...)``.
        statistic: maps an array of ``r`` resamples, shape ``(r, n, ...)``, to ``r`` values (vectorised);
            default :func:`mean_statistic`.
        resamples: bootstrap resamples (default 10,000).
        seed: seed of ``numpy.random.default_rng``: the same inputs and seed give the same interval.
        level: confidence level of the percentile interval, in (0, 1).

    Returns:
        The observed difference and its interval.

    Raises:
        ValueError: no units, ``a`` and ``b`` of different shapes, ``resamples`` < 1 or ``level`` outside (0, 1).
        AnalysisExtraMissing: numpy is not installed.
    """
    np = _need("numpy")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired values need the same shape, got {xa.shape} and {xb.shape}")
    if xa.ndim == 0 or xa.shape[0] == 0:
        raise ValueError("no paired units to resample")
    stat = statistic or mean_statistic
    n = xa.shape[0]
    observed = float(stat(xb[None])[0] - stat(xa[None])[0])
    rng = np.random.default_rng(seed)
    diffs = np.empty(resamples)
    chunk = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        idx = rng.integers(0, n, size=(m, n))
        diffs[start:start + m] = stat(xb[idx]) - stat(xa[idx])
    lo, hi = np.percentile(diffs, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return BootstrapCI(observed, float(lo), float(hi), level, resamples, seed, n)


# --------------------------------------------------------------------------- comparison


def _examples(ids: set[str], few: int = 3) -> str:
    shown = ", ".join(repr(i) for i in sorted(ids)[:few])
    return shown + (", ..." if len(ids) > few else "")


def compare_outcomes(
    a: Mapping[str, bool],
    b: Mapping[str, bool],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
    intersect: bool = False,
    clusters: Mapping[str, str] | None = None,
    cluster_name: str = "cluster",
    names: tuple[str, str] = ("A", "B"),
) -> PairedComparison:
    """Physics-R1's paired statistics of two outcome maps over the same items, one observation per unit.

    Items of one cluster (a parent: its seeds and sub-problems) form one unit: per unit the items each
    side solves are summed (:func:`studybench.analysis.signflip.unit_counts`). The tests
    (:func:`studybench.analysis.signflip.sign_flip_test`, the sign test on the units' directions) and
    the bootstrap (:func:`paired_bootstrap_diff` with :func:`ratio_statistic`, whole units resampled)
    see units only, so repeating seeds or splitting sub-problems cannot make a difference look more
    certain than the number of units that differ allows. Without ``clusters`` every item is a unit.

    Args:
        a, b: item id -> solved, for side A and side B.
        resamples, seed, level: of the paired bootstrap (:func:`paired_bootstrap_diff`); ``1 - level``
            is also the significance level of :meth:`PairedComparison.conclusion`.
        intersect: compare only the items both sides have (default: different item sets are an error).
        clusters: item id -> cluster (e.g. its parent): the unit of the tests and the CI; ``None``:
            every item is its own unit (items taken as independent).
        cluster_name: what a cluster is, for :attr:`PairedComparison.unit`.
        names: the two sides' names, for error messages.

    Returns:
        The comparison.

    Raises:
        ValueError: the item sets differ (without ``intersect``; the message names a few ids missing on
            each side), no common items, an item without a cluster, or a bad bootstrap setting.
        AnalysisExtraMissing: scipy, statsmodels or numpy is not installed.
    """
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    if (only_a or only_b) and not intersect:
        parts = [f"{len(s)} only in {name} ({_examples(s)})" for s, name in ((only_a, names[0]), (only_b, names[1])) if s]
        raise ValueError(f"{names[0]} and {names[1]} cover different items: {'; '.join(parts)}; "
                         "compare runs or files over the same items (--intersect / intersect=True compares the common items only)")
    ids = sorted(set(a) & set(b))
    if not ids:
        raise ValueError(f"{names[0]} and {names[1]} have no items in common")
    np = _need("numpy")
    _need("scipy.stats")
    ir = _need("statsmodels.stats.inter_rater")
    if clusters is not None:
        missing = [i for i in ids if i not in clusters]
        if missing:
            raise ValueError(f"{plural(len(missing), 'item')} {'has' if len(missing) == 1 else 'have'} no {cluster_name} ({_examples(set(missing))})")
    va = np.array([bool(a[i]) for i in ids])
    vb = np.array([bool(b[i]) for i in ids])
    table = PairedTable(both=int(np.sum(va & vb)), a_only=int(np.sum(va & ~vb)),
                        b_only=int(np.sum(~va & vb)), neither=int(np.sum(~va & ~vb)))
    counts = unit_counts(ids, a, b, clusters)
    unit = "item" if clusters is None else cluster_name
    ca = np.column_stack([counts.a, counts.n]).astype(float)
    cb = np.column_stack([counts.b, counts.n]).astype(float)
    ci = paired_bootstrap_diff(ca, cb, ratio_statistic, resamples=resamples, seed=seed, level=level)
    test = sign_flip_test(counts.differences)
    grid = [[table.both, table.a_only], [table.b_only, table.neither]]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        kappa = float(ir.cohens_kappa(np.array(grid, dtype=float)).kappa)
    n = len(ids)
    acc_a, acc_b = table.both + table.a_only, table.both + table.b_only
    return PairedComparison(
        n=n, table=table, acc_a=acc_a / n, acc_b=acc_b / n, diff=(acc_b - acc_a) / n,
        diff_ci=(ci.lo, ci.hi), ci=ci, bootstrap_unit=unit, unit=unit, units=len(counts.names),
        unit_table=unit_directions(counts.differences), p_value=test.p_value, p_a_better=test.p_a_better,
        p_b_better=test.p_b_better, kappa=None if math.isnan(kappa) else kappa + 0.0,
    )


# --------------------------------------------------------------------------- outcomes


@dataclass
class ItemOutcomes:
    """Per-item binary outcomes of one side of a comparison.

    Attributes:
        outcomes: item id -> solved.
        source: where they come from (a run directory or a file), for messages.
        level: ``"sub-problem"`` / ``"parent"`` for a run; ``None`` for a file.
        clusters: item id -> cluster, the unit of the paired tests: for a run, the item's parent uid
            at both levels (all its seeds and sub-problems are one unit); ``None`` for a file.
        notes: things the reader should know (an incomplete run, the scoring used).
        scoring: for a run, the scoring its outcomes use (``"strict"`` or ``"liberal"``); ``None`` for a file.
        health: for a run, its :func:`studybench.report.run_health`; ``None`` for a file.
    """

    outcomes: dict[str, bool]
    source: str
    level: str | None = None
    clusters: dict[str, str] | None = None
    notes: list[str] = field(default_factory=list)
    scoring: str | None = None
    health: dict[str, Any] | None = None


def _item_id(*parts: object) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def run_outcomes(run_dir: Path | str, level: str = "sub-problem", scoring: str | None = None, *,
                 allow_incomplete: bool = False) -> ItemOutcomes:
    """The per-item outcomes of a run directory, from its verdict table (:func:`studybench.store.turn_verdicts`).

    - ``level="sub-problem"``: one item per (seed, sub-problem), solved when any of its k attempts is
      correct (Sub@k's unit); id ``[seed,"parent uid","sub id"]``.
    - ``level="parent"``: one item per (seed, parent), solved when some single attempt solves every
      sub-problem (Par@k's unit); id ``[seed,"parent uid"]``.

    At both levels ``clusters`` maps every item to its parent's uid: the parent is the unit of the
    paired tests and of the bootstrap (:func:`compare_outcomes`), since seeds repeat a parent and its
    sub-problems share one problem.

    A turn without a counting verdict counts as incorrect, as in the run's report (a note says how many).

    Args:
        run_dir: the run directory.
        level: ``"sub-problem"`` or ``"parent"``.
        scoring: ``"strict"`` (rule verifier only), ``"liberal"`` (rule OR the active LLM judge) or
            ``None``: liberal when the run has an active judge, else strict (as ``studybench report``).
        allow_incomplete: accept an incomplete run (its ``health`` says why; a note too); default: refuse it.

    Returns:
        The outcomes (``level``, ``scoring``, ``health`` and ``clusters`` set).

    Raises:
        studybench.report.IncompleteRunError: an unreadable run, or an incomplete one without
            ``allow_incomplete`` (one line naming the run and why).
        ValueError: an unknown ``level`` or ``scoring``.
    """
    from studybench.report import load_run_report, require_complete

    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if scoring not in (None, "strict", "liberal"):
        raise ValueError(f"scoring must be strict or liberal, got {scoring!r}")
    _, health = load_run_report(run_dir, scoring)
    require_complete(run_dir, health, allow_incomplete)
    store = RunStore(Path(run_dir))
    man = store.read_manifest()
    judge = man.active_judge
    used = scoring or ("liberal" if judge is not None else "strict")
    rows = RunRows.read(store, llm=judge is not None)
    table = turn_verdicts(man, rows, judge["judge_id"] if judge is not None else None)
    k = man.k
    clusters: dict[str, str] = {}
    out = ItemOutcomes({}, str(run_dir), level, clusters,
                       [f"{run_dir}: {used} scoring, k={k}, seeds {', '.join(map(str, man.seeds))}"], used, health)
    i = 0
    for seed in man.seeds:
        for p in man.parents:
            per_sub: list[list[bool]] = []
            for s in p.subs:
                cells = table[i:i + k]
                i += k
                per_sub.append([t.liberal if used == "liberal" else t.strict for t in cells])
                if level == "sub-problem":
                    key = _item_id(seed, p.uid, s.id)
                    out.outcomes[key] = any(per_sub[-1])
                    clusters[key] = p.uid
            if level == "parent":
                key = _item_id(seed, p.uid)
                out.outcomes[key] = any(all(sub[a] for sub in per_sub) for a in range(k))
                clusters[key] = p.uid
    missing = sum(1 for t in table if t.missing)
    if missing:
        out.notes.append(f"{run_dir}: incomplete, {missing} of {plural(len(table), 'turn')} {'has' if missing == 1 else 'have'} no verdict and {'counts' if missing == 1 else 'count'} as incorrect")
    return out


def _outcome(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


def _item_key(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def read_outcome_file(path: Path | str, *, id_column: str = "id", outcome_column: str = "correct",
                      cluster_column: str | None = None) -> ItemOutcomes:
    """Per-item binary outcomes from a CSV, TSV or JSONL file.

    JSONL (``.jsonl``/``.ndjson``, or a file whose first character is ``{``): one object per line. CSV
    (``.csv``; ``.tsv`` tab-separated): a header row, then one row per item. The id is a non-empty
    string or an integer; the outcome is 0/1, true/false, yes/no or correct/incorrect (any case).

    Args:
        path: the file (read with :func:`studybench.files.read_user_bytes`: a regular file only).
        id_column: the item id's column / key.
        outcome_column: the outcome's column / key.
        cluster_column: a column / key naming each item's cluster (e.g. its parent, when the file holds
            several seeds or sub-problems of one problem): the unit of the paired tests; ``None``: every
            item is its own unit.

    Returns:
        The outcomes (``level`` ``None``; ``clusters`` from ``cluster_column``, else ``None``).

    Raises:
        studybench.files.InputFileError: the file cannot be read or is not UTF-8.
        ValueError: a bad row: the message names the file, the line and the field (a missing column, an
            empty id or cluster, an outcome that is not 0/1, a duplicate id, not a JSON object), or no rows at all.
    """
    p = Path(path)
    text = decode_utf8(read_user_bytes(p), p)
    jsonl = p.suffix.lower() in (".jsonl", ".ndjson") or (
        p.suffix.lower() not in (".csv", ".tsv") and text.lstrip().startswith("{"))
    rows = _jsonl_rows(p, text) if jsonl else _csv_rows(p, text, "\t" if p.suffix.lower() == ".tsv" else ",")
    out = ItemOutcomes({}, str(p), clusters=None if cluster_column is None else {})
    first: dict[str, int] = {}
    for line, row in rows:
        for col in (id_column, outcome_column, *(() if cluster_column is None else (cluster_column,))):
            if col not in row:
                raise ValueError(f"{p}: line {line}: no field {col!r} (fields: {', '.join(map(repr, row)) or 'none'})")
        key = _item_key(row[id_column])
        if key is None:
            raise ValueError(f"{p}: line {line}: field {id_column!r}: an item id must be a non-empty string or an "
                             f"integer, got {row[id_column]!r}")
        val = _outcome(row[outcome_column])
        if val is None:
            raise ValueError(f"{p}: line {line}: field {outcome_column!r}: expected 0/1 (or true/false), "
                             f"got {row[outcome_column]!r}")
        if key in first:
            raise ValueError(f"{p}: line {line}: field {id_column!r}: duplicate item id {key!r} (first on line {first[key]})")
        first[key] = line
        out.outcomes[key] = val
        if cluster_column is not None and out.clusters is not None:
            unit = _item_key(row[cluster_column])
            if unit is None:
                raise ValueError(f"{p}: line {line}: field {cluster_column!r}: a cluster must be a non-empty string or an "
                                 f"integer, got {row[cluster_column]!r}")
            out.clusters[key] = unit
    if not out.outcomes:
        raise ValueError(f"{p}: no items (expected rows with fields {id_column!r} and {outcome_column!r})")
    return out


def _jsonl_rows(p: Path, text: str) -> list[tuple[int, Mapping[str, Any]]]:
    rows: list[tuple[int, Mapping[str, Any]]] = []
    for line, raw in jsonl_lines(text):
        obj = parse_json(raw, p, line=line)  # strict: NaN, 1e999999, a 400-digit integer refused, naming the field
        if not isinstance(obj, dict):
            raise ValueError(f"{p}: line {line}: expected a JSON object, got {type(obj).__name__}")
        rows.append((line, obj))
    return rows


def _csv_rows(p: Path, text: str, delimiter: str) -> list[tuple[int, Mapping[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[tuple[int, Mapping[str, Any]]] = []
    header: Sequence[str] | None = None
    try:
        for rec in reader:
            if not any(c.strip() for c in rec):
                continue
            if header is None:
                header = [c.strip() for c in rec]
                dup = sorted({c for c in header if header.count(c) > 1})
                if dup:
                    raise ValueError(f"{p}: line {reader.line_num}: duplicate column {dup[0]!r} in the header")
                continue
            if len(rec) != len(header):
                raise ValueError(f"{p}: line {reader.line_num}: {len(rec)} fields, the header has {len(header)}")
            rows.append((reader.line_num, dict(zip(header, rec, strict=True))))
    except csv.Error as e:
        raise ValueError(f"{p}: line {reader.line_num}: not valid CSV ({e})") from None
    return rows
