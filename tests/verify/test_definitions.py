r"""Issue 14, kind 8: definitions stated in the problem text or in the gold's own box.

A relation the problem defines ("Define $\alpha = 16\sigma/c$", "where $\omega = \sqrt{k/m}$", "let
$\tau = RC$", 假设 $\alpha = ...$) or a trailing clause of the gold box (``..., \omega_0 =
\sqrt{k/m}``) is a substitution identity for that item. Every acceptance has wrong twins; results
("show that"), questions, conditions ("the point where r = R/2"), measured values, chains and
conflicting definitions are never taken. The held-out cases use real ugphysics problems the dev
pairs do not use (problem sentences quoted, golds as in the data).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from studybench.evaluate.rule_pass import problem_text
from studybench.records import Parent, SubProblemRef
from studybench.verify import Verifier
from studybench.verify.physics.definitions import (
    extract_definitions,
    gold_box_definitions,
    problem_definitions,
)

# ugphysics Thermodynamics 3367 (dev pair 320's problem, which the dev pair does not carry)
P3367 = ("假设 $\\alpha = 16 \\sigma / c$, 其中 $\\sigma = 5.669 \\times 10^{-8} \\mathrm{Wm}^{-2} \\mathrm{~K}^{-4}$ "
         "为斯特藩常数, $c = 2.998 \\times 10^{8} \\mathrm{~ms}^{-1}$ 为真空中光速，求平衡辐射场的内能 $U$ 和压强 $p$。")
G3367 = ["U = 4 \\frac{\\sigma}{c} V T^4, p = \\frac{4}{3} \\frac{\\sigma}{c} T^4"]


@pytest.fixture(scope="module")
def v(verifier: Verifier) -> Verifier:
    return verifier  # the session's (tests/conftest.py): verdicts, not speed


# ---------------------------------------------------------------------------------------------
# extraction (pure strings)

@pytest.mark.parametrize(
    "text,want",
    [
        (P3367, [("\\alpha", "16 \\sigma / c")]),  # the measured sigma and c are no definitions
        ("Define $\\alpha = 16\\sigma/c$. Find the energy density.", [("\\alpha", "16\\sigma/c")]),
        ("The mass oscillates, where $\\omega_0 = \\sqrt{k/m}$ is its natural frequency. Find x(t).",
         [("\\omega_0", "\\sqrt{k/m}")]),
        ("Let $\\tau = RC$. Find the current.", [("\\tau", "RC")]),
        ("A wave with $\\lambda := 2\\pi c/\\omega$ travels.", [("\\lambda", "2\\pi c/\\omega")]),
        ("Denote by $\\beta = v/c$ the speed ratio.", [("\\beta", "v/c")]),
        ("$$V = -2V_0 (1/\\rho - 1/(2\\rho^2))$$ where $\\rho = \\frac{r}{a}$, and $a$ is a constant.",
         [("\\rho", "\\frac{r}{a}")]),
    ],
)
def test_problem_definitions_taken(text: str, want: list[tuple[str, str]]) -> None:
    assert problem_definitions(text) == want


@pytest.mark.parametrize(
    "text,why",
    [
        ("Show that $E = mc^2$.", "a result to show states the answer"),
        ("Show that, with $\\omega = \\sqrt{k/m}$, the energy is conserved.", "inside a result sentence"),
        ("Prove that where $\\omega = \\sqrt{k/m}$ the motion is periodic.", "inside a result sentence"),
        ("Find $v = ?$", "a question"),
        ("What is the period, with $T = 2\\pi/\\omega$?", "a question sentence"),
        ("Find the field at the point where $r = R/2$.", "a condition, not a definition"),
        ("The mass is $m = 2M$ and the spring constant $k = 4m g / L$.", "no introducing word"),
        ("where $n = 1, 2, 3, \\ldots$", "numbers only"),
        ("where $g = 9.8 \\mathrm{m/s^2}$", "a measured value"),
        ("where $\\alpha = \\beta = \\gamma$", "a chain"),
        ("where $E \\approx k T$", "not an equality"),
        ("Let \\( A = N \\) (neutron number) \\( + Z \\) (proton number).", "one formula cut by prose"),
        ("where $x = a x + b$", "recursive"),
        ("where $T^2 = 4\\pi^2 m/k$", "the left side is not one symbol"),
        ("Let $\\tau = RC$ and find the charge.", "the clause asks"),
    ],
)
def test_problem_definitions_refused(text: str, why: str) -> None:
    assert problem_definitions(text) == [], why


def test_gold_box_definitions() -> None:
    assert gold_box_definitions("A\\cos(\\omega_0 t), \\omega_0 = \\sqrt{k/m}") == (
        "A\\cos(\\omega_0 t)", [("\\omega_0", "\\sqrt{k/m}")])
    assert gold_box_definitions("x(t) = A\\cos(\\omega t), \\quad \\text{where} \\quad \\omega = \\sqrt{k/m}")[1] == [
        ("\\omega", "\\sqrt{k/m}")]
    # a second answer, not a definition: its symbol is not in the first part, or both are results
    for box in ("U = 4 \\frac{\\sigma}{c} V T^4, p = \\frac{4}{3} \\frac{\\sigma}{c} T^4", "x = v t, v = a t",
                "\\frac{1}{\\lambda}=4 R\\left(\\frac{1}{16}-\\frac{1}{n^2}\\right), \\quad n=5,6,7, \\cdots"):
        assert gold_box_definitions(box) == (box, [])


def test_extract_definitions_conflicts_and_answered_symbols() -> None:
    two = "Let $\\tau = RC$. Elsewhere, let $\\tau = 2RC$."
    assert extract_definitions(two, ["I_0 e^{-t/(RC)}"], "EX") == ()
    # the gold answers omega itself: the problem's omega = ... would state the answer
    assert extract_definitions("where $\\omega = \\sqrt{k/m}$.", ["\\omega = \\sqrt{k/m}"], "EQ") == ()
    assert extract_definitions("where $\\omega = \\sqrt{k/m}$.", ["\\sqrt{k/m}"], "NV") == ()
    assert extract_definitions("where $\\omega = \\sqrt{k/m}$.", ["B"], "MC") == ()
    assert extract_definitions(None, ["A\\cos(\\omega_0 t), \\omega_0 = \\sqrt{k/m}"], "EX") == (
        ("\\omega_0", "\\sqrt{k/m}", "gold"),)


# ---------------------------------------------------------------------------------------------
# verification with definitions (sandbox workers)

def test_dev_pair_320_with_its_problem_text(v: Verifier) -> None:
    good = "U = \\frac{\\alpha}{4}VT^{4}, p = \\frac{4}{3} \\frac{\\sigma}{c} T^4"
    assert not v.verify(G3367, [good], "EQ").correct  # without the problem: alpha is unknown
    r = v.verify(G3367, [good], "EQ", problem=P3367)
    assert r.correct and "\\alpha = 16 \\sigma / c from the problem" in r.reason
    assert v.verify(G3367, ["U = \\frac{\\alpha}{4}VT^{4}, p = \\frac{\\alpha}{12} T^4"], "EQ", problem=P3367).correct
    for wrong in ("U = \\frac{\\alpha}{2}VT^{4}, p = \\frac{4}{3} \\frac{\\sigma}{c} T^4",  # wrong factor
                  "U = \\frac{\\alpha}{4}VT^{4}, p = \\frac{\\alpha}{4} T^4",  # wrong factor in slot 2
                  "U = \\frac{\\alpha}{4}VT^{3}, p = \\frac{4}{3} \\frac{\\sigma}{c} T^4",  # wrong power
                  "p = \\frac{\\alpha}{4}VT^{4}, U = \\frac{4}{3} \\frac{\\sigma}{c} T^4"):  # swapped
        assert not v.verify(G3367, [wrong], "EQ", problem=P3367).correct, wrong


OMEGA = "Three lowest states of N fermions in the trap, where $\\omega = \\sqrt{k/m}$. Find the mean square size."


@pytest.mark.parametrize(
    "pred,ok",
    [
        ("\\frac{\\hbar}{2\\sqrt{mk}}\\left(N^{2}+4\\right)", True),
        ("\\frac{\\hbar (N^2 + 4)}{2 m^{1/2} k^{1/2}}", True),
        ("\\frac{\\hbar}{\\sqrt{mk}}\\left(N^{2}+4\\right)", False),  # twice
        ("\\frac{\\hbar}{2\\sqrt{m/k}}\\left(N^{2}+4\\right)", False),  # swapped symbols
        ("\\frac{\\hbar}{2\\sqrt{mk}}\\left(N^{2}+2\\right)", False),  # changed number
        ("-\\frac{\\hbar}{2\\sqrt{mk}}\\left(N^{2}+4\\right)", False),  # flipped sign
    ],
)
def test_problem_definition_ex(v: Verifier, pred: str, ok: bool) -> None:
    gold = ["\\frac{\\hbar}{2 m \\omega}\\left(N^{2}+4\\right)"]
    r = v.verify(gold, [pred], "EX", problem=OMEGA)
    assert r.correct is ok, r.reason
    if ok:
        assert "\\omega = \\sqrt{k/m} from the problem" in r.reason


def test_only_the_stated_definition_helps(v: Verifier) -> None:
    gold = ["\\frac{\\hbar}{2 m \\omega}\\left(N^{2}+4\\right)"]
    pred = ["\\frac{\\hbar}{2\\sqrt{mk}}\\left(N^{2}+4\\right)"]
    for problem in ("Find it, where $\\nu = \\sqrt{k/m}$ is given.",  # another symbol
                    "Show that $\\omega = \\sqrt{k/m}$ for this trap.",  # a result, not a definition
                    "Let $\\omega = \\sqrt{k/m}$. Later let $\\omega = \\sqrt{2k/m}$.",  # two conflicting
                    "Find the point where $\\omega = \\sqrt{k/m}$.",  # a condition
                    None, ""):
        assert not v.verify(gold, pred, "EX", problem=problem).correct, problem


def test_defined_symbol_alone_is_no_answer(v: Verifier) -> None:
    prob = "A capacitor discharges through a resistor; let $\\tau = RC$. Find the current."
    gold = ["I_0 e^{-t/(RC)}"]
    assert v.verify(gold, ["I_0 e^{-t/\\tau}"], "EX", problem=prob).correct
    assert not v.verify(gold, ["I_0 e^{-2t/\\tau}"], "EX", problem=prob).correct
    assert not v.verify(gold, ["I_0 e^{t/\\tau}"], "EX", problem=prob).correct
    assert not v.verify(["RC"], ["\\tau"], "EX", problem=prob).correct  # "find tau" answered by tau


def test_gold_box_definition(v: Verifier) -> None:
    gold = ["A\\cos(\\omega_0 t), \\omega_0 = \\sqrt{k/m}"]
    r = v.verify(gold, ["A\\cos\\left(\\sqrt{\\frac{k}{m}}\\, t\\right)"], "EX")
    assert r.correct and "from the gold" in r.reason
    assert v.verify(gold, ["A\\cos(\\omega_0 t), \\omega_0 = \\sqrt{k/m}"], "EX").correct  # the same box
    for wrong in ("A\\cos\\left(\\sqrt{\\frac{m}{k}}\\, t\\right)", "A\\sin\\left(\\sqrt{\\frac{k}{m}}\\, t\\right)",
                  "2A\\cos\\left(\\sqrt{\\frac{k}{m}}\\, t\\right)",
                  "A\\cos(\\omega_0 t)"):  # omega_0 left undefined
        assert not v.verify(gold, [wrong], "EX").correct, wrong


@pytest.mark.parametrize(
    "problem,gold,at,good,wrong",
    [
        # ugphysics Thermodynamics 3683 (Brownian motion, Stokes drag)
        ("A particle in a fluid feels the drag $-\\gamma v$, where $\\gamma = 6 \\pi \\eta R$. Find the rms displacement.",
         "\\sqrt{\\frac{kT}{3 \\pi R \\eta} t}", "EX",
         "\\sqrt{\\frac{2 k T t}{\\gamma}}", "\\sqrt{\\frac{k T t}{\\gamma}}"),
        # ugphysics Classical Mechanics 1729 (Coulomb capture cross-section)
        ("A particle of energy $T$ is scattered by a nucleus; let $V = \\frac{Ze^{2}}{4 \\pi \\varepsilon_{0} b}$. Find the cross-section.",
         "\\sigma = \\pi b^{2}\\left( \\frac{T - V}{T} \\right)", "EQ",
         "\\sigma = \\pi b^2 \\left(1 - \\frac{Z e^2}{4\\pi\\varepsilon_0 b T}\\right)",
         "\\sigma = \\pi b^2 \\left(1 - \\frac{Z e^2}{2\\pi\\varepsilon_0 b T}\\right)"),
        # ugphysics Quantum Mechanics 4818 (Bohr radius defined in the problem)
        ("An electron in hydrogen, with $a_{B} = \\frac{\\hbar^{2}}{m_{e} e^{2}}$ the Bohr radius. Find the rate.",
         "\\frac{2}{3} \\cdot \\frac{r_{0}^{2} e^{2}}{a_{B}^{3}}", "EX",
         "\\frac{2 r_0^2 e^8 m_e^3}{3 \\hbar^6}", "\\frac{2 r_0^2 e^8 m_e^3}{3 \\hbar^4}"),
        # ugphysics Theoretical Mechanics 2814 (B = m b^2 in the matrices)
        ("The mass matrix is $\\boldsymbol{M} = B I$, where $B=m b^{2}$ and $A$ is a constant. Find the characteristic equation.",
         "-3A + B\\omega^2 = 0", "EQ",
         "m b^2 \\omega^2 = 3 A", "m b^2 \\omega^2 = 2 A"),
    ],
)
def test_held_out_real_problems(v: Verifier, problem: str, gold: str, at: str, good: str, wrong: str) -> None:
    assert v.verify([gold], [good], at, problem=problem).correct
    assert not v.verify([gold], [good], at).correct  # the definition is what makes them equal
    assert not v.verify([gold], [wrong], at, problem=problem).correct


def test_memo_keeps_problems_apart_and_batch_apis(v: Verifier) -> None:
    gold = ["\\frac{\\hbar}{2 m \\omega}N^{2}"]
    pred = ["\\frac{\\hbar}{2\\sqrt{mk}}N^{2}"]
    out = v.verify_many([(gold, pred, "EX", ""), (gold, pred, "EX", "", None, OMEGA), (gold, pred, "EX", "", None, None)])
    assert [x.correct for x in out] == [False, True, False]
    assert not v.verify_many([(gold, pred, "EX", "", None, OMEGA, "extra")])[0].correct  # malformed item
    resp = "So\nFinal Answer: \\boxed{\\frac{\\hbar}{2\\sqrt{mk}}N^{2}}"
    assert v.verify_response("\\boxed{\\frac{\\hbar}{2 m \\omega}N^{2}}", resp, "EX", problem=OMEGA).correct
    pairs = v.verify_responses([("\\boxed{\\frac{\\hbar}{2 m \\omega}N^{2}}", resp, "EX", "", None, OMEGA),
                                ("\\boxed{\\frac{\\hbar}{2 m \\omega}N^{2}}", resp, "EX", "")])
    assert [p[1].correct for p in pairs] == [True, False]


def test_problem_text_joins_stem_and_sub_problem() -> None:
    parent = Parent.model_validate({
        "source": "s", "source_problem_id": "1", "problem": "Let $\\tau = RC$.",
        "sub_problems": [{"problem_id": "a", "problem": "Find the current.", "answer": "\\boxed{1}", "answer_type": "NV"}],
    })
    assert problem_text(SubProblemRef(parent, 0, parent.subs()[0])) == "Let $\\tau = RC$.\n\nFind the current."
    single = Parent.model_validate({"source": "s", "source_problem_id": "2", "problem": "Q?", "answer": "\\boxed{1}",
                                    "answer_type": "NV"})
    assert problem_text(SubProblemRef(single, 0, single.subs()[0])) == "Q?"


def test_verify_file_problem_column(tmp_path: Path) -> None:
    rows = [
        {"gold": "\\boxed{I_0 e^{-t/(RC)}}", "response": "Final Answer: \\boxed{I_0 e^{-t/\\tau}}", "answer_type": "EX",
         "problem": "Let $\\tau = RC$. Find the current."},
        {"gold": "\\boxed{I_0 e^{-t/(RC)}}", "response": "Final Answer: \\boxed{I_0 e^{-t/\\tau}}", "answer_type": "EX"},
        {"gold": "\\boxed{I_0 e^{-t/(RC)}}", "response": "Final Answer: \\boxed{I_0 e^{-t/\\tau}}", "answer_type": "EX",
         "problem": None},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "studybench.cli", "verify-file", str(src), "-o", str(out), "--workers", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["correct"] for x in out.read_text().splitlines()] == [True, False, False]
    src.write_text(json.dumps({**rows[0], "problem": 3}) + "\n")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "line 1: field 'problem': must be a string or null" in r.stderr.replace("\n", " ")
