"""Comparing what was read: the third step of the rule verifier (docs/protocol.md section 5).

The tolerance policy (:mod:`.tolerance`), numbers with units (:mod:`.numeric`), SymPy equality
(:mod:`.symbolic`), series (:mod:`.series`), vectors (:mod:`.vectors`), multi-part answers and their
matching (:mod:`.parts`), relation chains (:mod:`.relations`), equations (:mod:`.equations`,
:mod:`.equation_forms`). No answer type is named here: the rules (:mod:`studybench.verify.rules`)
decide which comparison an answer type uses. Builds on :mod:`studybench.verify.physics` and
:mod:`studybench.verify.reading`.
"""
