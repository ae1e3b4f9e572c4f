"""What self-evolution methods consume and produce (paper appendix J).

Training data out (verl, TRL, agent-loop CSV exports of the instruction layers), TTRL's
pseudo-label vote, the GEPA adapter, and ACE / EvoSkill artefacts in.
"""
