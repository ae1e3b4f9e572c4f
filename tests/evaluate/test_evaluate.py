"""The evaluation passes: scheduling, resume rules and verdict bookkeeping (in-process, no network)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from _support import parent, sub, write_set

from studybench.datasets import load_dataset
from studybench.evaluate import EvalSpec, RunScope, add_rule_verdicts, generate_turns, prepare_eval
from studybench.models.base import ChatRequest, ChatResult
from studybench.protocol import Artefacts
from studybench.report import write_report
from studybench.store import RunStore, rule_settings
from studybench.verify import Verdict, extract_pair

DATA = [parent("P1", [sub("a", "\\boxed{1}", problem="first"), sub("b", "\\boxed{2}", problem="second")], problem="stem"),
        parent("P2", problem_type="Mechanics and Waves", problem="single", answer="\\boxed{3}", answer_type="NV")]


class ScriptedBackend:
    """Answers gold for attempt-0 requests, 0 otherwise; can fail the first ``fail`` calls."""

    name = "scripted"

    def __init__(self, fail: int = 0, answer: str | None = None) -> None:
        self.calls: list[ChatRequest] = []
        self.fail = fail
        self.answer = answer

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.calls.append(request)
        if len(self.calls) <= self.fail:
            return ChatResult("", error="HTTP 500 after 3 attempts", attempts=3)
        ans = self.answer or request.ref.sub.boxes[0]
        return ChatResult(f"<think>hm</think>Final Answer: \\boxed{{{ans}}}", finish_reason="stop", usage={"completion_tokens": 5})

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"backend": "scripted", "model": "scripted"}


class EqVerifier:
    """Exact-string verifier standing in for the real one."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def verify_responses(self, items: list[Any]) -> list[tuple[list[str], Verdict]]:
        self.items.extend(items)
        out = []
        for gold_answer, response, at, ts, *_ in items:
            pair = extract_pair(gold_answer, response, at, ts)
            if isinstance(pair, Verdict):
                out.append(([], pair))
                continue
            gold, pred = pair
            out.append((pred, Verdict(gold == pred, "correct: same" if gold == pred else "incorrect: differs", tuple(pred))))
        return out


def _setup(tmp_path: Path, k: int = 2, seeds: list[int] | None = None) -> tuple[RunScope, RunStore]:
    f = write_set(tmp_path / "set.json", DATA)
    spec = EvalSpec(dataset=load_dataset(f), k=k, seeds=seeds or [0, 1], concurrency=3)
    plan = prepare_eval(spec, tmp_path / "run", backend=ScriptedBackend())
    store = plan.open_store()
    return plan.scope, store


def generate(scope: RunScope, store: RunStore, be: ScriptedBackend) -> Any:
    return asyncio.run(generate_turns(scope, store, be, Artefacts(), concurrency=3))


def verify(scope: RunScope, store: RunStore, v: EqVerifier) -> Any:
    return add_rule_verdicts(scope, store, v, rule_settings(5.0))


def test_generate_all_turns_then_reuse(tmp_path: Path) -> None:
    scope, store = _setup(tmp_path)
    be = ScriptedBackend()
    st = generate(scope, store, be)
    assert st.total == st.generated == 3 * 2 * 2 and st.failed == 0
    # second sub of P1 saw the first reply without its reasoning
    second = [c for c in be.calls if c.ref.sub_id == "b"]
    assert all(c.messages[2] == {"role": "assistant", "content": "Final Answer: \\boxed{1}"} for c in second)
    # seeds differ per (seed, attempt)
    assert len({c.seed for c in be.calls}) == len(be.calls)
    be2 = ScriptedBackend()
    st2 = generate(scope, store, be2)
    assert st2.generated == 0 and st2.reused == 12 and be2.calls == []


def test_failed_turns_are_recorded_then_retried_with_dependants(tmp_path: Path) -> None:
    scope, store = _setup(tmp_path, k=1, seeds=[0])
    be = ScriptedBackend(fail=10)
    st = generate(scope, store, be)
    assert st.failed == 3
    rows = list(store.generation_log.rows())
    assert all(r["error"] and r["completion"] == "" for r in rows)
    v = EqVerifier()
    js = verify(scope, store, v)
    assert js.verified == 3 and v.items == []  # failed turns never reach the verifier
    rep = write_report(store)
    assert rep["turns"]["failed"] == 3 and rep["par_at_k"]["mean"] == 0.0
    # re-run: every failed turn and the turn that depended on it are generated again
    be2 = ScriptedBackend()
    st2 = generate(scope, store, be2)
    assert st2.generated == 3 and st2.failed == 0
    verify(scope, store, EqVerifier())
    rep = write_report(store)
    assert rep["par_at_k"]["mean"] == 100.0 and rep["sub_at_k"]["mean"] == 100.0
    assert rep["turns"]["failed"] == 0 and rep["turns"]["missing_judgements"] == 0


def test_changed_earlier_reply_invalidates_later_turns(tmp_path: Path) -> None:
    scope, store = _setup(tmp_path, k=1, seeds=[0])
    generate(scope, store, ScriptedBackend())
    # overwrite P1/a with a different completion, as if regenerated elsewhere
    g = store.latest_generations()
    key = next(k for k in g if k.parent == "S//P1" and k.sub_id == "a")
    store.append(g[key].model_copy(update={"completion": "Final Answer: \\boxed{42}"}))
    be = ScriptedBackend()
    st = generate(scope, store, be)
    assert [c.ref.sub_id for c in be.calls] == ["b"] and st.reused == 2
    assert be.calls[0].messages[2]["content"] == "Final Answer: \\boxed{42}"


def test_judgements_follow_completion_digest(tmp_path: Path) -> None:
    scope, store = _setup(tmp_path, k=1, seeds=[0])
    generate(scope, store, ScriptedBackend(answer="0"))
    verify(scope, store, EqVerifier())
    rep = write_report(store)
    assert rep["sub_at_k"]["mean"] == 0.0
    assert verify(scope, store, EqVerifier()).verified == 0  # nothing new to judge
    # regenerate one turn with a different completion: its old verdict must not attach
    g = store.latest_generations()
    key = next(k for k in g if k.parent == "S//P2")
    store.append(g[key].model_copy(update={"completion": "Final Answer: \\boxed{3}"}))
    assert write_report(store)["turns"]["missing_judgements"] == 1
    assert verify(scope, store, EqVerifier()).verified == 1
    rep = write_report(store)
    assert rep["turns"]["missing_judgements"] == 0
    assert rep["sub_at_k"]["mean"] == round(100 / 3, 4)
    assert rep["breakdowns"]["answer_type"]["NV"]["sub_problems"] == 3
