"""The one registry of export formats (:mod:`studybench.exports`, issue 26 item 3): every format is one
entry, the ``studybench export`` commands are registered from it in its order and write through it,
and each command's files are byte for byte what the registered library writer writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from _support import FIXTURES, require_extra
from typer.testing import CliRunner

from studybench.cli import app
from studybench.cli.export import EXPORT_COMMANDS
from studybench.exports import FORMATS, ExportFormat, export_format, write_export
from studybench.protocol import DEFAULT_SYSTEM_PROMPT

FIXTURE_RUN = FIXTURES / "run_v010" / "run"


def test_the_issue_formats_are_all_registered_once() -> None:
    assert list(FORMATS) == ["attempts", "chunks", "verl", "trl", "csv"]
    for name, fmt in FORMATS.items():
        assert fmt.name == name
        assert callable(fmt.load_writer()), name
        rows = fmt.load_rows()
        assert rows is None or callable(rows), name
        assert fmt.reads in ("run", "instructions", "corpus")
        assert fmt.output in ("file", "directory")


def test_export_commands_are_the_registry_in_its_order() -> None:
    group = typer.main.get_command(app).commands["export"]
    assert list(group.commands) == list(FORMATS)
    assert set(EXPORT_COMMANDS) == set(FORMATS)


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="no export format 'xlsx'; known: attempts, chunks, verl, trl, csv"):
        export_format("xlsx")
    with pytest.raises(ValueError, match="known"):
        write_export("nope", "x")


def test_a_bad_reference_is_refused() -> None:
    with pytest.raises(TypeError, match="not a function"):
        ExportFormat("x", "x", "run", writer="studybench.protocol:DEFAULT_SYSTEM_PROMPT").load_writer()


def test_looking_up_a_format_imports_no_writer() -> None:
    code = ("import sys; from studybench.exports import export_format; export_format('verl'); "
            "print(sorted(m for m in ('studybench.methods', 'studybench.analysis', 'studybench.testset') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ}).stdout.strip()
    assert out == "[]"


# ---- the commands write what the registered writers write ------------------------------------------


def _train_dir(root: Path) -> Path:
    d = root / "train"
    d.mkdir()

    def rec(src: str, pid: str, q: str, ans: str) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": q}], "solution": "s", "answer": ans, "answer_type": "NV",
                "type_sequence": "", "metadata": {"source": src, "source_problem_id": pid, "source_chapter": "c1",
                                                  "sub_discipline": "Mechanics"}}

    single = [rec(src, f"P{k}", f"{src} {k}: find v, \"quoted\",\nnext line", f"\\boxed{{{k}.5}}")
              for src in ("BookA", "BookB") for k in range(12)]
    multi = [rec("BookA", "M1", "part 1", "\\boxed{1}")]
    without = [{**rec("BookA", "W1", "explain", ""), "answer_type": ""}]
    for name, obj in (("verifiable_instr.json", single), ("verifiable_instr_multi_subs.json", multi),
                      ("unverifiable_instr.json", without)):
        (d / name).write_text(json.dumps(obj), encoding="utf-8")
    return d


def _books(root: Path) -> Path:
    for src, chapters in {"Alpha": ["ch01", "ch02"], "Beta": ["ch05"]}.items():
        for i, ch in enumerate(chapters):
            d = root / "books" / src / ch
            d.mkdir(parents=True)
            (d / "clean.redacted.md").write_text(
                "\n\n".join(" ".join(f"w{i}{p}{j} $x_{j}$" for j in range(60)) for p in range(6)), encoding="utf-8")
    return root / "books"


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (or the file and its sidecars), with the root's own path blanked."""
    base = root if root.is_dir() else root.parent
    paths = [p for p in base.rglob("*") if p.is_file() and (root.is_dir() or p.name.startswith(root.stem))]
    return {str(p.relative_to(base)).replace(root.stem, "OUT"): p.read_bytes().replace(str(root).encode(), b"OUT")
            for p in paths}


def _cases(tmp: Path) -> dict[str, tuple[list[str], Callable[[Path], Any], str]]:
    """format -> (CLI arguments after ``--out``, the same export by the registry, the output's name)."""
    train = _train_dir(tmp)
    books = _books(tmp)

    def layers(name: str, kinds: list[str]) -> Any:
        return export_format(name).load_rows()(train, kinds)  # type: ignore[misc]

    def attempts(out: Path) -> Any:
        fmt = export_format("attempts")
        rows = fmt.load_rows()(FIXTURE_RUN, None, allow_incomplete=True)  # type: ignore[misc]
        return fmt.load_writer()(rows, out, "jsonl")

    return {
        "attempts": (["attempts", str(FIXTURE_RUN), "--allow-incomplete", "--out"], attempts, "a.jsonl"),
        "chunks": (["chunks", "--books", str(books), "--size", "64", "--out"],
                   lambda out: write_export("chunks", books, out, size=64), "c.jsonl"),
        "csv": (["csv", "--train-dir", str(train), "--out"],
                lambda out: write_export("csv", out, layers=layers("csv", ["single", "multi_sub"]),
                                         fractions=[0.2, 0.1, 0.7], seed=0), "x.csv"),
        "verl": (["verl", "--train-dir", str(train), "--seed", "3", "--out"],
                 lambda out: write_export("verl", out, layers=layers("verl", ["single", "multi_sub"]),
                                          val_fraction=0.05, seed=3, system_prompt=DEFAULT_SYSTEM_PROMPT), "verl"),
        "trl": (["trl", "--train-dir", str(train), "--with-without-answer", "--out"],
                lambda out: write_export("trl", out, layers=layers("trl", ["single", "multi_sub", "without_answer"]),
                                         val_fraction=0.05, seed=0, system_prompt=DEFAULT_SYSTEM_PROMPT,
                                         with_without_answer=True), "trl"),
    }


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_command_writes_what_the_registered_writer_writes(name: str, tmp_path: Path) -> None:
    if name == "verl":
        require_extra("train", "pyarrow")
    if name == "trl":
        require_extra("train", "datasets")
    args, library, out_name = _cases(tmp_path)[name]
    cli_out, lib_out = tmp_path / "cli" / out_name, tmp_path / "lib" / out_name
    cli_out.parent.mkdir()
    lib_out.parent.mkdir()
    res = CliRunner().invoke(app, ["export", *args, str(cli_out)], catch_exceptions=False)
    assert res.exit_code in (0, 1), res.output  # attempts of the incomplete fixture run exit 1, marked
    library(lib_out)
    got, want = _files(cli_out), _files(lib_out)
    assert want, f"{name}: the library wrote nothing"
    assert got == want
