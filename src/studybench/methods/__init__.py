"""What self-evolution methods consume and produce (paper appendix J).

Training data out (verl, TRL, agent-loop CSV exports of the instruction layers), TTRL's
pseudo-label vote, the GEPA adapter, and ACE / EvoSkill artefacts in.
"""

from studybench.methods.ttrl import (
    Cluster,
    LabelAccuracy,
    VoteResult,
    boxed_label,
    label_accuracy,
    majority_vote,
)

__all__ = ["Cluster", "LabelAccuracy", "VoteResult", "boxed_label", "label_accuracy", "majority_vote"]
