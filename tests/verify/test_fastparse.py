"""The hand-written parser of the common subset (verify.fastparse) builds latex2sympy's very tree.

For every text it reads (returns non-``None``), the result must equal latex2sympy2_extended's plain
parse: same ``srepr`` and structurally equal (argument order included). Texts: seeded synthetic ones
covering the subset and its edges, aliased texts from the verifier's real inputs, and the dev-pair golds
aliased as the verifier does.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from studybench.verify.reading import conversion, fastparse

pytest.importorskip("latex2sympy2_extended")

FUNCS = ["\\sin", "\\cos", "\\tan", "\\sec", "\\csc", "\\cot", "\\sinh", "\\cosh", "\\tanh", "\\arcsin",
         "\\arccos", "\\arctan", "\\arcsinh", "\\ln", "\\log", "\\exp"]


def _synth(rng: random.Random, depth: int = 0) -> str:
    """One random aliased text in (and around) the subset."""

    def sym() -> str:
        return rf"\mathrm{{v{rng.randrange(12)}}}"

    def atom() -> str:
        r = rng.random()
        if r < 0.45:
            return sym()
        if r < 0.8:
            return rng.choice(["0", "1", "2", "3", "4", "10", "12", "007", "0.5", "1.1", "2.2", "1.50", "3.0", "100"])
        return rng.choice(["\\pi", "e", "e", "\\pi", "\\infty"])

    def script() -> str:
        if rng.random() < 0.4:
            return rng.choice(["2", "3", "10", "0.5", sym(), "\\pi"])
        return "{ " + _synth(rng, depth + 1) + " }"

    def comp() -> str:
        r = rng.random()
        if depth > 0 or r < 0.45:
            return atom()
        if r < 0.55:
            return "\\frac { " + _synth(rng, depth + 1) + " } { " + _synth(rng, depth + 1) + " }"
        if r < 0.62:
            root = "[ " + rng.choice(["3", "2", sym()]) + " ] " if rng.random() < 0.2 else ""
            return "\\sqrt " + root + "{ " + _synth(rng, depth + 1) + " }"
        if r < 0.75:
            o, c = rng.choice([("(", ")"), ("[", "]")])
            return f"{o} {_synth(rng, depth + 1)} {c}"
        if r < 0.8:
            return "| " + _synth(rng, depth + 1) + " |"
        f = rng.choice(FUNCS)
        pw = " ^ " + rng.choice(["2", "{ - 1 }", "{ 2 }", "{ 0 }", "- 1", "{ 3 }"]) if rng.random() < 0.25 else ""
        o, c = ("(", ")") if rng.random() < 0.9 else ("[", "]")
        return f"{f}{pw} {o} {_synth(rng, depth + 1)} {c}"

    def postfix() -> str:
        x = comp()
        if rng.random() < 0.25:
            x += " ^ " + script()
        return x

    def unary() -> str:
        r = rng.random()
        if r < 0.12:
            return "- " + unary()
        if r < 0.15:
            return "+ " + unary()
        return " ".join(postfix() for _ in range(rng.choice([1, 1, 1, 2, 2, 3] if depth == 0 else [1, 1, 2])))

    def mp() -> str:
        x = unary()
        for _ in range(rng.choice([0, 0, 0, 1, 2] if depth == 0 else [0, 0, 1])):
            x += " " + rng.choice(["\\cdot", "\\times", "/", ":"]) + " " + unary()
        return x

    x = mp()
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3]) if depth == 0 else 0):
        x += " " + rng.choice(["+", "-"]) + " " + mp()
    return x


_RNG = random.Random(14)
SYNTH = [_synth(_RNG) for _ in range(300)]

# the constructs where latex2sympy's reading is easy to get wrong, each checked against the real parse
EDGES = [
    r"\frac { \mathrm{v0} } { 2 }", r"\frac { 1 } { 2 }", r"\frac { 4 } { 2 }", r"\frac { 1 } { 0 }", r"2 / 4",
    r"0 / 0", r"- \mathrm{v1} + 2 \cdot 3", r"- 2 \mathrm{v0}", r"\mathrm{v0} - 2", r"\mathrm{v0} - 2.5",
    r"\mathrm{v0} - \pi", r"\mathrm{v0} - ( - 2 )", r"- - \mathrm{v0}", r"+ \mathrm{v0}", r"- \frac { 1 } { 2 }",
    r"- ( 2 )", r"- 2 ^ 2", r"2 \cdot - 3", r"2 \frac { 1 } { 2 }", r"2 \frac { 4 } { 2 }", r"( - 2 ) \frac { 1 } { 2 }",
    r"- 2 \frac { 1 } { 2 }", r"2 \frac { - 1 } { 2 }", r"2 ( 3 )", r"( 2 ) 3", r"2 ( 1 / 2 )", r"2 [ 3 ]", r"1.5 ( 2 )",
    r"2 ^ { 2 } \frac { 1 } { 2 }", r"2 \mathrm{v0} \frac { 1 } { 2 }", r"\frac { 1 } { 2 } \frac { 1 } { 3 }",
    r"\mathrm{v0} / 2 \mathrm{v1}", r"2 \mathrm{v0} / 3", r"\mathrm{v0} \cdot \mathrm{v1} / \mathrm{v2} \cdot 3",
    r"\mathrm{v0} : \mathrm{v1}", r"\mathrm{v0} \times \mathrm{v1}", r"\mathrm{v0} + ( \mathrm{v1} + 1 )",
    r"2.2", r"1.50", r"0.5", r"007", r"0", r"\pi", r"e", r"\infty", r"- \infty", r"2 e", r"e \mathrm{v0}",
    r"e ^ { \mathrm{v0} }", r"e ^ 2", r"e ^ { 0 }", r"e ^ { 1 }", r"e ^ { \ln ( \mathrm{v0} ) }", r"e ^ { \frac { 1 } { 2 } }",
    r"e ^ 2 ^ 3", r"\mathrm{v0} ^ 2", r"\mathrm{v0} ^ { 2 }", r"\mathrm{v0} ^ \mathrm{v1}", r"\mathrm{v0} ^ 2.5",
    r"\mathrm{v0} ^ \mathrm{v1} ^ 2", r"\mathrm{v0} ^ { 2 } ^ { 3 }", r"\mathrm{v0} ^ { 2 } _ { 1 }", r"\mathrm{v12} _ { 3 }",
    r"( \mathrm{v0} + \mathrm{v1} ) ^ { 1 / 2 }", r"\sqrt { 4 }", r"\sqrt [ 3 ] { \mathrm{v0} }", r"\sqrt { \mathrm{v0} } ^ 2",
    r"\frac { 1 } { 2 } ^ 2", r"| \mathrm{v0} |", r"2 | \mathrm{v0} | ^ 2", r"\mathrm{v0} | \mathrm{v1} |",
    r"| \mathrm{v0} | \mathrm{v1} | \mathrm{v2} |", r"\sin ( \mathrm{v0} ) ^ 2", r"\sin ^ { 2 } ( \mathrm{v0} )",
    r"\sin ^ { - 1 } ( \mathrm{v0} )", r"\sin ^ { - 1 } ( \mathrm{v0} ) ^ 2", r"\sin ^ { 0 } ( \mathrm{v0} )",
    r"\cosh ^ { - 1 } ( \mathrm{v0} )", r"\ln ( \mathrm{v0} )", r"\log ( \mathrm{v0} )", r"\exp ( \mathrm{v0} ) ^ 2",
    r"\exp ^ 2 ( \mathrm{v0} )", r"\ln ^ 2 ( \mathrm{v0} )", r"\arcsinh ( \mathrm{v0} )", r"\arctan ( 1 )",
    r"\sin [ \mathrm{v0} ] \mathrm{v1}", r"\ln \sinh [ \mathrm{v0} ]", r"\sin ( \mathrm{v0} ) ( \mathrm{v1} )",
    r"\mathrm{v0} ( \mathrm{v1} )", r"\mathrm{v0} ( \mathrm{v1} + 1 )", r"\mathrm{v0} [ \mathrm{v1} ]", r"\mathrm{v0} ( 2 )",
    r"\mathrm{v0} ^ 2 ( \mathrm{v1} )", r"\pi ( \mathrm{v1} )", r"\pi ( 2 \mathrm{v1} )", r"\pi ( - \mathrm{v1} )",
    r"e ( \mathrm{v1} )", r"\mathrm{v0} ( e )", r"\mathrm{v0} ( ( \mathrm{v1} ) )", r"\mathrm{v0} ( \mathrm{v1} , 2 )",
    r"\pi ( \mathrm{v2} ^ 2 + 1 )", r"\mathrm{v0} ( \mathrm{v1} ^ { 2 } + 1 )", r"\pi ( \mathrm{v2} ^ 2 \mathrm{v3} )",
    r"\mathrm{v0} ( \mathrm{v1} ^ 2 )", r"\mathrm{v0} ( \mathrm{v1} ^ { 2 } )", r"\mathrm{v0} ( \mathrm{v1} ^ { 2 } _ { 3 } )",
    r"\mathrm{v0} ( \mathrm{v1} ^ { 2 } ) ^ 2", r"\mathrm{v0} ( \mathrm{v1} ^ 2 / 2 )", r"\mathrm{v0} ( 2 ^ 2 )",
    r"\mathrm{v0} ( \mathrm{v1} ^ \mathrm{v2} + 1 )", r"\mathrm{v0} ( \mathrm{v1} ^ \mathrm{v2} )", r"\mathrm{v0} [ \mathrm{v1} ^ 2 + 1 ]",
    r"2 \pi ( \mathrm{v2} ^ 2 + \mathrm{v3} ^ 2 + \mathrm{v4} ^ 2 ) ^ { 3 / 2 }", r"\mathrm{v0} ( \mathrm{v1} , \mathrm{v2} + 1 )",
    r"\mathrm{v0} = 2", r"[ \mathrm{v0} , \mathrm{v1} ]", r"\mathrm{v0} < 2", r"\mathrm{v0} \approx 2", r"\pm \mathrm{v0}",
    r"\mathrm{v0} ^ - 1", r"( )", r"\frac { 1 } { 2", r"\mathrm{v0} !", r"2 .4", r"x + y",
]

# aliased texts from the verifier's real inputs (prediction and gold boxes of the dev pairs)
CORPUS = [
    r"\mathrm{v8}",
    r"( \mathrm{v3} )",
    r"0.9945 \mathrm{v0}",
    r"\frac { \pi } { 4.4 }",
    r"2 \mathrm{v5} \mathrm{v4}",
    r"\mathrm{v4} \mathrm{v3} ^ 2",
    r"+ 2 \mathrm{v0} \mathrm{v1}",
    r"- ( \frac { \mathrm{v0} } { 2 } )",
    r"- ( \mathrm{v1} \mathrm{v2} ^ 2 )",
    r"( 50 \times 10 ^ { 10 } , \infty )",
    r"\mathrm{v4} \mathrm{v3} \mathrm{v2}",
    r"- \mathrm{v0} \mathrm{v1} \mathrm{v3}",
    r"- ( \mathrm{v0} \cos ( \mathrm{v1} ) )",
    r"\frac { \mathrm{v4} } { 2 \mathrm{v3} }",
    r"- ( \mathrm{v0} \approx 0.4 \mathrm{v1} )",
    r"\frac { 1 } { 2 } \mathrm{v0} \mathrm{v1}",
    r"- \frac { \mathrm{v1} } { 20 \mathrm{v2} }",
    r"\frac { 2 \mathrm{v0} } { \mathrm{v1} ^ 2 }",
    r"- ( \mathrm{v0} \approx 5 \times 10 ^ { - 32 } )",
    r"\frac { \mathrm{v0} \mathrm{v2} } { \mathrm{v2} }",
    r"\frac { 2 } { \sqrt { \mathrm{v1} \mathrm{v2} } }",
    r"\frac { \mathrm{v0} \mathrm{v1} } { \mathrm{v2} }",
    r"\frac { \mathrm{v2} - \mathrm{v1} } { \sqrt { 2 } }",
    r"\mathrm{v1} \cdot ( \mathrm{v2} ^ 2 - 10 ) ^ { 1 / 2 }",
    r"\frac { 4 \mathrm{v1} \mathrm{v2} ^ 2 } { \mathrm{v3} }",
    r"\frac { \sin ( \mathrm{v0} ) } { \sin ( \mathrm{v1} ) }",
    r"2 + \frac { 4 \mathrm{v4} } { \mathrm{v5} \mathrm{v6} }",
    r"\mathrm{v1} \cdot ( 10 - \mathrm{v2} ^ 2 ) ^ { - 3 / 2 }",
    r"\sqrt { \mathrm{v0} ^ { 2 } - 2 \mathrm{v1} \mathrm{v2} }",
    r"\sqrt { \mathrm{v0} ^ { 3 } - 2 \mathrm{v1} \mathrm{v2} }",
    r"\frac { \mathrm{v2} } { \mathrm{v3} \sin ( \mathrm{v4} ) }",
    r"\mathrm{v1} \cdot ( 1 - \mathrm{v2} ^ { 3 } ) ^ { - 3 / 2 }",
    r"\frac { \mathrm{v0} \cdot ( \mathrm{v1} ) } { \mathrm{v2} }",
    r"\mathrm{v1} ^ 2 \mathrm{v2} ^ 2 + 2 \mathrm{v3} \mathrm{v2}",
    r"\sqrt { \frac { 4 \mathrm{v1} \mathrm{v2} } { \mathrm{v3} } }",
    r"\frac { 3 } { 2 } \mathrm{v0} \sin ( \mathrm{v1} \mathrm{v2} )",
    r"- \frac { \mathrm{v0} \mathrm{v1} } { \mathrm{v2} } \mathrm{v3}",
    r"\begin{bmatrix} \mathrm{v0} & 0 \\ 0 & \mathrm{v0} \end{bmatrix}",
    r"\frac { 3.3 } { 2 } \mathrm{v0} \sin ( \mathrm{v1} \mathrm{v2} )",
    r"\cos ^ 2 ( 500 \pi \mathrm{v0} ) \cos ^ 2 ( 100 \pi \mathrm{v0} )",
    r"\frac { \mathrm{v1} \mathrm{v2} \mathrm{v3} ^ 2 } { \mathrm{v4} }",
    r"\cos ^ 2 ( 550 \pi \mathrm{v0} ) \cos ^ 2 ( 100 \pi \mathrm{v0} )",
    r"\frac { \mathrm{v1} \mathrm{v2} } { 2.2 \mathrm{v3} \mathrm{v4} }",
    r"\cos ^ 2 ( 5000 \pi \mathrm{v0} ) \cos ^ 2 ( 100 \pi \mathrm{v0} )",
    r"\frac { \mathrm{v2} ^ { 2 } - \mathrm{v3} ^ { 2 } } { \mathrm{v4} }",
    r"4 \frac { \mathrm{v2} } { \mathrm{v3} } \mathrm{v4} \mathrm{v5} ^ 4",
    r"\frac { \pi } { 2 } + \cos ^ { - 2 } ( \frac { 1 } { \mathrm{v0} } )",
    r"776.7 \frac { \mathrm{v0} \mathrm{v1} ^ 2 } { 4 \pi \mathrm{v2} ^ 3 }",
    r"\mathrm{v0} \cdot ( 2 \mathrm{v1} - \mathrm{v0} ) < 4 \mathrm{v1} ^ 2",
    r"\mathrm{v0} \cdot ( 4 \mathrm{v1} - \mathrm{v0} ) < 4 \mathrm{v1} ^ 2",
    r"- ( \mathrm{v3} ^ 2 \mathrm{v1} ^ 2 \sqrt { \mathrm{v0} \mathrm{v4} } )",
    r"- \frac { \mathrm{v1} e ^ 2 \mathrm{v2} } { 2 \mathrm{v3} } \mathrm{v4}",
    r"- \frac { \mathrm{v6} e ^ 2 \mathrm{v3} } { 2 \mathrm{v4} } \mathrm{v5}",
    r"\frac { 1 } { 2 } \frac { \mathrm{v2} ^ 2 } { \mathrm{v1} \mathrm{v3} }",
    r"\mathrm{v0} \cdot ( 2.2 \mathrm{v1} - \mathrm{v0} ) < 4 \mathrm{v1} ^ 2",
    r"\frac { \mathrm{v0} } { 2 \mathrm{v1} \mathrm{v2} } \mathrm{v3} ^ { 2 }",
    r"- \frac { \mathrm{v1} e ^ 2 \mathrm{v2} } { 20 \mathrm{v3} } \mathrm{v4}",
    r"\frac { 2 } { \mathrm{v0} } \ln ( \frac { \mathrm{v1} } { \mathrm{v2} } )",
    r"\mathrm{v2} + \frac { \mathrm{v3} ^ 2 \mathrm{v1} ^ 2 } { 20 \mathrm{v4} }",
    r"\frac { \mathrm{v1} \mathrm{v2} \mathrm{v3} } { 4.4 \mathrm{v4} \mathrm{v5} }",
    r"\frac { \mathrm{v5} } { \sqrt { 2 \pi \mathrm{v6} \mathrm{v7} \mathrm{v8} } }",
    r"\frac { \sqrt { \mathrm{v2} ^ { 2 } - \mathrm{v3} ^ { 2 } } } { \mathrm{v2} }",
    r"\frac { 8 } { 3 } \mathrm{v2} \sqrt { 2 \mathrm{v3} } \mathrm{v1} ^ { 3 / 2 }",
    r"\frac { \mathrm{v1} ^ 3 } { ( 2 \mathrm{v2} + 1 ) \mathrm{v3} / \mathrm{v4} }",
    r"\frac { \mathrm{v0} } { 2 \mathrm{v1} \mathrm{v2} } ( \mathrm{v3} ^ { 2 } + 2 )",
    r"\frac { \mathrm{v0} ^ { 2 } } { 2 } \cdot \frac { \mathrm{v2} } { \mathrm{v1} }",
    r"\frac { \mathrm{v5} \mathrm{v6} } { 2 \pi \mathrm{v2} \mathrm{v3} \mathrm{v4} }",
    r"\frac { \mathrm{v0} \mathrm{v1} } { 20 \pi \mathrm{v2} \mathrm{v3} \mathrm{v4} }",
    r"\frac { 8 \mathrm{v0} \mathrm{v1} } { \mathrm{v2} \cdot ( 1 + \mathrm{v1} ) ^ 2 }",
    r"\frac { \mathrm{v0} \mathrm{v1} \mathrm{v2} } { 4 \pi \mathrm{v3} ^ 2 \mathrm{v4} }",
    r"\frac { \mathrm{v2} ^ { 3 } } { 96 \pi ^ 2 \mathrm{v3} \mathrm{v4} ^ 3 \mathrm{v5} }",
    r"\mathrm{v5} \frac { \mathrm{v1} ^ 2 \mathrm{v2} ^ 4 } { \mathrm{v3} \mathrm{v4} ^ 3 }",
    r"\frac { 5 \mathrm{v0} \sin ( \mathrm{v3} ) } { 7 \cdot ( \mathrm{v1} + \mathrm{v2} ) }",
    r"\frac { \mathrm{v0} \mathrm{v1} } { \mathrm{v2} } ( 10 + \frac { 1 } { \mathrm{v3} } )",
    r"\frac { 4 \pi ^ { 3 } \mathrm{v0} \mathrm{v1} } { \ln ( 8 \mathrm{v1} / \mathrm{v2} ) }",
    r"- ( \frac { \mathrm{v1} } { \sqrt { 4 \pi \mathrm{v2} \mathrm{v3} \mathrm{v4} ^ 3 } } )",
    r"\frac { 4 } { 3 } \frac { \mathrm{v2} } { \mathrm{v3} } \mathrm{v4} \mathrm{v5} ^ { 4 }",
    r"\sqrt { \frac { \mathrm{v0} \mathrm{v1} } { \pi \mathrm{v2} \mathrm{v3} \mathrm{v4} } }",
    r"\mathrm{v0} \mathrm{v1} - \mathrm{v2} \cdot ( \mathrm{v3} - 2 \mathrm{v4} + \mathrm{v5} )",
    r"- ( \frac { \mathrm{v0} \mathrm{v1} \mathrm{v2} } { 2 \pi \mathrm{v3} ^ 2 \mathrm{v4} } )",
    r"\pi \mathrm{v0} \mathrm{v1} ^ 2 \mathrm{v2} \ln ( \frac { \mathrm{v5} } { \mathrm{v4} } )",
    r"\mathrm{v5} \mathrm{v6} - \mathrm{v2} \cdot ( \mathrm{v4} - 20 \mathrm{v3} + \mathrm{v7} )",
    r"\mathrm{v0} \mathrm{v1} - \mathrm{v2} \cdot ( \mathrm{v3} - 20 \mathrm{v4} + \mathrm{v5} )",
    r"- ( \mathrm{v0} \frac { \mathrm{v1} ^ 2 \mathrm{v2} ^ 4 } { \mathrm{v3} \mathrm{v4} ^ 3 } )",
    r"\frac { 1 } { \mathrm{v1} } \mathrm{v2} - \frac { \mathrm{v5} } { \mathrm{v1} } \mathrm{v6}",
    r"\frac { \mathrm{v0} \cdot ( \mathrm{v1} - 10 ) } { \mathrm{v2} \mathrm{v3} } \mathrm{v4} ^ 2",
    r"\frac { 1 } { 2 } ( \mathrm{v4} - \mathrm{v0} + \sqrt { \mathrm{v0} ^ 2 - \mathrm{v4} ^ 2 } )",
    r"\frac { 1 } { 2 } ( \mathrm{v3} - \mathrm{v2} + \sqrt { \mathrm{v2} ^ 2 - \mathrm{v3} ^ 2 } )",
    r"\frac { \mathrm{v2} \mathrm{v3} ^ { 2 } } { 2 } [ \mathrm{v4} \mathrm{v5} + ( \mathrm{v7} ) ]",
    r"\frac { \mathrm{v0} \mathrm{v1} \mathrm{v2} ^ { 2 } } { 2 \pi \mathrm{v3} ^ { 2 } \mathrm{v4} }",
    r"\frac { \mathrm{v0} ^ { 4 } } { \mathrm{v1} } \frac { \mathrm{v2} - \mathrm{v3} } { \mathrm{v4} }",
    r"- 2 \mathrm{v0} \frac { \mathrm{v1} \mathrm{v2} } { \mathrm{v3} } \sin ( \mathrm{v1} \mathrm{v5} )",
    r"- 2.2 \mathrm{v2} \frac { \mathrm{v0} \mathrm{v1} } { \mathrm{v5} } \sin ( \mathrm{v0} ) \mathrm{v4}",
    r"- 2.2 \mathrm{v0} \frac { \mathrm{v1} \mathrm{v2} } { \mathrm{v3} } \sin ( \mathrm{v1} ) \mathrm{v4}",
    r"- \frac { 10 } { 3 } \mathrm{v0} \mathrm{v1} \cdot ( \mathrm{v2} ^ 2 - \mathrm{v3} ^ 2 ) \mathrm{v4}",
    r"\frac { \mathrm{v1} } { 20 } ( \mathrm{v2} ^ 2 - \frac { 2 \mathrm{v3} \mathrm{v4} } { \mathrm{v5} } )",
    r"- \frac { \mathrm{v2} \mathrm{v1} ^ { 2 } } { 32 \pi ^ { 2 } \mathrm{v3} ^ { 2 } \mathrm{v4} ^ { 4 } }",
    r"\mathrm{v3} + \frac { 1 } { \mathrm{v4} } \ln ( 1 + \mathrm{v4} \mathrm{v7} \mathrm{v2} / \mathrm{v6} )",
    r"\frac { \mathrm{v2} ^ 2 } { 2 \mathrm{v3} } + \frac { \mathrm{v4} ^ 2 } { 2 \mathrm{v3} } - 2 \mathrm{v5}",
    r"\frac { \mathrm{v1} } { \mathrm{v2} } ( \frac { \mathrm{v3} + \mathrm{v4} + \mathrm{v5} } { \sqrt { 3 } } )",
    r"- ( \frac { \mathrm{v0} ^ 2 \mathrm{v1} } { \mathrm{v2} \mathrm{v3} ^ 2 } \cos ( \mathrm{v4} \mathrm{v5} ) )",
    r"\frac { \mathrm{v4} } { \mathrm{v5} } ( \frac { \mathrm{v9} + \mathrm{v10} + \mathrm{v8} } { \sqrt { 6 } } )",
    r"\frac { 4 } { 3 } \mathrm{v0} \cos ( \mathrm{v2} ) \sqrt { \frac { 8 \mathrm{v1} ^ { 3 } } { \mathrm{v3} } }",
    r"\frac { \mathrm{v5} } { \mathrm{v4} } ( \frac { \mathrm{v10} + \mathrm{v11} + \mathrm{v12} } { \sqrt { 3 } } )",
    r"\frac { \mathrm{v5} } { \mathrm{v4} } ( \frac { \mathrm{v10} + \mathrm{v11} + \mathrm{v12} } { \sqrt { 6 } } )",
    r"\frac { \mathrm{v0} } { 4 \mathrm{v1} \mathrm{v2} } \frac { \sin ( \mathrm{v3} \mathrm{v4} ) } { \mathrm{v3} }",
    r"\frac { \mathrm{v4} } { 4 \pi \mathrm{v1} \cdot ( 1 + \mathrm{v2} ) } \frac { \mathrm{v3} } { \mathrm{v0} ^ 2 }",
    r"\frac { ( \sin ( \mathrm{v3} ) ) ( \mathrm{v3} - \sin ( \mathrm{v3} ) ) } { ( 10 - \cos ( \mathrm{v3} ) ) ^ 2 }",
    r"\frac { \mathrm{v5} } { \mathrm{v4} } ( \frac { \mathrm{v10} + \mathrm{v11} + \mathrm{v12} } { \sqrt { 3.3 } } )",
    r"\frac { \mathrm{v0} } { \mathrm{v1} } ( 2 - \frac { 2 \mathrm{v2} } { \mathrm{v1} ^ { 2 } \mathrm{v3} ^ { 2 } } )",
    r"\mathrm{v0} \mathrm{v1} ^ 2 [ 2 + \cos ( \frac { \mathrm{v2} \mathrm{v3} \sin ( \mathrm{v4} ) } { \mathrm{v5} } ) ]",
    r"- ( \sqrt { \frac { 96 \pi ^ 2 \mathrm{v1} ^ 3 \mathrm{v2} \mathrm{v3} \mathrm{v4} \mathrm{v5} } { \mathrm{v6} } } )",
    r"\frac { 8 \sqrt { 2 } } { 3 } \mathrm{v0} \cos ( \mathrm{v2} ) \sqrt { \frac { \mathrm{v1} ^ { 3 } } { \mathrm{v3} } }",
    r"\frac { \mathrm{v0} } { \mathrm{v1} } - \frac { 2 \mathrm{v2} \mathrm{v0} } { \mathrm{v1} ^ { 3 } \mathrm{v3} ^ { 2 } }",
    r"- \mathrm{v2} \mathrm{v3} \mathrm{v4} ^ 2 \mathrm{v5} \cos ( \mathrm{v2} ) \cdot ( \mathrm{v6} - \mathrm{v4} \mathrm{v7} )",
    r"\mathrm{v0} \cdot ( \frac { \mathrm{v1} } { \mathrm{v2} } ) ^ { - ( \mathrm{v3} + 2 ) / 3 } \mathrm{v4} ^ { - \mathrm{v3} }",
    r"\frac { \mathrm{v0} e ^ 2 \mathrm{v2} } { 2 \mathrm{v3} } ( 1 - \frac { \mathrm{v4} ^ 2 } { \mathrm{v5} ^ 2 } ) \mathrm{v6}",
    r"\pi \mathrm{v0} \sqrt { 1 + ( \pi \mathrm{v1} ) ^ { 3 } } + \frac { \mathrm{v0} } { \mathrm{v1} } \arcsinh ( \pi \mathrm{v1} )",
    r"\frac { \mathrm{v0} \mathrm{v1} \mathrm{v2} \mathrm{v6} } { 4 \pi \mathrm{v7} \cdot ( \mathrm{v7} + \mathrm{v0} ) } \mathrm{v5}",
    r"\frac { 1 } { \mathrm{v2} \mathrm{v3} ^ { 2 } } ( \mathrm{v4} + \frac { 1 } { 2 } \mathrm{v5} \mathrm{v6} \mathrm{v3} ^ { 2 } )",
    r"\mathrm{v0} \mathrm{v1} \ln ( \frac { \mathrm{v5} } { e ^ { - \mathrm{v2} \mathrm{v3} } + e ^ { - \mathrm{v2} \mathrm{v4} } } )",
    r"\frac { 10 } { \mathrm{v2} \mathrm{v3} ^ { 2 } } ( \mathrm{v4} - \frac { 1 } { 2 } \mathrm{v5} \mathrm{v6} \mathrm{v3} ^ { 2 } )",
    r"\frac { 2 } { 2 } [ ( \frac { 1 - \mathrm{v0} } { 1 + \mathrm{v0} } ) ^ 2 + ( \frac { 1 - \mathrm{v1} } { 1 + \mathrm{v1} } ) ^ 2 ]",
    r"\frac { 1.1 } { 2 } [ ( \frac { 1 - \mathrm{v0} } { 1 + \mathrm{v0} } ) ^ 2 + ( \frac { 1 - \mathrm{v1} } { 1 + \mathrm{v1} } ) ^ 2 ]",
    r"\frac { \mathrm{v3} } { \mathrm{v4} } \cos ( \frac { \mathrm{v5} } { \mathrm{v4} } \mathrm{v6} + \mathrm{v5} \mathrm{v7} ) \mathrm{v8}",
    r"- ( \sqrt { \frac { 2 } { \mathrm{v0} } } \frac { 1 } { \mathrm{v1} } \sin ( \frac { \pi } { \mathrm{v0} } ) \mathrm{v1} \mathrm{v2} )",
    r"\frac { \mathrm{v8} } { \mathrm{v4} } \cos ( \frac { \mathrm{v3} } { \mathrm{v4} } \mathrm{v9} + \mathrm{v3} \mathrm{v10} ) \mathrm{v6}",
    r"\frac { 1 } { 2 } \mathrm{v4} \cdot ( \mathrm{v3} ) \mathrm{v5} - \frac { 1 } { 4 } \mathrm{v6} \cdot ( \mathrm{v3} ) \mathrm{v5} ^ 2 \mathrm{v7}",
    r"- ( - \frac { e ^ { 4 } } { 12 \pi ^ { 2 } \mathrm{v0} ^ { 2 } \mathrm{v1} ^ { 3 } \mathrm{v2} ^ { 2 } } \cdot \frac { 1 } { \mathrm{v3} ^ { 2 } } )",
    r"\frac { \mathrm{v0} \mathrm{v1} ^ { 2 } } { 2 \mathrm{v2} \mathrm{v3} ^ { 2 } \cosh ^ { 2 } ( \frac { \mathrm{v1} } { 2 \mathrm{v2} \mathrm{v3} } ) }",
    r"\sqrt { \frac { \mathrm{v0} \mathrm{v1} } { 4 \mathrm{v2} } ( 1 + \sqrt { 1 + \frac { 4 \mathrm{v3} \mathrm{v2} ^ 2 } { \mathrm{v0} \mathrm{v1} } } ) }",
    r"\frac { 1 } { 2 } \mathrm{v0} \mathrm{v1} \cdot ( \mathrm{v2} ^ 2 - \mathrm{v3} ^ 2 ) + \mathrm{v4} \cdot ( \cos ( \mathrm{v5} ) - \cos ( \mathrm{v6} ) )",
    r"\frac { \mathrm{v2} - \mathrm{v3} - \mathrm{v4} \cdot ( \mathrm{v5} - \mathrm{v6} ) } { \sqrt { 1 - ( \frac { \mathrm{v4} } { \mathrm{v7} } ) ^ { 2 } } }",
    r"\frac { \mathrm{v2} - \mathrm{v3} + \mathrm{v4} \cdot ( \mathrm{v5} - \mathrm{v6} ) } { \sqrt { 1 - ( \frac { \mathrm{v4} } { \mathrm{v7} } ) ^ { 2 } } }",
    r"\frac { \mathrm{v0} - \sqrt { \mathrm{v0} ^ 2 - \frac { 40 } { 4 \pi \mathrm{v1} } \frac { \mathrm{v2} \mathrm{v3} } { \mathrm{v4} \mathrm{v5} } } } { 2 }",
    r"\frac { \mathrm{v6} - \mathrm{v7} - \mathrm{v8} \cdot ( \mathrm{v9} - \mathrm{v10} ) } { \sqrt { 1 - ( \frac { \mathrm{v8} } { \mathrm{v11} } ) ^ { 3 } } }",
    r"\frac { 1 } { 2 \mathrm{v1} } ( \frac { \mathrm{v2} \mathrm{v3} } { \mathrm{v4} } - \frac { \mathrm{v5} } { 2 \mathrm{v6} } \mathrm{v7} \mathrm{v4} ) ^ { 3 }",
    r"\frac { 1 } { 12 \pi } \frac { \mathrm{v0} ^ 4 \mathrm{v1} ^ 2 } { \mathrm{v2} ^ 2 \mathrm{v3} \mathrm{v4} ^ 3 } \frac { \mathrm{v5} ^ 4 } { \mathrm{v6} ^ 4 }",
    r"\frac { 2 } { 12 \pi } \frac { \mathrm{v0} ^ 4 \mathrm{v1} ^ 2 } { \mathrm{v2} ^ 2 \mathrm{v3} \mathrm{v4} ^ 3 } \frac { \mathrm{v5} ^ 4 } { \mathrm{v6} ^ 4 }",
    r"( \frac { \mathrm{v0} } { \mathrm{v1} } ) ^ 4 - \frac { \mathrm{v0} } { \mathrm{v1} } - \frac { \mathrm{v2} ^ 2 } { 32 \pi ^ 2 \mathrm{v3} \mathrm{v1} ^ 4 \mathrm{v4} }",
    r"( \frac { \mathrm{v0} } { \mathrm{v1} } ) ^ 4 - \frac { \mathrm{v0} } { \mathrm{v1} } - \frac { \mathrm{v2} ^ 2 } { 64 \pi ^ 2 \mathrm{v3} \mathrm{v1} ^ 4 \mathrm{v4} }",
    r"\frac { 2 } { 2 } \mathrm{v1} \mathrm{v2} ^ 2 + \frac { 1 } { 2 } \mathrm{v3} \mathrm{v4} ^ 2 - \frac { \mathrm{v5} \mathrm{v1} \mathrm{v3} } { \mathrm{v6} + \mathrm{v7} }",
    r"\frac { \mathrm{v0} \mathrm{v1} \mathrm{v2} \mathrm{v3} } { \mathrm{v4} \sqrt { \mathrm{v1} ^ { 3 } \cos ^ 2 ( \mathrm{v5} ) + \mathrm{v0} ^ 2 \sin ^ 2 ( \mathrm{v5} ) } }",
    r"\sqrt { \mathrm{v0} ^ 2 - \mathrm{v1} \mathrm{v2} \cdot [ ( \mathrm{v3} + \mathrm{v4} ) \mathrm{v5} + ( \mathrm{v3} - \mathrm{v4} ) \frac { \sin ( 20 \mathrm{v5} ) } { 2 } ] }",
    r"\frac { 1 } { 2 \mathrm{v2} } ( \mathrm{v7} ^ { 2 } + \mathrm{v8} ^ { 2 } ) - \frac { \mathrm{v2} e ^ { 4 } } { 32 \mathrm{v5} ^ { 2 } } \cdot \frac { 1 } { \mathrm{v6} ^ { 2 } }",
    r"\frac { 1 } { 2 \mathrm{v2} } ( \mathrm{v3} ^ { 2 } + \mathrm{v4} ^ { 2 } ) - \frac { \mathrm{v2} e ^ { 4 } } { 32 \mathrm{v5} ^ { 2 } } \cdot \frac { 1 } { \mathrm{v6} ^ { 2 } }",
    r"\frac { 1 } { \mathrm{v3} \mathrm{v4} ^ { 2 } } ( \mathrm{v5} ^ { 2 } - \frac { 1 } { 4 } \mathrm{v6} ^ { 2 } \mathrm{v7} ^ { 2 } \mathrm{v4} ^ { 4 } ) + \frac { \mathrm{v6} \mathrm{v8} } { \mathrm{v4} }",
    r"\frac { \mathrm{v2} } { \mathrm{v1} } ( \frac { 4 } { 15 } \mathrm{v3} ^ { 5 / 2 } + \frac { \pi ^ { 2 } } { 6 \mathrm{v4} ^ { 2 } } \mathrm{v3} ^ { 1 / 2 } - \frac { 7 \pi ^ { 4 } } { 1440 \mathrm{v4} ^ { 4 } } \mathrm{v3} ^ { - 3 / 2 } )",
    r"\frac { \mathrm{v8} } { \mathrm{v4} } \cos [ \frac { \mathrm{v3} } { \sqrt { 3 } \mathrm{v4} } ( \mathrm{v9} + \mathrm{v10} + \mathrm{v11} ) - \mathrm{v3} \mathrm{v12} ] ( \frac { - \mathrm{v5} + 2 \mathrm{v6} - \mathrm{v7} } { \sqrt { 6 } } )",
    r"\frac { 4 \mathrm{v2} \mathrm{v3} ^ { 5 / 2 } } { 15 \mathrm{v1} } [ 1 + \frac { 5 } { 8 } ( \frac { \pi \mathrm{v5} \mathrm{v6} } { \mathrm{v3} } ) ^ { 2 } - \frac { 7 } { 384 } ( \frac { \pi \mathrm{v5} \mathrm{v6} } { \mathrm{v3} } ) ^ { 4 } ]",
]


# read by the fast parser (a regression to "always None" must fail)
HANDLED = [
    r"\frac { \mathrm{v0} } { 2 }", r"2 / 4", r"- \mathrm{v1} + 2 \cdot 3", r"2 \frac { 1 } { 2 }", r"e ^ { \mathrm{v0} }",
    r"\sin ^ { - 1 } ( \mathrm{v0} )", r"\sqrt [ 3 ] { \mathrm{v0} }", r"2 | \mathrm{v0} | ^ 2", r"\mathrm{v0} ( \mathrm{v1} + 1 )",
    r"1.50", r"\ln ( \mathrm{v0} )", r"\mathrm{v0} \cdot \mathrm{v1} / \mathrm{v2} \cdot 3", r"\pi ( \mathrm{v2} ^ 2 + 1 )",
    r"2 \pi ( \mathrm{v2} ^ 2 + \mathrm{v3} ^ 2 + \mathrm{v4} ^ 2 ) ^ { 3 / 2 }",
]
# outside the subset, or readings the parser cannot be sure of: left to latex2sympy
REFUSED = [
    r"\mathrm{v0} ( \mathrm{v1} )", r"\mathrm{v0} ^ 2 ( \mathrm{v1} )", r"\pi ( \mathrm{v1} )", r"\mathrm{v0} [ \mathrm{v1} ]",
    r"\sin [ \mathrm{v0} ] \mathrm{v1}", r"\ln \sinh [ \mathrm{v0} ]", r"\mathrm{v12} _ { 3 }", r"\mathrm{v0} ^ \mathrm{v1} ^ 2",
    r"| \mathrm{v0} | \mathrm{v1} | \mathrm{v2} |", r"\mathrm{v0} = 2", r"[ \mathrm{v0} , \mathrm{v1} ]", r"\pm \mathrm{v0}",
    r"\frac { 1 } { 2", r"x + y", r"( )", r"\mathrm{v0} ( \mathrm{v1} ^ { 2 } _ { 3 } )", r"\mathrm{v0} ( \mathrm{v1} ^ { 2 } ) ^ 2",
]


def _config():
    conversion._l2s_text("x")  # builds the conversion config
    return conversion._L2S_CONFIG


def _repr(x) -> str:
    from sympy import srepr

    try:
        return srepr(x)
    except Exception as e:  # noqa: BLE001 - printing can evaluate (an Add orders its terms numerically)
        return f"srepr error {type(e).__name__}"


def _check(text: str) -> bool:
    """Whether the fast parser read ``text``; when it did, its tree is the plain parse's."""
    from studybench.verify.reading.l2s_parse import parse_plain, parse_sll

    fast = fastparse.fast_parse(text)
    if fast is None:
        return False
    plain = parse_plain(text, _config())  # raises if latex2sympy refuses what the fast parser read
    assert type(fast) is type(plain), text
    assert fast == plain, text
    assert _repr(fast) == _repr(plain), text
    sll = parse_sll(text, _config())  # the parse the verifier used first before the fast parser
    assert sll is None or (sll == fast and _repr(sll) == _repr(fast)), text
    return True


@pytest.mark.parametrize("text", EDGES)
def test_edge_cases_read_as_latex2sympy_reads_them(text: str) -> None:
    _check(text)


@pytest.mark.parametrize("text", SYNTH)
def test_synthetic_texts_read_as_latex2sympy_reads_them(text: str) -> None:
    _check(text)


@pytest.mark.parametrize("text", CORPUS)
def test_real_aliased_texts_read_as_latex2sympy_reads_them(text: str) -> None:
    _check(text)


def test_the_subset_is_read_and_the_rest_refused() -> None:
    assert all(_check(t) for t in HANDLED)
    assert [t for t in REFUSED if fastparse.fast_parse(t) is not None] == []
    # most of the synthetic and real texts are in the subset
    assert sum(fastparse.fast_parse(t) is not None for t in SYNTH) >= len(SYNTH) // 2
    assert sum(fastparse.fast_parse(t) is not None for t in CORPUS) >= len(CORPUS) * 8 // 10


def test_switch_turns_the_fast_parser_off(monkeypatch: pytest.MonkeyPatch) -> None:
    text = r"\frac { \mathrm{v0} } { 2 }"
    assert fastparse.fast_parse(text) is not None
    monkeypatch.setattr(fastparse, "ENABLED", False)
    assert fastparse.fast_parse(text) is None
    conversion._l2s_text.cache_clear()
    assert conversion._l2s_text(text) is not None  # latex2sympy parses it then
    conversion._l2s_text.cache_clear()


def test_conversion_uses_the_fast_parser_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from sympy import srepr

    from studybench.verify.reading.l2s_parse import parse_plain

    text = r"\frac { \mathrm{v0} } { 2 } + \sin ( \mathrm{v1} ) ^ { 2 }"
    want = srepr(parse_plain(text, _config()))

    def refuse(*_a, **_k):
        raise AssertionError("latex2sympy called")

    monkeypatch.setattr(conversion, "parse_sll", refuse)
    monkeypatch.setattr(conversion, "parse_plain", refuse)
    conversion._l2s_text.cache_clear()
    try:
        got = srepr(conversion._l2s_text(text))  # a LatexError if latex2sympy were asked
    finally:
        conversion._l2s_text.cache_clear()
    assert got == want


def test_real_golds_read_as_latex2sympy_reads_them() -> None:
    # every dev-pair gold box, aliased as the verifier does, that the fast parser reads gives the plain tree
    import json

    from _support import require_data_file
    from test_dev_pairs import _pairs_path

    from studybench.records import gold_boxes
    from studybench.verify.reading.aliasing import new_aliases

    path = _pairs_path() or Path("dev_pairs.jsonl")
    require_data_file(path, "the verifier dev pairs")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    boxes = sorted({b for r in rows for b in gold_boxes(r["gold"], r["answer_type"], r.get("type_sequence") or "")})
    read = seen = 0
    for box in boxes:
        try:
            _, conv = conversion._convert(box, new_aliases(box))
        except conversion.LatexError:
            continue
        for reading in conversion._function_readings(conv, gold=True):  # brace-less arguments made explicit
            seen += 1
            read += _check(" ".join(reading).strip())
    assert seen >= 60
    assert read >= seen // 3


def test_warm_up_parses_with_antlr_and_restores_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    # the worker's warm-up is for ANTLR's prediction cache: the fast parser must not take its texts
    calls = []
    real = conversion.parse_sll

    def counting(text, config):
        calls.append(text)
        return real(text, config)

    monkeypatch.setattr(conversion, "parse_sll", counting)
    conversion._l2s_text.cache_clear()
    try:
        conversion.warm_up_parser()
    finally:
        conversion._l2s_text.cache_clear()
    assert fastparse.ENABLED is True
    assert r"\frac { 3 } { 2 } \mathrm{v0} \mathrm{v1} \mathrm{v2}" in calls  # \frac{3}{2} n k T, in the subset
