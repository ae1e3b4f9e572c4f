"""The verifier's parse speed-ups change no result: SLL-first parsing and the warmed prediction cache."""

from __future__ import annotations

import pytest

from studybench.verify import conversion

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


@pytest.mark.parametrize("text", TEXTS)
def test_sll_first_parse_equals_plain_parse(text: str) -> None:
    from sympy import srepr

    conversion._l2s_text.cache_clear()
    try:
        got = srepr(conversion._l2s_text(text))
    except conversion.LatexError:
        got = None
    plain = _plain(text)
    if plain.startswith("error"):
        assert got is None
    else:
        assert got == plain


def test_sll_first_falls_back_to_ll() -> None:
    # at least one of the texts needs full-context prediction: SLL gives up (None) and the plain parse decides
    conversion._l2s_text("x")  # builds the conversion config
    outcomes = [conversion._sll_first(t, conversion._L2S_CONFIG) for t in TEXTS[:8]]
    assert any(o is None for o in outcomes) and any(o is not None for o in outcomes)


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
