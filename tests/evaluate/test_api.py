"""The evaluation as a library (studybench.evaluate): what "From Python" in docs/guides/evaluate.md shows,
settings refused with the field named, and the LLM judge over a finished run — all in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub, write_set

from studybench.evaluate import EvalError, EvalSpec, add_llm_verdicts, prepare_eval, run_eval
from studybench.llm_judge import LLMJudgeSpec
from studybench.testing.stub_judge import answers_of, judge_reply_fn
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

SET = [parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{\\text{it stops}}", "QL", problem="Q2: what happens?")],
              problem="A block.")]


def model(body: dict[str, Any]) -> Reply:
    _, last = conversation_turn(body)
    return Reply("Final Answer: \\boxed{2}" if "Q1" in last else "Final Answer: \\boxed{\\text{it comes to rest}}")


@pytest.fixture
def test_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    f = write_set(tmp_path / "set.json", SET)
    return f


def test_run_eval_against_a_stub_server(test_set: Path, tmp_path: Path) -> None:
    with start_stub_server(model, model="stub-model") as srv:
        spec = EvalSpec(split=str(test_set), model="stub-model", base_url=srv.base_url, k=2, seeds=[0, 1])
        result = run_eval(spec, tmp_path / "run")
        assert srv.count == 2 * 2 * 2  # sub-problems x k x seeds
        assert (result.par_at_k, result.sub_at_k) == (0.0, 50.0)  # the QL paraphrase is not a rule match
        assert result.generation is not None and result.generation.generated == 8
        again = run_eval(spec, tmp_path / "run")  # resumes: nothing asked again
        assert srv.count == 8 and again.generation is not None and again.generation.reused == 8
    assert json.loads((tmp_path / "run" / "report.json").read_text())["sub_at_k"]["mean"] == 50.0


def test_llm_verdicts_on_a_finished_run(test_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with start_stub_server(model, model="stub-model") as srv:
        run_eval(EvalSpec(split=str(test_set), model="stub-model", base_url=srv.base_url, k=1, seeds=[0]), run)
    accept = judge_reply_fn(lambda x: answers_of(x["student_answers"]) == ["\\text{it comes to rest}"])
    with start_stub_server(accept, model="stub-judge") as jsrv:
        res = add_llm_verdicts(run, LLMJudgeSpec(model="stub-judge", base_url=jsrv.base_url))
        assert jsrv.count == 1 and res.llm.verdicts == {"TRUE": 1}
        assert res.report["par_at_k"]["mean"] == 100.0 and res.report["scoring_used"] == "liberal"
        again = add_llm_verdicts(run)  # the run's own judge and timeout: no request, nothing verified again
        assert jsrv.count == 1 and again.llm.reused == 1 and again.rule.verified == 0
        slower = add_llm_verdicts(run, verify_timeout=9.0)  # other rule settings: every turn verified again
        assert slower.rule.verified == 2 and jsrv.count == 1
    assert json.loads((run / "manifest.json").read_text())["verifier"]["timeout"] == 9.0


@pytest.mark.parametrize(
    "settings,field",
    [
        ({"k": 0}, "k"),
        ({"temperature": float("nan")}, "temperature"),
        ({"seeds": [1, 1]}, "seeds"),
        ({"parent_slice": "1-2"}, "parent_slice"),
        ({"preset": "warm"}, "preset"),
        ({"verify_timeout": 0}, "verify_timeout"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_spec_errors_name_the_field(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(EvalError) as e:
        EvalSpec(**settings)  # the constructor validates (EvalSpec.create is the same)
    assert e.value.field == field and str(e.value).startswith(field)


def test_spec_takes_the_cli_names_too() -> None:
    assert EvalSpec(slice="5:8").parent_slice == EvalSpec(parent_slice="5:8").parent_slice == "5:8"
    with pytest.raises(EvalError) as e:
        EvalSpec(limit=0)
    assert e.value.field == "limit"


def test_an_explicit_data_dir_is_the_only_place_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "good"
    good.mkdir()
    write_set(good / "transfer.json", SET)
    monkeypatch.setenv("STUDYBENCH_DATA", str(good))
    assert prepare_eval(EvalSpec(split="transfer", k=1, seeds=[0]), tmp_path / "a").dataset.path == good / "transfer.json"
    with pytest.raises(EvalError, match="data_dir: .*nowhere is not a directory") as e:
        prepare_eval(EvalSpec(split="transfer", data_dir=tmp_path / "nowhere", k=1, seeds=[0]), tmp_path / "b")
    assert e.value.field == "data_dir" and str(good) not in str(e.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EvalError, match="cannot find the transfer set in .*empty .*only place looked") as e:
        prepare_eval(EvalSpec(split="transfer", data_dir=empty, k=1, seeds=[0]), tmp_path / "b")
    assert e.value.field == "split" and str(good) not in str(e.value)


def test_openai_backend_needs_an_endpoint(test_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EvalError) as e:
        prepare_eval(EvalSpec(split=str(test_set), model="m"), tmp_path / "run")
    assert e.value.field == "base_url"
    assert not (tmp_path / "run").exists()


def test_rule_llm_mode_without_a_judge_is_refused(test_set: Path, tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="needs a judge"):
        prepare_eval(EvalSpec(split=str(test_set), verifier_mode="rule+llm"), tmp_path / "run")


def test_run_eval_inside_a_running_event_loop(test_set: Path, tmp_path: Path) -> None:
    """A notebook has a loop running already: the synchronous API still works there."""
    import asyncio

    async def notebook_cell() -> Any:
        return run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0]), tmp_path / "run")

    result = asyncio.run(notebook_cell())
    assert result.report is not None and result.report["turns"]["expected"] == 2


class EchoBackend:
    """A user's own backend (the ChatBackend protocol): answers every sub-problem with 2."""

    name = "echo"

    async def complete(self, request: Any) -> Any:
        from studybench.models import ChatResult

        return ChatResult("Final Answer: \\boxed{2}")

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"backend": "echo", "model": "echo-model"}


def test_a_custom_backend_names_the_run_and_is_recorded(test_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0]), backend=EchoBackend())
    assert result.run_dir == Path("runs") / f"echo-model-{test_set.stem}"
    man = json.loads((result.run_dir / "manifest.json").read_text())
    assert man["backend"] == {"backend": "echo", "model": "echo-model"}
    assert result.sub_at_k == 50.0  # 2 is right for the NV sub-problem, not for the QL one


def test_llm_verdicts_on_a_run_made_from_memory(tmp_path: Path) -> None:
    from studybench.datasets import Dataset
    from studybench.records import Parent

    ds = Dataset.from_parents([Parent.model_validate(p) for p in SET], name="mem")
    run = tmp_path / "run"
    run_eval(EvalSpec(dataset=ds, k=1, seeds=[0]), run, backend=EchoBackend())
    with start_stub_server(judge_reply_fn(lambda x: True), model="stub-judge") as jsrv:
        with pytest.raises(EvalError, match="cannot find the test set"):
            add_llm_verdicts(run, LLMJudgeSpec(model="stub-judge", base_url=jsrv.base_url))
        res = add_llm_verdicts(run, LLMJudgeSpec(model="stub-judge", base_url=jsrv.base_url), dataset=ds)
    assert res.llm.verdicts == {"TRUE": 1} and res.report["sub_at_k"]["mean"] == 100.0


def test_a_refused_judge_leaves_the_run_its_judge(test_set: Path, tmp_path: Path) -> None:
    from studybench.llm_judge import LLMJudgeConfigError
    from studybench.testing.stub_server import Fault

    run = tmp_path / "run"
    with start_stub_server(judge_reply_fn(lambda x: True), model="judge-a") as ja:
        first = run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0], judge=LLMJudgeSpec(model="judge-a", base_url=ja.base_url)),
                         run, backend=EchoBackend())
    assert first.sub_at_k == 100.0
    with start_stub_server(judge_reply_fn(lambda x: True), model="judge-b") as jb:
        jb.fault_when(".", Fault("status", status=401), times=None)
        with pytest.raises(LLMJudgeConfigError):
            run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0], judge=LLMJudgeSpec(model="judge-b", base_url=jb.base_url,
                                                                                     max_retries=0)), run, backend=EchoBackend())
    man = json.loads((run / "manifest.json").read_text())
    assert man["verifier"]["judge"]["model"] == "judge-a"
    assert build_report_of(run)["sub_at_k"]["mean"] == 100.0


def build_report_of(run: Path) -> dict[str, Any]:
    from studybench.report import build_report

    return build_report(run)
