"""Paired A/B comparison of two systems over the same items (Physics-R1's analysis of paired outcomes).

Two systems answer the same items; each item is solved (1) or not (0) by each. From the two outcome
vectors :func:`compare_outcomes` gives:

- the 2x2 table (``both``, ``a_only``, ``b_only``, ``neither``) and the accuracy of each side;
- the difference ``acc_b - acc_a`` with a paired bootstrap percentile CI (:func:`paired_bootstrap_diff`:
  the same resampled items for both sides; by default over items, or over clusters such as parents);
- the sign test on the discordant items (``scipy.stats.binomtest``; two-sided and each one-sided);
- McNemar's exact test (``statsmodels.stats.contingency_tables.mcnemar(exact=True)``);
- Cohen's kappa between the two sides (``statsmodels.stats.inter_rater.cohens_kappa``).

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
    """The 2x2 table of two paired binary outcome vectors.

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
        """Items exactly one side solves (what the sign and McNemar tests look at)."""
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
    """Physics-R1's paired A/B statistics over ``n`` items (proportions in [0, 1], not percent).

    Attributes:
        n: paired items.
        table: the 2x2 table.
        acc_a, acc_b: the share of items each side solves.
        diff: ``acc_b - acc_a``.
        diff_ci: the paired bootstrap percentile CI of ``diff`` (``ci.lo``, ``ci.hi``).
        ci: the bootstrap's details (level, resamples, seed, units).
        bootstrap_unit: what was resampled: ``"item"`` or the name of the clusters (e.g. ``"parent"``).
        sign_p: the sign test on the discordant items, two-sided (``binomtest(b_only, a_only + b_only)``;
            1.0 without discordant items).
        sign_p_a_better: one-sided: A solves more of the discordant items than chance.
        sign_p_b_better: one-sided: B solves more of the discordant items than chance.
        mcnemar_p: McNemar's exact test (two-sided).
        kappa: Cohen's kappa of the two sides; ``None`` when undefined (both sides one constant label).
    """

    n: int
    table: PairedTable
    acc_a: float
    acc_b: float
    diff: float
    diff_ci: tuple[float, float]
    ci: BootstrapCI
    bootstrap_unit: str
    sign_p: float
    sign_p_a_better: float
    sign_p_b_better: float
    mcnemar_p: float
    kappa: float | None

    def to_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-ready dict (the table's ``n`` and ``discordant`` included)."""
        d = asdict(self)
        d["table"].update(n=self.table.n, discordant=self.table.discordant)
        d["diff_ci"] = list(self.diff_ci)
        return d

    def conclusion(self, a: str = "A", b: str = "B") -> str:
        """One line: which side is better, by how many points, the CI and McNemar's p.

        Args:
            a, b: the names of the two sides.

        Returns:
            e.g. ``"B is better than A: +12.5 points (95% CI +3.4 to +21.0), McNemar exact p = 0.021 (significant at 5%)"``.
        """
        pts = 100.0 * self.diff
        lo, hi = (100.0 * x for x in self.diff_ci)
        if pts > 0:
            head = f"{b} is better than {a}"
        elif pts < 0:
            head = f"{b} is worse than {a}"
        else:
            head = f"{a} and {b} are equally accurate"
        sig = "significant at 5%" if self.mcnemar_p < 0.05 else "not significant at 5%"
        level = f"{100 * self.ci.level:g}%"
        return (f"{head}: {pts:+.1f} points ({level} CI {lo:+.1f} to {hi:+.1f}), "
                f"McNemar exact p = {_fmt_p(self.mcnemar_p)} ({sig})")


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

    Unit ``i`` of ``a`` and unit ``i`` of ``b`` are the same item (or cluster: a parent, a (seed, parent)
    pair); every resample draws one set of unit indices and applies it to both sides, so the pairing
    is kept. A leaderboard resamples parents: per parent, ``a[i]`` = model A's Par@k unit (0/1, or its
    mean over seeds) with :func:`mean_statistic`, or ``(sub-problems solved, sub-problems)`` with
    :func:`ratio_statistic` for Sub@k.

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
    """Physics-R1's paired statistics of two outcome maps over the same items.

    Args:
        a, b: item id -> solved, for side A and side B.
        resamples, seed, level: of the paired bootstrap (:func:`paired_bootstrap_diff`).
        intersect: compare only the items both sides have (default: different item sets are an error).
        clusters: item id -> cluster (e.g. its parent): the bootstrap then resamples clusters, keeping
            the items of a cluster together; ``None`` resamples items.
        cluster_name: what a cluster is, for :attr:`PairedComparison.bootstrap_unit`.
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
    stats = _need("scipy.stats")
    ct = _need("statsmodels.stats.contingency_tables")
    ir = _need("statsmodels.stats.inter_rater")
    va = np.array([bool(a[i]) for i in ids])
    vb = np.array([bool(b[i]) for i in ids])
    table = PairedTable(both=int(np.sum(va & vb)), a_only=int(np.sum(va & ~vb)),
                        b_only=int(np.sum(~va & vb)), neither=int(np.sum(~va & ~vb)))
    if clusters is None:
        unit = "item"
        ci = paired_bootstrap_diff(va, vb, resamples=resamples, seed=seed, level=level)
    else:
        missing = [i for i in ids if i not in clusters]
        if missing:
            raise ValueError(f"{len(missing)} items have no {cluster_name} ({_examples(set(missing))})")
        order: dict[str, int] = {}
        for i in ids:
            order.setdefault(clusters[i], len(order))
        ca, cb = np.zeros((len(order), 2)), np.zeros((len(order), 2))
        for i, x, y in zip(ids, va, vb, strict=True):
            c = order[clusters[i]]
            ca[c] += (x, 1)
            cb[c] += (y, 1)
        unit = cluster_name
        ci = paired_bootstrap_diff(ca, cb, ratio_statistic, resamples=resamples, seed=seed, level=level)
    d = table.discordant
    if d:
        sign_p = float(stats.binomtest(table.b_only, d, 0.5).pvalue)
        p_a = float(stats.binomtest(table.a_only, d, 0.5, alternative="greater").pvalue)
        p_b = float(stats.binomtest(table.b_only, d, 0.5, alternative="greater").pvalue)
    else:
        sign_p = p_a = p_b = 1.0
    grid = [[table.both, table.a_only], [table.b_only, table.neither]]
    mcnemar_p = float(ct.mcnemar(grid, exact=True).pvalue)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        kappa = float(ir.cohens_kappa(np.array(grid, dtype=float)).kappa)
    n = len(ids)
    acc_a, acc_b = table.both + table.a_only, table.both + table.b_only
    return PairedComparison(
        n=n, table=table, acc_a=acc_a / n, acc_b=acc_b / n, diff=(acc_b - acc_a) / n,
        diff_ci=(ci.lo, ci.hi), ci=ci, bootstrap_unit=unit, sign_p=min(sign_p, 1.0),
        sign_p_a_better=p_a, sign_p_b_better=p_b, mcnemar_p=min(mcnemar_p, 1.0),
        kappa=None if math.isnan(kappa) else kappa + 0.0,
    )


# --------------------------------------------------------------------------- outcomes


@dataclass
class ItemOutcomes:
    """Per-item binary outcomes of one side of a comparison.

    Attributes:
        outcomes: item id -> solved.
        source: where they come from (a run directory or a file), for messages.
        level: ``"sub-problem"`` / ``"parent"`` for a run; ``None`` for a file.
        clusters: item id -> cluster (for a run at sub-problem level: ``[seed, parent]``), or ``None``.
        notes: things the reader should know (an incomplete run, the scoring used).
        scoring: for a run, the scoring its outcomes use (``"strict"`` or ``"liberal"``); ``None`` for a file.
    """

    outcomes: dict[str, bool]
    source: str
    level: str | None = None
    clusters: dict[str, str] | None = None
    notes: list[str] = field(default_factory=list)
    scoring: str | None = None


def _item_id(*parts: object) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def run_outcomes(run_dir: Path | str, level: str = "sub-problem", scoring: str | None = None) -> ItemOutcomes:
    """The per-item outcomes of a run directory, from its verdict table (:func:`studybench.store.turn_verdicts`).

    - ``level="sub-problem"``: one item per (seed, sub-problem), solved when any of its k attempts is
      correct (Sub@k's unit); id ``[seed,"parent uid","sub id"]``; clustered by ``[seed,"parent uid"]``.
    - ``level="parent"``: one item per (seed, parent), solved when some single attempt solves every
      sub-problem (Par@k's unit); id ``[seed,"parent uid"]``.

    A turn without a counting verdict counts as incorrect, as in the run's report (a note says how many).

    Args:
        run_dir: the run directory.
        level: ``"sub-problem"`` or ``"parent"``.
        scoring: ``"strict"`` (rule verifier only), ``"liberal"`` (rule OR the active LLM judge) or
            ``None``: liberal when the run has an active judge, else strict (as ``studybench report``).

    Returns:
        The outcomes (``level``, ``scoring`` and, at sub-problem level, ``clusters`` set).

    Raises:
        FileNotFoundError: not a run directory.
        ValueError: an invalid manifest, an unknown ``level`` or ``scoring``.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if scoring not in (None, "strict", "liberal"):
        raise ValueError(f"scoring must be strict or liberal, got {scoring!r}")
    store = RunStore(Path(run_dir))
    man = store.read_manifest()
    judge = man.active_judge
    used = scoring or ("liberal" if judge is not None else "strict")
    rows = RunRows.read(store, llm=judge is not None)
    table = turn_verdicts(man, rows, judge["judge_id"] if judge is not None else None)
    k = man.k
    out = ItemOutcomes({}, str(run_dir), level, {} if level == "sub-problem" else None,
                       [f"{run_dir}: {used} scoring, k={k}, seeds {', '.join(map(str, man.seeds))}"], used)
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
                    assert out.clusters is not None
                    out.clusters[key] = _item_id(seed, p.uid)
            if level == "parent":
                out.outcomes[_item_id(seed, p.uid)] = any(all(sub[a] for sub in per_sub) for a in range(k))
    missing = sum(1 for t in table if t.missing)
    if missing:
        out.notes.append(f"{run_dir}: incomplete, {missing} of {len(table)} turns have no verdict and count as incorrect")
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


def read_outcome_file(path: Path | str, *, id_column: str = "id", outcome_column: str = "correct") -> ItemOutcomes:
    """Per-item binary outcomes from a CSV, TSV or JSONL file.

    JSONL (``.jsonl``/``.ndjson``, or a file whose first character is ``{``): one object per line. CSV
    (``.csv``; ``.tsv`` tab-separated): a header row, then one row per item. The id is a non-empty
    string or an integer; the outcome is 0/1, true/false, yes/no or correct/incorrect (any case).

    Args:
        path: the file (read with :func:`studybench.files.read_user_bytes`: a regular file only).
        id_column: the item id's column / key.
        outcome_column: the outcome's column / key.

    Returns:
        The outcomes (``level`` and ``clusters`` ``None``).

    Raises:
        studybench.files.InputFileError: the file cannot be read or is not UTF-8.
        ValueError: a bad row: the message names the file, the line and the field (a missing column, an
            empty id, an outcome that is not 0/1, a duplicate id, not a JSON object), or no rows at all.
    """
    p = Path(path)
    text = decode_utf8(read_user_bytes(p), p)
    jsonl = p.suffix.lower() in (".jsonl", ".ndjson") or (
        p.suffix.lower() not in (".csv", ".tsv") and text.lstrip().startswith("{"))
    rows = _jsonl_rows(p, text) if jsonl else _csv_rows(p, text, "\t" if p.suffix.lower() == ".tsv" else ",")
    out = ItemOutcomes({}, str(p))
    first: dict[str, int] = {}
    for line, row in rows:
        for col in (id_column, outcome_column):
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
