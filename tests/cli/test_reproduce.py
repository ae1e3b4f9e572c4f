"""Reproducible runs (issue 16, item 5): the manifest's environment block, `report` warning about other
installed versions, `studybench reproduce RUN_DIR --out NEW` and `compare`'s table of manifest differences.

A stub model and a stub judge (local OpenAI-compatible servers on 127.0.0.1) stand in for real endpoints;
the stub serves vLLM's ``GET /version`` once a version is set.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.evaluate import EvalError, EvalSpec, reproduction_spec, run_eval
from studybench.store import (
    Manifest,
    RunStore,
    installed_versions,
    manifest_differences,
    version_mismatches,
)
from studybench.store.provenance import data_commit, merge_environment, server_version
from studybench.testing.stub_judge import answers_of, judge_reply_fn
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

SET = [
    {"source": "S", "year": "", "source_problem_id": f"P{i}", "problem_type": ["Mechanics", "Optics"][i % 2],
     "problem": f"Stem {i}.", "answer": "", "answer_type": "", "type_sequence": "",
     "sub_problems": [
         {"problem_id": "a", "problem": f"item-{i}-a: the speed?", "answer": f"\\boxed{{{i}}}", "answer_type": "NV",
          "type_sequence": ""},
         {"problem_id": "b", "problem": f"item-{i}-b: the paraphrase?", "answer": "\\boxed{\\text{it increases}}",
          "answer_type": "QL", "type_sequence": ""}]}
    for i in range(5)
]


def model_reply(body: dict[str, Any]) -> Reply:
    """Deterministic in the request: right or wrong by the request seed; a paraphrase the rules reject."""
    _, last = conversation_turn(body)
    i = int(last.split("item-", 1)[1].split("-", 1)[0])
    if "-b:" in last:
        return Reply("Working.\nFinal Answer: \\boxed{\\text{the entropy goes up}}")
    odd = int(hashlib.sha256(str(body.get("seed")).encode()).hexdigest(), 16) % 2
    return Reply(f"Working.\nFinal Answer: \\boxed{{{i + 100 * odd}}}")


def oracle(x: dict[str, str]) -> bool:
    return answers_of(x["student_answers"]) == ["\\text{the entropy goes up}"] or (
        answers_of(x["student_answers"]) == answers_of(x["reference_answers"]))


def cli(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def manifest(run: Path) -> Manifest:
    return RunStore(run).read_manifest()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One original run (stub model and judge, a system prompt, sampling, slice, limit, k, seeds), made once."""
    tmp = tmp_path_factory.mktemp("reproduce")
    f = tmp / "set.json"
    f.write_text(json.dumps(SET), encoding="utf-8")
    prompt = tmp / "prompt.txt"
    prompt.write_text("You are a careful physicist. End with Final Answer: \\boxed{...}.", encoding="utf-8")
    prices = tmp / "prices.json"
    prices.write_text(json.dumps({"models": {"stub-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}}))
    with pytest.MonkeyPatch.context() as mp, start_stub_server(model_reply, model="stub-model") as model_srv, \
            start_stub_server(judge_reply_fn(oracle), model="stub-judge") as judge_srv:
        mp.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp / "cache"))
        mp.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
        mp.delenv("STUDYBENCH_DATA_COMMIT", raising=False)
        model_srv.control({"op": "version", "version": "0.9.1-stub"})
        run = tmp / "run"
        res = cli("eval", "--split", f, "--model", "stub-model", "--base-url", model_srv.base_url,
                  "--slice", "1:", "--limit", "3", "-k", "2", "--seed-list", "5,9", "--temperature", "0.3",
                  "--top-p", "0.9", "--max-tokens", "512", "--system-prompt", prompt, "--verify-workers", "1",
                  "--judge-model", "stub-judge", "--judge-base-url", judge_srv.base_url, "--label", "method=base",
                  "--pricing", prices, "--out", run)
        assert res.exit_code == 0, res.output
        yield {"tmp": tmp, "set": f, "prompt": prompt, "run": run, "model": model_srv, "judge": judge_srv,
               "requests": _bodies(model_srv)}


def _bodies(srv: Any) -> list[str]:
    return sorted(json.dumps(b, sort_keys=True) for b in srv.requests)


def _clone(base: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The original run with its own copies of the test set and the prompt (tests may change them)."""
    f, prompt, run = tmp / "set.json", tmp / "prompt.txt", tmp / "run"
    shutil.copy(base["set"], f)
    shutil.copy(base["prompt"], prompt)
    shutil.copytree(base["run"], run)
    obj = json.loads((run / "manifest.json").read_text())
    obj["split"]["path"], obj["artefacts"]["paths"]["system_prompt"] = str(f), str(prompt)
    (run / "manifest.json").write_text(json.dumps(obj))
    return {**base, "tmp": tmp, "set": f, "prompt": prompt, "run": run}


def test_reproduce_reruns_the_same_configuration_and_compare_shows_no_difference(base: dict[str, Any], tmp_path: Path) -> None:
    run, new = base["run"], tmp_path / "new"
    base["model"].reset_stats()
    res = cli("reproduce", run, "--out", new, "--verify-workers", "1")
    assert res.exit_code == 0, res.output
    assert f"studybench compare {run} {new}" in res.output and "the same configuration and environment" in res.output
    assert _bodies(base["model"]) == base["requests"]  # the very same requests: model, messages, seeds, sampling
    old, rep = manifest(run), manifest(new)
    assert manifest_differences(old, rep) == []
    assert (rep.k, rep.seeds, rep.selection, rep.labels) == (2, [5, 9], old.selection, {"method": "base"})
    assert rep.verifier is not None and rep.verifier.mode == "rule+llm" and rep.active_judge is not None
    assert rep.active_judge["model"] == "stub-judge"
    assert rep.reproduces == {"run_dir": str(run.absolute()), "created": old.created, "overrides": {}, "data_change": None}
    assert rep.environment is not None and rep.environment["server_version"] == "0.9.1-stub"
    out = cli("compare", run, new, "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["manifest_differences"] == []
    for c in data["comparisons"]:  # a deterministic backend: the same verdict on every item
        assert c["table"]["a_only"] == c["table"]["b_only"] == 0 and c["diff"] == 0
    assert 0 < data["comparisons"][0]["acc_a"] < 1  # the runs are not trivially all right or all wrong
    # the run's recorded prices price the reproduction too
    costs = [json.loads((r / "report.json").read_text())["cost"]["total"] for r in (run, new)]
    assert costs[0] is not None and costs[0] > 0 and costs[1] == pytest.approx(costs[0])


def test_reproduce_checks_artefacts_and_records_overrides(base: dict[str, Any], tmp_path: Path) -> None:
    env = _clone(base, tmp_path)
    run, new = env["run"], tmp_path / "new"
    moved, copy = tmp_path / "moved.txt", tmp_path / "copy.json"
    shutil.move(env["prompt"], moved)
    res = cli("reproduce", run, "--out", new)
    assert res.exit_code == 2 and "--system-prompt" in res.output and "missing" in res.output
    env["prompt"].write_text("Another prompt.", encoding="utf-8")
    res = cli("reproduce", run, "--out", new)
    assert res.exit_code == 2 and "content differs" in res.output and not new.exists()
    res = cli("reproduce", run, "--out", run)
    assert res.exit_code == 2 and "not the run itself" in res.output
    shutil.move(env["set"], copy)
    with start_stub_server(model_reply, model="stub-model") as other:  # a new server, the files moved
        other.control({"op": "version", "version": "0.10.0-stub"})
        res = cli("reproduce", run, "--out", new, "--base-url", other.base_url, "--system-prompt", moved,
                  "--split", copy)
        assert res.exit_code == 0, res.output
        assert other.count > 0 and "manifest differences" in res.output
    rep = manifest(new)
    assert rep.reproduces is not None and rep.reproduces["overrides"] == {
        "base_url": other.base_url, "split": str(copy), "system_prompt": str(moved)}
    assert rep.artefacts["paths"] == {"system_prompt": str(moved.absolute())}
    diffs = {f: (a, b) for f, a, b in manifest_differences(manifest(run), rep)}
    assert diffs == {"split.path": (str(env["set"]), str(copy)),
                     "backend.base_url": (base["model"].base_url, other.base_url),
                     "environment.server_version": ("0.9.1-stub", "0.10.0-stub")}
    out = cli("compare", run, new)
    assert out.exit_code == 0 and "manifest differences" in out.stdout and "0.10.0-stub" in out.stdout


def test_reproduce_refuses_a_changed_test_set_unless_allowed(base: dict[str, Any], tmp_path: Path) -> None:
    env = _clone(base, tmp_path)
    run = env["run"]
    env["set"].write_text(json.dumps(SET[:-1] + [{**SET[-1], "problem": "Stem changed."}]), encoding="utf-8")
    res = cli("reproduce", run, "--out", tmp_path / "new")
    assert res.exit_code == 2
    assert "test-set file" in res.output and "changed since the run was made" in res.output
    assert "--allow-data-change" in res.output and not (tmp_path / "new").exists()
    res = cli("reproduce", run, "--out", tmp_path / "new", "--allow-data-change")
    assert res.exit_code == 0, res.output
    change = manifest(tmp_path / "new").reproduces["data_change"]  # type: ignore[index]
    assert change["from"] == manifest(run).split.sha256 and change["to"] != change["from"]


def test_report_warns_when_installed_versions_differ(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET[:2]), encoding="utf-8")
    run = tmp_path / "run"
    assert cli("eval", "--split", f, "-k", "1", "--seeds", "1", "--out", run).exit_code == 0
    res = cli("report", run)
    assert res.exit_code == 0 and "warning" not in res.stderr
    obj = json.loads((run / "manifest.json").read_text())
    obj["environment"]["packages"]["sympy"] = "0.0.1"
    obj["environment"]["packages"]["pint"] = None
    (run / "manifest.json").write_text(json.dumps(obj))
    res = cli("report", run)
    assert res.exit_code == 0
    have = installed_versions()
    assert "warning:" in res.stderr and f"sympy 0.0.1 (run) vs {have['sympy']} (installed)" in res.stderr
    assert f"pint null (run) vs {have['pint']} (installed)" in res.stderr
    assert "warning" not in res.stdout and "mpmath" not in res.stderr
    res = cli("leaderboard", run, "--no-significance")
    assert f"{run}: installed package versions differ" in res.stderr


def test_environment_is_recorded_and_resumes_keep_each_invocations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET[:2]), encoding="utf-8")
    monkeypatch.setenv("STUDYBENCH_DATA_COMMIT", "v1.2-data")
    run = tmp_path / "run"
    with start_stub_server(model_reply, model="m") as srv:
        spec = dict(split=str(f), model="m", base_url=srv.base_url, k=1, seeds=[0], verify_workers=1)
        run_eval(EvalSpec(**spec), run)
        env = manifest(run).environment
        assert env is not None and env["server_version"] is None  # no /version route: never an error
        assert env["packages"] == installed_versions() and env["data_commit"] == "v1.2-data"
        assert env["python"] and env["platform"] and env["machine"] and env["python_implementation"]
        srv.control({"op": "version", "version": "0.9.1"})
        run_eval(EvalSpec(**{**spec, "seeds": [0, 1]}), run)  # resumed on an upgraded server
        m = manifest(run)
        assert m.environment == env  # the first invocation's, kept
        assert [e["server_version"] for e in m.later_environments] == ["0.9.1"]
        run_eval(EvalSpec(**{**spec, "seeds": [0, 1]}), run)  # the same environment again: nothing added
        assert len(manifest(run).later_environments) == 1
        run_eval(EvalSpec(**{**spec, "seeds": [0, 1], "only_verify": True}), run)  # no server asked: not a change
        assert len(manifest(run).later_environments) == 1


def test_old_manifests_load_and_gain_an_environment_on_resume(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET[:1]), encoding="utf-8")
    run = tmp_path / "run"
    run_eval(EvalSpec(split=str(f), k=1, seeds=[0], verify_workers=1), run)
    obj = json.loads((run / "manifest.json").read_text())
    for key in ("environment", "later_environments", "reproduces"):
        obj.pop(key)
    old = Manifest.parse(obj)
    assert old.environment is None and old.later_environments == [] and version_mismatches(old) == []
    assert Manifest.parse({**obj, "environment": "junk", "later_environments": [1, {"python": "3"}]}).later_environments == [
        {"python": "3"}]
    first, later = merge_environment(old, {"python": "3.11", "packages": {}})
    assert first is None and later == [{"python": "3.11", "packages": {}}]


def test_data_commit_from_a_git_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STUDYBENCH_DATA_COMMIT", raising=False)
    sha, sha2 = "a" * 40, "b" * 40
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "refs" / "heads" / "main").write_text(sha + "\n")
    data = repo / "data" / "deep"
    data.mkdir(parents=True)
    split = data / "set.json"
    split.write_text("[]")
    assert data_commit(split) == sha
    (repo / ".git" / "refs" / "heads" / "main").unlink()  # after `git gc`: only in packed-refs
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha2} refs/heads/main\n")
    assert data_commit(split) == sha2
    wt = tmp_path / "wt"  # a worktree: .git is a file naming its gitdir, refs live in the common dir
    (repo / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "wt" / "HEAD").write_text(sha + "\n")
    (repo / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'wt'}\n")
    (wt / "set.json").write_text("[]")
    assert data_commit(wt / "set.json") == sha
    monkeypatch.setenv("STUDYBENCH_DATA_COMMIT", "release-2025")
    assert data_commit(split) == "release-2025"
    monkeypatch.delenv("STUDYBENCH_DATA_COMMIT")
    assert data_commit(Path("<memory:x>")) is None and data_commit(None) is None


def test_server_version_probe_is_best_effort(monkeypatch: pytest.MonkeyPatch) -> None:
    with start_stub_server(model="m") as srv:
        assert server_version(srv.base_url) is None  # 404
        srv.control({"op": "version", "version": "0.9.1"})
        assert server_version(srv.base_url) == "0.9.1" and server_version(srv.base_url + "/") == "0.9.1"
        assert server_version(srv.base_url.replace("://", "://user:s3cret@") + "?api_key=k") == "0.9.1"
        srv.control({"op": "version", "version": "x" * 500})
        assert server_version(srv.base_url) is None  # not a plausible version string
        assert srv.count == 0  # the probe is not a chat request
    assert server_version("http://127.0.0.1:9/v1", timeout=0.5) is None  # nothing listening
    import httpx

    asked: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(httpx, "get", lambda url, **kw: asked.append((url, kw)) or httpx.Response(404))
    server_version("https://user:s3cret@host.example:8443/v1?api_key=k")
    assert asked == [("https://host.example:8443/version", {"timeout": 2.0, "follow_redirects": False})]


def test_reproduction_spec_refuses_what_it_cannot_rebuild(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="not a run directory"):
        reproduction_spec(tmp_path)
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET[:1]), encoding="utf-8")
    run = tmp_path / "run"
    prompt = tmp_path / "p.txt"
    prompt.write_text("Be brief.", encoding="utf-8")
    run_eval(EvalSpec(split=str(f), k=1, seeds=[0], verify_workers=1, reference_mode="solution", playbook=prompt), run)
    rep = reproduction_spec(run)
    assert rep.spec.uses_reference and rep.spec.reference_mode == "solution" and rep.spec.k == 1
    assert rep.spec.playbook == prompt.absolute()
    obj = json.loads((run / "manifest.json").read_text())
    del obj["artefacts"]["paths"]  # a manifest from before paths were recorded: the command line names the file
    obj["command"] = ["studybench", "eval", f"--playbook={prompt}", "--out", str(run)]
    (run / "manifest.json").write_text(json.dumps(obj))
    assert reproduction_spec(run).spec.playbook == prompt
    obj["backend"] = {"backend": "mine", "model": "x"}
    (run / "manifest.json").write_text(json.dumps(obj))
    with pytest.raises(EvalError, match="'mine' backend"):
        reproduction_spec(run)


def test_reproduce_takes_a_budget_and_resumes(base: dict[str, Any], tmp_path: Path) -> None:
    run, new = base["run"], tmp_path / "capped"
    res = cli("reproduce", run, "--out", new, "--verify-workers", "1", "--concurrency", "1", "--max-total-tokens", "1")
    assert res.exit_code == 3, res.output
    assert "--max-total-tokens" in res.output
    first = len(list(RunStore(new).generation_log.rows()))
    assert 0 < first < len(list(RunStore(run).generation_log.rows()))
    res = cli("reproduce", run, "--out", new, "--verify-workers", "1")
    assert res.exit_code == 0, res.output
    assert json.loads((new / "report.json").read_text())["sub_at_k"] == json.loads((run / "report.json").read_text())["sub_at_k"]
