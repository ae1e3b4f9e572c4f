"""Mutation check: do the tests catch a small deliberate bug in each rule that decides a number?

Each mutation below weakens or removes one rule (which stored row counts, when a turn is judged
again, how Par@k/Sub@k are computed, what may change on resume, how answers are extracted, ...).
For each, the script copies ``src/`` and ``tests/`` into a temporary directory, applies the mutation
to the copy (the working tree is never touched), runs the tests named as the ones that should catch
it, and reports whether they failed (caught) or passed (survived).

Usage::

    python bench/mutation_check.py                 # every mutation; exit 1 if any survives
    python bench/mutation_check.py --only currency # mutations whose name contains "currency"
    python bench/mutation_check.py --list          # the mutations and their tests
    python bench/mutation_check.py --each          # run each listed test file on its own: which of them
                                                   # catch the mutation (independent checks show up here)

Run it after any refactor of the rules listed here: a mutation whose ``old`` text no longer exists is
reported as "stale" (the rule moved; update the entry), never silently skipped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    """One deliberate bug: replace ``old`` by ``new`` in ``path`` (relative to the repository)."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


CURRENCY = "src/studybench/store/currency.py"
MUTATIONS = [
    Mutation("currency: rule verdict counts for any completion", CURRENCY,
             "    if rule.completion_digest != cd:\n", "    if False:\n",
             ("tests/test_currency.py", "tests/test_evaluate.py", "tests/test_compat.py"),
             "a verdict made on an older completion would score a regenerated answer"),
    Mutation("currency: rule settings change not re-verified", CURRENCY,
             "    elif settings is not None and rule.verifier != settings:\n", "    elif False:\n",
             ("tests/test_currency.py",), "a new verifier version or timeout would keep the old verdicts"),
    Mutation("currency: timed-out verdicts not re-verified", CURRENCY,
             "    elif rule.reason.startswith(RETRYABLE_RULE_REASON):\n", "    elif False:\n",
             ("tests/test_currency.py",), "a verdict that timed out under load would stay incorrect forever"),
    Mutation("currency: generation error change not re-verified", CURRENCY,
             "    if rule.generation_error != generation.error:\n", "    if False:\n",
             ("tests/test_currency.py",), "a failed turn's verdict would survive its retry's different failure"),
    Mutation("currency: LLM verdict counts for any completion", CURRENCY,
             "    if row.completion_digest != completion_digest:\n", "    if False:\n",
             ("tests/test_currency.py",), "the report would count an LLM verdict on a regenerated answer"),
    Mutation("currency: LLM verdict reused after its inputs changed", CURRENCY,
             "    if inputs_digest is not None and row.inputs_digest != inputs_digest:\n", "    if False:\n",
             ("tests/test_currency.py",), "the judge would not see the new extracted answers"),
    Mutation("currency: failed LLM verdicts reused", CURRENCY,
             "    if row.verdict not in FINAL_LLM_VERDICTS:\n", "    if False:\n",
             ("tests/test_currency.py", "tests/test_judge_run.py"), "a transport error would never be retried"),
    Mutation("report: a turn without a verdict counts as correct", "src/studybench/store/verdicts.py",
             "        return self.rule.verdict is not None and self.rule.verdict.correct\n",
             "        return self.rule.verdict is None or self.rule.verdict.correct\n",
             ("tests/test_currency.py", "tests/test_compat.py"), "missing or stale verdicts would inflate Par@k and Sub@k"),
    Mutation("metrics: Par@k without one shared attempt", "src/studybench/metrics.py",
             "        if any(all(parent[j][a] for j in range(len(parent))) for a in range(kk)):\n",
             "        if all(any(parent[j][a] for a in range(kk)) for j in range(len(parent))):\n",
             ("tests/test_metrics.py", "tests/test_properties.py"), "Par@k would become 'every sub-problem solved by some attempt'"),
    Mutation("metrics: Sub@k needs every attempt", "src/studybench/metrics.py",
             "    hit = sum(1 for p in verdicts for sub in p if any(sub))\n",
             "    hit = sum(1 for p in verdicts for sub in p if all(sub))\n",
             ("tests/test_metrics.py", "tests/test_properties.py"), "Sub@k would become 'solved by every attempt'"),
    Mutation("metrics: population std over seeds", "src/studybench/metrics.py",
             "    std = statistics.stdev(vals) if len(vals) > 1 else None\n",
             "    std = statistics.pstdev(vals) if len(vals) > 1 else None\n",
             ("tests/test_metrics.py",), "the paper reports the sample standard deviation (ddof = 1)"),
    Mutation("resume: reuse a turn whose conversation changed", "src/studybench/evaluate/generate.py",
             "old.messages_digest == digest and not old.error", "not old.error",
             ("tests/test_evaluate.py", "tests/test_properties.py"), "a retried earlier turn would not refresh the later ones"),
    Mutation("resume: reuse a failed turn", "src/studybench/evaluate/generate.py",
             "old.messages_digest == digest and not old.error", "old.messages_digest == digest",
             ("tests/test_evaluate.py", "tests/test_properties.py"), "failed turns would never be retried"),
    Mutation("resume: the model may change within a run", "src/studybench/store/manifest.py",
             '{"base_url", "concurrency",', '{"model", "base_url", "concurrency",',
             ("tests/test_currency.py", "tests/test_resume.py"), "two models' answers would mix in one run"),
    Mutation("resume: the sampling may change within a run", "src/studybench/store/manifest.py",
             '{"base_url", "concurrency",', '{"sampling", "base_url", "concurrency",',
             ("tests/test_currency.py",), "two samplings' answers would mix in one run"),
    Mutation("extraction: the Final Answer line is not preferred", "src/studybench/answers.py",
             "    start = _final_answer_region(text)\n", "    start = -1\n",
             ("tests/test_extract.py",), "a later checking box would replace the committed answer"),
    Mutation("verifier: 5% numeric tolerance", "src/studybench/verify/comparison/tolerance.py",
             "REL_TOL = 0.01\n", "REL_TOL = 0.05\n",
             ("tests/test_verify.py", "tests/test_verify_physics.py"), "wrong numbers within 5% would be accepted"),
]


def _copy(dst: Path) -> None:
    for name in ("src", "tests"):
        shutil.copytree(REPO / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO / "pyproject.toml", dst / "pyproject.toml")
    shutil.copy(REPO / "README.md", dst / "README.md")
    shutil.copytree(REPO / "docs", dst / "docs")  # tests run the documented examples


def run(m: Mutation, timeout: float, tests: tuple[str, ...] | None = None) -> tuple[str, float, str]:
    """Apply one mutation to a fresh copy and run its tests (or ``tests``): (status, seconds, last output line)."""
    with tempfile.TemporaryDirectory(prefix="studybench-mutation-") as tmp:
        root = Path(tmp)
        _copy(root)
        target = root / m.path
        text = target.read_text(encoding="utf-8")
        if text.count(m.old) != 1:
            return "stale", 0.0, f"'old' found {text.count(m.old)} times in {m.path}"
        target.write_text(text.replace(m.old, m.new), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(root / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        t0 = time.perf_counter()
        try:
            res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *(tests or m.tests)],
                                 cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", time.perf_counter() - t0, ""
        dt = time.perf_counter() - t0
        last = (res.stdout.strip().splitlines() or [""])[-1]
        return ("caught" if res.returncode != 0 else "SURVIVED"), dt, last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="run the mutations whose name contains this text")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutation's test run")
    ap.add_argument("--each", action="store_true", help="run each listed test file on its own and say which catch it")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if args.only in m.name]
    if args.list:
        for m in chosen:
            print(f"- {m.name}: {m.path}; caught by {', '.join(m.tests)} ({m.why})")
        return 0
    print("| mutation | result | seconds | tests |")
    print("|---|---|---|---|")
    bad = 0
    for m in chosen:
        if args.each:
            results = [(t, *run(m, args.timeout, (t,))) for t in m.tests]
            status = "caught" if any(r[1] == "caught" for r in results) else "SURVIVED"
            dt = sum(r[2] for r in results)
            shown = ", ".join(f"{t.removeprefix('tests/')} {'caught' if st == 'caught' else st}" for t, st, _, _ in results)
            last = ""
        else:
            status, dt, last = run(m, args.timeout)
            shown = ", ".join(t.removeprefix("tests/") for t in m.tests)
        bad += status != "caught"
        print(f"| {m.name} | {status} | {dt:.0f} | {shown} |", flush=True)
        if status != "caught" and last:
            print(f"|   | {last} | | |")
    print(f"\n{len(chosen) - bad} of {len(chosen)} mutations caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
