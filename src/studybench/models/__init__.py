"""Chat backends behind one small protocol (:class:`ChatBackend`)."""

from studybench.models.base import PRESETS, ChatBackend, ChatRequest, ChatResult, SamplingParams
from studybench.models.reference import REFERENCE_MODES, ReferenceBackend

__all__ = [
    "PRESETS",
    "REFERENCE_MODES",
    "ChatBackend",
    "ChatRequest",
    "ChatResult",
    "ReferenceBackend",
    "SamplingParams",
]
