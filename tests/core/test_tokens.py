"""studybench.tokens: the built-in tokenizer's spans and counts, and local Hugging Face tokenizers offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import require_extra

from studybench.tokens import BUILTIN, TokenizerError, count_tokens, load_tokenizer, token_spans

TEXT = (
    "The electric field of a point charge is $\\vec{E} = \\frac{q}{4\\pi\\varepsilon_0 r^2}\\hat{r}$.\n\n"
    "At r = 12345.678 m  the field is tiny; electromagnetism  \t is everywhere.\r\n\n  Done. ∮ E·dA = Q/ε₀\n"
)


def _covers(text: str, spans: list[tuple[int, int]]) -> bool:
    pos = 0
    for a, b in spans:
        if a != pos or b < a:
            return False
        pos = b
    return pos == len(text)


@pytest.mark.parametrize("text", [TEXT, "", " ", "\n\n\n", "word", "  leading and trailing  ", "a\u2028b\x00c"])
def test_builtin_spans_cover_the_text_in_order(text: str) -> None:
    spans = token_spans(text)
    assert _covers(text, spans)
    assert all(b > a for a, b in spans)  # no empty token
    assert count_tokens(text) == len(spans)


def test_builtin_counts_are_plausible_and_scale_with_the_text() -> None:
    prose = ("The quick brown fox jumps over the lazy dog while the physicist measures its velocity. " * 20)
    n = count_tokens(prose)
    assert 3.0 <= len(prose) / n <= 5.0  # about four characters per token on English prose
    assert abs(count_tokens(prose * 3) - 3 * n) <= 2  # a trailing space joins the next word at the seams
    assert count_tokens("12345") == 2 and count_tokens("\\frac") == 1
    pieces = [TEXT[a:b] for a, b in token_spans(TEXT)]
    assert " field" in pieces and " \\frac" in pieces and "\\pi" in pieces and "\n\n" in pieces


def test_builtin_names() -> None:
    assert load_tokenizer(None).name == load_tokenizer("builtin").name == BUILTIN
    assert count_tokens(TEXT, "builtin") == count_tokens(TEXT, load_tokenizer(None))


def _tiny_tokenizer(dirpath: Path) -> Path:
    """A WordLevel tokenizer.json built here: nothing is downloaded."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = sorted({w for w in TEXT.replace("\n", " ").split(" ") if w} | {"the", "field"})
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    dirpath.mkdir(parents=True, exist_ok=True)
    path = dirpath / "tokenizer.json"
    tok.save(str(path))
    return path


def test_a_local_tokenizer_json_loads_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("audit", "tokenizers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = _tiny_tokenizer(tmp_path / "tok")
    tok = load_tokenizer(str(path))
    assert tok.name == str(path)
    spans = tok.spans(TEXT)
    assert _covers(TEXT, spans)
    assert len(spans) == len(TEXT.split())  # one WordLevel token per whitespace-separated word
    assert count_tokens("the field the", tok) == 3


def test_a_local_tokenizer_folder_loads_through_transformers_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("audit", "tokenizers", "transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "tok"
    _tiny_tokenizer(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}))
    tok = load_tokenizer(str(folder))
    spans = tok.spans(TEXT)
    assert _covers(TEXT, spans) and len(spans) == len(TEXT.split())


def test_a_bogus_name_is_a_clear_error_and_downloads_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("audit", "transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(TokenizerError, match=r"--tokenizer no-such-org/no-such-tokenizer: cannot load it \(HF_HUB_OFFLINE") as e:
        load_tokenizer("no-such-org/no-such-tokenizer")
    assert "\n" not in str(e.value) and "local folder or tokenizer.json" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_a_file_that_is_not_a_tokenizer_json(tmp_path: Path) -> None:
    require_extra("audit", "tokenizers")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError, match="not a tokenizer.json"):
        load_tokenizer(str(bad))


def test_spans_keep_a_few_bytes_a_token() -> None:
    # a chapter may hold millions of one-character tokens: a list of tuples took ~130 bytes each
    import tracemalloc

    from studybench.tokens import Spans

    text = "$^" * 500_000
    tracemalloc.start()
    try:
        spans = token_spans(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(spans, Spans) and len(spans) == 1_000_000
    assert peak < 20 * len(spans), f"{peak / len(spans):.0f} bytes a token"
    assert spans[0] == (0, 1) and spans[-1] == (999_999, 1_000_000) and spans[1:3] == [(1, 2), (2, 3)]
    assert spans == list(spans) and count_tokens(text) == len(spans)
