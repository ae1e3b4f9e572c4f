"""The textbook corpus and the exercise pool (paper section 2.1, 2.3, appendix H).

The first stage of test-set construction and the corpus hygiene around it:

- :mod:`.books`: the books layout, MinerU parsing, OCR clean-up rules (``corpus check|parse|clean``);
- :mod:`.textmatch` and :mod:`.redact`: OCR-tolerant copy finding, redaction of test items from the
  corpus and the residue audit (``corpus redact|audit``);
- :mod:`.ingest`, :mod:`.cnxml` and :mod:`.answer_forms`: OpenStax CNXML to Markdown and the exercise pool
  (``corpus ingest-cnxml``);
- :mod:`.chunks`: the redacted corpus in N-token chunks (``export chunks``);
- :mod:`.fragments`: exposition and worked-example fragments for retrieval (``build fragments``);
- :mod:`.stats`: the paper's Table 1 and Table 7 (``data stats``).

Imports flow one way inside: ``stats | fragments | redact | ingest`` over ``chunks`` over
``books | textmatch | answer_forms | cnxml``. Nothing here imports another stage of :mod:`studybench.testset`.
"""

from studybench.testset.corpus.books import CLEAN, FULL, REDACTED, Chapter, CorpusError, scan_books
from studybench.testset.corpus.chunks import Chunk, chunk_text, export_chunks
from studybench.testset.corpus.fragments import FRAGMENTS, Fragment, FragmentSettings, build_fragments
from studybench.testset.corpus.ingest import IngestError, IngestReport, ingest_cnxml
from studybench.testset.corpus.redact import RedactParams, audit_books, redact_books, redact_text
from studybench.testset.corpus.stats import corpus_stats, data_stats
from studybench.testset.corpus.textmatch import find_copies

__all__ = [
    "CLEAN",
    "FRAGMENTS",
    "FULL",
    "REDACTED",
    "Chapter",
    "Chunk",
    "CorpusError",
    "Fragment",
    "FragmentSettings",
    "IngestError",
    "IngestReport",
    "RedactParams",
    "audit_books",
    "build_fragments",
    "chunk_text",
    "corpus_stats",
    "data_stats",
    "export_chunks",
    "find_copies",
    "ingest_cnxml",
    "redact_books",
    "redact_text",
    "scan_books",
]
