"""``--torch-threads`` and ``--embedding-backend``: one option each, one meaning, on every command that embeds
or otherwise runs torch.

The commands that run a sentence-embedding model on the CPU (``build retrieve``, ``build decompose``'s
embedding merges, ``audit contamination``'s stage 2) take ``--torch-threads N``: torch's intra-op threads
for the whole command. Without it torch picks (one thread per physical core), which on a machine shared
with other jobs can be slower than fewer threads. ``bench/retrieval_bench.py`` and ``bench/audit_bench.py``
take the same flag. ``--embedding-backend torch|onnx`` (default torch) picks the runtime of the embedding
model (:mod:`studybench.embedding_backend`); onnx is opt-in (the ``onnx`` extra) and ``--torch-threads``
sets onnxruntime's threads too.
"""

from __future__ import annotations

from typing import Annotated

import typer

from studybench.cli.common import fail
from studybench.embedding_backend import BACKENDS

__all__ = ["EMBEDDING_BACKEND_HELP", "TORCH_THREADS_HELP", "EmbeddingBackend", "TorchThreads", "set_torch_threads"]

TORCH_THREADS_HELP = ("torch's intra-op threads for the embedding model (default: torch's own choice, one per "
                      "physical core); fewer can be faster on a shared machine.")

TorchThreads = Annotated[int | None, typer.Option("--torch-threads", min=1, metavar="N", help=TORCH_THREADS_HELP)]
"""The ``--torch-threads`` parameter of a command (``None``: torch picks)."""

EMBEDDING_BACKEND_HELP = ("Runtime of the embedding model: torch (default) or onnx (opt-in, pip install "
                          "'studybench[onnx]': the model exported once to ONNX, offline, and run by onnxruntime; "
                          "float32 on the CPU; faster on short texts such as queries; cosine to torch's vectors >= 0.9999; "
                          "cached apart).")


def _backend(value: str) -> str:
    if value not in BACKENDS:
        raise typer.BadParameter(f"must be one of {', '.join(BACKENDS)}, got {value!r}")
    return value


EmbeddingBackend = Annotated[str, typer.Option("--embedding-backend", metavar="torch|onnx", callback=_backend,
                                               help=EMBEDDING_BACKEND_HELP)]
"""The ``--embedding-backend`` parameter of a command (default ``"torch"``)."""


def set_torch_threads(n: int | None) -> int | None:
    """Set torch's intra-op threads for this process (before any model runs).

    Args:
        n: the number of threads (>= 1), or ``None`` to leave torch's own choice (nothing is imported).

    Returns:
        The number torch now uses, or ``None`` when ``n`` is ``None``.

    Raises:
        typer.Exit: (exit 2, with a message) torch is not installed.
    """
    if n is None:
        return None
    try:
        import torch
    except ImportError:
        fail("--torch-threads needs torch: pip install 'studybench[build]' (or 'studybench[audit]')")
    torch.set_num_threads(n)
    return int(torch.get_num_threads())
