"""The rehearsal of docs/guides/rehearse.md: turns retried after transient failures are counted in every output.

The stub server fails requests as a script says; the backend retries them. The console of ``eval``
and of ``report``, report.md, report.json and the HTML page say how many turns were retried, how many
requests that cost and how many turns failed all the same (before, only generations.jsonl showed it).
Generated over a script whose retries succeed and one where a turn fails after its retries.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.report import retries_line
from studybench.testing.stub_server import Fault, start_stub_server

RULES = [{"match": "dropped from rest", "reply": "Final Answer: \\boxed{2.02\\,\\mathrm{s}}"},
         {"match": "angular frequency", "reply": "Final Answer: \\boxed{\\sqrt{k/m}}"},
         {"match": "period", "reply": "Final Answer: \\boxed{\\text{True}} \\boxed{3.14\\,\\mathrm{s}}"}]
SCRIPTS: dict[str, tuple[list[tuple[str, int | None]], tuple[int, int, int]]] = {
    # (match, times) of HTTP 503 faults; (retried turns, extra requests, failed after the retries)
    "retried": ([("dropped from rest", 1), ("angular frequency", 1)], (2, 2, 0)),
    "failed after retries": ([("angular frequency", None)], (1, 1, 1)),
}


def _my_set(tmp_path: Path) -> Path:
    return write_set(tmp_path / "my_set.json", [
        parent("Ex 2.3", source="MyBook", year="2026", problem="A stone is dropped from rest from 20 m.",
               answer="\\boxed{2.02\\,\\mathrm{s}}", answer_type="NV"),
        parent("Ex 4.1", [sub("Ex 4.1(a)", "\\boxed{\\sqrt{\\frac{k}{m}}}", "EX", problem="(a) Find the angular frequency."),
                          sub("Ex 4.1(b)", "\\boxed{\\text{True}} \\boxed{3.14\\,\\mathrm{s}}", "TUP", type_sequence="TF,NV",
                              problem="(b) Is the period independent of the amplitude, and what is it?")],
               source="MyBook", year="2026", problem="A mass m hangs from a spring of stiffness k.")])


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_every_output_counts_the_retried_turns(case: str, tmp_path: Path) -> None:
    faults, (retried, extra, failed) = SCRIPTS[case]
    run = tmp_path / "rehearsal"
    with start_stub_server({"rules": RULES, "default": "Final Answer: \\boxed{0}"}) as srv:
        for match, times in faults:
            srv.fault_when(match, Fault("status", status=503, retry_after=0), times)
        res = CliRunner().invoke(app, ["eval", "--split", str(_my_set(tmp_path)), "--model", "stub", "--base-url", srv.base_url,
                                       "-k", "1", "--seeds", "1", "--max-retries", "1", "--concurrency", "1",
                                       "--out", str(run)], catch_exceptions=False)
    assert res.exit_code == (1 if failed else 0), res.output
    assert f"generated 3 turns (0 reused, {retried} retried, {failed} failed)" in res.output  # this pass's own count
    rows = [json.loads(x) for x in (run / "generations.jsonl").read_text().splitlines()]
    assert sum(r["attempts"] > 1 for r in rows) == retried and sum(r["attempts"] - 1 for r in rows) == extra
    turns = json.loads((run / "report.json").read_text())["turns"]
    assert (turns["retried"], turns["extra_requests"], turns["failed_after_retries"], turns["failed"]) == (retried, extra, failed, failed)
    line = retries_line({"turns": turns})
    assert line == (f"Retries: {retried} of 3 turns {'was' if retried == 1 else 'were'} retried after a transient failure "
                    f"({extra} more request{'s' if extra != 1 else ''}); {failed} failed after the retries"
                    f"{' (they count as failed turns)' if failed else ''}.")
    report = CliRunner().invoke(app, ["report", str(run)], catch_exceptions=False)
    outputs = {"eval console": res.output, "report console": report.output, "report.md": (run / "report.md").read_text()}
    try:
        from studybench.analysis.html import html_report

        outputs["html"] = html.unescape(html_report(run, allow_incomplete=True))
    except ImportError:  # the analysis extra is not installed
        pass
    for name, text in outputs.items():
        assert line in " ".join(text.split()), name


def test_a_run_without_retries_reads_as_before(tmp_path: Path) -> None:
    run = tmp_path / "ref"
    res = CliRunner().invoke(app, ["eval", "--split", str(_my_set(tmp_path)), "--model", "reference", "-k", "1", "--seeds", "1",
                                   "--out", str(run)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((run / "report.json").read_text())
    assert not {"retried", "extra_requests", "failed_after_retries"} & set(rep["turns"])
    assert "(0 reused, 0 failed)" in res.output  # the generation line as before
    assert retries_line(rep) is None and "Retries:" not in res.output and "Retries:" not in (run / "report.md").read_text()


@pytest.mark.parametrize("turns", [{}, {"retried": 0}, {"retried": True}, {"retried": "2"}, {"retried": -1}])
def test_no_line_without_a_positive_count(turns: dict[str, Any]) -> None:
    assert retries_line({"turns": {"expected": 3, **turns}}) is None
