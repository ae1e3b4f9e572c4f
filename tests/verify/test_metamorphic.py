"""The metamorphic pair generator (issue 25, item 2): labels right by construction, and the verifier's floors.

Two kinds of test:

* **The generator's labels are right.** On a deterministic sample of the real golds (both test sets,
  the training layers, UGPhysics), every pair carrying SymPy forms is re-checked here with an
  evaluation of our own (other random points, ``evalf(subs=...)``, equations solved with
  ``sympy.solve``): equivalent forms agree, near misses differ. Every number pair is re-read from
  the printed box and converted with pint. The generator is seeded and deterministic, never raises
  on a gold it cannot read, and keeps its cap.
* **Floors per transformation.** The same sample is judged by the rule verifier and the recall of
  each transformation (and family) must stay at or above today's measured value minus a margin;
  near misses the verifier rejects today must stay rejected (precision 1.0). Raise a floor when the
  verifier improves; never lower one.

The full table (every gold) is ``python bench/verify_metamorphic.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from random import Random
from typing import Any

import pytest
import sympy as sp

from studybench.answers import extract_answers, split_top_level
from studybench.records import AnswerType, gold_boxes, parse_type_sequence
from studybench.testing.pairgen import (
    TRANSFORMATIONS,
    GenStats,
    Gold,
    Pair,
    generate_pairs,
    judge_pairs,
    load_golds,
    score,
    subsample,
)
from studybench.testing.pairgen.golds import default_ugphysics_dir
from studybench.testing.pairgen.numbers import read_number
from studybench.testing.pairgen.sym import clearly_differ, equation_implies, read_box, same_values
from studybench.testing.pairgen.units import convert, parse_unit
from studybench.verify import Verifier

SAMPLE = 60
SEED = 0
COVER = 2


@pytest.fixture(scope="module")
def all_golds(data_dir: Path) -> list[Gold]:
    return load_golds(data_dir).golds


@pytest.fixture(scope="module")
def sample_pairs(all_golds: list[Gold]) -> tuple[list[Pair], GenStats]:
    st = GenStats()
    pairs = generate_pairs(subsample(all_golds, SAMPLE, SEED, cover=COVER), seed=SEED, stats=st)
    return pairs, st


# ----------------------------------------------------------------------------------- independent checks

def _points(symbols: list[Any], rng: Random, n: int = 5, lo: int = 55, hi: int = 240) -> Iterator[dict[Any, Any]]:
    for _ in range(n):  # distinct values: x = y would be a degenerate point of cos x - cos y
        yield {s: sp.Rational(v, 100) for s, v in zip(symbols, rng.sample(range(lo, hi), len(symbols)), strict=True)}


def _num(expr: Any, point: dict[Any, Any]) -> complex | None:
    try:
        v = complex(expr.evalf(subs=point, n=30))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return v if math.isfinite(v.real) and math.isfinite(v.imag) else None


def _rel(a: complex, b: complex) -> float:
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def _expr_verdict(gold: Any, new: Any, symbols: list[Any], rng: Random) -> tuple[int, int]:
    """(points where they agree to 1e-8, points where they differ by over 1e-3)."""
    same = far = 0
    for p in _points(symbols, rng):
        a, b = _num(gold, p), _num(new, p)
        if a is None or b is None:
            continue
        same += _rel(a, b) <= 1e-8
        far += _rel(a, b) > 1e-3
    return same, far


def _eq_verdict(gold: tuple[Any, Any], new: tuple[Any, Any], rng: Random) -> tuple[int, int]:
    """Solve the gold with sympy.solve for a symbol it is linear in; (points where the new equation holds, fails)."""
    res = gold[0] - gold[1]
    for s in sorted(res.free_symbols, key=lambda x: x.name):
        if sp.diff(res, s).has(s):
            continue
        plain = {x: sp.Symbol(x.name) for x in res.free_symbols}  # no sign assumption: 2a + b = 0 has a solution
        sols = [x.xreplace({v: k for k, v in plain.items()}) for x in sp.solve(res.xreplace(plain), plain[s])]
        if len(sols) != 1:
            continue
        others = sorted((res.free_symbols | new[0].free_symbols | new[1].free_symbols) - {s}, key=lambda x: x.name)
        holds = fails = 0
        # a root of 1 - b^2 is real for b < 1 only: points below 1 as well
        for p in [*_points(others, rng, 6), *_points(others, rng, 6, 5, 95)]:
            v = _num(sols[0], p)
            if v is None or abs(v.imag) > 1e-12:
                continue
            q = {**p, s: sp.Float(v.real, 30)}
            a, b = _num(new[0], q), _num(new[1], q)
            terms = [_num(t, q) for t in (*sp.Add.make_args(new[0]), *sp.Add.make_args(new[1]))]
            if a is None or b is None or any(t is None for t in terms):
                continue
            scale = max(abs(t) for t in terms if t is not None) or 1.0
            holds += abs(a - b) <= 1e-8 * scale
            fails += abs(a - b) > 1e-3 * scale
        return holds, fails
    pytest.fail(f"no symbol to solve {gold} for")


def _value_in_gold_unit(p: Pair) -> tuple[float, float] | None:
    """(gold value, the predicted box's value re-read and converted to the gold's unit), or None."""
    g = read_number(p.gold_box)
    text = p.pred_box
    for w in ("\\approx\\,", "\\approx", "≈", "\\text{about}\\ ", "\\text{about } ", "\\text{approximately } "):
        text = text.replace(w, "")
    if p.transformation == "words:count-noun":
        text = text.split("\\text{ ")[0].split("\\ \\text{")[0].split("~\\text{")[0]
    n = read_number(text.strip())
    if g is None or n is None:
        return None
    src, dst = n.unit, g.unit
    if dst is None and not g.unit_text and src is not None and p.gold_unit:
        # a unitless gold with a stated unit: the unit hint of its slot
        hints = split_top_level(p.gold_unit)
        hint = hints[p.slot].strip() if len(hints) > p.slot else None
        dst = parse_unit(hint) if hint else None
    if src is not None and dst is not None:
        v = convert(n.value, src, dst)
        return (g.value, v) if v is not None else None
    return g.value, n.value


# ----------------------------------------------------------------------------------- label tests

def test_every_source_of_golds_is_read(data_dir: Path, all_golds: list[Gold]) -> None:
    sources = {g.source for g in all_golds}
    assert {"application", "transfer", "train/single"} <= sources
    assert sum(g.source == "application" for g in all_golds) >= 100
    assert sum(g.source == "transfer" for g in all_golds) >= 250
    if default_ugphysics_dir(data_dir) is not None:
        assert sum(g.source == "ugphysics" for g in all_golds) >= 800  # 991 read, identical golds ("B", "No") once


def test_sample_covers_every_family(sample_pairs: tuple[list[Pair], GenStats]) -> None:
    pairs, st = sample_pairs
    families = {p.family for p in pairs}
    assert {"symbolic", "equation", "print", "number", "unit", "words", "choice", "near-miss", "combo"} <= families
    assert not st.failed or sum(st.failed.values()) <= len(pairs) // 20, st.failed


def test_symbolic_forms_agree_and_near_misses_differ_at_random_points(sample_pairs: tuple[list[Pair], GenStats]) -> None:
    pairs, _ = sample_pairs
    rng = Random(12345)
    checked = {True: 0, False: 0}
    for p in pairs:
        if not p.check or p.check[0] not in ("expr", "eq"):
            continue
        if p.check[0] == "expr":
            _, gold, new, syms = p.check
            same, far = _expr_verdict(gold, new, syms, rng)
        else:
            same, far = _eq_verdict(p.check[1], p.check[2], rng)
        if p.label:
            assert far == 0 and same >= 3, (p.transformation, p.gold_box, p.pred_box, same, far)
        else:
            assert far >= 1, (p.transformation, p.gold_box, p.pred_box, same, far)
        checked[p.label] += 1
    assert checked[True] >= 60 and checked[False] >= 30, checked


def test_number_and_unit_pairs_reread_to_the_right_value(sample_pairs: tuple[list[Pair], GenStats]) -> None:
    pairs, _ = sample_pairs
    n = 0
    for p in pairs:
        if p.family not in ("number", "unit", "words", "near-miss") or not p.check or p.check[0] != "value":
            continue
        got = _value_in_gold_unit(p)
        if got is None:
            continue  # a fraction or a rewritten exact number: checked by its SymPy form elsewhere
        g, v = got
        if p.label:
            # a careful value that rounds to a 1-2 significant-figure gold lies up to the 5% rounding cap away
            bound = 0.05 if p.transformation == "num:rounding" else 0.005
            assert abs(v - g) <= bound * abs(g) + 1e-300, (p.transformation, p.gold_box, p.pred_box, g, v)
        else:
            assert abs(v - g) >= 0.025 * abs(g), (p.transformation, p.gold_box, p.pred_box, g, v)
        n += 1
    assert n >= 40, n


def test_written_variants_read_back_to_the_gold(sample_pairs: tuple[list[Pair], GenStats]) -> None:
    """Print-style pairs that both sides can be read as SymPy forms agree with the gold at random points."""
    pairs, _ = sample_pairs
    rng = Random(7)
    n = 0
    for p in pairs:
        if p.family != "print":
            continue
        a, b = read_box(p.gold_box), read_box(p.pred_box)
        if a is None or b is None or a.lhs_text is not None or b.lhs_text is not None:
            continue
        if {s.name for s in a.rhs.free_symbols} != {s.name for s in b.rhs.free_symbols}:
            continue  # separate alias tables number the symbols in reading order
        same, far = _expr_verdict(a.rhs, b.rhs.xreplace({s: sp.Symbol(s.name, positive=True) for s in b.rhs.free_symbols}),
                                  sorted(a.rhs.free_symbols, key=lambda s: s.name), rng)
        if far == 0:
            n += 1
    assert n >= 10, n


def test_each_response_extracts_to_the_predicted_boxes(sample_pairs: tuple[list[Pair], GenStats]) -> None:
    pairs, _ = sample_pairs
    for p in pairs:
        at = AnswerType(p.answer_type)
        gold_n = 1 if at is AnswerType.ALT else len(gold_boxes(p.gold, at, parse_type_sequence(p.type_sequence)))
        got = extract_answers(p.response, m=gold_n)
        assert p.pred_box.strip() in [g.strip() for g in got], (p.response, got)
        assert "Final Answer:" in p.response


def test_generator_is_deterministic_and_keeps_its_cap(all_golds: list[Gold]) -> None:
    golds = subsample(all_golds, 8, seed=5)
    a = [p.to_json() for p in generate_pairs(golds, seed=3, cap=2)]
    b = [p.to_json() for p in generate_pairs(golds, seed=3, cap=2)]
    assert a == b
    cheap = ["print:spacing", "words:about", "miss:coeff", "num:more-digits", "eq:scale"]
    c = [p.to_json() for p in generate_pairs(golds, seed=4, cap=2, transformations=cheap)]
    assert [r for r in a if r["transformation"] in cheap] != c
    per: dict[tuple[str, str], int] = {}
    for r in a:
        per[(r["gold_id"], r["transformation"])] = per.get((r["gold_id"], r["transformation"]), 0) + 1
    assert max(per.values()) == 2
    one = generate_pairs(golds, seed=3, cap=1, transformations=cheap)
    assert len({(p.gold_id, p.transformation) for p in one}) == len(one)
    json.dumps(a)  # every field is plain JSON


@pytest.mark.parametrize("box", [
    "", "{", "\\frac{1}{", "x^{" * 60, "9^{9^{9^{9}}}", "1" * 500, "__import__('os').system('true')",
    "\\begin{cases} a \\\\ b \\end{cases}", "\\zeta(", "a = b = c", "\u0000\ud800", "\\left( x", "3 \\mathrm{qq}",
    "10^{99999}", "\\int_0^\\infty e^{-x} dx", "x < y = z",
])
def test_generator_never_raises_on_an_unusable_gold(box: str) -> None:
    golds = [Gold(gold_id=f"hostile:{t}", source="hostile", answer=f"\\boxed{{{box}}}", answer_type=t, type_sequence="",
                  boxes=(box,), units=(None,)) for t in ("NV", "EX", "EQ", "IN", "TF", "MC", "QL")]
    st = GenStats()
    pairs = generate_pairs(golds, stats=st)
    assert st.golds == len(golds)
    for p in pairs:
        assert p.pred_box != box or p.transformation == "id:gold"


# ----------------------------------------------------------------------------------- worked examples

def _one(name: str, box: str, at: str = "NV", unit: str | None = None, seed: int = 0) -> list[Pair]:
    g = Gold(gold_id="example", source="example", answer=f"\\boxed{{{box}}}", answer_type=at, type_sequence="",
             boxes=(box,), units=(unit,), gold_unit=unit)
    return generate_pairs([g], seed=seed, cap=3, transformations=[name])


def test_tolerance_near_miss_is_three_times_the_documented_tolerance() -> None:
    (p,) = _one("miss:tolerance", "1.0\\,\\mathrm{kg}")
    v = read_number(p.pred_box)
    # 1.0 rounds 0.95..1.05 to itself (half a unit, 5%: the rounding cap) x 3
    assert v is not None and abs(abs(v.value - 1.0) - 0.15) < 1e-9
    (p,) = _one("miss:tolerance", "250")
    v = read_number(p.pred_box)
    assert v is not None and abs(abs(v.value - 250) / 250 - 0.03) < 1e-9  # a plain integer keeps 1%
    (p,) = _one("miss:tolerance", r"250\,\mathrm{m}")
    v = read_number(p.pred_box)
    # with a unit the digits count; the trailing zero is ambiguous: 2% x 3
    assert v is not None and abs(abs(v.value - 250) / 250 - 0.06) < 1e-9
    (p,) = _one("miss:tolerance", r"11\,\mathrm{mm}")
    v = read_number(p.pred_box)
    assert v is not None and abs(abs(v.value - 11) / 11 - 3 * 0.5 / 11) < 1e-9  # 11.28 rounds to 11: h = 0.5 (4.5%) x 3


def test_unit_prefix_rescales_and_the_near_miss_does_not() -> None:
    (ok,) = _one("unit:prefix", "2.5\\,\\mathrm{km}")
    (bad,) = _one("miss:unit-prefix", "2.5\\,\\mathrm{km}")
    for p, want in ((ok, 2500.0), (bad, None)):
        n = read_number(p.pred_box)
        assert n is not None and n.unit is not None
        metres = convert(n.value, n.unit, [f for f in parse_unit("\\mathrm{m}") or []])
        if want is None:
            assert metres is not None and abs(metres - 2500.0) > 100
        else:
            assert metres is not None and abs(metres - want) < 1e-6


def test_squaring_only_a_root() -> None:
    assert [p.pred_box for p in _one("eq:square", "v = \\sqrt{2 g h}", "EQ")] == ["v^{2} = 2 g h"]
    assert _one("eq:square", "v = a t", "EQ") == []  # v = -a t would satisfy v^2 = a^2 t^2: not squared


def test_fractional_powers_print_as_roots_taken_first() -> None:
    (p,) = _one("sym:root", "T = T_0 \\left(1 - \\beta^2\\right)^{-3/2}", "EQ")
    assert "\\left(\\sqrt{1 - \\beta^{2}}\\right)^{3}" in p.pred_box


def test_the_label_checks_are_not_vacuous() -> None:
    """The generator's checks and this file's independent ones both reject a wrong label."""
    x, y, g, h, v = sp.symbols("x y g h v", positive=True)
    rng = Random(1)
    assert same_values(x**2 + 2 * x * y + y**2, (x + y) ** 2, [x, y], rng) is True
    assert same_values(x + 1, x + 2, [x], rng) is False
    assert clearly_differ(x, 2 * x, [x], rng) and not clearly_differ(x, x * (1 + 1e-4), [x], rng)
    assert equation_implies((v, sp.sqrt(2 * g * h)), (v**2, 2 * g * h), rng) is True
    assert equation_implies((v, x + y), (v, x - y), rng) is False
    same, far = _expr_verdict(x + y, x - y, [x, y], Random(2))
    assert far >= 3 and same == 0
    holds, fails = _eq_verdict((v, x + y), (v, x * y), Random(3))
    assert fails >= 3


def test_a_swap_of_symmetric_symbols_is_no_near_miss() -> None:
    for seed in range(8):
        assert _one("miss:swap-vars", "a b", "EX", seed=seed) == []  # a b = b a: discarded, never labelled wrong
    assert any(_one("miss:swap-vars", "\\frac{a}{b}", "EX", seed=s) for s in range(4))


@pytest.mark.parametrize("box", ["3\\,\\mathrm{J}", "\\vec F = m a", "-8\\chi^{2}/3r", "e^{A} B e^{-A} = B"])
def test_boxes_without_one_reading_are_not_rewritten(box: str) -> None:
    assert read_box(box) is None


def test_count_noun_only_after_a_unitless_value() -> None:
    assert [p.transformation for p in _one("words:count-noun", "12")] == ["words:count-noun"]
    assert _one("words:count-noun", "12\\,\\mathrm{m}") == []
    assert _one("words:count-noun", "12", unit="\\mathrm{m}") == []


# ----------------------------------------------------------------------------------- floors

FLOORS: dict[str, float] = {
    "sym:sympy": 0.94, "sym:expand": 0.66, "sym:factor": 0.80, "sym:together": 0.75, "sym:cancel": 0.75,
    "sym:exp": 0.00, "sym:root": 0.00, "sym:power": 0.75, "sym:cdot": 0.92, "sym:times": 0.92,
    "sym:decimal-coeff": 0.75, "ex:drop-lhs": 0.87, "sym:slash": 0.85, "num:decimal": 0.50, "eq:swap": 0.91,
    "eq:scale": 0.90, "eq:move": 0.90, "eq:square": 0.50, "eq:solve": 0.87, "eq:clear": 0.80, "num:sci": 0.83,
    "num:e": 0.83, "num:plain": 0.50, "num:thousands": 0.00, "num:more-digits": 0.90,
    "num:trailing-zeros": 0.94, "num:fraction": 0.66, "unit:prefix": 0.87, "unit:equivalent": 0.80,
    "unit:angle": 0.66, "unit:style": 0.91, "words:approx": 0.92, "words:about": 0.92,
    "words:count-noun": 0.75, "num:rounding": 0.66, "id:gold": 1.00, "print:dfrac": 0.95, "print:slash": 0.91, "print:mul": 0.83,
    "print:left-right": 0.93, "print:spacing": 0.95, "print:braces": 0.95, "print:exp": 0.75,
    "tf:sentence": 0.33, "mc:sentence": 0.66, "ql:case": 0.80, "ql:text": 0.80, "in:flip": 0.80,
    "combo:equivalent": 0.95, "[choice]": 0.87, "[combo]": 0.95, "[equation]": 0.95, "[identity]": 1.00,
    "[interval]": 0.80, "[number]": 0.95, "[print]": 0.94, "[symbolic]": 0.95, "[unit]": 0.95,
    "[words]": 0.95, "all": 0.94,
}
"""Recall floors per transformation and family (``[family]``) on the sample: the recall measured with
the verifier of this commit minus ``max(0.05, 1/pairs)`` (one flipped verdict), rounded down; the
gold against itself stays at 1.0. Measured: 657 pairs, recall 0.947 overall (words 0.50, combo
0.815, equations 0.939, print 0.993), no false accept. Raised with issue 25's numbers work (684 pairs,
recall 0.989: words 1.000, numbers 1.000, combo 0.926) and its reading work (equations 1.000 with eq:solve
and eq:clear at 1.000; both: 693 pairs, recall 0.998, combo 1.000). Raise a floor when the verifier improves; never lower one."""
NEAR_MISS_CLEAN: frozenset[str] = frozenset({
    "miss:coeff", "miss:exponent", "miss:sign", "miss:swap-vars", "miss:drop-term", "miss:tolerance",
    "miss:unit-prefix", "miss:rounding", "miss:tf", "miss:mc", "miss:in-direction", "miss:in-bracket", "combo:miss",
})
"""Near-miss transformations with no false accept on the sample today (all of them): precision 1.0 stays."""


@pytest.fixture(scope="module")
def sample_verdicts(sample_pairs: tuple[list[Pair], GenStats], verifier: Verifier) -> list[Any]:
    pairs, _ = sample_pairs
    return judge_pairs(pairs, verifier)


def test_recall_floors_per_transformation(sample_pairs: tuple[list[Pair], GenStats], sample_verdicts: list[Any]) -> None:
    pairs, _ = sample_pairs
    rows = {r.name: r for r in score(pairs, sample_verdicts)}
    low = {n: (rows[n].recall, f) for n, f in FLOORS.items() if n in rows and (rows[n].recall or 0.0) < f}
    assert not low, f"recall below its floor (measured, floor): {low}"
    missing = [n for n in FLOORS if n not in rows]
    assert not missing, f"no pair in the sample for: {missing}"


def test_near_misses_stay_rejected(sample_pairs: tuple[list[Pair], GenStats], sample_verdicts: list[Any]) -> None:
    pairs, _ = sample_pairs
    rows = {r.name: r for r in score(pairs, sample_verdicts)}
    accepted = {n: rows[n].false_accepts for n in NEAR_MISS_CLEAN if n in rows and rows[n].false_accepts}
    assert not accepted, f"near misses accepted: {accepted}"
    assert set(NEAR_MISS_CLEAN) <= {n for n, t in TRANSFORMATIONS.items() if not t.label}
    assert all(n in rows for n in NEAR_MISS_CLEAN), [n for n in NEAR_MISS_CLEAN if n not in rows]
    assert rows["all"].precision == 1.0
