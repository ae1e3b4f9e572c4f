"""Every labelled dev pair (``../shared/data/verifier/dev_pairs.jsonl``) is a test (issue 3).

A pair passes when the verifier's verdict equals its label. The pairs the rules still miss are
listed in :data:`KNOWN_MISSES` with the reason and run as strict xfails: a change that fixes one
makes the suite fail until the entry is removed, and a change that breaks any other pair fails at
once. No known miss is a false accept (every listed pair is labelled correct), so the rule
verifier's precision on the dev pairs is 100%.

The file's location: ``$STUDYBENCH_VERIFIER_PAIRS``, else ``<repo>/../shared/data/verifier/
dev_pairs.jsonl``, else ``verifier/dev_pairs.jsonl`` beside ``$STUDYBENCH_DATA``; the tests are skipped when it is absent (and fail under
``STUDYBENCH_REQUIRE_DATA=1``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from _support import SHARED_DATA

from studybench.answers import extract_answers
from studybench.records import gold_boxes
from studybench.verify import Verifier
from studybench.verify.rules import normalise_types


def _pairs_path() -> Path | None:
    env = os.environ.get("STUDYBENCH_VERIFIER_PAIRS")
    if env:
        return Path(env) if Path(env).is_file() else None
    candidates = [SHARED_DATA / "verifier" / "dev_pairs.jsonl"]
    data = os.environ.get("STUDYBENCH_DATA")
    if data:  # .../data/studybench (or .../data) -> .../data/verifier
        candidates += [Path(data).parent / "verifier" / "dev_pairs.jsonl", Path(data) / "verifier" / "dev_pairs.jsonl"]
    return next((c for c in candidates if c.is_file()), None)


def _load() -> list[dict]:
    p = _pairs_path()
    if p is None:
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


PAIRS = _load()

_QL = "QL paraphrase: same meaning in other words, left to the LLM judge (no rule can tell it from a related but different statement)"
KNOWN_MISSES: dict[int, str] = {
    40: "NV gold 9.9 without unit or gold_unit; a prediction in GeV cannot be checked (the MeV twin is wrong)",
    320: "EQ: alpha = 16 sigma / c is defined in the problem text, which the dev pair does not carry (with it, accepted: test_verify_round2_definitions)",
    361: "EX: omega = sqrt(k/m) is an implicit convention: the problem states only V = (k/2) sum x^2, no definition of omega",
    392: "QL: glosses in parentheses ('synchrotron (radiative) cooling') are kept: dropping them lets hedges and contradictions through",
    **{i: _QL for i in (364, 365, 368, 369, 372, 373, 376, 377, 380, 381, 384, 385, 388, 389, 393, 396, 397, 400, 401)},
}


def _verify(v: Verifier, row: dict) -> tuple[bool, str]:
    at, ts = normalise_types(row["answer_type"], row.get("type_sequence") or "")
    golds = gold_boxes(row["gold"], at, ts)
    preds = extract_answers(row["response"], m=len(golds))
    verdict = v.verify(golds, preds, at, ts, gold_unit=row.get("gold_unit"))
    return verdict.correct, verdict.reason


def test_dev_pairs_present() -> None:
    if not PAIRS:
        if os.environ.get("STUDYBENCH_REQUIRE_DATA") == "1":
            pytest.fail("dev_pairs.jsonl not found (set STUDYBENCH_VERIFIER_PAIRS)")
        pytest.skip("dev_pairs.jsonl not found")
    assert len(PAIRS) >= 400
    assert all(i < len(PAIRS) and PAIRS[i]["label"] for i in KNOWN_MISSES), "known misses must be positives"


@pytest.mark.parametrize(
    "i",
    [
        pytest.param(i, marks=pytest.mark.xfail(reason=KNOWN_MISSES[i], strict=True)) if i in KNOWN_MISSES else i
        for i in range(len(PAIRS))
    ],
    ids=[f"{i}-{r['answer_type']}-{r['kind']}" for i, r in enumerate(PAIRS)],
)
def test_dev_pair(verifier: Verifier, i: int) -> None:
    row = PAIRS[i]
    correct, reason = _verify(verifier, row)
    assert correct is bool(row["label"]), f"{row['note']}: {reason}"


def test_dev_precision_per_type(verifier: Verifier) -> None:
    """No false accept of any type; the misses are exactly the listed ones."""
    if not PAIRS:
        pytest.skip("dev_pairs.jsonl not found")
    fp: Counter[str] = Counter()
    misses = set()
    for i, row in enumerate(PAIRS):
        correct, _ = _verify(verifier, row)
        if correct and not row["label"]:
            fp[row["answer_type"]] += 1
        if not correct and row["label"]:
            misses.add(i)
    assert not fp, fp
    assert misses == set(KNOWN_MISSES)
