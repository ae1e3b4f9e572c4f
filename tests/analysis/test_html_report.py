"""``studybench report RUN_DIR --html``: a self-contained page, rendered in headless Chromium (issue 12 item 6).

The Chromium tests open the page the way a person would (``file://``) and read the DOM after its
script ran (``--dump-dom``). The page's address fragment stands in for clicks: ``#open=UID`` opens a
parent, ``attempt=SEED_INDEX.ATTEMPT`` one of its attempts, ``filter=unsolved`` applies that filter.
They skip without a ``chromium`` binary unless ``$STUDYBENCH_REQUIRE_EXTRAS`` names ``chromium``.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _support import FIXTURES, parent, require_extra, required_extras, sub, write_set
from typer.testing import CliRunner

require_extra("analysis", "jinja2", "matplotlib", module_level=True)

from studybench.analysis.html import html_report, write_html_report  # noqa: E402
from studybench.cli import app  # noqa: E402
from studybench.evaluate import EvalSpec, run_eval  # noqa: E402
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server  # noqa: E402

FIXTURE = FIXTURES / "run_v010"
EVIL = ("<script>document.title='PWNED'</script></details></script><!--<script>document.title='PWNED2'</script>"
        "<img src=x onerror=\"document.title='PWNED3'\">")
SET = [parent(f"P{i}", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{3}", problem="Q2: again?")], problem="A block.") for i in range(2)]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if "chromium" in required_extras() or "all" in required_extras():
            pytest.fail("no chromium binary, but $STUDYBENCH_REQUIRE_EXTRAS says it is installed", pytrace=False)
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    return exe


def dump_dom(page: Path, tmp_path: Path, fragment: str = "") -> str:
    """The DOM of ``page`` after its scripts ran, as headless Chromium serialises it."""
    cmd = [_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", page.resolve().as_uri() + fragment]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    assert "<html" in out.stdout, out.stderr[-2000:]
    return out.stdout


def _element(dom: str, id_: str) -> str:
    """The element with ``id`` up to the next element of the same kind (enough for text checks)."""
    i = dom.index(f'id="{id_}"')
    return dom[i : dom.find('<details class="parent"', i + 1) if "p-" in id_ else len(dom)]


@pytest.fixture
def fixture_run(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", dst)
    man = json.loads((dst / "manifest.json").read_text())
    man["split"]["path"] = str(tmp_path / "moved" / "set.json")  # the test set is no longer where the run was made
    (dst / "manifest.json").write_text(json.dumps(man))
    return dst


@pytest.fixture
def evil_run(tmp_path: Path) -> Path:
    """A run whose model answers with markup meant to run a script or close the page's elements."""

    def model(body: dict[str, Any]) -> Reply:
        turn, _ = conversation_turn(body)
        return Reply(f"<think>plan {EVIL}</think>{EVIL}\nalert(1) as text: <script>alert(1)</script>\n"
                     f"Final Answer: \\boxed{{{('2', '3')[turn]}}}")

    f = write_set(tmp_path / "set.json", SET)
    with start_stub_server(model, model="stub-model") as srv:
        run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=2, seeds=[0]), tmp_path / "evil")
    return tmp_path / "evil"


class _Tags(HTMLParser):
    """The elements of a serialised DOM and any event-handler attributes on them."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.append(tag)
        self.handlers += [a for a, _ in attrs if a.startswith("on")]


def _data(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_the_page_is_self_contained_and_model_text_cannot_leave_the_data_blob(evil_run: Path) -> None:
    page = html_report(evil_run)
    assert "http://" not in page and "https://" not in page  # no resource is fetched from anywhere
    assert "<svg" in page and "<img" not in page.split('id="data"')[0]
    blob = page.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in blob and ">" not in blob  # a completion's </script> or <!-- cannot close or bend the element
    data = _data(page)
    turn = data["parents"][0]["at"][0][0][0]
    assert EVIL in turn["c"] and turn["th"] == f"<think>plan {EVIL}</think>" and turn["rc"] is True  # the text itself survives intact
    assert page.count("<script") == 2  # the data blob and the page's own script, nothing from the model


def test_without_the_test_set_the_page_still_shows_replies_and_verdicts(fixture_run: Path) -> None:
    page = html_report(fixture_run, allow_incomplete=True)  # the manifest's test-set path does not exist here
    assert "Problem texts and gold answers are unavailable" in page
    data = _data(page)
    assert data["testset"] is False and all("q" not in s for p in data["parents"] for s in p["subs"])
    assert any(t.get("rr") for p in data["parents"] for atts in p["at"] for att in atts for t in att)
    page2 = html_report(fixture_run, split_path=FIXTURE / "set.json", allow_incomplete=True)
    assert "unavailable" not in page2.split('id="data"')[0]
    assert all("q" in s and "g" in s for p in _data(page2)["parents"] for s in p["subs"])


def test_cli_writes_the_page(fixture_run: Path, tmp_path: Path) -> None:
    # the fixture run is incomplete (stale verdicts): its page only with --allow-incomplete, and then exit 1
    r = CliRunner().invoke(app, ["report", str(fixture_run), "--html"], catch_exceptions=False)
    assert r.exit_code == 2 and "incomplete run" in r.output and not (fixture_run / "report.html").exists()
    r = CliRunner().invoke(app, ["report", str(fixture_run), "--html", "--allow-incomplete"], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    assert (fixture_run / "report.html").is_file() and "report.html" in r.output
    out = tmp_path / "elsewhere.html"
    r = CliRunner().invoke(app, ["report", str(fixture_run), "--html-out", str(out), "--scoring", "strict", "--allow-incomplete"],
                           catch_exceptions=False)
    assert r.exit_code == 1, r.output
    assert _data(out.read_text())["scoring"] == "strict"
    r = CliRunner().invoke(app, ["report", str(tmp_path / "nope"), "--html"], catch_exceptions=False)
    assert r.exit_code != 0 and "error" in r.output


def test_chromium_shows_tables_a_drilldown_and_verdict_reasons(fixture_run: Path, tmp_path: Path) -> None:
    page = write_html_report(fixture_run, tmp_path / "r.html", split_path=FIXTURE / "set.json", allow_incomplete=True)
    dom = dump_dom(page, tmp_path, "#open=" + quote("Olympiad/2019/T3", safe="") + "&attempt=0.1")
    assert 'id="headline"' in dom and "Par@3" in dom and 'id="by-sub_discipline"' in dom and "Electromagnetism" in dom
    assert 'id="by-answer_type"' in dom and 'id="by-source"' in dom and "<svg" in dom
    opened = _element(dom, "p-3")
    assert opened.startswith('id="p-3" open=""')
    attempt = opened[opened.index('id="a-3-0-1"'):]
    assert attempt.startswith('id="a-3-0-1" open=""')
    # the conversation: system message, the user turn, the model's reply, the verdicts with reasons
    assert "You are an expert physicist" in attempt and '<div class="msg user">' in attempt
    assert "incorrect: slot 1 (EX): differs at a sample point" in attempt
    assert "FALSE: Scripted verdict." in attempt
    assert "\\frac{q}{4\\pi\\epsilon_0 r^2}" in attempt  # extracted answer, beside the gold
    # the other parents stay closed and unbuilt (lazy), and nothing else opened
    assert '<div class="pbody">' not in _element(dom, "p-0")


def test_chromium_filters_hide_solved_parents(fixture_run: Path, tmp_path: Path) -> None:
    page = write_html_report(fixture_run, tmp_path / "r.html", split_path=FIXTURE / "set.json", allow_incomplete=True)
    data = _data(page.read_text())
    solved = [p["solved"][0] for p in data["parents"]]
    assert any(solved) and not all(solved)
    dom = dump_dom(page, tmp_path, "#filter=unsolved")
    for i, s in enumerate(solved):
        head = re.search(rf'<details class="parent" id="p-{i}"[^>]*>', dom)
        assert head is not None and ('hidden=""' in head.group(0)) == s
    assert f"showing {solved.count(False)} of {len(solved)} parents" in dom
    dom = dump_dom(page, tmp_path, "#dis=1")
    shown = [i for i in range(len(solved)) if 'hidden=""' not in re.search(rf'id="p-{i}"[^>]*>', dom).group(0)]
    assert shown == [i for i, p in enumerate(data["parents"]) if p["dis"]] and shown
    dom = dump_dom(page, tmp_path, "#q=" + quote("Q-EX: the momentum"))
    assert "showing 1 of 4 parents" in dom


def test_chromium_renders_model_markup_as_text(evil_run: Path, tmp_path: Path) -> None:
    page = write_html_report(evil_run)
    title = re.search(r"<title>(.*?)</title>", page.read_text()).group(1)
    dom = dump_dom(page, tmp_path, "#open=" + quote("S//P0", safe="") + "&attempt=0.0")
    assert "PWNED" not in re.search(r"<title>(.*?)</title>", dom).group(1)
    assert re.search(r"<title>(.*?)</title>", dom).group(1) == title  # no script of the model ran
    tags = _Tags()
    tags.feed(dom)
    assert "img" not in tags.names and not tags.handlers  # no element of the model's markup was made
    assert tags.names.count("script") == 2
    replies = re.findall(r'<pre class="reply">(.*?)</pre>', dom, re.S)
    assert len(replies) == 2
    assert html.unescape(replies[0]).startswith(EVIL)  # shown exactly as the model wrote it
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in replies[0]
    # the folded full completion holds the reasoning, as text too
    assert html.escape("<think>plan", quote=False) in dom
    # '</details>' in the reply closed nothing: the attempt's verdict tables follow inside it
    attempt = dom[dom.index('id="a-0-0-0"'):dom.index('id="a-0-0-1"')]
    assert attempt.count('<table class="verdict">') == 2


def test_the_page_plots_pass_at_k_and_every_breakdown(fixture_run: Path) -> None:
    page = html_report(fixture_run, split_path=FIXTURE / "set.json", allow_incomplete=True)
    labels = re.findall(r'<svg role="img" aria-label="([^"]*)"', page)
    assert labels == ["pass@k curve, k = 1 to 3", "Par@3 and Sub@3 per sub-discipline", "Par@3 and Sub@3 per source",
                      "Sub@3 per answer type"] and page.count("<svg") == 4
    curve = page[page.index('aria-label="pass@k curve'):page.index("</svg>")]
    assert re.search(r'id="passk-(FillBetween)?PolyCollection_\d+"', curve)  # two seeds: the ±1 std band is drawn
    assert "Sub pass@k" in curve and "Par pass@k" in curve
    ids = re.findall(r'\bid="([^"]+)"', page.split('<script type="application/json"')[0])
    assert len(ids) == len(set(ids))  # the plots' element ids do not collide on the page
    assert page == html_report(fixture_run, split_path=FIXTURE / "set.json", allow_incomplete=True)  # deterministic, byte for byte
