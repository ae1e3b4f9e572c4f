r"""TTRL pseudo-labels: majority vote clustered by the rule verifier (studybench.methods.ttrl)."""

from __future__ import annotations

import pytest
from _support import REPO

from studybench.answers import extract_answers
from studybench.methods import VoteResult, boxed_label, label_accuracy, majority_vote
from studybench.records import AnswerType, gold_boxes
from studybench.verify import Verifier


@pytest.fixture(scope="module")
def v(verifier: Verifier) -> Verifier:
    return verifier  # the session's (tests/conftest.py): verdicts, not speed


def fa(*boxes: str) -> str:
    """A response whose final answer line holds these boxes."""
    return "<think>work</think>Some steps.\nFinal Answer: " + ", ".join("\\boxed{" + b + "}" for b in boxes)


def test_equivalent_numeric_forms_vote_together(v: Verifier) -> None:
    responses = [fa("3\\times10^{8}"), fa("3e8"), fa("4e8"), fa("3.0 \\times 10^8"), fa("4\\times 10^{8}")]
    r = majority_vote(responses, "NV", verifier=v)
    assert isinstance(r, VoteResult)
    assert [c.members for c in r.clusters] == [(0, 1, 3), (2, 4)]  # exact-string voting would split 3 ways
    assert r.label == "\\boxed{3\\times10^{8}}" and r.slots == ("3\\times10^{8}",)
    assert r.winner == 0 and r.share == pytest.approx(0.6) and r.vote_share == pytest.approx(0.6)
    assert r.rewards == (1.0, 1.0, 0.0, 1.0, 0.0)
    assert r.abstentions == 0 and r.n_votes == 5 and r.label_correct is None


@pytest.mark.parametrize("first_with_unit", [True, False])
def test_a_stated_unit_votes_with_the_bare_number(v: Verifier, first_with_unit: bool) -> None:
    with_unit, bare = fa("3\\times10^8\\,\\mathrm{m/s}"), fa("3e8")
    responses = [with_unit, bare, fa("3.0 \\times 10^8")] if first_with_unit else [bare, with_unit, fa("3.0 \\times 10^8")]
    r = majority_vote(responses, "NV", verifier=v)
    assert len(r.clusters) == 1 and r.clusters[0].members == (0, 1, 2)
    assert r.rewards == (1.0, 1.0, 1.0)


def test_symbolic_pair_votes_together(v: Verifier) -> None:
    r = majority_vote([fa("k x"), fa("\\frac{mg}{k}"), fa("mg/k")], "EX", verifier=v)
    assert [c.members for c in r.clusters] == [(0,), (1, 2)]
    assert r.label == "\\boxed{\\frac{mg}{k}}" and r.rewards == (0.0, 1.0, 1.0)


def test_ties_go_to_the_earliest_first_vote(v: Verifier) -> None:
    a, b = fa("2"), fa("5")
    r1 = majority_vote([a, b, b, a], "NV", verifier=v)
    r2 = majority_vote([b, a, a, b], "NV", verifier=v)
    assert r1.label == "\\boxed{2}" and r1.winner == 0 and r1.rewards == (1.0, 0.0, 0.0, 1.0)
    assert r2.label == "\\boxed{5}" and r2.rewards == (1.0, 0.0, 0.0, 1.0)
    assert majority_vote([a, b, b, a], "NV", verifier=v) == r1  # deterministic


def test_all_empty_abstain(v: Verifier) -> None:
    r = majority_vote(["", "<think>\\boxed{1}</think>", "no box here", None], "NV", gold="\\boxed{1}", verifier=v)
    assert r.label is None and r.slots == () and r.clusters == () and r.winner is None
    assert r.abstentions == 4 and r.n_votes == 0 and r.share == 0.0 and r.vote_share == 0.0
    assert r.rewards == (0.0, 0.0, 0.0, 0.0) and r.label_correct is False
    assert majority_vote([], "NV", verifier=v).n_responses == 0


def test_abstentions_count_in_share_not_in_vote_share(v: Verifier) -> None:
    r = majority_vote([fa("1"), "I give up", fa("1.0"), fa("7")], "NV", verifier=v)
    assert r.abstentions == 1 and r.votes[1] is None
    assert r.share == pytest.approx(2 / 4) and r.vote_share == pytest.approx(2 / 3)
    assert r.rewards == (1.0, 0.0, 1.0, 0.0)


def test_unparseable_votes_cluster_only_by_string(v: Verifier) -> None:
    bad = "\\frac{a}{}"  # LaTeX that the verifier cannot read
    r = majority_vote([fa("x^2"), fa(bad), fa(bad + " "), fa("x^{2}")], "EX", verifier=v)
    assert [c.members for c in r.clusters] == [(0, 3), (1, 2)]
    assert r.clusters[1].readable is False and r.clusters[0].readable is True
    before = dict(v.stats)
    r2 = majority_vote([fa(bad), fa("\\frac{b}{}"), fa("a +* b")], "EX", verifier=v)
    assert v.stats["worker"] == before["worker"] and v.stats["fast"] == before["fast"]  # never compared
    assert [c.members for c in r2.clusters] == [(0,), (1,), (2,)]


def test_tuple_slots_must_all_agree_in_order(v: Verifier) -> None:
    responses = [fa("1", "2"), fa("1.0", "3"), fa("1", "2.0"), fa("2", "1"), "Final Answer: \\boxed{1, 2}"]
    r = majority_vote(responses, "TUP", "NV,NV", verifier=v)
    assert [c.members for c in r.clusters] == [(0, 2, 4), (1,), (3,)]
    assert r.label == "\\boxed{1}, \\boxed{2}" and r.rewards == (1.0, 0.0, 1.0, 0.0, 1.0)
    assert r.votes[4] == ("1", "2")  # a tuple packed into one box is split into its slots


def test_tuple_with_missing_slot_is_its_own_cluster(v: Verifier) -> None:
    r = majority_vote([fa("1", "2"), "Final Answer: \\boxed{1}", "Final Answer: \\boxed{1}"], "TUP", "NV,NV", verifier=v)
    assert [c.members for c in r.clusters] == [(0,), (1, 2)]
    assert r.clusters[1].readable is False


def test_alt_votes(v: Verifier) -> None:
    gold = "\\boxed{\\frac{1}{2}}, \\boxed{0.5}"
    r = majority_vote([fa("0.5"), fa("\\frac{1}{2}"), fa("3"), fa("1/2")], "ALT", "EX,NV", gold=gold, verifier=v)
    assert [c.members for c in r.clusters] == [(0, 1, 3), (2,)]
    assert r.label_correct is True and r.rewards == (1.0, 1.0, 0.0, 1.0)
    wrong = majority_vote([fa("3"), fa("3.0"), fa("0.5")], "ALT", "EX,NV", gold=gold, verifier=v)
    assert wrong.label == "\\boxed{3}" and wrong.label_correct is False


def test_label_correct_against_gold(v: Verifier) -> None:
    gold = "\\boxed{3\\times10^{8}\\,\\mathrm{m/s}}"
    assert majority_vote([fa("3e8"), fa("3e8"), fa("2e8")], "NV", gold=gold, verifier=v).label_correct is True
    assert majority_vote([fa("2e8"), fa("2e8"), fa("3e8")], "NV", gold=gold, verifier=v).label_correct is False
    # a gold unit for a unitless gold is used for the label check too
    r = majority_vote([fa("300000\\,\\mathrm{km/s}")], "NV", gold="\\boxed{3e8}", gold_unit="\\mathrm{m/s}", verifier=v)
    assert r.label_correct is True


def test_label_accuracy_batch(v: Verifier) -> None:
    items = [
        ([fa("3e8"), fa("3\\times10^8")], "NV", "", "\\boxed{3e8}"),
        ([fa("5"), fa("5"), fa("3e8")], "NV", "", "\\boxed{3e8}"),
        (["nothing"], "NV", "", "\\boxed{1}"),
        ([fa("B"), fa("b")], "MC", "", "\\boxed{B}", None),
    ]
    acc = label_accuracy(items, verifier=v)
    assert (acc.items, acc.labelled, acc.correct) == (4, 3, 2)
    assert acc.accuracy == pytest.approx(0.5)
    assert acc.mean_vote_share == pytest.approx((1.0 + 2 / 3 + 1.0) / 3)
    assert [r.label_correct for r in acc.results] == [True, False, False, True]
    with pytest.raises(ValueError, match="item 1"):
        label_accuracy([items[0], ([fa("1")], "TUP", "", "\\boxed{1}")], verifier=v)
    with pytest.raises(ValueError, match="item 0: expected"):
        label_accuracy([([fa("1")], "NV")], verifier=v)


def test_bad_types_raise_clean_errors(v: Verifier) -> None:
    with pytest.raises(ValueError, match="unknown answer_type 'XX'"):
        majority_vote([fa("1")], "XX", verifier=v)
    with pytest.raises(ValueError, match="TUP needs a type_sequence"):
        majority_vote([fa("1")], AnswerType.TUP, verifier=v)


@pytest.mark.parametrize(
    "slots",
    [
        ("3\\times10^{8}\\,\\mathrm{m/s}",),
        ("\\text{the {inner} block}",),
        ("\\frac{1}{2}", "\\{1, 2\\}", "\\text{blue, not red}"),
        ("x = \\left\\{ a \\right\\}", "{{nested}}"),
    ],
)
def test_label_round_trips_through_extraction(slots: tuple[str, ...]) -> None:
    label = boxed_label(slots)
    assert extract_answers(label, len(slots)) == list(slots)
    at, ts = (AnswerType.TUP, [AnswerType.EX] * len(slots)) if len(slots) > 1 else (AnswerType.EX, [])
    assert gold_boxes(label, at, ts) == list(slots)


def test_vote_label_round_trips_with_text_and_braces(v: Verifier) -> None:
    responses = [fa("\\text{red {dwarf}}", "\\{1, 2\\}"), fa("\\text{red {dwarf}}", "\\{1, 2\\}"), fa("\\text{blue}", "\\{3\\}")]
    r = majority_vote(responses, "TUP", "QL,EX", verifier=v)
    assert r.rewards == (1.0, 1.0, 0.0)
    assert r.label is not None and extract_answers(r.label, 2) == list(r.slots) == ["\\text{red {dwarf}}", "\\{1, 2\\}"]


def test_lone_surrogate_in_a_response_votes(v: Verifier) -> None:
    # "\ud800" cannot be encoded for the verifier's workers: it used to raise UnicodeEncodeError
    r = majority_vote(["Final Answer: \\boxed{x\ud800}", "Final Answer: \\boxed{x\ud800}", "\\boxed{2}"], "EX", verifier=v)
    assert r.label == "\\boxed{x?}" and r.rewards == (1.0, 1.0, 0.0)


def test_hostile_responses_do_not_raise(v: Verifier) -> None:
    r = majority_vote(["{" * 10_000 + "\\boxed{1}" + "}" * 10_000, "Final Answer: \\boxed{1", None, 5, b"\\boxed{1}",
                       ["\\boxed{1}"]], "nv", verifier=v)
    assert r.label == "\\boxed{1}" and r.abstentions == 5


# --------------------------------------------------------------------------------------------------
# timeouts never split a vote silently (issue 25, item 1)

README_RESPONSES = ["... Final Answer: \\boxed{3\\times10^{8}}", "\\boxed{3e8}", "\\boxed{2e8}"]
README_GOLD = "\\boxed{3\\times 10^8}"


def _timing_out(v: Verifier, monkeypatch: pytest.MonkeyPatch, *, first_only: bool, names: tuple[str, ...] = ("verdict", "parsable")) -> list[str]:
    """Make the pool's calls time out (as on a loaded machine): the first call of each task, or every one."""
    from studybench.verify.sandbox import TimedOut

    real = v.pool.call
    seen: set[str] = set()
    log: list[str] = []

    def call(name: str, args: tuple, timeout: float):  # type: ignore[no-untyped-def]
        key = repr((name, args))
        if name in names and (not first_only or key not in seen):
            seen.add(key)
            log.append(name)
            raise TimedOut()
        return real(name, args, timeout)

    monkeypatch.setattr(v.pool, "call", call)
    return log


def test_a_loaded_machine_gives_the_quiet_vote(monkeypatch: pytest.MonkeyPatch) -> None:
    # main: a comparison (or a readability check) that timed out split the cluster silently: share
    # 0.333 and rewards (1, 0, 0) at load 7 where a quiet machine gives 0.667 and (1, 1, 0)
    with Verifier(workers=1, timeout=20.0) as quiet_v:
        quiet = majority_vote(README_RESPONSES, "NV", gold=README_GOLD, verifier=quiet_v)
    assert quiet.share == pytest.approx(2 / 3) and quiet.rewards == (1.0, 1.0, 0.0) and quiet.label_correct is True
    for names in (("verdict",), ("parsable",), ("verdict", "parsable")):
        with Verifier(workers=1, timeout=20.0) as v:
            log = _timing_out(v, monkeypatch, first_only=True, names=names)
            loaded = majority_vote(README_RESPONSES, "NV", gold=README_GOLD, verifier=v)
        assert log, names  # the first tries did time out
        assert (loaded.label, loaded.share, loaded.rewards, loaded.label_correct, loaded.clusters) == (
            quiet.label, quiet.share, quiet.rewards, quiet.label_correct, quiet.clusters), names
        assert loaded.timeouts == 0 and loaded.complete and loaded.retried == len(log)
    assert quiet.timeouts == 0 and quiet.retried == 0 and quiet.complete


def test_a_timeout_that_persists_is_reported_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    for names in (("verdict",), ("parsable",)):
        with Verifier(workers=1, timeout=20.0) as v:
            _timing_out(v, monkeypatch, first_only=False, names=names)
            r = majority_vote(README_RESPONSES, "NV", gold=README_GOLD, verifier=v)
            acc = label_accuracy([(README_RESPONSES, "NV", "", README_GOLD), ([fa("MC")], "QL", "", "\\boxed{MC}")], verifier=v)
        assert r.timeouts > 0 and not r.complete, names
        assert r.retried >= r.timeouts
        assert acc.timeouts == r.timeouts and acc.incomplete == 1
        assert acc.results[1].complete


@pytest.mark.slow
def test_readme_vote_is_the_same_beside_cpu_burners(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The TTRL example of docs/guides/train.md (once the README's) in fresh processes (default verifier, 5 s limit), quiet and with busy loops beside it."""
    import json
    import os
    import subprocess
    import sys

    src = REPO / "src"
    code = (
        "import json\nfrom studybench.methods import majority_vote\n"
        f"r = majority_vote({README_RESPONSES!r}, 'NV', gold={README_GOLD!r})\n"
        "print(json.dumps([r.label, r.share, r.rewards, r.label_correct, r.timeouts]))\n"
    )

    def vote(seed: str) -> list:  # type: ignore[type-arg]
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": seed, "STUDYBENCH_VERIFY_WARM": "1"}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=900)
        return json.loads(out.stdout.strip().splitlines()[-1])

    quiet = vote("0")
    assert quiet == ["\\boxed{3\\times10^{8}}", pytest.approx(2 / 3), [1.0, 1.0, 0.0], True, 0]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        loaded = [vote("1")]
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait(timeout=30)
    assert loaded == [quiet]
