"""Chat backends behind one small protocol (:class:`ChatBackend`), and the endpoint check.

- :class:`ChatBackend` (:mod:`studybench.models.base`): one :class:`ChatRequest` in, one
  :class:`ChatResult` out; backends never raise for a failed turn;
- :class:`studybench.models.openai_backend.OpenAIBackend`: any OpenAI-compatible endpoint (``vllm serve``);
- :class:`ReferenceBackend`: the offline gold replay (``--model reference``);
- :func:`check_endpoint`: fail fast when an endpoint does not answer.
"""

from studybench.models.base import (
    MIN_COMPLETION_TOKENS,
    PRESETS,
    ChatBackend,
    ChatRequest,
    ChatResult,
    SamplingParams,
)
from studybench.models.health import DEFAULT_LIVENESS_TIMEOUT, EndpointHealth, LivenessCheck
from studybench.models.preflight import EndpointError, check_endpoint
from studybench.models.reference import REFERENCE_MODES, ReferenceBackend

__all__ = [
    "DEFAULT_LIVENESS_TIMEOUT",
    "MIN_COMPLETION_TOKENS",
    "PRESETS",
    "REFERENCE_MODES",
    "ChatBackend",
    "ChatRequest",
    "ChatResult",
    "EndpointError",
    "EndpointHealth",
    "LivenessCheck",
    "ReferenceBackend",
    "SamplingParams",
    "check_endpoint",
]
