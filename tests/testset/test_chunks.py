"""``studybench export chunks``: the redacted corpus cut into token chunks (issue 13, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import require_extra
from typer.testing import CliRunner

from studybench.cli import app
from studybench.testset.corpus.books import CorpusError
from studybench.testset.corpus.chunks import chunk_text, export_chunks, manifest_path
from studybench.tokens import count_tokens, token_spans


def _para(i: int, words: int = 40) -> str:
    return " ".join(f"word{i}x{j}" if j % 7 else f"$E_{{{j}}}=mc^2$" for j in range(words)) + "."


def _chapter(n: int, seed: int) -> str:
    return "\n\n".join(_para(seed * 100 + i) for i in range(n)) + "\n"


def _books(root: Path) -> Path:
    books = root / "books"
    for src, chapters in {"Alpha_Mech": ["ch01", "ch02", "solutions-ch01"], "Beta_EM": ["ch05"]}.items():
        for i, ch in enumerate(chapters):
            d = books / src / ch
            d.mkdir(parents=True)
            (d / "clean.md").write_text(_chapter(12, i) + "UNREDACTED\n", encoding="utf-8")
            (d / "clean.redacted.md").write_text(_chapter(12, i), encoding="utf-8")
    only_clean = books / "Beta_EM" / "ch06"
    only_clean.mkdir()
    (only_clean / "clean.md").write_text(_chapter(3, 9), encoding="utf-8")
    return books


def _invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _file_text(books: Path, rel: str) -> str:
    return (books / rel).read_bytes().decode("utf-8-sig")


def test_unredacted_chapters_are_refused_by_name(tmp_path: Path) -> None:
    books = _books(tmp_path)
    res = _invoke("export", "chunks", "--books", books, "--out", tmp_path / "c.jsonl")
    assert res.exit_code == 2, res.output  # type: ignore[attr-defined]
    out = " ".join(res.output.split())  # type: ignore[attr-defined]
    assert "Beta_EM/ch06" in out and "studybench corpus redact" in out and "--allow-unredacted" in out
    assert "Alpha_Mech/ch01" not in out
    assert not (tmp_path / "c.jsonl").exists()


def test_allow_unredacted_uses_clean_md_and_marks_the_rows(tmp_path: Path) -> None:
    books = _books(tmp_path)
    out = tmp_path / "c.jsonl"
    res = _invoke("export", "chunks", "--books", books, "--out", out, "--size", 300, "--allow-unredacted")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    rows = _rows(out)
    assert {r["redacted"] for r in rows if r["chapter"] == "ch06"} == {False}
    assert {r["file"] for r in rows if r["chapter"] == "ch06"} == {"Beta_EM/ch06/clean.md"}
    assert all(r["redacted"] for r in rows if r["chapter"] != "ch06")
    assert all("UNREDACTED" not in r["text"] for r in rows)  # redacted file preferred where it exists


def test_chunks_fit_slice_back_and_leave_answers_out(tmp_path: Path) -> None:
    books = _books(tmp_path)
    (books / "Beta_EM" / "ch06" / "clean.redacted.md").write_text(_chapter(3, 9), encoding="utf-8")
    out = tmp_path / "c.jsonl"
    res = _invoke("export", "chunks", "--books", books, "--out", out, "--size", 256)
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    text = " ".join(res.output.split())  # type: ignore[attr-defined]
    assert "from 4 chapters of 2 books" in text and "left out 1 answer folder" in text
    rows = _rows(out)
    assert {(r["book"], r["chapter"]) for r in rows} == {("Alpha_Mech", "ch01"), ("Alpha_Mech", "ch02"), ("Beta_EM", "ch05"), ("Beta_EM", "ch06")}
    assert all(r["n_tokens"] <= 256 and count_tokens(r["text"]) <= 256 for r in rows)
    for r in rows:
        assert _file_text(books, r["file"])[r["start"]:r["end"]] == r["text"] == r["context"]
        assert r["file"] == f"{r['book']}/{r['chapter']}/clean.redacted.md"
    for ch in ("ch01", "ch05"):
        idx = [r["chunk"] for r in rows if r["chapter"] == ch]
        assert idx == list(range(len(idx))) and len(idx) > 1
    man = json.loads(manifest_path(out).read_text())
    assert man["tokenizer"] == "builtin" and man["size"] == 256 and man["overlap"] == 0
    assert man["chunks"] == len(rows) and man["tokens"] == sum(r["n_tokens"] for r in rows)
    assert len(man["files"]["Alpha_Mech/ch01/clean.redacted.md"]) == 64
    res = _invoke("export", "chunks", "--books", books, "--out", out, "--size", 256, "--include-answers")
    assert res.exit_code == 0 and any(r["chapter"] == "solutions-ch01" for r in _rows(out))  # type: ignore[attr-defined]


def test_chunks_end_at_paragraph_breaks_near_the_window_end() -> None:
    paras = [" ".join(["alpha", "beta", "gamma", "delta", "omega"] * 5) + "." for _ in range(40)]
    text = "\n\n".join(paras)  # 27 tokens a paragraph: each window's last 30 tokens hold a break
    spans = token_spans(text)
    size = 200
    chunks = chunk_text(text, spans, size)
    assert all(c.n_tokens <= size for c in chunks)
    inner = chunks[:-1]
    # every chunk but the last ends where a paragraph ends (one lies in each window's last 15 %)
    assert inner and all(text[:c.end].endswith(".\n\n") for c in inner)
    assert all(size * 0.85 <= c.n_tokens < size for c in inner)
    assert "".join(text[c.start:c.end] for c in chunks) == text
    # no paragraph break at all: cut at exactly the token limit
    flat = " ".join(paras)
    cut = chunk_text(flat, token_spans(flat), size)
    assert [c.n_tokens for c in cut[:-1]] == [size] * (len(cut) - 1)
    assert "".join(flat[c.start:c.end] for c in cut) == flat


def test_overlap_repeats_tokens_from_the_previous_chunk() -> None:
    text = " ".join(f"w{i}" for i in range(1000))
    spans = token_spans(text)
    plain = chunk_text(text, spans, 100)
    over = chunk_text(text, spans, 100, overlap=20)
    assert len(over) > len(plain)
    for a, b in zip(over, over[1:], strict=False):
        assert b.start < a.end and count_tokens(text[b.start:a.end]) == 20
    assert over[-1].end == len(text)
    with pytest.raises(ValueError, match="overlap"):
        chunk_text(text, spans, 100, overlap=100)


def test_overlap_must_be_smaller_than_the_size_on_the_command_line(tmp_path: Path) -> None:
    res = _invoke("export", "chunks", "--books", _books(tmp_path), "--size", 10, "--overlap", 10)
    assert res.exit_code == 2 and "--overlap" in res.output  # type: ignore[attr-defined]


def test_a_local_hf_tokenizer_bounds_the_chunks(tmp_path: Path) -> None:
    require_extra("audit", "tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "the": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "tokenizer.json"))
    books = _books(tmp_path)
    (books / "Beta_EM" / "ch06").joinpath("clean.redacted.md").write_text(_chapter(3, 9), encoding="utf-8")
    out = tmp_path / "c.jsonl"
    res = _invoke("export", "chunks", "--books", books, "--out", out, "--size", 50, "--tokenizer", tmp_path / "tokenizer.json")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    rows = _rows(out)
    assert rows and all(len(r["text"].split()) <= 50 and r["n_tokens"] <= 50 for r in rows)
    assert max(r["n_tokens"] for r in rows) > 40
    for r in rows:
        assert _file_text(books, r["file"])[r["start"]:r["end"]] == r["text"]
    assert json.loads(manifest_path(out).read_text())["tokenizer"] == str(tmp_path / "tokenizer.json")


def test_a_non_utf8_chapter_is_named(tmp_path: Path) -> None:
    books = _books(tmp_path)
    (books / "Beta_EM" / "ch06" / "clean.redacted.md").write_bytes(b"fine line\n\xff\xfe bad\n")
    with pytest.raises(CorpusError, match=r"ch06/clean\.redacted\.md: line 2: not valid UTF-8"):
        export_chunks(books, tmp_path / "c.jsonl")
    res = _invoke("export", "chunks", "--books", books, "--out", tmp_path / "c.jsonl")
    assert res.exit_code == 2 and "clean.redacted.md" in res.output and "UTF-8" in res.output  # type: ignore[attr-defined]
    assert not (tmp_path / "c.jsonl").exists() and not list(tmp_path.glob(".c.jsonl.tmp-*"))


def test_a_bom_and_crlf_keep_offsets_exact(tmp_path: Path) -> None:
    books = tmp_path / "books"
    d = books / "S" / "ch1"
    d.mkdir(parents=True)
    (d / "clean.redacted.md").write_bytes(("\ufeff" + _chapter(8, 1).replace("\n", "\r\n")).encode("utf-8"))
    out = tmp_path / "c.jsonl"
    export_chunks(books, out, size=100)
    rows = _rows(out)
    assert len(rows) > 2
    for r in rows:
        assert _file_text(books, r["file"])[r["start"]:r["end"]] == r["text"]


def test_no_chapters_and_bogus_tokenizer_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    res = _invoke("export", "chunks", "--books", tmp_path / "empty")
    assert res.exit_code == 2 and "no chapters" in res.output  # type: ignore[attr-defined]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # set after huggingface_hub may have been imported: still no request
    import socket

    asked: list[object] = []

    def no_network(*args: object, **kwargs: object) -> None:
        asked.append(args)
        raise OSError("the test forbids network connections")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    books = _books(tmp_path)
    res = _invoke("export", "chunks", "--books", books, "--allow-unredacted", "--out", tmp_path / "c.jsonl",
                  "--tokenizer", "no-such-org/no-such-tok")
    assert res.exit_code == 2 and "--tokenizer no-such-org/no-such-tok" in res.output  # type: ignore[attr-defined]
    assert "HF_HUB_OFFLINE is set" in res.output and asked == []  # type: ignore[attr-defined]


def test_books_default_to_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    books = _books(tmp_path)
    monkeypatch.delenv("STUDYBENCH_BOOKS", raising=False)
    res = _invoke("export", "chunks", "--out", tmp_path / "c.jsonl")
    assert res.exit_code == 2 and "STUDYBENCH_BOOKS" in res.output
    monkeypatch.setenv("STUDYBENCH_BOOKS", str(books))
    res = _invoke("export", "chunks", "--out", tmp_path / "c.jsonl", "--allow-unredacted")
    assert res.exit_code == 0, res.output
    assert _rows(tmp_path / "c.jsonl")
