"""Final-answer extraction (PROTOCOL.md section 4)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _support import assert_linear
from hypothesis import given, settings
from hypothesis import strategies as st

from studybench.answers import (
    brace_balance_error,
    extract_answers,
    find_boxes,
    split_top_level,
    strip_reasoning,
)

# (response, m, expected answers, why)
EXTRACT_CASES = [
    (r"First \boxed{3}. Wait, that is wrong. \boxed{4}", 1, ["4"], "last box wins over a retracted one"),
    ("Work \\boxed{1} more\nFinal Answer: \\boxed{2}\nCheck: \\boxed{3}", 1, ["2"], "Final Answer line preferred"),
    ("final answer: \\boxed{a} \\boxed{b}", 2, ["a", "b"], "case-insensitive marker, two boxes"),
    ("Final Answer: \\boxed{a} \\boxed{b} \\boxed{c}", 2, ["b", "c"], "last m boxes on the line"),
    ("Final Answer: none here\n\\boxed{7}", 1, ["7"], "marker without boxes falls back to last boxes"),
    (r"\fbox{42}", 1, ["42"], "fbox only"),
    (r"so \boxed 5", 1, ["5"], "brace-less boxed"),
    (r"so \boxed 5.", 1, ["5"], "brace-less boxed drops trailing period"),
    (r"\boxed{\frac{a}{b}}", 1, [r"\frac{a}{b}"], "nested braces"),
    (r"\boxed{\{1, 2\}}", 1, [r"\{1, 2\}"], "escaped braces do not close the box"),
    (r"\boxed{x", 1, [], "unclosed box ignored"),
    ("<think>\\boxed{1}</think>Answer \\boxed{2}", 1, ["2"], "closed think block removed"),
    ("<think>\\boxed{1} still thinking", 1, [], "unclosed think removed to the end"),
    ("reasoning \\boxed{1}</think> Final Answer: \\boxed{2}", 1, ["2"], "stray </think> keeps what follows"),
    ("no boxes at all", 1, [], "nothing to extract"),
    ("Final Answer: \\boxed{\\begin{cases}a\\\\\nb\\end{cases}}", 1, ["\\begin{cases}a\\\\\nb\\end{cases}"], "box spanning lines"),
    (r"\boxedx{3} \boxed{4}", 1, ["4"], "other macro starting with boxed is not a box"),
]


@pytest.mark.parametrize("response,m,expected,why", EXTRACT_CASES, ids=[c[3] for c in EXTRACT_CASES])
def test_extract_answers(response: str, m: int, expected: list[str], why: str) -> None:
    assert extract_answers(response, m) == expected, why


# (text, expected, why)
STRIP_CASES = [
    ("<think>a</think>b", "b", "closed block"),
    ("x<think>a</think>y<think>c</think>z", "xyz", "two blocks"),
    ("a</think>b", "b", "stray close"),
    ("a<think>b", "a", "unclosed open"),
    ("plain", "plain", "nothing to strip"),
]


@pytest.mark.parametrize("text,expected,why", STRIP_CASES, ids=[c[2] for c in STRIP_CASES])
def test_strip_reasoning(text: str, expected: str, why: str) -> None:
    assert strip_reasoning(text) == expected, why


# (text, expected parts, why)
SPLIT_CASES = [
    ("a, b", ["a", "b"], "plain comma"),
    (r"[0, 1), 2", ["[0, 1)", "2"], "interval stays whole"),
    (r"\frac{a,b}{c}, d", [r"\frac{a,b}{c}", "d"], "commas inside braces"),
    (r"a,\quad b", ["a", "b"], "spacing after separator dropped"),
    (r"x\,y, z", [r"x\,y", "z"], "thin space \\, is not a separator"),
    (r"a\\, b", [r"a\\", "b"], "line break then comma"),
    (r"\left(a, b\right), c", [r"\left(a, b\right)", "c"], "left/right parentheses"),
]


@pytest.mark.parametrize("text,expected,why", SPLIT_CASES, ids=[c[2] for c in SPLIT_CASES])
def test_split_top_level(text: str, expected: list[str], why: str) -> None:
    assert split_top_level(text) == expected, why


def test_find_boxes_spans() -> None:
    text = r"a \boxed{x} b \fbox{y}"
    boxes = find_boxes(text)
    assert [b.content for b in boxes] == ["x", "y"]
    assert [text[b.start : b.end] for b in boxes] == [r"\boxed{x}", r"\fbox{y}"]


def test_brace_balance() -> None:
    assert brace_balance_error("{a}") is None
    assert brace_balance_error("{a") is not None
    assert brace_balance_error("a}") is not None
    assert brace_balance_error(r"\{a") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("\\{}boxedfinalswer:<think>/ \n$x12")), max_size=80), st.integers(-2, 5))
def test_extraction_never_raises_on_latexish_text(text: str, m: int) -> None:
    out = extract_answers(text, m)
    assert isinstance(out, list) and all(isinstance(x, str) for x in out)
    assert isinstance(strip_reasoning(text), str)
    for b in find_boxes(text):
        assert 0 <= b.start < b.end <= len(text)
    split_top_level(text)
    brace_balance_error(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_extraction_never_raises_on_random_text(text: str) -> None:
    assert isinstance(extract_answers(text, 1), list)
    assert isinstance(strip_reasoning(text), str)


# Adversarial responses: extraction must stay linear in their size (the old scanner took minutes on the
# unclosed-box cases). Each case is a function of a size n (characters, about); the test compares n with
# 8n in the same run (tests/_support.py: assert_linear), so a loaded machine cannot fail it.
_N = 125_000
ADVERSARIAL: list[tuple[Callable[[int], str], str]] = [
    (lambda n: "\\boxed{" * (n // 7), "unclosed boxes"),
    (lambda n: "\\boxed{" * (n // 100) + " Final Answer: \\boxed{5}", "unclosed boxes then an answer"),
    (lambda n: "\\fbox{" * (n // 6) + " Final Answer: \\boxed{5}", "unclosed fboxes then an answer"),
    (lambda n: "\\boxed{" * (n // 14) + "}" * (n // 14), "deeply nested boxes"),
    (lambda n: "\\boxed{1}" * (n // 10), "many boxes"),
    (lambda n: "Final Answer: \\boxed{a\n}" * (n // 25), "many final-answer lines with multi-line boxes"),
    (lambda n: "{" * n, "open braces"),
    (lambda n: "}" * n, "close braces"),
    (lambda n: "\\" * n, "backslashes"),
    (lambda n: "\\boxed " * (n // 7), "brace-less boxes without a token"),
    (lambda n: "\\boxedx" * (n // 7), "other macros"),
    (lambda n: ("\\boxed{\\{" + "{" * 5 + "\\boxed 5 ") * (n // 25), "mixed escapes and bare boxes"),
    (lambda n: "<think>" * (n // 7), "many think tags"),
    (lambda n: "," * n, "commas"),
]
SCANNERS: list[tuple[str, Callable[[str], object]]] = [
    ("find_boxes", find_boxes), ("extract_answers", lambda s: extract_answers(s, 2)), ("strip_reasoning", strip_reasoning),
    ("brace_balance_error", brace_balance_error), ("split_top_level", split_top_level),
]


@pytest.mark.parametrize("make,why", ADVERSARIAL, ids=[c[1] for c in ADVERSARIAL])
@pytest.mark.parametrize("name,scan", SCANNERS, ids=[c[0] for c in SCANNERS])
def test_extraction_is_linear_on_adversarial_text(make: Callable[[int], str], why: str, name: str, scan: Callable[[str], object]) -> None:
    texts = {n: make(n) for n in (_N, 8 * _N)}
    assert_linear(lambda n: scan(texts[n]), _N, factor=8)


def test_unclosed_boxes_then_final_answer() -> None:
    text = "\\boxed{" * 1000 + " Final Answer: \\boxed{5}"
    assert extract_answers(text, 1) == ["5"]
    # boxes nested in an unclosed box are still found
    assert [b.content for b in find_boxes("\\boxed{a \\boxed{b} c")] == ["b"]


def test_split_top_level_odd_separators() -> None:
    assert split_top_level("a;b", ";") == ["a", "b"]
    assert split_top_level("a, b", "{") == ["a, b"]  # a bracket never separates
