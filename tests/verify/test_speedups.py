"""The verifier's parse speed-ups change no result: SLL-first parsing and the warmed prediction cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from studybench.verify.reading import conversion, l2s_parse

pytest.importorskip("latex2sympy2_extended")

# expressions that SLL decides alone, ones that need full-context (LL) prediction, and syntax errors
TEXTS = [
    r"\frac{a}{b} + \sqrt{x^{2} + 1}",
    r"-\frac{e^{4}}{12 \pi^{2} \varepsilon_{0}^{2} c^{3} m^{2}} \cdot \frac{1}{r^{2}}",
    r"\frac{1}{2} m_{1} \dot{y}_{1}^{2} + \frac{1}{2}\left(m_{2} + \frac{I}{r^{2}}\right) \dot{y}_{2}^{2}",
    r"k T \ln \frac{N}{e^{-\beta E_{1}}+e^{-\beta E_{2}}}",
    r"(0, 1]",
    r"a < x \leq b",
    r"x = \frac{-b \pm \sqrt{b^2 - 4ac}}{2a}",
    r"\sin \theta \cos \phi",
    r"\frac{",
    r"x +* y",
]


def _plain(text: str) -> str:
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig
    from sympy import srepr

    cfg = ConversionConfig(lowercase_symbols=False, interpret_as_mixed_fractions=False,
                           interpret_simple_eq_as_assignment=False)
    try:
        return srepr(latex2sympy(text, conversion_config=cfg))
    except Exception as e:  # noqa: BLE001
        return f"error {type(e).__name__}"


def _ours(text: str) -> str | None:
    """The verifier's parse of ``text`` (caches cleared) as srepr; ``None`` when it refuses it."""
    from sympy import srepr

    conversion._l2s_text.cache_clear()
    try:
        return srepr(conversion._l2s_text(text))
    except conversion.LatexError:
        return None


def _same_as_plain(text: str) -> bool:
    plain = _plain(text)
    return _ours(text) == (None if plain.startswith("error") else plain)


def test_sll_first_falls_back_to_plain_parse_on_syntax_errors() -> None:
    conversion._l2s_text("x")  # builds the conversion config
    assert l2s_parse.parse_sll(r"\frac{", conversion._L2S_CONFIG) is None
    assert l2s_parse.parse_sll(r"x ^ { 2 }", conversion._L2S_CONFIG) is not None


# aliased texts as the verifier builds them (symbols become \mathrm{vN}), with every script shape
SCRIPTED = [
    r"\mathrm{v0} ^ { 2 }", r"\mathrm{v0} ^ 2", r"4 \mathrm{v2} \mathrm{v3} ^ { 4 }", r"x ^ { 2 } _ { 0 } + y _ { 1 } ^ { 3 }",
    r"x _ 1 ^ 2 - x ^ 2 _ 1", r"\frac { \mathrm{v0} ^ { 2 } } { 2 \mathrm{v1} \mathrm{v2} }", r"e ^ { - \frac { x ^ 2 } { 2 } }",
    r"[ \mathrm{v0} ^ { - 1 } , + \infty )", r"( 2 \pi ) ^ { 3 } \mathrm{v1} \mathrm{v2} ^ { 2 } \mathrm{v0}",
    r"\int _ { 0 } ^ { \infty } x ^ 2 e ^ { - x } d x", r"\sum _ { n = 1 } ^ { N } \frac { 1 } { n ^ 2 }", r"x ^ { y ^ { 2 } }",
    r"\mathrm{v1} ^ 2 _ 0", r"a _ { b _ { c } }", r"x ^ 2 = y _ 0 ^ { 3 / 2 }", r"\sqrt [ 3 ] { x ^ 2 }",
    r"\cos ^ 2 ( \mathrm{v1} ) + \sin ^ { 2 } \mathrm{v1}", r"\ln ( x ^ 2 ) ^ 3", r"\mathrm{v0} ^ { 2 } \mathrm{v1} ^ { - 1 }",
    r"2.5 \times 10 ^ { - 3 } \mathrm{v0}", r"10 ^ 8", r"x ^ _", r"x ^ { 2", r"_ { 0 } x",
]


def test_script_rule_is_active_and_agrees_with_full_context_prediction() -> None:
    # The script-order rule answers one grammar decision from the tokens; every answer must be the one
    # ANTLR's full LL prediction gives. Log both on the same parses.
    from antlr4.atn.ParserATNSimulator import ParserATNSimulator
    from latex2sympy2_extended import latex2sympy2 as mod

    conversion._l2s_text("x")
    cfg = conversion._L2S_CONFIG
    assert l2s_parse.script_rule_active(cfg)
    rule_cls = l2s_parse._STATE["sll"][0]
    probe = rule_cls(None, None, False, config=cfg).create_parser("x")._interp
    decision = type(probe).decision
    seen: list[tuple[int, int]] = []

    class Logged(type(probe)):  # the rule's answer, then LL's on the same stream
        def adaptivePredict(self, stream, d, outer):  # noqa: N802
            if d != decision:
                return ParserATNSimulator.adaptivePredict(self, stream, d, outer)
            mine = super().adaptivePredict(stream, d, outer)
            ll = ParserATNSimulator.adaptivePredict(self, stream, d, outer)
            seen.append((mine, ll))
            return ll

    class LL(mod._Latex2Sympy):
        def create_parser(self, text):
            p = super().create_parser(text)
            p._interp = Logged(p, p.atn, p.decisionsToDFA, p.sharedContextCache)
            return p

    for text in SCRIPTED + TEXTS:
        try:
            LL(None, None, False, config=cfg).parse(mod.normalize_latex(text, mod.NormalizationConfig()))
        except Exception:  # noqa: BLE001 - syntax errors are part of the corpus
            pass
    assert len(seen) >= 40
    assert all(m == ll for m, ll in seen), [p for p in seen if p[0] != p[1]]


@pytest.mark.parametrize("text", TEXTS + SCRIPTED)
def test_parse_equals_plain_parse(text: str) -> None:
    # SLL first with the script-order rule (and the hand-written parser) give latex2sympy's own tree
    assert _same_as_plain(text)


def test_superscripts_need_no_full_context_prediction() -> None:
    # Counts work, not time: a superscripted symbol used to send every parse to full-context (LL) prediction.
    from antlr4.atn.ParserATNSimulator import ParserATNSimulator

    conversion._l2s_text("x")
    calls = []
    orig = ParserATNSimulator.execATNWithFullContext

    def counting(self, *a):  # noqa: ANN001
        calls.append(1)
        return orig(self, *a)

    ParserATNSimulator.execATNWithFullContext = counting
    try:
        conversion._l2s_text.cache_clear()
        for text in SCRIPTED[:4] + SCRIPTED[5:9]:  # the shapes real answers have (not an unbraced x _ 1 ^ 2)
            conversion._l2s_text(text)
    finally:
        ParserATNSimulator.execATNWithFullContext = orig
    assert calls == []


def test_real_golds_parse_as_the_plain_parse_does() -> None:
    # every gold box of the dev pairs (aliased as the verifier does) parses to the plain parse's tree
    import json
    import random

    from _support import require_data_file
    from test_dev_pairs import _pairs_path

    from studybench.records import gold_boxes
    from studybench.verify.reading.aliasing import new_aliases

    path = _pairs_path() or Path("dev_pairs.jsonl")
    require_data_file(path, "the verifier dev pairs")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    boxes = sorted({b for r in rows for b in gold_boxes(r["gold"], r["answer_type"], r.get("type_sequence") or "")})
    random.Random(0).shuffle(boxes)
    checked = 0
    for box in boxes[:120]:
        try:
            al, conv = conversion._convert(box, new_aliases(box))
        except conversion.LatexError:
            continue
        text = " ".join(conv).strip()
        assert _same_as_plain(text), box
        checked += 1
    assert checked >= 60


def test_warm_up_parser_never_raises_and_reads_its_corpus() -> None:
    conversion.warm_up_parser()
    readable = 0
    for text in conversion.WARM_UP_LATEX:
        try:
            conversion.to_sympy(text)
            readable += 1
        except conversion.LatexError:
            pass
    assert readable >= len(conversion.WARM_UP_LATEX) // 2
