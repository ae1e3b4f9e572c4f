"""What the stages of the contamination audit share: the optional-dependency error and loader, and the
progress callback type."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["AuditExtraMissing", "ProgressFn", "require_extra"]

EXTRA_HINT = 'pip install "studybench[audit]"'

#: Progress callback: (stage label, units done, units total).
ProgressFn = Callable[[str, int, int], None]


class AuditExtraMissing(RuntimeError):
    """An optional dependency of the audit (datasketch, sentence-transformers, numpy) is missing."""


def require_extra(module: str) -> Any:
    """Import an optional dependency of the audit.

    Raises:
        AuditExtraMissing: the module is not installed (the message says how to install the extra).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise AuditExtraMissing(
            f"the contamination audit needs the optional package '{module.split('.')[0]}' ({e}); "
            f"install it with: {EXTRA_HINT}"
        ) from None
