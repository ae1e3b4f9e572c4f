"""Physics the verifier knows: units (pint), constants, identities and an item's own definitions.

Second step of the rule verifier: :mod:`.units` (units with pint, the ``gold_unit`` hints, the
quantities a text states with a real unit), :mod:`.constants` (named constants given numerically),
:mod:`.identities` (``h = 2 pi hbar`` and the like, applied by substitution) and :mod:`.definitions`
(the definitions a problem text or a gold box states, substituted when the plain verdict is
incorrect). Builds on :mod:`studybench.verify.reading` only.
"""
