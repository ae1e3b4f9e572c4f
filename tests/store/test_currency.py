"""The one currency rule (studybench.store.currency) and the resume rules (Manifest.resume_conflicts),
branch by branch, without processes: stored rows stale in exactly one way each."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from studybench.datasets import load_dataset
from studybench.evaluate import (
    EvalError,
    EvalSpec,
    add_llm_verdicts_to_scope,
    add_rule_verdicts,
    prepare_eval,
)
from studybench.files import text_digest
from studybench.llm_judge import LLMVerdict
from studybench.report import build_report
from studybench.store import (
    GenerationRow,
    LLMVerdictRow,
    Manifest,
    ParentIndex,
    RuleVerdictRow,
    RunStore,
    SplitInfo,
    SubIndex,
    llm_verdict_status,
    rule_settings,
    rule_verdict_status,
)
from studybench.verify import Verdict, extract_pair

KEY = {"split": "s", "parent": "S//P1", "sub_id": "P1", "seed": 0, "attempt": 0}
SETTINGS = rule_settings(5.0)


def gen(completion: str | None = "Final Answer: \\boxed{1}", error: str | None = None) -> GenerationRow:
    return GenerationRow(**KEY, completion=completion, error=error)


def rule(g: GenerationRow, **kw: Any) -> RuleVerdictRow:
    base: dict[str, Any] = {"completion_digest": text_digest(g.completion or ""), "generation_error": g.error,
                            "correct": False, "reason": "incorrect: differs", "verifier": SETTINGS}
    base.update(kw)
    return RuleVerdictRow(**KEY, **base)


@pytest.mark.parametrize(
    "make,counts,stale",
    [
        (lambda g: None, False, "no rule verdict"),
        (lambda g: rule(g, completion_digest=text_digest("another reply")), False, "made on another completion"),
        (lambda g: rule(g, generation_error="HTTP 500"), True, "the generation's error changed"),
        (lambda g: rule(g, verifier={**SETTINGS, "timeout": 9.0}), True, "the rule verifier's settings changed"),
        (lambda g: rule(g, verifier={**SETTINGS, "version": "0.0.1"}), True, "the rule verifier's settings changed"),
        (lambda g: rule(g, reason="incorrect: timed out"), True, None),
        (lambda g: rule(g), True, None),
    ],
    ids=["missing", "other-completion", "error-changed", "timeout-setting", "version", "timed-out", "current"],
)
def test_rule_verdict_status_each_branch(make: Any, counts: bool, stale: str | None) -> None:
    g = gen()
    st = rule_verdict_status(g, make(g), SETTINGS)
    assert (st.verdict is not None) == counts
    assert st.stale == stale
    # a reader that only counts (settings=None) never calls a verdict stale for settings
    if stale == "the rule verifier's settings changed":
        assert rule_verdict_status(g, make(g)).stale is None


def test_a_timed_out_rule_verdict_is_final_for_its_settings_unless_retried() -> None:
    g = gen()
    timed_out = rule(g, reason="incorrect: timed out")
    st = rule_verdict_status(g, timed_out, SETTINGS)
    assert st.stale is None and st.timed_out and not st.verdict.correct  # type: ignore[union-attr]
    assert rule_verdict_status(g, timed_out, SETTINGS, retry_timeouts=True).stale == "timed out"
    # other settings (e.g. a larger timeout) verify it again anyway
    assert rule_verdict_status(g, timed_out, {**SETTINGS, "timeout": 60.0}).stale == "the rule verifier's settings changed"
    # retrying asks nothing of verdicts that did not time out
    assert rule_verdict_status(g, rule(g), SETTINGS, retry_timeouts=True).stale is None
    assert not rule_verdict_status(g, rule(g), SETTINGS).timed_out


def test_rule_status_without_a_usable_generation() -> None:
    assert rule_verdict_status(None, None, SETTINGS).generation is None
    st = rule_verdict_status(gen(completion=None), None, SETTINGS)
    assert st.generation is None and st.stale is None and st.verdict is None


@pytest.mark.parametrize(
    "kw,counts,stale",
    [
        ({"completion_digest": "x"}, False, "made on another completion"),
        ({"inputs_digest": "other"}, True, "the judge inputs changed"),
        ({"verdict": "error"}, True, "no final verdict"),
        ({}, True, None),
    ],
    ids=["other-completion", "inputs-changed", "error", "current"],
)
def test_llm_verdict_status_each_branch(kw: dict[str, Any], counts: bool, stale: str | None) -> None:
    row = LLMVerdictRow(**{**KEY, "judge_id": "j", "completion_digest": "cd", "inputs_digest": "in", "verdict": "TRUE", **kw})
    st = llm_verdict_status(row, "cd", "in")
    assert (st.verdict is not None) == counts and st.stale == stale
    assert llm_verdict_status(None, "cd", "in").stale == "not judged"
    if stale == "the judge inputs changed":
        assert llm_verdict_status(row, "cd").stale is None  # counting readers ignore the inputs


# ----------------------------------------------------------------------------- through the passes

DATA = """[{"source": "S", "year": "", "source_problem_id": "P1", "problem": "q", "answer": "\\\\boxed{1}",
  "answer_type": "NV", "type_sequence": "", "sub_problems": []}]"""


class CountingVerifier:
    def __init__(self) -> None:
        self.calls = 0

    def verify_responses(self, items: list[Any]) -> list[tuple[list[str], Verdict]]:
        self.calls += len(items)
        out = []
        for gold_answer, response, at, ts, *_ in items:
            g, p = extract_pair(gold_answer, response, at, ts)  # type: ignore[misc]
            out.append((p, Verdict(g == p, "correct: same" if g == p else "incorrect: differs", tuple(p))))
        return out


class FakeJudge:
    judge_id = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def describe(self) -> dict[str, Any]:
        return {"judge_id": self.judge_id, "model": "fake", "template_digest": "t"}

    async def judge(self, inputs: Any) -> LLMVerdict:
        self.calls += 1
        return LLMVerdict("TRUE", "ok", requests=1)


def _scope(tmp_path: Path) -> tuple[Any, RunStore]:
    f = tmp_path / "s.json"
    f.write_text(DATA)
    plan = prepare_eval(EvalSpec(dataset=load_dataset(f), k=1, seeds=[0]), tmp_path / "run")
    store = plan.open_store()
    return plan.scope, store


@pytest.mark.parametrize(
    "stale_row,rejudged,counts_in_report",
    [
        (lambda g: rule(g, completion_digest="x"), 1, False),
        (lambda g: rule(g, generation_error="HTTP 500"), 1, True),
        (lambda g: rule(g, verifier={**SETTINGS, "timeout": 1.0}), 1, True),
        (lambda g: rule(g, reason="incorrect: timed out"), 0, True),
        (lambda g: rule(g), 0, True),
    ],
    ids=["other-completion", "error-changed", "settings", "timed-out", "current"],
)
def test_rule_pass_rejudges_exactly_the_stale(tmp_path: Path, stale_row: Any, rejudged: int, counts_in_report: bool) -> None:
    """A stored verdict that calls a wrong answer (0 for the gold 1) correct: the report counts it only
    while it is current for that completion, and the rule pass replaces exactly the stale ones (a
    timeout is final for the settings that made it)."""
    scope, store = _scope(tmp_path)
    g = GenerationRow(**{**KEY, "split": "s"}, completion="Final Answer: \\boxed{0}")
    store.append(g)
    store.append(stale_row(g).model_copy(update={"correct": True}))
    store.close()
    rep = build_report(store)
    assert rep["turns"]["missing_judgements"] == (0 if counts_in_report else 1)
    assert rep["sub_at_k"]["mean"] == (100.0 if counts_in_report else 0.0)  # a verdict that does not count scores 0
    v = CountingVerifier()
    st = add_rule_verdicts(scope, store, v, SETTINGS)
    assert (st.verified, st.reused) == (rejudged, 1 - rejudged)
    # the fresh verdict (0 != 1) replaces a stale one; the current one stays as stored
    assert build_report(store)["sub_at_k"]["mean"] == (0.0 if rejudged else 100.0)


def test_the_report_counts_an_llm_verdict_only_for_the_completion_it_judged(tmp_path: Path) -> None:
    """A rule rejection that is current, with an LLM TRUE made on an older completion: not judged."""
    f = tmp_path / "s.json"
    f.write_text(DATA)
    judge = {"judge_id": "fake", "model": "fake", "template_digest": "t"}
    plan = prepare_eval(EvalSpec(dataset=load_dataset(f), k=1, seeds=[0]), tmp_path / "run")
    store = plan.open_store()
    man = plan.manifest.model_copy(update={"verifier": plan.manifest.verifier.model_copy(update={"mode": "rule+llm", "judge": judge})})
    store.write_manifest(man)
    g = GenerationRow(**KEY, completion="Final Answer: \\boxed{0}")
    store.append(g)
    store.append(rule(g))  # a current rejection
    for digest, expected in ((text_digest("an older reply"), (0.0, "not judged")), (text_digest(g.completion or ""), (100.0, "TRUE"))):
        store.append(LLMVerdictRow(**KEY, judge_id="fake", completion_digest=digest, verdict="TRUE"))
        rep = build_report(store)
        counts = {k: v for k, v in rep["llm_judge"]["verdicts"].items() if v}
        assert (rep["sub_at_k"]["mean"], next(iter(counts))) == expected
    store.close()


@pytest.mark.parametrize(
    "kw,rejudged",
    [({"completion_digest": "x"}, 1), ({"inputs_digest": "old"}, 1), ({"verdict": "error"}, 1), ({}, 0)],
    ids=["other-completion", "inputs-changed", "error", "current"],
)
def test_llm_pass_rejudges_exactly_the_stale(tmp_path: Path, kw: dict[str, Any], rejudged: int) -> None:
    scope, store = _scope(tmp_path)
    g = GenerationRow(**KEY, completion="Final Answer: \\boxed{2}")
    store.append(g)
    add_rule_verdicts(scope, store, CountingVerifier(), SETTINGS)  # a rejection: 2 != 1
    judge = FakeJudge()
    asyncio.run(add_llm_verdicts_to_scope(scope, store, judge))
    assert judge.calls == 1
    row = next(iter(store.latest_llm_verdicts().values()))
    store.append(row.model_copy(update=kw))
    judge2 = FakeJudge()
    st = asyncio.run(add_llm_verdicts_to_scope(scope, store, judge2))
    assert judge2.calls == rejudged and (st.judged, st.reused) == (rejudged, 1 - rejudged)
    judge3 = FakeJudge()
    asyncio.run(add_llm_verdicts_to_scope(scope, store, judge3, refresh=True))
    assert judge3.calls == 1


# ----------------------------------------------------------------------------- resume rules


def _manifest(**kw: Any) -> Manifest:
    base: dict[str, Any] = {
        "split": SplitInfo(name="s", sha256="aaa"), "k": 2, "seeds": [0],
        "backend": {"backend": "openai", "model": "m", "base_url": "http://a/v1", "sampling": {"temperature": 1.0},
                    "concurrency": 8},
        "artefacts": {"digests": {"playbook": "p1"}},
        "parents": [ParentIndex(uid="S//P1", subs=[SubIndex(id="P1", answer_type="NV")])],
    }
    base.update(kw)
    return Manifest(**base)


@pytest.mark.parametrize(
    "change,conflict",
    [
        ({"backend": {"backend": "openai", "model": "other", "base_url": "http://a/v1", "sampling": {"temperature": 1.0}, "concurrency": 8}}, "backend.model"),
        ({"backend": {"backend": "openai", "model": "m", "base_url": "http://a/v1", "sampling": {"temperature": 0.0}, "concurrency": 8}}, "backend.sampling"),
        ({"split": SplitInfo(name="s", sha256="bbb")}, "test-set file content changed"),
        ({"artefacts": {"digests": {"playbook": "p2"}}}, "artefact playbook changed"),
        ({"artefacts": {"digests": {}}}, "artefact playbook changed"),
        ({"backend": {"backend": "openai", "model": "m", "base_url": "http://b/v1", "sampling": {"temperature": 1.0}, "concurrency": 64}}, None),
        ({"k": 8, "seeds": [0, 1, 2]}, None),
    ],
    ids=["model", "sampling", "test-set", "artefact", "artefact-dropped", "operational", "scope"],
)
def test_resume_conflicts(change: dict[str, Any], conflict: str | None) -> None:
    diff = _manifest().resume_conflicts(_manifest(**change))
    if conflict is None:
        assert diff == []
    else:
        assert len(diff) == 1 and diff[0].startswith(conflict)


def test_prepare_eval_refuses_a_different_run(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(DATA)
    ds = load_dataset(f)
    plan = prepare_eval(EvalSpec(dataset=ds, k=1, seeds=[0]), tmp_path / "run")
    plan.open_store().close()
    again = prepare_eval(EvalSpec(dataset=ds, k=3, seeds=[0, 1]), tmp_path / "run")
    assert again.resuming and again.scope_changed and again.manifest.created == plan.manifest.created
    with pytest.raises(EvalError, match=r"holds another run: it was made with --reference-mode gold and you asked for "
                                         r"solution: give --reference-mode gold \(or use another --out for a new run\)$"):
        prepare_eval(EvalSpec(dataset=ds, k=1, seeds=[0], reference_mode="solution"), tmp_path / "run")


# ----------------------------------------------------------------------------- issue 26 (mutation trial): rows
# without the digest of what they judged never count, and a digest of the wrong type makes the row unusable


def test_a_rule_verdict_without_a_digest_never_counts() -> None:
    g = gen()
    old = RuleVerdictRow(**KEY, correct=True, reason="correct", verifier=SETTINGS)  # as a writer without digests left it
    assert old.completion_digest is None
    for settings in (SETTINGS, None):
        st = rule_verdict_status(g, old, settings)
        assert st.verdict is None and st.stale == "made on another completion"


def test_an_llm_verdict_without_a_digest_never_counts() -> None:
    cd = text_digest("Final Answer: \\boxed{1}")
    old = LLMVerdictRow(**KEY, judge_id="judge", verdict="TRUE")
    assert old.completion_digest is None
    for inputs in (None, "inputs"):
        st = llm_verdict_status(old, cd, inputs)
        assert st.verdict is None and st.value is None and st.stale == "made on another completion"


@pytest.mark.parametrize("model,extra", [(RuleVerdictRow, {"correct": True, "reason": "correct"}),
                                         (LLMVerdictRow, {"judge_id": "judge", "verdict": "TRUE"})],
                         ids=["rule", "llm"])
@pytest.mark.parametrize("digest", [123, ["abc"], {"sha256": "abc"}, True], ids=["int", "list", "object", "bool"])
def test_a_digest_of_the_wrong_type_makes_the_row_unusable(model: Any, extra: dict[str, Any], digest: Any) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="completion_digest"):
        model.model_validate({**KEY, **extra, "completion_digest": digest})
    # a descriptive field of the wrong type only reads as None
    assert model.model_validate({**KEY, **extra, "completion_digest": "abc", "time": "yesterday"}).time is None
