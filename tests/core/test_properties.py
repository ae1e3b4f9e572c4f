"""Second, independent checks of the formulas everything else rests on (hypothesis against brute force).

- Par@k and Sub@k (PROTOCOL.md 3) against a set-based restatement, on random verdict grids, both for
  the metric functions and through a whole run directory (rows written, ``build_report`` read back,
  so the grid plumbing of the report is checked too);
- the resume rule (a stored turn is reused iff it has no error and its ``messages_digest`` is the
  digest of the conversation built from the final earlier replies of its attempt), stated
  declaratively and checked after random corruptions of a finished run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studybench.datasets import load_dataset
from studybench.evaluate import EvalSpec, RunScope, generate_turns, prepare_eval
from studybench.files import text_digest
from studybench.metrics import par_at_k, sub_at_k
from studybench.models import ChatRequest, ChatResult
from studybench.protocol import Artefacts, build_messages, messages_digest
from studybench.records import SubProblemRef
from studybench.report import build_report
from studybench.store import GenerationRow, RuleVerdictRow, rule_settings

# --------------------------------------------------------------------------- metrics


@st.composite
def grids(draw: Any) -> tuple[int, list[list[list[bool]]]]:
    k = draw(st.integers(1, 4))
    n_parents = draw(st.integers(1, 6))
    grid = [[draw(st.lists(st.booleans(), min_size=k, max_size=k)) for _ in range(draw(st.integers(1, 4)))]
            for _ in range(n_parents)]
    return k, grid


def brute_par(grid: list[list[list[bool]]], k: int) -> float:
    """A parent counts when the attempts solving each sub-problem share one attempt."""
    solved = 0
    for parent in grid:
        common = set(range(k))
        for sub in parent:
            common &= {a for a in range(k) if sub[a]}
        solved += bool(common)
    return 100.0 * solved / len(grid)


def brute_sub(grid: list[list[list[bool]]]) -> float:
    cells = [sub for parent in grid for sub in parent]
    return 100.0 * sum(True in sub for sub in cells) / len(cells)


@settings(max_examples=300, deadline=None)
@given(grids())
def test_par_and_sub_at_k_equal_their_brute_force(case: tuple[int, list[list[list[bool]]]]) -> None:
    k, grid = case
    assert par_at_k(grid, k) == brute_par(grid, k)
    assert sub_at_k(grid, k) == brute_sub(grid)


@st.composite
def run_grids(draw: Any) -> tuple[int, list[int], list[list[list[list[bool]]]]]:
    k = draw(st.integers(1, 3))
    n_subs = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    seeds = draw(st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True))
    per_seed = [[[draw(st.lists(st.booleans(), min_size=k, max_size=k)) for _ in range(n)] for n in n_subs] for _ in seeds]
    return k, seeds, per_seed


def _dataset(path: Path, n_subs: list[int]) -> None:
    parents = [{"source": "S", "year": "", "source_problem_id": f"P{i}", "problem": "stem", "answer": "", "answer_type": "",
                "type_sequence": "", "sub_problems": [{"problem_id": f"{i}.{j}", "problem": f"q{i}.{j}", "answer": "\\boxed{1}",
                                                        "answer_type": "NV", "type_sequence": ""} for j in range(n)]}
               for i, n in enumerate(n_subs)]
    path.write_text(json.dumps(parents))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(run_grids())
def test_the_report_of_a_run_equals_the_brute_force_of_its_verdicts(case: Any) -> None:
    k, seeds, per_seed = case
    n_subs = [len(p) for p in per_seed[0]]
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "set.json"
        _dataset(f, n_subs)
        plan = prepare_eval(EvalSpec(dataset=load_dataset(f), k=k, seeds=seeds), Path(tmp) / "run")
        store = plan.open_store()
        rows = list(plan.scope.turns())
        order = {(p.uid, s.problem_id): (i, j) for i, p in enumerate(plan.scope.parents) for j, s in enumerate(p.subs())}
        for key, _ in reversed(rows):  # any order: the report must place every row by its key
            i, j = order[(key.parent, key.sub_id)]
            ok = per_seed[seeds.index(key.seed)][i][j][key.attempt]
            completion = f"Final Answer: \\boxed{{{1 if ok else 0}}}"
            store.append(GenerationRow(**key.to_dict(), completion=completion))
            store.append(RuleVerdictRow(**key.to_dict(), completion_digest=text_digest(completion), correct=ok,
                                        reason="correct" if ok else "incorrect", verifier=rule_settings(5.0)))
        store.close()
        rep = build_report(store)
    assert rep["par_at_k"]["per_seed"] == [round(brute_par(g, k), 4) for g in per_seed]
    assert rep["sub_at_k"]["per_seed"] == [round(brute_sub(g), 4) for g in per_seed]
    assert rep["turns"] == {"expected": len(rows), "failed": 0, "missing_judgements": 0}


# --------------------------------------------------------------------------- the resume rule


class Recorder:
    """A deterministic backend: the reply is a function of the conversation and of the variant."""

    name = "recorder"

    def __init__(self, variant: int) -> None:
        self.variant = variant
        self.asked: list[tuple[str, int]] = []

    async def complete(self, request: ChatRequest) -> ChatResult:
        assert request.ref is not None
        self.asked.append((request.ref.sub_id, request.seed or 0))
        h = hashlib.sha256((json.dumps(request.messages) + str(self.variant)).encode()).hexdigest()[:6]
        return ChatResult(f"reply {h} Final Answer: \\boxed{{{int(h, 16) % 3}}}")

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"backend": "recorder", "model": "recorder"}


CORRUPTIONS = st.sampled_from(["error", "other-completion", "other-digest", "keep"])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(1, 2), st.data())
def test_resume_reuses_exactly_the_turns_whose_conversation_still_holds(n_subs: list[int], k: int, data: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "set.json"
        _dataset(f, n_subs)
        plan = prepare_eval(EvalSpec(dataset=load_dataset(f), k=k, seeds=[0]), Path(tmp) / "run")
        scope: RunScope = plan.scope
        store = plan.open_store()
        asyncio.run(generate_turns(scope, store, Recorder(0), Artefacts()))
        # corrupt some stored turns, each in one way
        for key, row in list(store.latest_generations().items()):
            what = data.draw(CORRUPTIONS, label=f"{key.parent}/{key.sub_id}/{key.attempt}")
            if what == "error":
                store.append(row.model_copy(update={"error": "HTTP 500", "completion": ""}))
            elif what == "other-completion":
                store.append(row.model_copy(update={"completion": (row.completion or "") + " (edited)"}))
            elif what == "other-digest":
                store.append(row.model_copy(update={"messages_digest": "0" * 64}))
        before = store.latest_generations()
        backend = Recorder(1)
        asyncio.run(generate_turns(scope, store, backend, Artefacts()))
        after = store.latest_generations()
        store.close()
    # the declarative rule, turn by turn along each attempt, on the final rows
    expected_asked = []
    for parent, seed, attempt in scope.chains():
        previous: list[str | None] = []
        for i, sub in enumerate(parent.subs()):
            ref = SubProblemRef(parent, i, sub)
            key = scope.key(ref, seed, attempt)
            digest = messages_digest(build_messages(ref, previous, Artefacts()))
            final = after[key]
            assert final.error is None and final.messages_digest == digest  # every final row is consistent
            old = before[key]
            reusable = old.error is None and old.messages_digest == digest and old.completion is not None
            if reusable:
                assert final == old  # reused as it was
            else:
                expected_asked.append((sub.problem_id, final.request_seed))
            previous.append(final.completion)
    assert sorted(backend.asked) == sorted(expected_asked)
