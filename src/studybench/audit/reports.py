"""The outputs of the contamination audit: ``pairs.jsonl`` rows, ``report.json``, ``report.md``."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from studybench.audit.contamination import AuditResult, PairRow
from studybench.audit.ngrams import JACCARD_SWEEP
from studybench.escaping import md_cell
from studybench.files import atomic_write_text, dumps_json

__all__ = ["build_report", "pair_dict", "render_markdown", "write_outputs"]


def _excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, nd)


def pair_dict(result: AuditResult, p: PairRow) -> dict[str, Any]:
    """The ``pairs.jsonl`` row of a candidate pair."""
    t, e = result.train[p.train], result.eval[p.eval]
    return {
        "train_id": t.id,
        "eval_id": e.id,
        "train_file": t.file,
        "eval_file": e.file,
        "jaccard": round(p.jaccard, 6),
        "containment": round(p.containment, 6),
        "cosine": None if p.cosine is None else round(p.cosine, 6),
        "llm_verdict": p.llm_verdict,
        "llm_status": p.llm_status,
        "flagged": p.flagged,
        "stages": list(p.stages),
    }


def build_report(result: AuditResult, *, top: int = 10) -> dict[str, Any]:
    """The content of ``report.json`` (see :func:`write_outputs`)."""
    cfg = result.config
    pairs = result.pairs
    s1_keys = {(p.train, p.eval) for p in pairs if "jaccard" in p.stages}
    s2_keys = {(p.train, p.eval) for p in pairs if "embedding" in p.stages}
    flagged = [p for p in pairs if p.flagged]
    stages: dict[str, Any] = {
        "jaccard": {
            "candidates": len(s1_keys),
            "flagged": sum(1 for p in flagged if "jaccard" in p.stages),
            "lsh_candidates": result.stage1.lsh_candidates,
            "seconds": round(result.stage1.seconds, 3),
        },
        "containment": None,
        "embedding": None,
        "llm": None,
    }
    if cfg.containment_threshold is not None:
        c_keys = {(p.train, p.eval) for p in pairs if "containment" in p.stages}
        stages["containment"] = {
            "candidates": len(c_keys),
            "flagged": sum(1 for p in flagged if "containment" in p.stages),
            "new_vs_jaccard_and_embedding": len(c_keys - s1_keys - s2_keys),
            "seconds": round(result.stage1.containment_seconds, 3),
        }
    if result.stage2 is not None:
        stages["embedding"] = {
            "candidates": len(s2_keys),
            "flagged": sum(1 for p in flagged if "embedding" in p.stages),
            "seconds": round(result.stage2.seconds, 3),
            "embed_seconds": round(result.stage2.embed_seconds, 3),
            "model_load_seconds": round(result.stage2.load_seconds, 3),
            "texts_embedded": None if result.stage2.counts is None else result.stage2.counts.embedded,
            "texts_cached": None if result.stage2.counts is None else result.stage2.counts.cached,
        }
    no_verdict = sum(1 for p in flagged if p.llm_status in ("unjudgeable", "error"))
    if result.judge_seconds is not None:
        statuses = {s: sum(1 for p in pairs if p.llm_status == s) for s in ("yes", "no", "unjudgeable", "error")}
        tally = result.judge_tally
        stages["llm"] = {
            "candidates": len(pairs),
            "flagged": len(flagged),
            "flagged_yes": statuses["yes"],
            "flagged_no_verdict": no_verdict,
            "unjudgeable_alarm": tally.alarm(str(cfg.judge_model), max_tokens=cfg.judge_max_tokens) if tally else None,
            "verdicts": statuses,
            "requests": result.judge_requests,
            "cache_hits": result.judge_cache_hits,
            "seconds": round(result.judge_seconds, 3),
        }
    jac_scores = result.stage1.scores
    sweep_j = {f"{t:.1f}": sum(1 for v in jac_scores.values() if v >= t - 1e-12) for t in JACCARD_SWEEP}
    per_eval_file: dict[str, dict[str, int]] = {}
    for r in result.eval:
        per_eval_file.setdefault(r.file, {"records": 0, "flagged_records": 0})["records"] += 1
    for j in sorted({p.eval for p in flagged}):
        per_eval_file[result.eval[j].file]["flagged_records"] += 1
    per_train_file: dict[str, dict[str, int]] = {}
    for r in result.train:
        per_train_file.setdefault(r.file, {"records": 0, "flagged_records": 0})["records"] += 1
    flagged_train = result.flagged_train()
    for i in flagged_train:
        per_train_file[result.train[i].file]["flagged_records"] += 1

    def rank(p: PairRow) -> tuple[float, float]:
        return (p.jaccard, p.cosine if p.cosine is not None else -1.0)

    top_pairs = []
    for p in sorted(flagged, key=rank, reverse=True)[:top]:
        row = pair_dict(result, p)
        row["train_excerpt"] = _excerpt(result.train[p.train].text)
        row["eval_excerpt"] = _excerpt(result.eval[p.eval].text)
        top_pairs.append(row)
    return {
        "audit": "contamination",
        "paper": "Physics-R1 three-stage audit; StudyBench paper 2.3 / appendix H",
        "flagging_rule": (
            "judge says YES (unjudgeable or error: flagged, counted apart as flagged_no_verdict)" if cfg.judge_model
            else "stage 1 OR stage 1b OR stage 2"
        ),
        "parameters": cfg.to_dict(),
        "inputs": {
            "train_files": sorted(per_train_file),
            "eval_files": sorted(per_eval_file),
            "train_records": len(result.train),
            "eval_records": len(result.eval),
            "train_empty_texts": sum(1 for r in result.train if not r.text.strip()),
            "eval_empty_texts": sum(1 for r in result.eval if not r.text.strip()),
        },
        "candidates": len(pairs),
        "flagged_pairs": len(flagged),
        "flagged_no_verdict": no_verdict if result.judge_seconds is not None else None,
        "stages": stages,
        "overlap": {
            "jaccard_and_embedding": len(s1_keys & s2_keys),
            "jaccard_only": len(s1_keys - s2_keys),
            "embedding_only": len(s2_keys - s1_keys),
        },
        "sweep": {
            "jaccard": sweep_j,
            "jaccard_note": "pairs among the LSH candidates (index threshold "
            f"{cfg.to_dict()['lsh_threshold_used']:.2f}); counts below that threshold are lower bounds",
            "cosine": dict(result.stage2.sweep) if result.stage2 is not None else None,
        },
        "per_eval_file": per_eval_file,
        "per_train_file": per_train_file,
        "flagged_train_records": len(flagged_train),
        "flagged_eval_records": len({p.eval for p in flagged}),
        "seconds": {
            "shingles": round(result.shingle_seconds, 3),
            "stage1": round(result.stage1.seconds, 3),
            "stage2": None if result.stage2 is None else round(result.stage2.seconds, 3),
            "stage2_model_load": None if result.stage2 is None else round(result.stage2.load_seconds, 3),
            "stage3": None if result.judge_seconds is None else round(result.judge_seconds, 3),
        },
        "top_pairs": top_pairs,
    }


def render_markdown(report: dict[str, Any]) -> str:
    """``report.md``: the report as Markdown tables."""
    lines = ["# Contamination audit", "", f"Flagging rule: {report['flagging_rule']}.", ""]
    inp = report["inputs"]
    nov = report.get("flagged_no_verdict")
    flagged = f"{report['flagged_pairs']}" if not nov else (
        f"{report['flagged_pairs']} (judge YES: {report['flagged_pairs'] - nov}; no verdict, kept flagged: {nov})")
    lines += [
        f"- train: {inp['train_records']} records from {len(inp['train_files'])} file(s); "
        f"eval: {inp['eval_records']} records from {len(inp['eval_files'])} file(s)",
        f"- candidate pairs: {report['candidates']}; flagged pairs: {flagged}; "
        f"flagged train records: {report['flagged_train_records']}; "
        f"eval records with a flagged match: {report['flagged_eval_records']}",
    ]
    alarm = (report["stages"].get("llm") or {}).get("unjudgeable_alarm")
    if alarm:
        lines.append(f"- **warning**: {md_cell(alarm)}")
    lines += [
        "",
        "## Stages",
        "",
        "| stage | candidates | flagged | seconds |",
        "|---|---:|---:|---:|",
    ]
    for name, st in report["stages"].items():
        if st is None:
            lines.append(f"| {md_cell(name)} | skipped | | |")
        else:
            lines.append(f"| {md_cell(name)} | {st['candidates']} | {st['flagged']} | {st['seconds']} |")
    ov = report["overlap"]
    lines += [
        "",
        f"Overlap: both {ov['jaccard_and_embedding']}, Jaccard only {ov['jaccard_only']}, "
        f"embedding only {ov['embedding_only']}.",
    ]
    if report["stages"]["embedding"]:
        par = report["parameters"]
        lines.append(f"Embedding model: {md_cell(str(par.get('embedding_model_used')))}, "
                     f"{md_cell(str(par.get('embedding_backend', 'torch')))} backend, {md_cell(str(par.get('dtype_used')))}; "
                     f"load: {report['stages']['embedding']['model_load_seconds']} s (not in stage 2).")
    lines += ["", "## Threshold sweep", "", "| Jaccard >= | pairs |", "|---:|---:|"]
    lines += [f"| {t} | {n} |" for t, n in report["sweep"]["jaccard"].items()]
    lines += ["", f"({report['sweep']['jaccard_note']})"]
    if report["sweep"]["cosine"]:
        lines += ["", "| cosine >= | pairs |", "|---:|---:|"]
        lines += [f"| {t} | {n} |" for t, n in report["sweep"]["cosine"].items()]
    lines += ["", "## Per file", "", "| side | file | records | flagged records |", "|---|---|---:|---:|"]
    for side, key in (("eval", "per_eval_file"), ("train", "per_train_file")):
        for f, c in report[key].items():
            lines.append(f"| {side} | {md_cell(f)} | {c['records']} | {c['flagged_records']} |")
    lines += ["", "## Top flagged pairs", ""]
    if not report["top_pairs"]:
        lines.append("None.")
    for k, p in enumerate(report["top_pairs"], start=1):
        cos = "n/a" if p["cosine"] is None else f"{p['cosine']:.3f}"
        lines += [
            f"{k}. {md_cell(p['train_id'])} vs {md_cell(p['eval_id'])}: Jaccard {p['jaccard']:.3f}, cosine {cos}, "
            f"LLM {md_cell(p['llm_status'] or 'n/a')}, stages {md_cell(', '.join(p['stages']))}",
            f"   - train: {md_cell(p['train_excerpt'])}",
            f"   - eval: {md_cell(p['eval_excerpt'])}",
        ]
    lines += ["", "## Parameters", "", "```json", dumps_json(report["parameters"]), "```", ""]
    return "\n".join(lines)


def write_outputs(result: AuditResult, out_dir: str | os.PathLike[str], *, clean_train: str | None = None) -> dict[str, Any]:
    """Write ``pairs.jsonl``, ``report.json`` and ``report.md`` under ``out_dir`` (created), each
    atomically; with ``clean_train`` also a JSONL file of the training records (their original JSON)
    that are in no flagged pair. Returns the report dict.

    Raises:
        OSError: the directory or a file cannot be written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(result)
    clean_text = None
    if clean_train:
        drop = result.flagged_train()
        clean_text = "".join(dumps_json(r.raw, None) + "\n" for i, r in enumerate(result.train) if i not in drop)
        report["clean_train"] = {"path": str(clean_train), "kept": len(result.train) - len(drop), "removed": len(drop)}
    atomic_write_text(out / "pairs.jsonl", "".join(dumps_json(pair_dict(result, p), None) + "\n" for p in result.pairs))
    atomic_write_text(out / "report.json", dumps_json(report) + "\n")
    atomic_write_text(out / "report.md", render_markdown(report))
    if clean_train and clean_text is not None:
        atomic_write_text(Path(clean_train), clean_text)
    return report
