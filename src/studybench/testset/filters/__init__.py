"""The two filters of test-set construction (paper section 2.1, ``build retry`` and ``build capability``).

Both run the evaluation harness (:func:`studybench.evaluate.run_eval`) and read each parent's attempts
from its rule verdicts: the Naive Reachability Filter admits a parent solved at least once with the
guidance; the Capability Filter partitions parents by pass@k and draws the test set. See
:mod:`studybench.testset.filters.passk`.
"""

from studybench.testset.filters.passk import (
    CapabilityResult,
    attempt_solves,
    partition,
    run_capability,
    run_retry,
    select_parents,
)

__all__ = ["CapabilityResult", "attempt_solves", "partition", "run_capability", "run_retry", "select_parents"]
