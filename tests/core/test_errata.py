"""The errata shipped with the package: each corrected value re-derived from the problem's own numbers.

Every erratum has a recomputation here (a test fails when one is added without its derivation); each
checks that the corrected gold accepts the re-derived value and that the official gold rejects it,
with the rule verifier where it can compare (numbers, symbolic expressions) and with SymPy
component algebra where it cannot (vector cross products).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import sympy as sp
from _support import REPO

from studybench.datasets import load_dataset
from studybench.errata import (
    ERRATA_KINDS,
    ErrataError,
    Erratum,
    errata_tag,
    load_errata,
    parse_errata,
    plan_errata,
)
from studybench.records import AnswerType, Parent
from studybench.verify import Verifier

ERRATA = {e.id: e for e in load_errata()}


def _accepts(v: Verifier, gold: str, answer: str, atype: str, ts: list[str] | None = None) -> bool:
    return bool(v.verify_response(gold, f"Final Answer: {answer}", AnswerType(atype), [AnswerType(t) for t in ts or []]).correct)


def _check(v: Verifier, e: Erratum, answer: str, atype: str, ts: list[str] | None = None, official_ts: list[str] | None = None,
           official_type: str | None = None) -> None:
    """The corrected gold accepts the careful answer; the official gold rejects it."""
    assert e.corrected is not None
    assert _accepts(v, e.corrected, answer, e.answer_type or atype, ts), (e.id, answer)
    assert not _accepts(v, e.official, answer, official_type or atype, official_ts), (e.id, answer)


# --------------------------------------------------------------------------- recomputations, one per erratum


def carroll(v: Verifier, e: Erratum) -> None:
    # a B star with M_V = -1.1 just behind a nebula 700 pc away and 20 pc thick, a_V = 1.1 mag
    m_v = -1.1 + 5 * math.log10(700 + 20) - 5 + 1.1
    assert abs(m_v - 9.29) < 0.01
    assert abs(-1.1 + 5 * math.log10(700) - 5 + 1.1 - 9.2) < 0.03  # the solution's 9.2 already holds a_V
    _check(v, e, f"\\boxed{{{m_v:.2f}}}", "NV")


def ipho_1972_q3(v: Verifier, e: Erratum) -> None:
    h, H, width, d, eps0, epsr, rho, g, E0 = sp.symbols("h H l d varepsilon_0 varepsilon_r rho g E_0", positive=True)
    q0 = eps0 * H * width * E0  # the initial charge: U0 = E0 d, C0 = eps0 H l / d
    c = eps0 * width * (H + (epsr - 1) * h) / d
    energy = q0**2 / (2 * c) + rho * g * width * d * h**2 / 2
    force = sp.diff(energy, h)
    # equilibrium for h << H: the linear term of dU/dh in h balanced at first order
    linear = sp.series(force, h, 0, 2).removeO()
    h_eq = sp.solve(sp.Eq(linear, 0), h)[0]
    h_eq_small = sp.limit(h_eq, H, sp.oo)
    assert sp.simplify(h_eq_small - eps0 * (epsr - 1) * E0**2 / (2 * rho * g)) == 0
    # the solution's W0 = W1 + W2 is the turning point, twice as high
    turning = sp.solve(sp.Eq(sp.series(energy - energy.subs(h, 0), h, 0, 3).removeO(), 0), h)
    assert any(sp.simplify(t - 2 * h_eq) == 0 for t in turning)
    _check(v, e, f"\\boxed{{h = {sp.latex(h_eq_small)}}}", "EX")


def _vec(*xs: sp.Expr) -> sp.Matrix:
    return sp.Matrix([*xs, 0])


Z = sp.Matrix([0, 0, 1])


def _apho_symbols() -> tuple[sp.Symbol, ...]:
    return sp.symbols("t alpha Omega0 Rx Ry vx vy", real=True)


def _apho_corrected_trajectory() -> tuple[sp.Matrix, tuple[sp.Symbol, ...]]:
    t, a, w, rx, ry, vx, vy = syms = _apho_symbols()
    r0, v0 = _vec(rx, ry), _vec(vx, vy)
    rate = a * w
    return r0 + v0 / rate * sp.sin(rate * t) + Z.cross(v0) / rate * (1 - sp.cos(rate * t)), syms


def apho_a3(v: Verifier, e: Erratum) -> None:
    # A.2: dv/dt = alpha Omega z x v; with v = dR/dt it integrates to v - v0 = alpha Omega z x (R - R0)
    traj, (t, a, w, rx, ry, vx, vy) = _apho_corrected_trajectory()
    vel = traj.diff(t)
    assert sp.simplify(vel.diff(t) - a * w * Z.cross(vel)) == sp.zeros(3, 1)  # A.2's law of motion
    r0, v0 = _vec(rx, ry), _vec(vx, vy)
    corrected = v0 + a * w * Z.cross(traj - r0)
    official = v0 + w * Z.cross(traj - r0)
    assert sp.simplify(vel - corrected) == sp.zeros(3, 1)
    assert sp.simplify((vel - official).subs({a: sp.Rational(2, 7), w: 1, rx: 1, ry: 0, vx: 0, vy: 1, t: 1})) != sp.zeros(3, 1)
    assert e.corrected is not None and "\\frac{I}{I+mr^2}" in e.corrected  # alpha, in the quantities A.3 allows
    assert _accepts(v, e.corrected, e.corrected, "EQ") and not _accepts(v, e.official, e.corrected, "EQ")


def apho_a4(v: Verifier, e: Erratum) -> None:
    traj, (t, a, w, rx, ry, vx, vy) = _apho_corrected_trajectory()
    r0, v0 = _vec(rx, ry), _vec(vx, vy)
    assert sp.simplify(traj.subs(t, 0) - r0) == sp.zeros(3, 1)
    assert sp.simplify(traj.diff(t).subs(t, 0) - v0) == sp.zeros(3, 1)
    centre = r0 + Z.cross(v0) / (a * w)
    radius2 = sp.simplify(((traj - centre).T * (traj - centre))[0])
    assert sp.simplify(radius2 - (vx**2 + vy**2) / (a * w) ** 2) == 0  # a circle about R0 + z x v0/(alpha Omega0)
    official = r0 * sp.cos(w * t) + Z.cross(r0) * sp.sin(w * t)
    assert sp.simplify(official.diff(t).subs(t, 0) - v0) != sp.zeros(3, 1)  # misses the initial velocity
    assert _accepts(v, e.corrected or "", e.corrected or "", "EX") and not _accepts(v, e.official, e.corrected or "", "EX")


def apho_a5(v: Verifier, e: Erratum) -> None:
    from fractions import Fraction

    alpha = Fraction(2, 5) / (Fraction(2, 5) + 1)  # I = 2mr^2/5
    assert alpha == Fraction(2, 7)
    # ball period 2 pi/(alpha Omega0), table period 2 pi/Omega0: both whole turns first at
    # t = 2 pi n / (alpha Omega0) = 2 pi m / Omega0 -> n / alpha = m
    n = next(n for n in range(1, 100) if (n / alpha).denominator == 1)
    t_return = 2 * n / alpha  # in units of pi / Omega0
    assert t_return == 14
    # numerically: the ball (a circle of radius R0 through R0) and the spot coincide at 14 pi, not at 7 pi
    for psi in (0.4, 1.3, 2.2):
        def gap(tt: float, psi: float = psi) -> float:
            cx, cy = 1 + math.cos(psi), math.sin(psi)
            bx, by = cx - math.cos(psi + 2 * tt / 7), cy - math.sin(psi + 2 * tt / 7)
            return math.hypot(bx - math.cos(tt), by - math.sin(tt))

        assert gap(14 * math.pi) < 1e-9 and gap(7 * math.pi) > 1.0
    _check(v, e, "\\boxed{\\frac{14\\pi}{\\Omega_0}}", "NV")


def _t5_question(data_dir: Path, sub: str) -> str:
    ds = load_dataset(data_dir / "transfer.json", name="transfer")
    p = next(p for p in ds.parents if p.uid == "IOAA/2024/T5")
    return next(s.problem for s in p.subs() if s.problem_id == sub)


def ioaa_2024_t5a(v: Verifier, e: Erratum, data_dir: Path) -> None:
    q = _t5_question(data_dir, "T5(a)")
    tail = q.split("wavelength of", 1)[1]
    assert not re.search(r"\d", tail), tail  # no wavelength is given: z cannot be found
    assert e.corrected is None and e.kind == "unanswerable"


def ioaa_2024_t5b(v: Verifier, e: Erratum, data_dir: Path) -> None:
    q = _t5_question(data_dir, "T5(b)")
    assert "previous part" in q  # its redshift is T5(a)'s, which the statement does not determine
    assert e.corrected is None and ERRATA["ioaa-2024-t5a"].corrected is None


def ioaa_2008_t18a(v: Verifier, e: Erratum) -> None:
    t_r = 3e5  # years: c t_r in light-years
    c_t = t_r
    assert e.answer_type == "ALT" and e.type_sequence == "NV,NV"
    for ly in (c_t, 2 * c_t):  # the reference solution's c t_r, and the radiation era's particle horizon 2 c t_r
        assert _accepts(v, e.corrected or "", f"\\boxed{{{ly:.3g}\\,\\mathrm{{ly}}}}", "ALT", ["NV", "NV"])
        assert not _accepts(v, e.official, f"\\boxed{{{ly:.3g}\\,\\mathrm{{ly}}}}", "NV")
    theta = 3e5 * 3000 / (1.5e10 * 3)  # what the official gold answers: an angle, 0.02 rad
    assert abs(math.degrees(theta) - 1.146) < 1e-3
    assert not _accepts(v, e.corrected or "", "\\boxed{1.14^\\circ}", "ALT", ["NV", "NV"])


def eisberg_e16_10(v: Verifier, e: Erratum) -> None:
    n = 1e-1 / (54 * 1.66e-27)  # nuclei per m^2
    d_omega = 1e-5 / (1e-1) ** 2  # sr
    d_sigma = 1.3e-3 * 1e-28 * d_omega  # m^2 per nucleus
    rate = 1e-7 / 1.602e-19 * d_sigma * n
    assert abs(rate - 90.5) < 0.1
    assert abs(6.2e11 * 1.4e-10 - 87) < 0.2  # the book's two-digit intermediates
    _check(v, e, f"\\boxed{{{rate:.1f}}}", "NV")


def _purcell() -> tuple[float, float]:
    current, e_charge, c, eps0, gamma = 5e-8, 1.602e-19, 2.998e8, 8.854e-12, 20.0
    beta = math.sqrt(1 - 1 / gamma**2)
    d = beta * c / (current / e_charge)  # m
    field = current / (beta * c) / (2 * math.pi * eps0 * 0.01)  # V/m, 1 cm from the beam
    return d, field


def purcell_a(v: Verifier, e: Erratum) -> None:
    d, field = _purcell()
    assert abs(d * 1e3 - 0.959) < 0.002 and abs(field - 3.00e-4) < 0.01e-4
    _check(v, e, f"\\boxed{{d = {d * 1e3:.3f}\\,\\mathrm{{mm}}}}, \\boxed{{E = {field * 1e4:.3f} \\times 10^{{-4}}\\,\\mathrm{{V/m}}}}",
           "TUP", ["NV", "NV"], ["NV", "NV"])


def purcell_b(v: Verifier, e: Erratum) -> None:
    d, field = _purcell()
    d2, field2 = 20 * d, field / 20
    assert abs(d2 * 100 - 1.92) < 0.01 and abs(field2 - 1.50e-5) < 0.01e-5
    _check(v, e, f"\\boxed{{d' = {d2 * 100:.3f}\\,\\mathrm{{cm}}}}, \\boxed{{E' = {field2 * 1e5:.3f} \\times 10^{{-5}}\\,\\mathrm{{V/m}}}}",
           "TUP", ["NV", "NV"], ["NV", "NV"])


RECOMPUTE: dict[str, Callable[..., None]] = {
    "carroll-ostlie-12.1b": carroll, "ipho-1972-q3": ipho_1972_q3, "apho-2023-t2a-a3": apho_a3,
    "apho-2023-t2a-a4": apho_a4, "apho-2023-t2a-a5": apho_a5, "ioaa-2024-t5a": ioaa_2024_t5a,
    "ioaa-2024-t5b": ioaa_2024_t5b, "ioaa-2008-t18a": ioaa_2008_t18a, "eisberg-resnick-e16.10": eisberg_e16_10,
    "purcell-ex5.11a": purcell_a, "purcell-ex5.11b": purcell_b,
}


def test_every_erratum_has_a_recomputation() -> None:
    assert set(RECOMPUTE) == set(ERRATA)


@pytest.mark.parametrize("eid", sorted(RECOMPUTE))
def test_recomputation_gives_the_corrected_value_and_not_the_official_one(eid: str, verifier: Verifier, data_dir: Path) -> None:
    fn = RECOMPUTE[eid]
    if "data_dir" in fn.__code__.co_varnames[: fn.__code__.co_argcount]:
        fn(verifier, ERRATA[eid], data_dir)
    else:
        fn(verifier, ERRATA[eid])


def test_every_erratum_names_a_real_sub_problem_with_its_official_value(data_dir: Path) -> None:
    sets = {s: load_dataset(data_dir / f"{s}.json", name=s) for s in ("application", "transfer")}
    for e in ERRATA.values():
        parents = {p.uid: p for p in sets[e.split].parents}
        assert e.parent_uid in parents, e.id
        sub = next((s for s in parents[e.parent_uid].subs() if s.problem_id == e.problem_id), None)
        assert sub is not None, e.id
        assert sub.answer == e.official, e.id
    for split, ds in sets.items():  # every erratum of the split applies (none went stale)
        plan = plan_errata(ds.parents, "apply")
        assert not plan.stale and {e.id for e in plan.matched} == {e.id for e in ERRATA.values() if e.split == split}
        fixed = {p.uid: p for p in plan.apply(ds.parents)}  # each correction is a valid gold (validated records)
        for e in plan.matched:
            if e.corrected is not None:
                sub = next(s for s in fixed[e.parent_uid].subs() if s.problem_id == e.problem_id)
                assert sub.answer == e.corrected and (e.answer_type is None or sub.answer_type.value == e.answer_type)
            else:
                assert e.parent_uid not in fixed


def test_the_errata_file_ships_in_the_package_and_every_kind_is_known() -> None:
    root = REPO
    assert "data/errata.json" in (root / "pyproject.toml").read_text()
    assert {e.kind for e in ERRATA.values()} <= set(ERRATA_KINDS)
    assert all(e.cause and e.evidence for e in ERRATA.values())


# --------------------------------------------------------------------------- the file format


GOOD = next(iter(ERRATA.values())).to_dict()


@pytest.mark.parametrize("field", [*GOOD])
def test_a_malformed_errata_record_is_refused_naming_the_record_and_field(field: str) -> None:
    for bad in ({k: v for k, v in GOOD.items() if k != field}, {**GOOD, field: 5}):
        with pytest.raises(ErrataError, match=rf"errata\[0\]: field '{field}'"):
            parse_errata({"errata": [bad]}, "x.json")


@pytest.mark.parametrize("doc,match", [
    ([], "an 'errata' list"),
    ({"errata": [GOOD, {**GOOD, "problem_id": "other"}]}, "listed twice"),
    ({"errata": [GOOD, {**GOOD, "id": "other"}]}, "listed twice"),
    ({"errata": [{**GOOD, "kind": "unanswerable"}]}, "null exactly when"),
    ({"errata": [{**GOOD, "kind": "typo"}]}, "field 'kind'"),
    ({"errata": [{**GOOD, "corrected": "\\boxed{1"}]}, "field 'corrected'"),
    ({"errata": [{**GOOD, "corrected": "9.3"}]}, "field 'corrected'"),
    ({"errata": [{**GOOD, "field": "solution"}]}, "only 'answer'"),
    ({"errata": [{**GOOD, "answer_type": "ALT"}]}, "given together"),
])
def test_malformed_errata_documents_are_refused(doc: object, match: str) -> None:
    with pytest.raises(ErrataError, match=match):
        parse_errata(doc, "x.json")


def test_load_errata_reads_a_file_and_names_it(tmp_path: Path) -> None:
    f = tmp_path / "e.json"
    f.write_text(json.dumps({"errata": [GOOD]}))
    assert [e.id for e in load_errata(f)] == [GOOD["id"]]
    f.write_text("{")
    with pytest.raises(ErrataError, match=re.escape(str(f))):
        load_errata(f)


# --------------------------------------------------------------------------- plans


def _parent(uid_sub: tuple[str, str], answer: str) -> Parent:
    return Parent.model_validate({"source": "S", "year": "", "source_problem_id": "P", "problem": "stem",
                                  "sub_problems": [{"problem_id": uid_sub[1], "problem": "q", "answer": answer,
                                                    "answer_type": "NV", "solution": "work"},
                                                   {"problem_id": "other", "problem": "q", "answer": "\\boxed{1}",
                                                    "answer_type": "NV"}]})


def _erratum(corrected: str | None, official: str = "\\boxed{2}") -> Erratum:
    return Erratum("x-1", "transfer", "S", "", "P", "a", "answer", official, corrected,
                   "unanswerable" if corrected is None else "wrong", "a cause", "evidence")


@pytest.mark.parametrize("mode,corrected,kept,answer", [
    ("official", "\\boxed{3}", True, "\\boxed{2}"),
    ("apply", "\\boxed{3}", True, "\\boxed{3}"),
    ("exclude", "\\boxed{3}", False, None),
    ("official", None, True, "\\boxed{2}"),
    ("apply", None, False, None),
    ("exclude", None, False, None),
])
def test_each_mode_scores_or_drops_as_documented(mode: str, corrected: str | None, kept: bool, answer: str | None) -> None:
    p = _parent(("S//P", "a"), "\\boxed{2}")
    plan = plan_errata([p], mode, [_erratum(corrected)])
    out = plan.apply([p])
    assert [e.id for e in plan.matched] == ["x-1"]
    assert bool(out) == kept and (p.uid in plan.drop) == (not kept)
    if kept:
        assert out[0].sub_problems[0].answer == answer and out[0].sub_problems[1].answer == "\\boxed{1}"
        if mode == "apply":
            assert "Erratum x-1" in out[0].sub_problems[0].solution and "\\boxed" not in out[0].sub_problems[0].solution
    assert p.sub_problems[0].answer == "\\boxed{2}"  # the original is untouched
    desc = plan.describe(out)
    assert desc["mode"] == mode and len(desc["items"]) == int(kept)


def test_an_erratum_whose_official_value_the_data_no_longer_holds_is_not_applied() -> None:
    p = _parent(("S//P", "a"), "\\boxed{7}")
    plan = plan_errata([p], "apply", [_erratum("\\boxed{3}")])
    assert not plan.matched and [e.id for e in plan.stale] == ["x-1"]
    assert plan.apply([p])[0].sub_problems[0].answer == "\\boxed{7}"


def test_errata_tag_marks_only_a_packaged_correction() -> None:
    e = ERRATA["ipho-1972-q3"]
    tag = errata_tag(e.parent_uid, e.problem_id, e.corrected or "")
    assert tag is not None and tag.startswith("ipho-1972-q3:")
    assert errata_tag(e.parent_uid, e.problem_id, e.official) is None
    assert errata_tag("S//P", "a", "\\boxed{3}") is None


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="official, apply, exclude"):
        plan_errata([], "fix")
