"""The shipped judge templates (``--judge-prompt default|paper``) and the reply shapes each asks for.

For every shipped template the reply shapes it asks for are generated (heading marks or none, bold,
case, the verdict on the heading line, a final full stop, either section order, ``<think>`` blocks)
and must parse to the verdict they hold; their malformed twins must not.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_judge_run import SET, K, _eval, _judge, _report, cli, model_reply, oracle

from studybench.llm_judge import (
    JUDGE_TEMPLATES,
    PAPER_FORMAT_REMINDER,
    LLMJudgeSpec,
    MalformedReply,
    ShippedTemplate,
    judge_id,
    judge_template,
    parse_verdict,
)
from studybench.testing.stub_judge import format_verdict, judge_reply_fn, read_inputs
from studybench.testing.stub_server import start_stub_server

NAMES = sorted(JUDGE_TEMPLATES)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A stub model answering the SET of test_judge_run (a judge cache of the test's own)."""
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    f = tmp_path / "set.json"
    f.write_text(SET, encoding="utf-8")
    with start_stub_server(model_reply, model="stub-model") as model_srv:
        yield {"tmp": tmp_path, "set": f, "model": model_srv}

_HEADS = ("## {h}", "# {h}", "### {h}", "{h}", "**{h}**", "**{h}:**", "{h}:", "__{h}__")
_CASES = (str, str.lower, str.upper)
_WORDS = ("{w}", "{w}.", "**{w}**", "`{w}`", "{lw}", "{tw}")
_THINK = ("", "<think>Is it TRUE? Or FALSE?\n## Verdict\nFALSE</think>\n", "reasoning left over</think>\n")
_JUST = ("The values agree.", "The two answers differ by a factor of two. The reference is 3 m/s.")


def _sections(t: ShippedTemplate, head: str, case: Any, word: str, correct: bool, inline: bool, just: str) -> tuple[str, str]:
    w = "TRUE" if correct else "FALSE"
    verdict_word = word.format(w=w, lw=w.lower(), tw=w.title())
    vh = head.format(h=case(t.verdict_heading))
    jh = head.format(h=case("Justification"))
    verdict = f"{vh} {verdict_word}" if inline else f"{vh}\n{verdict_word}"
    return verdict, f"{jh}\n{just}"


def _shapes(t: ShippedTemplate) -> list[tuple[str, bool]]:
    out = []
    for i, (head, case, word, think, first, inline, gap) in enumerate(
        itertools.product(_HEADS, _CASES, _WORDS, _THINK, (t.verdict_first, not t.verdict_first), (False, True), ("\n", "\n\n"))
    ):
        if inline and not (head.endswith(":**") or head.endswith(":") or head.startswith("#")):
            continue  # "Verdict TRUE" without a mark or colon is prose, not a heading
        correct = i % 2 == 0
        verdict, justification = _sections(t, head, case, word, correct, inline, _JUST[i % 2])
        body = gap.join((verdict, justification) if first else (justification, verdict))
        out.append((f"{think}{body}\n", correct))
    return out


def _twins(t: ShippedTemplate) -> list[str]:
    """Malformed replies next to the well-formed ones (the template's own order and headings)."""
    out = []
    for head, correct in itertools.product(("## {h}", "**{h}:**", "{h}:"), (True, False)):
        w = "TRUE" if correct else "FALSE"

        def reply(verdict_body: str | None, just: str | None = "The values agree.", *, pre: str = "", post: str = "",
                  extra: str = "", head: str = head) -> str:
            parts = []
            if verdict_body is not None:
                parts.append(f"{head.format(h=t.verdict_heading)}\n{verdict_body}")
            if just is not None:
                parts.append(f"{head.format(h='Justification')}\n{just}")
            if not t.verdict_first:
                parts.reverse()
            return pre + "\n\n".join(parts) + extra + post

        out += [
            reply(None),  # no verdict section
            reply(w, None),  # no justification section
            reply(w, ""),  # empty justification
            reply("TRUE or FALSE"),
            reply("TRUE\nFALSE"),
            reply("YES" if correct else "NO"),
            reply(f"{w} because the values agree"),
            reply(f"{w}!?"),
            reply("maybe"),
            reply(w, pre="Here is my judgement.\n"),  # text before the first section
            reply(w, extra=f"\n\n{head.format(h=t.verdict_heading)}\n{w}"),  # the verdict twice
            reply(w, extra=f"\n\n{head.format(h='Verdict' if t.verdict_heading != 'Verdict' else 'Equivalence Judgement')}\n{w}"),
            reply(w, post="\n<think>second thoughts: FALSE"),  # ends inside an unclosed <think>
            "<think>" + reply(w),  # the whole reply inside an unclosed <think>
            f"{w}",  # the bare word
            "",
        ]
    return out


@pytest.mark.parametrize("name", NAMES)
def test_template_text_asks_for_the_declared_reply(name: str) -> None:
    t = JUDGE_TEMPLATES[name]
    text = t.text
    v, j = text.find(f"\n## {t.verdict_heading}\n"), text.find("\n## Justification\n")
    assert v >= 0 and j >= 0, "the template must show both section headings"
    assert (v < j) == t.verdict_first
    assert t.verdict_heading in t.format_reminder and "Justification" in t.format_reminder
    assert t.format_reminder.index(t.verdict_heading) < t.format_reminder.index("Justification") if t.verdict_first else \
        t.format_reminder.index("Justification") < t.format_reminder.index(t.verdict_heading)


@pytest.mark.parametrize("name", NAMES)
def test_every_reply_shape_a_template_asks_for_parses(name: str) -> None:
    shapes = _shapes(JUDGE_TEMPLATES[name])
    assert len(shapes) > 1000
    for reply, correct in shapes:
        try:
            got = parse_verdict(reply)
        except MalformedReply as e:  # pragma: no cover - the message says which shape
            raise AssertionError(f"{name}: {reply!r} refused: {e}") from None
        assert got.correct is correct, reply
        assert got.justification in ("The values agree.", "The two answers differ by a factor of two. The reference is 3 m/s.")


@pytest.mark.parametrize("name", NAMES)
def test_malformed_twins_are_refused(name: str) -> None:
    twins = _twins(JUDGE_TEMPLATES[name])
    for reply in twins:
        with pytest.raises(MalformedReply):
            parse_verdict(reply)
            pytest.fail(f"{name}: accepted {reply!r}")


def test_paper_reply_format_parses() -> None:
    """The reply of a judge prompted with the paper's prompt (issue 24: 327 of 327 were unjudgeable)."""
    got = parse_verdict("## Equivalence Judgement\nTRUE\n\n## Justification\nBoth give 3.0 m/s. The forms are equal.")
    assert got.correct is True and got.justification == "Both give 3.0 m/s. The forms are equal."
    assert parse_verdict("## Equivalence Judgment\nFALSE\n\n## Justification\nDifferent.").correct is False


@pytest.mark.parametrize("name", NAMES)
def test_shipped_templates_by_name_and_source(name: str) -> None:
    t = JUDGE_TEMPLATES[name]
    tmpl = judge_template(name)
    assert tmpl.text == t.text and tmpl.source == t.source
    assert judge_template(t.source).digest == tmpl.digest  # a recorded source names it again
    assert judge_template(Path(t.source)).digest == tmpl.digest
    inputs = {"problem": "P", "reference_solution": "RS", "reference_answers": "Answer type: NV\n1",
              "student_solution": "S", "student_answers": "2"}
    assert read_inputs(tmpl.render(inputs)) == inputs  # the stub judge reads every shipped template


def test_template_choice_is_part_of_the_judge_id() -> None:
    digests = {n: judge_template(n).digest for n in NAMES}
    assert len(set(digests.values())) == len(NAMES)
    assert len({judge_id("m", d) for d in digests.values()}) == len(NAMES)
    assert judge_template(None).digest == digests["default"]
    assert judge_template("default").source == "builtin"  # runs judged before names existed keep their judge id


def test_a_file_named_like_a_template_is_read_with_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = JUDGE_TEMPLATES["default"].text.replace("You grade", "MINE: you grade")
    (tmp_path / "paper").write_text(text, encoding="utf-8")
    assert judge_template("paper").source == "builtin:paper"
    assert judge_template("./paper").text == text
    spec = LLMJudgeSpec(model="m", base_url="http://127.0.0.1:9/v1", prompt="paper", use_cache=False)
    judge = spec.build()
    assert judge.template.source == "builtin:paper"
    assert json.loads(json.dumps(judge.describe()))["template"] == "builtin:paper"


# ----------------------------------------------------------------------------- end to end



def test_eval_with_the_paper_template_end_to_end(env: dict[str, Any]) -> None:
    """``--judge-prompt paper``: the judge is asked for, and answers in, the paper's format; the choice keys the judge."""
    first: set[str] = set()

    def paper_judge(x: dict[str, str]) -> bool | str:
        key = x["student_answers"]
        if key not in first:  # the first reply of each input is malformed: the re-ask carries the paper's reminder
            first.add(key)
            return "Equivalent, I would say."
        return oracle(x)

    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(paper_judge), model="stub-judge") as jsrv:
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url, "--judge-prompt", "paper")
        assert res.exit_code == 0, res.output
        bodies = jsrv.requests
        assert all("## Equivalence Judgement" in b["messages"][0]["content"] for b in bodies)
        assert any(b["messages"][-1]["content"] == PAPER_FORMAT_REMINDER for b in bodies)
        n = jsrv.count
        man = json.loads((run / "manifest.json").read_text())
        judge = man["verifier"]["judge"]
        assert judge["template"] == "builtin:paper" and judge["template_digest"] == judge_template("paper").digest
        rep = _report(run)
        assert rep["llm_judge"]["verdicts"]["TRUE"] == K and rep["llm_judge"]["verdicts"]["unjudgeable"] == 0
        assert rep["complete"] is True
        # `judge RUN` without options is the run's judge: the paper template again (its verdicts are current)
        res = cli("judge", run)
        assert res.exit_code == 0, res.output
        assert jsrv.count == n
        # our default template is another judge configuration: judged afresh, under another judge id
        res = _judge(run, jsrv.base_url, "--judge-prompt", "default")
        assert res.exit_code == 0, res.output
        assert jsrv.count > n
        assert "## Equivalence Judgement" not in jsrv.requests[-1]["messages"][0]["content"]
    man2 = json.loads((run / "manifest.json").read_text())
    assert man2["verifier"]["judge"]["judge_id"] != judge["judge_id"] and man2["verifier"]["judge"]["template"] == "builtin"


def test_a_judge_answering_in_the_paper_format_under_our_template(env: dict[str, Any]) -> None:
    """A judge tuned on the paper's prompt answers in its format whatever it is asked: a verdict, not unjudgeable."""
    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(lambda x: format_verdict(bool(oracle(x)), "Same value.", paper=True)),
                           model="stub-judge") as jsrv:
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url)
        assert res.exit_code == 0, res.output
        assert jsrv.count == 2  # no re-asks
    lj = _report(run)["llm_judge"]
    assert lj["verdicts"]["unjudgeable"] == 0 and lj["verdicts"]["TRUE"] == K


def test_judge_prompt_help_names_the_templates() -> None:
    res = cli("judge", "--help")
    text = " ".join(res.output.split())
    assert all(name in text for name in NAMES) and "NAME|FILE" in text
