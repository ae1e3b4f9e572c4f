"""Verification of KP coverage (paper section 2.1, ``build verify``).

A teacher scores every retrieved (KP, fragment) pair 0-3 with a verbatim quote; a score of 2 or more
whose quote is not in the fragment is demoted. This is the construction's coverage check, not the rule
verifier (:mod:`studybench.verify`). See :mod:`studybench.testset.verification.kpverify`.
"""

from studybench.testset.verification.kpverify import (
    KP_STATUSES,
    SUB_STATUSES,
    VerifySettings,
    check_quote,
    kp_status,
    sub_problem_status,
    verify,
)

__all__ = ["KP_STATUSES", "SUB_STATUSES", "VerifySettings", "check_quote", "kp_status", "sub_problem_status", "verify"]
