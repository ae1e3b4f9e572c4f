"""The evaluation as a library: the main job (paper 2.2; docs/protocol.md 2-3) under the CLI.

From Python::

    from studybench.evaluate import EvalSpec, run_eval
    result = run_eval(EvalSpec(split="transfer", model="reference", k=1, seeds=[0]), "runs/ref")
    print(result.par_at_k, result.sub_at_k)

- :class:`EvalSpec` (:mod:`~studybench.evaluate.spec`): what to evaluate, validated once;
- :func:`run_eval` = :func:`prepare_eval` (load, check, plan; no request; :mod:`~studybench.evaluate.plan`)
  + :func:`run_plan` (endpoint check, manifest, generation pass with resume; :mod:`~studybench.evaluate.run`),
  which hands the turns to the rule pass and the LLM pass (:mod:`~studybench.evaluate.judge_after`) and
  writes the report;
- :func:`add_llm_verdicts`: the LLM judge over a finished run (``studybench judge RUN_DIR``), whose test set
  :func:`find_run_dataset` finds again (as ``reproduce`` does);
- :func:`reproduce_run`: a finished run re-run with its recorded configuration (``studybench reproduce``),
  :mod:`~studybench.evaluate.reproduce`;
- the selection (parent ids, exclusions, seeded or stratified samples) and the errata setting:
  :mod:`~studybench.evaluate.selection`;
- the passes on their own: :func:`generate_turns`, :func:`add_rule_verdicts`, :func:`add_llm_verdicts_to_scope`
  over a :class:`RunScope` (the selected turns);
- reports: :func:`studybench.report.write_report` / :func:`studybench.report.build_report` (a run directory in,
  the report out).
"""

from studybench.evaluate.generate import (
    GenerationStats,
    generate_turns,
    is_permanent_error,
    is_unreachable_error,
)
from studybench.evaluate.judge_after import (
    JudgeRunResult,
    add_llm_verdicts,
    judge_spec_from_run,
    judge_turns,
    verify_turns,
)
from studybench.evaluate.llm_pass import LLMStats, add_llm_verdicts_to_scope
from studybench.evaluate.plan import EvalPlan, default_run_dir, find_run_dataset, prepare_eval, run_dataset
from studybench.evaluate.reproduce import (
    ReproduceResult,
    Reproduction,
    prepare_reproduction,
    reproduce_run,
    reproduction_spec,
)
from studybench.evaluate.resume import NEW_RUN_HINT, resume_refusal
from studybench.evaluate.rule_pass import RuleStats, add_rule_verdicts, problem_text
from studybench.evaluate.run import EvalResult, check_endpoints, run_eval, run_plan
from studybench.evaluate.scope import ProgressFn, RunScope, request_seed, run_sync
from studybench.evaluate.selection import (
    errata_parents,
    plan_selection,
    read_parent_ids,
    sample_parents,
    select_parents,
    selection_values,
)
from studybench.evaluate.spec import (
    ArtefactSpec,
    BudgetLimits,
    DataSpec,
    EvalError,
    EvalSpec,
    GenerationSpec,
    VerificationSpec,
    parse_parent_slice,
)
from studybench.evaluate.stopping import BudgetStoppedError, EndpointStoppedError

__all__ = [
    "ArtefactSpec",
    "BudgetLimits",
    "BudgetStoppedError",
    "DataSpec",
    "EndpointStoppedError",
    "EvalError",
    "EvalPlan",
    "EvalResult",
    "EvalSpec",
    "GenerationSpec",
    "GenerationStats",
    "JudgeRunResult",
    "LLMStats",
    "ProgressFn",
    "ReproduceResult",
    "Reproduction",
    "RuleStats",
    "RunScope",
    "add_llm_verdicts",
    "add_llm_verdicts_to_scope",
    "add_rule_verdicts",
    "check_endpoints",
    "default_run_dir",
    "errata_parents",
    "find_run_dataset",
    "generate_turns",
    "is_permanent_error",
    "problem_text",
    "is_unreachable_error",
    "judge_spec_from_run",
    "judge_turns",
    "parse_parent_slice",
    "plan_selection",
    "prepare_eval",
    "prepare_reproduction",
    "read_parent_ids",
    "reproduce_run",
    "reproduction_spec",
    "request_seed",
    "NEW_RUN_HINT",
    "resume_refusal",
    "run_dataset",
    "run_eval",
    "run_plan",
    "run_sync",
    "sample_parents",
    "select_parents",
    "selection_values",
    "verify_turns",
    "VerificationSpec",
]
