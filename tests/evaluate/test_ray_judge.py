"""Rule judging on Ray (issue 16 item 2): a Ray Data pipeline of verifier actors gives the local verdicts.

One small local cluster (``ray.init(num_cpus=2)``) serves every test here, the only module that starts Ray,
so the test run starts it once (Ray starts in seconds, not milliseconds) and stops it after this module; :class:`RayVerifier` finds it initialised and leaves it running, as it does for any caller
that owns Ray.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import SHARED_DATA, require_data_file, require_extra

require_extra("ray", "ray", module_level=True)

from typer.testing import CliRunner  # noqa: E402

from studybench.cli import app  # noqa: E402
from studybench.evaluate.ray_judge import RayVerifier, ray_verify_many, ray_verify_responses  # noqa: E402
from studybench.verify import Verdict  # noqa: E402

DEV_PAIRS = SHARED_DATA / "verifier" / "dev_pairs.jsonl"
if os.environ.get("STUDYBENCH_DATA"):  # .../data/studybench -> .../data/verifier
    _alt = Path(os.environ["STUDYBENCH_DATA"]).parent / "verifier" / "dev_pairs.jsonl"
    DEV_PAIRS = _alt if _alt.is_file() else DEV_PAIRS

# an EQ whose symbolic check takes far longer than 2 ms (see tests/verify/test_sandbox.py)
SLOW_GOLD = [r"\frac{\rho_i T_i}{\rho_a T_a} = 1 + \frac{4 \gamma}{R_0 P_a} + \sqrt{\frac{2GM}{r}}\cos(\omega t) + \ln\frac{R_0}{a}"]
SLOW_PRED = [r"1 + \frac{4 \gamma}{R_0 P_a} + \sqrt{\frac{2GM}{r}}\cos(\omega t) + \ln\frac{R_0}{a} = \frac{\rho_i T_i}{\rho_a T_a} + 0"]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """One local two-CPU Ray cluster for this module, the only one that starts Ray (so once per test run),
    shut down after it: its idle processes would otherwise share the CPUs with every later test."""
    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no usage report over the network
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="warning", log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def _dev_rows(n: int) -> list[dict[str, Any]]:
    require_data_file(DEV_PAIRS, "the verifier dev pairs")
    rows = [json.loads(x) for x in DEV_PAIRS.read_text(encoding="utf-8").splitlines() if x.strip()]
    step = max(1, len(rows) // n)  # spread over the file: every answer type, not only the first gold's
    return rows[::step][:n]


def test_a_judgement_that_times_out_in_an_actor_is_incorrect_and_the_pipeline_goes_on(ray_cluster: Any) -> None:
    fast_ok = (["2.5"], ["2.5"], "NV", "")
    fast_mc = (["B"], ["B"], "MC", "")
    items: list[Any] = [
        (SLOW_GOLD, SLOW_PRED, "EQ", ""), fast_ok,  # each batch: a timeout, then an item judged after it
        (SLOW_GOLD, [*SLOW_PRED, "x"], "EQ", ""), fast_mc,
        ("only", "two"), fast_ok,  # malformed: an incorrect verdict
    ]
    remote = ray_verify_many(items, actors=2, batch_size=2, timeout=0.002)
    # what a local Verifier(timeout=0.002).verify_many(items) gives (tests/verify/test_sandbox.py: the slow EQ overruns 2 ms)
    assert remote == [
        Verdict(False, "incorrect: timed out", tuple(SLOW_PRED)),
        Verdict(True, "correct: same normalised string", ("2.5",)),
        Verdict(False, "incorrect: timed out", (*SLOW_PRED, "x")),
        Verdict(True, "correct: same normalised string", ("B",)),
        Verdict(False, "incorrect: bad input (ValueError)", ()),
        Verdict(True, "correct: same normalised string", ("2.5",)),
    ]
    assert ray_verify_many([], timeout=0.002) == []
    assert ray_cluster.is_initialized()  # the caller's cluster is left running


def test_verify_file_with_ray_writes_what_local_judging_writes(ray_cluster: Any, tmp_path: Path) -> None:
    src = tmp_path / "pairs.jsonl"  # 60 real dev pairs, spread over the file (every answer type)
    src.write_text("".join(json.dumps(r) + "\n" for r in _dev_rows(60)), encoding="utf-8")
    runner = CliRunner()
    # a generous per-verification timeout: on a loaded machine one side timing out would differ by load, not by path
    slow = ["--timeout", "120"]
    local = runner.invoke(app, ["verify-file", str(src), "-o", str(tmp_path / "local.jsonl"), "--workers", "2", *slow])
    assert local.exit_code == 0, local.output
    remote = runner.invoke(app, ["verify-file", str(src), "-o", str(tmp_path / "ray.jsonl"), "--ray", "--workers", "2", *slow])
    assert remote.exit_code == 0, remote.output
    assert (tmp_path / "ray.jsonl").read_text(encoding="utf-8") == (tmp_path / "local.jsonl").read_text(encoding="utf-8")
    out = [json.loads(x) for x in (tmp_path / "ray.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(out) == 60 and {r["correct"] for r in out} == {True, False}
    assert "60 rows verified" in remote.output


def _verdicts(run: Path) -> list[tuple[Any, ...]]:
    rows = [json.loads(x) for x in (run / "judgements.jsonl").read_text(encoding="utf-8").splitlines()]
    return [(r["parent"], r["sub_id"], r["seed"], r["attempt"], r["completion_digest"], r["extracted"], r["correct"],
             r["reason"], r["verifier"]) for r in rows]


def test_eval_only_verify_with_ray_judges_a_run_directory_as_locally(ray_cluster: Any, data_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["eval", "--split", "transfer", "--data-dir", str(data_dir), "--model", "reference", "--reference-mode", "solution",
            "--limit", "4", "-k", "1", "--seeds", "1"]
    gen = runner.invoke(app, [*base, "--out", str(tmp_path / "local"), "--only-generate"])
    assert gen.exit_code == 0, gen.output
    shutil.copytree(tmp_path / "local", tmp_path / "ray")
    local = runner.invoke(app, [*base, "--out", str(tmp_path / "local"), "--only-verify", "--verify-workers", "2", "--verify-timeout", "120"])
    assert local.exit_code == 0, local.output
    remote = runner.invoke(app, [*base, "--out", str(tmp_path / "ray"), "--only-verify", "--ray", "--verify-workers", "2", "--verify-timeout", "120"])
    assert remote.exit_code == 0, remote.output
    want = _verdicts(tmp_path / "local")
    assert want and _verdicts(tmp_path / "ray") == want
    assert {v[6] for v in want} == {True, False}  # the solutions replay gives both verdicts
    rep = [json.loads((tmp_path / d / "report.json").read_text(encoding="utf-8")) for d in ("local", "ray")]
    assert rep[0]["sub_at_k"] == rep[1]["sub_at_k"] and rep[0]["par_at_k"] == rep[1]["par_at_k"]


def test_ray_verifier_is_a_rule_verifier_that_leaves_a_callers_cluster_running(ray_cluster: Any) -> None:
    with RayVerifier(actors=1, timeout=5.0) as rv:
        assert rv.verify_responses([]) == [] and rv.verify_many([]) == []
    assert ray_verify_responses([]) == []
    assert ray_cluster.is_initialized()
    with pytest.raises(ValueError, match="actors"):
        RayVerifier(actors=0)
    with pytest.raises(ValueError, match="timeout"):
        RayVerifier(timeout=float("nan"))


@pytest.mark.parametrize("args", [
    ["verify-file", "IN", "-o", "OUT", "--ray"],
    ["verify-file", "IN", "-o", "OUT", "--ray-address", "127.0.0.1:6379"],
    ["eval", "--split", "transfer", "--model", "reference", "--only-verify", "--ray", "--out", "OUT"],
])
def test_ray_without_the_extra_is_a_one_line_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"gold": "1", "response": "1", "answer_type": "NV"}) + "\n", encoding="utf-8")
    args = [str(src) if a == "IN" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "pip install 'studybench[ray]'" in r.output and "--ray needs the 'ray' extra" in r.output
    assert not (tmp_path / "out").exists()


def test_an_unreachable_ray_address_fails_fast_with_one_line(tmp_path: Path) -> None:
    import socket
    import subprocess

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"gold": "1", "response": "1", "answer_type": "NV"}) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    r = subprocess.run([sys.executable, "-m", "studybench.cli", "verify-file", str(src), "-o", str(tmp_path / "out"),
                        "--ray-address", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, r.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in r.stderr and "ray start --head" in r.stderr
    assert not (tmp_path / "out").exists()
