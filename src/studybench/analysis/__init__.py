"""Analyses of finished runs: verifier consistency (paper Table 11), paired A/B comparisons
(:mod:`studybench.analysis.paired`, ``studybench compare``) and, later, Guidance Gap, Compute Plateau
and leaderboards (DESIGN.md ``analysis/``)."""
