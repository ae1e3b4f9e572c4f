r"""latex2sympy2_extended's parse, made cheap: SLL prediction plus an exact rule for script order.

The ANTLR parse is most of the verifier's cost, and most of the parse is *prediction*. ANTLR predicts
in two modes: SLL (cached in a DFA shared by all parses of a process, cheap once warm) and full-context
LL (never cached, simulated afresh at every use). ANTLR guarantees that a parse which succeeds in SLL
mode gives the very tree LL gives, so :func:`parse_sll` tries SLL first and returns ``None`` when SLL
fails; the caller then parses the usual way.

In latex2sympy2_extended's grammar one decision made SLL fail for every superscripted symbol
(``x^{2}``, ``\mathrm{v0} ^ 2``): in ``atom_expr`` an atom may carry ``^…_…``, ``_…^…``, ``_…``,
``^…`` or no script, and SLL, which merges the contexts a rule is called from, cannot see that no
``_`` follows the superscript, picks the first alternative and hits a syntax error; the full LL
re-parse then cost three quarters of the verifier's time on the dev pairs. That decision needs only the
next few tokens: a script is ``^`` or ``_`` followed by a braced group (or one number), and the
alternative is fixed by the token after it. :class:`_ScriptOrder` answers exactly that decision from
the tokens when it can (and otherwise defers to ANTLR); the answer equals LL's choice on every
decision in the real inputs (checked by ``tests/verify/test_speedups.py`` against a plain LL parse with the
decision logged), and a start-up self-check compares whole parses on probes and switches the rule off
if any differs (another latex2sympy2_extended version).

Model text is only tokenised and parsed here; nothing is evaluated.
"""

from __future__ import annotations

from typing import Any

__all__ = ["parse_plain", "parse_sll", "script_rule_active"]

_STATE: dict[str, Any] = {}

_PROBES = (
    r"\mathrm{v0} ^ { 2 }", r"x ^ 2", r"x ^ { 2 } _ { 0 }", r"x _ { 0 } ^ { 2 }", r"x _ { 0 }", r"x _ 1 + y ^ 2",
    r"\frac { \mathrm{v0} ^ { 2 } } { 2 \mathrm{v1} }", r"4 \mathrm{v2} \mathrm{v3} ^ { 4 }", r"e ^ { - x ^ 2 }",
    r"( a + b ) ^ { 3 } c _ { 2 }", r"\int _ { 0 } ^ { 1 } x ^ 2 d x", r"\sum _ { n = 1 } ^ { N } n ^ 2",
    r"[ \mathrm{v0} ^ { - 1 } , + \infty )", r"x ^ { 2 } _ 1", r"\sqrt { x ^ 2 + y _ 0 ^ 2 }",
)


def _setup(config: Any) -> None:
    """Build the SLL parser class once per process; ``_STATE['sll']`` is ``False`` when unavailable."""
    try:
        from antlr4.atn.ParserATNSimulator import ParserATNSimulator
        from antlr4.atn.PredictionMode import PredictionMode
        from antlr4.Token import Token
        from latex2sympy2_extended import latex2sympy2 as mod
    except Exception:  # another latex2sympy2_extended / antlr4 layout: always the plain parse
        _STATE["sll"] = False
        return

    class _ScriptOrder(ParserATNSimulator):  # type: ignore[misc, valid-type]
        decision = -1
        caret = under = lbrace = rbrace = number = -2

        def _script_end(self, stream: Any, i: int) -> int | None:
            """Index (``LA`` position) just after the script whose ``^``/``_`` is at ``i``; ``None`` if unsure."""
            t = stream.LA(i + 1)
            if t == self.lbrace:
                depth, j = 0, i + 1
                while True:
                    tt = stream.LA(j)
                    if tt == Token.EOF:
                        return None
                    if tt == self.lbrace:
                        depth += 1
                    elif tt == self.rbrace:
                        depth -= 1
                        if depth == 0:
                            return j + 1
                    j += 1
            if t == self.number and stream.LA(i + 2) not in (self.caret, self.under):
                return i + 2
            return None

        def adaptivePredict(self, stream: Any, decision: int, outer: Any) -> int:  # noqa: N802 - ANTLR's name
            if decision == self.decision:
                t = stream.LA(1)
                if t == self.caret:
                    j = self._script_end(stream, 1)
                    if j is not None:
                        return 1 if stream.LA(j) == self.under else 4
                elif t == self.under:
                    j = self._script_end(stream, 1)
                    if j is not None:
                        return 2 if stream.LA(j) == self.caret else 3
                else:
                    return 5  # no script: the optional block's exit
            return super().adaptivePredict(stream, decision, outer)

    base = mod._Latex2Sympy
    parser_cls: Any = None

    class _Sll(base):  # type: ignore[misc, valid-type]
        script_rule = True

        def create_parser(self, latex_str: str) -> Any:
            parser = super().create_parser(latex_str)
            if self.script_rule:
                parser._interp = _ScriptOrder(parser, parser.atn, parser.decisionsToDFA, parser.sharedContextCache)
            parser._interp.predictionMode = PredictionMode.SLL
            return parser

    try:
        parser_cls = type(base(None, None, False, config=config).create_parser("x"))
        decisions = [d for d, s in enumerate(parser_cls.atn.decisionToState) if s.ruleIndex == parser_cls.RULE_atom_expr]
        if len(decisions) == 1:
            _ScriptOrder.decision = decisions[0]
            _ScriptOrder.caret, _ScriptOrder.under = parser_cls.CARET, parser_cls.UNDERSCORE
            _ScriptOrder.lbrace, _ScriptOrder.rbrace, _ScriptOrder.number = (
                parser_cls.L_BRACE, parser_cls.R_BRACE, parser_cls.NUMBER)
        else:
            _Sll.script_rule = False
    except Exception:  # noqa: BLE001 - no rule, plain SLL
        _Sll.script_rule = False
    _STATE["sll"] = (_Sll, mod.normalize_latex, mod.NormalizationConfig, mod.latex2sympy)
    if _Sll.script_rule and not _self_check(config):
        _Sll.script_rule = False


def _sll(text: str, config: Any) -> Any:
    cls, normalize, norm_config, _ = _STATE["sll"]
    try:
        return cls(None, None, False, config=config).parse(normalize(text, norm_config()))
    except (RecursionError, MemoryError):
        raise
    except Exception:
        return None


def _self_check(config: Any) -> bool:
    """Every probe of :data:`_PROBES` that parses with the script rule gives the plain parse's tree (srepr)."""
    from sympy import srepr

    for text in _PROBES:
        got = _sll(text, config)
        if got is None:  # SLL may fail (another decision needs full context); only a different tree counts
            continue
        try:
            if srepr(got) != srepr(parse_plain(text, config)):
                return False
        except Exception:  # noqa: BLE001 - a probe the plain parse refuses: the rule is not trusted
            return False
    return True


def script_rule_active(config: Any) -> bool:
    """Whether the script-order rule is in use in this process (after its self-check).

    Args:
        config: latex2sympy2_extended's ``ConversionConfig``.

    Returns:
        ``True`` when :func:`parse_sll` predicts the ``atom_expr`` script order from the tokens.
    """
    if "sll" not in _STATE:
        _setup(config)
    return bool(_STATE["sll"]) and bool(_STATE["sll"][0].script_rule)


def parse_plain(text: str, config: Any) -> Any:
    """latex2sympy2_extended's own parse (full LL prediction when SLL is not enough).

    Args:
        text: aliased LaTeX.
        config: latex2sympy2_extended's ``ConversionConfig``.

    Returns:
        The SymPy object.

    Raises:
        Exception: whatever latex2sympy2_extended raises on a syntax error.
    """
    from latex2sympy2_extended import latex2sympy

    return latex2sympy(text, conversion_config=config)


def parse_sll(text: str, config: Any) -> Any:
    """Parse with SLL prediction (and the script-order rule); ``None`` when that parse fails.

    A ``None`` means "parse again with :func:`parse_plain`": a syntax error, or a decision only
    full-context prediction gets right. A result is the tree the plain parse builds.

    Args:
        text: aliased LaTeX.
        config: latex2sympy2_extended's ``ConversionConfig``.

    Returns:
        The SymPy object, or ``None``.

    Raises:
        RecursionError, MemoryError: passed through (the caller's guards decide).
    """
    if "sll" not in _STATE:
        _setup(config)
    if not _STATE["sll"]:
        return None
    return _sll(text, config)
