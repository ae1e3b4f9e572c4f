"""Mutation check: do the tests catch a small deliberate bug in each rule that decides a number?

Each mutation below weakens or removes one rule (which stored row counts, when a turn is judged
again, how Par@k/Sub@k are computed, what may change on resume, how answers are extracted, ...).
For each, the script copies ``src/`` and ``tests/`` into a temporary directory, applies the mutation
to the copy (the working tree is never touched), runs the tests named as the ones that should catch
it, and reports whether they failed (caught) or passed (survived).

Usage::

    python bench/mutation_check.py                 # every mutation; exit 1 if any survives
    python bench/mutation_check.py --only currency # mutations whose name contains "currency"
    python bench/mutation_check.py --list          # the mutations and their tests; exit 1 if any is stale
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
ROWS = "src/studybench/store/rows.py"
LEADERBOARD = "src/studybench/analysis/leaderboard.py"
PAIRED = "src/studybench/analysis/paired.py"
SIGNFLIP = "src/studybench/analysis/signflip.py"
PLATEAU = "src/studybench/analysis/plateau.py"
LEAKAGE = "src/studybench/testset/guidance/spans.py"
REWARDS = "src/studybench/reward_scores.py"
# the issue-26 mutations name the test that kills each (fast); the whole file also catches it
CURRENCY_TESTS = "tests/store/test_currency.py::"
UNITS_TESTS = "tests/analysis/test_paired_units.py::"
PLATEAU_TESTS = "tests/analysis/test_plateau.py::"
LEAKAGE_TESTS = "tests/testset/test_leakage.py::"
REWARDS_TESTS = "tests/core/test_rewards.py::"
MUTATIONS = [
    Mutation("currency: rule verdict counts for any completion", CURRENCY,
             "    if rule.completion_digest != cd:\n", "    if False:\n",
             ("tests/store/test_currency.py", "tests/evaluate/test_evaluate.py", "tests/store/test_compat.py"),
             "a verdict made on an older completion would score a regenerated answer"),
    Mutation("currency: rule settings change not re-verified", CURRENCY,
             "    elif settings is not None and rule.verifier != settings:\n", "    elif False:\n",
             ("tests/store/test_currency.py",), "a new verifier version or timeout would keep the old verdicts"),
    Mutation("currency: timed-out verdicts not re-verified when asked", CURRENCY,
             "    elif retry_timeouts and rule.reason.startswith(RETRYABLE_RULE_REASON):\n", "    elif False:\n",
             ("tests/store/test_currency.py",), "a verdict that timed out under load would stay incorrect forever"),
    Mutation("currency: generation error change not re-verified", CURRENCY,
             "    if rule.generation_error != generation.error:\n", "    if False:\n",
             ("tests/store/test_currency.py",), "a failed turn's verdict would survive its retry's different failure"),
    Mutation("currency: LLM verdict counts for any completion", CURRENCY,
             "    if row.completion_digest != completion_digest:\n", "    if False:\n",
             ("tests/store/test_currency.py",), "the report would count an LLM verdict on a regenerated answer"),
    Mutation("currency: LLM verdict reused after its inputs changed", CURRENCY,
             "    if inputs_digest is not None and row.inputs_digest != inputs_digest:\n", "    if False:\n",
             ("tests/store/test_currency.py",), "the judge would not see the new extracted answers"),
    Mutation("currency: failed LLM verdicts reused", CURRENCY,
             "    if row.verdict not in FINAL_LLM_VERDICTS:\n", "    if False:\n",
             ("tests/store/test_currency.py", "tests/llm_judge/test_judge_run.py"), "a transport error would never be retried"),
    Mutation("report: a turn without a verdict counts as correct", "src/studybench/store/verdicts.py",
             "        return self.rule.verdict is not None and self.rule.verdict.correct\n",
             "        return self.rule.verdict is None or self.rule.verdict.correct\n",
             ("tests/store/test_currency.py", "tests/store/test_compat.py"), "missing or stale verdicts would inflate Par@k and Sub@k"),
    Mutation("metrics: Par@k without one shared attempt", "src/studybench/metrics.py",
             "        if any(all(parent[j][a] for j in range(len(parent))) for a in range(kk)):\n",
             "        if all(any(parent[j][a] for a in range(kk)) for j in range(len(parent))):\n",
             ("tests/core/test_metrics.py", "tests/core/test_properties.py"), "Par@k would become 'every sub-problem solved by some attempt'"),
    Mutation("metrics: Sub@k needs every attempt", "src/studybench/metrics.py",
             "    hit = sum(1 for p in verdicts for sub in p if any(sub))\n",
             "    hit = sum(1 for p in verdicts for sub in p if all(sub))\n",
             ("tests/core/test_metrics.py", "tests/core/test_properties.py"), "Sub@k would become 'solved by every attempt'"),
    Mutation("metrics: population std over seeds", "src/studybench/metrics.py",
             "    std = statistics.stdev(vals) if len(vals) > 1 else None\n",
             "    std = statistics.pstdev(vals) if len(vals) > 1 else None\n",
             ("tests/core/test_metrics.py",), "the paper reports the sample standard deviation (ddof = 1)"),
    Mutation("resume: reuse a turn whose conversation changed", "src/studybench/evaluate/generate.py",
             "old.messages_digest == digest and not old.error", "not old.error",
             ("tests/evaluate/test_evaluate.py", "tests/core/test_properties.py"), "a retried earlier turn would not refresh the later ones"),
    Mutation("resume: reuse a failed turn", "src/studybench/evaluate/generate.py",
             "old.messages_digest == digest and not old.error", "old.messages_digest == digest",
             ("tests/evaluate/test_evaluate.py", "tests/core/test_properties.py"), "failed turns would never be retried"),
    Mutation("resume: the model may change within a run", "src/studybench/store/manifest.py",
             '{"base_url", "concurrency",', '{"model", "base_url", "concurrency",',
             ("tests/store/test_currency.py", "tests/evaluate/test_resume.py"), "two models' answers would mix in one run"),
    Mutation("resume: the sampling may change within a run", "src/studybench/store/manifest.py",
             '{"base_url", "concurrency",', '{"sampling", "base_url", "concurrency",',
             ("tests/store/test_currency.py",), "two samplings' answers would mix in one run"),
    Mutation("extraction: the Final Answer line is not preferred", "src/studybench/answers.py",
             "    start = _final_answer_region(text)\n", "    start = -1\n",
             ("tests/core/test_extract.py",), "a later checking box would replace the committed answer"),
    Mutation("verifier: 5% numeric tolerance", "src/studybench/verify/comparison/tolerance.py",
             "REL_TOL = 0.01\n", "REL_TOL = 0.05\n",
             ("tests/verify/test_verify.py", "tests/verify/test_physics.py"), "wrong numbers within 5% would be accepted"),
    # issue 26: the bugs a hand mutation trial planted that no test caught, each now killed by a named test
    Mutation("currency: a digest-less rule verdict counts", CURRENCY,
             "    if rule.completion_digest != cd:\n",
             "    if rule.completion_digest is not None and rule.completion_digest != cd:\n",
             (CURRENCY_TESTS + "test_a_rule_verdict_without_a_digest_never_counts",), "a verdict row without the digest of what it judged would score any completion"),
    Mutation("currency: a digest-less LLM verdict counts", CURRENCY,
             "    if row.completion_digest != completion_digest:\n",
             "    if row.completion_digest is not None and row.completion_digest != completion_digest:\n",
             (CURRENCY_TESTS + "test_an_llm_verdict_without_a_digest_never_counts",), "an LLM verdict row without a digest would score any completion"),
    Mutation("rows: a rule verdict with a malformed digest is usable", ROWS,
             '    _lenient = field_validator("generation_error", "answer_type",',
             '    _lenient = field_validator("completion_digest", "generation_error", "answer_type",',
             (CURRENCY_TESTS + "test_a_digest_of_the_wrong_type_makes_the_row_unusable",), "a verdict's essential field would be read leniently"),
    Mutation("rows: an LLM verdict with a malformed digest is usable", ROWS,
             '    _lenient = field_validator("judge_model", "template_digest",',
             '    _lenient = field_validator("completion_digest", "judge_model", "template_digest",',
             (CURRENCY_TESTS + "test_a_digest_of_the_wrong_type_makes_the_row_unusable",), "an LLM verdict's essential field would be read leniently"),
    Mutation("leaderboard: the ΔPar@k mark follows the ΔSub@k test", LEADERBOARD,
             '    out["par_significant"] = out["delta_par"]["p"] < alpha\n',
             '    out["par_significant"] = out["delta_sub"]["p"] < alpha\n',
             (UNITS_TESTS + "test_each_mark_follows_its_own_metric",), "‡ would mark the wrong metric"),
    Mutation("leaderboard: the ΔSub@k mark follows the ΔPar@k test", LEADERBOARD,
             '    out["sub_significant"] = out["delta_sub"]["p"] < alpha\n',
             '    out["sub_significant"] = out["delta_par"]["p"] < alpha\n',
             (UNITS_TESTS + "test_each_mark_follows_its_own_metric",), "† would mark the wrong metric"),
    Mutation("leaderboard: † and ‡ swapped", LEADERBOARD,
             '    return ("†" if sig.get("sub_significant") else "") + ("‡" if sig.get("par_significant") else "")\n',
             '    return ("†" if sig.get("par_significant") else "") + ("‡" if sig.get("sub_significant") else "")\n',
             (UNITS_TESTS + "test_each_mark_follows_its_own_metric",), "the footnote would name the wrong metric"),
    Mutation("leaderboard: CI bounds swapped", LEADERBOARD,
             '"lo": round(100 * ci.lo, 4), "hi": round(100 * ci.hi, 4)',
             '"lo": round(100 * ci.hi, 4), "hi": round(100 * ci.lo, 4)',
             (UNITS_TESTS + "test_each_mark_follows_its_own_metric",), "the interval would be printed backwards"),
    Mutation("leaderboard: marks at the level instead of 1 - level", LEADERBOARD,
             "    alpha = 1.0 - level\n", "    alpha = level\n",
             (UNITS_TESTS + "test_the_marks_follow_the_parent_level_test",), "every Δ with p < 0.95 would be marked"),
    Mutation("paired: CI at the wrong percentiles", PAIRED,
             "    lo, hi = np.percentile(diffs, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])\n",
             "    lo, hi = np.percentile(diffs, [100.0 * (1.0 - level), 100.0 * level])\n",
             (UNITS_TESTS + "test_the_ci_resamples_whole_parents",), "a 90% interval would be shown as 95%"),
    Mutation("paired: significance at twice the level", PAIRED,
             "        return self.p_value < 1.0 - self.ci.level\n", "        return self.p_value < 2 * (1.0 - self.ci.level)\n",
             (UNITS_TESTS + "test_p_between_the_level_and_twice_it_is_not_significant_and_the_interval_reads_low_to_high",), "p = 0.06 would be called significant at 5%"),
    Mutation("paired: the conclusion's CI bounds swapped", PAIRED,
             "        lo, hi = (100.0 * x for x in self.diff_ci)\n", "        hi, lo = (100.0 * x for x in self.diff_ci)\n",
             (UNITS_TESTS + "test_p_between_the_level_and_twice_it_is_not_significant_and_the_interval_reads_low_to_high",), "the sentence would print the interval backwards"),
    Mutation("signflip: two-sided p without the observed value", SIGNFLIP,
             "    p_two = float(dist[np.abs(values) >= abs(tg)].sum())\n",
             "    p_two = float(dist[np.abs(values) > abs(tg)].sum())\n",
             (UNITS_TESTS + "test_the_sign_flip_test_is_the_exact_randomisation_distribution",), "p-values too small: false significance"),
    Mutation("signflip: one-sided p-values swapped", SIGNFLIP,
             "    p_b = float(dist[values >= tg].sum())\n", "    p_b = float(dist[values <= tg].sum())\n",
             (UNITS_TESTS + "test_the_sign_flip_test_is_the_exact_randomisation_distribution",), "'B better' would get A's p-value"),
    Mutation("signflip: magnitudes ignored", SIGNFLIP,
             "    mags = (nz // g).tolist()\n", "    mags = [1] * len(nz)\n",
             (UNITS_TESTS + "test_the_sign_flip_test_is_the_exact_randomisation_distribution",), "a unit's size would not weigh in the test"),
    Mutation("signflip: the sign test counts ties", SIGNFLIP,
             "    m = a_better + b_better\n", "    m = len(differences)\n",
             (UNITS_TESTS + "test_the_sign_test_counts_only_the_units_that_differ",), "tied units would dilute the sign test"),
    Mutation("plateau: compared with the previous snapshot, not the best earlier", PLATEAU,
             "                best = max(range(i), key=lambda j: (snaps[j].mean, -j))\n", "                best = i - 1\n",
             (PLATEAU_TESTS + "test_a_snapshot_is_compared_with_the_best_earlier_one_not_the_previous",), "a recovery after a dip would count as a gain"),
    Mutation("plateau: the latest of equal best snapshots", PLATEAU,
             "                best = max(range(i), key=lambda j: (snaps[j].mean, -j))\n",
             "                best = max(range(i), key=lambda j: (snaps[j].mean, j))\n",
             (PLATEAU_TESTS + "test_the_earliest_of_equal_best_snapshots_is_the_reference",), "the comparison would not be with the earliest of equal bests"),
    Mutation("plateau: a 90% interval", PLATEAU,
             "    tail = (1.0 - confidence) / 2.0\n", "    tail = 1.0 - confidence\n",
             (PLATEAU_TESTS + "test_the_interval_is_the_95_percent_percentile_interval",), "gains would be called significant too often"),
    Mutation("leakage: number words not read", LEAKAGE,
             '        out.append(Candidate(m.start(), m.end(), _NUMBER_WORDS[m.group(1).lower()], "word"))\n',
             "        pass\n",
             (LEAKAGE_TESTS + "test_number_words_give_their_value_away",), "'twice', 'half' in guidance would leak a 2 or 1/2 gold"),
    Mutation("leakage: 'half' read as 2", LEAKAGE,
             '"half": "\\\\frac{1}{2}"', '"half": "2"',
             (LEAKAGE_TESTS + "test_number_words_give_their_value_away",), "'half' in guidance would leak a 1/2 gold"),
    Mutation("leakage: prose equations not read", LEAKAGE,
             "    for m in _PLAIN_EQ.finditer(prose):\n        lhs, rhs = m.group(1), m.group(2).rstrip(\".\")\n",
             "    for m in []:\n        lhs, rhs = m.group(1), m.group(2).rstrip(\".\")\n",
             (LEAKAGE_TESTS + "test_prose_equations_with_named_left_sides_are_caught",),
             "'Fnet = ma' in guidance would leak an EX gold ma (plain_formulas leaves multi-letter names to this reader)"),
    Mutation("rewards: format bonus without one box per slot", REWARDS,
             "    if finals and len(preds) == len(golds):\n", "    if finals:\n",
             (REWARDS_TESTS + "test_dense_format_bonus_needs_a_visible_final_line_with_one_box_per_slot",), "a Final Answer line with too few boxes would earn the format bonus"),
    Mutation("rewards: format bonus for a Final Answer line inside the reasoning", REWARDS,
             "    finals = _FINAL_LINE.search(visible) is not None\n", "    finals = _FINAL_LINE.search(response) is not None\n",
             (REWARDS_TESTS + "test_dense_format_bonus_needs_a_visible_final_line_with_one_box_per_slot",), "a Final Answer line in <think> would earn the format bonus"),
    Mutation("sandbox: workers not isolated (-I)", "src/studybench/verify/sandbox.py",
             '    return [sys.executable, "-I", "-c", _BOOT,', '    return [sys.executable, "-c", _BOOT,',
             ("tests/verify/test_sandbox.py::test_workers_never_import_modules_from_the_working_directory_or_pythonpath",
              "tests/verify/test_hostile_environment.py"), "a worker would import a sympy.py from the working directory or PYTHONPATH"),
]


def stale(m: Mutation) -> str | None:
    """Why ``m`` no longer applies to the working tree (its ``old`` text or a test file is gone), or ``None``."""
    target = REPO / m.path
    if not target.is_file():
        return f"{m.path} does not exist"
    n = target.read_text(encoding="utf-8").count(m.old)
    if n != 1:
        return f"'old' found {n} times in {m.path}"
    missing = [t for t in m.tests if not (REPO / t.split("::")[0]).is_file()]
    return f"test file(s) not found: {', '.join(missing)}" if missing else None


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
            # -m: the slow tests too (pyproject.toml leaves them out of a plain run), never the real-server ones
            res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not realserver",
                                  *(tests or m.tests)],
                                 cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", time.perf_counter() - t0, ""
        dt = time.perf_counter() - t0
        last = (res.stdout.strip().splitlines() or [""])[-1]
        if res.returncode in (4, 5):  # a usage error (a test id that no longer exists) or no tests: not a catch
            return "error", dt, (res.stdout + res.stderr).strip().splitlines()[-1:][0] if (res.stdout + res.stderr).strip() else ""
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
        bad_entries = 0
        for m in chosen:
            why = stale(m)
            bad_entries += why is not None
            print(f"- {m.name}: {m.path}; caught by {', '.join(m.tests)} ({m.why})" + (f" STALE: {why}" if why else ""))
        print(f"\n{len(chosen)} mutations, {bad_entries} stale")
        return 1 if bad_entries else 0
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
