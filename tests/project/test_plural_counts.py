"""Counts printed by reports, comparisons and commands agree in number ("1 seed", "3 seeds").

Every f-string of ``report/``, ``analysis/`` and ``cli/`` that writes a number before a counted noun
(``{n} seeds``, ``of {n} turns``, ``{n} rule verdicts``) goes through :func:`studybench.escaping.plural`;
so do the HTML templates. The check reads the sources (every such phrase, now and later), and the
helper itself is checked on the numbers where the noun changes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from studybench.escaping import plural

SRC = Path(__file__).resolve().parents[2] / "src" / "studybench"
NOUNS = ("seeds", "runs", "parents", "turns", "sub-problems", "attempts", "verdicts", "rows", "files", "requests",
         "errors", "items", "pairs", "chapters", "books", "records", "blocks", "anchors", "resamples", "rejections")
MODIFIERS = ("rule", "LLM", "generated", "answered", "incorrect", "selected", "redacted", "failed")
PHRASE = re.compile(rf"^\s(?:(?:{'|'.join(MODIFIERS)}) )?({'|'.join(re.escape(n) for n in NOUNS)})\b")
ALLOWED = {
    ("report/render.py", "rep['run_k']", "attempts"): "the run's k, larger than the report's k >= 1",
    ("cli/show.py", "rep.get('run_k', rep['k'])", "attempts"): "printed only when the run's k is larger than the report's",
    ("analysis/leaderboard.py", "split", "runs"): "a split name, not a count",
    ("cli/eval.py", "g.turns_per_s", "turns"): "a rate (turns/s)",
}


def _count_phrases() -> list[tuple[str, int, str, str]]:
    found = []
    for pkg in ("report", "analysis", "cli"):
        for f in sorted((SRC / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.JoinedStr):
                    continue
                for a, b in zip(node.values, node.values[1:], strict=False):
                    if isinstance(a, ast.FormattedValue) and isinstance(b, ast.Constant) and isinstance(b.value, str):
                        if m := PHRASE.match(b.value):
                            found.append((f.relative_to(SRC).as_posix(), node.lineno, ast.unparse(a.value), m.group(1)))
    return found


def test_every_counted_noun_in_an_f_string_goes_through_plural() -> None:
    bad = [f"{f}:{line}: {{{expr}}} {noun}" for f, line, expr, noun in _count_phrases() if (f, expr, noun) not in ALLOWED]
    assert not bad, "write these counts with studybench.escaping.plural (1 seed, 3 seeds):\n" + "\n".join(bad)


def test_the_allowed_exceptions_still_exist() -> None:
    found = {(f, expr, noun) for f, _, expr, noun in _count_phrases()}
    assert set(ALLOWED) <= found, set(ALLOWED) - found


def test_the_templates_make_counted_nouns_agree() -> None:
    bare = re.compile(rf"\}}\}}\s+(?:(?:{'|'.join(MODIFIERS)}) )?(?:{'|'.join(re.escape(n) for n in NOUNS)})\b")
    bad = [f"{t.name}: {m.group(0)}" for t in sorted((SRC / "analysis" / "templates").glob("*.j2"))
           for m in bare.finditer(t.read_text(encoding="utf-8"))]
    assert not bad, bad


@pytest.mark.parametrize("n,word,expected", [
    (0, "seed", "0 seeds"), (1, "seed", "1 seed"), (2, "seed", "2 seeds"), (1, "rule verdict", "1 rule verdict"),
    (3, "sub-problem", "3 sub-problems"), (2, "analysis", "2 analyses"), (10000, "resample", "10,000 resamples"),
])
def test_plural_agrees_with_the_count(n: int, word: str, expected: str) -> None:
    many = "analyses" if word == "analysis" else None
    assert plural(n, word, many, grouped=n >= 1000) == expected
