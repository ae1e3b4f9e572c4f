"""The deterministic leakage gate of ``build guide`` (issue 15, item 6a) and its sanitiser.

Each test names the defect of the reference implementation it guards against where there is one: its
gold check compared whole ``\\boxed{...}`` strings and skipped golds under 8 characters.
"""

from __future__ import annotations

import pytest

from studybench.records import SubProblem
from studybench.testset.guidance.leakage import GoldSlot, check_leakage, gold_slots, sanitise
from studybench.verify import Verifier


def _gold(text: str, at: str, i: int = 0) -> GoldSlot:
    return GoldSlot(i, text, at)


def test_equivalent_number_form_is_caught(verifier):
    # gold written as 3.57e34 with units; the guidance writes LaTeX scientific notation, no unit
    r = check_leakage("Combine $L = I\\omega$; this gives $3.57\\times10^{34}$ for the Earth.",
                      [_gold("3.57e34 kg m^2/s", "NV")], verifier=verifier)
    assert not r.passed
    f = [f for f in r.findings if f.rule == "gold"]
    assert f and f[0].slot == 0 and f[0].gold == "3.57e34 kg m^2/s" and "3.57" in f[0].span


def test_prose_scientific_notation_with_unit_is_caught(verifier):
    r = check_leakage("The spin angular momentum is 3.57 x 10^34 kg m^2/s here.", [_gold("3.57e34 kg m^2/s", "NV")],
                      verifier=verifier)
    assert any(f.rule == "gold" for f in r.findings)


def test_two_character_gold_is_checked(verifier):
    # the reference skipped golds under 8 characters
    slots = [_gold("2g", "EX")]
    assert any(f.rule == "gold" for f in check_leakage("At the bottom the acceleration is $2g$.", slots, verifier=verifier).findings)
    assert any(f.rule == "gold" for f in check_leakage("At the bottom the acceleration is 2g.", slots, verifier=verifier).findings)
    assert check_leakage("Resolve the forces at the bottom of the loop; use Newton's 2nd law.", slots, verifier=verifier).passed


def test_rearranged_equation_is_caught(verifier):
    slots = [_gold("T = 2\\pi\\sqrt{L/g}", "EQ")]
    r = check_leakage("Square the small-angle result: $L = \\frac{g T^2}{4\\pi^2}$.", slots, verifier=verifier)
    assert any(f.rule == "gold" for f in r.findings)
    # the method (energy, torque) without the result passes
    ok = check_leakage("Write the torque $\\tau = -mgL\\sin\\theta$ and use the small-angle approximation.", slots,
                       verifier=verifier)
    assert ok.passed, ok.findings


def test_box_with_braces_is_caught_whatever_its_content(verifier):
    # the reference compared whole \boxed{...} strings when a box held braces
    r = check_leakage("So $\\boxed{\\frac{m g}{k}}$ is the stretch.", [_gold("\\frac{2mg}{k}", "EX")], verifier=verifier)
    assert any(f.rule == "box" for f in r.findings)


@pytest.mark.parametrize("text", [
    "The final answer follows from energy conservation.",
    "Answer: use the work-energy theorem.",
    "The result should be obtained from Gauss's law.",
    "Doing the integral, you should get about $4$ in SI units.",
    "It comes out to 12 after simplifying.",
])
def test_answer_phrases(text, verifier):
    r = check_leakage(text, [_gold("7", "NV")], verifier=verifier)
    assert any(f.rule == "answer_phrase" for f in r.findings), text


def test_method_phrases_pass(verifier):
    r = check_leakage("First you should find the acceleration, then use $v^2 = v_0^2 + 2a\\Delta x$ (Example 2.3, Eq. 2.14).",
                      [_gold("2.14", "NV"), _gold("7", "NV", 1)], verifier=verifier)
    assert r.passed, r.findings


def test_text_golds(verifier):
    assert not check_leakage("The statement is false, since entropy grows.", [_gold("\\text{FALSE}", "TF")], verifier=verifier).passed
    assert check_leakage("Decide whether entropy can decrease here.", [_gold("\\text{FALSE}", "TF")], verifier=verifier).passed
    assert not check_leakage("Pick option (B) after comparing.", [_gold("B", "MC")], verifier=verifier).passed
    assert not check_leakage("The slope becomes steeper at high T.", [_gold("steeper", "QL")], verifier=verifier).passed


def test_value_stated_in_problem_still_blocks_but_is_marked(verifier):
    r = check_leakage("Use the 2 kg block's weight.", [_gold("2", "NV")], problem="A 2 kg block hangs.", verifier=verifier)
    assert not r.passed and r.findings[0].in_problem


def test_gold_slots_of_a_tuple():
    sub = SubProblem(problem_id="a", problem="p", answer="\\boxed{3 m}, \\boxed{x = 2}", answer_type="TUP", type_sequence="NV,EQ")
    assert [(s.text, s.answer_type) for s in gold_slots(sub)] == [("3 m", "NV"), ("x = 2", "EQ")]


def test_sanitiser_removes_leaking_sentence_and_rechecks(verifier):
    slots = [_gold("3.57e34 kg m^2/s", "NV")]
    s = sanitise("Use $L = I\\omega$ with the sphere's moment of inertia. It is $3.57\\times10^{34}$. Then check units.",
                 slots, verifier=verifier)
    assert s.passed and "3.57" not in s.text and "moment of inertia" in s.text and s.removed
    empty = sanitise("It is $3.57\\times10^{34}$.", slots, verifier=verifier)
    assert not empty.passed and not empty.text


# --------------------------------------------------------------------------------------------------
# plain-text formulas in prose (issue 25, item 1): "Use v = sqrt(2gh) at the bottom." passed on main

# (gold slot, answer type, lhs symbols, plain-text spellings of the gold, spellings of near misses)
_PLAIN_CASES = [
    ("\\sqrt{2gh}", "EX", ("v = ", "v="),
     ["sqrt(2gh)", "sqrt(2 g h)", "sqrt(2*g*h)", "√(2gh)", "√(2 g h)", "√2gh", "\\sqrt{2gh}", "(2gh)^(1/2)",
      "(2 g h)^0.5", "(2*g*h)**0.5", "the square root of 2gh", "√(2·g·h)"],
     ["sqrt(gh)", "sqrt(2g/h)", "(2gh)^(3/2)", "√(g h)", "2gh", "sqrt(2gh^2)"]),
    ("2\\pi\\sqrt{\\frac{L}{g}}", "EX", ("T = ", "T="),
     ["2 pi sqrt(L/g)", "2π√(L/g)", "2\\pi\\sqrt{L/g}", "2*pi*(L/g)^(1/2)", "2π (L/g)^0.5", "2 pi * sqrt(L / g)"],
     ["2 pi sqrt(g/L)", "2π√(L g)", "pi sqrt(L/g)"]),
    ("\\omega = \\sqrt{\\frac{k}{m}}", "EQ", ("omega = ", "ω = ", "ω="),
     ["sqrt(k/m)", "√(k/m)", "(k/m)^(1/2)", "\\sqrt{k/m}", "(k/m)**0.5"],
     ["sqrt(m/k)", "k/m", "(k/m)^2"]),
]
_FRAMES = ["Use {} at the bottom.", "{}", "So the speed is {}.", "Remember that {}, then continue.", "Here {} holds"]


def _plain_texts(right: bool) -> list[tuple[GoldSlot, str]]:
    out = []
    n = 0
    for gold, at, lhss, good, bad in _PLAIN_CASES:
        for form in good if right else bad:
            for prefix in ("", *lhss):
                if at == "EQ" and not prefix:
                    continue  # a bare right side is no equation
                out.append((_gold(gold, at), _FRAMES[n % len(_FRAMES)].format(prefix + form)))
                n += 1
    return out


def test_plain_text_formulas_equal_to_the_gold_are_caught(verifier):
    cases = _plain_texts(True)
    assert len(cases) >= 60
    missed = [(s.text, t) for s, t in cases if not any(f.rule == "gold" for f in check_leakage(t, [s], verifier=verifier).findings)]
    assert not missed, missed


def test_plain_text_near_misses_pass(verifier):
    cases = _plain_texts(False)
    assert len(cases) >= 25
    flagged = [(s.text, t, [f.span for f in r.findings]) for s, t in cases if not (r := check_leakage(t, [s], verifier=verifier)).passed]
    assert not flagged, flagged


def test_plain_formulas_reads_roots_and_powers():
    from studybench.testset.guidance.leakage import plain_formulas

    got = {latex for _, _, latex in plain_formulas("Use v = √2gh, or (2gh)^(1/2), or the square root of 2gh; at the bottom.")}
    assert {"v = \\sqrt{2gh}", "v = \\sqrt{2} gh", "(2gh)^{1/2}", "\\sqrt{2gh}"} <= got
    assert plain_formulas("Resolve the forces at the bottom of the loop; use Newton's 2nd law.") == []
    assert plain_formulas("First find the acceleration (Example 2.3, Eq. 2.14).") == []


def test_a_loaded_machine_does_not_let_a_leak_through(monkeypatch):
    # main: a comparison that timed out did not block, so under load the leak passed the gate
    from studybench.verify.sandbox import TimedOut

    slots = [_gold("\\sqrt{2gh}", "EX")]
    text = "Use $v = \\sqrt{2gh}$ at the bottom."
    with Verifier(workers=1, timeout=20.0) as v:
        real, seen = v.pool.call, set()

        def first_try_times_out(name, args, timeout):
            if name == "verdict" and repr(args) not in seen:
                seen.add(repr(args))
                raise TimedOut()
            return real(name, args, timeout)

        monkeypatch.setattr(v.pool, "call", first_try_times_out)
        r = check_leakage(text, slots, verifier=v)
    assert seen  # the first tries did time out
    assert any(f.rule == "gold" for f in r.findings) and r.timeouts == 0


# --------------------------------------------------------------------------------------------------
# issue 26 (mutation trial): number words and prose equations each have a test that fails without them

_NUMBER_WORD_CASES = [  # (prose, the gold it gives away, a gold it must not flag)
    ("The speed doubles: it becomes twice as large.", "2", "3"),
    ("The tension is half the weight.", "\\frac{1}{2}", "2"),
    ("A quarter of the energy is lost.", "0.25", "4"),
    ("It rises to three times the height.", "3", "\\frac{1}{3}"),
]


@pytest.mark.parametrize("text,gold,other", _NUMBER_WORD_CASES, ids=[c[1] for c in _NUMBER_WORD_CASES])
def test_number_words_give_their_value_away(verifier, text, gold, other):
    # a number written as a word is the only candidate in these sentences: without the number words they pass
    assert any(f.rule == "gold" for f in check_leakage(text, [_gold(gold, "NV")], verifier=verifier).findings)
    assert check_leakage(text, [_gold(other, "NV")], verifier=verifier).passed


_PROSE_EQUATIONS = [  # (prose, EX gold given away as the right side, a near miss); multi-letter names on the left,
    # which the plain-formula reader leaves to the prose-equation reader
    ("we get Fnet = ma;", "ma", "mg"),
    ("so Vout = IR here.", "IR", "\\frac{I}{R}"),
    ("then Ftotal = ma, so", "ma", "\\frac{m}{a}"),
]


@pytest.mark.parametrize("text,gold,miss", _PROSE_EQUATIONS, ids=[c[0] for c in _PROSE_EQUATIONS])
def test_prose_equations_with_named_left_sides_are_caught(verifier, text, gold, miss):
    assert any(f.rule == "gold" for f in check_leakage(text, [_gold(gold, "EX")], verifier=verifier).findings)
    assert check_leakage(text, [_gold(miss, "EX")], verifier=verifier).passed
    # the whole equation against an EQ gold too
    lhs = text.split("=")[0].split()[-1]
    assert any(f.rule == "gold" for f in check_leakage(text, [_gold(f"{lhs} = {gold}", "EQ")], verifier=verifier).findings)
