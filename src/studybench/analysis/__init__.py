"""Analyses of finished runs: verifier consistency (paper Table 11) and, later, Guidance Gap,
Compute Plateau and leaderboards (DESIGN.md ``analysis/``)."""
