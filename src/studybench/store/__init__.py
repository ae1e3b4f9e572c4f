"""The run directory: typed manifest and rows, append-only logs, and the one rule of currency.

- :mod:`studybench.store.rows`: :class:`TurnKey`, :class:`GenerationRow`, :class:`RuleVerdictRow`,
  :class:`LLMVerdictRow` (shared by every writer and reader);
- :mod:`studybench.store.manifest`: :class:`Manifest` and the resume rules;
- :mod:`studybench.store.currency`: which stored verdict counts, and which must be judged again;
- :mod:`studybench.store.run`: :class:`RunStore`, the files of one run directory (and its writer lock);
- :mod:`studybench.store.verdicts`: the verdict table of a run (what each turn scores);
- :mod:`studybench.store.labels`: :func:`set_labels`, a run's labels set after the fact;
- :mod:`studybench.store.provenance`: the environment a run was made in, and how two manifests differ;
- :mod:`studybench.store.artefacts`: the method artefacts a run was made with, kept in ``artefacts/``.
"""

from studybench.store.artefacts import (
    ARTEFACT_FILES,
    ARTEFACTS_DIR,
    artefact_texts,
    read_stored_artefacts,
    stored_artefact_refs,
    write_artefacts,
)
from studybench.store.currency import (
    RETRYABLE_RULE_REASON,
    LLMVerdictStatus,
    RuleVerdictStatus,
    llm_verdict_status,
    rule_internal_error,
    rule_verdict_status,
)
from studybench.store.labels import set_labels
from studybench.store.manifest import (
    OPERATIONAL_BACKEND_KEYS,
    VERIFIER_MODES,
    Manifest,
    ParentIndex,
    SelectionInfo,
    SplitInfo,
    SubIndex,
    VerifierInfo,
    check_labels,
    current_budgets,
    merge_labels,
    parents_index,
    rule_settings,
)
from studybench.store.provenance import (
    VERDICT_PACKAGES,
    artefact_paths,
    collect_environment,
    installed_versions,
    latest_environment,
    manifest_differences,
    record_environment,
    version_mismatches,
)
from studybench.store.rows import (
    FINAL_LLM_VERDICTS,
    LLM_VERDICTS,
    SKIPPED_PARENT,
    GenerationRow,
    LLMVerdictRow,
    RuleVerdictRow,
    TurnKey,
)
from studybench.store.run import RunDirInUseError, RunStore
from studybench.store.verdicts import RunRows, TurnVerdict, turn_verdicts

__all__ = [
    "ARTEFACT_FILES",
    "ARTEFACTS_DIR",
    "artefact_paths",
    "artefact_texts",
    "read_stored_artefacts",
    "stored_artefact_refs",
    "write_artefacts",
    "check_labels",
    "collect_environment",
    "installed_versions",
    "latest_environment",
    "manifest_differences",
    "record_environment",
    "version_mismatches",
    "current_budgets",
    "merge_labels",
    "FINAL_LLM_VERDICTS",
    "LLM_VERDICTS",
    "SKIPPED_PARENT",
    "OPERATIONAL_BACKEND_KEYS",
    "RETRYABLE_RULE_REASON",
    "VERDICT_PACKAGES",
    "VERIFIER_MODES",
    "GenerationRow",
    "LLMVerdictRow",
    "LLMVerdictStatus",
    "Manifest",
    "ParentIndex",
    "RuleVerdictRow",
    "RuleVerdictStatus",
    "RunDirInUseError",
    "RunRows",
    "RunStore",
    "SelectionInfo",
    "SplitInfo",
    "SubIndex",
    "TurnKey",
    "TurnVerdict",
    "VerifierInfo",
    "llm_verdict_status",
    "parents_index",
    "rule_settings",
    "rule_internal_error",
    "rule_verdict_status",
    "set_labels",
    "turn_verdicts",
]
