"""Deprecated: ``studybench.build`` is now :mod:`studybench.testset` (issue 26); this alias goes in 0.3.

``import studybench.build.retrieve`` (or ``from studybench.build.corpus import scan_books``) still works
and gives the module's new home itself (the same module object, so monkeypatching it patches the code
that runs), with a :class:`DeprecationWarning` naming the new path. Nothing in the package imports this
alias.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED"]

MOVED = {
    "answer_forms": "studybench.testset.corpus.answer_forms",
    "chunks": "studybench.testset.corpus.chunks",
    "corpus": "studybench.testset.corpus.books",
    "decompose": "studybench.testset.knowledge.points",
    "embedding": "studybench.testset.embedding",
    "filters": "studybench.testset.filters.passk",
    "fragments": "studybench.testset.corpus.fragments",
    "guide": "studybench.testset.guidance.guide",
    "ingest": "studybench.testset.corpus.ingest",
    "kpverify": "studybench.testset.verification.kpverify",
    "leakage": "studybench.testset.guidance.leakage",
    "llmstage": "studybench.testset.llmstage",
    "redact": "studybench.testset.corpus.redact",
    "retrieve": "studybench.testset.retrieval.hybrid",
    "stats": "studybench.testset.corpus.stats",
    "textmatch": "studybench.testset.corpus.textmatch",
}
"""Old module name under ``studybench.build`` -> its module now."""

warnings.warn("studybench.build is deprecated: use studybench.testset", DeprecationWarning, stacklevel=2)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``studybench.build.<old>`` and hands back the module it moved to."""

    def __init__(self) -> None:
        self.specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 - importlib's signature
        prefix, _, name = fullname.rpartition(".")
        if prefix != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name.rpartition(".")[2]]
        warnings.warn(f"{spec.name} is deprecated: use {new}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self.specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set the alias's spec on the moved module; give it its own back
        spec = self.specs.get(getattr(module.__spec__, "name", ""))
        if spec is not None:
            module.__spec__ = spec


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.append(_Alias())


def __getattr__(name: str) -> ModuleType:
    """``studybench.build.corpus`` as an attribute: the moved module."""
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
