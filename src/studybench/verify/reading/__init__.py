"""Reading answers: the first step of the rule verifier (docs/protocol.md section 5).

Text in, text or SymPy objects out, nothing compared yet: LaTeX normalisation and splitting
(:mod:`.latex`), the symbol aliaser (:mod:`.aliasing`), LaTeX to SymPy (:mod:`.conversion`, through the
hand-written :mod:`.fastparse` or latex2sympy's parse made cheap in :mod:`.l2s_parse`), numbers as
written (:mod:`.numbers`), units written in words (:mod:`.unitwords`), words in answers
(:mod:`.prose`) and truth values (:mod:`.truth`). Imports nothing else of :mod:`studybench.verify` but
:mod:`studybench.verify.verdict`.
"""
