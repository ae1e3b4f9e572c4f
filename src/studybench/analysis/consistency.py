"""Verifier consistency: how the rule verifier and the LLM judge agree (paper Table 11, appendix G).

For every judge configuration found in a run's ``llm_judgements.jsonl`` the report gives, at attempt
level (one cell per turn of the run's manifest, with a current completion and rule verdict):

- the 2x2 table of rule verdict (accept / reject) against LLM verdict (TRUE / FALSE), plus the
  turns whose LLM verdict is unjudgeable, failed (``error``) or missing, overall and per answer type;
- the rule verifier's precision and recall with respect to the cascade. Paper Table 11 convention:
  a rule accept the judge never saw counts as an LLM accept (the starred cell, ``assumed``); after
  ``studybench judge RUN_DIR --judge-rule-accepts`` the judge has seen the rule accepts too, the
  starred cell is observed, and precision can fall below 100%. Precision is given with the
  judgeable-only denominator (accepts with a TRUE/FALSE verdict or assumed) and the full one (every
  rule accept; an unjudgeable accept counts against the rule);
- Cohen's kappa between the rule and the LLM on the turns where both verdicts are observed;
- with two or more judge configurations, Cohen's kappa (and the agreement table) between each pair,
  on the turns both judged TRUE/FALSE for the same completion.

:func:`write_consistency` writes ``consistency.json`` and ``consistency.md`` into the run directory.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

from studybench.escaping import plural
from studybench.files import atomic_write_text, dumps_json
from studybench.report import md_cell
from studybench.store import RunRows, RunStore, TurnKey, llm_verdict_status, turn_verdicts

__all__ = ["build_consistency", "cohens_kappa", "render_consistency_markdown", "write_consistency"]

_COLUMNS = ("TRUE", "FALSE", "unjudgeable", "error", "not judged")


def cohens_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters over the same items.

    Args:
        a, b: verdicts of rater A and B, same length.

    Returns:
        kappa in [-1, 1]; ``None`` when undefined (no items, or both raters give one constant label
        so that chance agreement is 1).

    Raises:
        ValueError: lengths differ.
    """
    if len(a) != len(b):
        raise ValueError("the two raters need the same number of verdicts")
    n = len(a)
    if n == 0:
        return None
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    neither = sum(1 for x, y in zip(a, b, strict=True) if not x and not y)
    po = (both + neither) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe >= 1.0:
        return None
    return (po - pe) / (1 - pe) + 0.0


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 6) if den else None


def _table(cells: list[tuple[bool, str, bool]]) -> dict[str, Any]:
    """Counts and rule metrics from (rule_accept, llm_verdict, observed) triples."""
    acc = {c: 0 for c in _COLUMNS}
    rej = {c: 0 for c in _COLUMNS}
    assumed = 0
    for rule_ok, verdict, observed in cells:
        if rule_ok and not observed:
            assumed += 1
            continue
        (acc if rule_ok else rej)[verdict] += 1
    tp = acc["TRUE"] + assumed
    fp = acc["FALSE"]
    fn = rej["TRUE"]
    tn = rej["FALSE"]
    accepts = sum(acc.values()) + assumed
    observed_pairs = [(r, v == "TRUE") for r, v, o in cells if o and v in ("TRUE", "FALSE")]
    kappa = cohens_kappa([r for r, _ in observed_pairs], [v for _, v in observed_pairs])
    return {
        "turns": len(cells),
        "rule_accept": {**acc, "assumed_TRUE": assumed},
        "rule_reject": rej,
        "rule_accepts": accepts,
        "rule_rejects": sum(rej.values()),
        "audited_accepts": accepts - assumed,
        "precision": _ratio(tp, tp + fp),
        "precision_full": _ratio(tp, accepts),
        "recall": _ratio(tp, tp + fn),
        "llm_accepts_among_rejections": fn,
        "cascade_correct": tp + fn,
        "rule_correct": accepts,
        "kappa_rule_llm": None if kappa is None else round(kappa, 6) + 0.0,
        "kappa_pairs": len(observed_pairs),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def build_consistency(run: RunStore | Path | str) -> dict[str, Any]:
    """Rule vs LLM consistency of a run directory (see the module docstring).

    Args:
        run: the run directory (or its :class:`RunStore`).

    Returns:
        A dict with ``split``, ``turns``, ``active_judge`` (id or ``None``), ``judges`` (per judge id:
        description, ``overall`` and ``by_answer_type`` tables) and ``pairs`` (kappa between judge
        configurations).

    Raises:
        FileNotFoundError: not a run directory.
        ValueError: an unreadable or invalid manifest.
    """
    store = run if isinstance(run, RunStore) else RunStore(Path(run))
    man = store.read_manifest()
    split = man.split.name
    rows = RunRows.read(store)
    active = man.active_judge
    # attempt-level cells: turns whose rule verdict counts and whose generation did not fail
    turns = [t for t in turn_verdicts(man, rows) if t.rule.verdict is not None and t.rule.judgeable]
    ids = sorted({jid for (key, jid) in rows.llm_verdicts if key.split == split})
    desc: dict[str, dict[str, Any]] = {}
    for (_, jid), row in rows.llm_verdicts.items():
        desc.setdefault(jid, {"judge_id": jid, "model": row.judge_model, "template_digest": row.template_digest})
    verdicts: dict[str, dict[TurnKey, str]] = {}
    judges: dict[str, Any] = {}
    for jid in ids:
        vmap: dict[TurnKey, str] = {}
        cells: list[tuple[bool, str, bool]] = []
        by_type: dict[str, list[tuple[bool, str, bool]]] = defaultdict(list)
        for t in turns:
            assert t.rule.completion_digest is not None
            verdict = llm_verdict_status(rows.llm_verdicts.get((t.key, jid)), t.rule.completion_digest).value
            if verdict is not None and verdict not in _COLUMNS:
                verdict = "error"
            observed = verdict is not None
            cell = (t.strict, verdict if verdict is not None else "not judged", observed)
            cells.append(cell)
            by_type[t.answer_type].append(cell)
            if verdict in ("TRUE", "FALSE"):
                vmap[t.key] = verdict
        verdicts[jid] = vmap
        judges[jid] = {
            **desc[jid],
            "active": jid == (active or {}).get("judge_id"),
            "overall": _table(cells),
            "by_answer_type": {t: _table(c) for t, c in sorted(by_type.items())},
        }
    pairs = []
    for a, b in itertools.combinations(ids, 2):
        common = [key for key in verdicts[a] if key in verdicts[b]]
        va = [verdicts[a][key] == "TRUE" for key in common]
        vb = [verdicts[b][key] == "TRUE" for key in common]
        kappa = cohens_kappa(va, vb)
        pairs.append(
            {
                "a": a,
                "b": b,
                "turns": len(common),
                "agreement": _ratio(sum(1 for x, y in zip(va, vb, strict=True) if x == y), len(common)),
                "both_TRUE": sum(1 for x, y in zip(va, vb, strict=True) if x and y),
                "a_TRUE_b_FALSE": sum(1 for x, y in zip(va, vb, strict=True) if x and not y),
                "a_FALSE_b_TRUE": sum(1 for x, y in zip(va, vb, strict=True) if not x and y),
                "both_FALSE": sum(1 for x, y in zip(va, vb, strict=True) if not x and not y),
                "kappa": None if kappa is None else round(kappa, 6) + 0.0,
            }
        )
    return {
        "split": split,
        "model": man.backend.get("model"),
        "turns": len(turns),
        "active_judge": (active or {}).get("judge_id"),
        "judges": judges,
        "pairs": pairs,
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _kappa(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}".replace("-0.000", "0.000")


def _judge_labels(judges: dict[str, Any]) -> dict[str, str]:
    """``{judge id: its model name}`` (readable where an id is not), with the id added to a model
    name that several judges share (one model, two prompt templates)."""
    models = [str(j.get("model")) for j in judges.values()]
    return {jid: md_cell(m if models.count(m) == 1 else f"{m} ({jid})")
            for jid, m in zip(judges, models, strict=True)}


def render_consistency_markdown(rep: dict[str, Any]) -> str:
    """Markdown rendering of :func:`build_consistency`'s output."""
    lines = [
        f"# Verifier consistency: {md_cell(rep['split'])} / {md_cell(rep['model'])}",
        "",
        f"{plural(rep['turns'], 'turn')} with a current rule verdict (attempt level). Rule = rule verifier; LLM = judge verdict on the same completion.",
        "",
    ]
    if not rep["judges"]:
        lines += ["No LLM verdicts in this run yet: run `studybench judge RUN_DIR --judge-model ...`.", ""]
    for jid, j in rep["judges"].items():
        o = j["overall"]
        star = " *" if o["rule_accept"]["assumed_TRUE"] else ""
        lines += [
            f"## Judge {md_cell(j.get('model'))} ({md_cell(jid)}{', active' if j['active'] else ''})",
            "",
            f"Template digest {md_cell(str(j.get('template_digest'))[:12])}. "
            f"Rule accepts audited by the judge: {o['audited_accepts']} of {o['rule_accepts']}.",
            "",
            "| rule \\ LLM | TRUE | FALSE | unjudgeable | error | not judged |",
            "|---|---|---|---|---|---|",
            f"| accept | {o['rule_accept']['TRUE'] + o['rule_accept']['assumed_TRUE']}{star} | {o['rule_accept']['FALSE']} | "
            f"{o['rule_accept']['unjudgeable']} | {o['rule_accept']['error']} | – |",
            f"| reject | {o['rule_reject']['TRUE']} | {o['rule_reject']['FALSE']} | {o['rule_reject']['unjudgeable']} | "
            f"{o['rule_reject']['error']} | {o['rule_reject']['not judged']} |",
            "",
        ]
        if star:
            lines += [
                f"\\* includes {o['rule_accept']['assumed_TRUE']} rule accepts the judge did not see, counted as LLM accepts "
                "(paper Table 11 convention); `studybench judge RUN_DIR --judge-rule-accepts` makes this cell observable.",
                "",
            ]
        lines += [
            f"Rule verifier w.r.t. the cascade: precision {_pct(o['precision'])} (judgeable only), "
            f"{_pct(o['precision_full'])} (all accepts); recall {_pct(o['recall'])}. "
            f"Cascade correct: {o['cascade_correct']} (rule {o['rule_correct']}, LLM-only {o['llm_accepts_among_rejections']}). "
            f"Cohen's kappa rule vs LLM: {_kappa(o['kappa_rule_llm'])} on {o['kappa_pairs']} observed pairs.",
            "",
            "| answer type | turns | accept: TRUE | accept: FALSE | reject: TRUE | reject: FALSE | unjudgeable | precision | recall |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for t, d in j["by_answer_type"].items():
            unj = d["rule_accept"]["unjudgeable"] + d["rule_reject"]["unjudgeable"]
            st = "*" if d["rule_accept"]["assumed_TRUE"] else ""
            lines.append(
                f"| {md_cell(t)} | {d['turns']} | {d['rule_accept']['TRUE'] + d['rule_accept']['assumed_TRUE']}{st} | {d['rule_accept']['FALSE']} | "
                f"{d['rule_reject']['TRUE']} | {d['rule_reject']['FALSE']} | {unj} | {_pct(d['precision'])} | {_pct(d['recall'])} |"
            )
        lines.append("")
    if rep["pairs"]:
        lines += [
            "## Agreement between judge configurations",
            "",
            "| A | B | turns | both TRUE | A TRUE, B FALSE | A FALSE, B TRUE | both FALSE | agreement | Cohen's kappa |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        label = _judge_labels(rep["judges"])
        for p in rep["pairs"]:
            lines.append(
                f"| {label.get(p['a'], md_cell(p['a']))} | {label.get(p['b'], md_cell(p['b']))} | {p['turns']} | {p['both_TRUE']} | {p['a_TRUE_b_FALSE']} | {p['a_FALSE_b_TRUE']} | "
                f"{p['both_FALSE']} | {_pct(p['agreement'])} | {_kappa(p['kappa'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def write_consistency(run: RunStore | Path | str) -> dict[str, Any]:
    """Build the consistency report and write ``consistency.json`` / ``consistency.md`` atomically.

    Args:
        run: the run directory (or its :class:`RunStore`).

    Returns:
        The report (:func:`build_consistency`).

    Raises:
        FileNotFoundError, ValueError: see :func:`build_consistency`; OSError when a file cannot be written.
    """
    store = run if isinstance(run, RunStore) else RunStore(Path(run))
    rep = build_consistency(store)
    atomic_write_text(store.root / "consistency.json", dumps_json(rep) + "\n")
    atomic_write_text(store.root / "consistency.md", render_consistency_markdown(rep))
    return rep
