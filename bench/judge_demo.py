"""Two-stage verdicts on a real test set, against a local stub judge (no GPU, no network).

1. ``studybench eval --model reference`` on the chosen split (gold replay: every answer correct).
2. Injects faults into the stored completions, deterministically by turn index:
   - ``wrong``: the final box replaced by a wrong answer (rule rejects; a good judge says FALSE);
   - ``unboxed``: the gold answer written on the ``Final Answer:`` line, and no ``\\boxed{}`` anywhere
     in the reply (rule rejects: no final answer; a good judge, which reads the full solution, says TRUE);
   - ``sloppy``: like ``unboxed``, but the stub judge never answers in the format for it
     (unjudgeable after the parse retries).
3. Starts a stub judge on 127.0.0.1 that is an oracle for those faults (with two HTTP 429s
   injected), and runs ``studybench judge RUN --judge-rule-accepts`` twice on the run, then once
   on a copy of the run (same pairs), printing the judge's request counts each time.
4. Prints ``studybench consistency`` and the report's scoring conventions.

Usage::

    python bench/judge_demo.py [--split transfer] [--k 1] [--every 7] [--workdir DIR]

Needs the real data (``$STUDYBENCH_DATA`` or ``--data-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from studybench.store import RunStore
from studybench.testing.stub_judge import answers_of, judge_reply_fn
from studybench.testing.stub_server import start_stub_server

WRONG = "\\boxed{-123456.789}"


def inject(run: Path, every: int) -> dict[str, int]:
    """Rewrite every ``every``-th turn's completion (cycling wrong / unboxed / sloppy); return counts."""
    store = RunStore(run)
    counts = {"wrong": 0, "unboxed": 0, "sloppy": 0}
    kinds = ["wrong", "unboxed", "wrong", "sloppy"]
    n = 0
    for i, (_key, g) in enumerate(sorted(store.latest_generations().items())):
        if i % every != every - 1:
            continue
        kind = kinds[n % len(kinds)]
        n += 1
        body, _, final = (g.completion or "").rpartition("Final Answer:")
        if kind == "wrong":
            new = f"{body}Final Answer: {WRONG}"
        else:  # no box anywhere: the rules find no final answer, the judge reads it in the text
            tag = "" if kind == "unboxed" else " [sloppy]"
            new = f"{body}Final Answer:{final}{tag}".replace("\\boxed{", "{")
        store.append(g.model_copy(update={"completion": new}))
        counts[kind] += 1
    store.close()
    return counts


def oracle(x: dict[str, str]) -> bool | str:
    """TRUE unless the injected wrong value is the answer; never in format for the sloppy ones."""
    if "[sloppy]" in x["student_solution"]:
        return "Same physics, I accept it."
    if answers_of(x["student_answers"]) == ["-123456.789"]:
        return False
    return True


def sh(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    print("$", " ".join(args), flush=True)
    res = subprocess.run(list(args), capture_output=True, text=True, env=env)
    print("  exit", res.returncode)
    for line in res.stderr.splitlines():
        if line.startswith(("llm judge", "scoring", "rule verifier")):
            print("  " + line)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="transfer")
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--every", type=int, default=7, help="inject into every N-th turn")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="judge-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, STUDYBENCH_JUDGE_CACHE=str(work / "cache"), COLUMNS="200")
    if args.data_dir:
        env["STUDYBENCH_DATA"] = str(args.data_dir)
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.rmtree(work / "cache", ignore_errors=True)
    res = sh("studybench", "eval", "--split", args.split, "--model", "reference", "-k", str(args.k), "--seeds", "1",
             "--out", str(run), env=env)
    if res.returncode:
        print(res.stderr, file=sys.stderr)
        return 1
    counts = inject(run, args.every)
    turns = sum(1 for _ in RunStore(run).latest_generations())
    print(f"injected into {sum(counts.values())} of {turns} turns: {counts}")
    twin = work / "twin"
    shutil.rmtree(twin, ignore_errors=True)
    shutil.copytree(run, twin)
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as srv:
        srv.rate_limit(retry_after=0.05, times=2)
        judge = ["--judge-model", "stub-judge", "--judge-base-url", srv.base_url, "--judge-rule-accepts"]
        for label, target in (("first judge of the run", run), ("same run again", run), ("copy of the run", twin)):
            before = srv.count
            sh("studybench", "judge", str(target), *judge, env=env)
            print(f"  -> {label}: {srv.count - before} HTTP requests to the judge")
    res = subprocess.run(["studybench", "consistency", str(run)], capture_output=True, text=True, env=env)
    print((run / "consistency.md").read_text())
    rep = json.loads((run / "report.json").read_text())
    print(json.dumps({"llm_judge": rep["llm_judge"]["verdicts"], "unjudgeable_rate": rep["llm_judge"]["unjudgeable_rate"]}))
    md = (run / "report.md").read_text()
    start = md.find("## Scoring conventions")
    print(md[start : md.find("\n## ", start + 5)])
    print(f"work directory: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
